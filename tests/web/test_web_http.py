"""The web board over plain HTTP, against the same stack: statuses a reader gets, headers on every answer, the live
stream's events, its limit, its metrics; and the chart's geometry from a check's subtasks."""

import asyncio
import gzip
import re

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from kernelboard.v1 import events_pb2

from services.common.eventlog import NewEvent
from services.web import app, chart
from services.web.source import BoardSource, ThreadSource
from tests.board.board_events import append_all
from tests.common.waiting import eventually

from .web_events import CPU_PROFILE, HOSTILE_REASON, HOSTILE_ROUTE, at, started, subtasks

ROUTE_RULE = "2-40 characters of a-z, 0-9 and &#39;-&#39;, starting with a letter or digit"


async def get(stack, path: str) -> tuple[int, str, dict]:
    async with aiohttp.ClientSession() as session, session.get(stack.web_url + path) as reply:
        return reply.status, await reply.text(), dict(reply.headers)


def error_text(body: str) -> str:
    return re.search(r'<p class="error" id="error">(.*?)</p>', body, re.S).group(1)


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/board/9", 404, "no board for benchmark version 9 (boards: 1, 2)"),
        ("/board/9.json", 404, "no board for benchmark version 9 (boards: 1, 2)"),
        ("/route/nosuch", 404, "no route &#39;nosuch&#39; in the log"),
        ("/route/" + "x" * 201, 400, "route &#39;" + "x" * 64 + "&#39;… (201 characters): " + ROUTE_RULE),
        ("/route/%3Cb%3E", 400, "route &#39;&lt;b&gt;&#39;: " + ROUTE_RULE),
        ("/nothing/here", 404, "Not Found"),
        ("/board/-1", 404, "Not Found"),
    ],
)
async def test_what_a_reader_gets_for_what_is_not_there(stack, path, status, message):
    got, body, headers = await get(stack, path)
    assert (got, error_text(body)) == (status, message)
    assert headers["Content-Security-Policy"].startswith("default-src 'none'; script-src 'self'")
    assert headers["X-Content-Type-Options"] == "nosniff"


async def test_every_page_is_public_and_says_how_it_may_be_used(stack):
    for path in ("/", "/boards", "/board/1", "/route/fast"):
        status, body, headers = await get(stack, path)
        assert status == 200, path
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["X-Frame-Options"] == "DENY" and headers["Referrer-Policy"] == "no-referrer"
        scripts = re.findall(r"<script[^>]*>", body)  # none inline: only this server's own file, on board pages
        assert scripts == (['<script src="/static/live.js" defer>'] if path in ("/", "/board/1") else []), path
    assert (await get(stack, "/healthz"))[:2] == (200, "ok\n")


@pytest.mark.parametrize(
    ("route", "line"),
    [
        # an unverified pass: no score, and the reason says where it passed and why it is not verified
        ("smoke", f"Listed beside: passed, unverified (CPU profile) — not verified: {CPU_PROFILE} ("),
        # a failed check: no score, its reason as text
        ("markup", "Listed beside: failed — " + HOSTILE_REASON.replace("<", "&lt;").replace(">", "&gt;")),
    ],
)
async def test_a_route_page_words_what_is_listed_beside_as_kb_board_does(stack, route, line):
    status, body, _ = await get(stack, f"/route/{route}")
    assert status == 200
    assert "(the check listed beside, unranked)" in body  # never "the check that places it": it does not rank
    text = " ".join(re.sub(r"<[^>]+>", " ", body).split()).replace("&#39;", "'")
    assert line in text


