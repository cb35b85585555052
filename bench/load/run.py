"""Load test: N agents pushing concurrently for a while, each push changing its route's metrics.json, so that
MetricsReported flows through the real path (ingest → PostgreSQL log → relay → private NATS JetStream → board
consumer → WatchBoard). Loopback only, bounded; a private stack (tests/e2e/stack.py) with relay, ingest and board.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/run.py --agents 50 --seconds 60              # closed loop
    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/run.py --agents 50 --seconds 60 --interval 5 # paced

Two modes. Closed loop (--interval 0): each agent pushes again as soon as its push returns: it measures saturation,
the most pushes/s the system takes. Paced (--interval S): each agent pushes on its own rhythm, a random first offset
in [0, S) and then every S × uniform(0.5, 1.5) seconds (S on average), as agents at work do: the offered rate is
agents / S pushes/s, and it measures latency at that rate.

Like any load generator, each agent's commits and bundles are made before the clock starts (git fast-import for the
chain of commits, one thin pack per push), so that the timed phase spends this machine's CPU on the system under
test, not on the agents' git.

Reports pushes/s, push RPC latency, push→board latency (from the Push call's start to the first WatchBoard view that
shows the reported score; scores rise per agent, so a later score seen means the earlier one was folded), errors, the
CPU seconds each component used in the timed phase, and the load average. The verifier and scheduler are not
started: a CPU verifier would take ~40 s per pushed commit, which measures the verifier's queue, not the path to the
board. Ends by checking that every accepted push has exactly one MetricsReported in the log and that the live board
equals a rebuild from the log.
"""

import argparse
import asyncio
import fcntl
import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, events_pb2, ingest_pb2, ingest_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from tests.e2e.invariants import assert_board_rebuilds
from tests.e2e.stack import Stack


async def git(cwd: Path, *argv: str, env: dict, stdin: bytes | None = None) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        "git",
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(argv)}: {err.decode()}")
    return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary_ms(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples) * 1000, 1),
        "p90_ms": round(percentile(samples, 0.90) * 1000, 1),
        "p99_ms": round(percentile(samples, 0.99) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
    }


class BoardWatcher:
    """Follows WatchBoard; for each route, resolves the pending pushes whose score the board now shows."""

    def __init__(self, stub, md):
        self.stub, self.md = stub, md
        self.pending: dict[str, list[tuple[float, float]]] = {}  # route -> [(score, pushed_at)]
        self.latencies: list[float] = []
        self.seen_at: dict[tuple[str, float], float] = {}  # (route, score) -> wall clock when first shown
        self.views = 0

    def expect(self, route: str, score: float, pushed_at: float) -> None:
        self.pending.setdefault(route, []).append((score, pushed_at))

    async def run(self) -> None:
        async for view in self.stub.WatchBoard(board_pb2.WatchBoardRequest(version=0), metadata=self.md):
            now, wall = time.perf_counter(), time.time()
            self.views += 1
            for entry in [*view.ranked, *view.listed_beside]:
                waiting = self.pending.get(entry.route)
                if not waiting:
                    continue
                still = [(s, t) for s, t in waiting if s > entry.score + 1e-12]
                for score, pushed_at in waiting:
                    if score <= entry.score + 1e-12:
                        self.latencies.append(now - pushed_at)
                        self.seen_at[(entry.route, score)] = wall
                self.pending[entry.route] = still

    def outstanding(self) -> int:
        return sum(len(v) for v in self.pending.values())


def score_of(n: int) -> float:
    """The score an agent's n-th push (from 1) reports: rising with each push."""
    return 1.0 + n / 1000.0


