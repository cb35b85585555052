"""GetBoard latency under concurrent clients, open loop at a fixed request rate, through the real server.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/bench_getboard.py [--rps 1000] [--seconds 20] [--clients 8]

A scratch database (dropped afterwards) gets a generated log (--events, over --routes routes) and a signed-in
member; the board is served by serve_for_bench.py in its own process (the service's read path: projector caught up
from the log, auth against PostgreSQL on every call, the observability interceptor). This process sends GetBoard
(newest board) at --rps, spread over --clients channels, and measures each call from send to reply. Prints JSON.
"""

import argparse
import asyncio
import json
import os
import re
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


def percentiles(latencies_s: list[float]) -> dict:
    ordered = sorted(latencies_s)
    if not ordered:
        return {}

    def pct(p):
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000, 3)

    return {
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(ordered[-1] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


async def first_board(port: int, metadata) -> board_pb2.BoardView:
    """One call before the clock starts: the reply's size for the record, and the server's first-call costs paid."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        return await board_pb2_grpc.BoardStub(channel).GetBoard(board_pb2.GetBoardRequest(), metadata=metadata)


async def load_python(port: int, metadata, rps: int, seconds: float, clients: int) -> dict:
    """Open loop from grpc.aio in this process: each call measured from send to reply, its status seen here."""
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(clients)]
    stubs = [board_pb2_grpc.BoardStub(c) for c in channels]
    request = board_pb2.GetBoardRequest()
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
    return {
        "requests": total,
        "ok": len(latencies),
        "errors": len(errors),
        "achieved_rps": round(total / sending_s, 1),
        "completed_in_s": round(elapsed, 2),
        **percentiles(latencies),
    }


def load_h2load(port: int, token: str, rps: int, seconds: float, clients: int) -> dict:
    """Open loop from h2load (nghttp2's HTTP/2 load generator, in C), which costs the shared cores a small fraction
    of what a Python gRPC client does. It speaks gRPC's framing (a 5-byte prefix before the request) but cannot read
    gRPC's status trailers, so the calls' outcomes come from the server's kb_grpc_requests_total (see main)."""
    request = board_pb2.GetBoardRequest().SerializeToString()
    with tempfile.TemporaryDirectory() as scratch:
        body, log_file = Path(scratch) / "request", Path(scratch) / "log"
        body.write_bytes(b"\x00" + len(request).to_bytes(4, "big") + request)
        total = int(rps * seconds)
        command = [
            "h2load",
            f"--requests={total}",
            f"--clients={clients}",
            f"--rps={rps / clients}",
            "--max-concurrent-streams=64",  # open loop: a slow reply does not hold back the next request
            f"--data={body}",
            "--header=content-type: application/grpc",
            "--header=te: trailers",
            f"--header=authorization: Bearer {token}",
            f"--log-file={log_file}",
            f"http://127.0.0.1:{port}/kernelboard.v1.Board/GetBoard",
        ]
        started = time.perf_counter()
        finished = subprocess.run(command, capture_output=True, text=True, check=True)
        elapsed = time.perf_counter() - started
        rows = [line.split("\t") for line in log_file.read_text().splitlines()]
    summary = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", finished.stdout)
    latencies = [int(duration_us) / 1e6 for _start, status, duration_us in rows if status == "200"]
    return {
        "requests": total,
        "http_200": len(latencies),
        "http_failed": total - int(summary.group(4)) if summary else None,
        "completed_in_s": round(elapsed, 2),
        **percentiles(latencies),
    }


def server_side(metrics_port: int) -> dict:
    """The server's own account: the board's query time (kb_board_query_seconds) against the whole call's
    (kb_grpc_request_duration_seconds: interceptors, auth, handler)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("method") == "GetBoard" and sample.name.endswith(("_sum", "_count")):
                samples[sample.name] = sample.value
    codes = {
        sample.labels["code"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kb_grpc_requests_total" and sample.labels.get("method") == "GetBoard"
    }
    board_n = samples.get("kb_board_query_seconds_count", 0)
    call_n = samples.get("kb_grpc_request_duration_seconds_count", 0)
    return {
        "server_codes": codes,
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
    parser.add_argument(
        "--generator",
        choices=("python", "h2load"),
        default="python",
        help="the load generator: grpc.aio in this process, or h2load (Debian's nghttp2-client) in its own",
    )
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
        metadata = (("authorization", f"Bearer {token}"),)
        warm = await first_board(grpc_port, metadata)
        if args.generator == "h2load":
            result = await asyncio.to_thread(load_h2load, grpc_port, token, args.rps, args.seconds, args.clients)
        else:
            result = await load_python(grpc_port, metadata, args.rps, args.seconds, args.clients)
        result.update(server_side(metrics_port))
        if args.generator == "h2load":  # h2load cannot see gRPC statuses: the server's count is the outcome
            result["ok"] = int(result["server_codes"].get("OK", 0)) - 1  # less the call before the clock
            result["errors"] = result["requests"] - result["ok"]
        result = {
            "benchmark": "board GetBoard latency",
            "generator": args.generator,
            "clients": args.clients,
            "offered_rps": args.rps,
            "seconds": args.seconds,
            "log_events": args.events,
            "routes": args.routes,
            **result,
            "board_ranked": len(warm.ranked),
            "board_listed_beside": len(warm.listed_beside),
            "reply_bytes": warm.ByteSize(),
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