async def test_the_live_stream_sends_the_board_as_escaped_html_with_its_log_position(stack):
    async with aiohttp.ClientSession() as session, session.get(stack.web_url + "/live/2") as reply:
        assert reply.status == 200 and reply.headers["Content-Type"] == "text/event-stream"
        assert await reply.content.readuntil(b"\n\n") == b"retry: 3000\n\n"
        event = (await asyncio.wait_for(reply.content.readuntil(b"\n\n"), 10)).decode()
    lines = event.splitlines()
    assert lines[0] == "event: board"
    position = int(lines[1].removeprefix("id: "))
    assert position == stack.background.projector.state.position
    fragment = "\n".join(line.removeprefix("data: ") for line in lines[2:])
    assert '<table class="ranked" id="ranked">' in fragment
    assert HOSTILE_ROUTE not in fragment
    assert "&lt;script&gt;alert(&#39;route&#39;)&lt;/script&gt;" in fragment


async def test_live_streams_past_the_limit_are_refused_and_the_metrics_count_them(stack):
    source = BoardSource(stack.board_address, stack.tokens["system:web"])
    client = TestClient(TestServer(app.make_app(source, ThreadSource("127.0.0.1:1", "unused"), max_live=1)))
    await client.start_server()
    try:
        first = await client.get("/live/0")
        assert first.status == 200
        await first.content.readuntil(b"\n\n")
        refused = await client.get("/live/0")
        assert refused.status == 503
        assert await refused.text() == "too many live readers; the page still reads without them\n"
        first.close()
    finally:
        await client.close()
        await source.close()
    async with aiohttp.ClientSession() as session, session.get(stack.metrics_url) as reply:
        exposition = await reply.text()
    assert re.search(r'kb_web_requests_total\{code="200",page="board"\} [1-9]', exposition)
    assert "kb_web_request_duration_seconds_bucket" in exposition and "kb_web_live_streams " in exposition


async def test_a_revoked_token_turns_every_page_into_unavailable_not_into_an_error(stack):
    source = BoardSource(stack.board_address, "kb_" + "0" * 43)
    client = TestClient(TestServer(app.make_app(source, ThreadSource("127.0.0.1:1", "unused"))))
    await client.start_server()
    try:
        page = await client.get("/")
        assert page.status == 503
        assert error_text(await page.text()) == "the board service is unavailable (UNAUTHENTICATED)"
        health = await client.get("/healthz")
        assert health.status == 503
    finally:
        await client.close()
        await source.close()


def test_the_chart_puts_each_problem_on_a_log_axis_with_its_floor():
    drawn = chart.speedup_chart(subtasks(2.0))
    assert [bar.problem for bar in drawn.bars][:2] == ["matmul", "log_softmax"]
    matmul, hinge = drawn.bars[0], drawn.bars[-1]
    assert (matmul.speedup, matmul.floor_speedup, matmul.state) == (1.2, 2.4, "passed")
    assert (hinge.speedup, hinge.floor_x, hinge.state) == (1.0, None, "baseline")
    # log axis: the floor at twice the speed-up lies the same distance right of every bar
    gaps = [bar.floor_x - bar.width for bar in drawn.bars if bar.floor_x is not None]
    assert len(gaps) == 11 and min(gaps) > 0 and max(gaps) - min(gaps) <= 0.2  # coordinates are rounded to 0.1
    assert hinge.width == drawn.eager_x
    assert [tick.label for tick in drawn.ticks] == ["0.5×", "1×", "2×", "5×"]
    assert drawn.bars[1].y - drawn.bars[0].y == chart.ROW_HEIGHT and drawn.height > drawn.bottom


def test_the_chart_survives_what_a_check_may_carry():
    assert chart.speedup_chart([]) is None
    odd = [
        events_pb2.Subtask(id="zero", submitted=True, speedup=0.0),
        events_pb2.Subtask(id="nan", submitted=True, speedup=float("nan"), floor_fraction=0.5),
        events_pb2.Subtask(id="huge", submitted=True, speedup=1e300, floor_fraction=1e-300),
        events_pb2.Subtask(id="fine", submitted=True, speedup=3.0, floor_fraction=0.25, flagged=True),
    ]
    drawn = chart.speedup_chart(odd)
    zero, nan, huge, fine = drawn.bars
    assert (zero.speedup, zero.width, nan.speedup, nan.floor_x) == (None, 0.0, None, None)
    assert all(0 <= bar.width <= drawn.plot_right - drawn.plot_left for bar in drawn.bars)
    assert huge.floor_x is None  # 1e300 / 1e-300 overflows to inf: no mark rather than one off the chart
    assert fine.flagged and fine.floor_speedup == 12.0
    assert 2 <= len(drawn.ticks) <= 9  # 300 decades: a few powers of ten, not 900 ticks


