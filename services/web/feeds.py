"""The boards as WatchBoard reports them: one stream per board version read, shared by every page and live reader.

A page then costs no call to the board service while the stream is up: it shows the latest view WatchBoard sent, which
is what GetBoard answers (WatchBoard sends GetBoard's view each time the board changes; an event that moves only the
log position is not a change, so the position shown is the last one at which the board looked like this). While a
stream is down, or before its first view, a page asks GetBoard itself, so it never shows what the board service
would not. Live readers wait on the same stream: a thousand open pages hold one WatchBoard, not a thousand.
"""

import asyncio
import contextlib

import grpc
from kernelboard.v1 import board_pb2

from services.common import metrics
from services.common.logs import get_logger
from services.web.source import BoardSource

MAX_FEEDS = 64  # board versions followed at once; a board is a benchmark version, so a handful in practice
RETRY_S = (0.5, 1.0, 2.0, 5.0, 10.0)  # after a stream ends: wait, then follow again

log = get_logger()

FEEDS_UP = metrics.gauge("kb_web_board_feeds_up", "WatchBoard streams the web board follows that are up now.")
FEEDS = metrics.gauge("kb_web_board_feeds", "WatchBoard streams the web board follows, up or waiting to follow again.")


class Feed:
    """One board version followed through WatchBoard (0: the newest, moving to a new board when one starts)."""

    def __init__(self, source: BoardSource, version: int):
        self.version = version
        self.view: board_pb2.BoardView | None = None  # the latest view while the stream is up; None while it is not
        self.gone = False  # the board service says no such board: followed no more
        self._changed = asyncio.Event()
        self._source = source
        self._task = asyncio.create_task(self._follow(), name=f"web-feed-{version}")

    @property
    def changed(self) -> asyncio.Event:
        """Set at the next change of ``view`` (or of ``gone``); take it before reading ``view``, then wait on it."""
        return self._changed

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _follow(self) -> None:
        attempt = 0
        while True:
            try:
                async for view in self._source.watch(self.version):
                    self.view, attempt = view, 0
                    self._notify()
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.NOT_FOUND and self.version:
                    self.view, self.gone = None, True
                    self._notify()
                    return
                log.warning("board stream ended; following again", version=self.version, code=err.code().name)
            self.view = None
            self._notify()
            await asyncio.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
            attempt += 1

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class Feeds:
    """The followed boards by version, started on first read of a board that exists."""

    def __init__(self, source: BoardSource, max_feeds: int = MAX_FEEDS):
        self.source = source
        self.max_feeds = max_feeds
        self._feeds: dict[int, Feed] = {}
        FEEDS_UP.set_function(lambda: sum(1 for f in self._feeds.values() if f.view is not None))
        FEEDS.set_function(lambda: len(self._feeds))

    def feed(self, version: int) -> Feed | None:
        found = self._feeds.get(version)
        if found is not None and found.gone:
            del self._feeds[version]
            return None
        return found

    def follow(self, version: int) -> Feed | None:
        """The feed of ``version``, started if there is room; call only for a board GetBoard found."""
        found = self.feed(version)
        if found is None and len(self._feeds) < self.max_feeds:
            found = self._feeds[version] = Feed(self.source, version)
        return found

    async def board(self, version: int) -> board_pb2.BoardView:
        """The board now: the stream's latest view, else GetBoard's answer (whose errors the caller sees)."""
        found = self.feed(version)
        if found is not None and found.view is not None:
            return found.view
        view = await self.source.board(version)
        self.follow(version)
        return view

    async def close(self) -> None:
        feeds, self._feeds = list(self._feeds.values()), {}
        for found in feeds:
            await found.close()
