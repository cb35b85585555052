"""The relay: publishes the event log, in position order, to the JetStream events stream.

Each event goes to `<prefix>.<Type>` with `Nats-Msg-Id` = its event id and the serialized Event envelope as the
payload. The checkpoint (relay_checkpoints, per JetStream stream) advances only after JetStream acked the whole
batch; after a crash the relay resumes from it, and JetStream drops the re-published copies as duplicates. One relay
is active per stream at a time: the others wait on a PostgreSQL advisory lock. It wakes on LISTEN/NOTIFY (a trigger
on the events table) and polls as a fallback.

An event larger than the NATS server accepts (its max_payload) can never be published: retrying it
would stop the relay at that position for good. Such an event is recorded in relay_skipped, counted
(kb_relay_skipped_events, alert KernelboardRelaySkippedEvents) and skipped on the bus; it stays in the log, and
consumers, seeing the gap in positions, read it from there. The log refuses oversized events at append
(contracts/limits.py), so this happens only with a NATS configured below that limit or an event recorded before it.

Run it with ``python -m services.common.relay`` (settings from the environment).
"""

import argparse
import asyncio
import signal

import asyncpg
import nats.errors

from services.common import bus, metrics
from services.common.config import ServerConfig, Settings
from services.common.eventlog import EventLog
from services.common.logs import configure_logging, get_logger

NOTIFY_CHANNEL = "kb_events_appended"
# What a lost connection to NATS or PostgreSQL looks like (a warning); anything else is logged with its trace.
TRANSIENT_ERRORS = (
    OSError,
    TimeoutError,
    nats.errors.Error,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection the server closed in the middle of a message
)

RELAY_PUBLISHED = metrics.counter(
    "kb_relay_published_total", "Events the relay published and JetStream acked", ["stream"]
)
RELAY_DUPLICATES = metrics.counter(
    "kb_relay_duplicates_total", "Re-published events JetStream dropped as duplicates (after a crash)", ["stream"]
)
RELAY_LAG = metrics.gauge(
    "kb_relay_lag_events", "Events in the log not yet published to JetStream (the active relay only)", ["stream"]
)
RELAY_ACTIVE = metrics.gauge(
    "kb_relay_active", "1 while this relay holds the stream's advisory lock and publishes, 0 on standby", ["stream"]
)
RELAY_SKIPPED = metrics.gauge(
    "kb_relay_skipped_events",
    "Events the relay could not publish and skipped on the bus (too large for NATS), all time, from relay_skipped",
    ["stream"],
)
RELAY_ERRORS = metrics.counter("kb_relay_errors_total", "Relay cycles that failed and were retried", ["stream"])

log = get_logger(component="relay")

# Room for the subject and the Nats-Msg-Id header, which NATS counts against max_payload with the payload.
HEADER_ALLOWANCE_BYTES = 1024


