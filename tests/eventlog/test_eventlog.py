"""Conformance of the event log against the real PostgreSQL."""

import asyncio
import contextlib
import random
import time
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest
from google.protobuf import struct_pb2
from kernelboard.v1 import events_pb2 as pb

from contracts import limits
from contracts.refusals import Refusal
from services.common.eventlog import (
    ConcurrencyConflict,
    DuplicateEvent,
    EventLog,
    NewEvent,
    event_type,
    payload_of,
)

pytestmark = pytest.mark.timeout(60)


def route_started(route: str) -> NewEvent:
    return NewEvent(pb.RouteStarted(route=route, owner="alice", started_by="alice/agent-1"), actor="alice/agent-1")


async def all_events(log: EventLog, **kwargs) -> list[pb.Event]:
    return [event async for event in log.read_all(**kwargs)]


async def test_append_returns_envelopes_that_read_back_identically(log):
    occurred = datetime(2026, 12, 1, 12, 30, 15, 123456, tzinfo=UTC)
    check = pb.CheckCompleted(check_id="c1", passed=True, score=1.5, subtasks=[pb.Subtask(id="matmul", speedup=2.0)])
    appended = await log.append(
        "check:c1",
        0,
        [
            NewEvent(pb.CheckRequested(check_id="c1"), actor="system:verifier"),
            NewEvent(check, actor="system:verifier", verifier_version=3, occurred_at=occurred),
            NewEvent(pb.JobHeld(), actor="system:scheduler"),  # an all-default payload is still the set oneof
        ],
    )
    assert [e.stream_version for e in appended] == [1, 2, 3]
    assert [e.type for e in appended] == ["CheckRequested", "CheckCompleted", "JobHeld"]
    assert appended[1].verifier_version == 3 and not appended[0].HasField("verifier_version")
    assert appended[1].occurred_at.ToDatetime(tzinfo=UTC) == occurred
    assert payload_of(appended[1]) == check
    assert appended[2].WhichOneof("payload") == "job_held"
    assert await log.read_stream("check:c1") == appended
    assert await log.read_stream("check:c1", from_version=2) == appended[1:]
    first = appended[0].global_position
    assert await all_events(log, from_position=first - 1) == appended
    assert await log.stream_version("check:c1") == 3
    assert await log.stream_version("check:none") == 0
    assert await log.head_position() == appended[-1].global_position
    assert uuid.UUID(appended[0].event_id).version == 4 and str(uuid.UUID(appended[0].event_id)) == appended[0].event_id


async def test_version_conflict_names_stream_and_versions_and_writes_nothing(log):
    await log.append("route:conflict", 0, [route_started("conflict")])
    head = await log.head_position()
    with pytest.raises(ConcurrencyConflict, match=r"'route:conflict': expected version 0, actual version 1") as info:
        await log.append("route:conflict", 0, [route_started("conflict")])
    assert (info.value.stream, info.value.expected, info.value.actual) == ("route:conflict", 0, 1)
    with pytest.raises(ConcurrencyConflict):
        await log.append("route:conflict", 5, [route_started("conflict")])
    assert await log.head_position() == head
    assert await log.stream_version("route:conflict") == 1
    appended = await log.append("route:conflict", 1, [route_started("conflict")])
    assert appended[0].stream_version == 2 and appended[0].global_position == head + 1


async def test_concurrent_writers_with_the_same_expected_version_one_wins(log):
    results = await asyncio.gather(
        *[log.append("route:race", 0, [route_started("race")]) for _ in range(6)], return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, list)]
    assert len(winners) == 1
    assert all(isinstance(r, ConcurrencyConflict) for r in results if not isinstance(r, list))
    assert [e.event_id for e in await log.read_stream("route:race")] == [winners[0][0].event_id]


async def test_a_retried_append_with_the_same_ids_is_refused_as_a_duplicate(log):
    ids = [str(uuid.uuid4()), str(uuid.uuid4())]
    batch = [
        NewEvent(pb.JobSubmitted(job_id="7"), actor="system:scheduler", event_id=ids[0]),
        NewEvent(pb.JobHeld(job_id="7"), actor="system:scheduler", event_id=ids[1]),
    ]
    await log.append("job:7", 0, batch)
    head = await log.head_position()
    # The retry of a writer that crashed before it saw the commit: same ids, same expected version.
    with pytest.raises(DuplicateEvent, match=ids[0]):
        await log.append("job:7", 0, batch)
    # Same ids, no version check, even on another stream.
    with pytest.raises(DuplicateEvent, match=ids[1]):
        await log.append("job:other", None, batch[1:])
    assert await log.head_position() == head
    assert len(await log.read_stream("job:7")) == 2
    with pytest.raises(DuplicateEvent):
        await log.append("job:8", None, [batch[0], batch[0]])


