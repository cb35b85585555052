"""A result a maintainer disqualified after the fact, in a real browser: it leaves the ranking and each problem's
leaderboard, and stays listed beside with its score as evidence, the maintainer and the reason, on every page that
shows it, as `kb board` words it."""

import pytest
from google.protobuf import json_format
from kernelboard.v1 import board_pb2, events_pb2

from contracts import results
from services.common.eventlog import NewEvent

from .conftest import web_stack
from .test_web_browser import kb_board_json, table_rows
from .web_events import at, seeded

REASON = "outputs cached on input pointers"


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    verdict = events_pb2.CheckDisqualified(
        check_id="202", route="fast", sha="00000202" + "ab" * 16, benchmark_version=2, reason=REASON, disqualified=True
    )
    events = [*seeded(), ("check:202", NewEvent(verdict, actor="curator", occurred_at=at(30)))]
    async with web_stack(tmp_path_factory.mktemp("web-disqualified"), events) as running:
        yield running


async def test_a_disqualified_check_is_listed_beside_with_its_reason_on_every_page(stack, page_without_js):
    page = page_without_js
    board = json_format.ParseDict(await kb_board_json(stack), board_pb2.BoardView(), ignore_unknown_fields=True)
    [marked] = [e for e in board.listed_beside if e.source == results.DISQUALIFIED]
    assert (marked.route, marked.check_id, marked.reporter, marked.reason) == ("fast", "202", "curator", REASON)
    [fast] = [e for e in board.ranked if e.route == "fast"]
    assert fast.check_id == "201"  # the route ranks with its best check that stands

    await page.goto(stack.web_url + "/")
    beside = [r for r in await table_rows(page, "#beside") if r["route"] == "fast"]
    assert [r["reason"] for r in beside] == [f"disqualified by curator: {REASON}"]
    assert beside[0]["score"] == "2.500 (not counted)"  # kept, as evidence

    await page.goto(stack.web_url + "/route/fast")
    entries = await page.inner_text("#entries-2")
    assert f"disqualified by curator: {REASON}" in entries and "Ranked #" in entries
    history = await page.inner_text("#history-2")
    assert "disqualified" in history and REASON in history

    await page.goto(stack.web_url + "/problems")
    matmul = (await table_rows(page, "#problems"))[0]
    assert (matmul["route"], matmul["best speed-up"]) == ("fast", "1.200×")  # 201's 2.0 · 0.6, not 202's
