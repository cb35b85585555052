"""``kb verify`` / ``python -m services.verifier.harness``: exit 0 passed, 1 a guardrail broken, 2 could not run.

A route file that fails to import, or lacks ModelNew, is the route's fault: a broken guardrail for that problem (1).
Could not run (2): no GPU for full shapes, unreadable rules, a missing route directory, or the harness itself failing.
"""

import argparse
import gc
import json
import os
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

from contracts.metrics import EXIT_BROKEN, EXIT_COULD_NOT_RUN, EXIT_PASSED
from services.verifier.harness.args import CPU_ENV, add_arguments, default_metrics


def _write(path: str, document: dict) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    tmp.replace(target)  # never a half-written metrics file


def cpu_as_the_service(device: str | None) -> str:
    """On a CPU, the environment the service's CPU checks get (args.CPU_ENV), set before anything imports triton;
    returns a note saying so ("" on a GPU, or where it was set already)."""
    import torch  # torch does not import triton

    if device == "cuda" or (device is None and torch.cuda.is_available()):
        return ""
    if "triton" in sys.modules:
        return "triton was imported before kb verify could set " + " ".join(f"{k}={v}" for k, v in CPU_ENV.items())
    changed = {name: value for name, value in CPU_ENV.items() if os.environ.get(name) != value}
    os.environ.update(changed)
    settings = " ".join(f"{k}={v}" for k, v in changed.items())
    return f"no GPU: {settings}, as the service's CPU checks run (Triton kernels in its interpreter)" if changed else ""


def handle(args: argparse.Namespace) -> int:
    from contracts.metrics import VERIFIER_VERSION

    args.metrics = args.metrics or default_metrics(args.route_dir)
    try:
        if note := cpu_as_the_service(args.device):
            print(f"kb verify: {note}", file=sys.stderr)
        from services.verifier.harness.check import run_check

        # One check per process: what the imports (torch's above all) left on the heap lives as long as the process,
        # so a collection between problems need not walk it (24 full collections took 3.6 s: bench/harness/
        # isolation/runs.md, run9).
        gc.collect()
        gc.freeze()
        document = run_check(
            args.route_dir,
            args.rules,
            rules_commit=args.rules_commit,
            shapes=args.shapes,
            only=args.only,
            device=args.device,
            skip_static=args.skip_static,
            metrics_path=args.metrics,
        )
    except Exception as err:  # noqa: BLE001 -- any failure here means no verdict, reported as such
        could_not_run = type(err).__name__ == "CouldNotRun"
        reason = str(err) if could_not_run else f"harness error: {type(err).__name__}: {err}"
        if not could_not_run:
            traceback.print_exc()
        _write(
            args.metrics,
            {
                "verifier_version": VERIFIER_VERSION,
                "passed": False,
                "verified": False,
                "could_not_run": True,
                "reasons": [reason],
                "score": 0.0,
                "cost": 0.0,
                "subtasks": [],
            },
        )
        print(f"kb verify: could not run: {reason}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    _write(args.metrics, document)
    print(summary(document, args.metrics))
    return EXIT_PASSED if document["passed"] else EXIT_BROKEN


def summary(document: dict, metrics_path: str) -> str:
    """The check as `kb checks ID` and the web board word it (contracts/results.py), from the metrics document."""
    from contracts import results
    from services.common.text import table

    result = SimpleNamespace(
        **{
            **document,
            "subtasks": [SimpleNamespace(**s) for s in document["subtasks"]],
            "torch_version": document.get("torch") or "",
            "triton_version": document.get("triton") or "",
        }
    )
    verdict = results.check_verdict(result)
    lines = table(results.PROBLEM_HEADINGS, results.problem_rows(result), numeric={2}, indent="")
    lines += [f"reason: {results.reason(r)}" for r in document["reasons"]]
    lines += [
        f"result  {verdict.label}",
        f"score   {verdict.score}",
        f"ran on  {results.ran_with(result)}; cost {document['cost']:.1f} GPU-s; wall {document['wall_s']:.1f} s",
        f"metrics {metrics_path}",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.verifier.harness", description=__doc__)
    add_arguments(parser)
    return handle(parser.parse_args(argv))
