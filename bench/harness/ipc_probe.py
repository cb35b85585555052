"""Can the judge hand a confined candidate its timed inputs in device memory, and what could the candidate see early?

Issue 13's p20/p22: a GPU timed call's inputs are drawn on the candidate's side before the go, so route code can work
on them outside the events. The fix tried here: the judge draws them itself into memory the candidate maps
(services/verifier/harness/shared_memory.py), just before the go. This probe runs a "judge" (this process, root) and a
"candidate" confined the way the harness confines it (harness/confine.py: the job user, bubblewrap with its
own PID namespace, a cgroup), and measures:
- ``vmm``: whether a CUDA virtual-memory allocation exported as a POSIX descriptor and passed over a Unix socket maps
  in the candidate, and whether the candidate reads what the judge wrote after the judge's go (every call checked);
- ``legacy_ipc``: whether torch's own CUDA IPC (cudaIpcGetMemHandle) crosses the same sandbox;
- ``prepare``: the judge's side of a timed call (draw, copy in, synchronise, L2 flush) with the candidate idle, and
  with the candidate spinning on the device for the inputs to change (a kernel that polls the first word), and whether
  the spinning kernel had seen them before the go -- the most a route could do to look early.

usage: python3 bench/harness/ipc_probe.py --out DIR [--calls 40] [--device cuda|cpu]   (root; writes DIR/ipc_probe.json)
"""

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

INPUT_ELEMENTS = 16 << 20  # 64 MB of float32: new_gelu's input at full shapes is 512 MB, layer_norm's 256 MB
SPIN_LIMIT = 2_000_000


def spin_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def spin_until_changed(watched, old, seen, limit):
        value = tl.load(watched, volatile=True)
        count = 0
        while (value == old) & (count < limit):
            value = tl.load(watched, volatile=True)
            count += 1
        tl.store(seen, value)
        tl.store(seen + 1, count.to(tl.float32))

    return spin_until_changed


def child() -> None:
    import torch

    from services.verifier.harness.channel import Channel
    from services.verifier.harness.device import GpuKit
    from services.verifier.harness.shared_memory import Region, recv_region

    read_fd, write_fd = (int(v) for v in os.environ["KB_CHANNEL_FDS"].split(","))
    channel = Channel(read_fd, write_fd)
    handover = socket.socket(fileno=int(os.environ["KB_HANDOVER_FD"]))
    device = torch.device(os.environ["KB_DEVICE"])
    if device.type == "cuda":
        torch.cuda.set_device(0)
        kit = GpuKit(device, l2_flush=False)
    region = None
    spin = spin_kernel() if device.type == "cuda" else None
    seen = torch.zeros(2, dtype=torch.float32, device=device)
    while True:
        order, _ = channel.recv()
        op = order["op"]
        try:
            if op == "region":
                fd = recv_region(handover)
                region = Region.open(fd, order["size"], order["places"], device)
                channel.send({"ok": True, "first": float(region.tensors[0][0])})
            elif op == "legacy":
                args = order["args"]
                storage = torch.UntypedStorage._new_shared_cuda(
                    args[0], base64.b64decode(args[1]), args[2], args[3],
                    base64.b64decode(args[4]), args[5], base64.b64decode(args[6]), args[7],
                )  # fmt: skip
                flat = torch.empty(0, dtype=torch.float32, device=device).set_(storage)
                channel.send({"ok": True, "first": float(flat[0])})
            elif op == "timed":
                x = region.tensors[0]
                spinning = order["spin"] and spin is not None
                if spinning:  # route code's best try at seeing the inputs early: poll their first word on the device
                    spin[(1,)](x, float(x[0]), seen, SPIN_LIMIT)
                    polled = torch.cuda.Event()
                    polled.record()
                elif device.type == "cuda":
                    kit.sync()
                channel.send({"ok": True})
                go, _ = channel.recv(spin_s=1.0)
                early = bool(polled.query()) if spinning else None
                if device.type == "cuda":
                    kit.take_device()
                total = float(x.double().sum())
                answer = {"ok": True, "sum": total, "seen_before_go": early}
                if spinning:
                    answer["spun"] = float(seen[1])
                    answer["spin_saw"] = float(seen[0])
                channel.send(answer)
            elif op == "exit":
                channel.send({"ok": True})
                return
        except Exception as err:  # noqa: BLE001 -- the probe reports what failed and carries on
            channel.send({"ok": False, "error": f"{type(err).__name__}: {err}"[:400]})


