"""The judge's comparisons of a candidate's output with its own reference's: the output as received, whether it matches
within the rules' tolerances (and which cheat class a mismatch points to), its error, its fingerprint, and its
precision against a float64 oracle. Every comparison goes COMPARE_CHUNK elements at a time: a full-shape output is
gigabytes, and a temporary of its size ran an 80 GB card out of memory (docs/decisions/0007)."""

import copy
import math
import time

import torch

from kernels.problems.memory import ORACLE_SLICE_BYTES
from services.verifier.harness import integrity, memory
from services.verifier.harness.context import run_model
from services.verifier.harness.device import POISON

PRECISION_RATIO_BOUND = 4.0  # candidate error vs the float64 oracle over the reference's own error
PRECISION_REL_ERROR_FLOOR = 1e-4  # ... and only when the error itself is TF32/bf16-like (fp32 kernels land far below)
REFERENCE_ERROR_FLOOR = 1e-7  # denominator floor, for references that hit the oracle exactly
COMPARE_CHUNK = 1 << 28  # elements compared at a time
ORACLE_MARGIN_BYTES = 1 << 30  # what an unsliced oracle leaves free on the device beside its own float64 copies


def fingerprint(out: torch.Tensor) -> tuple:
    """Enough of an output to tell it again (the class 4 explanation): its float64 sum and 64 spread elements."""
    flat = out.reshape(-1)
    size = flat.numel()
    # Integer positions: float32 ones round past the end from 2^24 elements (log_softmax's output has 1.6e9).
    picks = flat[torch.arange(64, device=flat.device) * (size - 1) // 63] if size else flat
    return (float(flat.sum(dtype=torch.float64)), tuple(picks.tolist()))


def chunk_pairs(out: torch.Tensor, expected: torch.Tensor):
    """Both tensors flattened, COMPARE_CHUNK elements at a time: a full-shape output is gigabytes, and a comparison's
    temporaries over all of it at once are several times that (an 80 GB card ran out: docs/decisions/0007)."""
    flat_out, flat_expected = out.reshape(-1), expected.reshape(-1)
    for start in range(0, flat_out.numel(), COMPARE_CHUNK):
        yield flat_out[start : start + COMPARE_CHUNK], flat_expected[start : start + COMPARE_CHUNK]


def max_abs_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute error over the elements where it is finite (0 for none): the metrics file's numbers must
    be finite, and NaN or infinite outputs are named, counted, in the mismatch they fail with."""
    worst = 0.0
    for o, e in chunk_pairs(out, expected):
        diff = (o - e).abs()
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            worst = max(worst, float(finite.max()))
    return worst


def error_sums(value: torch.Tensor, oracle: torch.Tensor) -> tuple[float, float]:
    """(||value - oracle||², ||oracle||²) in float64, chunked so that full shapes need no float64 copy of the output;
    ``value`` is brought chunk by chunk to where the oracle is."""
    v, o = value.reshape(-1), oracle.reshape(-1)
    chunk = 1 << 26
    num = den = 0.0
    for start in range(0, v.numel(), chunk):
        diff = v[start : start + chunk].to(o.device, torch.float64) - o[start : start + chunk]
        num += float((diff * diff).sum())
        den += float((o[start : start + chunk] ** 2).sum())
    return num, den


def header_fault(header: dict, expected: torch.Tensor) -> str | None:
    """What the answer's header says is wrong with the output it describes (not a plain tensor, or not the
    reference's shape, dtype and device), or None."""
    meta = header.get("output") or {}
    if not meta.get("plain"):
        return (
            f"class 6 (patching the harness): candidate returned {str(meta.get('type'))[:60]}, not a plain torch.Tensor"
        )
    dtype = str(expected.dtype).removeprefix("torch.")
    shape, device = list(expected.shape), expected.device.type
    if meta.get("dtype") != dtype or meta.get("shape") != shape or meta.get("device") != device:
        return (
            f"class 2 (partial work or wrong result): output is {tuple(meta.get('shape') or ())} "
            f"{meta.get('dtype')} on {meta.get('device')}, the reference's {tuple(shape)} {dtype} on {device}"
        )
    return None


def received(header: dict, payload, expected: torch.Tensor, candidate, details: dict):
    """The candidate's output as a tensor on the judge's device, or a fault naming what is wrong with it; the time
    taken copying it out of the output region adds to ``details``' output_copy_s."""
    fault = header_fault(header, expected)
    if fault is not None:
        return None, fault
    nbytes = expected.numel() * expected.element_size()
    if nbytes == 0:
        return torch.empty_like(expected), None
    if header.get("shared") == nbytes:
        began = time.monotonic()
        out = torch.empty(expected.shape, dtype=expected.dtype, device=expected.device)
        candidate.take_output(out.reshape(-1).view(torch.uint8))
        details["output_copy_s"] = round(details.get("output_copy_s", 0.0) + time.monotonic() - began, 4)
        return out, None
    if payload is None or len(payload) != nbytes:  # a CPU timed call's output comes on the stamped channel
        return None, f"class 2 (partial work or wrong result): {len(payload or b'')} output bytes, not {nbytes}"
    out = torch.frombuffer(payload, dtype=torch.uint8).view(expected.dtype).reshape(expected.shape)
    return out.to(expected.device), None


def output_faults(out, expected: torch.Tensor, rules) -> str | None:
    """None when ``out`` matches ``expected`` within the rules' atol/rtol (NaN never passes); else what is wrong with
    it."""
    rtol, atol = rules.rtol, rules.atol
    if all(integrity.allclose(o, e, rtol, atol, False) for o, e in chunk_pairs(out, expected)):
        return None
    poisoned = sum(int((o == POISON).sum()) for o, _ in chunk_pairs(out, expected))
    if poisoned and not any(bool((e == POISON).any()) for _, e in chunk_pairs(out, expected)):
        return (
            f"class 1 (reused freed memory) or class 2 (partial work): {poisoned} of {out.numel()} output "
            "elements hold the poison the harness left in freed memory, i.e. memory the candidate never wrote"
        )
    bad = nans = infinite = 0
    for o, e in chunk_pairs(out, expected):
        bad += int((~torch.isclose(o, e, rtol=rtol, atol=atol)).sum())
        nans += int(integrity.isnan(o).sum())
        infinite += int(torch.isinf(o).sum())
    return (
        f"class 2 (partial work or wrong result): {bad} of {out.numel()} output elements outside atol "
        f"{atol}/rtol {rtol} (max abs error {max_abs_error(out, expected):.4g} over the finite ones, {nans} NaN, "
        f"{infinite} infinite)"
    )


def precision_fault(ref, inputs: list, out, expected, result) -> str | None:
    """Error against a float64 oracle, the candidate's over the reference's own, recorded in ``result``: the class 8
    violation, or None. The oracle is computed where it fits (``oracle_parts``)."""
    sums = {"candidate": [0.0, 0.0], "reference": [0.0, 0.0]}
    for model, part_inputs, rows in oracle_parts(ref, inputs, out):
        oracle = run_model(model, part_inputs)
        del part_inputs
        for name, value in (("candidate", out), ("reference", expected)):
            num, den = error_sums(value if rows is None else value[rows], oracle)
            sums[name][0] += num
            sums[name][1] += den
        del oracle
    candidate_error, reference_error = (math.sqrt(n) / max(math.sqrt(d), 1e-300) for n, d in sums.values())
    ratio = max(candidate_error, REFERENCE_ERROR_FLOOR) / max(reference_error, REFERENCE_ERROR_FLOOR)
    result.error_ratio = ratio
    result.details["candidate_rel_error"] = candidate_error
    result.details["reference_rel_error"] = reference_error
    if ratio > PRECISION_RATIO_BOUND and candidate_error > PRECISION_REL_ERROR_FLOOR:
        return (
            f"class 8 (lowered precision): error vs a float64 oracle is {ratio:.1f}x the reference's "
            f"(relative {candidate_error:.2e} vs {reference_error:.2e}), the level of TF32 or bf16 arithmetic"
        )
    return None


def oracle_parts(ref, inputs: list, out: torch.Tensor):
    """(the float64 model, its float64 inputs, the output rows they give or None for all) for each part of the oracle.

    In slices along the dims the problem declares the reference does not reduce over (its ORACLE_SLICES), each slice
    holding at most ORACLE_SLICE_BYTES of float64 copies; a problem that reduces over every element whole, on the
    judge's device where it fits beside what is held there now, else on the host. Made whole on the device, the float64
    copy of rms_norm's 7.5 GB input did not fit beside the rest on an 80 GB card (issue 42)."""
    slices = ref.problem.ORACLE_SLICES
    whole = 2 * (sum(_bytes(t) for t in inputs) + _bytes(out))
    whole += 2 * ref.problem.FORWARD_TEMPORARIES * max((_bytes(t) for t in inputs), default=0)
    if slices is not None and out.dim() > 0:
        model = copy.deepcopy(ref.model).to(dtype=torch.float64)
        whole_inputs = {i: _float64(t, out.device) for i, t in enumerate(inputs) if i not in slices}  # once
        count = out.shape[0]
        step = max(1, -(-count // max(1, -(-whole // ORACLE_SLICE_BYTES))))
        for start in range(0, count, step):
            rows = slice(start, min(start + step, count))
            part = [
                _float64(t.narrow(slices[i], start, rows.stop - start), out.device) if i in slices else whole_inputs[i]
                for i, t in enumerate(inputs)
            ]
            yield model, part, rows
        return
    free, _ = memory.free_bytes(out.device)
    place = out.device if whole + ORACLE_MARGIN_BYTES <= free else torch.device("cpu")
    model = copy.deepcopy(ref.model).to(device=place, dtype=torch.float64)
    yield model, [_float64(t, place) for t in inputs], None


def _bytes(tensor) -> int:
    return tensor.numel() * tensor.element_size() if isinstance(tensor, torch.Tensor) else 0


def _float64(value, device: torch.device):
    """An input as the oracle takes it: floating tensors in float64, every tensor on ``device``."""
    if not isinstance(value, torch.Tensor):
        return value
    return value.to(device, torch.float64) if value.is_floating_point() else value.to(device)
