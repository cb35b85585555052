"""A check run the way the verifier service runs it, without the service's database: the worker's sandbox
(services/common/sandbox.py) around `bash checks/verify.sbatch routes/<route> <metrics>` in a box holding the rules,
the check script, the reference problems and the route -- what the worker exports from the hosted repository -- with
the environment a worker's slot gives it (services/verifier/slots.py). Inside, the judge and its confined candidate
process (services/verifier/harness), the GPU devices passed in.

usage: python3 -m bench.harness.service_path ROUTE_DIR OUT_DIR [--runs N] [--first I] [--time-limit S]
       [--verify-args ARGS]
Writes OUT_DIR/service_<i>.json (the metrics file) and service_<i>.log (the output's tail), prints one line a run;
i counts from --first (default 1), so that runs made by separate calls keep separate files.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from services.common.sandbox import Sandbox, SandboxConfig, isolation_available, read_result_file
from services.verifier.slots import CODE_ROOT, check_env, detect_slots

ROUTE = "bench"


def fill_box(work: Path, route_dir: Path) -> None:
    """What the worker's export gives a check: the rules commit's files and the route's."""
    shutil.copy(CODE_ROOT / "scienceslack.json", work / "scienceslack.json")
    shutil.copytree(CODE_ROOT / "checks", work / "checks")
    shutil.copytree(CODE_ROOT / "kernels" / "problems", work / "kernels" / "problems")
    shutil.copy(CODE_ROOT / "kernels" / "__init__.py", work / "kernels" / "__init__.py")
    (work / "routes").mkdir()
    shutil.copytree(route_dir, work / "routes" / ROUTE, ignore=shutil.ignore_patterns("__pycache__", "*.md"))


async def run_once(index: int, route_dir: Path, out: Path, time_limit: int, verify_args: str) -> dict:
    root = Path(tempfile.mkdtemp(prefix="kb-bench-boxes-"))
    sandbox = Sandbox(SandboxConfig(root=root, isolate=isolation_available(), hidden=(str(out),)))
    slot = detect_slots(os.environ)[0]
    box = sandbox.make_box(f"check-{index}")
    try:
        fill_box(box.work, route_dir)
        metrics = box.inner_path("out", "metrics.json")
        env = check_env(
            box,
            slot,
            python=sys.executable,
            route_dir=f"routes/{ROUTE}",
            metrics_path=metrics,
            rules_commit="bench",
            check_id=f"bench-{index}",
            check_name="verify",
            sha="bench",
        )
        if verify_args:
            env["KB_VERIFY_ARGS"] = verify_args  # e.g. "--only new_gelu" (checks/verify.sbatch)
        started = time.monotonic()
        finished = await sandbox.run(
            box, ["bash", "checks/verify.sbatch", f"routes/{ROUTE}", metrics], env, time_limit_s=time_limit
        )
        wall = time.monotonic() - started
        text, error = read_result_file(box.path / "out" / "metrics.json", 4 << 20)
        (out / f"service_{index}.log").write_text(finished.output_tail)
        doc = json.loads(text) if text else {"error": error or "no metrics file"}
        (out / f"service_{index}.json").write_text(json.dumps(doc, indent=1))
        return {
            "run": index,
            "isolated": sandbox.config.isolate,
            "slot": slot.name,
            "exit": finished.exit_code,
            "wall_s": round(wall, 1),
            "passed": doc.get("passed"),
            "verified": doc.get("verified"),
            "score": doc.get("score"),
            "harness_wall_s": doc.get("wall_s"),
            "reasons": doc.get("reasons"),
            "candidate": (doc.get("isolation") or {}).get("candidate"),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("route_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--first", type=int, default=1, help="the number of the first run (default 1)")
    parser.add_argument("--time-limit", type=int, default=300)
    parser.add_argument("--verify-args", default="", help='extra harness arguments, e.g. "--only new_gelu"')
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for index in range(args.first, args.first + args.runs):
        print(
            json.dumps(
                asyncio.run(run_once(index, args.route_dir.resolve(), args.out, args.time_limit, args.verify_args))
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
