"""scienceslack.json, the benchmark's rules, read one way for everyone (docs/ARCHITECTURE.md, "Rules").

``parse`` validates against scienceslack.schema.json (beside this module) and returns the typed, frozen ``Rules``:
the benchmark card, the verifier versions it accepts, the guardrails, the checks, the Slurm limits and the
maintainers. It validates with jsonschema where it is installed (the services) and with the stdlib reader of the
same schema where it is not (the GPU harness and the check script run with stdlib and torch only; both in
contracts/schema_problems.py); both give the same Rules, or the same RulesError naming every field that is wrong
(tests/contracts/test_rules.py runs every case through both).

``read_card`` is the lenient reader for rules already in the log: the board shows, and ingest asks who may approve
next, from rules that were valid when approved, under whatever schema held then. It never raises.

``python -m contracts.rules metrics-file RULES SCRIPT`` prints the metrics file the check running SCRIPT writes
(checks/verify.sbatch asks it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType

from contracts import schema_problems

RULES_FILE = "scienceslack.json"
SCHEMA_PATH = Path(__file__).with_name("scienceslack.schema.json")


class RulesError(ValueError):
    """scienceslack.json is not valid; ``errors`` lists every problem as ``field.path: what is wrong``."""

    def __init__(self, errors: list[str]):
        self.errors = tuple(errors)
        super().__init__("; ".join(self.errors))


# The timing protocols a rules file may name in guardrails.timing.protocol: what one timed "run" measures. Rules that
# name none are version 1's (the field came with version 2), so the reader gives them COLD_HOST_LAUNCH.
COLD_HOST_LAUNCH = "cold-host-launch"
COLD_DEVICE_BLOCKING = "cold-device-blocking"
TIMING_PROTOCOLS = {
    COLD_HOST_LAUNCH: "each call from an idle, L2-flushed GPU, its host launch inside the CUDA events (version 1)",
    COLD_DEVICE_BLOCKING: "each call from an idle, L2-flushed GPU, enqueued behind a blocking kernel that is then "
    "released: the events measure the device executing the call (version 2; NVBench's cold measurement)",
}


@dataclass(frozen=True)
class Timing:
    statistic: str
    runs: int
    warmup_runs: int
    l2_flush: bool
    protocol: str = COLD_HOST_LAUNCH


@dataclass(frozen=True)
class Check:
    name: str
    script: str
    metrics: str
    time_limit_s: int
    partition: str = ""  # the runners' Slurm partition it runs on; "" runs it on the verifier's own host
    gres: str = ""  # what it asks of a GPU runner (sbatch --gres), e.g. gpu:1
    supersede: bool = False  # a route's newer push drops its still-queued checks of older commits

    @property
    def gpus(self) -> int:
        """GPUs its gres asks for (0: none)."""
        return int(self.gres.rsplit(":", 1)[1]) if self.gres else 0


@dataclass(frozen=True)
class Partition:
    max_time_s: int
    default_time_s: int
    cpus: int
    mem_mb: int
    gpus: int
    network: bool = False  # whether its jobs reach the network; off unless the rules say so


@dataclass(frozen=True)
class Rules:
    name: str
    task: str
    metric: str
    baseline: str
    score_rule: str
    benchmark_version: int
    verifier_versions: tuple[int, ...]
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
    def _from_valid(cls, data: Mapping) -> Rules:
        bench, guard = data["benchmark"], data["guardrails"]
        return cls(
            name=bench["name"],
            task=bench["task"],
            metric=bench["metric"],
            baseline=bench["baseline"],
            score_rule=bench["score_rule"],
            benchmark_version=bench["version"],
            verifier_versions=tuple(bench["verifier_versions"]),
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

    @property
    def runner_partitions(self) -> frozenset[str]:
        """The partitions checks run on: the maintainers' runners, closed to jobs (services/scheduler refuses them,
        Slurm's AllowAccounts too)."""
        return frozenset(check.partition for check in self.checks if check.partition)

    def check(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(
            f"no check named {name!r} in scienceslack.json (checks: {', '.join(c.name for c in self.checks)})"
        )

    def check_running(self, script: str) -> Check:
        """The check whose script is ``script`` (a path in the repository, or one ending with its name)."""
        for check in self.checks:
            if check.script == script or check.script.endswith("/" + script.rsplit("/", 1)[-1]):
                return check
        raise KeyError(f"no check runs {script!r} in scienceslack.json")


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def parse(text_or_dict: str | bytes | Mapping) -> Rules:
    """Parse (when given text) and validate scienceslack.json; raises RulesError listing every problem."""
    if isinstance(text_or_dict, Mapping):
        data = text_or_dict
    else:
        try:
            data = json.loads(text_or_dict)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RulesError([f"scienceslack.json: not valid JSON: {err}"]) from None
    validate(data)
    return Rules._from_valid(data)


def load_file(path: str | Path) -> Rules:
    try:
        text = Path(path).read_bytes()
    except OSError as err:
        raise RulesError([f"scienceslack.json: cannot read {path}: {err.strerror or err}"]) from None
    return parse(text)


def validate(data, *, use_jsonschema: bool | None = None) -> None:
    """Raise RulesError naming each field that breaks the schema or the rules' own consistency. ``use_jsonschema``:
    None uses it when installed; the tests force each reader."""
    if use_jsonschema is None:
        try:
            import jsonschema  # noqa: F401
        except ImportError:
            use_jsonschema = False
        else:
            use_jsonschema = True
    if use_jsonschema:
        problems = schema_problems.jsonschema_problems(schema(), data)
    else:
        problems = schema_problems.Reader(schema()).problems(data)
    errors = [line for problem in problems for line in schema_problems.describe(problem)]
    if not errors:
        errors = consistency_errors(data)
    if errors:
        raise RulesError(list(dict.fromkeys(errors)))


def consistency_errors(data: Mapping) -> list[str]:
    """What the schema cannot say: unique check names, a check's partition among the partitions and its GPUs within
    the partition's, a partition's default time within its maximum."""
    errors = []
    seen = set()
    partitions = data["limits"]["partitions"]
    for index, check in enumerate(data["checks"]):
        if check["name"] in seen:
            errors.append(f"checks[{index}].name: duplicate check name {check['name']!r}")
        seen.add(check["name"])
        partition = check.get("partition")
        if partition is not None and partition not in partitions:
            errors.append(
                f"checks[{index}].partition: {partition!r} is not one of limits.partitions ({', '.join(partitions)})"
            )
        elif "gres" in check and partition is None:
            errors.append(
                f"checks[{index}].gres: a check asks for GPUs only on a partition (checks[{index}].partition)"
            )
        elif "gres" in check:
            wanted, limit = int(check["gres"].rsplit(":", 1)[1]), partitions[partition]["gpus"]
            if wanted > limit:
                errors.append(
                    f"checks[{index}].gres: {check['gres']} asks for {wanted} GPUs, more than"
                    f" limits.partitions.{partition}.gpus ({limit})"
                )
    for name, limits in data["limits"]["partitions"].items():
        if limits["default_time_s"] > limits["max_time_s"]:
            errors.append(
                f"limits.partitions.{name}.default_time_s: {limits['default_time_s']} exceeds "
                f"max_time_s {limits['max_time_s']}"
            )
    return errors


# --- rules already approved: the lenient reader --------------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    """What rules in the log say, read without judging them: the benchmark card, the verifier versions accepted
    (empty: any), the guardrails flattened to (dotted name, JSON value) sorted, the status they set ("" when none)
    and the maintainers they name. ``error`` says why nothing could be read ("" when it could)."""

    name: str = ""
    task: str = ""
    metric: str = ""
    baseline: str = ""
    version: int = 0
    kernels: tuple[str, ...] = ()
    score_rule: str = ""
    verifier_versions: tuple[int, ...] = ()
    guardrails: tuple[tuple[str, str], ...] = ()
    status: str = ""
    maintainers: tuple[str, ...] = ()
    error: str = ""


def read_card(text: str | bytes) -> Card:
    """The card of rules as recorded (RulesApproved.rules_json, or the file at the tag). Never raises: rules that
    cannot be read give a Card whose ``error`` says why. Rules that name ``benchmark.verifier_version`` (one) rather
    than ``verifier_versions`` are read as the list of that one."""
    try:
        rules = json.loads(text)
        if not isinstance(rules, dict):
            raise ValueError("the rules are not a JSON object")
        benchmark = rules.get("benchmark") or {}
        if not isinstance(benchmark, dict):
            raise ValueError("benchmark: not an object")
        versions = benchmark.get("verifier_versions")
        if versions is None:
            versions = [] if benchmark.get("verifier_version") is None else [benchmark["verifier_version"]]
        if not isinstance(versions, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in versions):
            raise ValueError("benchmark.verifier_versions: not a list of integers")
        guardrails = rules.get("guardrails") or {}
        maintainers = rules.get("maintainers")
        status, version = benchmark.get("status"), benchmark.get("version")
        return Card(
            name=_text(benchmark.get("name")),
            task=_text(benchmark.get("task")),
            metric=_text(benchmark.get("metric")),
            baseline=_text(benchmark.get("baseline")),
            version=version if isinstance(version, int) and not isinstance(version, bool) else 0,
            kernels=tuple(_text(k) for k in benchmark.get("kernels") or ()),
            score_rule=_text(benchmark.get("score_rule")),
            verifier_versions=tuple(sorted(set(versions))),
            guardrails=tuple(sorted(_flatten(guardrails, ""))) if isinstance(guardrails, dict) else (),
            status=status if isinstance(status, str) else "",
            maintainers=tuple(m for m in maintainers if isinstance(m, str)) if isinstance(maintainers, list) else (),
        )
    except (ValueError, TypeError, AttributeError) as err:  # json.JSONDecodeError is a ValueError
        return Card(error=f"the rules could not be read: {err}")


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _flatten(value: dict, prefix: str):
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            yield from _flatten(item, f"{name}.")
        else:
            yield name, json.dumps(item, sort_keys=True)


DEFAULT_METRICS_FILE = "metrics.json"


def main(argv: list[str]) -> int:
    """``metrics-file RULES SCRIPT``: the metrics file of the check running SCRIPT. Rules that do not name one still
    get an answer, the default: the harness then writes its could-not-run verdict, naming the problem, there."""
    if len(argv) != 3 or argv[0] != "metrics-file":
        print("usage: python -m contracts.rules metrics-file RULES SCRIPT", file=sys.stderr)
        return 2
    try:
        print(load_file(argv[1]).check_running(argv[2]).metrics)
    except (RulesError, KeyError) as err:
        print(f"{argv[1]}: {err}; the metrics file is {DEFAULT_METRICS_FILE}", file=sys.stderr)
        print(DEFAULT_METRICS_FILE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
