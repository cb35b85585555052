"""A route's owner, found one way: the RouteStarted event that opens the route's stream in the log.

Ingest appends it in the transaction that starts the route (with its own row, which ingest lists), and nothing else
opens that stream, so every service that decides who may act on a route (ingest for a push or a pull request, the
scheduler for a job) asks here, reading one event, instead of a table of one service or a replay of the stream.
The board's fold reads the same event as it folds the log.
"""

from contracts import names
from services.common.eventlog import EventLog


async def route_owner(log: EventLog, route: str, *, conn=None) -> str | None:
    """The owner the route was started for; None for a route never started (its stream empty, or opened by another
    event, as no code writes)."""
    first = await log.first_event(names.route_stream(route), conn=conn)
    if first is None or first.WhichOneof("payload") != "route_started":
        return None
    return first.route_started.owner or None
