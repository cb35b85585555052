"""Consumers: apply the log to a service's own tables, exactly once per event.

A consumer's effects and its checkpoint commit in one PostgreSQL transaction; a NATS message is acked only after
that commit. A redelivered or duplicated message finds its position at or below the checkpoint and changes nothing.
NATS only notifies: when a message's position is beyond checkpoint + 1, the consumer catches up from the log, which
is the truth. A handler that keeps failing has its event dead-lettered (an EventDeadLettered event on the stream
`deadletter:<consumer>`) so the consumer moves on instead of sticking; kb_consumer_dead_letters counts that stream,
read from the log, so that it survives restarts and agrees across replicas.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
import nats.errors
from kernelboard.v1 import events_pb2
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from contracts import names
from services.common import bus, metrics
from services.common.config import Settings
from services.common.eventlog import EventLog, NewEvent
from services.common.logs import bind_ids, get_logger

Handler = Callable[[asyncpg.Connection, events_pb2.Event], Awaitable[None]]

CONSUMER_PROCESSED = metrics.counter("kb_consumer_processed_total", "Events a consumer's handler applied", ["consumer"])
CONSUMER_DEAD_LETTERED = metrics.counter(
    "kb_consumer_dead_lettered_total", "Events a consumer gave up on after its retries", ["consumer"]
)
CONSUMER_DEAD_LETTERS = metrics.gauge(
    "kb_consumer_dead_letters",
    "Events dead-lettered for the consumer as recorded in the log (stream deadletter:<consumer>), all time",
    ["consumer"],
)
CONSUMER_LAG = metrics.gauge(
    "kb_consumer_lag_events", "Events in the log beyond the consumer's checkpoint", ["consumer"]
)
CONSUMER_ERRORS = metrics.counter(
    "kb_consumer_errors_total", "Consumer cycles that failed (database or NATS trouble) and were retried", ["consumer"]
)
TRANSIENT_ERRORS = (
    OSError,
    TimeoutError,
    nats.errors.Error,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
# The database connection is gone: retrying the handler on it, or dead-lettering its event, would be wrong.
CONNECTION_LOST = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
)

log = get_logger(component="consumer")


class Consumer:
    def __init__(
        self,
        name: str,
        log: EventLog,
        settings: Settings,
        handler: Handler,
        types: set[str] | None = None,
        *,
        batch_size: int = 100,
        max_attempts: int = 3,
        retry_backoff_s: float = 0.1,
        ack_wait_s: float = 30.0,
        fetch_timeout_s: float = 2.0,
    ):
        """name: also the durable JetStream consumer's name (letters, digits, - and _).
        types: the event types the handler wants (None: all); the checkpoint still passes every event.
        batch_size: events per transaction. A handler that appends to the log holds the log's append lock until its
        batch commits, so such a consumer should keep its batches small."""
        self.name = name
        self.log = log
        self.settings = settings
        self.handler = handler
        self.types = types
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.retry_backoff_s = retry_backoff_s
        self.ack_wait_s = ack_wait_s
        self.fetch_timeout_s = fetch_timeout_s
        self.checkpoint = 0
        self.ready = asyncio.Event()  # set once run() follows its durable JetStream consumer
        self._stopping = asyncio.Event()
        self._deadletter_stream = names.deadletter_stream(name)

    async def catch_up(self) -> int:
        """Applies the log from the checkpoint, from PostgreSQL alone; returns the new checkpoint."""
        while True:
            # Any read after this sees every event up to head (positions become visible in commit order).
            head = await self.log.head_position()
            async with self.log.pool.acquire() as conn:
                async with conn.transaction():
                    checkpoint = await self._lock_checkpoint(conn)
                    events = await self.log.read_batch(checkpoint, self.batch_size, types=self.types, conn=conn)
                    full = len(events) == self.batch_size
                    new_checkpoint = events[-1].global_position if full else max(head, checkpoint, *_positions(events))
                    counts = await self._apply(conn, events)
                    if new_checkpoint != checkpoint:
                        await self._save_checkpoint(conn, new_checkpoint)
            self._committed(new_checkpoint, *counts)
            if not full:
                await self._report_lag(head)
                # Also on every quiet poll: another replica of this consumer may have dead-lettered meanwhile.
                await self._report_dead_letters()
                return new_checkpoint

    async def run(self) -> None:
        """Catches up, then follows the JetStream stream until stop()."""
        await self.catch_up()
        nc = await bus.connect(self.settings, name=f"kb-consumer-{self.name}")
        try:
            js = nc.jetstream()
            await bus.ensure_stream(js, self.settings)
            subscription = await js.pull_subscribe(
                names.every_event_subject(self.settings.events_subject_prefix),
                durable=self.name,
                stream=self.settings.events_stream,
                # A new durable starts at new messages: everything before is in the log and was caught up above.
                config=ConsumerConfig(
                    ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW, ack_wait=self.ack_wait_s
                ),
            )
            self.ready.set()
            while not self._stopping.is_set():
                try:
                    try:
                        messages = await self._fetch_unless_stopped(subscription)
                    except TimeoutError:
                        # Quiet bus: poll the log, so nothing waits on a notification NATS lost.
                        await self.catch_up()
                        continue
                    await self.handle_messages(messages)
                except TRANSIENT_ERRORS as err:
                    # Nothing was committed, or it was and the unacked messages come back and change nothing.
                    CONSUMER_ERRORS.labels(self.name).inc()
                    log.warning("consumer_retrying", consumer=self.name, error=repr(err), checkpoint=self.checkpoint)
                    await asyncio.sleep(1)
                except Exception:
                    # Unexpected (handler errors are dead-lettered before this): log loudly, retry, never stall.
                    CONSUMER_ERRORS.labels(self.name).inc()
                    log.exception("consumer_failed_retrying", consumer=self.name, checkpoint=self.checkpoint)
                    await asyncio.sleep(1)
        finally:
            self.ready.clear()
            await nc.close()

    async def stop(self) -> None:
        self._stopping.set()

    async def _fetch_unless_stopped(self, subscription) -> list[Msg]:
        """The next batch; an empty one when stop() comes first (an unacked fetched message is redelivered).

        The fetch never outlives this call, even when the consumer is cancelled: left pending, it would see the
        connection close under it, and nats-py answers that with ConnectionClosedError, which nobody would read."""
        fetch = asyncio.ensure_future(subscription.fetch(self.batch_size, timeout=self.fetch_timeout_s))
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({fetch, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not fetch.done():
                fetch.cancel()
                await asyncio.wait({fetch})  # ends cancelled while the connection is still open
                if not fetch.cancelled():
                    fetch.exception()  # read, so its end is not reported as lost; its messages are redelivered
        return [] if fetch.cancelled() else fetch.result()

    async def handle_messages(self, messages: Sequence[Msg]) -> None:
        """Applies a fetched batch (effects + checkpoint in one transaction), then acks it."""
        events = []
        for msg in messages:
            try:
                events.append(events_pb2.Event.FromString(msg.data))
            except Exception:  # not an event envelope: nothing could ever read it
                log.error("consumer_undecodable_message", consumer=self.name, subject=msg.subject)
        events.sort(key=lambda e: e.global_position)
        gap = False
        async with self.log.pool.acquire() as conn:
            async with conn.transaction():
                checkpoint = await self._lock_checkpoint(conn)
                fresh = [e for e in events if e.global_position > checkpoint]
                if _positions(fresh) == list(range(checkpoint + 1, checkpoint + 1 + len(fresh))):
                    counts = await self._apply(conn, fresh)
                    new_checkpoint = fresh[-1].global_position if fresh else checkpoint
                    if fresh:
                        await self._save_checkpoint(conn, new_checkpoint)
                else:
                    gap = True
        if gap:
            log.info("consumer_gap", consumer=self.name, checkpoint=checkpoint, first=fresh[0].global_position)
            await self.catch_up()
        else:
            self._committed(new_checkpoint, *counts)
            await self._report_lag()
            if counts[1]:
                await self._report_dead_letters()
        await self._ack(messages)

    async def _ack(self, messages: Sequence[Msg]) -> None:
        # JetStream handles one connection's acks in order: the last one confirmed means all landed.
        for msg in messages[:-1]:
            await msg.ack()
        if messages:
            await messages[-1].ack_sync()

    async def _apply(self, conn: asyncpg.Connection, events: Sequence[events_pb2.Event]) -> tuple[int, int]:
        """Runs the handler on each wanted event inside the open transaction; returns (processed, dead-lettered).

        Fast path: the whole batch in one savepoint. When a handler fails, that savepoint is rolled back and the
        batch is applied again one event at a time, each in its own savepoint with retries (the failed call counts
        as the failing event's first attempt). Handlers before it thus run twice, their first effects rolled back:
        as after a crash before commit, a handler's database effects apply once, its calls may repeat."""
        wanted = [e for e in events if self.types is None or e.type in self.types]
        if not wanted:
            return 0, 0
        failing = None
        try:
            async with conn.transaction():
                for event in wanted:
                    failing = event
                    await self._call_handler(conn, event)
            return len(wanted), 0
        except CONNECTION_LOST:
            raise  # not the events' fault: nothing commits, the batch comes again
        except Exception as err:
            if failing is None:
                raise  # the savepoint itself failed: no handler to blame
            self._log_failure(failing, 1, err)
            batch_error = err
        processed = dead_lettered = 0
        for event in wanted:
            if event is failing:
                error = await self._apply_one(conn, event, attempts_done=1, last_error=batch_error)
            else:
                error = await self._apply_one(conn, event)
            if error is None:
                processed += 1
            elif await self._dead_letter(conn, event, error):
                dead_lettered += 1
        return processed, dead_lettered

    async def _apply_one(
        self, conn: asyncpg.Connection, event: events_pb2.Event, attempts_done: int = 0, last_error=None
    ) -> Exception | None:
        """Tries the handler until max_attempts in all, each try in a savepoint; returns the last error, or None."""
        for attempt in range(attempts_done + 1, self.max_attempts + 1):
            if attempt > 1:
                await asyncio.sleep(self.retry_backoff_s * 2 ** (attempt - 2))
            try:
                async with conn.transaction():
                    await self._call_handler(conn, event)
                return None
            except CONNECTION_LOST:
                raise
            except Exception as err:  # any handler failure is retried, then dead-lettered
                self._log_failure(event, attempt, err)
                last_error = err
        return last_error

    async def _call_handler(self, conn: asyncpg.Connection, event: events_pb2.Event) -> None:
        with bind_ids(event_id=event.event_id):
            await self.handler(conn, event)

    def _log_failure(self, event: events_pb2.Event, attempt: int, error: Exception) -> None:
        log.warning(
            "consumer_handler_failed",
            consumer=self.name,
            event_id=event.event_id,
            position=event.global_position,
            attempt=attempt,
            error=repr(error),
        )

    async def _dead_letter(self, conn: asyncpg.Connection, event: events_pb2.Event, error: Exception) -> bool:
        if event.stream == self._deadletter_stream:
            # Dead-lettering our own dead letter would feed itself forever.
            log.error("consumer_skipped_own_dead_letter", consumer=self.name, event_id=event.event_id)
            return False
        letter = events_pb2.EventDeadLettered(
            consumer=self.name,
            event_id=event.event_id,
            global_position=event.global_position,
            error=repr(error)[:2000],
            attempts=self.max_attempts,
        )
        await self.log.append(
            self._deadletter_stream, None, [NewEvent(letter, actor=names.consumer_actor(self.name))], conn=conn
        )
        log.error("consumer_dead_lettered", consumer=self.name, event_id=event.event_id, error=letter.error)
        return True

    async def _lock_checkpoint(self, conn: asyncpg.Connection) -> int:
        """The committed checkpoint, locked: two instances of one consumer never apply the same event."""
        position = await conn.fetchval(
            "SELECT position FROM consumer_checkpoints WHERE consumer = $1 FOR UPDATE", self.name
        )
        if position is None:
            await conn.execute(
                "INSERT INTO consumer_checkpoints (consumer) VALUES ($1) ON CONFLICT DO NOTHING", self.name
            )
            position = await conn.fetchval(
                "SELECT position FROM consumer_checkpoints WHERE consumer = $1 FOR UPDATE", self.name
            )
        return position

    async def _save_checkpoint(self, conn: asyncpg.Connection, position: int) -> None:
        await conn.execute(
            "UPDATE consumer_checkpoints SET position = $2, updated_at = now() WHERE consumer = $1", self.name, position
        )

    def _committed(self, checkpoint: int, processed: int, dead_lettered: int) -> None:
        self.checkpoint = checkpoint
        CONSUMER_PROCESSED.labels(self.name).inc(processed)
        CONSUMER_DEAD_LETTERED.labels(self.name).inc(dead_lettered)

    async def _report_dead_letters(self) -> None:
        CONSUMER_DEAD_LETTERS.labels(self.name).set(await self.log.stream_version(self._deadletter_stream))

    async def _report_lag(self, head: int | None = None) -> None:
        head = await self.log.head_position() if head is None else head
        CONSUMER_LAG.labels(self.name).set(max(0, head - self.checkpoint))


def _positions(events: Sequence[events_pb2.Event]) -> list[int]:
    return [e.global_position for e in events]
