"""The web board's page under load: open loop at a fixed request rate, through the real processes.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/web/bench_board_page.py [--rps 100] [--seconds 30] \
        [--path /] [--events 20000] [--routes 200] [--accept-encoding gzip|identity]

A scratch database (dropped afterwards) gets bench/board's generated log (--events over --routes routes) and the
service identity system:web with a token; the board service's read path runs in its own process
(bench/board/serve_for_bench.py: projector caught up, gRPC with auth) and the web board in another
(`python -m services.web.server`, as `make up` runs it). This process requests --path (the newest board: GetBoard,
then the page rendered) at --rps, each request timed from send to the last byte, whether or not the earlier ones have
answered. Prints JSON, with the web's own account (kb_web_request_duration_seconds) beside the client's.
"""

import argparse
import asyncio
import gzip
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp
import asyncpg
from prometheus_client.parser import text_string_to_metric_families

BOARD_BENCH = Path(__file__).resolve().parents[1] / "board"
sys.path.insert(0, str(BOARD_BENCH))

from bench_getboard import fill  # noqa: E402  (the generated log, as the GetBoard bench fills it)

from services.common import auth  # noqa: E402
from services.common.eventlog import EventLog  # noqa: E402

ADMIN_URL = os.environ.get("KB_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def web_token(database_url: str) -> str:
    log = await EventLog.connect(database_url)
    try:
        async with log.pool.acquire() as conn:
            await auth.register_principal(
                conn, "system:web", auth.SERVICE, "system:web", auth.SIGNED_IN, log=log, actor="bench"
            )
            return await auth.issue_token(conn, "system:web")
    finally:
        await log.close()


async def wait_for(what: str, check, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready (exit {process.poll()})")
        await asyncio.sleep(0.2)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


async def load(url: str, rps: int, seconds: float, encoding: str) -> dict:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    # The page's bytes as they come (not inflated here): the time measured is the server's and the wire's, not this
    # client's zlib; a browser inflates the page in its own time.
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=200), auto_decompress=False, headers={"Accept-Encoding": encoding}
    ) as session:
        async with session.get(url) as warm:
            wire = await warm.read()
            assert warm.status == 200, warm.status
            page = gzip.decompress(wire) if warm.headers.get("Content-Encoding") == "gzip" else wire

        async def one() -> None:
            sent = time.perf_counter()
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as reply:
                    await reply.read()
                    if reply.status != 200:
                        errors[str(reply.status)] = errors.get(str(reply.status), 0) + 1
                        return
                latencies.append(time.perf_counter() - sent)
            except (aiohttp.ClientError, TimeoutError) as err:
                errors[type(err).__name__] = errors.get(type(err).__name__, 0) + 1

        total = int(rps * seconds)
        tasks = []
        started = time.perf_counter()
        for i in range(total):
            delay = started + i / rps - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one()))
        sending_s = time.perf_counter() - started
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000, 2)

    return {
        "requests": total,
        "ok": len(latencies),
        "errors": errors,
        "offered_rps": rps,
        "achieved_rps": round(total / sending_s, 1),
        "completed_in_s": round(elapsed, 2),
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(ordered[-1] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
        "page_bytes": len(page),
        "page_wire_bytes": len(wire),
        "page_ranked_rows": page.count(b'<td class="num rank">'),
    }


def server_side(metrics_url: str) -> dict:
    """The web's own account: mean time per page (kb_web_request_duration_seconds) and the board calls that failed."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    sums, failed = {}, 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("kb_web_request_duration_seconds") and sample.labels.get("page") == "board":
                if sample.name.endswith(("_sum", "_count")):
                    sums[sample.name.rsplit("_", 1)[1]] = sample.value
            elif sample.name == "kb_web_board_errors_total":
                failed += int(sample.value)
    return {
        "web_page_mean_ms": round(sums["sum"] / sums["count"] * 1000, 3) if sums.get("count") else None,
        "web_board_call_errors": failed,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--path", default="/")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--routes", type=int, default=200)
    parser.add_argument("--accept-encoding", default="gzip", help="gzip (as browsers) or identity")
    args = parser.parse_args()

    name = f"kb_bench_web_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    database_url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    processes: list[subprocess.Popen] = []
    scratch = Path(tempfile.mkdtemp())
    try:
        await fill(database_url, args.events, args.routes)
        token_file = scratch / "web.token"
        token_file.write_text(await web_token(database_url) + "\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        port_file = scratch / "port"
        board = subprocess.Popen(
            [sys.executable, str(BOARD_BENCH / "serve_for_bench.py"), database_url, str(port_file)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(board)
        await wait_for("the board service", lambda: port_file.exists() and port_file.read_text(), board)
        board_port = int(port_file.read_text().split()[0])
        web_port, metrics_port = free_port(), free_port()
        web_env = {
            **env,
            "KB_BOARD_ADDR": f"127.0.0.1:{board_port}",
            "KB_WEB_PORT": str(web_port),
            "KB_WEB_METRICS_PORT": str(metrics_port),
            "KB_WEB_TOKEN_FILE": str(token_file),
        }
        web = subprocess.Popen(
            [sys.executable, "-m", "services.web.server"],
            env=web_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(web)
        base = f"http://127.0.0.1:{web_port}"
        await wait_for("the web board", lambda: answers(f"{base}/healthz"), web)
        result = await load(base + args.path, args.rps, args.seconds, args.accept_encoding)
        result.update(server_side(f"http://127.0.0.1:{metrics_port}/metrics"))
        print(
            json.dumps(
                {
                    "benchmark": "web board page latency",
                    "path": args.path,
                    "accept_encoding": args.accept_encoding,
                    "seconds": args.seconds,
                    "log_events": args.events,
                    "routes": args.routes,
                    **result,
                    "cpus": os.cpu_count(),
                    "load_average_1m": round(os.getloadavg()[0], 2),
                }
            )
        )
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(10)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
