"""The web board in a real browser (Debian's headless Chromium through Playwright), over the real flow.

What a person sees: the seeded board as `kb board --json` has it, with JavaScript off too; a verified result that
lands while the page is open appears without a reload; an earlier board is reachable and marked; text from the log
that carries markup reads as text and runs nothing.
"""

import asyncio
import json
import os
import sys
from asyncio.subprocess import PIPE

import aiohttp
from google.protobuf import json_format
from kernelboard.v1 import board_pb2

from contracts import results
from tests.board.board_events import append_all

from .web_events import HOSTILE_REASON, HOSTILE_ROUTE, HOSTILE_VIOLATION, PROBLEMS, checked, started


async def kb_board_json(stack, *argv) -> dict:
    """`kb board --json ARGV` in its own process, signed in as the curator, against the stack's board service."""
    env = {
        **os.environ,
        "KB_TOKEN": stack.tokens["curator"],
        "KB_BOARD_ADDR": stack.board_address,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "board", "--json", *argv, env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def table_rows(page, selector: str) -> list[dict[str, str]]:
    """Each row of the table as {its column's heading: the text a reader sees}."""
    return await page.eval_on_selector(
        selector,
        """table => {
            const heads = [...table.tHead.rows[0].cells].map(c => c.innerText.trim());
            return [...table.tBodies[0].rows].map(r =>
                Object.fromEntries([...r.cells].map((c, i) => [heads[i], c.innerText.trim()])));
        }""",
    )


def expected_ranked(board: dict) -> list[dict[str, str]]:
    """The ranked table as the page must show kb board --json's entries, each worded by contracts/results.py as
    `kb board` words it: every entry, in order."""
    view = json_format.ParseDict(board, board_pb2.BoardView())
    return [
        {
            "#": results.place(e),
            "route": e.route,
            "owner": e.owner,
            "score": results.entry_verdict(e).score,
            "cost (GPU-s)": results.number(e.cost),
            "result": results.entry_verdict(e).label,
            "sha": e.sha[:10],
            "runner": e.runner,
            "when": results.when(e.occurred_at),
            "note": "; ".join(x for x in ("adopted" if e.adopted else "", results.entry_reason(e)) if x),
        }
        for e in view.ranked
    ]


def expected_beside(board: dict) -> list[dict[str, str]]:
    """Listed beside as `kb board` words it: no score for a failed or an unverified check, another's report marked
    not counted, and an unverified check's reason saying why it is not verified."""
    view = json_format.ParseDict(board, board_pb2.BoardView())
    return [
        {
            "route": e.route,
            "owner": e.owner,
            "score": results.entry_verdict(e).score,
            "result": results.entry_verdict(e).label,
            "sha": e.sha[:10],
            "reason": results.entry_reason(e),
            "when": results.when(e.occurred_at),
        }
        for e in view.listed_beside
    ]


async def test_the_page_shows_exactly_what_kb_board_json_shows_with_javascript_off(stack, page_without_js):
    page = page_without_js
    board = await kb_board_json(stack)
    reply = await page.goto(stack.web_url + "/")
    assert reply.status == 200
    assert board["version"] == 2 and [e["route"] for e in board["ranked"]] == ["fast"]

    assert await page.inner_text("h1") == f"{board['card']['name']} version {board['version']}"
    assert await page.inner_text(".purpose") == board["card"]["task"]
    assert await page.inner_text("#status") == board["status"].capitalize() + (
        f" — {board['status_reason']}" if board["status_reason"] else ""
    )
    header = board["header"]
    for element, value in (
        ("#agents-at-work", str(header["agents_at_work"])),
        ("#agents-in-all", str(header["agents_in_all"])),
        ("#routes", str(header["routes"])),
        ("#last-active", results.when(header["last_active"])),
        ("#started", results.when(header["started"])),
        ("#log-position", board["log_position"]),
    ):
        assert await page.inner_text(element) == str(value), element
    assert await table_rows(page, "#ranked") == expected_ranked(board)
    assert await table_rows(page, "#beside") == expected_beside(board)
    assert {e["source"] for e in board["listed_beside"]} == {
        "failed check",
        "unverified check",
        "incomplete check",
        "reported",
    }

    card = board["card"]
    judging = await page.inner_text("#card")
    for text in (card["metric"], card["baseline"], card["score_rule"], ", ".join(card["kernels"])):
        assert text in judging
    assert await page.inner_text("#rules") == (
        f"commit {card['rules_commit'][:12]}, approved {results.when(card['approved_at'])}"
    )
    for guardrail in card["guardrails"]:
        assert f"{guardrail['name']}\t{results.plain_value(guardrail['value'])}" in judging

    # The page's own JSON is kb board --json, byte for byte.
    async with aiohttp.ClientSession() as session, session.get(f"{stack.web_url}/board/2.json") as json_reply:
        assert json.loads(await json_reply.text()) == await kb_board_json(stack, "--version", "2")


async def test_a_verified_result_appears_live_without_a_reload(stack, page):
    await page.goto(stack.web_url + "/")
    await page.wait_for_selector("#live-state:has-text('live')")
    await page.evaluate("window.loadedOnce = true")  # gone if the page were loaded again
    assert await page.query_selector('#ranked tr[data-route="newcomer"]') is None

    # What a push's check appends once the verifier has judged it: the board folds it from NATS, WatchBoard reports
    # the change, the page's live stream carries it.
    await append_all(stack.log, [started("newcomer", "dave", 30), checked("newcomer", 2, 9.5, 31, check_id="301")])
    row = await page.wait_for_selector('#ranked tr[data-route="newcomer"]', timeout=20_000)
    assert await row.eval_on_selector(".rank", "c => c.innerText") == "1"
    assert await row.eval_on_selector(".score", "c => c.innerText") == "9.500"
    assert await page.evaluate("window.loadedOnce") is True
    board = await kb_board_json(stack)
    assert await table_rows(page, "#ranked") == expected_ranked(board)
    assert await page.inner_text("#log-position") == str(board["log_position"])


async def test_an_earlier_board_is_reachable_and_marked_earlier(stack, page):
    await page.goto(stack.web_url + "/boards")
    rows = await table_rows(page, "#boards")
    assert [(row["version"], row[""]) for row in rows] == [("version 2", "current"), ("version 1", "earlier")]
    await page.click('#boards tr[data-version="1"] a')
    await page.wait_for_url(stack.web_url + "/board/1")
    assert "earlier" in await page.inner_text("h1")
    assert await page.inner_text("#earlier") == (
        "An earlier board: benchmark version 1. The current board is version 2."
    )
    earlier = await kb_board_json(stack, "--version", "1")
    assert await table_rows(page, "#ranked") == expected_ranked(earlier)
    assert [e["route"] for e in earlier["ranked"]] == ["old"]
    await page.click("#earlier a")
    await page.wait_for_url(stack.web_url + "/board/2")
    assert await page.query_selector("#earlier") is None


async def test_text_with_markup_from_the_log_renders_as_text_and_runs_nothing(stack, page):
    reply = await page.goto(stack.web_url + "/")
    assert "script-src 'self'" in reply.headers["content-security-policy"]
    row = page.locator(f'#beside tbody tr[data-route="{HOSTILE_ROUTE}"]')
    assert await row.locator(".route").inner_text() == HOSTILE_ROUTE
    assert await row.locator(".route a").count() == 0  # GetRoute refuses that name: no link to a page that cannot be
    assert await row.locator(".reason").inner_text() == HOSTILE_REASON
    assert await page.locator("#live-board img, #live-board b, #live-board script").count() == 0

    await page.locator('#beside tr[data-route="markup"] .route a').click()
    await page.wait_for_url(stack.web_url + "/route/markup")
    violation = page.locator('#problems-2 tr[data-problem="matmul"] .violation')
    assert await violation.inner_text() == HOSTILE_VIOLATION
    assert HOSTILE_REASON in await page.inner_text("#history-2")
    assert await page.locator("main b, main img, main script").count() == 0
    assert page.dialogs == []


async def test_the_route_page_shows_checks_over_time_and_each_problem_against_the_floor(stack, page):
    await page.goto(stack.web_url + "/route/fast")
    history = await table_rows(page, "#history-2")
    # Newest first: both checks passed and were verified; the better one (2.5) places the route.
    assert [(r["what"], r["score"], r["result"]) for r in history] == [
        ("check", "2.500", "passed, verified"),
        ("check", "2.000", "passed, verified"),
    ]
    problems = await table_rows(page, "#problems-2")
    assert [r["problem"] for r in problems] == PROBLEMS
    matmul, hinge = problems[0], problems[-1]
    # The check that places the route (score 2.5): matmul at 2.5 · 0.6, its floor fraction 0.5.
    assert (matmul["speed-up"], matmul["floor fraction"], matmul["precision ratio"]) == ("1.500×", "0.50", "1")
    assert (matmul["result"], matmul["violations"]) == ("passed", "")
    assert (hinge["result"], hinge["speed-up"]) == ("not submitted (eager)", "—")
    chart = page.locator("#board-2 svg")
    assert await chart.locator(".row").count() == len(PROBLEMS)
    assert await chart.locator(".row.baseline").count() == 1  # hinge_loss, not submitted
    assert await chart.locator(".floor").count() == len(PROBLEMS) - 1
    assert "the check that ranks it" in await page.inner_text("#board-2 h3")

    # The route page links each check's own page: its words, what it ran beside the rules' baseline, every problem.
    await page.click('#history-2 a[href="/route/fast/check/202"]')
    await page.wait_for_url(stack.web_url + "/route/fast/check/202")
    assert await page.inner_text("#check-result") == "passed, verified"
    assert await page.inner_text("#check-score") == "2.500"
    assert "torch 2.11.0+cu130" in await page.inner_text("#check-ran")
    assert "the rules' baseline: PyTorch eager" in await page.inner_text("#check-ran")
    assert [r["problem"] for r in await table_rows(page, "#problems-2")] == PROBLEMS
