"""A route's owner is found one way (services/common/routes.py): the RouteStarted that opens the route's stream."""

from kernelboard.v1 import events_pb2 as pb

from contracts import names
from services.common.eventlog import NewEvent
from services.common.routes import route_owner


def _started(route: str, owner: str) -> NewEvent:
    return NewEvent(pb.RouteStarted(route=route, owner=owner, started_by=f"{owner}/agent-1"), actor=f"{owner}/agent-1")


async def test_the_owner_is_the_one_the_route_was_started_for(event_log):
    stream = names.route_stream("owned")
    await event_log.append(stream, 0, [_started("owned", "alice")])
    later = pb.CommitIngested(ref=names.route_ref("owned"), sha="a" * 40, owner="bob")
    await event_log.append(stream, None, [NewEvent(later, actor="bob")])
    assert await route_owner(event_log, "owned") == "alice"
    async with event_log.pool.acquire() as conn:
        assert await route_owner(event_log, "owned", conn=conn) == "alice"


async def test_a_route_never_started_has_no_owner(event_log):
    assert await route_owner(event_log, "never-started") is None


async def test_a_stream_opened_by_another_event_names_no_owner(event_log):
    """Only RouteStarted opens a route's stream; a later RouteStarted (as no code writes) does not make an owner."""
    stream = names.route_stream("opened-otherwise")
    first = pb.CommitIngested(ref=names.route_ref("opened-otherwise"), sha="b" * 40, owner="mallory")
    await event_log.append(stream, 0, [NewEvent(first, actor="mallory")])
    await event_log.append(stream, None, [_started("opened-otherwise", "mallory")])
    assert await route_owner(event_log, "opened-otherwise") is None
