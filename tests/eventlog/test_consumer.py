"""The consumer helper against the real PostgreSQL and NATS JetStream, with the real relay in between."""

import asyncio
import collections
import gc
import secrets

import pytest
from kernelboard.v1 import events_pb2 as pb
from prometheus_client import REGISTRY

from services.common.consumer import CONSUMER_DEAD_LETTERED, CONSUMER_DEAD_LETTERS, Consumer
from services.common.eventlog import EventLog, NewEvent
from services.common.relay import Relay
from tests.eventlog.helpers import Crash, append_jobs, running, wait_for

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
async def effects(log):
    """The effects table a handler writes: one row per application, so a double application shows."""
    await log.pool.execute("CREATE TABLE effects (consumer text, event_id uuid, position bigint)")


def recording_handler(name: str):
    async def handler(conn, event):
        await conn.execute("INSERT INTO effects VALUES ($1, $2, $3)", name, event.event_id, event.global_position)

    return handler


async def applied(log: EventLog, name: str) -> list[int]:
    rows = await log.pool.fetch("SELECT position FROM effects WHERE consumer = $1 ORDER BY position", name)
    return [r["position"] for r in rows]


async def positions(log: EventLog, from_position: int = 0, types=None) -> list[int]:
    return [e.global_position async for e in log.read_all(from_position, types=types)]


def consumer_name() -> str:
    return f"test-{secrets.token_hex(4)}"


async def test_catch_up_from_the_log_alone_applies_each_event_once(log, settings, effects):
    await append_jobs(log, 230)
    name = consumer_name()
    consumer = Consumer(name, log, settings, recording_handler(name), batch_size=50)
    head = await log.head_position()
    assert await consumer.catch_up() == head == consumer.checkpoint
    assert await consumer.catch_up() == head
    assert await applied(log, name) == await positions(log)

    typed_name = consumer_name()
    typed = Consumer(typed_name, log, settings, recording_handler(typed_name), types={"RouteStarted"})
    await log.append("route:typed", None, [NewEvent(pb.RouteStarted(route="typed"), actor="a")])
    await append_jobs(log, 10)
    assert await typed.catch_up() == await log.head_position()
    assert await applied(log, typed_name) == await positions(log, types={"RouteStarted"})


async def test_a_running_consumer_follows_the_relay(log, settings, effects):
    name, typed_name = consumer_name(), consumer_name()
    consumer = Consumer(name, log, settings, recording_handler(name), fetch_timeout_s=30)
    typed = Consumer(typed_name, log, settings, recording_handler(typed_name), {"RouteStarted"}, fetch_timeout_s=30)
    relay = Relay(log, settings, batch_size=20, poll_interval_s=30)
    start = await log.head_position()
    async with running(consumer, typed, relay):
        await asyncio.wait_for(consumer.ready.wait(), 10)
        await asyncio.wait_for(typed.ready.wait(), 10)
        for i in range(5):
            await append_jobs(log, 37, batch=37)
            await log.append(f"route:follow-{i}", 0, [NewEvent(pb.RouteStarted(route=f"follow-{i}"), actor="a")])
        head = await log.head_position()
        await wait_for(lambda: checkpoint_reached(consumer, head), 20, "the consumer to apply the new events")
        await wait_for(lambda: checkpoint_reached(typed, head), 20, "the typed consumer to pass the new events")
        await wait_for(lambda: relay_lag_is_zero(settings), 10, "the active relay to report no lag")
    assert await applied(log, name) == await positions(log)
    assert await applied(log, name) == list(range(1, head + 1))
    assert await applied(log, typed_name) == await positions(log, types={"RouteStarted"})
    assert start < head
    # What operators watch: nothing left behind, everything counted.
    assert sample("kb_consumer_lag_events", consumer=name) == 0
    assert sample("kb_consumer_processed_total", consumer=name) == head
    assert sample("kb_consumer_processed_total", consumer=typed_name) == len(await applied(log, typed_name))
    assert sample("kb_relay_lag_events", stream=settings.events_stream) is None  # stopped: no lag of its own
    assert sample("kb_relay_published_total", stream=settings.events_stream) == head


def sample(name: str, **labels) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def relay_lag_is_zero(settings) -> bool:
    return sample("kb_relay_lag_events", stream=settings.events_stream) == 0


async def checkpoint_reached(consumer: Consumer, position: int) -> bool:
    return consumer.checkpoint >= position