def judge(out: Path, calls: int, device_name: str) -> dict:
    import torch

    from services.verifier.harness.channel import Channel
    from services.verifier.harness.confine import Caps, Confinement, interpreter_paths
    from services.verifier.harness.device import CpuKit, GpuKit
    from services.verifier.harness.shared_memory import Region, layout, send_region

    device = torch.device(device_name)
    kit = GpuKit(device, l2_flush=True) if device.type == "cuda" else CpuKit(device)
    report: dict = {"device": device_name, "calls": calls, "input_bytes": INPUT_ELEMENTS * 4}
    confinement = Confinement.prepare(
        Caps(), name="kb-ipc-probe", visible=[str(ROOT), *interpreter_paths()], gpu=device.type == "cuda"
    )
    report["confinement"] = confinement.describe()
    to_child, from_judge = os.pipe()
    from_child, to_judge = os.pipe()
    handover, handover_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "KB_CHANNEL_FDS": f"{to_child},{to_judge}",
        "KB_HANDOVER_FD": str(handover_end.fileno()),
        "KB_DEVICE": device_name,
        **confinement.scratch_env(),
    }
    argv = confinement.command([sys.executable, str(Path(__file__).resolve()), "--child"])
    log = open(out / "ipc_probe_child.log", "wb")
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        pass_fds=(to_child, to_judge, handover_end.fileno()),
    )  # fmt: skip
    os.close(to_child)
    os.close(to_judge)
    handover_end.close()
    channel = Channel(from_child, from_judge)

    def ask(order: dict) -> dict:
        channel.send(order)
        return channel.recv(time.monotonic() + 120)[0]

    generator = torch.Generator(device=device)

    def draw(seed: int):
        generator.manual_seed(seed)
        return [torch.rand(INPUT_ELEMENTS, generator=generator, device=device)]

    sample = draw(1)
    places = layout(sample)
    began = time.perf_counter()
    region = Region.create(places, device)
    report["vmm_create_ms"] = (time.perf_counter() - began) * 1e3
    region.fill(sample)
    kit.sync()
    send_region(handover, region.fd)
    began = time.perf_counter()
    answer = ask({"op": "region", "size": region.size, "places": places})
    report["vmm"] = {**answer, "open_ms": (time.perf_counter() - began) * 1e3, "expected": float(sample[0][0])}

    if device.type == "cuda":
        storage = sample[0].untyped_storage()
        try:
            shared = storage._share_cuda_()
            args = [base64.b64encode(v).decode() if isinstance(v, bytes) else v for v in shared]
            report["legacy_ipc"] = ask({"op": "legacy", "args": args})
        except Exception as err:  # noqa: BLE001
            report["legacy_ipc"] = {"ok": False, "error": f"judge: {type(err).__name__}: {err}"[:400]}

    if report["vmm"].get("ok"):
        for spin in (False, True, False):
            key = "spinning" if spin else ("idle" if "idle" not in report else "idle_after")
            prepare, wrong, early, spun = [], 0, 0, []
            for i in range(calls):
                answer = ask({"op": "timed", "spin": spin})
                began = time.perf_counter()
                fresh = draw(1000 + i)
                region.fill(fresh)
                kit.sync()
                kit.prepare_run()
                prepare.append((time.perf_counter() - began) * 1e3)
                channel.send({"op": "go"})
                answer = channel.recv(time.monotonic() + 120)[0]
                if not answer.get("ok"):
                    report[key] = {"error": answer}
                    break
                expected = float(fresh[0].double().sum())
                wrong += abs(answer["sum"] - expected) > 1e-6 * abs(expected)
                early += bool(answer.get("seen_before_go"))
                if "spun" in answer:
                    spun.append(answer["spun"])
            else:
                report[key] = {
                    "prepare_ms_median": statistics.median(prepare),
                    "prepare_ms_min": min(prepare),
                    "prepare_ms_max": max(prepare),
                    "prepare_ms": [round(p, 4) for p in prepare],
                    "wrong_sums": wrong,
                    "seen_before_go": early,
                    "spun_median": statistics.median(spun) if spun else None,
                }
    ask({"op": "exit"})
    proc.wait(timeout=30)
    region.close()
    confinement.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child()
        return
    args.out.mkdir(parents=True, exist_ok=True)
    report = judge(args.out, args.calls, args.device)
    (args.out / "ipc_probe.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "confinement"}, indent=1)[:6000])


if __name__ == "__main__":
    main()
