"""What every step of judging one problem shares: the check's context, a problem's result, the reference the judge
built and timed, and the three ways a problem ends early (a broken guardrail, a candidate that died, a check that
cannot run here). Plain data and small helpers; the steps are verify.py's, timing.py's and compare.py's."""

import os
import secrets
from dataclasses import dataclass, field

import torch

from contracts.rules import Rules
from services.verifier.harness import draws, noise
from services.verifier.harness.device import CpuKit, GpuKit, Timing

PROBLEM_TIME_LIMIT_S = 300.0  # per problem, for everything the candidate is asked; KB_PROBLEM_TIME_LIMIT_S overrides
CPU_RUNS_CAP = 20  # the CPU profile's timing is indicative only; keep CI fast


def problem_time_limit_s() -> float:
    value = os.environ.get("KB_PROBLEM_TIME_LIMIT_S", "")
    try:
        return float(value) if float(value) > 0 else PROBLEM_TIME_LIMIT_S
    except ValueError:
        return PROBLEM_TIME_LIMIT_S


class CouldNotRun(Exception):
    """The check cannot run here (environment, rules, arguments): exit 2, no verdict on the route."""


class Broken(Exception):
    """A guardrail broke; the problem stops here with these reasons."""

    def __init__(self, *reasons: str):
        super().__init__("; ".join(reasons))
        self.reasons = list(reasons)


class CandidateDied(Exception):
    """The candidate process is gone or had to be killed; the message says what happened, naming the cap."""


@dataclass
class ProblemResult:
    id: str
    submitted: bool
    passed: bool = True
    speedup: float = 0.0
    reference_ms: float = 0.0
    candidate_ms: float = 0.0
    max_abs_error: float = 0.0
    error_ratio: float = 0.0
    floor_fraction: float = 0.0
    violations: list[str] = field(default_factory=list)
    flagged: bool = False
    details: dict = field(default_factory=dict)
    host_synced: bool = False  # forward synchronised its host: the gate opened on the judge's timeout (gated.py)
    reference_calls_ms: list[float] = field(default_factory=list)  # every timed call's time, for the noise
    candidate_calls_ms: list[float] = field(default_factory=list)
    speedup_interval: tuple[float, float] | None = None  # noise.speedup_interval, once judged
    not_judged: str = ""  # the judge's own failure on this problem, and why: never the route's, never ranked
    peak_judge_bytes: int = 0
    peak_candidate_bytes: int = 0

    def subtask(self) -> dict:
        """The fields of events.proto's Subtask message, the peaks as contracts/metrics.py reads them."""
        return {
            "id": self.id,
            "passed": self.passed,
            "submitted": self.submitted,
            "speedup": self.speedup,
            "reference_ms": self.reference_ms,
            "candidate_ms": self.candidate_ms,
            "max_abs_error": self.max_abs_error,
            "error_ratio": self.error_ratio,
            "floor_fraction": self.floor_fraction,
            "violations": list(self.violations),
            "flagged": self.flagged,
            **(
                {
                    "speedup_interval": [round(v, 6) for v in self.speedup_interval],
                    "candidate_rsd": round(noise.relative_spread(self.candidate_calls_ms), 6),
                }
                if self.speedup_interval
                else {}
            ),
            **({"host_synced": True} if self.host_synced else {}),
            **({"not_judged": self.not_judged} if self.not_judged else {}),
            "peak_device_bytes": {"judge": self.peak_judge_bytes, "candidate": self.peak_candidate_bytes},
        }


@dataclass
class Context:
    rules: Rules
    shape: str
    device: torch.device
    kit: GpuKit | CpuKit
    needs: dict = field(default_factory=dict)  # problem id -> its memory need (kernels/problems/memory.py)

    @property
    def runs(self) -> int:
        return self.rules.timing.runs if self.kit.profile == "gpu" else min(self.rules.timing.runs, CPU_RUNS_CAP)

    @property
    def warmup(self) -> int:
        return self.rules.timing.warmup_runs if self.kit.profile == "gpu" else min(self.rules.timing.warmup_runs, 2)


@dataclass
class Reference:
    problem_id: str
    problem: object
    model: torch.nn.Module
    param_seed: int
    timing: Timing | None = None
    output_bytes: int = 0  # the size of one output, the most a candidate's copy may hold
    fill_ms: float = 0.0  # drawing one timed call's inputs into buffers the judge holds (median), no route code about
    input_places: list[dict] = field(default_factory=list)  # the inputs' layout in a timed slot's region
    output_shape: tuple = ()  # one output's, as the reference returned it
    output_dtype: torch.dtype = torch.float32


def secret_seed() -> int:
    return secrets.randbits(63)


def draw(problem, problem_id: str, ctx: Context, seed: int, canaries: bool, into: list | None = None) -> list:
    return draws.draw(problem, problem_id, ctx.shape, ctx.device, seed, canaries, into)


def run_model(model, inputs: list):
    with torch.no_grad():
        return model(*inputs)
