# One file past 500 lines: one sweep in one command on a lent GPU; its phases (candidates, checks in worker processes,
# timing, the final rounds, the report, compile-only and ship) each feed the next through the one JSON it writes.
"""Sweep launch configurations of the fp32 (3xTF32) matmul in one command (kernels/NOTES.md, "matmul").

Every candidate is a ``config`` of kernels/triton/matmul.py, run through the same ``launches`` as the shipped
function, at the benchmark's full shape (4096^3) on the GPU:
1. check, in parallel worker processes (compiling is the slow part; Triton's disk cache then serves the timing
   process): C filled with NaN before the run (a tile left unwritten shows), the output against torch's fp32 product
   (atol = rtol = 1e-2, no NaN) and both against a float64 oracle; ok = allclose and err ratio <= 2, the ratio as
   bench/kernels/run.py computes it (ours / max(torch's, 2^-24));
2. time, in one worker process, each candidate that passed: the whole call (split passes + product, what ModelNew
   runs) and the product kernel alone, each the median of --runs CUDA-event-timed runs after a 256 MB L2 flush
   (run.py's busy timing); torch's fp32 and TF32 products as yardsticks (3x the TF32 time is this card's own
   "3xTF32 floor"; BENCHMARK.md's is 1.008 ms);
3. the --top fastest and the shipped default again, interleaved over --rounds rounds (drift falls on all alike),
   busy and from an idle GPU (the verifier's way).
A candidate that fails to compile, runs out of shared memory, computes wrong, kills its process or hangs
(--candidate-timeout-s) is recorded as such and the sweep goes on; --budget-s bounds the whole run. Results are
rewritten after every candidate: $OUT/matmul_sweep.json and the table $OUT/matmul_sweep.md.

Usage on the device machine (repository root):  python bench/kernels/matmul_sweep.py --out $OUT
Without a GPU:
  TRITON_INTERPRET=1 python bench/kernels/matmul_sweep.py --smoke --out DIR
      every candidate checked at awkward shapes under the interpreter (tests/kernels/test_matmul_sweep.py); the
      interpreter ignores warps, stages and warp specialisation, so candidates differing only there run once
  python bench/kernels/matmul_sweep.py --compile-only --out DIR
      every candidate compiled for sm_90a (no driver needed): shared memory, registers and spills (ptxas -v)
"""

import argparse
import json
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

H200_SMEM_BYTES = 232448  # 227 KB: the most shared memory one block may use on the H200 (sm_90)
FLOOR_MS = 1.008  # BENCHMARK.md: three TF32 passes at the H200's measured TF32 rate
TARGET_FRACTION = 0.85
FULL_SHAPE = (4096, 4096, 4096)
# partial tiles at every edge and more 128 x 128 tiles than the interpreter's 4 persistent programs; K % 4 != 0 (no
# TMA descriptor: the pointer kernel); whole tiles (no masks)
SMOKE_SHAPES = ((300, 76, 140), (200, 45, 130), (128, 64, 256))
SMOKE_TIMING_SHAPE = (64, 64, 64)  # the timing phases' code run under the interpreter: one tile, quickly
INTERPRETER_KEYS = (
    "ops",
    "BM",
    "BN",
    "BK",
    "GROUP_M",
    "tma",
    "persistent",
    "c_tma",
    "flush",
    "split_block",
    "split_tile",
)


