"""The gRPC face of ingest: translates requests to the use cases in app.py and refusals to gRPC statuses."""

import functools

import grpc
from google.protobuf import timestamp_pb2
from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc

from services.common.auth import current_principal
from services.ingest import domain, store
from services.ingest.app import Ingest
from services.ingest.domain import Actor, Refusal

CHUNK_BYTES = 1024 * 1024


def caller() -> Actor:
    p = current_principal()
    return Actor(p.name, p.kind, p.owner, p.role)


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


def timestamp(moment) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def issue_message(issue: store.IssueRow) -> ingest_pb2.Issue:
    return ingest_pb2.Issue(
        number=issue.number,
        title=issue.title,
        body=issue.body,
        author=issue.author,
        state=issue.state,
        closed_by=issue.closed_by,
        comments=issue.comments,
        opened_at=timestamp(issue.opened_at),
    )


def comment_message(comment: store.CommentRow) -> ingest_pb2.Comment:
    return ingest_pb2.Comment(
        id=comment.id,
        issue_number=comment.issue_number,
        pull_number=comment.pull_number,
        body=comment.body,
        author=comment.author,
        created_at=timestamp(comment.created_at),
    )


def join_message(request: store.JoinRow) -> ingest_pb2.JoinRequest:
    return ingest_pb2.JoinRequest(
        id=request.id,
        name=request.name,
        note=request.note,
        state=request.state,
        decided_by=request.decided_by,
        decision_note=request.decision_note,
        requested_at=timestamp(request.requested_at),
    )


def principal_message(p) -> ingest_pb2.Principal:
    return ingest_pb2.Principal(name=p.name, kind=p.kind, owner=p.owner, role=p.role)


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
                    domain.check_bundle_size(size, self.ingest.max_bundle_bytes)
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

    @answers
    async def OpenIssue(self, request, context):
        return issue_message(await self.ingest.open_issue(caller(), request.title, request.body))

    @answers
    async def GetIssue(self, request, context):
        return issue_message(await self.ingest.get_issue(request.number))

    @answers
    async def ListIssues(self, request, context):
        issues, token = await self.ingest.list_issues(request.state, request.page_size, request.page_token)
        return ingest_pb2.ListIssuesReply(issues=[issue_message(i) for i in issues], next_page_token=token)

    @answers
    async def CloseIssue(self, request, context):
        return issue_message(await self.ingest.set_issue_state(caller(), request.number, "closed"))

    @answers
    async def ReopenIssue(self, request, context):
        return issue_message(await self.ingest.set_issue_state(caller(), request.number, "open"))

    @answers
    async def AddComment(self, request, context):
        comment = await self.ingest.add_comment(caller(), request.issue_number, request.pull_number, request.body)
        return comment_message(comment)

    @answers
    async def ListComments(self, request, context):
        comments, token = await self.ingest.list_comments(
            request.issue_number, request.pull_number, request.page_size, request.page_token
        )
        return ingest_pb2.ListCommentsReply(comments=[comment_message(c) for c in comments], next_page_token=token)

    @answers
    async def RequestJoin(self, request, context):
        return join_message(await self.ingest.request_join(caller(), request.note))

    @answers
    async def ListJoinRequests(self, request, context):
        requests, token = await self.ingest.list_join_requests(
            caller(), request.state, request.page_size, request.page_token
        )
        return ingest_pb2.ListJoinRequestsReply(requests=[join_message(r) for r in requests], next_page_token=token)

    @answers
    async def DecideJoin(self, request, context):
        return join_message(await self.ingest.decide_join(caller(), request.name, request.accept, request.note))

    @answers
    async def LeaveProject(self, request, context):
        return principal_message(await self.ingest.leave(caller()))


def add_to_server(server: grpc.aio.Server, ingest: Ingest) -> list[str]:
    ingest_pb2_grpc.add_IngestServicer_to_server(IngestServicer(ingest), server)
    return [ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name]