async def test_a_gap_in_the_notifications_is_filled_from_the_log(log, settings, effects, js):
    """NATS only notifies: a message beyond checkpoint + 1 makes the consumer read the log up to it."""
    name = consumer_name()
    consumer = Consumer(name, log, settings, recording_handler(name), fetch_timeout_s=30)
    async with running(consumer):
        await asyncio.wait_for(consumer.ready.wait(), 10)
        before = consumer.checkpoint
        await append_jobs(log, 5, batch=5)
        [last] = await log.read_batch(before + 4, 1)
        # Only the last of the five reaches NATS, as if the others were lost.
        await js.publish(f"{settings.events_subject_prefix}.{last.type}", last.SerializeToString())
        await wait_for(lambda: checkpoint_reached(consumer, last.global_position), 10, "the gap to be filled")
    assert (await applied(log, name))[-5:] == list(range(before + 1, before + 6))


async def test_a_crash_between_commit_and_ack_changes_nothing_on_redelivery(log, settings, effects):
    name = consumer_name()
    relay = Relay(log, settings, poll_interval_s=0.2)

    class CrashBeforeAck(Consumer):
        async def _ack(self, messages):
            raise Crash

    crashing = CrashBeforeAck(name, log, settings, recording_handler(name), ack_wait_s=1)
    async with running(relay):
        task = asyncio.create_task(crashing.run())
        await asyncio.wait_for(crashing.ready.wait(), 10)
        before = crashing.checkpoint
        await append_jobs(log, 20, batch=20)
        with pytest.raises(Crash):
            await asyncio.wait_for(task, 20)
        # The first fetched batch (maybe not all 20) committed, then the process died before acking it.
        committed = crashing.checkpoint
        assert committed > before
        assert await applied(log, name) == list(range(1, committed + 1))

        restarted = DeliveryRecorder(name, log, settings, recording_handler(name), ack_wait_s=1)
        async with running(restarted):
            await wait_for(lambda: redelivered(restarted, before + 1, committed), 20, "the unacked batch again")
            head = await log.head_position()
            await wait_for(lambda: checkpoint_reached(restarted, head), 20, "the rest")
    assert await applied(log, name) == await positions(log), "a redelivery applied an event again"


