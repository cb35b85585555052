"""The board service's background on the real PostgreSQL and NATS: the relay publishes the log, the board follows it
through its Consumer, survives a restart in the middle and duplicate messages, and equals a rebuild from position 0."""

import asyncio
import secrets

import pytest
from prometheus_client import REGISTRY

from services.board import projection
from services.board.server import BoardBackground
from services.common import bus
from services.common.relay import Relay
from tests.streams import throwaway_stream

from .board_events import append_all, scenario
from .test_board_service import canonical, read_everything, stored_state


@pytest.fixture
async def settings(fresh_log):
    async with throwaway_stream("board", database_url="unused: the tests pass their EventLog") as own:
        yield own


@pytest.fixture
async def relay(fresh_log, settings):
    running = Relay(fresh_log, settings, poll_interval_s=0.2)
    task = asyncio.create_task(running.run())
    yield running
    await running.stop()
    await asyncio.wait_for(task, 10)


async def until_folded(background: BoardBackground, log, timeout_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while background.projector.state.position < await log.head_position():
        assert asyncio.get_running_loop().time() < deadline, "the board did not follow the log in time"
        await asyncio.sleep(0.05)


async def test_the_board_follows_the_log_through_nats_across_a_restart_and_duplicates(fresh_log, settings, relay):
    consumer_name = f"board_{secrets.token_hex(3)}"
    first = BoardBackground(fresh_log, settings, consumer_name=consumer_name)
    await first.start()
    await asyncio.wait_for(first.consumer.ready.wait(), 10)
    await append_all(fresh_log, scenario()[:5])
    await until_folded(first, fresh_log)
    assert await first.projector.measure_lag() == (0, 0.0)

    # A restart in the middle: events land while the board is down.
    await first.stop()
    await append_all(fresh_log, scenario(start_minute=20)[5:])
    behind, age = await first.projector.measure_lag()
    assert behind == 5 and age > 0
    assert REGISTRY.get_sample_value("kb_board_projection_lag_events") == 5
    assert REGISTRY.get_sample_value("kb_board_projection_lag_seconds") == age

    second = BoardBackground(fresh_log, settings, consumer_name=consumer_name)
    await second.start()  # catches up from its stored checkpoint, then follows NATS
    await asyncio.wait_for(second.consumer.ready.wait(), 10)
    await append_all(fresh_log, scenario(start_minute=40)[1:4])
    await until_folded(second, fresh_log)

    # Duplicates on the bus: every event published again under new message ids (so NATS does not drop them).
    nc = await bus.connect(settings)
    try:
        js = nc.jetstream()
        for event in await read_everything(fresh_log):
            await js.publish(
                bus.subject(settings, event.type),
                event.SerializeToString(),
                headers={"Nats-Msg-Id": f"again-{event.event_id}"},
            )
    finally:
        await nc.close()
    await append_all(fresh_log, scenario(start_minute=60)[2:3])
    await until_folded(second, fresh_log)
    await asyncio.sleep(0.5)  # let the duplicates land too

    rebuilt = projection.fold(await read_everything(fresh_log))
    assert canonical(second.projector.state) == canonical(rebuilt)
    assert canonical(await stored_state(fresh_log)) == canonical(rebuilt)
    await second.stop()
