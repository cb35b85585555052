"""A real service process: /metrics over HTTP, JSON logs, and a graceful exit on SIGTERM and SIGINT."""

import asyncio
import json
import os
import signal
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
from kernelboard.v1 import board_pb2, board_pb2_grpc

from tests.common.servicers import SLOW_VERSION_BASE

REPO = Path(__file__).resolve().parents[2]


async def start_service(*args, **extra_env):
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'protos'}", **extra_env}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.common.serve_test_services",
        *args,
        cwd=REPO,
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    lines = []
    while True:
        raw = await asyncio.wait_for(proc.stderr.readline(), 20)
        assert raw, f"service exited before serving: {lines}"
        lines.append(json.loads(raw))
        if lines[-1]["event"] == "serving":
            return proc, lines


async def read_rest(proc) -> list[dict]:
    out = await asyncio.wait_for(proc.stderr.read(), 20)
    return [json.loads(line) for line in out.decode().splitlines()]


def fetch_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_lets_the_running_call_finish_then_exits_zero(signum):
    proc, lines = await start_service()
    serving = lines[-1]
    assert serving["service"] == "test" and serving["level"] == "info" and "timestamp" in serving
    assert any(line["event"] == "on_start ran" for line in lines)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{serving['port']}") as channel:
        stub = board_pb2_grpc.BoardStub(channel)
        await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=(("x-request-id", "req-42"),))
        metrics = await asyncio.to_thread(fetch_metrics, serving["metrics_port"])
        assert 'kb_grpc_requests_total{code="OK",method="GetBoard",service="kernelboard.v1.Board"} 1.0' in metrics
        assert 'kb_grpc_request_duration_seconds_bucket{le="0.005",method="GetBoard"' in metrics
        assert "kb_grpc_in_flight" in metrics

        in_flight = asyncio.ensure_future(stub.GetBoard(board_pb2.GetBoardRequest(version=SLOW_VERSION_BASE + 1500)))
        await asyncio.sleep(0.5)
        proc.send_signal(signum)
        reply = await asyncio.wait_for(in_flight, 10)
        assert reply.version == SLOW_VERSION_BASE + 1500
    assert await asyncio.wait_for(proc.wait(), 15) == 0
    events = [line["event"] for line in await read_rest(proc)]
    assert events.index("shutting down") < events.index("on_stop ran") < events.index("stopped")


async def run_calls_and_read_the_log(**extra_env) -> dict[str, dict]:
    """Three GetBoard calls (fast, failed, slow by 0.3 s), tagged req-fast/req-failed/req-slow: their log lines."""
    proc, lines = await start_service(**extra_env)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{lines[-1]['port']}") as channel:
        stub = board_pb2_grpc.BoardStub(channel)
        await stub.GetBoard(board_pb2.GetBoardRequest(version=2), metadata=(("x-request-id", "req-fast"),))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetBoard(board_pb2.GetBoardRequest(version=-1), metadata=(("x-request-id", "req-failed"),))
        await stub.GetBoard(
            board_pb2.GetBoardRequest(version=SLOW_VERSION_BASE + 300), metadata=(("x-request-id", "req-slow"),)
        )
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 15) == 0
    finished = [line for line in await read_rest(proc) if line["event"] == "rpc finished"]
    return {line["request_id"]: line for line in finished if line.get("request_id", "").startswith("req-")}


async def test_failed_and_slow_calls_are_logged_with_their_request_id_and_method():
    logged = await run_calls_and_read_the_log(KB_SLOW_RPC_MS="200")
    assert sorted(logged) == ["req-failed", "req-slow"]  # a fast call that succeeds is counted, not logged at info
    assert logged["req-failed"]["code"] == "INVALID_ARGUMENT" and logged["req-failed"]["level"] == "info"
    slow = logged["req-slow"]
    assert slow["rpc"] == "/kernelboard.v1.Board/GetBoard" and slow["code"] == "OK" and slow["service"] == "test"
    assert slow["slow"] is True and slow["duration_ms"] >= 300


async def test_debug_level_logs_every_call():
    logged = await run_calls_and_read_the_log(KB_LOG_LEVEL="DEBUG", KB_SLOW_RPC_MS="200")
    assert sorted(logged) == ["req-failed", "req-fast", "req-slow"]
    assert logged["req-fast"]["level"] == "debug" and logged["req-fast"]["duration_ms"] >= 0


async def test_service_with_a_pool_signs_callers_in_and_closes_the_pool_on_stop(event_log, database_url):
    from services.common import auth

    async with event_log.pool.acquire() as conn:
        await auth.register_principal(conn, "sam", auth.PERSON, "", auth.MEMBER, log=event_log, actor="test")
        token = await auth.issue_token(conn, "sam")
    proc, lines = await start_service(database_url, KB_SLOW_RPC_MS="0")  # every call logged, to see who made it
    async with grpc.aio.insecure_channel(f"127.0.0.1:{lines[-1]['port']}") as channel:
        stub = board_pb2_grpc.BoardStub(channel)
        reply = await stub.GetBoard(board_pb2.GetBoardRequest(), metadata=(("authorization", f"Bearer {token}"),))
        assert reply.status == "sam|sam|member"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetBoard(board_pb2.GetBoardRequest())
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 15) == 0
    rest = await read_rest(proc)
    assert any(line["event"] == "on_stop ran" for line in rest)
    denied = [line for line in rest if line.get("code") == "UNAUTHENTICATED"]
    assert denied and denied[0]["rpc"] == "/kernelboard.v1.Board/GetBoard"
    signed_in = [line for line in rest if line.get("principal") == "sam"]
    assert signed_in and signed_in[0]["code"] == "OK"
