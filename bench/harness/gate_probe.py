"""Device probe for verifier version 2's gate (services/verifier/harness/gate.py), two processes as the harness runs
them: does a stream held by cuStreamWaitValue32 on a page both processes map open on the judge's host store, how close
is the judge's clock (open -> the device's done word) to the candidate's CUDA events, does the judge's L2 flush run
while the call is held, and how much do the medians of 100 cold calls move between three passes (version 2's device
time) beside version 1's rule (host launch inside the events) in the same call.

usage (device machine, repository root): python3 bench/harness/gate_probe.py --out DIR [--passes 3] [--runs 100]
Writes DIR/gate_probe.json and prints a table last.
"""

import argparse
import json
import math
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "protos")]

import torch  # noqa: E402

from kernels import problems  # noqa: E402
from services.verifier.harness.gate import DeviceGate, GatePage  # noqa: E402


# -- candidate ---------------------------------------------------------------------------------------------------------
class Synced(torch.nn.Module):
    """A forward that synchronises the host (reads a value back): the gate's timeout path."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *xs):
        out = self.inner(*xs)
        if float(out.reshape(-1)[0].item()) == 12345.0:
            out = out + 1
        return out


def candidate(page_fd: int) -> None:
    import importlib

    page = GatePage(page_fd)
    gate = DeviceGate(page)
    device = torch.device("cuda")
    model = inputs = outbuf = dummy = None
    send = lambda obj: (sys.stdout.write(json.dumps(obj) + "\n"), sys.stdout.flush())  # noqa: E731
    for line in sys.stdin:
        order = json.loads(line)
        op = order["op"]
        if op == "load":
            model = inputs = outbuf = None
            torch.cuda.empty_cache()
            problem = problems.load(order["problem"])
            init = problem.get_init_inputs("full")
            if order["impl"] in ("eager", "synced"):
                model = problem.Model(*init)
            else:
                model = importlib.import_module(f"kernels.triton.{order['problem']}").ModelNew(*init)
            model = model.to(device).eval()
            if order["impl"] == "synced":
                model = Synced(model)
            gen = torch.Generator(device=device).manual_seed(1)
            inputs = problem.get_inputs("full", device=device, generator=gen)
            with torch.no_grad():
                for _ in range(10):
                    out = model(*inputs)
            outbuf = torch.empty_like(out)
            torch.cuda.synchronize()
            send({"ok": True, "out_bytes": out.numel() * out.element_size()})
        elif op == "idle":
            nbytes = int(order["nbytes"])
            if dummy is None or dummy.numel() != nbytes:
                dummy = torch.empty(nbytes, dtype=torch.uint8, device=device)
                dummy_out = torch.empty_like(dummy)
            gated(gate, order["seq"], lambda d=dummy: d, dummy_out, send)
        elif op == "timed":
            with torch.no_grad():
                gated(gate, order["seq"], lambda m=model, x=inputs: m(*x), outbuf, send)
        elif op == "v1":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.no_grad():
                start.record()
                model(*inputs)
                end.record()
            torch.cuda.synchronize()
            send({"ms": start.elapsed_time(end)})
        elif op == "quit":
            break


def gated(gate, seq, run, outbuf, send):
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    gate.hold(stream.cuda_stream, seq)
    start.record()
    out = run()
    end.record()
    outbuf.copy_(out.reshape(outbuf.shape))
    gate.signal(stream.cuda_stream, seq)
    t1 = time.perf_counter()
    send({"enqueued": True, "host_ms": (t1 - t0) * 1e3})
    torch.cuda.synchronize()
    send({"ms": start.elapsed_time(end)})


# -- judge -------------------------------------------------------------------------------------------------------------
class Judge:
    def __init__(self):
        self.device = torch.device("cuda")
        self.flush = torch.empty(512 << 20 >> 2, dtype=torch.float32, device=self.device)
        self.page = GatePage.create()
        self.seq = 0
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--candidate", str(self.page.fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=[self.page.fd],
            text=True,
            bufsize=1,
        )

    def send(self, obj):
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("candidate ended")
        return json.loads(line)

    def flush_l2(self) -> float:
        t0 = time.perf_counter()
        self.flush.fill_(1.0)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    def gated_call(self, order: dict, enqueue_timeout: float = 0.2) -> dict:
        self.seq += 1
        self.send({**order, "seq": self.seq})
        enqueued = self.recv(enqueue_timeout)
        host_synced = enqueued is None
        flush_ms = self.flush_l2()
        t_open = self.page.open(self.seq)
        t_done = self.page.wait_done(self.seq, time.monotonic() + 60)
        if t_done is None:
            raise RuntimeError("no done word in 60 s")
        if host_synced:  # the forward synchronised the host: the gate opened on the judge's timeout
            enqueued = self.recv(60)
        answer = self.recv(60)
        return {
            "judge_ms": (t_done - t_open) * 1e3,
            "events_ms": answer["ms"],
            "flush_ms": flush_ms,
            "host_synced": host_synced,
            "enqueue_host_ms": enqueued.get("host_ms"),
        }


def summary(values):
    values = sorted(values)
    n = len(values)
    return {
        "median": statistics.median(values),
        "min": values[0],
        "p10": values[n // 10],
        "p90": values[(9 * n) // 10],
        "max": values[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--only", nargs="*", default=list(problems.PROBLEM_IDS))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    judge = Judge()
    record = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    flush_alone = [judge.flush_l2() for _ in range(50)]
    record["flush_alone_ms"] = summary(flush_alone)
    calib = {}
    for nbytes in (4, 64 << 20, 1 << 30):
        rows = [judge.gated_call({"op": "idle", "nbytes": nbytes}) for _ in range(60)]
        calib[nbytes] = {
            "judge_ms": summary([r["judge_ms"] for r in rows]),
            "events_ms": summary([r["events_ms"] for r in rows]),
            "flush_gated_ms": summary([r["flush_ms"] for r in rows]),
        }
    record["idle_calibration"] = calib
    print("idle calibration:", json.dumps({k: round(v["judge_ms"]["median"], 4) for k, v in calib.items()}), flush=True)
    passes = []
    for p in range(args.passes):
        rows = {}
        for pid in args.only:
            rows[pid] = {}
            for impl in ("eager", "triton"):
                judge.send({"op": "load", "problem": pid, "impl": impl})
                loaded = judge.recv(600)
                calls = [judge.gated_call({"op": "timed"}) for _ in range(args.runs)]
                v1 = []
                for _ in range(args.runs):
                    judge.flush_l2()
                    judge.send({"op": "v1"})
                    v1.append(judge.recv(60)["ms"])
                rows[pid][impl] = {
                    "out_bytes": loaded["out_bytes"],
                    "v2_events": summary([c["events_ms"] for c in calls]),
                    "v2_judge": summary([c["judge_ms"] for c in calls]),
                    "judge_minus_events": summary([c["judge_ms"] - c["events_ms"] for c in calls]),
                    "flush_gated": summary([c["flush_ms"] for c in calls]),
                    "enqueue_host": summary([c["enqueue_host_ms"] or 0.0 for c in calls]),
                    "v1_events": summary(v1),
                    "raw": [[round(c["events_ms"], 5), round(c["judge_ms"], 5)] for c in calls],
                }
            e, t = rows[pid]["eager"], rows[pid]["triton"]
            print(
                f"pass {p} {pid:20s} v2 {e['v2_events']['median'] / t['v2_events']['median']:6.3f} "
                f"v1 {e['v1_events']['median'] / t['v1_events']['median']:6.3f} "
                f"J-E med {t['judge_minus_events']['median'] * 1e3:6.1f}us "
                f"p90 {t['judge_minus_events']['p90'] * 1e3:6.1f}us",
                flush=True,
            )
        passes.append(rows)
        record["passes"] = passes
        (out / "gate_probe.json").write_text(json.dumps(record))
    # the gate's timeout path: a forward that reads a value back
    judge.send({"op": "load", "problem": "new_gelu", "impl": "synced"})
    judge.recv(600)
    synced = [judge.gated_call({"op": "timed"}) for _ in range(10)]
    record["synced"] = synced[:10]
    judge.send({"op": "quit"})
    (out / "gate_probe.json").write_text(json.dumps(record))
    print("\nscore (geometric mean of speed-ups) per pass, v2 events / v2 judge / v1:")
    for p, rows in enumerate(passes):

        def geo(key, rows=rows):
            logs = [math.log(r["eager"][key]["median"] / r["triton"][key]["median"]) for r in rows.values()]
            return math.exp(sum(logs) / len(logs))

        print(f"  pass {p}: {geo('v2_events'):.4f} {geo('v2_judge'):.4f} {geo('v1_events'):.4f}")
    print("synced:", [(round(s["judge_ms"], 3), round(s["events_ms"], 3), s["host_synced"]) for s in synced[:3]])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--candidate":
        candidate(int(sys.argv[2]))
    else:
        main()
