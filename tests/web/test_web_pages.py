"""Pages a leaderboard's users expect beyond the board, in a real browser: each problem's own leaderboard and a
route's history of checks and scores as a chart."""

from google.protobuf import json_format
from kernelboard.v1 import board_pb2

from contracts import results

from .test_web_browser import kb_board_json, table_rows
from .web_events import PROBLEMS


async def test_the_per_problem_page_shows_what_kb_board_problems_shows(stack, page_without_js):
    page = page_without_js
    await page.goto(stack.web_url + "/problems")
    rows = await table_rows(page, "#problems")
    board = json_format.ParseDict(await kb_board_json(stack, "--problems"), board_pb2.BoardProblems())
    expected = [results.leader_row(p) for p in board.problems]
    headings = results.LEADER_HEADINGS
    assert [[r[h] for h in headings[:5]] for r in rows] == [row[:5] for row in expected]
    assert [r["problem"] for r in rows] == PROBLEMS
    # fast's better check (2.5) holds every problem it submitted: matmul at 2.5 · 0.6; hinge_loss nobody submitted.
    matmul, hinge = rows[0], rows[-1]
    assert (matmul["best speed-up"], matmul["route"]) == ("1.500×", "fast")
    assert (hinge["best speed-up"], hinge["route"]) == ("—", "no verified speed-up yet")
    await page.click('#problems tr[data-problem="matmul"] a[href="/route/fast/check/202"]')
    await page.wait_for_url(stack.web_url + "/route/fast/check/202")
    await page.goto(stack.web_url + "/problems/1")
    assert (await table_rows(page, "#problems"))[0]["route"] == "old"
    assert "earlier" in await page.inner_text("header.title")


async def test_the_route_page_charts_its_checks_and_scores_over_time(stack, page_without_js):
    page = page_without_js
    await page.goto(stack.web_url + "/route/fast")
    chart = page.locator("#history-chart-2 svg")
    points = chart.locator("g.point")
    # Both of fast's checks on board 2 passed verified (2.0, then 2.5): two counted points, the best line rising once.
    assert await points.count() == 2
    assert await chart.locator("g.point.counted").count() == 2
    titles = [await points.nth(i).locator("title").text_content() for i in range(2)]
    assert [t.split(": ", 1)[1] for t in titles] == [
        "check, passed, verified, score 2.000",
        "check, passed, verified, score 2.500",
    ]
    first, second = [float(await points.nth(i).locator("circle").get_attribute("cy")) for i in range(2)]
    assert second < first  # the higher score stands higher
    best = await chart.locator("path.best").get_attribute("d")
    assert best.startswith("M ") and best.count("V ") == 1

    # A failed check has no score: it is a cross under the axis, and no best line while nothing counts.
    await page.goto(stack.web_url + "/route/markup")
    chart = page.locator("#history-chart-2 svg")
    assert await chart.locator("g.point.failed").count() == 1 and await chart.locator("path.best").count() == 0
    # A CPU profile's pass is shown without a score either (not verified): no point stands above the axis.
    await page.goto(stack.web_url + "/route/smoke")
    assert await page.locator("#history-chart-2 g.point.counted").count() == 0
