"""Two (or more) versions of projection.py folding the same decoded log in one process, run after run in turn.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/compare_folds.py OLD.py NEW.py
        [--events 200000] [--runs 15]

On the shared 2-core machine, separate runs of bench_fold.py move by +-15 % for the same code (the host's load,
not the VM's). Taking turns in one process on one log, and keeping each version's best CPU time, compares the
versions under the same conditions. Each version's state must hash the same (a version that folds differently is
not faster, it is wrong). Write an older version out with ``git show COMMIT:services/board/projection.py > OLD.py``.
Prints one JSON line.
"""

import argparse
import gc
import hashlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eventgen  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from services.board import codec  # noqa: E402  (serializes any version's state: it reads attributes only)


def load(path: str, index: int):
    spec = importlib.util.spec_from_file_location(f"projection_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    modules = [load(path, i) for i, path in enumerate(args.modules)]
    events = eventgen.generate(args.events)
    gc.collect()
    gc.freeze()
    load_before = os.getloadavg()[0]

    best = [float("inf")] * len(modules)
    digests = [set() for _ in modules]
    for _ in range(args.runs):
        for i, projection in enumerate(modules):
            started = time.process_time()
            state = projection.fold(events)
            best[i] = min(best[i], time.process_time() - started)
            digests[i].add(hashlib.sha256(codec.state_to_json(state)).hexdigest())
            del state
    assert all(d == digests[0] and len(d) == 1 for d in digests), f"the versions folded differently: {digests}"
    print(
        json.dumps(
            {
                "benchmark": "board pure fold, versions in turn",
                "events": args.events,
                "runs": args.runs,
                "events_per_cpu_s_best": {
                    path: round(args.events / seconds) for path, seconds in zip(args.modules, best, strict=True)
                },
                "state_sha256": digests[0].pop(),
                "load_average_1m_before": round(load_before, 2),
                "load_average_1m_after": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
