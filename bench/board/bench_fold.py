"""Rebuild throughput of the pure fold: events/s folding a generated log of decoded events into a fresh state.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/bench_fold.py [--events 1000000] [--runs 3]

Generation is not timed. The decoded events are frozen out of the garbage collector's sight first (gc.freeze):
they are the input, not the work. Each run folds into a fresh state; the canonical state's SHA-256 must be the same
in every run (a determinism check on the large log). Wall-clock and CPU-time rates are both reported: on a machine
shared with other work, the CPU-time rate is closer to what the fold itself costs. Prints one JSON line.
"""

import argparse
import gc
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eventgen  # noqa: E402

from services.board import codec, projection, standing, views  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    started = time.perf_counter()
    events = eventgen.generate(args.events)
    generated_s = time.perf_counter() - started
    gc.collect()
    gc.freeze()

    rates, cpu_rates, digests = [], [], set()
    for _ in range(args.runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        state = projection.fold(events)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        rates.append(args.events / elapsed)
        cpu_rates.append(args.events / cpu)
        digests.add(hashlib.sha256(codec.state_to_json(state)).hexdigest())
        del state
    assert len(digests) == 1, f"the same log folded to different states: {digests}"

    state = projection.fold(events)
    started = time.perf_counter()
    newest = views.board_view(state, state.boards[standing.newest_version(state)])
    view_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    rows = codec.state_rows(state)
    serialize_s = time.perf_counter() - started
    print(
        json.dumps(
            {
                "benchmark": "board pure fold",
                "events": args.events,
                "runs": args.runs,
                "events_per_s_best": round(max(rates)),
                "events_per_s_median": round(statistics.median(rates)),
                "seconds_best": round(args.events / max(rates), 3),
                # events per second of this process's own CPU time: less skewed by other processes on a shared machine
                "events_per_cpu_s_best": round(max(cpu_rates)),
                "state_sha256": digests.pop(),
                "boards": len(state.boards),
                "newest_board_ranked": len(newest.ranked),
                "newest_board_view_ms": round(view_ms, 2),
                "serialize_state_s": round(serialize_s, 3),
                "state_bytes": len(rows[0]) + sum(map(len, rows[1])) + sum(len(r[2]) for r in rows[2]),
                "generate_s": round(generated_s, 1),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
