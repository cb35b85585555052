"""What a check's Slurm job runs on the runner node Slurm chose: ``python -m services.verifier.runner BOX``.

The dispatcher (dispatch.py) prepared BOX on the verifier's host (a folder the node shares): the working copy, and
``run.json``, the script's command and whole environment and the sandbox it runs in, all decided by the verifier.
This runs it there exactly as a worker on the verifier's host would (services/common/sandbox.py: namespaces, no
capabilities, rlimits, the time limit; inside, the harness confines route code further), and writes ``finished.json``
(what the sandbox saw, and when it started and ended). It judges nothing: the verifier reads the box back.
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from services.common.sandbox import Box, Sandbox, SandboxConfig, isolation_available

SPEC_FILE = "run.json"
FINISHED_FILE = "finished.json"


def write_spec(
    box: Box, *, command, env, time_limit_s: int, sandbox: SandboxConfig, device: str, timing_protocol: str
) -> None:
    spec = {
        "command": list(command),
        "env": dict(env),
        "time_limit_s": time_limit_s,
        "inner": box.inner,
        "isolate": sandbox.isolate,
        "hidden": list(sandbox.hidden),
        "visible": list(sandbox.visible),
        "file_bytes": sandbox.file_bytes,
        "device": device,
        "timing_protocol": timing_protocol,  # the verifier's, read back when it judges
    }
    (box.path / SPEC_FILE).write_text(json.dumps(spec))


async def run(box_path: Path) -> dict:
    spec = json.loads((box_path / SPEC_FILE).read_text())
    env = dict(spec["env"])
    if spec["device"] == "cuda":
        # The GPU Slurm gave this job (its GRES), in place of a worker's pinned one.
        env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if spec["isolate"] and not isolation_available():
        raise SystemExit(f"runner {os.environ.get('SLURMD_NODENAME', '?')}: the sandbox cannot isolate here")
    config = SandboxConfig(
        root=box_path.parent,
        isolate=spec["isolate"],
        hidden=tuple(spec["hidden"]),
        visible=tuple(spec["visible"]),
        file_bytes=spec["file_bytes"],
    )
    started = time.time()
    finished = await Sandbox(config).run(
        Box(box_path, spec["inner"]), spec["command"], env, time_limit_s=spec["time_limit_s"]
    )
    return {
        "exit_code": finished.exit_code,
        "timed_out": finished.timed_out,
        "duration_s": finished.duration_s,
        "output_tail": finished.output_tail,
        "started_at": started,
        "finished_at": time.time(),
        "node": os.environ.get("SLURMD_NODENAME", ""),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m services.verifier.runner BOX", file=sys.stderr)
        return 2
    box_path = Path(argv[0])
    result = asyncio.run(run(box_path))
    partial = box_path / (FINISHED_FILE + ".part")
    partial.write_text(json.dumps(result))
    partial.rename(box_path / FINISHED_FILE)  # whole or absent: the verifier never reads half a result
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