class Agent:
    def __init__(self, index: int, token: str, root: Path, env: dict):
        self.route = f"load-{index:02d}"
        self.ref = f"refs/heads/routes/{self.route}"
        self.md = (("authorization", f"Bearer {token}"),)
        self.clone = root / self.route
        self.env = env
        self.pushed = 0
        self.errors: list[str] = []
        self.push_latencies: list[float] = []
        self.timeout_s = 120.0
        self.chain: list[tuple[str, bytes]] = []  # (commit, bundle) of each push, in order
        self.exhausted = False

    async def prepare(self, ingest, pushes: int) -> None:
        """Start the route, clone it, and make the commits and bundles of ``pushes`` pushes."""
        await ingest.StartRoute(ingest_pb2.StartRouteRequest(route=self.route), metadata=self.md)
        reply = await ingest.Fetch(ingest_pb2.FetchRequest(refs=[f"routes/{self.route}"]), metadata=self.md)
        bundle = self.clone.with_suffix(".bundle")
        bundle.write_bytes(reply.bundle)
        await git(self.clone.parent, "clone", "-q", "--bare", str(bundle), str(self.clone), env=self.env)
        base = (await git(self.clone, "rev-parse", self.ref, env=self.env)).decode().strip()
        commits = await self._commit_chain(base, pushes)
        for parent, commit in zip([base, *commits], commits, strict=False):
            pack = await git(
                self.clone,
                "pack-objects",
                "--stdout",
                "--thin",
                "--revs",
                "-q",
                env=self.env,
                stdin=f"{commit}\n^{parent}\n".encode(),
            )
            # A git bundle (gitformat-bundle(5), v2): the prerequisite, the one ref, a blank line, the pack.
            header = f"# v2 git bundle\n-{parent}\n{commit} {self.ref}\n\n".encode()
            self.chain.append((commit, header + pack))

    async def _commit_chain(self, base: str, count: int) -> list[str]:
        """``count`` commits on top of ``base``, the n-th setting metrics.json's score to score_of(n)."""
        stream, now = [], int(time.time())
        for n in range(1, count + 1):
            metrics = json.dumps({"score": score_of(n), "cost": 0.0, "subtasks": []}).encode()
            message = f"score {score_of(n)}".encode()
            stream += [
                f"commit {self.ref}\nmark :{n}\ncommitter agent <agent@load> {now + n} +0000\n".encode(),
                b"data %d\n%s\n" % (len(message), message),
                f"from {base}\n".encode() if n == 1 else b"",
                f"M 100644 inline routes/{self.route}/metrics.json\n".encode(),
                b"data %d\n%s\n" % (len(metrics), metrics),
            ]
        marks = self.clone / "marks"
        await git(self.clone, "fast-import", "--quiet", f"--export-marks={marks}", env=self.env, stdin=b"".join(stream))
        by_mark = dict(line.split() for line in marks.read_text().splitlines())
        return [by_mark[f":{n}"] for n in range(1, count + 1)]

    async def push_next(self, ingest, watcher: BoardWatcher) -> None:
        """Push the next prepared commit; after a failed push, ask where the route is and go on from there."""
        commit, bundle = self.chain[self.pushed]
        score = score_of(self.pushed + 1)
        started = time.perf_counter()
        watcher.expect(self.route, score, started)
        try:
            await ingest.Push(
                ingest_pb2.PushRequest(ref=self.ref, bundle=bundle), metadata=self.md, timeout=self.timeout_s
            )
        except grpc.RpcError as err:
            self.errors.append(f"{err.code().name}: {err.details()}")
            route = await ingest.GetRoute(ingest_pb2.GetRouteRequest(route=self.route), metadata=self.md)
            if route.head_sha != commit:  # it did not land: its score will never show; the same push goes again
                watcher.pending[self.route].remove((score, started))
                await asyncio.sleep(0.5)
                return
        else:
            self.push_latencies.append(time.perf_counter() - started)
        self.pushed += 1

    async def push_until(self, ingest, watcher: BoardWatcher, stop_at: float) -> None:
        """Closed loop: the next push as soon as the last one returned."""
        while time.perf_counter() < stop_at:
            if self.pushed == len(self.chain):
                self.exhausted = True
                return
            await self.push_next(ingest, watcher)

    async def push_paced(self, ingest, watcher: BoardWatcher, stop_at: float, interval_s: float, rng) -> None:
        """Paced: the first push at a random offset in [0, interval), then one every interval × U(0.5, 1.5); a push
        that returns late is followed at once by the next one due."""
        due = time.perf_counter() + rng.uniform(0, interval_s)
        while due < stop_at:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if self.pushed == len(self.chain):
                self.exhausted = True
                return
            before = self.pushed
            await self.push_next(ingest, watcher)
            if self.pushed > before:
                due += interval_s * rng.uniform(0.5, 1.5)


