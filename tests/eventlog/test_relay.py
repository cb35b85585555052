"""The relay against the real PostgreSQL and NATS JetStream."""

import asyncio
import collections
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from kernelboard.v1 import events_pb2 as pb
from nats.js.api import StorageType
from prometheus_client import REGISTRY

from services.common import bus
from services.common.eventlog import EventLog, NewEvent
from services.common.relay import RELAY_DUPLICATES, Relay
from tests.eventlog.helpers import Crash, append_jobs, running, wait_for

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]


async def stream_messages(js, settings) -> int:
    return (await js.stream_info(settings.events_stream)).state.messages


async def relay_checkpoint(log: EventLog, settings) -> int:
    position = await log.pool.fetchval(
        "SELECT position FROM relay_checkpoints WHERE stream = $1", settings.events_stream
    )
    return position or 0


async def published_events(js, settings) -> list[pb.Event]:
    """Every message of the stream, in stream order, checked for subject and Nats-Msg-Id, decoded."""
    events = []
    for seq in range(1, await stream_messages(js, settings) + 1):
        msg = await js.get_msg(settings.events_stream, seq)
        event = pb.Event.FromString(msg.data)
        assert msg.subject == f"{settings.events_subject_prefix}.{event.type}"
        assert msg.headers["Nats-Msg-Id"] == event.event_id
        events.append(event)
    return events


async def test_jetstream_drops_a_republished_event_id(js, settings):
    await bus.ensure_stream(js, settings)
    await bus.ensure_stream(js, settings)  # idempotent
    subject = bus.subject(settings, "JobHeld")
    first = await js.publish(subject, b"x", headers={"Nats-Msg-Id": "event-1"})
    again = await js.publish(subject, b"x", headers={"Nats-Msg-Id": "event-1"})
    assert not first.duplicate and again.duplicate and again.seq == first.seq
    assert await stream_messages(js, settings) == 1
    info = await js.stream_info(settings.events_stream)
    assert info.config.duplicate_window == bus.DUPLICATE_WINDOW_S
    assert info.config.max_age == bus.MAX_AGE_S and info.config.storage == StorageType.FILE


async def test_relay_publishes_the_log_in_order_and_wakes_on_notify(log, settings, js):
    await append_jobs(log, 250)
    head = await log.head_position()
    # A poll interval far beyond the test's waits: only LISTEN/NOTIFY can wake it in time.
    relay = Relay(log, settings, batch_size=64, poll_interval_s=60)
    task = asyncio.create_task(relay.run())
    try:
        await wait_for(lambda: relay_checkpoint_is(log, settings, head), 20, "the relay to publish the log")
        [late] = await log.append("route:late", None, [NewEvent(pb.RouteStarted(route="late"), actor="a")])
        # Within 5 s although the relay would next poll in 60 s: NOTIFY woke it.
        await wait_for(lambda: relay_checkpoint_is(log, settings, late.global_position), 5, "a NOTIFY wake-up")
    finally:
        await relay.stop()
        await asyncio.wait_for(task, 10)
    assert await published_events(js, settings) == [e async for e in log.read_all()]


async def relay_checkpoint_is(log, settings, position) -> bool:
    return await relay_checkpoint(log, settings) >= position


async def test_a_relay_that_dies_between_publish_and_checkpoint_republishes_without_duplicates(log, settings, js):
    await append_jobs(log, 120)
    head = await log.head_position()

    class CrashBeforeCheckpoint(Relay):
        async def _save_checkpoint(self, conn, position):
            raise Crash

    with pytest.raises(Crash):
        await asyncio.wait_for(CrashBeforeCheckpoint(log, settings, batch_size=50).run(), 20)
    assert await stream_messages(js, settings) == 50
    assert await relay_checkpoint(log, settings) == 0

    duplicates_before = RELAY_DUPLICATES.labels(settings.events_stream)._value.get()
    relay = Relay(log, settings, batch_size=50, poll_interval_s=0.1)
    task = asyncio.create_task(relay.run())
    try:
        await wait_for(lambda: relay_checkpoint_is(log, settings, head), 20, "the restarted relay")
    finally:
        await relay.stop()
        await asyncio.wait_for(task, 10)
    assert RELAY_DUPLICATES.labels(settings.events_stream)._value.get() - duplicates_before == 50
    assert [e.global_position for e in await published_events(js, settings)] == list(range(1, head + 1))


