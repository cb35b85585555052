"""The NATS JetStream bus: connection, the events stream and its subjects (`<prefix>.<EventType>`)."""

import nats
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import NotFoundError

from contracts import names
from services.common.config import Settings

# A re-publish with the same Nats-Msg-Id (the event id) inside this window is dropped by JetStream: it covers a relay
# that crashed after publishing and before saving its checkpoint, and restarted within two minutes. Beyond that,
# consumers still apply each event once (their checkpoint), they just receive the copy.
DUPLICATE_WINDOW_S = 120.0
# NATS keeps a week of events; the log keeps all of them. A consumer away for longer finds its next message gone,
# sees a gap at the first one it gets, and catches up from the log (it also catches up from the log when it starts).
MAX_AGE_S = 7 * 24 * 3600.0


async def connect(settings: Settings, *, name: str = "kernelboard") -> NATS:
    return await nats.connect(settings.nats_url, name=name, connect_timeout=5)


def subject(settings: Settings, event_type: str) -> str:
    return names.event_subject(settings.events_subject_prefix, event_type)


def stream_config(settings: Settings) -> StreamConfig:
    return StreamConfig(
        name=settings.events_stream,
        subjects=[names.every_event_subject(settings.events_subject_prefix)],
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_age=MAX_AGE_S,
    )


async def ensure_stream(js: JetStreamContext, settings: Settings):
    """Creates the events stream, or brings an existing one to this configuration; returns its StreamInfo."""
    config = stream_config(settings)
    try:
        await js.stream_info(settings.events_stream)
    except NotFoundError:
        return await js.add_stream(config)
    return await js.update_stream(config)


async def delete_stream(js: JetStreamContext, settings: Settings) -> bool:
    try:
        return await js.delete_stream(settings.events_stream)
    except NotFoundError:
        return False
