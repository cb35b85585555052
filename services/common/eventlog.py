"""The append-only event log on PostgreSQL (asyncpg): append with optimistic concurrency, read in commit order.

The schema and the reasoning behind the global position live in migrations/0001_event_log.sql.
"""

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from kernelboard.v1 import events_pb2

from contracts.limits import DEFAULT_EVENT_FIELD_BYTES, EVENT_FIELD_BYTES, MAX_EVENT_BYTES
from contracts.refusals import check_length
from services.common.migrate import apply_migrations

Event = events_pb2.Event

# The payload oneof: message name (the event's type) -> the Event field that carries it.
_PAYLOAD_ONEOF = Event.DESCRIPTOR.oneofs_by_name["payload"].fields
PAYLOAD_FIELDS: dict[str, str] = {field.message_type.name: field.name for field in _PAYLOAD_ONEOF}
_PAYLOAD_TYPES: dict[str, str] = {field.message_type.full_name: field.message_type.name for field in _PAYLOAD_ONEOF}


def _varint(value: int) -> bytes:
    if value <= 0x7F:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [bytes((v,)) for v in range(0x80)]
# The wire tag of each payload field (length-delimited), which envelope_head ends with before the payload's length.
_PAYLOAD_TAGS: dict[str, bytes] = {field.message_type.name: _varint(field.number << 3 | 2) for field in _PAYLOAD_ONEOF}