async def test_the_database_refuses_update_delete_and_truncate(log):
    await log.append("route:immutable", None, [route_started("immutable")])
    async with log.pool.acquire() as conn:
        for statement in (
            "UPDATE events SET actor = 'mallory' WHERE stream = 'route:immutable'",
            "DELETE FROM events WHERE stream = 'route:immutable'",
            "TRUNCATE events",
        ):
            with pytest.raises(asyncpg.PostgresError, match="append-only") as info:
                await conn.execute(statement)
            assert info.value.sqlstate == "KB001"
    [event] = await log.read_stream("route:immutable")
    assert event.actor == "alice/agent-1"


async def test_an_append_inside_a_rolled_back_transaction_leaves_nothing(log):
    head = await log.head_position()
    async with log.pool.acquire() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE side_effect (x int)")
                appended = await log.append("route:rolled-back", 0, [route_started("rolled-back")], conn=conn)
                assert appended[0].global_position == head + 1
                raise RuntimeError("caller fails after appending")
        assert await log.head_position() == head
        assert await log.read_stream("route:rolled-back") == []
        async with conn.transaction():
            committed = await log.append("route:committed", 0, [route_started("committed")], conn=conn)
    # Positions stay dense: the rolled-back append's position is taken again.
    assert committed[0].global_position == head + 1
    assert await log.read_stream("route:committed") == committed


async def test_a_held_appending_transaction_holds_back_later_positions(log):
    """Deterministic interleaving: writer A takes a position and does not commit; writer B comes later. A reader must
    not see B's event before A's (the skip that bigserial allows)."""
    head = await log.head_position()
    async with log.pool.acquire() as conn_a:
        tx = conn_a.transaction()
        await tx.start()
        [a] = await log.append("route:slow", None, [route_started("slow")], conn=conn_a)
        writer_b = asyncio.create_task(log.append("route:fast", None, [route_started("fast")]))
        await asyncio.sleep(0.3)
        assert not writer_b.done(), "a later writer must wait for the earlier one's commit"
        assert await all_events(log, from_position=head) == []
        await tx.commit()
        [b] = await asyncio.wait_for(writer_b, 10)
    assert (a.global_position, b.global_position) == (head + 1, head + 2)
    assert [e.event_id for e in await all_events(log, from_position=head)] == [a.event_id, b.event_id]


async def test_concurrent_appenders_and_a_reader_see_every_event_once_in_commit_order(log):
    """8 writers on their own connections append batches of 1-5 for ~3 s; a reader polls read_all meanwhile."""
    start_head = await log.head_position()
    stop, writers_finished = asyncio.Event(), asyncio.Event()
    appended: list[pb.Event] = []
    seen: list[pb.Event] = []

    async def writer(n: int):
        rng = random.Random(n)
        while not stop.is_set():
            batch = [route_started(f"w{n}") for _ in range(rng.randint(1, 5))]
            appended.extend(await log.append(f"route:writer-{n}", None, batch))

    async def reader():
        position = start_head
        while True:
            done = writers_finished.is_set()  # then this pass is the last and must see everything
            async for event in log.read_all(position, batch_size=7):
                seen.append(event)
                position = event.global_position
            if done:
                return
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(writer(n)) for n in range(8)]
    read_task = asyncio.create_task(reader())
    await asyncio.sleep(3)
    stop.set()
    await asyncio.gather(*tasks)
    writers_finished.set()
    await asyncio.wait_for(read_task, 30)

    head = await log.head_position()
    assert len(appended) > 50, "the writers should have appended many events in 3 s"
    assert sorted(e.global_position for e in appended) == list(range(start_head + 1, head + 1))
    seen_positions = [e.global_position for e in seen]
    assert seen_positions == list(range(start_head + 1, head + 1)), "the reader skipped or repeated a position"
    by_position = {e.global_position: e for e in appended}
    assert all(by_position[e.global_position] == e for e in seen)
    for n in range(8):
        versions = [e.stream_version for e in await log.read_stream(f"route:writer-{n}")]
        assert versions == list(range(1, len(versions) + 1))


