"""Class 5's misfire on the H200, taken apart outside the harness.

Through the process model every timed call of route code showed 0.15-0.2 ms more synchronize-bounded wall than
CUDA-event time, while empty calls timed the same way before route import showed 0.05 ms (isolation/runs.md, run3). This
probe replays the GPU's timed protocol with the harness's own GpuKit between two plain processes: a "judge" that
flushes the L2 from its own context (prepare_run) and says go over a pipe, a "candidate" that spins for the go and
times one call with GpuKit.time_one. The candidate's state changes one step at a time (a torch kernel, a large
allocation, the dispatch recorder, the profiler's kernel census in its process or in the judge's, Triton and the
route's kernel), and after each step every combination is timed of: the call (empty, eager GELU, the route's GELU),
GPU work of the candidate's own just before it says ready (as the harness's refresh of the inputs, synchronized), the
judge's flush before the go (or none), and the candidate's switch back onto the GPU after the go (GpuKit.take_device,
or none). Two candidates take the steps in different orders, so that a step that
adds the gap shows in both where it comes.

usage: python3 bench/harness/class5_probe.py --out DIR [--calls 30]   (one GPU; writes DIR/class5_probe.json)
"""

import argparse
import itertools
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # spawned children import this file by path, without the caller's PYTHONPATH

ORDERS = {
    "census_first": ["fresh", "torch_kernel", "big_alloc", "recorder", "census", "triton_route", "judge_census"],
    "judge_first": ["fresh", "torch_kernel", "judge_census", "triton_route", "recorder", "census", "big_alloc"],
}
SPLIT = ("record_start", "call", "record_end", "sync")
WAIT_S = 60  # the judge gives up on a candidate that says nothing this long


def candidate(conn, order: list[str], calls: int) -> None:
    import torch
    import torch.nn.functional as F

    from services.verifier.harness.device import GpuKit

    device = torch.device("cuda")
    kit = GpuKit(device, l2_flush=False)
    x = torch.randn(8192, 8192, device=device)
    kit.sync()
    held, route = [], {}

    def step(name: str) -> None:
        with torch.no_grad():
            if name == "torch_kernel":
                F.gelu(x, approximate="tanh")
            elif name == "big_alloc":
                held.append(torch.empty(40 << 30, dtype=torch.uint8, device=device))
            elif name == "recorder":
                from services.verifier.harness.recorder import OpRecorder

                with OpRecorder(device):
                    F.gelu(x, approximate="tanh")
            elif name == "census":
                from services.verifier.harness.recorder import launched_kernels

                launched_kernels(lambda: F.gelu(x, approximate="tanh"))
            elif name == "triton_route":
                from kernels.triton.new_gelu import ModelNew

                route["model"] = ModelNew().to(device)
                route["model"](x)
            elif name == "judge_census":  # the judge's process runs the profiler; this one does nothing
                conn.send({"judge_census": True})
                assert conn.recv() == "ok"
        kit.sync()

    def timed(run, refresh: bool, switch: bool) -> dict:
        if refresh:  # the harness's refresh: new contents in place, then a synchronize before ready
            x.copy_(torch.rand(x.shape, device=device))
        kit.sync()
        kit.reset_persisting()
        conn.send("ready")
        while not conn.poll(0):
            pass
        conn.recv()
        if switch:
            kit.take_device()
        events, wall, _ = kit.time_one(run)
        conn.send("done")
        return {**dict(zip(SPLIT, kit.last_split, strict=True)), "wall": wall, "events": events}

    calls_by_name = {
        "empty": lambda: None,
        "eager": lambda: F.gelu(x, approximate="tanh"),
        "route": lambda: route["model"](x),
    }
    results = []
    for name in order:
        began = time.perf_counter()
        step(name)
        stage = {"stage": name, "step_s": round(time.perf_counter() - began, 3), "variants": {}}
        for label, run in calls_by_name.items():
            if label == "route" and "model" not in route:
                continue
            for refresh, flush, switch in itertools.product((False, True), repeat=3):
                conn.send({"flush": flush})
                samples = [timed(run, refresh, switch) for _ in range(calls)]
                key = (
                    f"{label}{' refresh' if refresh else ''}{'' if flush else ' no-flush'}{' switch' if switch else ''}"
                )
                row = {k: round(statistics.median(s[k] for s in samples), 4) for k in (*SPLIT, "wall", "events")}
                row["gap"] = round(statistics.median(s["wall"] - s["events"] for s in samples), 4)
                stage["variants"][key] = row
        results.append(stage)
    conn.send({"results": results})


def _recv(conn, proc):
    if not conn.poll(WAIT_S) or not proc.is_alive() and not conn.poll(0):
        raise RuntimeError(f"the candidate said nothing for {WAIT_S} s (exit code {proc.exitcode})")
    return conn.recv()


def judge(conn, proc, calls_per_set: int) -> list:
    """The other context, as the harness's judge: GpuKit.prepare_run (synchronize, flush, reset, synchronize)."""
    import torch

    from services.verifier.harness.device import GpuKit
    from services.verifier.harness.recorder import launched_kernels

    kit = GpuKit(torch.device("cuda"), l2_flush=True)
    while True:
        order = _recv(conn, proc)
        if "results" in order:
            return order["results"]
        if order.get("judge_census"):
            launched_kernels(lambda: kit.flush_buffer.mul(2.0))
            conn.send("ok")
            continue
        for _ in range(calls_per_set):
            assert _recv(conn, proc) == "ready"
            if order["flush"]:
                kit.prepare_run()
            conn.send("go")
            assert _recv(conn, proc) == "done"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spawn = mp.get_context("spawn")
    report = {}
    for label, order in ORDERS.items():
        mine, theirs = spawn.Pipe()
        proc = spawn.Process(target=candidate, args=(theirs, order, args.calls))
        proc.start()
        try:
            results = judge(mine, proc, args.calls)
        finally:
            proc.join(timeout=30)
            proc.kill()
        report[label] = results
        (args.out / "class5_probe.json").write_text(json.dumps(report, indent=1))
        for stage in results:
            for key, row in stage["variants"].items():
                print(
                    f"{label:12} {stage['stage']:12} {key:31} gap {row['gap']:.4f} wall {row['wall']:.4f} "
                    f"events {row['events']:.4f} | " + " ".join(f"{k} {row[k]:.4f}" for k in SPLIT),
                    flush=True,
                )


if __name__ == "__main__":
    main()
