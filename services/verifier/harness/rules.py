"""The guardrails the harness applies, read straight from scienceslack.json (no jsonschema on the GPU machine).

The service validates the whole file against the schema before a check starts; here we only pick the fields the
harness needs and fail with a message naming the field when one is missing or of the wrong type.
"""

import json
from dataclasses import dataclass
from pathlib import Path


class RulesFileError(Exception):
    """The rules file cannot be read or lacks a field the harness needs."""


@dataclass(frozen=True)
class HarnessRules:
    atol: float
    rtol: float
    random_inputs: int
    runs: int
    warmup_runs: int
    l2_flush: bool
    runner_gpu: str
    kernels: tuple[str, ...]
    benchmark_version: int


def _field(doc: dict, path: str, kind):
    value = doc
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise RulesFileError(f"rules: {path} is missing")
        value = value[part]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RulesFileError(f"rules: {path} must be {kind.__name__}, got {type(value).__name__}")
    return value


def load_harness_rules(path: str | Path) -> HarnessRules:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise RulesFileError(f"rules: cannot read {path}: {err}") from err
    rules = HarnessRules(
        atol=_field(doc, "guardrails.atol", float),
        rtol=_field(doc, "guardrails.rtol", float),
        random_inputs=_field(doc, "guardrails.random_inputs", int),
        runs=_field(doc, "guardrails.timing.runs", int),
        warmup_runs=_field(doc, "guardrails.timing.warmup_runs", int),
        l2_flush=_field(doc, "guardrails.timing.l2_flush", bool),
        runner_gpu=_field(doc, "guardrails.runner_gpu", str),
        kernels=tuple(_field(doc, "benchmark.kernels", list)),
        benchmark_version=_field(doc, "benchmark.version", int),
    )
    if rules.atol <= 0 or rules.rtol < 0:
        raise RulesFileError("rules: guardrails.atol must be > 0 and guardrails.rtol >= 0")
    if rules.random_inputs < 1 or rules.runs < 1 or rules.warmup_runs < 0:
        raise RulesFileError("rules: guardrails.random_inputs and timing.runs must be >= 1, warmup_runs >= 0")
    return rules
