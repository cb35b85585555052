"""Timing under verifier version 2's rule (BENCHMARK.md; docs/decisions/0001-verifier-version-2.md): the reference's,
before any route code runs (``time_reference``), and the candidate's, every call bounded by the judge's own clock
(``judge_timing``, the one entry point verify.py calls per problem).

Every timed call, the reference's and the candidate's alike, starts from an idle, L2-flushed device with fresh inputs
and is held at a gate while its host enqueues the start event, the call and the end event (gate.py): the events time
the device executing the call, not the host launching it. The reference's gate is the judge's own
(GpuKit.time_behind_gate); the candidate's calls go through gated.py, where the judge opens each gate and sees the
device's done word, bounds what the candidate reports, and checks secretly sampled calls. The CPU profile runs the
gate's CPU form: its times are the host's, launch included, and indicative only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from services.verifier.harness import draws
from services.verifier.harness.context import Broken, Context, Reference, run_model, secret_seed
from services.verifier.harness.device import Timing, release_memory
from services.verifier.harness.gated import time_candidate_gated
from services.verifier.harness.shared_memory import Region, layout

if TYPE_CHECKING:
    from services.verifier.harness.verify import Judge

FLOOR_MARGIN = 1.15  # read-only streams can beat the copy bandwidth the floors were measured with by a little
TIMING_POOL = 2  # input buffers rotated through the timed runs
COPY_BANDWIDTH_BYTES_PER_S = 4.18e12  # H200, BENCHMARK.md


# -- the reference, timed before any route code runs -------------------------------------------------------------------
def time_reference(ctx: Context, ref: Reference) -> Timing:
    """The reference timed the way the candidate is: fresh canaried contents into rotating buffers before every call,
    the L2 flushed, one call on an idle device."""
    slots: dict[int, list] = {}

    def refresh(i: int) -> list:
        return draws.into_slot(
            slots, i % TIMING_POOL, ref.problem, ref.problem_id, ctx.shape, ctx.device, secret_seed()
        )

    for i in range(ctx.warmup):
        run_model(ref.model, refresh(i))
    device_ms, fill_ms = [], []
    for i in range(ctx.runs):
        began = time.perf_counter()
        inputs = refresh(i)
        ctx.kit.sync()
        fill_ms.append((time.perf_counter() - began) * 1e3)
        ctx.kit.prepare_run()
        event, out = ctx.kit.time_behind_gate(lambda inputs=inputs: ref.model(*inputs))
        ref.output_bytes = out.numel() * out.element_size()
        ref.output_shape, ref.output_dtype = tuple(out.shape), out.dtype
        del out
        device_ms.append(event)
    ref.fill_ms = Timing.median(fill_ms)  # what the judge's own draw into a candidate's slot costs (check_prepare)
    ref.input_places = layout(inputs)
    return Timing(device_ms, device_ms)


# -- the candidate, timed and bounded by the judge's clock -------------------------------------------------------------
def judge_timing(judge: Judge):
    ctx = judge.ctx
    ref_timing = judge.ref.timing
    cand_timing = time_candidate(judge)
    ref_ms, cand_ms = Timing.median(ref_timing.device_ms), Timing.median(cand_timing.device_ms)
    result = judge.result
    result.reference_ms, result.candidate_ms = ref_ms, cand_ms
    result.speedup = ref_ms / cand_ms if cand_ms > 0 else 0.0
    result.reference_calls_ms, result.candidate_calls_ms = list(ref_timing.device_ms), list(cand_timing.device_ms)
    result.details.update(
        reference_spread_ms=[min(ref_timing.device_ms), max(ref_timing.device_ms)],
        candidate_spread_ms=[min(cand_timing.device_ms), max(cand_timing.device_ms)],
    )
    if ctx.kit.profile == "gpu":
        if ctx.shape == "full":
            floor_ms = judge.problem.H200_MS["floor"]
        else:
            floor_ms = judge.problem.floor_bytes(ctx.shape) / COPY_BANDWIDTH_BYTES_PER_S * 1e3
        result.floor_fraction = floor_ms / cand_ms if cand_ms > 0 else 0.0
        if ctx.shape == "full" and result.floor_fraction > FLOOR_MARGIN:
            result.flagged = True
            raise Broken(
                f"faster than the bandwidth floor: {cand_ms:.3f} ms is {result.floor_fraction:.2f}x faster than "
                f"the {floor_ms:.3f} ms floor (suspect class 7 (L2 reuse) or class 4 (caching))"
            )


def time_candidate(judge: Judge) -> Timing:
    """The candidate's timed calls through the gate (gated.py), its inputs in two regions the judge makes and the
    candidate maps as its slots (the judge draws each call's inputs there itself, once the call waits at its gate)."""
    # Both sides give back first what their allocators cached of the correctness calls: the regions come from
    # outside those caches, and with them kept a full-shape log_softmax ran an 80 GB card out of memory
    # (docs/decisions/0007).
    judge.ask({"op": "release"})
    release_memory(judge.ctx.device)
    regions = []
    try:
        for slot in range(TIMING_POOL):
            regions.append(share_inputs(judge, slot, judge.ref.input_places))
        return time_candidate_gated(judge, regions)
    finally:
        for region in regions:
            region.close()


def share_inputs(judge: Judge, slot: int, places: list[dict]) -> Region:
    """Memory for one timed slot's inputs, made by the judge and mapped by the candidate as that slot."""
    region = Region.create(places, judge.ctx.device)
    try:
        judge.candidate.hand_over(region)
        judge.ask({"op": "inputs", "slot": slot, "size": region.size, "places": places})
    except BaseException:
        region.close()
        raise
    return region