def candidates() -> dict[str, dict]:
    """Name -> config, most promising first (the check phase takes them in this order). Each fits the H200's
    shared memory by smem_estimate's arithmetic (tests/kernels/test_matmul_sweep.py holds every one to it)."""
    from kernels.triton.matmul import config

    c = []
    # the shipped kernel and its neighbours: pipeline depth, tile order, persistent grid (whose epilogue's layout
    # change needs its own 64 KB: fewer stages), smaller tiles (64 rows: one warpgroup of 4 warps, so the two fp32
    # accumulators still fit in registers), the split passes' tiling
    c += [config(), config(bk=16, stages=6), config(bk=16, stages=5), config(group_m=4), config(group_m=16)]
    c += [config(persistent=True, stages=2), config(persistent=True, bk=16, stages=4)]
    c += [config(bm=64, warps=4, stages=4), config(bn=64, warps=4, stages=4)]
    # two blocks an SM, to cover each other's waits on the tensor cores (the three chained dots of a K step each end
    # in a wait for all of them to finish: kernels/NOTES.md); 16 warps would leave 128 registers a thread: spills
    c += [config(bm=64, warps=4, stages=2)]
    c += [config(split_tile=32), config(split_tile=128), config(split_block=1024), config(split_block=8192)]
    # A split in registers (one pass and a third of the operand bytes less), B's halves from the pass
    c += [config("split_a", stages=4), config("split_a", stages=3)]
    c += [config("split_a", bk=16, stages=8), config("split_a", bk=16, stages=6), config("split_a", bk=64, stages=2)]
    c += [config("split_a", persistent=True), config("split_a", persistent=True, bk=16, stages=6)]
    c += [config("split_a", stages=4, group_m=4), config("split_a", stages=4, group_m=16)]
    c += [config("split_a", bm=64, bn=256, stages=3), config("split_a", bm=64, warps=4, stages=4)]
    c += [config("split_a", bm=64, warps=4, stages=2)]
    # one dot per K step (three steps per K tile), flushed every `flush` K tiles: no wait inside the loop
    c += [config("one_dot", stages=6), config("one_dot", stages=4), config("one_dot", stages=6, flush=2)]
    c += [config("one_dot", bk=64, stages=3)]
    c += [config("one_dot", bk=16, stages=12, flush=4), config("one_dot", bk=16, stages=8, flush=2)]
    c += [config("one_dot", stages=6, group_m=4), config("one_dot", stages=6, group_m=16)]
    c += [config("one_dot", persistent=True, stages=4), config("one_dot", warps=16, stages=6)]
    c += [config("one_dot", bm=64, warps=4, stages=4)]  # two blocks an SM
    # B split in registers, A's halves from the plain pass, tiles of C^T
    c += [config("split_b", stages=4), config("split_b", stages=3), config("split_b", bk=16, stages=8)]
    c += [config("split_b", bk=16, stages=6), config("split_b", persistent=True, bk=16, stages=6)]
    # Triton's own tf32x3: no pass at all
    c += [config("tf32x3", stages=3), config("tf32x3", stages=4), config("tf32x3", stages=5)]
    c += [config("tf32x3", bk=16, stages=4), config("tf32x3", bk=16, stages=8)]
    # TMA descriptors: one program per tile or persistent, the output stored from registers or through shared
    # memory (c_tma)
    c += [config(tma=True), config(tma=True, bk=16, stages=6), config(tma=True, persistent=True, stages=2)]
    c += [config(tma=True, persistent=True, bk=16, stages=4)]
    c += [config(tma=True, persistent=True, c_tma=True, bk=16, stages=4)]
    c += [config("split_a", tma=True, stages=4), config("split_a", tma=True, stages=3)]
    c += [config("split_a", tma=True, bk=16, stages=8), config("split_a", tma=True, bk=64, stages=2)]
    c += [config("split_a", tma=True, persistent=True), config("split_a", tma=True, persistent=True, bk=16, stages=6)]
    c += [config("split_b", tma=True, stages=4), config("split_b", tma=True, persistent=True, stages=3)]
    c += [config("split_b", tma=True, bk=64, stages=2), config("split_b", tma=True, bk=16, stages=8)]
    c += [config("tf32x3", tma=True), config("tf32x3", tma=True, stages=4)]
    c += [config("tf32x3", tma=True, persistent=True)]
    c += [config("one_dot", tma=True, stages=6), config("one_dot", tma=True, bk=64, stages=3)]
    c += [config("one_dot", tma=True, stages=6, flush=2), config("one_dot", tma=True, persistent=True, stages=4)]
    c += [config("one_dot", tma=True, persistent=True, stages=5)]
    c += [config("one_dot", tma=True, persistent=True, c_tma=True, stages=4)]
    return {cfg_name(cfg): cfg for cfg in c}