class DeliveryRecorder(Consumer):
    """A consumer that notes, per position, how many times JetStream has delivered the message it acks."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.deliveries: dict[int, int] = {}

    async def _ack(self, messages):
        for m in messages:
            self.deliveries[pb.Event.FromString(m.data).global_position] = m.metadata.num_delivered
        await super()._ack(messages)


async def redelivered(consumer: DeliveryRecorder, first: int, last: int) -> bool:
    return all(consumer.deliveries.get(p, 0) >= 2 for p in range(first, last + 1))


async def test_a_crash_before_commit_leaves_no_effect_and_the_event_is_applied_once_later(log, settings, effects):
    name = consumer_name()
    relay = Relay(log, settings, poll_interval_s=0.2)
    armed = asyncio.Event()

    async def crash_once_armed(conn, event):
        await recording_handler(name)(conn, event)
        if armed.is_set():
            armed.clear()
            raise Crash  # the process dies with the effect written but not committed

    crashing = Consumer(name, log, settings, crash_once_armed, ack_wait_s=1)
    async with running(relay):
        task = asyncio.create_task(crashing.run())
        await asyncio.wait_for(crashing.ready.wait(), 10)
        checkpoint = crashing.checkpoint
        armed.set()
        await append_jobs(log, 3, batch=3)
        with pytest.raises(Crash):
            await asyncio.wait_for(task, 20)
        assert await applied(log, name) == list(range(1, checkpoint + 1))
        assert crashing.checkpoint == checkpoint

        # The restart applies the three (its catch-up from the log, or their redelivery, whichever comes first);
        # the unacked message that was in flight at the crash comes back and changes nothing.
        restarted = DeliveryRecorder(name, log, settings, recording_handler(name), ack_wait_s=1)
        async with running(restarted):
            head = await log.head_position()
            await wait_for(lambda: checkpoint_reached(restarted, head), 20, "the restarted consumer")
            await wait_for(lambda: redelivered(restarted, checkpoint + 1, checkpoint + 1), 20, "the redelivery")
    assert await applied(log, name) == await positions(log)


async def test_a_poisoned_event_is_dead_lettered_and_the_consumer_moves_on(log, settings, effects):
    name = consumer_name()
    attempts = []

    async def handler(conn, event):
        if event.type == "JobStateChanged" and event.job_state_changed.job_id == "poison":
            attempts.append(event.event_id)
            raise ValueError("cannot parse job poison")
        await recording_handler(name)(conn, event)

    consumer = Consumer(name, log, settings, handler, max_attempts=3, retry_backoff_s=0.01)
    relay = Relay(log, settings, poll_interval_s=0.2)
    dead_before = CONSUMER_DEAD_LETTERED.labels(name)._value.get()
    async with running(consumer, relay):
        await asyncio.wait_for(consumer.ready.wait(), 10)
        [good, poison, after] = await log.append(
            "job:poison",
            None,
            [
                NewEvent(pb.JobStateChanged(job_id="fine", state="RUNNING"), actor="s"),
                NewEvent(pb.JobStateChanged(job_id="poison", state="RUNNING"), actor="s"),
                NewEvent(pb.JobStateChanged(job_id="fine", state="COMPLETED"), actor="s"),
            ],
        )
        # The dead letter is appended after the three; the consumer then applies it like any other event.
        letter_position = after.global_position + 1
        await wait_for(lambda: checkpoint_reached(consumer, letter_position), 20, "the consumer to move on")
    assert attempts == [poison.event_id] * 3
    [letter] = await log.read_stream(f"deadletter:{name}")
    assert letter.global_position == letter_position
    assert letter.event_dead_lettered == pb.EventDeadLettered(
        consumer=name,
        event_id=poison.event_id,
        global_position=poison.global_position,
        error="ValueError('cannot parse job poison')",
        attempts=3,
    )
    assert CONSUMER_DEAD_LETTERED.labels(name)._value.get() - dead_before == 1
    assert dead_letters(name) == 1
    applied_positions = await applied(log, name)
    assert poison.global_position not in applied_positions
    assert {good.global_position, after.global_position, letter_position} <= set(applied_positions)

    # A restarted process has no series for the consumer until it reads the count back from the log at start.
    CONSUMER_DEAD_LETTERS.remove(name)
    assert dead_letters(name) is None
    await Consumer(name, log, settings, handler).catch_up()
    assert dead_letters(name) == 1


def dead_letters(name: str) -> float | None:
    return REGISTRY.get_sample_value("kb_consumer_dead_letters", {"consumer": name})


async def test_relay_and_consumer_recover_when_postgresql_drops_their_connections(log, settings, effects):
    name = consumer_name()
    consumer = Consumer(name, log, settings, recording_handler(name), ack_wait_s=1, fetch_timeout_s=0.5)
    relay = Relay(log, settings, batch_size=10, poll_interval_s=0.1, retry_delay_s=0.1)
    async with running(consumer, relay):
        await asyncio.wait_for(consumer.ready.wait(), 10)
        for _ in range(3):
            await append_jobs(log, 30, batch=10)
            # Every other session on this database goes, the relay's lock-holding one included.
            async with log.pool.acquire() as conn:
                await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            await asyncio.sleep(0.2)
        await append_jobs(log, 10, batch=10)
        head = await log.head_position()
        await wait_for(lambda: checkpoint_reached(consumer, head), 30, "the consumer after the disconnections")
    assert await applied(log, name) == await positions(log)


async def test_a_failing_handler_in_a_batch_leaves_the_others_applied_once(log, settings, effects):
    """The batch's savepoint is rolled back and replayed event by event; one attempt allowed here."""
    name = consumer_name()
    calls = collections.Counter()

    async def handler(conn, event):
        calls[event.global_position] += 1
        await recording_handler(name)(conn, event)
        if event.job_state_changed.job_id == "bad":
            raise RuntimeError("bad job")

    consumer = Consumer(name, log, settings, handler, {"JobStateChanged"}, max_attempts=1, batch_size=1000)
    await consumer.catch_up()
    start = consumer.checkpoint
    events = [NewEvent(pb.JobStateChanged(job_id=j, state="RUNNING"), actor="s") for j in ("a", "bad", "c")]
    a, bad, c = await log.append("job:batch", None, events)
    assert await consumer.catch_up() == c.global_position  # the dead letter comes after
    assert calls[bad.global_position] == 1, "max_attempts=1: the batch's call was the one attempt"
    assert calls[a.global_position] == 2 and calls[c.global_position] == 1  # a ran again after the rollback
    assert [p for p in await applied(log, name) if p > start] == [a.global_position, c.global_position]
    [letter] = await log.read_stream(f"deadletter:{name}")
    assert letter.event_dead_lettered.event_id == bad.event_id and letter.event_dead_lettered.attempts == 1
    assert dead_letters(name) == 1


async def test_a_consumer_cancelled_mid_fetch_leaves_no_failed_task_behind(log, settings):
    # A service's shutdown cancels its consumer while a fetch waits on a quiet bus: the connection then closes under
    # that fetch, and nats-py answers with ConnectionClosedError, which a task nobody awaits logs as an error later.
    loop = asyncio.get_running_loop()
    reported = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        consumer = Consumer(consumer_name(), log, settings, recording_handler("unused"), fetch_timeout_s=30)
        task = asyncio.create_task(consumer.run())
        await asyncio.wait_for(consumer.ready.wait(), 10)
        await asyncio.sleep(0.5)  # the fetch waits on the bus
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert reported == []
