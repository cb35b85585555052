"""Instructions per event of the pure fold, counted by valgrind's cachegrind: a measure that other work on a shared
machine does not move, for comparing two versions of projection.py when wall-clock rates are too noisy to.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/count_fold_instructions.py [--events 50000]
        [--module services/board/projection.py]

Runs itself twice under cachegrind, each generating the same log (eventgen.py, seed 7) and then folding it 0 or 2
times; the difference over 2 x events is the fold's instructions per event. ``--module`` names the projection.py to
count (e.g. an older one written out by ``git show``). ``--reads envelope`` or ``--reads fields`` counts, instead of
the fold, a loop that only reads from each event what the fold reads: the envelope (position, payload case, time,
actor, payload), or that and the payload fields the three commonest kinds' handlers read. Prints one JSON line.
"""

import argparse
import gc
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDS = 2


def read_envelopes(events) -> None:
    for event in events:
        kind = event.WhichOneof("payload")
        at = event.occurred_at
        _read = (event.global_position, at.seconds * 1_000_000_000 + at.nanos, event.actor, getattr(event, kind))


def read_fields(events) -> None:
    for event in events:
        kind = event.WhichOneof("payload")
        at = event.occurred_at
        _read = (event.global_position, at.seconds * 1_000_000_000 + at.nanos, event.actor)
        payload = getattr(event, kind)
        if kind == "check_completed":
            _read = (payload.benchmark_version, payload.route, payload.score, event.verifier_version)
            if payload.passed:
                _read = payload.verified
        elif kind == "commit_ingested":
            _read = (payload.owner, payload.route)
        elif kind == "metrics_reported":
            _read = (payload.benchmark_version, payload.route, payload.score, payload.by_maintainer)


READERS = {"envelope": read_envelopes, "fields": read_fields}


def fold_in_this_process(module_path: str, events_count: int, folds: int, reads: str | None) -> None:
    sys.path.insert(0, str(HERE))
    import eventgen

    spec = importlib.util.spec_from_file_location("projection_counted", module_path)
    projection = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(projection)
    events = eventgen.generate(events_count)
    gc.collect()
    gc.freeze()
    for _ in range(folds):
        if reads is None:
            projection.fold(events)
        else:
            READERS[reads](events)


def instructions(module_path: str, events_count: int, folds: int, reads: str | None) -> int:
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--module",
        module_path,
        "--events",
        str(events_count),
        "--folds",
        str(folds),
    ] + (["--reads", reads] if reads else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    refs = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if refs is None:
        raise RuntimeError(f"cachegrind printed no instruction count: {done.stderr[-2000:]}")
    return int(refs.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--module", default=str(HERE.parents[1] / "services/board/projection.py"))
    parser.add_argument("--reads", choices=sorted(READERS), help="count only reading the events, not the fold")
    parser.add_argument("--folds", type=int, help="internal: fold this many times in this process (under valgrind)")
    args = parser.parse_args()
    if args.folds is not None:
        fold_in_this_process(args.module, args.events, args.folds, args.reads)
        return
    baseline = instructions(args.module, args.events, 0, args.reads)
    folded = instructions(args.module, args.events, FOLDS, args.reads)
    print(
        json.dumps(
            {
                "benchmark": "board pure fold, instructions",
                "module": args.module,
                "counted": f"reading the {args.reads} only" if args.reads else "the fold",
                "events": args.events,
                "instructions_per_event": round((folded - baseline) / (FOLDS * args.events)),
            }
        )
    )


if __name__ == "__main__":
    main()
