"""The web board's tests: the real flow under it and a real browser in front of it.

A database of the module's own on the real PostgreSQL, the relay publishing its log to a JetStream stream of its own,
the board service following it through its Consumer and serving gRPC with real auth, the web board in its own process
(``python -m services.web.server``, signed in as system:web), and Debian's headless Chromium driven by Playwright.
"""

import asyncio
import contextlib
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import hypothesis  # noqa: F401  (see below)
import pytest
from playwright.async_api import async_playwright

from services.board.api import add_to_server
from services.board.server import BoardBackground
from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.relay import Relay
from services.ingest.api import add_to_server as add_ingest
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from tests.board.board_events import append_all
from tests.common.waiting import eventually
from tests.streams import throwaway_stream
from tests.support.databases import throwaway_database

from .web_events import seeded

# hypothesis is imported above, before any browser runs: its pytest plugin imports it lazily at the end of the session,
# and Python 3.11.7's ast.parse (pytest's assertion rewriting) then fails with "AST constructor recursion depth
# mismatch" once Playwright's driver has run in this process (a CPython 3.11 bug in that check's bookkeeping).

# Debian's chromium (apt-get install chromium; .ci/run installs it). Playwright's own browser download is not used.
CHROMIUM = os.environ.get("KB_TEST_CHROMIUM", "/usr/bin/chromium")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Stack:
    log: EventLog
    background: BoardBackground
    board_address: str
    tokens: dict[str, str]
    web_url: str
    metrics_url: str
    ingest: Ingest | None = None  # with_ingest: the project's issues and pull requests, read by the web as system:web

    async def until_folded(self, timeout_s: float = 20) -> None:
        head = await self.log.head_position()
        await eventually(
            lambda: self.background.projector.state.position >= head, "the board folded the log", timeout_s
        )


async def _web_process(
    board_address: str, token_file: Path, port: int, metrics_port: int, log_file: Path, ingest_address: str
):
    env = {
        **os.environ,
        "KB_BOARD_ADDR": board_address,
        "KB_INGEST_ADDR": ingest_address,
        "KB_WEB_TOKEN_FILE": str(token_file),
        "KB_WEB_PORT": str(port),
        "KB_WEB_METRICS_PORT": str(metrics_port),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    with open(log_file, "wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.web.server", env=env, stdout=out, stderr=out
        )


@contextlib.asynccontextmanager
async def web_stack(home: Path, events=None, *, with_ingest: bool = False):
    """The whole read path over ``events`` (default: web_events.seeded()), torn down on the way out; ``with_ingest``:
    the ingest service too (its own hosted repository), whose issues and pull requests the web reads."""
    async with throwaway_database("web") as url:
        log = await EventLog.connect(url, migrate=True)
        try:
            async with log.pool.acquire() as conn:
                await auth.register_principal(
                    conn, "curator", auth.PERSON, "curator", auth.MAINTAINER, log=log, actor="system:admin"
                )
                await auth.register_principal(
                    conn, "system:web", auth.SERVICE, "system:web", auth.SIGNED_IN, log=log, actor="system:admin"
                )
                tokens = {name: await auth.issue_token(conn, name) for name in ("curator", "system:web")}
            token_file = home / "web.token"
            token_file.write_text(tokens["system:web"] + "\n")
            await append_all(log, seeded() if events is None else events)
            async with throwaway_stream("web", database_url=url) as settings:
                relay = Relay(log, settings, poll_interval_s=0.1)
                relay_task = asyncio.create_task(relay.run())
                background = BoardBackground(log, settings, consumer_name=f"board_{secrets.token_hex(3)}")
                await background.start()
                await asyncio.wait_for(background.consumer.ready.wait(), 10)
                server = await start_server("board", add_to_server(background.projector), port=0, pool=log.pool)
                board_address = f"127.0.0.1:{server.port}"
                ingest, ingest_server, ingest_address = None, None, "127.0.0.1:1"  # none: its pages are unavailable
                if with_ingest:
                    ingest = Ingest(log, HostedRepo(home / "repo.git"))
                    await ingest.start()
                    ingest_server = await start_server(
                        "ingest", lambda grpc_server: add_ingest(grpc_server, ingest), port=0, pool=log.pool
                    )
                    ingest_address = f"127.0.0.1:{ingest_server.port}"
                port, metrics_port = free_port(), free_port()
                web_log = home / "web.log"
                web = await _web_process(board_address, token_file, port, metrics_port, web_log, ingest_address)
                stack = Stack(
                    log,
                    background,
                    board_address,
                    tokens,
                    f"http://127.0.0.1:{port}",
                    f"http://127.0.0.1:{metrics_port}/metrics",
                    ingest,
                )
                try:
                    await _until_healthy(stack.web_url, web, web_log)
                    await stack.until_folded()
                    yield stack
                finally:
                    web.terminate()
                    await asyncio.wait_for(web.wait(), 20)
                    await server.stop(0)
                    if ingest is not None:
                        await ingest_server.stop(0)
                        await ingest.stop()
                    await background.stop()
                    await relay.stop()
                    await asyncio.wait_for(relay_task, 10)
        finally:
            await log.close()


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    async with web_stack(tmp_path_factory.mktemp("web")) as running:
        yield running


async def _until_healthy(web_url: str, process, log_file: Path) -> None:
    async def healthy() -> bool:
        assert process.returncode is None, f"the web process exited: {log_file.read_text()[-2000:]}"
        try:
            async with aiohttp.ClientSession() as session, session.get(f"{web_url}/healthz") as reply:
                return reply.status == 200
        except aiohttp.ClientConnectionError:
            return False

    await eventually(healthy, "the web board answers /healthz", timeout_s=30, interval_s=0.1)


@pytest.fixture(scope="module")
async def browser():
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}: apt-get install chromium (or set KB_TEST_CHROMIUM)"
    async with async_playwright() as playwright:
        # --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser):
    """A page with JavaScript on; every dialog (an alert that escaped the escaping) is recorded, never answered."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    opened.dialogs = []
    opened.on("dialog", lambda dialog: opened.dialogs.append(dialog.message))
    yield opened
    await context.close()


@pytest.fixture
async def page_without_js(browser):
    context = await browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    yield await context.new_page()
    await context.close()
