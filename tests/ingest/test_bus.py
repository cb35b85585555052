"""An accepted push reaches NATS JetStream through the relay: the CommitIngested that ingest appended in the same
transaction as the ref, under its own event id (Nats-Msg-Id), on this test's own stream."""

import asyncio
import subprocess
import time

import pytest
from kernelboard.v1 import events_pb2, ingest_pb2
from nats.js.errors import NotFoundError

from services.common import bus
from services.common.eventlog import payload_of
from services.common.relay import Relay
from tests.ingest.gitwork import WorkClone
from tests.streams import throwaway_stream


@pytest.fixture
async def settings(stack):
    async with throwaway_stream("ingest", database_url=stack.database_url) as test_settings:
        yield test_settings


async def last_commit_on_nats(js, settings) -> tuple[events_pb2.Event, dict] | None:
    try:
        msg = await js.get_last_msg(settings.events_stream, bus.subject(settings, "CommitIngested"))
    except NotFoundError:
        return None
    return events_pb2.Event.FromString(msg.data), msg.headers or {}


async def test_an_accepted_push_is_published_with_its_event_id(stack, settings, tmp_path):
    md = stack.md("alice/agent-1")
    await stack.stub.StartRoute(ingest_pb2.StartRouteRequest(route="on-the-bus"), metadata=md)
    fetched = await stack.stub.Fetch(ingest_pb2.FetchRequest(refs=["routes/on-the-bus"]), metadata=md)
    (tmp_path / "b.bundle").write_bytes(fetched.bundle)
    subprocess.run(
        ["git", "clone", "-q", "-b", "routes/on-the-bus", str(tmp_path / "b.bundle"), str(tmp_path / "w")], check=True
    )
    work = WorkClone(tmp_path / "w", "alice/agent-1")
    base = work.head()
    work.commit({"routes/on-the-bus/matmul.py": "class ModelNew: pass\n"})
    reply = await stack.stub.Push(
        ingest_pb2.PushRequest(ref="routes/on-the-bus", bundle=work.bundle("refs/heads/routes/on-the-bus", base)),
        metadata=md,
    )

    relay = Relay(stack.log, settings, poll_interval_s=0.2)
    task = asyncio.create_task(relay.run())
    nc = await bus.connect(settings)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + 20
        found = None
        while time.monotonic() < deadline:
            found = await last_commit_on_nats(js, settings)
            if found and found[0].event_id == reply.event_id:
                break
            await asyncio.sleep(0.2)
        assert found and found[0].event_id == reply.event_id, "the push's CommitIngested never reached NATS"
        event, headers = found
        assert headers.get("Nats-Msg-Id") == reply.event_id
        commit = payload_of(event)
        assert (event.actor, commit.ref, commit.sha, commit.parent) == (
            "alice/agent-1",
            "refs/heads/routes/on-the-bus",
            reply.sha,
            base,
        )
    finally:
        await nc.close()
        await relay.stop()
        await asyncio.wait_for(task, 10)