async def register_agents(stack: Stack, count: int) -> list[str]:
    log = await EventLog.connect(stack.database_url, migrate=False)
    tokens = []
    try:
        async with log.pool.acquire() as conn:
            for i in range(count):
                owner, agent = f"loadowner{i:02d}", f"loadowner{i:02d}/agent"
                await auth.register_principal(
                    conn, owner, events_pb2.PRINCIPAL_KIND_PERSON, owner, events_pb2.ROLE_MEMBER, log=log, actor="bench"
                )
                await auth.register_principal(
                    conn,
                    agent,
                    events_pb2.PRINCIPAL_KIND_AGENT,
                    owner,
                    events_pb2.ROLE_UNSPECIFIED,
                    log=log,
                    actor="bench",
                )
                tokens.append(await auth.issue_token(conn, agent))
    finally:
        await log.close()
    return tokens


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its children it has waited for (ingest's git subprocesses), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle, from /proc/stat."""
    user, nice, system, idle, iowait, irq, softirq, steal = (
        int(v) for v in Path("/proc/stat").read_text().split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


async def postgres_backends(stack: Stack) -> list[int]:
    """The PostgreSQL server processes serving this stack's database (its services' pooled connections)."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", stack.db_name
        )
    finally:
        await conn.close()
    return [row["pid"] for row in rows]


def component_cpu(stack: Stack, backends: list[int]) -> dict[str, float]:
    pids = {name: proc.pid for name, proc in stack.procs.items()}
    pids["nats-server"] = stack.nats.proc.pid
    usage = {name: cpu_seconds(pid) for name, pid in pids.items()}
    usage["postgres_backends"] = sum(cpu_seconds(pid) for pid in backends if Path(f"/proc/{pid}").exists())
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    usage["load_generator"] = self_usage.ru_utime + self_usage.ru_stime
    usage["machine_busy"] = machine_busy_seconds()
    return usage


def chain_length(seconds: float, interval_s: float, closed_loop_pushes: int) -> int:
    """Pushes to prepare per agent: enough for the run (paced: the shortest jittered intervals, plus slack)."""
    if interval_s <= 0:
        return closed_loop_pushes
    return math.ceil(seconds / (0.5 * interval_s)) + 2


async def measure(
    stack: Stack, agents_n: int, seconds: float, interval_s: float, chain: int, seed: int, quiet_lock: int | None
) -> dict:
    """``quiet_lock``: an open lock file held shared; taken exclusive for the timed phase alone."""
    tokens = await register_agents(stack, agents_n)
    env = stack.env()
    clones = stack.root / "clones"
    clones.mkdir()
    agents = [Agent(i, token, clones, env) for i, token in enumerate(tokens)]
    rng = random.Random(seed)
    curator_md = (("authorization", f"Bearer {stack.token('curator')}"),)
    async with (
        grpc.aio.insecure_channel(stack.address("ingest")) as ingest_channel,
        grpc.aio.insecure_channel(stack.address("board")) as board_channel,
    ):
        ingest = ingest_pb2_grpc.IngestStub(ingest_channel)
        watcher = BoardWatcher(board_pb2_grpc.BoardStub(board_channel), curator_md)
        prepared_at = time.perf_counter()
        slots = asyncio.Semaphore(4)

        async def prepare(agent: Agent) -> None:
            async with slots:
                await agent.prepare(ingest, chain)

        await asyncio.gather(*(prepare(a) for a in agents))
        prepare_s = time.perf_counter() - prepared_at
        watching = asyncio.create_task(watcher.run())
        await asyncio.sleep(1.0)  # the watch's first view has arrived
        if quiet_lock:
            await asyncio.to_thread(fcntl.flock, quiet_lock, fcntl.LOCK_EX)
            await asyncio.sleep(5.0)  # what ran before the lock was taken settles
        load_before = os.getloadavg()
        backends = await postgres_backends(stack)
        cpu_before = component_cpu(stack, backends)
        started = time.perf_counter()
        if interval_s > 0:
            runs = [a.push_paced(ingest, watcher, started + seconds, interval_s, rng) for a in agents]
        else:
            runs = [a.push_until(ingest, watcher, started + seconds) for a in agents]
        await asyncio.gather(*runs)
        wall = time.perf_counter() - started
        cpu_after = component_cpu(stack, backends)
        load_after = os.getloadavg()
        drain_deadline = time.perf_counter() + 60
        while watcher.outstanding() and time.perf_counter() < drain_deadline:
            await asyncio.sleep(0.2)
        if quiet_lock:
            fcntl.flock(quiet_lock, fcntl.LOCK_SH)  # back to shared for the checks that follow
        watching.cancel()
    pushed = sum(a.pushed for a in agents)
    errors = [e for a in agents for e in a.errors]
    events = await assert_board_rebuilds(stack, stack.token("curator"), deadline_s=60)
    reported = [e for e in events if e.WhichOneof("payload") == "metrics_reported"]
    assert len(reported) == pushed, f"{pushed} pushes accepted, {len(reported)} MetricsReported in the log"
    # The log's own time of each MetricsReported to the board view that first showed it: the relay → NATS → board
    # part alone (same host clock), without the push's own processing.
    event_to_board = []
    for event in reported:
        shown = watcher.seen_at.get((event.metrics_reported.route, event.metrics_reported.score))
        if shown is not None:
            event_to_board.append(shown - event.occurred_at.ToNanoseconds() / 1e9)
    return {
        "mode": "paced" if interval_s > 0 else "closed_loop",
        "agents": agents_n,
        "interval_s": interval_s,
        "offered_pushes_per_s": round(agents_n / interval_s, 1) if interval_s > 0 else None,
        "prepared_pushes_per_agent": chain,
        "prepare_s": round(prepare_s, 1),
        "agents_out_of_prepared_pushes": sum(a.exhausted for a in agents),
        "duration_s": round(wall, 1),
        "pushes": pushed,
        "pushes_per_s": round(pushed / wall, 1),
        "errors": len(errors),
        "error_samples": errors[:5],
        "push_rpc": summary_ms([t for a in agents for t in a.push_latencies]),
        "push_to_board": summary_ms(watcher.latencies),
        "event_to_board": summary_ms(event_to_board),
        "not_seen_on_board": watcher.outstanding(),
        "board_views_received": watcher.views,
        "metrics_reported_in_log": len(reported),
        "rebuilt_board_equals_live": True,
        "cpu_seconds_in_timed_phase": {name: round(cpu_after[name] - cpu_before[name], 1) for name in cpu_before},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }


async def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument(
        "--interval", type=float, default=0.0, help="paced: each agent's mean seconds between pushes (0: closed loop)"
    )
    parser.add_argument("--closed-loop-pushes", type=int, default=80, help="pushes prepared per agent, closed loop")
    parser.add_argument("--seed", type=int, default=1, help="random offsets and intervals of the paced mode")
    parser.add_argument(
        "--quiet-lock",
        help="a lock file (the machine's /work/quiet.lock): held shared while the stack starts and agents prepare, "
        "exclusive for the timed phase and the drain, so that the numbers are taken with nothing else running",
    )
    args = parser.parse_args()
    quiet_lock = None
    if args.quiet_lock:
        quiet_lock = os.open(args.quiet_lock, os.O_RDONLY | os.O_CREAT)
        fcntl.flock(quiet_lock, fcntl.LOCK_SH)
    chain = chain_length(args.seconds, args.interval, args.closed_loop_pushes)
    stack = Stack(Path(tempfile.mkdtemp(prefix="kb-load-")), None, components=("relay", "ingest", "board"))
    try:
        await stack.setup()
        result = await measure(stack, args.agents, args.seconds, args.interval, chain, args.seed, quiet_lock)
    finally:
        await stack.teardown()
        shutil.rmtree(stack.root, ignore_errors=True)
    return {
        "command": f"PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/run.py --agents {args.agents} "
        f"--seconds {args.seconds:g} --interval {args.interval:g} --closed-loop-pushes {args.closed_loop_pushes} "
        f"--seed {args.seed}" + (f" --quiet-lock {args.quiet_lock}" if args.quiet_lock else ""),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {sys.version.split()[0]}",
        "components": "relay, ingest, board as processes; PostgreSQL 127.0.0.1:5432 (own database); own nats-server",
        **result,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=2))
