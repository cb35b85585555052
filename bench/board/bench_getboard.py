"""GetBoard latency under concurrent clients, open loop at a fixed request rate, through the real server.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/bench_getboard.py [--rps 1000] [--seconds 20] [--clients 8]

A scratch database (dropped afterwards) gets a generated log (--events, over --routes routes) and a signed-in
member; the board is served by serve_for_bench.py in its own process (the service's read path: projector caught up
from the log, auth through the token cache with PostgreSQL on a miss, the observability interceptor). This process
sends GetBoard (newest board) at --rps, spread over --clients channels, and measures each call from send to reply.
Prints JSON.
"""

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import asyncpg
import grpc
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eventgen  # noqa: E402
from kernelboard.v1 import board_pb2, board_pb2_grpc  # noqa: E402

from services.common import auth  # noqa: E402
from services.common.eventlog import EventLog, NewEvent, payload_of  # noqa: E402

ADMIN_URL = os.environ.get("KB_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")


async def fill(database_url: str, events: int, routes: int) -> str:
    log = await EventLog.connect(database_url)
    try:
        batch = []
        for event in eventgen.generate(events, routes=routes, agents=max(1, routes // 10)):
            at = event.occurred_at.ToDatetime().replace(tzinfo=__import__("datetime").UTC)
            vv = event.verifier_version if event.HasField("verifier_version") else None
            batch.append(NewEvent(payload_of(event), actor=event.actor, verifier_version=vv, occurred_at=at))
            if len(batch) == 500:
                await log.append("bench", None, batch)
                batch = []
        if batch:
            await log.append("bench", None, batch)
        async with log.pool.acquire() as conn:
            await auth.register_principal(conn, "reader", auth.PERSON, "reader", auth.MEMBER, log=log, actor="bench")
            return await auth.issue_token(conn, "reader")
    finally:
        await log.close()


async def load(port: int, token: str, rps: int, seconds: float, clients: int) -> dict:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(clients)]
    stubs = [board_pb2_grpc.BoardStub(c) for c in channels]
    metadata = (("authorization", f"Bearer {token}"),)
    request = board_pb2.GetBoardRequest()
    warm = await stubs[0].GetBoard(request, metadata=metadata)
    latencies: list[float] = []
    errors: list[str] = []

    async def one(stub):
        sent = time.perf_counter()
        try:
            await stub.GetBoard(request, metadata=metadata, timeout=5)
            latencies.append(time.perf_counter() - sent)
        except grpc.aio.AioRpcError as err:
            errors.append(err.code().name)

    total = int(rps * seconds)
    tasks = []
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rps
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(stubs[i % clients])))
    sending_s = time.perf_counter() - started
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    for c in channels:
        await c.close()
    ordered = sorted(latencies)

    def pct(p):
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000, 3)

    return {
        "requests": total,
        "ok": len(latencies),
        "errors": len(errors),
        "offered_rps": rps,
        "achieved_rps": round(total / sending_s, 1),
        "completed_in_s": round(elapsed, 2),
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(ordered[-1] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
        "board_ranked": len(warm.ranked),
        "board_listed_beside": len(warm.listed_beside),
        "reply_bytes": warm.ByteSize(),
    }


def server_side(metrics_port: int) -> dict:
    """The server's own account: the board's query time (kb_board_query_seconds) against the whole call's
    (kb_grpc_request_duration_seconds: interceptors, auth, handler)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    samples, sign_ins = {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("method") == "GetBoard" and sample.name.endswith(("_sum", "_count")):
                samples[sample.name] = sample.value
            elif sample.name == "kb_auth_token_cache_lookups_total":
                sign_ins[sample.labels["result"]] = int(sample.value)
    board_n = samples.get("kb_board_query_seconds_count", 0)
    call_n = samples.get("kb_grpc_request_duration_seconds_count", 0)
    return {
        "server_token_cache_lookups": sign_ins,
        "server_board_query_mean_ms": round(samples["kb_board_query_seconds_sum"] / board_n * 1000, 4)
        if board_n
        else None,
        "server_call_mean_ms": round(samples["kb_grpc_request_duration_seconds_sum"] / call_n * 1000, 3)
        if call_n
        else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rps", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--routes", type=int, default=50)
    args = parser.parse_args()

    name = f"kb_bench_board_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    database_url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    server = None
    try:
        token = await fill(database_url, args.events, args.routes)
        port_file = Path(tempfile.mkdtemp()) / "port"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("serve_for_bench.py")), database_url, str(port_file)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the board server did not start")
            await asyncio.sleep(0.2)
        grpc_port, metrics_port = map(int, port_file.read_text().split())
        result = await load(grpc_port, token, args.rps, args.seconds, args.clients)
        result.update(server_side(metrics_port))
        result = {
            "benchmark": "board GetBoard latency",
            "clients": args.clients,
            "seconds": args.seconds,
            "log_events": args.events,
            "routes": args.routes,
            **result,
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(result))
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