async def test_only_one_relay_publishes_at_a_time(log, settings, js):
    await append_jobs(log, 30)
    first = Relay(log, settings, poll_interval_s=0.1)
    second = Relay(log, settings, poll_interval_s=0.1)
    first_task = asyncio.create_task(first.run())
    await asyncio.wait_for(first.active.wait(), 10)
    second_task = asyncio.create_task(second.run())
    await asyncio.sleep(0.5)
    assert not second.active.is_set(), "a second relay must wait while the first holds the lock"
    await first.stop()
    await asyncio.wait_for(first_task, 10)
    await asyncio.wait_for(second.active.wait(), 10)
    await append_jobs(log, 10)
    head = await log.head_position()
    await wait_for(lambda: relay_checkpoint_is(log, settings, head), 10, "the standby relay to take over")
    await second.stop()
    await asyncio.wait_for(second_task, 10)
    assert [e.global_position for e in await published_events(js, settings)] == list(range(1, head + 1))


def relay_gauges(settings) -> tuple[float | None, float | None]:
    labels = {"stream": settings.events_stream}
    return (
        REGISTRY.get_sample_value("kb_relay_active", labels),
        REGISTRY.get_sample_value("kb_relay_lag_events", labels),
    )


async def test_a_relay_that_loses_its_lock_reports_standby_and_no_lag(log, settings, js):
    """The lock-holding session is terminated and another session takes the lock first: the relay's lag series goes
    (a standby's last value would be stale) and kb_relay_active drops to 0, until it holds the lock again."""
    await append_jobs(log, 20)
    relay = Relay(log, settings, poll_interval_s=0.1, retry_delay_s=0.5)
    async with running(relay):
        await asyncio.wait_for(relay.active.wait(), 10)
        await wait_for(lambda: published(relay_gauges(settings)), 10, "the active relay's gauges")
        rival = await asyncpg.connect(settings.database_url)
        try:
            await rival.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            key = f"kb-relay:{settings.events_stream}"
            await wait_for(
                lambda: rival.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key), 10, "the lock"
            )
            await wait_for(lambda: standing_by(relay_gauges(settings)), 10, "the relay to report standby")
            await asyncio.sleep(1)  # past its retry: still standby, still no lag reported
            assert not relay.active.is_set() and relay_gauges(settings) == (0.0, None)
        finally:
            await rival.close()  # the lock goes with the session
        await asyncio.wait_for(relay.active.wait(), 10)
        await wait_for(lambda: published(relay_gauges(settings)), 10, "the relay active again")


async def published(gauges) -> bool:
    active, lag = gauges
    return active == 1.0 and lag is not None


async def standing_by(gauges) -> bool:
    return gauges == (0.0, None)


def start_relay_process(settings) -> subprocess.Popen:
    env = dict(
        os.environ,
        PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'protos'}",
        KB_DATABASE_URL=settings.database_url,
        KB_NATS_URL=settings.nats_url,
        KB_EVENTS_STREAM=settings.events_stream,
        KB_EVENTS_SUBJECT_PREFIX=settings.events_subject_prefix,
    )
    command = [sys.executable, "-m", "services.common.relay", "--batch-size", "100", "--metrics-port", "0"]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def test_a_relay_process_killed_mid_stream_resumes_and_each_event_reaches_a_consumer_once(log, settings, js):
    from services.common.consumer import Consumer

    handled = collections.Counter()

    async def handler(conn, event):
        handled[event.global_position] += 1

    consumer = Consumer("relay-kill", log, settings, handler, batch_size=200)
    async with running(consumer):
        await asyncio.wait_for(consumer.ready.wait(), 10)
        start = await log.head_position()
        await append_jobs(log, 3000, batch=1000)
        head = await log.head_position()
        relay = start_relay_process(settings)
        try:
            await wait_for(lambda: stream_has_at_least(js, settings, 100), 30, "the relay process to publish")
        finally:
            relay.send_signal(signal.SIGKILL)
            relay.wait(10)
        assert await relay_checkpoint(log, settings) < head, "killed too late to test a resume"
        restarted = start_relay_process(settings)
        try:
            await wait_for(lambda: relay_checkpoint_is(log, settings, head), 60, "the restarted relay process")
        finally:
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(10) == 0, restarted.stderr.read().decode()[-2000:]
        # Each position once in the stream (no duplicate), and each reached the handler once (below).
        assert await stream_messages(js, settings) == head
        await wait_for(lambda: consumer_reached(consumer, head), 30, "the consumer to apply every event")
    assert sorted(p for p in handled if p > start) == list(range(start + 1, head + 1))
    assert set(handled.values()) == {1}, "an event reached the handler twice"


async def consumer_reached(consumer, position) -> bool:
    return consumer.checkpoint >= position


async def stream_has_at_least(js, settings, count) -> bool:
    return await stream_messages(js, settings) >= count
