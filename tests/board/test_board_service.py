"""The board's projector and store on the real PostgreSQL log: catch-up, restarts, redeliveries, rollbacks, rebuild."""

import asyncio

import pytest
from kernelboard.v1 import events_pb2

from services.board import codec, projection, store, views
from services.board.projector import Projector
from services.common.eventlog import EventLog

from .board_events import append_all, scenario


async def read_everything(log: EventLog) -> list[events_pb2.Event]:
    return [event async for event in log.read_all(0)]


async def stored_state(log: EventLog):
    async with log.pool.acquire() as conn:
        return await store.load(conn)


def canonical(state) -> tuple[bytes, dict[int, bytes]]:
    boards = {v: views.canonical(views.board_view(state, state.boards[v])) for v in sorted(state.boards)}
    return codec.state_to_json(state), boards


async def test_start_folds_the_log_and_stores_it_then_a_restart_resumes_from_the_checkpoint(fresh_log):
    await append_all(fresh_log, scenario())
    projector = Projector(fresh_log)
    assert await projector.start() >= 10
    rebuilt = projection.fold(await read_everything(fresh_log))
    assert canonical(projector.state) == canonical(rebuilt)
    assert canonical(await stored_state(fresh_log)) == canonical(rebuilt)

    view = projector.board_view(1)
    assert [(e.route, e.score, e.source) for e in view.ranked] == [
        ("tiled", 3.0, "reported by maintainer"),
        ("fast", 2.5, "verified"),
    ]
    assert projector.board_view(0).version == 2

    await append_all(fresh_log, scenario(start_minute=30)[1:4])
    restarted = Projector(fresh_log)
    assert await restarted.start() == 3  # only what came after the stored checkpoint
    assert canonical(restarted.state) == canonical(projection.fold(await read_everything(fresh_log)))


async def test_live_handling_with_duplicates_and_a_rolled_back_transaction_equals_a_rebuild(fresh_log):
    projector = Projector(fresh_log)
    await projector.start()
    events = await append_all(fresh_log, scenario())

    class Rollback(Exception):
        pass

    for i, event in enumerate(events):
        if i == 4:
            # The consumer's transaction fails after the handler stored the event: memory is ahead of the store.
            with pytest.raises(Rollback):
                async with fresh_log.pool.acquire() as conn, conn.transaction():
                    await projector.handle(conn, event)
                    raise Rollback()
        async with fresh_log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)
            await projector.handle(conn, events[i // 2])  # a redelivery of something earlier
    rebuilt = projection.fold(await read_everything(fresh_log))
    assert canonical(projector.state) == canonical(rebuilt)
    assert canonical(await stored_state(fresh_log)) == canonical(rebuilt)


async def test_a_missing_notice_is_filled_from_the_log(fresh_log):
    projector = Projector(fresh_log)
    await projector.start()
    events = await append_all(fresh_log, scenario())
    async with fresh_log.pool.acquire() as conn, conn.transaction():
        await projector.handle(conn, events[0])
        await projector.handle(conn, events[5])  # 1..4 never delivered
    assert projector.state.position == events[5].global_position
    assert canonical(projector.state) == canonical(projection.fold(events[:6]))


async def test_rebuild_swaps_in_a_fresh_fold_and_the_next_event_stores_it(fresh_log):
    await append_all(fresh_log, scenario())
    projector = Projector(fresh_log)
    await projector.start()
    # Corrupt the live state the way a bug in an older fold would have: the rebuild must undo it.
    projector.state.boards[1].routes["fast"].verified = None
    projector._views_position = -1
    assert [e.route for e in projector.board_view(1).ranked] == ["tiled"]

    reply = await projector.rebuild()
    assert reply.events == len(await read_everything(fresh_log)) and reply.boards == 2
    assert [e.route for e in projector.board_view(1).ranked] == ["tiled", "fast"]

    (more,) = await append_all(fresh_log, scenario(start_minute=60)[2:3])
    async with fresh_log.pool.acquire() as conn, conn.transaction():
        await projector.handle(conn, more)
    rebuilt = projection.fold(await read_everything(fresh_log))
    assert canonical(await stored_state(fresh_log)) == canonical(rebuilt) == canonical(projector.state)


async def test_a_stored_copy_of_another_projection_version_is_refolded(fresh_log, monkeypatch):
    await append_all(fresh_log, scenario())
    await Projector(fresh_log).start()
    monkeypatch.setattr(projection, "PROJECTION_VERSION", projection.PROJECTION_VERSION + 1)
    assert await stored_state(fresh_log) is None
    projector = Projector(fresh_log)
    assert await projector.start() == len(await read_everything(fresh_log))
    assert (await stored_state(fresh_log)) is not None


async def test_route_history_is_read_back_from_the_log(fresh_log):
    await append_all(fresh_log, scenario())
    projector = Projector(fresh_log)
    await projector.start()
    route = await projector.route("fast", 0)
    assert (route.owner, route.started_by) == ("alice", "alice/a1")
    first, second = route.boards
    assert (first.version, first.checks, first.checks_passed, first.adopted) == (1, 2, 2, True)
    assert [(h.kind, h.check_id, h.score) for h in first.history] == [
        ("check", "1", 2.0),
        ("adopted", "", 0.0),
        ("check", "3", 2.5),
    ]
    assert [(e.rank, e.source, e.score) for e in first.entries] == [(2, "verified", 2.5)]
    assert second.version == 2 and [h.check_id for h in second.history] == ["4"]


async def test_a_rebuild_completes_while_the_consumer_holds_a_transaction_open(fresh_log):
    """The consumer's open transaction holds the board's rows; a rebuild must neither wait for it nor be lost."""
    projector = Projector(fresh_log)
    await projector.start()
    first, second = await append_all(fresh_log, scenario()[:2])
    async with fresh_log.pool.acquire() as conn, conn.transaction():
        await projector.handle(conn, first)  # rows written, transaction still open
        reply = await asyncio.wait_for(projector.rebuild(), 30)
        assert reply.log_position == second.global_position  # the rebuild saw the committed log, ahead of the consumer
        await projector.handle(conn, first)  # a redelivery: folded already
        await projector.handle(conn, second)
    rebuilt = projection.fold(await read_everything(fresh_log))
    assert canonical(projector.state) == canonical(rebuilt)
    assert canonical(await stored_state(fresh_log)) == canonical(rebuilt)
