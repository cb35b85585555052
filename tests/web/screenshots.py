"""Screenshots of the web board's four pages for docs/web/ (the README links them), taken in Debian's headless
Chromium from the tests' own stack: the board, a route, a check, an earlier board.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python -m tests.web.screenshots docs/web
"""

import asyncio
import sys
import tempfile
from pathlib import Path

from kernelboard.v1 import events_pb2
from playwright.async_api import async_playwright

from services.common.eventlog import NewEvent
from tests.web.conftest import CHROMIUM, web_stack
from tests.web.web_events import at, checked, seeded, started

PAGES = (
    ("/", "board.png"),
    ("/route/fast", "route.png"),
    ("/route/fast/check/202", "check.png"),
    ("/board/1", "earlier-board.png"),
)


def fuller_board():
    """The tests' log, and a few more routes so that the ranking has rows to rank."""
    return [
        *seeded(),
        started("tiled-gemm", "bob", 10),
        checked("tiled-gemm", 2, 3.12, 11, check_id="204"),
        started("fused-norms", "carol", 12),
        checked("fused-norms", 2, 1.84, 13, check_id="205"),
        (
            "benchmark:2",
            NewEvent(
                events_pb2.RouteAdopted(route="fast", benchmark_version=2, adopted=True, note="merged into main"),
                actor="curator",
                occurred_at=at(14),
            ),
        ),
    ]


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        async with web_stack(Path(home), fuller_board()) as stack, async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            for path, name in PAGES:
                await page.goto(stack.web_url + path)
                await page.screenshot(path=out / name, full_page=True)
                print(out / name)
            await browser.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/web")))
