"""Throwaway JetStream streams for the tests: each test names its own stream and subject prefix
(KB_TEST_<AREA>_<random>, kbtest.<area><random>) so that suites run side by side on one NATS, and deletes the stream
afterwards."""

import os
import secrets
from contextlib import asynccontextmanager

from services.common import bus
from services.common.config import Settings

NATS_URL = os.environ.get("KB_TEST_NATS_URL", "nats://127.0.0.1:4222")


def stream_settings(area: str, **fields) -> Settings:
    """Settings naming a stream and subject prefix of their own; ``fields`` sets the rest (database_url, home)."""
    tag = secrets.token_hex(4)
    return Settings(
        nats_url=NATS_URL,
        events_stream=f"KB_TEST_{area.upper()}_{tag.upper()}",
        events_subject_prefix=f"kbtest.{area}{tag}",
        **fields,
    )


async def delete_stream(settings: Settings) -> None:
    nc = await bus.connect(settings)
    try:
        await bus.delete_stream(nc.jetstream(), settings)
    finally:
        await nc.close()


@asynccontextmanager
async def throwaway_stream(area: str, **fields):
    """Settings with a stream of their own, deleted on the way out."""
    settings = stream_settings(area, **fields)
    try:
        yield settings
    finally:
        await delete_stream(settings)
