"""``kb verify`` / ``python -m services.verifier.harness``: exit 0 passed, 1 a guardrail broken, 2 could not run.

A route file that fails to import, or lacks ModelNew, is the route's fault: a broken guardrail for that problem (1).
Could not run (2): no GPU for full shapes, unreadable rules, a missing route directory, or the harness itself failing.
"""

import argparse
import gc
import json
import sys
import traceback
from pathlib import Path

from services.verifier.harness.args import add_arguments

EXIT_PASSED, EXIT_BROKEN, EXIT_COULD_NOT_RUN = 0, 1, 2


def _write(path: str, document: dict) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    tmp.replace(target)  # never a half-written metrics file


def handle(args: argparse.Namespace) -> int:
    from contracts.metrics import VERIFIER_VERSION

    try:
        from services.verifier.harness.check import run_check

        # One check per process: what the imports (torch's above all) left on the heap lives as long as the process,
        # so a collection between problems need not walk it (24 full collections took 3.6 s: bench/harness/
        # isolation, run9).
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
    _print_summary(document)
    return EXIT_PASSED if document["passed"] else EXIT_BROKEN


def _print_summary(document: dict) -> None:
    print(f"{'problem':<20} {'pass':<5} {'speed-up':>9} {'ref ms':>9} {'cand ms':>9} {'err ratio':>9}")
    for s in document["subtasks"]:
        mark = "yes" if s["passed"] else "NO"
        if not s["submitted"]:
            mark = "-"
        print(
            f"{s['id']:<20} {mark:<5} {s['speedup']:>9.3f} {s['reference_ms']:>9.3f} {s['candidate_ms']:>9.3f} "
            f"{s['error_ratio']:>9.2f}"
        )
    for reason in document["reasons"]:
        print(f"  broken: {reason}")
    verified = "verified" if document["verified"] else "NOT verified: " + "; ".join(document["not_verified_because"])
    print(
        f"score {document['score']:.4f} ({verified}); runner {document['runner']}; cost {document['cost']:.1f} "
        f"GPU-s; wall {document['wall_s']:.1f} s"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.verifier.harness", description=__doc__)
    add_arguments(parser)
    return handle(parser.parse_args(argv))
