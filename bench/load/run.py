"""Load test: N agents pushing concurrently for a while, each push changing its route's metrics.json, so that
MetricsReported flows through the real path (ingest → PostgreSQL log → relay → private NATS JetStream → board
consumer → WatchBoard). Loopback only, bounded; a private stack (tests/e2e/stack.py) with relay, ingest and board.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/run.py --agents 50 --seconds 60 > bench/load/results.json

Reports pushes/s, push RPC latency, push→board latency (from the push call to the first WatchBoard view that shows
the reported score; scores rise per agent, so a later score seen means the earlier one was folded), errors, and the
load average. The verifier and scheduler are not started: a CPU verifier would take ~40 s per pushed commit, which
measures the verifier's queue, not the path to the board. Ends by checking that every accepted push has exactly one
MetricsReported in the log and that the live board equals a rebuild from the log.
"""

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, events_pb2, ingest_pb2, ingest_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from tests.e2e.invariants import assert_board_rebuilds
from tests.e2e.stack import Stack


async def git(cwd: Path, *argv: str, env: dict) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        "git", *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
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


class Agent:
    def __init__(self, index: int, token: str, root: Path, env: dict):
        self.route = f"load-{index:02d}"
        self.md = (("authorization", f"Bearer {token}"),)
        self.clone = root / self.route
        self.env = env
        self.pushed = 0
        self.errors: list[str] = []
        self.push_latencies: list[float] = []
        self.timeout_s = 120.0
        self.interval_s = 0.0

    async def prepare(self, ingest) -> None:
        await ingest.StartRoute(ingest_pb2.StartRouteRequest(route=self.route), metadata=self.md)
        reply = await ingest.Fetch(ingest_pb2.FetchRequest(refs=[f"routes/{self.route}"]), metadata=self.md)
        bundle = self.clone.with_suffix(".bundle")
        bundle.write_bytes(reply.bundle)
        await git(
            self.clone.parent, "clone", "-q", "-b", f"routes/{self.route}", str(bundle), str(self.clone), env=self.env
        )
        self.base = (await git(self.clone, "rev-parse", "HEAD", env=self.env)).decode().strip()
        (self.clone / "routes" / self.route).mkdir(parents=True, exist_ok=True)

    async def resync(self, ingest) -> bool:
        """After a failed push, back in step with the hosted route; returns whether the failed push landed anyway."""
        mine = (await git(self.clone, "rev-parse", "HEAD", env=self.env)).decode().strip()
        reply = await ingest.Fetch(ingest_pb2.FetchRequest(refs=[f"routes/{self.route}"]), metadata=self.md)
        bundle = self.clone.with_suffix(".bundle")
        bundle.write_bytes(reply.bundle)
        await git(self.clone, "fetch", "-q", str(bundle), f"routes/{self.route}", env=self.env)
        await git(self.clone, "reset", "-q", "--hard", "FETCH_HEAD", env=self.env)
        self.base = (await git(self.clone, "rev-parse", "HEAD", env=self.env)).decode().strip()
        return self.base == mine

    async def push_until(self, ingest, watcher: BoardWatcher, stop_at: float) -> None:
        ref = f"refs/heads/routes/{self.route}"
        while time.perf_counter() < stop_at:
            score = 1.0 + (self.pushed + 1) / 1000.0  # rises with each push
            metrics = {"score": score, "cost": 0.0, "subtasks": []}
            (self.clone / "routes" / self.route / "metrics.json").write_text(json.dumps(metrics))
            await git(self.clone, "add", "-A", env=self.env)
            await git(self.clone, "commit", "-q", "-m", f"score {score}", env=self.env)
            bundle = await git(self.clone, "bundle", "create", "-q", "-", ref, f"^{self.base}", env=self.env)
            started = time.perf_counter()
            watcher.expect(self.route, score, started)
            try:
                reply = await ingest.Push(
                    ingest_pb2.PushRequest(ref=ref, bundle=bundle), metadata=self.md, timeout=self.timeout_s
                )
            except grpc.RpcError as err:
                self.errors.append(f"{err.code().name}: {err.details()}")
                if not await self.resync(ingest):  # it did not land: its score will never show
                    watcher.pending[self.route].remove((score, started))
                continue
            self.push_latencies.append(time.perf_counter() - started)
            self.base = reply.sha
            self.pushed += 1
            await asyncio.sleep(self.interval_s)


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


async def measure(stack: Stack, agents_n: int, seconds: float, interval_s: float) -> dict:
    tokens = await register_agents(stack, agents_n)
    env = stack.env()
    clones = stack.root / "clones"
    clones.mkdir()
    agents = [Agent(i, token, clones, env) for i, token in enumerate(tokens)]
    for agent in agents:
        agent.interval_s = interval_s
    curator_md = (("authorization", f"Bearer {stack.token('curator')}"),)
    async with (
        grpc.aio.insecure_channel(stack.address("ingest")) as ingest_channel,
        grpc.aio.insecure_channel(stack.address("board")) as board_channel,
    ):
        ingest = ingest_pb2_grpc.IngestStub(ingest_channel)
        watcher = BoardWatcher(board_pb2_grpc.BoardStub(board_channel), curator_md)
        for agent in agents:
            await agent.prepare(ingest)
        watching = asyncio.create_task(watcher.run())
        await asyncio.sleep(1.0)  # the watch's first view has arrived
        load_before = os.getloadavg()
        started = time.perf_counter()
        await asyncio.gather(*(a.push_until(ingest, watcher, started + seconds) for a in agents))
        wall = time.perf_counter() - started
        load_after = os.getloadavg()
        drain_deadline = time.perf_counter() + 60
        while watcher.outstanding() and time.perf_counter() < drain_deadline:
            await asyncio.sleep(0.2)
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
        "agents": agents_n,
        "interval_s": interval_s,
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
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }


async def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=0.0, help="each agent's pause after a push (0: closed loop)")
    args = parser.parse_args()
    stack = Stack(Path(tempfile.mkdtemp(prefix="kb-load-")), None, components=("relay", "ingest", "board"))
    try:
        await stack.setup()
        result = await measure(stack, args.agents, args.seconds, args.interval)
    finally:
        await stack.teardown()
    return {
        "command": f"PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/load/run.py --agents {args.agents} "
        f"--seconds {args.seconds:g} --interval {args.interval:g}",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {sys.version.split()[0]}",
        "components": "relay, ingest, board as processes; PostgreSQL 127.0.0.1:5432 (own database); own nats-server",
        **result,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=2))
