"""The ``{score, cost, subtasks}`` format, parsed one way (docs/ARCHITECTURE.md, "Metrics"), in two declared profiles:

- ``CHECK``: the metrics file a check writes (the file named by ``checks[].metrics`` in the rules; the harness's
  output). ``subtasks`` is a list of at most MAX_SUBTASKS events.proto Subtask objects, each with an ``id`` (and
  optionally its noise: ``speedup_interval`` [low, high] around its ``speedup``, ``candidate_rsd`` >= 0), and besides
  the Subtask fields a ``peak_device_bytes`` object (``{"judge": N, "candidate": N}``, whole numbers of bytes up to
  MAX_PEAK_BYTES: Subtask's peak_judge_bytes and peak_candidate_bytes); a subtask's ``not_judged`` (text) says the
  judge could not judge that problem, and why. The file may also say ``passed``, ``verified``, ``incomplete`` (a
  problem not judged: then never verified, whatever the file says), ``reasons``, ``not_verified_because``,
  ``runner``, ``torch``, ``triton`` and ``timing_protocol`` (one of contracts.rules.TIMING_PROTOCOLS). The verifier
  turns it into a CheckCompleted.
- ``REPORT``: a route's own report, ``routes/<route>/metrics.json``. ``subtasks`` is a list or an object of the
  route's choosing (recorded as is in MetricsReported); an optional ``report`` object says where, when and under
  which rules it was measured (``runner``, ``measured_at``, ``rules_commit``: one line of printable text each, at
  most MAX_REPORT_TEXT characters; the board shows them); other fields are the route's own and are not read.

Both: at most MAX_BYTES, a JSON object, ``score`` and ``cost`` required finite numbers >= 0 (not booleans),
``subtasks`` required, and optionally ``score_interval``: the score's noise as [low, high], finite, with
0 <= low <= score <= high (the board ties routes whose intervals overlap). A MetricsError names the first field that
is wrong.

VERIFIER_VERSION is the version of the verifier that writes and judges the CHECK profile: the harness stamps it into
the file and the verifier into CheckCompleted; the rules' ``benchmark.verifier_versions`` says which ones count.

Standard library only at import (the harness imports VERIFIER_VERSION); the CHECK profile's subtasks need the
generated protos, imported when that profile is parsed (by the verifier, which has them).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from contracts.rules import TIMING_PROTOCOLS

VERIFIER_VERSION = 2
# A check's exit status, which the verifier reads beside its metrics file: passed, a guardrail broken, could not run.
EXIT_PASSED, EXIT_BROKEN, EXIT_COULD_NOT_RUN = 0, 1, 2

MAX_BYTES = 4 * 1024 * 1024  # what a metrics file may put into the log; it is written by code that runs kernels
MAX_SUBTASKS = 64
MAX_REASONS = 50
MAX_TEXT = 500
MAX_REPORT_TEXT = 100
# A subtask's id is a problem id; its violations together stay within a byte budget, so that 64 subtasks of the
# worst case still fit CheckCompleted.subtasks' limit at append (contracts/limits.py) instead of being refused there.
MAX_SUBTASK_ID = 64
SUBTASK_VIOLATIONS_BYTES = 6 * 1024
NOT_JUDGED_BYTES = 1024  # a subtask's not_judged reason, in UTF-8 bytes (the same budget)
REPORT_FIELDS = ("runner", "measured_at", "rules_commit")
SUBTASK_NUMBERS = ("speedup", "reference_ms", "candidate_ms", "max_abs_error", "error_ratio", "floor_fraction")
INTERVAL_FIELDS = ("speedup_low", "speedup_high")  # Subtask's fields that speedup_interval fills
PEAK_SIDES = {"judge": "peak_judge_bytes", "candidate": "peak_candidate_bytes"}
MAX_PEAK_BYTES = 1 << 50  # a petabyte: more than any card holds, well inside a JSON number's exact integers


class MetricsError(ValueError):
    """The file is not what its profile requires; the message names the field."""


@dataclass(frozen=True)
class Profile:
    name: str
    subtasks: str  # "subtask list" (events.proto Subtask objects) or "list or object" (the route's own)
    reads_verdict: bool  # passed, verified, reasons, runner, ... are read


CHECK = Profile("check", "subtask list", reads_verdict=True)
REPORT = Profile("report", "list or object", reads_verdict=False)


@dataclass(frozen=True)
class Metrics:
    score: float
    cost: float
    subtasks: object  # CHECK: a tuple of events_pb2.Subtask; REPORT: the list or object as written
    passed: bool | None = None
    reasons: tuple[str, ...] = ()
    runner: str = ""
    torch_version: str = ""
    triton_version: str = ""
    verified: bool = False
    not_verified_because: tuple[str, ...] = ()
    incomplete: bool = False  # CHECK: a problem was not judged (its subtask says why)
    measured_at: str = ""  # REPORT: from its "report" object, as written
    rules_commit: str = ""
    score_low: float = 0.0  # the score's interval ("score_interval"); 0/0: none given
    score_high: float = 0.0
    timing_protocol: str = ""  # CHECK: the rules' timing protocol the check applied ("" when it does not say)


def cut(value) -> str:
    """Text from a metrics file, cut to MAX_TEXT characters."""
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _number(document: dict, name: str) -> float:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetricsError(f"{name}: must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise MetricsError(f"{name}: must be a finite number >= 0, got {value!r}")
    return float(value)


def _strings(document: dict, name: str) -> tuple[str, ...]:
    value = document.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MetricsError(f"{name}: must be a list of strings")
    return tuple(cut(v) for v in value[:MAX_REASONS])


def interval(value, around: float, name: str) -> tuple[float, float]:
    """An interval [low, high] around a value (a score, a speed-up): two finite numbers, 0 <= low <= around <= high;
    a MetricsError naming ``name`` otherwise."""
    if not isinstance(value, list) or len(value) != 2:
        raise MetricsError(f"{name}: must be [low, high], got {cut(json.dumps(value))}")
    low, high = value
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound):
            raise MetricsError(f"{name}: low and high must be finite numbers, got {cut(json.dumps(value))}")
    if not 0 <= low <= around <= high:
        raise MetricsError(f"{name}: must hold its value, 0 <= low <= {around!r} <= high, got [{low!r}, {high!r}]")
    return float(low), float(high)


def _score_interval(document: dict, score: float) -> dict[str, float]:
    if "score_interval" not in document:
        return {}
    low, high = interval(document["score_interval"], score, "score_interval")
    return {"score_low": low, "score_high": high}


def _timing_protocol(document: dict) -> str:
    protocol = _optional_string(document, "timing_protocol")
    if protocol and protocol not in TIMING_PROTOCOLS:
        raise MetricsError(f"timing_protocol: must be one of {', '.join(TIMING_PROTOCOLS)}, got {protocol!r}")
    return protocol


def _optional_string(document: dict, name: str) -> str:
    value = document.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MetricsError(f"{name}: must be a string, got {type(value).__name__}")
    return cut(value)


def _report(document: dict) -> dict[str, str]:
    """A report's account of its measurement: the optional "report" object's REPORT_FIELDS, each one line of text."""
    report = document.get("report", {})
    if not isinstance(report, dict):
        raise MetricsError(f"report: must be an object, got {type(report).__name__}")
    found = {}
    for name in REPORT_FIELDS:
        value = report.get(name, "")
        if not isinstance(value, str) or len(value) > MAX_REPORT_TEXT or not value.isprintable():
            raise MetricsError(
                f"report.{name}: must be one line of printable text, at most {MAX_REPORT_TEXT} characters"
            )
        found[name] = value
    return found


def _flag(document: dict, name: str, default):
    value = document.get(name, default)
    if value is not default and not isinstance(value, bool):
        raise MetricsError(f"{name}: must be true or false, got {value!r}")
    return value


def _within_bytes(texts: list[str], budget: int) -> list[str]:
    """The leading texts whose UTF-8 bytes fit ``budget``, then "… and N more" for the rest."""
    kept, used = [], 0
    for index, text in enumerate(texts):
        size = len(text.encode())
        if used + size > budget - 32:  # room for the summary line
            return [*kept, f"… and {len(texts) - index} more"]
        kept.append(text)
        used += size
    return kept


def _peak_bytes(item: dict, index: int) -> dict[str, int]:
    """A subtask's ``peak_device_bytes``, taken out of ``item``: {"judge": N, "candidate": N} as Subtask fields."""
    raw = item.pop("peak_device_bytes", {})
    if not isinstance(raw, dict) or set(raw) - set(PEAK_SIDES):
        raise MetricsError(f"subtasks[{index}].peak_device_bytes: must be an object with judge and candidate")
    found = {}
    for side, field in PEAK_SIDES.items():
        value = raw.get(side, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PEAK_BYTES:
            raise MetricsError(
                f"subtasks[{index}].peak_device_bytes.{side}: must be a whole number of bytes, 0 to {MAX_PEAK_BYTES}"
            )
        found[field] = value
    return found


def _check_subtasks(raw) -> tuple:
    from google.protobuf import json_format
    from kernelboard.v1 import events_pb2

    if not isinstance(raw, list):
        raise MetricsError(f"subtasks: must be a list, got {type(raw).__name__}")
    if len(raw) > MAX_SUBTASKS:
        raise MetricsError(f"subtasks: {len(raw)} entries, more than {MAX_SUBTASKS}")
    subtasks = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise MetricsError(f"subtasks[{index}]: must be an object")
        item = dict(item)
        for name in INTERVAL_FIELDS:  # one spelling of the noise: speedup_interval
            if name in item:
                raise MetricsError(f"subtasks[{index}].{name}: not read; write speedup_interval: [low, high]")
        noise = item.pop("speedup_interval", None)
        peaks = _peak_bytes(item, index)
        try:
            subtask = json_format.ParseDict(item, events_pb2.Subtask())
        except json_format.ParseError as err:
            raise MetricsError(f"subtasks[{index}]: {err}") from None
        for side, field in PEAK_SIDES.items():  # under any of its names: only peak_device_bytes says it
            if getattr(subtask, field):
                raise MetricsError(f"subtasks[{index}].{field}: give it as peak_device_bytes.{side}")
            setattr(subtask, field, peaks[field])
        if not subtask.id:
            raise MetricsError(f"subtasks[{index}].id: required")
        for name in SUBTASK_NUMBERS:
            if not math.isfinite(getattr(subtask, name)):
                raise MetricsError(f"subtasks[{index}].{name}: must be finite")
        if not (math.isfinite(subtask.candidate_rsd) and subtask.candidate_rsd >= 0):
            raise MetricsError(f"subtasks[{index}].candidate_rsd: must be a finite number >= 0")
        if noise is not None:
            name = f"subtasks[{index}].speedup_interval"
            subtask.speedup_low, subtask.speedup_high = interval(noise, subtask.speedup, name)
        subtask.id = subtask.id[:MAX_SUBTASK_ID]
        subtask.not_judged = subtask.not_judged.encode()[:NOT_JUDGED_BYTES].decode(errors="ignore")
        violations = _within_bytes([cut(v) for v in subtask.violations[:MAX_REASONS]], SUBTASK_VIOLATIONS_BYTES)
        del subtask.violations[:]
        subtask.violations.extend(violations)
        subtasks.append(subtask)
    return tuple(subtasks)


def parse(data: bytes | str, profile: Profile) -> Metrics:
    """Validate a metrics file of ``profile``; raises MetricsError naming the first problem."""
    size = len(data.encode() if isinstance(data, str) else data)
    if size > MAX_BYTES:
        raise MetricsError(f"the file is {size} bytes, over the {MAX_BYTES}-byte limit")
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MetricsError(f"not valid JSON: {err}") from None
    except RecursionError:
        raise MetricsError("not valid JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise MetricsError(f"must be a JSON object with score, cost and subtasks, got {type(document).__name__}")
    missing = [name for name in ("score", "cost", "subtasks") if name not in document]
    if missing:
        raise MetricsError(f"{', '.join(missing)}: required field missing")
    score, cost = _number(document, "score"), _number(document, "cost")
    raw = document["subtasks"]
    if profile.subtasks == "subtask list":
        subtasks = _check_subtasks(raw)
    elif isinstance(raw, list | dict):
        subtasks = raw
    else:
        raise MetricsError(f"subtasks: must be a list or an object, got {type(raw).__name__}")
    noise = _score_interval(document, score)
    if not profile.reads_verdict:
        return Metrics(score, cost, subtasks, **_report(document), **noise)
    passed, verified = _flag(document, "passed", None), _flag(document, "verified", False)
    incomplete = _flag(document, "incomplete", False) or any(s.not_judged for s in subtasks)
    return Metrics(
        score=score,
        cost=cost,
        subtasks=subtasks,
        passed=passed,
        reasons=_strings(document, "reasons"),
        runner=_optional_string(document, "runner"),
        torch_version=_optional_string(document, "torch"),
        triton_version=_optional_string(document, "triton"),
        verified=verified and not incomplete,
        not_verified_because=_strings(document, "not_verified_because"),
        timing_protocol=_timing_protocol(document),
        **noise,
        incomplete=incomplete,
    )
