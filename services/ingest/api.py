"""The gRPC face of ingest: translates requests to the use cases in app.py and refusals to gRPC statuses."""

import functools

import grpc
from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc

from services.common.auth import current_principal
from services.ingest import domain, store
from services.ingest.app import Ingest
from services.ingest.domain import Actor, Refusal

CHUNK_BYTES = 1024 * 1024


def caller() -> Actor:
    return Actor.of(current_principal())


def answers(method):
    """Turn a Refusal into the gRPC status it names, with its message."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        try:
            return await method(self, request, context)
        except Refusal as refusal:
            await context.abort(grpc.StatusCode[refusal.code], refusal.message)

    return wrapper


def route_message(route: store.RouteRow, head: str) -> ingest_pb2.Route:
    return ingest_pb2.Route(
        route=route.route, owner=route.owner, head_sha=head, started_by=route.started_by, base_sha=route.base_sha
    )


def pull_message(pull: store.PullRow) -> ingest_pb2.PullRequest:
    return ingest_pb2.PullRequest(
        number=pull.number,
        route=pull.route,
        head_sha=pull.head_sha,
        base_ref=pull.base_ref,
        title=pull.title,
        author=pull.author,
        state=pull.state,
        merge_sha=pull.merge_sha,
        merged_by=pull.merged_by,
        reviews=[ingest_pb2.Review(verdict=r.verdict, body=r.body, reviewer=r.reviewer) for r in pull.reviews],
    )


def push_reply(result) -> ingest_pb2.PushReply:
    return ingest_pb2.PushReply(
        ref=result.ref,
        sha=result.sha,
        parent=result.parent,
        event_id=result.event_id,
        changed_paths=result.changed_paths,
        metrics_reported=result.metrics_reported,
        rules_approved=result.rules_approved,
    )


class IngestServicer(ingest_pb2_grpc.IngestServicer):
    def __init__(self, ingest: Ingest):
        self.ingest = ingest

    async def WhoAmI(self, request, context):
        p = current_principal()
        return ingest_pb2.Principal(name=p.name, kind=p.kind, owner=p.owner, role=p.role)

    @answers
    async def StartRoute(self, request, context):
        route = await self.ingest.start_route(caller(), request.route)
        return route_message(route, route.base_sha)

    @answers
    async def Push(self, request, context):
        return push_reply(await self.ingest.push(caller(), request.ref, request.bundle))

    @answers
    async def PushStream(self, request_iterator, context):
        ref, parts, size = "", [], 0
        async for chunk in request_iterator:
            ref = ref or chunk.ref
            size += len(chunk.data)
            if size > self.ingest.max_bundle_bytes:
                # Refused while it streams: the rest of an oversized bundle is never held in memory.
                try:
                    domain.check_size(size, self.ingest.max_bundle_bytes)
                except Refusal as refusal:
                    self.ingest.count_refusal(refusal, size)
                    raise
            parts.append(chunk.data)
        return push_reply(await self.ingest.push(caller(), ref, b"".join(parts)))

    @answers
    async def Fetch(self, request, context):
        return ingest_pb2.FetchReply(bundle=await self.ingest.fetch(list(request.refs), list(request.have)))

    async def FetchStream(self, request, context):
        try:
            bundle = await self.ingest.fetch(list(request.refs), list(request.have))
        except Refusal as refusal:
            await context.abort(grpc.StatusCode[refusal.code], refusal.message)
        for offset in range(0, len(bundle), CHUNK_BYTES):
            yield ingest_pb2.BundleChunk(data=bundle[offset : offset + CHUNK_BYTES], total_bytes=len(bundle))

    @answers
    async def ListRoutes(self, request, context):
        return ingest_pb2.ListRoutesReply(
            routes=[route_message(route, head) for route, head in await self.ingest.list_routes()]
        )

    @answers
    async def GetRoute(self, request, context):
        return route_message(*await self.ingest.get_route(request.route))

    @answers
    async def OpenPullRequest(self, request, context):
        return pull_message(await self.ingest.open_pull(caller(), request.route, request.title))

    @answers
    async def Review(self, request, context):
        return pull_message(await self.ingest.review(caller(), request.number, request.verdict, request.body))

    @answers
    async def Merge(self, request, context):
        return pull_message(await self.ingest.merge(caller(), request.number))

    @answers
    async def ListPullRequests(self, request, context):
        pulls = await self.ingest.list_pulls(request.route, request.state)
        return ingest_pb2.ListPullRequestsReply(pull_requests=[pull_message(p) for p in pulls])

    @answers
    async def CreateToken(self, request, context):
        token, principal, registered = await self.ingest.create_token(
            caller(), request.name, request.kind, request.ttl_seconds, request.member
        )
        return ingest_pb2.CreateTokenReply(
            token=token,
            principal=ingest_pb2.Principal(
                name=principal.name, kind=principal.kind, owner=principal.owner, role=principal.role
            ),
            registered=registered,
        )

    @answers
    async def RevokeToken(self, request, context):
        return ingest_pb2.RevokeTokenReply(principal=await self.ingest.revoke_token(caller(), request.token))


def add_to_server(server: grpc.aio.Server, ingest: Ingest) -> list[str]:
    ingest_pb2_grpc.add_IngestServicer_to_server(IngestServicer(ingest), server)
    return [ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name]