_APPEND = (
    "SELECT first_position, actual_version, duplicate_ids FROM kb_append_events($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DUPLICATE_KEY = re.compile(r"\(event_id\)=\(([0-9a-f-]+)\)")
_COLUMNS = "global_position, stream_version, envelope_head || payload"
_READ_ALL = f"SELECT {_COLUMNS} FROM events WHERE global_position > $1 ORDER BY global_position LIMIT $2"
_READ_ALL_TYPES = (
    f"SELECT {_COLUMNS} FROM events WHERE global_position > $1 AND type = ANY($3::text[])"
    " ORDER BY global_position LIMIT $2"
)
_READ_POSITIONS = f"SELECT {_COLUMNS} FROM events WHERE global_position = ANY($1::bigint[]) ORDER BY global_position"
_READ_STREAM = f"SELECT {_COLUMNS} FROM events WHERE stream = $1 AND stream_version >= $2 ORDER BY stream_version"
_READ_STREAM_FIRST = f"SELECT {_COLUMNS} FROM events WHERE stream = $1 AND stream_version = 1"


@dataclass(frozen=True)
class NewEvent:
    payload: Message  # one of the Event.payload oneof messages, e.g. events_pb2.RouteStarted(...)
    actor: str
    event_id: str | None = None  # default: uuid4; a given id makes a retried append fail as a duplicate, never twice
    verifier_version: int | None = None
    occurred_at: datetime | None = None  # default: now (UTC)


class ConcurrencyConflict(Exception):
    def __init__(self, stream: str, expected: int, actual: int):
        super().__init__(f"stream {stream!r}: expected version {expected}, actual version {actual}")
        self.stream, self.expected, self.actual = stream, expected, actual


class DuplicateEvent(Exception):
    def __init__(self, event_ids: Sequence[str]):
        super().__init__(f"event id(s) already in the log: {', '.join(sorted(event_ids))}")
        self.event_ids = sorted(event_ids)


def event_type(payload: Message) -> str:
    """The payload message's name, e.g. "CommitIngested"; refuses messages that are not Event payloads."""
    descriptor = getattr(payload, "DESCRIPTOR", None)
    name = _PAYLOAD_TYPES.get(getattr(descriptor, "full_name", None))
    if name is None:
        raise ValueError(f"{getattr(descriptor, 'full_name', type(payload).__name__)} is not an Event payload")
    return name


def payload_of(event: Event) -> Message | None:
    """The set payload message (None when the log holds a type this code does not know)."""
    field = event.WhichOneof("payload")
    return getattr(event, field) if field else None


def decode_row(row) -> Event:
    """A row of _COLUMNS -> the Event envelope, payload oneof set (one protobuf parse; see envelope_head)."""
    position, version, encoded = row
    event = Event.FromString(encoded)
    event.global_position = position
    event.stream_version = version
    return event


class EventLog:
    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool

    @classmethod
    async def connect(cls, database_url: str, *, migrate: bool = True, **pool_options) -> "EventLog":
        pool = await asyncpg.create_pool(database_url, **pool_options)
        if migrate:
            async with pool.acquire() as conn:
                await apply_migrations(conn)
        return cls(pool)

    async def close(self) -> None:
        await self.pool.close()

    async def append(
        self,
        stream: str,
        expected_version: int | None,
        events: Sequence[NewEvent],
        *,
        conn: asyncpg.Connection | None = None,
    ) -> list[Event]:
        """Appends events to a stream atomically; returns their envelopes with versions and positions filled in.

        expected_version: the stream's current version (0: the stream must not exist yet), None: don't check.
        conn: a connection inside the caller's transaction; the append then commits or rolls back with it (and holds
        the log's append lock until then, so append late in that transaction).
        Raises ConcurrencyConflict (nothing written), or DuplicateEvent when a given event id is already in the log:
        a writer that retries after an unknown outcome with the same ids gets DuplicateEvent if the first attempt
        committed, and can take that as done.
        """
        if not stream:
            raise ValueError("an event needs a stream name")
        if expected_version is not None and expected_version < 0:
            raise ValueError(f"expected_version must be >= 0 or None, got {expected_version}")
        if not events:
            return []
        envelopes, payloads, occurred, heads = [], [], [], []
        for new in events:
            envelope, payload, occurred_at, head = _envelope(stream, new)
            envelopes.append(envelope)
            payloads.append(payload)
            occurred.append(occurred_at)
            heads.append(head)
        ids = [e.event_id for e in envelopes]
        if len(set(ids)) != len(ids):
            raise DuplicateEvent({i for i in ids if ids.count(i) > 1})
        args = (
            stream,
            expected_version,
            ids,
            [e.type for e in envelopes],
            payloads,
            occurred,
            [e.actor for e in envelopes],
            [new.verifier_version for new in events],
            heads,
        )
        try:
            row = await (conn or self.pool).fetchrow(_APPEND, *args)
        except asyncpg.UniqueViolationError as err:
            if err.constraint_name == "events_event_id_key":
                raise DuplicateEvent(_DUPLICATE_KEY.findall(err.detail or "") or ids) from err
            raise
        first_position, actual_version, duplicates = row
        if first_position is None:
            if duplicates:
                raise DuplicateEvent([str(d) for d in duplicates])
            raise ConcurrencyConflict(stream, expected_version, actual_version)
        for i, envelope in enumerate(envelopes):
            envelope.stream_version = actual_version + 1 + i
            envelope.global_position = first_position + i
        return envelopes

    async def read_batch(
        self,
        from_position: int = 0,
        limit: int = 1000,
        *,
        types: set[str] | None = None,
        conn: asyncpg.Connection | None = None,
    ) -> list[Event]:
        """Up to `limit` events with positions > from_position, in commit order (one query)."""
        return [decode_row(r) for r in await self._fetch_rows(from_position, limit, types, conn)]

    async def read_all(
        self, from_position: int = 0, *, batch_size: int = 1000, types: set[str] | None = None
    ) -> AsyncIterator[Event]:
        """Every event with position > from_position, in commit order, fetched in batches (keyset pagination).

        Ends at the head as seen by the last batch. While one batch is decoded the next is already being fetched
        (on a second pooled connection): each batch is its own consistent read starting after the previous one's
        last position, and positions become visible in commit order, so no event is skipped or repeated.
        """
        rows = await self._fetch_rows(from_position, batch_size, types)
        while rows:
            following = None
            if len(rows) == batch_size:
                following = asyncio.ensure_future(self._fetch_rows(rows[-1][0], batch_size, types))
                await asyncio.sleep(0)  # let the next query go out before decoding this batch
            try:
                for row in rows:
                    yield decode_row(row)
            except BaseException:  # the caller stopped early (GeneratorExit) or failed: drop the prefetch
                if following is not None:
                    following.cancel()
                raise
            rows = await following if following is not None else []

    async def _fetch_rows(self, from_position, limit, types, conn=None) -> list:
        db = conn or self.pool
        if types is None:
            return await db.fetch(_READ_ALL, from_position, limit)
        return await db.fetch(_READ_ALL_TYPES, from_position, limit, sorted(types))

    async def read_positions(self, positions: list[int]) -> list[Event]:
        """The events at these positions (those that exist), in position order, in one query."""
        return [decode_row(r) for r in await self.pool.fetch(_READ_POSITIONS, positions)]

    async def read_stream(self, stream: str, from_version: int = 1) -> list[Event]:
        return [decode_row(r) for r in await self.pool.fetch(_READ_STREAM, stream, from_version)]

    async def first_event(self, stream: str, conn: asyncpg.Connection | None = None) -> Event | None:
        """The event that opened the stream (version 1), None when the stream does not exist; one indexed read."""
        row = await (conn or self.pool).fetchrow(_READ_STREAM_FIRST, stream)
        return decode_row(row) if row is not None else None

    async def stream_version(self, stream: str) -> int:
        """The stream's current version, 0 when it does not exist."""
        return await self.pool.fetchval("SELECT coalesce(max(stream_version), 0) FROM events WHERE stream = $1", stream)

    async def head_position(self, conn: asyncpg.Connection | None = None) -> int:
        """The last committed global position: every event at or below it is visible to any later read."""
        return await (conn or self.pool).fetchval("SELECT position FROM event_log_head")


def _envelope(stream: str, new: NewEvent) -> tuple[Event, bytes, datetime, bytes]:
    """The envelope (version and position still unset), the serialized payload, the occurrence time and the
    envelope_head stored beside the payload."""
    type_ = event_type(new.payload)
    event_id = _new_event_id() if new.event_id is None else _check_uuid(new.event_id)
    if not new.actor:
        raise ValueError(f"event {event_id}: an event needs an actor")
    occurred_at = new.occurred_at or datetime.now(UTC)
    if occurred_at.tzinfo is None:
        raise ValueError(f"event {event_id}: occurred_at must carry a time zone")
    since_epoch = occurred_at - _EPOCH
    envelope = Event(
        event_id=event_id,
        stream=stream,
        type=type_,
        actor=new.actor,
        occurred_at=Timestamp(
            seconds=since_epoch.days * 86400 + since_epoch.seconds, nanos=since_epoch.microseconds * 1000
        ),
    )
    if new.verifier_version is not None:
        envelope.verifier_version = new.verifier_version
    payload = new.payload.SerializeToString()
    check_event_size(type_, new.payload, len(payload))
    head = envelope.SerializeToString() + _PAYLOAD_TAGS[type_] + _varint(len(payload))
    field = getattr(envelope, PAYLOAD_FIELDS[type_])
    field.SetInParent()
    field.MergeFrom(new.payload)
    return envelope, payload, occurred_at, head


# A payload this small cannot hold a field over its limit: the common case skips the walk over its fields.
_SMALLEST_FIELD_LIMIT = min(DEFAULT_EVENT_FIELD_BYTES, *EVENT_FIELD_BYTES.values())


def check_event_size(type_: str, payload: Message, size: int) -> None:
    """Refuse (INVALID_ARGUMENT, naming the field, its size and the limit) an event with a field over its limit
    (contracts/limits.py) or a payload over MAX_EVENT_BYTES: whatever the log records, the relay can publish."""
    if size <= _SMALLEST_FIELD_LIMIT:
        return
    for field, value in payload.ListFields():
        name = f"{type_}.{field.name}"
        check_length(name, _field_bytes(field, value), EVENT_FIELD_BYTES.get(name, DEFAULT_EVENT_FIELD_BYTES))
    check_length(type_, size, MAX_EVENT_BYTES)


def _field_bytes(field: FieldDescriptor, value) -> int:
    values = value if field.is_repeated else (value,)
    if field.type == FieldDescriptor.TYPE_STRING:
        return sum(len(v.encode()) for v in values)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return sum(len(v) for v in values)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return sum(v.ByteSize() for v in values)
    return 0  # numbers and enums: a few bytes each


def _new_event_id() -> str:
    """A random (version 4) UUID as text, a few times faster than str(uuid.uuid4()) on the append path."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _check_uuid(event_id: str) -> str:
    try:
        return str(uuid.UUID(event_id))
    except (ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"event_id {event_id!r} is not a UUID") from err
