"""What every end-to-end and fault test ends with: the rebuilt board equals the live board, and the log lost nothing
and duplicated nothing (event ids unique, positions dense, each job finished once, each check completed once)."""

from collections import Counter

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc

from services.board import projection, views
from services.cli.client import metadata
from services.common.eventlog import EventLog


async def read_log(database_url: str) -> list:
    log = await EventLog.connect(database_url, migrate=False)
    try:
        return [event async for event in log.read_all()]
    finally:
        await log.close()


def assert_log_sound(events: list) -> None:
    ids = Counter(e.event_id for e in events)
    assert [i for i, n in ids.items() if n > 1] == [], "duplicate event ids"
    positions = [e.global_position for e in events]
    assert positions == list(range(1, len(events) + 1)), "positions are not dense from 1"
    versions: dict[str, list[int]] = {}
    for event in events:
        versions.setdefault(event.stream, []).append(event.stream_version)
    for stream, seen in versions.items():
        assert seen == list(range(1, len(seen) + 1)), f"stream {stream}: versions {seen} not dense"
    finished = Counter(e.job_finished.job_id for e in events if e.WhichOneof("payload") == "job_finished")
    assert [j for j, n in finished.items() if n != 1] == [], f"jobs finished more than once: {finished}"
    results = Counter(
        e.job_result_committed.job_id for e in events if e.WhichOneof("payload") == "job_result_committed"
    )
    assert [j for j, n in results.items() if n != 1] == [], f"job results committed more than once: {results}"
    completed = Counter(e.check_completed.check_id for e in events if e.WhichOneof("payload") == "check_completed")
    assert [c for c, n in completed.items() if n != 1] == [], f"checks completed more than once: {completed}"
    requested = {e.check_requested.check_id for e in events if e.WhichOneof("payload") == "check_requested"}
    assert set(completed) <= requested, "a check completed that was never requested"


async def live_boards(board_address: str, token: str) -> list:
    async with grpc.aio.insecure_channel(board_address) as channel:
        reply = await board_pb2_grpc.BoardStub(channel).ListBoards(
            board_pb2.ListBoardsRequest(), metadata=metadata(token)
        )
    return list(reply.boards)


def rebuilt_boards(events: list) -> list:
    state = projection.fold(events)
    return [views.board_view(state, state.boards[version]) for version in sorted(state.boards)]


async def assert_board_rebuilds(stack, token: str, *, deadline_s: float = 30) -> list:
    """Once the live board has folded the whole log, it equals a fold of the log from position 0, byte for byte."""
    import asyncio
    import time

    deadline = time.monotonic() + deadline_s
    while True:
        events = await read_log(stack.database_url)
        live = await live_boards(stack.address("board"), token)
        if live and all(view.log_position == len(events) for view in live):
            break
        if time.monotonic() > deadline:
            positions = [view.log_position for view in live]
            raise AssertionError(f"live board at {positions}, log head {len(events)} after {deadline_s} s")
        await asyncio.sleep(0.3)
    assert_log_sound(events)
    rebuilt = rebuilt_boards(events)
    assert [views.canonical(v) for v in live] == [views.canonical(v) for v in rebuilt], "live board != rebuilt board"
    return events