def cfg_name(cfg: dict) -> str:
    from kernels.triton.matmul import config

    default = config()
    flags = [f for f in ("tma", "persistent", "c_tma") if cfg[f]]
    name = "_".join([cfg["ops"], *flags, f"m{cfg['BM']}n{cfg['BN']}k{cfg['BK']}"])
    name += f"_w{cfg['num_warps']}_s{cfg['num_stages']}_g{cfg['GROUP_M']}"
    if cfg["ops"] == "one_dot":
        name += f"_f{cfg['flush']}"
    for key, short in (("split_block", "sb"), ("split_tile", "st")):
        if cfg[key] != default[key]:
            name += f"_{short}{cfg[key]}"
    return name


def config_call(cfg: dict) -> str:
    """The kernels.triton.matmul.config(...) call that makes cfg: what ships a winner as VARIANTS["default"]."""
    from kernels.triton.matmul import config

    default = config(cfg["ops"])
    params = {"BM": "bm", "BN": "bn", "BK": "bk", "GROUP_M": "group_m", "num_warps": "warps", "num_stages": "stages"}
    args = [repr(cfg["ops"])] + [f"{params.get(k, k)}={v!r}" for k, v in cfg.items() if k != "ops" and v != default[k]]
    return f"config({', '.join(args)})"


def smem_estimate(cfg: dict) -> int:
    """An upper bound of the product kernel's shared memory, by arithmetic: the operand tiles of one K step times the
    stages, plus (tf32x3) the four halves Triton may re-store once, plus the output tile where the epilogue cannot
    reuse the pipeline's buffers: staged for a TMA store (c_tma), or the layout change before a persistent kernel's
    pointer store (its buffers stay live across tiles). ``--compile-only`` reports the compiler's own figure."""
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    rows = {"presplit": 2 * (bm + bn), "split_a": bm + 2 * bn, "split_b": 2 * bm + bn, "tf32x3": bm + bn}.get(
        cfg["ops"], bm + bn
    )  # one_dot: one tile of each operand a step
    total = rows * bk * 4 * cfg["num_stages"]
    if cfg["ops"] == "tf32x3":
        total += 2 * (bm + bn) * bk * 4
    if cfg["c_tma"] or cfg["persistent"]:
        total += bm * bn * 4
    if cfg["tma"]:
        total += 1024  # the TMA copies' barriers: 8 bytes a stage, and a few more
    return total


# ---------------------------------------------------------------- worker processes (one CUDA context each)