async def test_live_readers_of_a_board_share_one_watchboard_stream(stack):
    async def metric(name: str) -> float:
        async with aiohttp.ClientSession() as session, session.get(stack.metrics_url) as reply:
            text = await reply.text()
        return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))

    async with aiohttp.ClientSession() as session:
        readers = [await session.get(stack.web_url + "/live/1") for _ in range(5)]
        try:
            for reader in readers:
                await reader.content.readuntil(b"\n\n")  # retry
                assert (await asyncio.wait_for(reader.content.readuntil(b"\n\n"), 10)).startswith(b"event: board\n")
            assert await metric("kb_web_live_streams") >= 5  # readers that left count until their next write
            # One stream per board version read (at most 0, 1 and 2 here), not one per reader.
            assert await metric("kb_web_board_feeds") <= 3
        finally:
            for reader in readers:
                reader.close()


async def test_a_board_page_is_gzipped_for_readers_that_take_it_and_reads_the_same(stack):
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(stack.web_url + "/", headers={"Accept-Encoding": "identity"}) as plain:
            body = await plain.read()
            assert "Content-Encoding" not in plain.headers
        async with session.get(stack.web_url + "/", headers={"Accept-Encoding": "gzip, br"}) as zipped:
            assert (zipped.headers["Content-Encoding"], zipped.headers["Vary"]) == ("gzip", "Accept-Encoding")
            assert gzip.decompress(await zipped.read()) == body


def cells(body: str, table: str) -> list[list[str]]:
    """The rows of a table of the page, each cell's text."""
    found = re.search(rf'<table[^>]*id="{table}">(.*?)</table>', body, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", found.split("<tbody>", 1)[1], re.S)
    return [[text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def test_the_boards_list_marks_the_earlier_board_as_the_board_service_says(stack):
    status, body, _ = await get(stack, "/boards")
    assert status == 200
    rows = cells(body, "boards")
    assert [row[:2] for row in rows] == [["version 2", "current"], ["version 1", "earlier"]]
    status, body, _ = await get(stack, "/board/1")
    text = text_of(body)
    assert "An earlier board: benchmark version 1. The current board is version 2 ." in text


async def test_routes_whose_intervals_overlap_share_a_place_and_show_their_interval(stack):
    """A maintainer's report whose interval overlaps the leader's point: both shown "=1", the report with its
    interval, as kb board words them (services/board/render.py)."""

    async def ranked() -> list[list[str]]:
        return cells((await get(stack, "/board/2"))[1], "ranked")

    before = await ranked()
    noisy = events_pb2.MetricsReported(
        route="wide", sha="d" * 40, score=2.45, cost=1.0, by_maintainer=True, reporter="curator", benchmark_version=2
    )
    noisy.score_low, noisy.score_high = 2.3, 2.55
    report = ("route:wide", NewEvent(noisy, actor="curator", occurred_at=at(41)))
    await append_all(stack.log, [started("wide", "carol", 40), report])
    await stack.until_folded()
    rows = await eventually(lambda: _longer(ranked(), len(before)), "the report ranked on the page", 20)
    top = {row[1]: row for row in rows[:2]}
    assert top["fast"][0] == "=1" and top["fast"][3] == "2.500"  # a check without an interval: its score alone
    assert top["wide"][0] == "=1" and top["wide"][3] == "2.450 (2.300–2.550)"


async def _longer(rows, than: int):
    rows = await rows
    return rows if len(rows) > than else None