class Relay:
    def __init__(
        self,
        event_log: EventLog,
        settings: Settings,
        *,
        batch_size: int = 1000,
        poll_interval_s: float = 1.0,
        publish_timeout_s: float = 10.0,
        retry_delay_s: float = 1.0,
        connect_timeout_s: float = 10.0,
    ):
        self.log = event_log
        self.settings = settings
        self.batch_size = batch_size
        self.poll_interval_s = poll_interval_s
        self.publish_timeout_s = publish_timeout_s
        self.retry_delay_s = retry_delay_s
        self.connect_timeout_s = connect_timeout_s
        self.checkpoint = 0
        self.publish_limit = 0  # the NATS server's max_payload, read on each connection
        self.active = asyncio.Event()  # set while this relay holds the lock and publishes
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._stream = settings.events_stream
        RELAY_ACTIVE.labels(self._stream)  # the series exists (0) from the start: a standby says so

    async def run(self) -> None:
        """Publishes until stop(); a failed cycle (NATS or PostgreSQL gone) is logged, then retried from the
        checkpoint."""
        while not self._stopping.is_set():
            try:
                await self._run_once()
            except TRANSIENT_ERRORS as err:
                RELAY_ERRORS.labels(self._stream).inc()
                log.warning("relay_retrying", stream=self._stream, error=repr(err), checkpoint=self.checkpoint)
            except Exception:
                # Unexpected, but a relay that gives up stalls every consumer: log it loudly and go on.
                RELAY_ERRORS.labels(self._stream).inc()
                log.exception("relay_failed_retrying", stream=self._stream, checkpoint=self.checkpoint)
            finally:
                self._stand_by()
            await self._sleep(self.retry_delay_s)

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    async def _run_once(self) -> None:
        nc = await bus.connect(self.settings, name="kb-relay")
        # One connection holds the advisory lock, listens, reads and writes the checkpoint: if it dies, the lock is
        # gone and so is every query this relay could still make, so a second relay can never publish beside it.
        conn = await asyncpg.connect(self.settings.database_url, timeout=self.connect_timeout_s)
        try:
            js = nc.jetstream(publish_async_max_pending=self.batch_size)
            await bus.ensure_stream(js, self.settings)  # sets no max_msg_size: the server's max_payload is the limit
            self.publish_limit = nc.max_payload
            if not await self._acquire_lock(conn):
                return
            await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
            self.checkpoint = await self._load_checkpoint(conn)
            await self._report_skipped(conn)
            self.active.set()
            RELAY_ACTIVE.labels(self._stream).set(1)
            log.info("relay_active", stream=self._stream, checkpoint=self.checkpoint)
            while not self._stopping.is_set():
                self._wake.clear()
                published = await self._publish_batch(js, conn)
                if published < self.batch_size:
                    await self._sleep(self.poll_interval_s)
        finally:
            await _close(conn)
            await nc.close()

    def _stand_by(self) -> None:
        """After the lock is lost or let go: no lag of ours any more (another relay may be publishing and reports
        its own), so the series goes rather than stay at its last value."""
        if self.active.is_set():
            self.active.clear()
            RELAY_ACTIVE.labels(self._stream).set(0)
            RELAY_LAG.remove(self._stream)

    async def _acquire_lock(self, conn: asyncpg.Connection) -> bool:
        """Waits (standby) until this relay holds the stream's advisory lock; False when stopped meanwhile."""
        while not self._stopping.is_set():
            if await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", f"kb-relay:{self._stream}"):
                return True
            await self._sleep(self.poll_interval_s)
        return False

    async def _load_checkpoint(self, conn: asyncpg.Connection) -> int:
        await conn.execute("INSERT INTO relay_checkpoints (stream) VALUES ($1) ON CONFLICT DO NOTHING", self._stream)
        return await conn.fetchval("SELECT position FROM relay_checkpoints WHERE stream = $1", self._stream)

    async def _publish_batch(self, js, conn: asyncpg.Connection) -> int:
        events = await self.log.read_batch(self.checkpoint, self.batch_size, conn=conn)
        if events:
            encoded = [(event, event.SerializeToString()) for event in events]
            too_large = [(e, data) for e, data in encoded if len(data) + HEADER_ALLOWANCE_BYTES > self.publish_limit]
            # publish_async pipelines the batch on one connection, so the stream keeps the log's order.
            acks = [
                await js.publish_async(
                    bus.subject(self.settings, event.type), data, headers={"Nats-Msg-Id": event.event_id}
                )
                for event, data in encoded
                if len(data) + HEADER_ALLOWANCE_BYTES <= self.publish_limit
            ]
            acks = await asyncio.wait_for(asyncio.gather(*acks), self.publish_timeout_s)
            async with conn.transaction():
                if too_large:
                    await self._record_skipped(conn, too_large)
                await self._save_checkpoint(conn, events[-1].global_position)
            if too_large:
                await self._report_skipped(conn)
            duplicates = sum(1 for ack in acks if ack.duplicate)
            RELAY_PUBLISHED.labels(self._stream).inc(len(acks) - duplicates)
            if duplicates:
                RELAY_DUPLICATES.labels(self._stream).inc(duplicates)
                log.info("relay_duplicates_dropped", stream=self._stream, count=duplicates)
        RELAY_LAG.labels(self._stream).set(await self.log.head_position(conn) - self.checkpoint)
        return len(events)

    async def _record_skipped(self, conn: asyncpg.Connection, skipped) -> None:
        for event, data in skipped:
            log.error(
                "relay_skipped_event",
                stream=self._stream,
                event_id=event.event_id,
                position=event.global_position,
                type=event.type,
                bytes=len(data),
                limit_bytes=self.publish_limit,
            )
        await conn.executemany(
            "INSERT INTO relay_skipped (stream, global_position, event_id, type, bytes, limit_bytes)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            [
                (self._stream, e.global_position, e.event_id, e.type, len(data), self.publish_limit)
                for e, data in skipped
            ],
        )

    async def _report_skipped(self, conn: asyncpg.Connection) -> None:
        count = await conn.fetchval("SELECT count(*) FROM relay_skipped WHERE stream = $1", self._stream)
        RELAY_SKIPPED.labels(self._stream).set(count)

    async def _save_checkpoint(self, conn: asyncpg.Connection, position: int) -> None:
        await conn.execute(
            "UPDATE relay_checkpoints SET position = $2, updated_at = now() WHERE stream = $1", self._stream, position
        )
        self.checkpoint = position

    def _on_notify(self, *_args) -> None:
        self._wake.set()

    async def _sleep(self, seconds: float) -> None:
        """Sleeps until woken (a NOTIFY or stop()) or for `seconds`."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            pass


async def _close(conn: asyncpg.Connection) -> None:
    try:
        await conn.close(timeout=5)
    except Exception:  # a connection already broken: drop it without the goodbye
        conn.terminate()


async def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m services.common.relay", description="Publish the kernelboard event log to JetStream."
    )
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=1.0, help="seconds between polls when no NOTIFY comes")
    parser.add_argument(
        "--metrics-port", type=int, help="Prometheus /metrics (0: none; default KB_RELAY_METRICS_PORT, else 9105)"
    )
    args = parser.parse_args(argv)
    configure_logging("relay")
    settings = Settings.from_env()
    config = ServerConfig.from_env("relay")
    metrics_port = config.metrics_port if args.metrics_port is None else args.metrics_port
    if metrics_port:
        metrics.start_metrics_server(metrics_port)
    event_log = await EventLog.connect(settings.database_url, **config.pool_options())
    relay = Relay(
        event_log,
        settings,
        batch_size=args.batch_size,
        poll_interval_s=args.poll_interval,
        connect_timeout_s=config.pg_connect_timeout_s,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(relay.stop()))
    try:
        await relay.run()
    finally:
        await event_log.close()


if __name__ == "__main__":
    asyncio.run(main())
