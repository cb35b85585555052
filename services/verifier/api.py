"""The Verifier gRPC servicer: GetCheck, ListChecks and WatchChecks over the check queue (anyone signed in). Each
request field is checked at the edge; a refusal is raised as contracts' Refusal."""

import asyncio

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from kernelboard.v1 import verifier_pb2, verifier_pb2_grpc

from contracts import names
from contracts.refusals import invalid, not_found
from services.verifier.queue import NOTIFY_CHANNEL, CheckQueue, CheckRow

DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


def _timestamp(value) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def to_proto(row: CheckRow) -> verifier_pb2.Check:
    item = row.item
    check = verifier_pb2.Check(
        check_id=item.check_id,
        check_name=item.check_name,
        ref=item.ref,
        sha=item.sha,
        route=item.route,
        state=row.state,
        kind=item.kind,
        job_id=item.job_id,
        rules_commit=item.rules_commit,
        benchmark_version=item.benchmark_version,
        attempts=row.attempts,
        claimed_by=row.claimed_by or "",
        enqueued_at=_timestamp(row.enqueued_at),
        started_at=_timestamp(row.started_at),
        finished_at=_timestamp(row.finished_at),
        trigger_event_id=item.trigger_event_id,
        runner_node=row.runner_node if row.state == "running" else "",
        slurm_job_id=row.slurm_job_id if row.state == "running" else "",
    )
    if row.result is not None:
        check.result.CopyFrom(row.result)
    return check


def queue_places(line: list[tuple[str, str]], median_s: float) -> dict[str, tuple[int, float]]:
    """Each queued check's place in the line (1: next) and about how long until it starts: the checks before it
    (running ones included) shared among the workers running now, each taking the recent median time."""
    workers = max(1, sum(1 for _, state in line if state == "running"))
    places, ahead, queued = {}, 0, 0
    for check_id, state in line:
        if state == "queued":
            queued += 1
            places[check_id] = (queued, median_s * ahead / workers)
        ahead += 1
    return places


async def with_places(queue: CheckQueue, rows: list[CheckRow]) -> list[verifier_pb2.Check]:
    checks = [to_proto(r) for r in rows]
    if any(c.state == "queued" for c in checks):
        places = queue_places(*await queue.waiting_line())
        for check in checks:
            check.queue_position, check.estimated_wait_s = places.get(check.check_id, (0, 0.0))
    return checks


def _matches(row: CheckRow, request: verifier_pb2.ListChecksRequest) -> bool:
    return (not request.route or row.item.route == request.route) and (not request.sha or row.item.sha == request.sha)


def filters(request: verifier_pb2.ListChecksRequest) -> tuple[str, str]:
    """The route and sha filters of a request, each empty or well-formed."""
    return request.route and names.route(request.route), request.sha and names.object_id(request.sha, "sha")


class VerifierServicer(verifier_pb2_grpc.VerifierServicer):
    """Checks each request's fields (contracts.names); a Refusal becomes its status in the server's interceptor."""

    def __init__(self, queue: CheckQueue, feed: "ChangeFeed"):
        self.queue = queue
        self.feed = feed

    async def GetCheck(self, request, context):
        wanted = names.check_id(request.check_id)
        row = await self.queue.get(wanted)
        if row is None:
            raise not_found("unknown_check", f"no check {wanted}")
        [check] = await with_places(self.queue, [row])
        return check

    async def _known_route(self, route: str) -> None:
        if route and not await self.queue.route_known(route):
            raise not_found("unknown_route", f"no route {route!r} in the log")  # as the board's GetRoute says it

    async def ListChecks(self, request, context):
        route, sha = filters(request)
        if not 0 <= request.limit <= MAX_LIMIT:
            raise invalid("bad_limit", f"limit must be between 0 (default {DEFAULT_LIMIT}) and {MAX_LIMIT}")
        rows = await self.queue.search(route=route, sha=sha, limit=request.limit or DEFAULT_LIMIT)
        if not rows:
            await self._known_route(route)
        return verifier_pb2.ListChecksReply(checks=await with_places(self.queue, rows))

    async def WatchChecks(self, request, context):
        """The matching checks now (oldest first), then each change of one (PostgreSQL NOTIFY from the queue)."""
        route, sha = filters(request)
        await self._known_route(route)
        # Subscribe before the first read, so that no change between the two is missed.
        changed = await self.feed.subscribe()
        try:
            rows = await self.queue.search(route=route, sha=sha, limit=MAX_LIMIT)
            for check in reversed(await with_places(self.queue, rows)):
                yield check
            while True:
                row = await self.queue.get(await changed.get())
                if row is not None and _matches(row, request):
                    [check] = await with_places(self.queue, [row])
                    yield check
        finally:
            self.feed.unsubscribe(changed)


class ChangeFeed:
    """One LISTEN connection for every watcher: the ids of checks whose rows changed, fanned out to each."""

    def __init__(self, pool):
        self.pool = pool
        self._conn = None
        self._lock = asyncio.Lock()
        self._subscribers: set[asyncio.Queue] = set()

    async def subscribe(self) -> asyncio.Queue:
        async with self._lock:
            if self._conn is None:
                self._conn = await self.pool.acquire()
                await self._conn.add_listener(NOTIFY_CHANNEL, self._notified)
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.discard(queue)

    def _notified(self, _conn, _pid, _channel, check_id: str) -> None:
        for queue in self._subscribers:
            queue.put_nowait(check_id)

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.remove_listener(NOTIFY_CHANNEL, self._notified)
                await self.pool.release(self._conn)
                self._conn = None


def add_to_server(server: grpc.aio.Server, queue: CheckQueue, feed: ChangeFeed) -> list[str]:
    verifier_pb2_grpc.add_VerifierServicer_to_server(VerifierServicer(queue, feed), server)
    return [verifier_pb2.DESCRIPTOR.services_by_name["Verifier"].full_name]