class Context:
    """What a worker keeps between tasks: inputs, the fp32 reference and the float64 oracle, the timer."""

    def __init__(self, smoke: bool):
        import torch

        from bench.kernels import run as bench

        self.torch, self.bench = torch, bench
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference is fp32 (torch's default, made explicit)
        self.device = torch.device("cpu" if smoke else "cuda")
        self.smoke = smoke
        gen = torch.Generator(device=self.device).manual_seed(13)
        draw = torch.randn if smoke else torch.rand  # the benchmark's inputs are rand; randn adds cancellation

        def operands(m, k, n):
            return draw((m, k), generator=gen, device=self.device), draw((k, n), generator=gen, device=self.device)

        self.cases = []
        for shape in SMOKE_SHAPES if smoke else (FULL_SHAPE,):
            a, b = operands(*shape)
            ref = a @ b
            oracle = a.double() @ b.double()
            self.cases.append((a, b, ref, oracle, bench.rel_error(ref, oracle)))
        self.timed = operands(*SMOKE_TIMING_SHAPE) if smoke else self.cases[0][:2]
        self.timer = bench.Timer(self.device)  # on the CPU: wall clock, no flush (run.py's dry-run timing)

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()


def check(ctx: Context, cfg: dict) -> dict:
    from kernels.triton import matmul as mm

    t0 = time.time()
    rec: dict = {"ok": True, "cases": []}
    for a, b, ref, oracle, err_ref in ctx.cases:
        c, steps = mm.launches(a, b, cfg)
        c.fill_(math.nan)  # every element the product leaves unwritten shows as NaN
        compiled = [kernel[grid](*args, **options) for kernel, grid, args, options in steps]
        ctx.sync()
        case = {"shape": list(a.shape) + [b.shape[1]], **ctx.bench.allclose_report(c, ref)}
        case["err"] = ctx.bench.rel_error(c, oracle)
        case["err_ref"] = err_ref
        case["err_ratio"] = case["err"] / max(err_ref, ctx.bench.FP32_UNIT_ROUNDOFF)
        if ctx.smoke:  # the interpreter's dots are plain fp32: hold it to tests/kernels' bound
            case["ok"] = case["allclose"] and case["err"] <= max(2 * err_ref, 2.0**-22)
        else:
            case["ok"] = case["allclose"] and case["err_ratio"] <= 2.0
        product = compiled[-1]
        if product is not None:  # a compiled kernel (not under the interpreter)
            rec.update(n_regs=product.n_regs, n_spills=product.n_spills, shared=product.metadata.shared)
        rec["ok"] = rec["ok"] and case["ok"]
        rec["cases"].append(case)
        del c, steps, compiled
    rec["seconds"] = time.time() - t0
    return rec


def time_candidate(ctx: Context, payload) -> dict:
    from kernels.triton import matmul as mm

    cfg, runs = payload
    a, b = ctx.timed
    total, times = ctx.timer.median_ms(lambda: mm.matmul_3xtf32(a, b, cfg=cfg), runs)
    _, steps = mm.launches(a, b, cfg)
    mm.run_launches(steps[:-1])
    kernel, grid, args, options = steps[-1]
    product, _ = ctx.timer.median_ms(lambda: kernel[grid](*args, **options), runs)
    return {"total_ms": total, "total_spread_ms": [min(times), max(times)], "product_ms": product}


def final_round(ctx: Context, payload) -> dict:
    """The chosen candidates timed in turn, round after round, so that drift falls on all of them alike."""
    from kernels.triton import matmul as mm

    entries, rounds, runs = payload
    a, b = ctx.timed
    calls = {name: (lambda cfg=cfg: mm.matmul_3xtf32(a, b, cfg=cfg)) for name, cfg in entries.items()}
    busy: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            busy[name] += ctx.timer.median_ms(call, runs)[1]
    return {
        name: {
            "busy_ms": statistics.median(busy[name]),
            "busy_runs": len(busy[name]),
            "idle_ms": ctx.timer.idle_median_ms(call, runs),
        }
        for name, call in calls.items()
    }


def baselines(ctx: Context, runs: int) -> dict:
    """torch's products on this card: fp32 (eager, what the benchmark's speed-up is over) and TF32 (one pass)."""
    torch = ctx.torch
    a, b = ctx.timed
    out = {}
    try:
        out["torch_fp32_ms"] = ctx.timer.median_ms(lambda: a @ b, runs)[0]
        torch.backends.cuda.matmul.allow_tf32 = True
        out["torch_tf32_ms"] = ctx.timer.median_ms(lambda: a @ b, runs)[0]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    out["floor_here_ms"] = 3 * out["torch_tf32_ms"]
    return out


TASKS = {"check": check, "time": time_candidate, "final": final_round, "baselines": baselines}


def worker_main(conn, smoke: bool) -> None:
    """Serve tasks from the parent until told to stop. After a failed task the CUDA context is probed, and the
    worker exits if it is broken (an illegal address poisons the context): the parent starts a fresh one."""
    ctx = Context(smoke)
    conn.send(("ready", None, True))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        kind, payload = msg
        try:
            conn.send(("result", TASKS[kind](ctx, payload), True))
        except Exception as e:
            healthy = True
            try:
                ctx.sync()
                (ctx.torch.ones(1, device=ctx.device) + 1).item()
            except Exception:
                healthy = False
            conn.send(("result", {"ok": False, "error": f"{type(e).__name__}: {e}"[:3000]}, healthy))
            if not healthy:
                return


def run_tasks(tasks: list, workers: int, smoke: bool, task_timeout_s: float, deadline: float, on_result) -> None:
    """Run (name, kind, payload) tasks on up to `workers` processes, one task in flight each; on_result(name, rec)
    is called for every task: its result, or why there is none (the process died, hung, or the budget ran out)."""
    spawn = mp.get_context("spawn")  # CUDA cannot be used in a forked child
    pending = list(tasks)
    live: dict = {}  # connection -> [process, task in flight or None while starting, since]
    failed_starts = 0

    def start() -> None:
        parent_end, child_end = spawn.Pipe()
        proc = spawn.Process(target=worker_main, args=(child_end, smoke), daemon=True)
        proc.start()
        child_end.close()
        live[parent_end] = [proc, None, time.time()]

    def give_next(conn) -> None:
        proc = live[conn][0]
        if pending:
            task = pending.pop(0)
            conn.send((task[1], task[2]))
            live[conn] = [proc, task, time.time()]
        else:
            conn.send(("stop",))
            proc.join(30)
            del live[conn]

    def retire(conn) -> int | None:
        """End a worker (by its own handle) and start another while tasks remain; its exit code."""
        proc = live.pop(conn)[0]
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        if pending and failed_starts <= 3:
            start()
        return proc.exitcode

    def lose(conn, why: str) -> None:
        nonlocal failed_starts
        task = live[conn][1]
        if task is None:
            failed_starts += 1
        code = retire(conn)
        if task is not None:
            on_result(task[0], {"ok": False, "error": f"{why} (worker exit code {code})"})

    for _ in range(min(workers, len(pending))):
        start()
    while live and time.time() < deadline:
        for conn in multiprocessing.connection.wait(list(live), timeout=1.0):
            try:
                kind, rec, healthy = conn.recv()
            except (EOFError, OSError):
                lose(conn, "the worker process died")
                continue
            task = live[conn][1]
            if kind == "result":
                on_result(task[0], rec)
            if healthy:
                give_next(conn)
            else:  # its CUDA context is broken: a fresh process takes the next task
                retire(conn)
        now = time.time()
        for conn, (_, task, since) in list(live.items()):
            if now - since > (task_timeout_s if task is not None else 180):
                lose(conn, f"no answer in {task_timeout_s:.0f} s")
    for conn in list(live):
        task = live[conn][1]
        proc = live.pop(conn)[0]
        proc.kill()
        proc.join(10)
        if task is not None:
            on_result(task[0], {"ok": False, "error": "stopped: the sweep's time budget ran out"})
    why = "no worker process could start" if failed_starts > 3 else "the sweep's time budget ran out"
    for task in pending:
        on_result(task[0], {"ok": False, "error": f"not run: {why}"})


# ---------------------------------------------------------------- results


def render(data: dict) -> str:
    env, cands = data["environment"], data["candidates"]
    base = data.get("baselines", {})
    floor_here = base.get("floor_here_ms")
    lines = [
        "# fp32 matmul (3xTF32) sweep",
        "",
        f"{env.get('gpu')}; torch {env.get('torch')}, triton {env.get('triton')}; `{env.get('command')}` "
        f"({env.get('date_utc')}); shape {data['shape']}.",
        "",
    ]
    if base:
        lines += [
            f"torch fp32 (eager) {base.get('torch_fp32_ms', math.nan):.3f} ms; torch TF32 "
            f"{base.get('torch_tf32_ms', math.nan):.3f} ms, so this card's 3xTF32 floor is {floor_here:.3f} ms "
            f"(BENCHMARK.md's: {FLOOR_MS} ms; the target, {TARGET_FRACTION:.0%} of it: "
            f"{FLOOR_MS / TARGET_FRACTION:.3f} ms).",
            "",
        ]
    final = data.get("final", {})
    if final:
        lines += [
            "Final rounds (interleaved; the whole call, split passes included):",
            "",
            "| candidate | busy ms | of floor | idle ms | runs | ships as |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, f in sorted(final.items(), key=lambda kv: kv[1]["busy_ms"]):
            lines.append(
                f"| {name} | {f['busy_ms']:.4f} | {FLOOR_MS / f['busy_ms']:.1%} | {f['idle_ms']:.4f} | "
                f"{f['busy_runs']} | `{config_call(cands[name]['config'])}` |"
            )
        lines.append("")
    timed = [(n, c) for n, c in cands.items() if "total_ms" in c.get("timing", {})]
    timed.sort(key=lambda nc: nc[1]["timing"]["total_ms"])
    lines += [
        "All candidates that passed, fastest first (median ms; split = total - product):",
        "",
        "| candidate | total | product | split | of floor | err ratio | regs | spills | smem KB (est.) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in timed:
        t, chk = c["timing"], c["check"]
        smem = f"{chk['shared'] / 1024:.0f}" if "shared" in chk else "-"
        smem += f" ({c['smem_estimate'] / 1024:.0f})"
        lines.append(
            f"| {name} | {t['total_ms']:.4f} | {t['product_ms']:.4f} | {t['total_ms'] - t['product_ms']:.4f} | "
            f"{FLOOR_MS / t['total_ms']:.1%} | {max(x['err_ratio'] for x in chk['cases']):.2f} | "
            f"{chk.get('n_regs', '-')} | {chk.get('n_spills', '-')} | {smem} |"
        )
    bad = [(n, c) for n, c in cands.items() if "check" in c and not c["check"].get("ok")]
    bad += [(n, c) for n, c in cands.items() if "error" in c.get("timing", {})]
    if bad:
        lines += ["", "Failed or not run:", ""]
        for name, c in bad:
            rec = c["timing"] if "error" in c.get("timing", {}) else c["check"]
            why = rec.get("error") or "; ".join(
                f"{x['shape']}: allclose {x['allclose']}, err {x['err']:.3g} (ref {x['err_ref']:.3g})"
                for x in rec.get("cases", [])
            )
            lines.append(f"- {name}: {why[:300]}")
    return "\n".join(lines) + "\n"


def environment(args, smoke: bool) -> dict:
    import torch
    import triton

    env = {
        "command": "python bench/kernels/matmul_sweep.py " + " ".join(sys.argv[1:]),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
        "budget_s": args.budget_s,
        "runs": args.runs,
        "gpu": "cpu (Triton interpreter)",
    }
    if not smoke:  # asked in a child: the parent holds no CUDA context of its own
        code = (
            "import json, torch; p = torch.cuda.get_device_properties(0); "
            "print(json.dumps({'gpu': p.name, 'sms': p.multi_processor_count}))"
        )
        try:
            env |= json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        except ValueError:
            env["gpu"] = "unknown"
    return env


# ---------------------------------------------------------------- compile-only (no GPU)


class _CompileOnlyDriver:
    """Enough of Triton's driver for its JIT to compile (never launch) for sm_90a on a machine without a GPU."""

    def __init__(self):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target


def compile_only(cands: dict, out: Path) -> int:
    import torch
    import triton
    from triton import knobs

    from kernels.triton import matmul as mm

    triton.runtime.driver.set_active(_CompileOnlyDriver())
    m, k, n = FULL_SHAPE
    a, b = torch.empty(m, k), torch.empty(k, n)
    rows = {}
    for name, cfg in cands.items():
        t0 = time.time()
        try:
            _, steps = mm.launches(a, b, cfg)
            kernel, grid, args, options = steps[-1]
            compiled = kernel.warmup(*args, grid=grid, **options)
            with tempfile.NamedTemporaryFile("w", suffix=".ptx") as ptx:
                ptx.write(compiled.asm["ptx"])
                ptx.flush()
                report = subprocess.run(
                    [knobs.nvidia.ptxas.path, "-arch=sm_90a", "-v", ptx.name, "-o", os.devnull],
                    capture_output=True,
                    text=True,
                ).stderr
            regs = re.findall(r"Used (\d+) registers", report)
            spills = re.findall(r"(\d+) bytes spill stores", report)
            rows[name] = {
                "shared": compiled.metadata.shared,
                "smem_estimate": smem_estimate(cfg),
                "fits": compiled.metadata.shared <= H200_SMEM_BYTES,
                "within_estimate": compiled.metadata.shared <= smem_estimate(cfg),
                "regs": int(regs[-1]) if regs else None,
                "spill_bytes": int(spills[-1]) if spills else None,
                "register_a_wgmma": bool(re.search(r"wgmma\.mma_async\S*\s+\{[^}]*\},\s*\{", compiled.asm["ptx"])),
            }
        except Exception as e:
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:1500]}
        rows[name]["seconds"] = round(time.time() - t0, 1)
        print(name, rows[name], flush=True)
    (out / "matmul_compile.json").write_text(json.dumps({"triton": triton.__version__, "candidates": rows}, indent=1))
    return 0 if all("error" not in r and r["fits"] for r in rows.values()) else 1


# ---------------------------------------------------------------- shipping a winner

SHIP_MARGIN = 0.02  # a finalist ships only when it beats the shipped default by this much, from an idle GPU
DEFAULT_LINE = re.compile(r'^    "default": config\(.*$', re.M)


def ship(sweep_json: Path, route_file: Path) -> int:
    """Makes the fastest finalist the route's default when it beats the shipped one from an idle GPU (the verifier's
    timing) by SHIP_MARGIN and passed every check (allclose, error ratio <= 2). Rewrites route_file's default line
    and prints the edit, so the same call can verify the route with it and the edit can be committed as measured."""
    from kernels.triton.matmul import VARIANTS

    data = json.loads(sweep_json.read_text())
    final, cands = data.get("final", {}), data["candidates"]
    shipped = cfg_name(VARIANTS["default"])
    if shipped not in final:
        print(f"ship: the shipped default {shipped} has no final timing; nothing changed")
        return 0
    passed = [n for n in final if cands.get(n, {}).get("check", {}).get("ok")]
    best = min(passed, key=lambda n: final[n]["idle_ms"])
    gain = final[shipped]["idle_ms"] / final[best]["idle_ms"] - 1
    if best == shipped or gain < SHIP_MARGIN:
        print(f"ship: keeping {shipped} ({final[shipped]['idle_ms']:.4f} ms idle); best other {best} gains {gain:.1%}")
        return 0
    call = config_call(cands[best]["config"])
    line = f'    "default": {call},  # {best}: {final[best]["idle_ms"]:.4f} ms idle, {final[best]["busy_ms"]:.4f} busy'
    text = route_file.read_text()
    if len(DEFAULT_LINE.findall(text)) != 1:
        print(f"ship: no single default line in {route_file}; nothing changed")
        return 1
    route_file.write_text(DEFAULT_LINE.sub(lambda _: line, text))
    print(f"ship: {shipped} -> {best} ({gain:.1%} faster from idle): {line.strip()}")
    return 0


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for matmul_sweep.json and .md")
    ap.add_argument("--budget-s", type=float, default=140.0, help="the whole sweep's wall-clock limit")
    ap.add_argument("--check-share", type=float, default=0.55, help="share of the budget the check phase may take")
    ap.add_argument("--candidate-timeout-s", type=float, default=100.0, help="one check (compile and run)")
    ap.add_argument("--timing-timeout-s", type=float, default=20.0, help="one candidate's timing")
    ap.add_argument("--workers", type=int, default=0, help="check processes (0: CPUs less two, at most 14)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs of each candidate (and of its product alone)")
    ap.add_argument("--top", type=int, default=8, help="candidates timed again in the final rounds")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="candidate names to run (default: all)")
    ap.add_argument("--smoke", action="store_true", help="the whole sweep under the interpreter, small shapes")
    ap.add_argument("--compile-only", action="store_true", help="compile for sm_90a and report, no GPU needed")
    ap.add_argument("--ship", metavar="SWEEP_JSON", help="make that sweep's winner kernels/triton/matmul.py's default")
    args = ap.parse_args()
    if args.ship:
        return ship(Path(args.ship), Path(__file__).resolve().parents[2] / "kernels" / "triton" / "matmul.py")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    cands = candidates()
    if args.only:
        cands = {n: c for n, c in cands.items() if n in args.only}
    if args.compile_only:
        return compile_only(cands, out)
    smoke = args.smoke
    if smoke and os.environ.get("TRITON_INTERPRET") != "1":
        ap.error("--smoke runs under the interpreter: set TRITON_INTERPRET=1")
    workers = args.workers or max(1, min(14, (os.cpu_count() or 4) - 2))

    data = {
        "environment": environment(args, smoke),
        "shape": list(SMOKE_SHAPES) if smoke else list(FULL_SHAPE),
        "candidates": {n: {"config": c, "smem_estimate": smem_estimate(c)} for n, c in cands.items()},
    }
    log = open(out / "matmul_sweep.log", "a")

    def save() -> None:
        (out / "matmul_sweep.json").write_text(json.dumps(data, indent=1, default=str))
        (out / "matmul_sweep.md").write_text(render(data))

    def say(text: str) -> None:
        line = f"[{time.time() - start:6.1f} s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    say(f"{len(cands)} candidates, {workers} check workers, budget {args.budget_s:.0f} s: {data['environment']}")

    def program(name: str):
        """Candidates with the same program compute the same under the interpreter: one run covers them."""
        return tuple(cands[name][k] for k in INTERPRETER_KEYS) if smoke else name

    firsts: dict = {}
    for name in cands:
        firsts.setdefault(program(name), name)

    def on_check(name: str, rec: dict) -> None:
        for n in cands:
            if program(n) == program(name):
                data["candidates"][n]["check"] = rec if n == name else {**rec, "same_program_as": name}
        worst = max((c["err_ratio"] for c in rec.get("cases", [])), default=math.nan)
        say(f"check {name}: ok={rec.get('ok')} err ratio {worst:.3g} {rec.get('error', '')[:300]}")
        save()

    checks = [(name, "check", cands[name]) for name in firsts.values()]
    run_tasks(checks, workers, smoke, args.candidate_timeout_s, start + args.budget_s * args.check_share, on_check)
    passed = [n for n in firsts.values() if data["candidates"][n].get("check", {}).get("ok")]
    say(f"{len(passed)} of {len(firsts)} passed the check")

    def on_timing(name: str, rec: dict) -> None:
        if name in ("baselines", "final"):
            data[name] = rec
        else:
            data["candidates"][name]["timing"] = rec
        say(f"{name}: {json.dumps(rec, default=str)[:400]}")
        save()

    deadline = start + args.budget_s
    timing = [("baselines", "baselines", args.runs)] + [(n, "time", (cands[n], args.runs)) for n in passed]
    run_tasks(timing, 1, smoke, args.timing_timeout_s, deadline - 15, on_timing)
    timed = sorted(
        (n for n in passed if "total_ms" in data["candidates"][n].get("timing", {})),
        key=lambda n: data["candidates"][n]["timing"]["total_ms"],
    )
    from kernels.triton.matmul import VARIANTS

    finalists = {n: cands[n] for n in timed[: args.top]}
    shipped = cfg_name(VARIANTS["default"])
    if shipped in timed:
        finalists[shipped] = cands[shipped]
    if finalists and time.time() < deadline - 10:
        final = [("final", "final", (finalists, args.rounds, 10))]
        run_tasks(final, 1, smoke, args.timing_timeout_s * 3, deadline, on_timing)
    save()
    if timed:
        best = data["candidates"][timed[0]]["timing"]["total_ms"]
        say(f"fastest: {timed[0]} {best:.4f} ms = {FLOOR_MS / best:.1%} of the floor (target {TARGET_FRACTION:.0%})")
    checked = [c for c in data["candidates"].values() if "check" in c]
    say(f"done in {time.time() - start:.0f} s; {len(checked)} of {len(cands)} candidates checked")
    if smoke:  # the interpreter run is a correctness test: every candidate must be right
        return 0 if len(checked) == len(cands) and all(c["check"]["ok"] for c in checked) else 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(2)
