"""scienceslack.json, the benchmark's rules: validation against scienceslack.schema.json and a typed, frozen view.

``load_rules`` always validates. jsonschema is imported inside the validation, so this module imports on machines
without it (the GPU harness reads rules a service already validated, through ``Rules.from_validated``).
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType

SCHEMA_PATH = Path(__file__).with_name("scienceslack.schema.json")
_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


class RulesError(ValueError):
    """scienceslack.json is not valid; ``errors`` lists every problem as ``field.path: what is wrong``."""

    def __init__(self, errors: list[str]):
        self.errors = tuple(errors)
        super().__init__("; ".join(self.errors))


@dataclass(frozen=True)
class Timing:
    statistic: str
    runs: int
    warmup_runs: int
    l2_flush: bool


@dataclass(frozen=True)
class Check:
    name: str
    script: str
    metrics: str
    time_limit_s: int


@dataclass(frozen=True)
class Partition:
    max_time_s: int
    default_time_s: int
    cpus: int
    mem_mb: int
    gpus: int


@dataclass(frozen=True)
class Rules:
    benchmark_version: int
    status: str
    kernels: tuple[str, ...]
    atol: float
    rtol: float
    random_inputs: int
    timing: Timing
    runner_gpu: str
    library_calls: str
    checks: tuple[Check, ...]
    partitions: Mapping[str, Partition]
    maintainers: tuple[str, ...]
    raw: Mapping = field(repr=False, compare=False)

    @classmethod
    def from_validated(cls, data: Mapping) -> "Rules":
        """The view of rules that ``validate`` has accepted; services go through ``load_rules`` instead."""
        bench, guard = data["benchmark"], data["guardrails"]
        return cls(
            benchmark_version=bench["version"],
            status=bench["status"],
            kernels=tuple(bench["kernels"]),
            atol=float(guard["atol"]),
            rtol=float(guard["rtol"]),
            random_inputs=guard["random_inputs"],
            timing=Timing(**guard["timing"]),
            runner_gpu=guard["runner_gpu"],
            library_calls=guard["library_calls"],
            checks=tuple(Check(**check) for check in data["checks"]),
            partitions=MappingProxyType(
                {name: Partition(**limits) for name, limits in data["limits"]["partitions"].items()}
            ),
            maintainers=tuple(data["maintainers"]),
            raw=data,
        )

    def check(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(
            f"no check named {name!r} in scienceslack.json (checks: {', '.join(c.name for c in self.checks)})"
        )


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def load_rules(text_or_dict: str | bytes | Mapping) -> Rules:
    """Parse (when given text) and validate scienceslack.json; raises RulesError listing every problem."""
    if isinstance(text_or_dict, Mapping):
        data = text_or_dict
    else:
        try:
            data = json.loads(text_or_dict)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RulesError([f"scienceslack.json: not valid JSON: {err}"]) from None
    validate(data)
    return Rules.from_validated(data)


def load_rules_file(path: str | Path) -> Rules:
    return load_rules(Path(path).read_bytes())


def validate(data) -> None:
    """Raise RulesError naming each field that breaks the schema or the rules' own consistency."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = [line for error in validator.iter_errors(data) for line in describe(error)]
    if not errors:
        errors = consistency_errors(data)
    if errors:
        raise RulesError(list(dict.fromkeys(errors)))


def consistency_errors(data: Mapping) -> list[str]:
    """What the schema cannot say: unique check names, a partition's default time within its maximum."""
    errors = []
    seen = set()
    for index, check in enumerate(data["checks"]):
        if check["name"] in seen:
            errors.append(f"checks[{index}].name: duplicate check name {check['name']!r}")
        seen.add(check["name"])
    for name, limits in data["limits"]["partitions"].items():
        if limits["default_time_s"] > limits["max_time_s"]:
            errors.append(
                f"limits.partitions.{name}.default_time_s: {limits['default_time_s']} exceeds "
                f"max_time_s {limits['max_time_s']}"
            )
    return errors


def field_path(parts) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def json_type(value) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def describe(error) -> list[str]:
    """Readable lines for a jsonschema error: the field path, then the problem in words."""
    path = list(error.absolute_path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "required":
        return [f"{field_path([*path, name])}: required field missing" for name in expected if name not in value]
    if kind == "additionalProperties":
        known = error.schema.get("properties", {})
        return [f"{field_path([*path, key])}: unknown key" for key in value if key not in known]
    if "propertyNames" in error.absolute_schema_path:
        return [f"{field_path([*path, value])}: {error.schema.get('x-error', error.message)}"]
    return [describe_value(error, path, kind, expected, value)]


def describe_value(error, path, kind, expected, value) -> str:
    if kind == "type":
        return f"{field_path(path)}: must be {_article(expected)} {expected}, got {json_type(value)} {value!r}"
    if kind == "enum":
        return f"{field_path(path)}: {value!r} is not one of {', '.join(map(str, expected))}"
    if kind == "contains":
        return f"{field_path(path)}: missing {expected.get('const')!r}"
    if kind == "minimum":
        return f"{field_path(path)}: {value!r} is less than the minimum of {expected}"
    if kind == "exclusiveMinimum":
        return f"{field_path(path)}: {value!r} must be greater than {expected}"
    if kind in ("minItems", "minProperties", "minLength") and expected == 1:
        return f"{field_path(path)}: must not be empty"
    if kind == "uniqueItems":
        repeated = sorted({str(item) for item in value if value.count(item) > 1})
        return f"{field_path(path)}: repeats {', '.join(repeated)}"
    if "x-error" in error.schema:
        return f"{field_path(path)}: {value!r} {error.schema['x-error']}"
    return f"{field_path(path)}: {error.message}"


def _article(type_name) -> str:
    return "an" if str(type_name)[:1] in "aeiou" else "a"
