"""CPU profile tests of the harness: Triton runs in its interpreter, problems at their smoke shapes."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RULES = REPO / "scienceslack.json"
CHEATS = HERE / "cheats"
ROUTES = HERE / "routes"


@pytest.fixture(scope="session")
def rules_path() -> Path:
    return RULES


def run_cli(
    *args: str, env_extra: dict | None = None, timeout: int = 240, wrapper: list[str] = ()
) -> subprocess.CompletedProcess:
    """The harness as a separate process, the way the check script runs it (under ``wrapper``'s command, if any)."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'protos'}", TRITON_INTERPRET="1", **(env_extra or {}))
    return subprocess.run(
        [*wrapper, sys.executable, "-m", "services.verifier.harness", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
