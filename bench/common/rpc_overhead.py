"""What the scaffolding costs per call: a bare grpc.aio server vs start_server (metrics, request id, logs) vs
start_server with auth, signed in from its token cache, vs auth with a PostgreSQL lookup per call (what every call
costs while the cache's listener is down: an AuthInterceptor whose listener is never started).

    PYTHONPATH=.:protos .venv/bin/python bench/common/rpc_overhead.py [--calls 2000] [--concurrency 32]

Needs the local PostgreSQL (creates and drops its own database). Prints one line per setup.
"""

import argparse
import asyncio
import statistics
import time
import uuid

import asyncpg
import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc
from prometheus_client import REGISTRY

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.logs import configure_logging

ADMIN_URL = "postgresql://root@127.0.0.1:5432/postgres"


class Board(board_pb2_grpc.BoardServicer):
    async def GetBoard(self, request, context):
        return board_pb2.BoardView(version=request.version)


def add_board(server):
    board_pb2_grpc.add_BoardServicer_to_server(Board(), server)
    return [board_pb2.DESCRIPTOR.services_by_name["Board"].full_name]


async def measure(port: int, calls: int, concurrency: int, metadata) -> tuple[float, float, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = board_pb2_grpc.BoardStub(channel)
        for _ in range(50):  # warm up the channel and the pool
            await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=metadata)
        latencies = []
        for _ in range(calls // 4):
            started = time.perf_counter()
            await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=metadata)
            latencies.append(time.perf_counter() - started)
        remaining = iter(range(calls))

        async def worker():
            for _ in remaining:
                await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=metadata)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.99)] * 1000, calls / elapsed


async def main(calls: int, concurrency: int) -> None:
    configure_logging("bench", level="WARNING")
    name = f"kb_bench_common_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    log = await EventLog.connect(ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", migrate=True)
    try:
        async with log.pool.acquire() as conn:
            await auth.register_principal(conn, "bench", auth.PERSON, "", auth.MEMBER, log=log, actor="bench")
            token = await auth.issue_token(conn, "bench")

        bare = grpc.aio.server()
        add_board(bare)
        bare_port = bare.add_insecure_port("127.0.0.1:0")
        await bare.start()
        plain = await start_server("bench", add_board, port=0)
        authed = await start_server("bench", add_board, port=0, pool=log.pool)
        while not REGISTRY.get_sample_value("kb_auth_listener_connected"):
            await asyncio.sleep(0.01)
        uncached = await start_server("bench", add_board, port=0, interceptors=[auth.AuthInterceptor(log.pool)])
        signed_in = (("authorization", f"Bearer {token}"),)
        setups = [
            ("bare grpc.aio", bare_port, ()),
            ("start_server, no auth", plain.port, ()),
            ("start_server + auth (token cache)", authed.port, signed_in),
            ("start_server + auth (PostgreSQL lookup)", uncached.port, signed_in),
        ]
        print(f"{calls} unary calls, {concurrency} concurrent; sequential latency on {calls // 4} calls")
        for label, port, metadata in setups:
            p50, p99, rate = await measure(port, calls, concurrency, metadata)
            print(f"{label:42s} p50 {p50:6.3f} ms  p99 {p99:6.3f} ms  {rate:8.0f} calls/s")
        await bare.stop(0)
        await plain.stop(0)
        await authed.stop(0)
        await uncached.stop(0)
    finally:
        await log.close()
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.concurrency))
