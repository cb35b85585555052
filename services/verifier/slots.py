"""Where a verifier worker runs its checks (its slot: device, shapes, pinning) and the environment a check script
gets there. Apart from the worker so that a check can be run the service's way where the services' dependencies are
not installed (the GPU machine: bench/harness/service_path.py)."""

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from services.common.sandbox import Box
from services.verifier.harness.args import CPU_ENV

CODE_ROOT = Path(__file__).resolve().parents[2]  # the harness the check script runs is this installation's


@dataclass(frozen=True)
class Slot:
    """Where a worker runs its checks: the device, the harness's shapes, and the environment that pins it."""

    name: str
    device: str  # cpu | cuda
    shapes: str  # smoke | full
    env: Mapping[str, str] = field(default_factory=dict)


def gpu_indices() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def detect_slots(environ: Mapping[str, str]) -> list[Slot]:
    """KB_VERIFIER_DEVICE (cpu|cuda; default cuda when nvidia-smi lists a GPU), KB_VERIFIER_GPUS (e.g. "0,1"; default
    every GPU), KB_VERIFIER_SHAPES (default full on a GPU, smoke on the CPU)."""
    gpus = [g for g in environ.get("KB_VERIFIER_GPUS", "").split(",") if g.strip()] or gpu_indices()
    device = environ.get("KB_VERIFIER_DEVICE") or ("cuda" if gpus else "cpu")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"KB_VERIFIER_DEVICE must be cpu or cuda, not {device!r}")
    if device == "cuda" and not gpus:
        raise ValueError("KB_VERIFIER_DEVICE=cuda but no GPU found (nvidia-smi) and KB_VERIFIER_GPUS unset")
    shapes = environ.get("KB_VERIFIER_SHAPES") or ("full" if device == "cuda" else "smoke")
    if shapes not in ("full", "smoke"):
        raise ValueError(f"KB_VERIFIER_SHAPES must be full or smoke, not {shapes!r}")
    if device == "cpu":
        # Triton kernels run in its interpreter on a CPU-only verifier.
        return [Slot("cpu", "cpu", shapes, dict(CPU_ENV))]
    return [Slot(f"gpu{g.strip()}", "cuda", shapes, {"CUDA_VISIBLE_DEVICES": g.strip()}) for g in gpus]


def check_env(
    box: Box,
    slot: Slot,
    *,
    python: str,
    route_dir: str,
    metrics_path: str,
    rules_commit: str,
    check_id: str,
    check_name: str,
    sha: str,
) -> dict[str, str]:
    """The check script's whole environment (checks/verify.sbatch documents the KB_* it reads)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": box.inner_path("home"),
        "TMPDIR": box.inner_path("tmp"),
        "TRITON_CACHE_DIR": box.inner_path("home", ".triton"),
        "PYTHONPATH": f"{CODE_ROOT}:{CODE_ROOT / 'protos'}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "KB_PYTHON": python,
        "KB_NO_ENTRY_POINT": "1",  # python -m from the working copy, whose kernels/problems judge
        "KB_ROUTE_DIR": route_dir,
        "KB_METRICS": metrics_path,
        "KB_RULES": "scienceslack.json",
        "KB_RULES_COMMIT": rules_commit,
        "KB_SHAPES": slot.shapes,
        "KB_DEVICE": slot.device,
        "KB_CHECK_ID": check_id,
        "KB_CHECK_NAME": check_name,
        "KB_SHA": sha,
        **slot.env,
    }
