"""Where the end-to-end rebuild's time outside the fold goes: reading rows, parsing each event, or parsing a batch.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/board/rebuild_read_cost.py [--events 200000] \
        [--quiet-lock /work/quiet.lock]

A scratch database (dropped afterwards) is filled with the generated log (as bench_rebuild_from_log.py does). Then,
one after the other, per event: the rows of the rebuild's query fetched in batches of 5,000 (asyncpg, and
PostgreSQL's own time, which the rebuild overlaps with the fold); ``decode_row`` on each, as the rebuild does; and,
as an alternative that was measured and not adopted, each batch's events as one protobuf message (a repeated
Event, concatenated here in Python and parsed once). Prints one JSON line.
"""

import argparse
import asyncio
import fcntl
import json
import os
import secrets
import sys
import time
from pathlib import Path

import asyncpg
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from kernelboard.v1 import events_pb2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rebuild_from_log import ADMIN_URL, fill, holding  # noqa: E402

from services.board.projector import READ_BATCH  # noqa: E402
from services.common.eventlog import EventLog, decode_row  # noqa: E402


def batch_message_class():
    """A message with ``repeated kernelboard.v1.Event events = 1``: one parse for a whole batch."""
    file = descriptor_pb2.FileDescriptorProto(
        name="bench_event_batch.proto", package="bench", dependency=[events_pb2.DESCRIPTOR.name]
    )
    file.message_type.add(name="EventBatch").field.add(
        name="events",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type_name=".kernelboard.v1.Event",
    )
    pool = descriptor_pool.Default()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.EventBatch"))


def as_batch_field(encoded: bytes) -> bytes:
    """One event's bytes as an element of field 1 (tag 0x0A, varint length)."""
    length, varint = len(encoded), bytearray()
    while True:
        low, length = length & 0x7F, length >> 7
        varint.append(low | (0x80 if length else 0))
        if not length:
            return b"\x0a" + bytes(varint) + encoded


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--quiet-lock", help="lock file: shared while filling, exclusive while timing")
    args = parser.parse_args()
    name = f"kb_bench_board_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        log = await EventLog.connect(ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
        with holding(args.quiet_lock, fcntl.LOCK_SH):
            await fill(log, args.events)
        with holding(args.quiet_lock, fcntl.LOCK_EX):
            load_before = os.getloadavg()[0]
            started, position, batches = time.perf_counter(), 0, []
            while rows := await log._fetch_rows(position, READ_BATCH, None):
                batches.append(rows)
                position = rows[-1][0]
            fetch_s = time.perf_counter() - started

            started = time.perf_counter()
            for rows in batches:
                for row in rows:
                    decode_row(row)
            decode_s = time.perf_counter() - started

            blobs = [b"".join(as_batch_field(row[2]) for row in rows) for rows in batches]
            event_batch = batch_message_class()
            started = time.perf_counter()
            parsed = 0
            for blob in blobs:
                parsed += len(list(event_batch.FromString(blob).events))
            batch_parse_s = time.perf_counter() - started
            load_after = os.getloadavg()[0]
        await log.close()
        events = sum(len(rows) for rows in batches)
        assert events == parsed == args.events
        print(
            json.dumps(
                {
                    "benchmark": "board rebuild: read cost per event",
                    "events": events,
                    "fetch_rows_us_per_event": round(fetch_s / events * 1e6, 2),
                    "decode_row_us_per_event": round(decode_s / events * 1e6, 2),
                    "batch_parse_us_per_event": round(batch_parse_s / events * 1e6, 2),
                    "cpus": os.cpu_count(),
                    "load_average_1m_before": round(load_before, 2),
                    "load_average_1m_after": round(load_after, 2),
                }
            )
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