async def test_read_all_pages_and_filters_by_type(log):
    start = await log.head_position()
    for i in range(5):
        await log.append(f"job:page-{i}", 0, [NewEvent(pb.JobSubmitted(job_id=str(i)), actor="s")])
        await log.append(f"job:page-{i}", 1, [NewEvent(pb.JobFinished(job_id=str(i)), actor="s")])
    everything = await all_events(log, from_position=start)
    assert len(everything) == 10
    assert await all_events(log, from_position=start, batch_size=3) == everything
    finished = await all_events(log, from_position=start, batch_size=2, types={"JobFinished"})
    assert [e.job_finished.job_id for e in finished] == ["0", "1", "2", "3", "4"]
    assert await all_events(log, from_position=start, types={"JobFinished", "JobSubmitted"}) == everything


async def test_bad_input_is_refused_with_a_clear_message(log):
    with pytest.raises(ValueError, match="kernelboard.v1.Event is not an Event payload"):
        await log.append("x", None, [NewEvent(pb.Event(), actor="a")])
    with pytest.raises(ValueError, match="dict is not an Event payload"):
        await log.append("x", None, [NewEvent({"route": "r"}, actor="a")])
    with pytest.raises(ValueError, match="not a UUID"):
        await log.append("x", None, [NewEvent(pb.JobHeld(), actor="a", event_id="job-1")])
    with pytest.raises(ValueError, match="time zone"):
        await log.append("x", None, [NewEvent(pb.JobHeld(), actor="a", occurred_at=datetime(2026, 1, 1))])
    with pytest.raises(ValueError, match="actor"):
        await log.append("x", None, [NewEvent(pb.JobHeld(), actor="")])
    with pytest.raises(ValueError, match="stream"):
        await log.append("", None, [NewEvent(pb.JobHeld(), actor="a")])
    with pytest.raises(ValueError, match="expected_version"):
        await log.append("x", -1, [NewEvent(pb.JobHeld(), actor="a")])
    assert await log.stream_version("x") == 0
    assert event_type(pb.CommitIngested()) == "CommitIngested"


async def test_single_event_appends_are_durable_quickly(log):
    """A coarse guard against a pathological append path (the benchmark measures it properly)."""
    started = time.perf_counter()
    for _ in range(20):
        await log.append("route:quick", None, [route_started("quick")])
    assert time.perf_counter() - started < 10


async def test_a_read_stopped_early_gives_its_connections_back(log):
    await log.append("route:early", None, [route_started("early") for _ in range(10)])
    async with contextlib.aclosing(log.read_all(batch_size=2)) as events:
        async for _ in events:
            break
    await wait_until_idle(log)


async def wait_until_idle(log, timeout: float = 5):
    deadline = time.monotonic() + timeout
    while log.pool.get_size() != log.pool.get_idle_size():
        assert time.monotonic() < deadline, "a pooled connection was not given back"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    ("payload", "field", "size", "limit"),
    [
        (
            pb.PullRequestReviewed(number=1, body="b" * (2 * 1024 * 1024)),
            "PullRequestReviewed.body",
            2 * 1024 * 1024,
            65536,
        ),
        (
            pb.MetricsReported(route="r", subtasks=struct_pb2.Value(string_value="s" * 400_000)),
            "MetricsReported.subtasks",
            None,
            limits.EVENT_FIELD_BYTES["MetricsReported.subtasks"],
        ),
        (pb.CommitIngested(changed_paths=["p" * 100] * 5000), "CommitIngested.changed_paths", None, 262144),
        (pb.JobResultCommitted(job_id="1", excluded=["e" * 100] * 1000), "JobResultCommitted.excluded", None, 65536),
        (pb.RouteAdopted(route="r", note="n" * 5000), "RouteAdopted.note", 5000, 4096),
        (pb.JobHeld(job_id="1", reason="r" * 10_000), "JobHeld.reason", 10_000, 4096),
    ],
)
async def test_every_event_field_has_a_size_limit_checked_at_append(log, payload, field, size, limit):
    """Whatever the log records, the relay can publish (NATS refuses a message over 1 MiB by default): a field over its
    limit (contracts/limits.py) is refused with INVALID_ARGUMENT naming the field, its size and the limit."""
    head = await log.head_position()
    with pytest.raises(Refusal) as info:
        await log.append("limits", None, [NewEvent(payload, actor="test")])
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.message.startswith(f"{field} is {size if size is not None else ''}"), info.value.message
    assert info.value.message.endswith(f"bytes, over the limit of {limit}")
    assert await log.head_position() == head


async def test_an_event_at_its_field_limits_is_recorded(log):
    body = "b" * limits.EVENT_FIELD_BYTES["PullRequestReviewed.body"]
    [event] = await log.append("limits", None, [NewEvent(pb.PullRequestReviewed(number=1, body=body), actor="test")])
    assert (await log.read_stream("limits"))[-1].pull_request_reviewed.body == body
    assert event.ByteSize() < limits.MAX_EVENT_BYTES
