"""The live projection: folds the log into memory, keeps the stored copy in step, serves views and change notices.

The Consumer calls ``handle`` inside its transaction, once per event in position order: the fold and the write of
the rows it touched plus the checkpoint go in that transaction. Reads are served from memory. ``rebuild`` folds the
log from position 0 into a fresh state and swaps it in memory under the lock; the next event's transaction then
replaces every stored row (until then the stored copy is the old fold at its own checkpoint: consistent, and equal
to the fresh one unless the fold's code changed, which PROJECTION_VERSION catches at start).

Lock order: the asyncio lock first, then PostgreSQL's row locks, everywhere; rebuild writes nothing to PostgreSQL
itself, since the consumer's open transaction may hold those rows while it waits for the lock.
"""

import asyncio
import time
from contextlib import aclosing

from kernelboard.v1 import board_pb2, events_pb2

from contracts.refusals import Refusal
from services.board import projection, standing, store, views
from services.board.state import State
from services.common import metrics
from services.common.logs import get_logger
from services.common.setaside import SetAside

LAG_EVENTS = metrics.gauge("kb_board_projection_lag_events", "Events in the log the board has not folded yet.")
LAG_SECONDS = metrics.gauge(
    "kb_board_projection_lag_seconds", "Age of the oldest event in the log the board has not folded yet (0: none)."
)
REBUILD_SECONDS = metrics.histogram(
    "kb_board_rebuild_seconds",
    "Time to rebuild the board from position 0, swap included.",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
EVENTS_FOLDED = metrics.counter("kb_board_events_folded_total", "Events folded into the live board.")

READ_BATCH = 5000
PERSIST_EVERY = 100_000  # a long catch-up stores its progress this often, so a crash does not lose all of it

log = get_logger()


class RebuildRunning(Refusal):
    """A rebuild asked for while one runs: FAILED_PRECONDITION."""

    def __init__(self):
        super().__init__("FAILED_PRECONDITION", "rebuild_running", "a rebuild is already running")


class UnknownBoard(Refusal):
    """No such board, or no such route on it: NOT_FOUND, naming what there is."""

    def __init__(self, message: str):
        super().__init__("NOT_FOUND", "unknown_board", message)


class Projector:
    def __init__(self, event_log):
        self.log = event_log
        self.state = State()
        self._lock = asyncio.Lock()  # one writer at a time: the consumer's handler, a catch-up, a rebuild's swap
        self._rebuilding = False
        self._store_all = False  # a rebuilt state waits to replace the stored rows in the next event's transaction
        self._committed = 0  # a position this projector itself saw committed to the store
        self._changed = asyncio.Event()
        self._views: dict[int, board_pb2.BoardView] = {}
        self._views_position = -1
        self._set_aside = SetAside("board_fold")  # events the fold set aside since this projector last folded all
        # Each standing check's problems, read from the log when a per-problem board first needs them: facts of the
        # log that never change, so kept across changes and rebuilds (the fold keeps none: it would halve its rate).
        self._speedups: dict[int, tuple[tuple[str, float], ...]] = {}

    # ---- writing --------------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Load the stored projection and catch up from the log; returns the number of events folded.

        With nothing stored, or a copy folded by another PROJECTION_VERSION, fold the log from position 0 and
        replace every stored row."""
        async with self.log.pool.acquire() as conn:
            stored = await store.load(conn)
        self._set_aside = SetAside("board_fold")
        async with self._lock:
            if stored is not None:
                self.state = stored
                self._committed = stored.position
                folded = await self._fold_from_log(self.state, store_progress=True)
            else:
                self.state = State()
                folded = await self._fold_from_log(self.state, store_progress=False)
                async with self.log.pool.acquire() as conn, conn.transaction():
                    await store.replace(conn, self.state)
                self._committed = self.state.position
        self._set_aside.finish()
        self._notify()
        log.info("board caught up", events=folded, position=self.state.position, from_stored=stored is not None)
        return folded

    async def handle(self, conn, event: events_pb2.Event) -> None:
        """The Consumer's handler: fold one event and store what it changed, in the consumer's transaction."""
        position = event.global_position
        if position <= self._committed:
            return
        async with self._lock:
            state = self.state
            if self._store_all:
                await store.replace(conn, state)  # after a rebuild: its rows, in this transaction
                self._store_all = False
            if position <= state.position:
                # Folded already. If the transaction that stored it rolled back, store everything now.
                if await store.stored_position(conn) < state.position:
                    await store.replace(conn, state)
                return
            if position > state.position + 1:
                # Positions are dense: a notice went missing, so fold the ones before it from the log first.
                async with aclosing(self.log.read_all(state.position, batch_size=READ_BATCH)) as missing_events:
                    async for missing in missing_events:
                        if missing.global_position >= position:
                            break
                        projection.apply(state, missing, self._set_aside_event)
            projection.apply(state, event, self._set_aside_event)
            await store.write_changes(conn, state)
        EVENTS_FOLDED.inc()
        self._notify()

    async def rebuild(self) -> board_pb2.RebuildBoardReply:
        if self._rebuilding:
            raise RebuildRunning()
        self._rebuilding = True
        started = time.perf_counter()
        try:
            fresh = State()
            self._set_aside = SetAside("board_fold")
            events = await self._fold_from_log(fresh, store_progress=False)
            async with self._lock:
                events += await self._fold_from_log(fresh, store_progress=False)  # appended meanwhile
                self.state = fresh
                self._views_position = -1  # cached views are of the old state, maybe at this same position
                self._store_all = True
            self._notify()
        finally:
            self._rebuilding = False
        seconds = time.perf_counter() - started
        REBUILD_SECONDS.observe(seconds)
        log.info("board rebuilt", events=events, seconds=round(seconds, 3), position=fresh.position)
        return board_pb2.RebuildBoardReply(
            events=events, seconds=seconds, log_position=fresh.position, boards=len(fresh.boards)
        )

    async def _fold_from_log(self, state: State, *, store_progress: bool) -> int:
        """Fold every event after the state's position; the next batch is fetched while this one folds."""
        folded = 0
        apply, set_aside = projection.apply, self._set_aside_event
        pending = asyncio.create_task(self.log.read_batch(state.position, READ_BATCH))
        while True:
            batch = await pending
            if len(batch) == READ_BATCH:
                pending = asyncio.create_task(self.log.read_batch(batch[-1].global_position, READ_BATCH))
            for event in batch:
                apply(state, event, set_aside)
            folded += len(batch)
            if store_progress and folded % PERSIST_EVERY < len(batch) and folded >= PERSIST_EVERY:
                await self._store(state)
            if len(batch) < READ_BATCH:
                break
            await asyncio.sleep(0)  # let queries in between batches
        if store_progress and folded:
            await self._store(state)
        return folded

    def _set_aside_event(self, event: events_pb2.Event, reason: str) -> None:
        self._set_aside.record(
            event.type or event.stream, reason, event_id=event.event_id, position=event.global_position
        )
        self._set_aside.finish()

    async def _store(self, state: State) -> None:
        async with self.log.pool.acquire() as conn, conn.transaction():
            await store.write_changes(conn, state)
        self._committed = state.position

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # ---- reading ----------------------------------------------------------------------------------------------

    def changed(self) -> asyncio.Event:
        """Set at the next change of the projection (take it before reading, then wait on it)."""
        return self._changed

    def versions(self) -> list[int]:
        return sorted(self.state.boards)

    def resolve(self, version: int) -> int:
        """``version``, or the newest for 0; raises UnknownBoard naming the boards there are."""
        state = self.state
        if version == 0:
            newest = standing.newest_version(state)
            if newest == 0:
                raise UnknownBoard("no board yet: no rules have been approved and no result has been recorded")
            return newest
        if version not in state.boards:
            there = ", ".join(map(str, sorted(state.boards))) or "none"
            raise UnknownBoard(f"no board for benchmark version {version} (boards: {there})")
        return version

    def board_view(self, version: int) -> board_pb2.BoardView:
        """The board's view, built once per log position and board and shared by every reader until the next change."""
        version = self.resolve(version)
        state = self.state
        if self._views_position != state.position:
            self._views = {}
            self._views_position = state.position
        view = self._views.get(version)
        if view is None:
            view = self._views[version] = views.board_view(state, state.boards[version])
        return view

    async def problems(self, version: int) -> board_pb2.BoardProblems:
        """Each problem's leader on the board: its standing checks' problems read from the log once, then kept."""
        version = self.resolve(version)
        state = self.state
        board = state.boards[version]
        missing = [p.position for _, p in standing.standing_passes(board) if p.position not in self._speedups]
        for start in range(0, len(missing), READ_BATCH):
            for event in await self.log.read_positions(missing[start : start + READ_BATCH]):
                self._speedups[event.global_position] = standing.check_speedups(event.check_completed)
        return views.problems_view(state, board, self._speedups)

    def card(self, version: int) -> board_pb2.BenchmarkCard:
        version = self.resolve(version)
        return views.card(self.state, self.state.boards[version])

    async def route(self, route: str, version: int) -> board_pb2.BoardRoute:
        """The route's places and counts from memory; its latest history entries read back from the log."""
        if version:
            self.resolve(version)
        state = self.state
        positions = views.history_positions(state, route, version)
        events = await self._events_at(positions)
        view = views.route_view(state, route, version, events)
        if view is None:
            where = f"on board {version}" if version else "in the log"
            raise UnknownBoard(f"no route {route!r} {where}")
        return view

    async def _events_at(self, positions: list[int]) -> dict[int, events_pb2.Event]:
        async def one(position: int):
            async with aclosing(self.log.read_all(position - 1, batch_size=1)) as found:
                async for event in found:
                    return event
            return None

        events = await asyncio.gather(*(one(p) for p in positions))
        return {e.global_position: e for e in events if e is not None}

    # ---- lag ------------------------------------------------------------------------------------------------

    async def measure_lag(self) -> tuple[int, float]:
        """Events behind the log's head, and the age in seconds of the oldest of them (wall clock: a metric only)."""
        position = self.state.position
        head = await self.log.head_position()
        behind = max(0, head - position)
        age = 0.0
        if behind:
            async with aclosing(self.log.read_all(position, batch_size=1)) as pending:
                async for event in pending:
                    age = max(0.0, time.time() - event.occurred_at.ToNanoseconds() / 1e9)
                    break
        LAG_EVENTS.set(behind)
        LAG_SECONDS.set(age)
        return behind, age

    async def watch_lag(self, every_s: float = 5.0) -> None:
        while True:
            try:
                await self.measure_lag()
            except Exception:  # a metric must not take the service down; the next round tries again
                log.warning("board lag not measured", exc_info=True)
            await asyncio.sleep(every_s)
