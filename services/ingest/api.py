"""The gRPC face of ingest: checks every request field at the edge (contracts.names: identifiers matched in full,
bounded text, numbers in range), then calls the use cases in app.py. A refusal is raised as contracts' Refusal;
the server's interceptor turns it into its status (services/common/grpcserver.py).
"""

import grpc
from google.protobuf import timestamp_pb2
from kernelboard.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc

from contracts import access, limits, names
from contracts.refusals import clip, invalid
from services.common.auth import current_principal
from services.ingest import domain, store
from services.ingest.app import Ingest
from services.ingest.domain import Actor

CHUNK_BYTES = 1024 * 1024
GRPC_DEFAULT_RECEIVE_BYTES = 4 * 1024 * 1024
TITLE_MAX_CHARS = limits.MAX_PULL_TITLE_CHARS
REVIEW_MAX_CHARS = limits.MAX_REVIEW_BODY_CHARS
PULL_BODY_MAX_CHARS = limits.MAX_PULL_BODY_CHARS
MAX_FETCH_REFS = limits.MAX_FETCH_REFS
MAX_FETCH_HAVE = limits.MAX_FETCH_HAVE
MAX_TOKEN_TTL_S = 10 * 366 * 24 * 3600  # ten years; a longer lifetime would overflow the expiry's date
TOKEN_MAX_CHARS = limits.MAX_TOKEN_CHARS
PULL_STATES = ("open", "merged")
PRINCIPAL_KINDS = {
    events_pb2.PRINCIPAL_KIND_PERSON: names.PERSON,
    events_pb2.PRINCIPAL_KIND_AGENT: names.AGENT,
    events_pb2.PRINCIPAL_KIND_SERVICE: names.SERVICE,
}


def server_options(max_bundle_bytes: int) -> list[tuple[str, int]]:
    """gRPC's own receive limit, well above the bundle limit: a unary Push carries the whole bundle in one message,
    and one over the bundle limit must reach the size check, which refuses it with the documented message, instead
    of gRPC's generic "Received message larger than max". Above twice the limit gRPC still cuts it (PushStream,
    what `kb push` uses, is refused at the limit while it streams). Never below gRPC's default (4 MiB), which the other
    RPCs' own checks count on."""
    return [("grpc.max_receive_message_length", max(GRPC_DEFAULT_RECEIVE_BYTES, 2 * max_bundle_bytes + CHUNK_BYTES))]


def caller() -> Actor:
    return Actor.of(current_principal())


def reader() -> Actor:
    """The caller, when it may read the project's issues, pull requests and their conversation (contracts.access)."""
    return access.require(caller(), access.Action.READ_THREADS)


def hosted_ref(value: str, field: str = "ref") -> names.Ref:
    """A hosted ref as a push or a fetch names it (the short forms main, checks, routes/<r>, jobs/<id> included),
    parsed once, here, for the whole request."""
    return names.ref(value, field, short_forms=True)


def optional_route(value: str, field: str = "route") -> str:
    return value and names.route(value, field)


def pull_number(value: int) -> int:
    return names.pull_number(value, "number")


def review_verdict(value: int) -> int:
    if value not in domain.VERDICTS:
        raise invalid("verdict", f"verdict {clip(value)}: approve, request_changes or comment")
    return value


def token_request(request: ingest_pb2.CreateTokenRequest) -> tuple[str, int, int]:
    """(name, kind, ttl in seconds) of a CreateToken request, each checked."""
    if request.kind and request.kind not in PRINCIPAL_KINDS:
        raise invalid("kind", f"kind {clip(request.kind)}: person, agent or service (or unspecified)")
    if request.name:
        grammar = PRINCIPAL_KINDS.get(request.kind)
        if grammar is None:
            names.principal(request.name, "name")
        else:
            grammar.check(request.name, "name")
    if not 0 <= request.ttl_seconds <= MAX_TOKEN_TTL_S:
        raise invalid(
            "ttl",
            f"ttl_seconds {clip(request.ttl_seconds)}: 0 (no expiry) up to {MAX_TOKEN_TTL_S} (ten years)",
        )
    return request.name, request.kind, request.ttl_seconds


def fetch_request(request: ingest_pb2.FetchRequest) -> tuple[list[str], list[str]]:
    if len(request.refs) > MAX_FETCH_REFS:
        raise invalid("too_many_refs", f"a fetch names at most {MAX_FETCH_REFS} refs, not {len(request.refs)}")
    # `have` only narrows the bundle: past the first MAX_FETCH_HAVE, and what is not a commit id, it is ignored.
    have = [sha for sha in request.have[:MAX_FETCH_HAVE] if names.OBJECT_ID.matches(sha)]
    return [hosted_ref(ref, "refs").name for ref in request.refs], have


def route_message(route: store.RouteRow, head: str) -> ingest_pb2.Route:
    return ingest_pb2.Route(
        route=route.route, owner=route.owner, head_sha=head, started_by=route.started_by, base_sha=route.base_sha
    )


def pull_message(pull: store.PullRow, files=()) -> ingest_pb2.PullRequest:
    return ingest_pb2.PullRequest(
        number=pull.number,
        route=pull.route,
        head_sha=pull.head_sha,
        base_ref=pull.base_ref,
        title=pull.title,
        body=pull.body,
        author=pull.author,
        state=pull.state,
        merge_sha=pull.merge_sha,
        merged_by=pull.merged_by,
        opened_at=timestamp(pull.opened_at),
        reviews=[
            ingest_pb2.Review(verdict=r.verdict, body=r.body, reviewer=r.reviewer, reviewed_at=timestamp(r.reviewed_at))
            for r in pull.reviews
        ],
        files=[
            ingest_pb2.ChangedFile(path=path, added=added, deleted=deleted, binary=binary)
            for path, added, deleted, binary in files
        ],
    )


def issue_number(value: int, field: str = "number") -> int:
    """Issue numbers share pull requests' range (bigserial, handed out from 1)."""
    return names.pull_number(value, field)


def thread(request) -> tuple[int, int]:
    """(issue number, pull number) of a comment request: exactly one is named, in range."""
    which = request.WhichOneof("thread")
    if which == "issue_number":
        return issue_number(request.issue_number, "issue_number"), 0
    if which == "pull_number":
        return 0, names.pull_number(request.pull_number, "pull_number")
    raise invalid("thread", "name the issue or the pull request: issue_number or pull_number")


def page(request) -> tuple[int, int]:
    """(page size, the cursor: the key after which the page starts) of a list request."""
    return domain.page_size(request.page_size), domain.page_after(request.page_token)


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
        return principal_message(current_principal())

    async def StartRoute(self, request, context):
        route = await self.ingest.start_route(caller(), names.route(request.route))
        return route_message(route, route.base_sha)

    async def Push(self, request, context):
        return push_reply(await self.ingest.push(caller(), hosted_ref(request.ref), request.bundle))

    async def PushStream(self, request_iterator, context):
        ref, parts, size = None, [], 0
        async for chunk in request_iterator:
            if ref is None:
                ref = hosted_ref(chunk.ref)  # before the bundle is read: a bad ref costs no memory
            size += len(chunk.data)
            if size > self.ingest.max_bundle_bytes:
                # Refused while it streams: the rest of an oversized bundle is never held in memory.
                self.ingest.refuse_size(size)
            parts.append(chunk.data)
        if ref is None:
            raise invalid("empty_push", "a push stream sends at least one chunk, the first naming the ref")
        return push_reply(await self.ingest.push(caller(), ref, b"".join(parts)))

    async def Fetch(self, request, context):
        return ingest_pb2.FetchReply(bundle=await self.ingest.fetch(*fetch_request(request)))

    async def FetchStream(self, request, context):
        bundle = await self.ingest.fetch(*fetch_request(request))
        for offset in range(0, len(bundle), CHUNK_BYTES):
            yield ingest_pb2.BundleChunk(data=bundle[offset : offset + CHUNK_BYTES], total_bytes=len(bundle))

    async def ListRoutes(self, request, context):
        return ingest_pb2.ListRoutesReply(
            routes=[route_message(route, head) for route, head in await self.ingest.list_routes()]
        )

    async def GetRoute(self, request, context):
        return route_message(*await self.ingest.get_route(names.route(request.route)))

    async def OpenPullRequest(self, request, context):
        route = names.route(request.route)
        title = names.text(request.title, "title", TITLE_MAX_CHARS)
        body = names.text(request.body, "body", PULL_BODY_MAX_CHARS, multiline=True)
        return pull_message(await self.ingest.open_pull(caller(), route, title, body))

    async def GetPullRequest(self, request, context):
        reader()
        pull = await self.ingest.get_pull(pull_number(request.number))
        return pull_message(pull, await self.ingest.pull_files(pull))

    async def Review(self, request, context):
        number, verdict = pull_number(request.number), review_verdict(request.verdict)
        body = names.text(request.body, "body", REVIEW_MAX_CHARS, multiline=True)
        return pull_message(await self.ingest.review(caller(), number, verdict, body))

    async def Merge(self, request, context):
        return pull_message(await self.ingest.merge(caller(), pull_number(request.number)))

    async def ListPullRequests(self, request, context):
        reader()
        if request.state not in ("", *PULL_STATES):
            raise invalid("state", f"state {clip(request.state)}: open or merged (or empty: both)")
        pulls = await self.ingest.list_pulls(optional_route(request.route), request.state)
        return ingest_pb2.ListPullRequestsReply(pull_requests=[pull_message(p) for p in pulls])

    async def CreateToken(self, request, context):
        name, kind, ttl_s = token_request(request)
        token, principal, registered = await self.ingest.create_token(caller(), name, kind, ttl_s, request.member)
        return ingest_pb2.CreateTokenReply(
            token=token,
            principal=ingest_pb2.Principal(
                name=principal.name, kind=principal.kind, owner=principal.owner, role=principal.role
            ),
            registered=registered,
        )

    async def RevokeToken(self, request, context):
        token = request.token if len(request.token) <= TOKEN_MAX_CHARS else ""  # too long: no token of anyone's
        return ingest_pb2.RevokeTokenReply(principal=await self.ingest.revoke_token(caller(), token))

    async def OpenIssue(self, request, context):
        title = names.text(request.title, "title", domain.ISSUE_TITLE_MAX)
        body = names.text(request.body, "body", domain.ISSUE_BODY_MAX, multiline=True)
        return issue_message(await self.ingest.open_issue(caller(), title, body))

    async def GetIssue(self, request, context):
        reader()
        return issue_message(await self.ingest.get_issue(issue_number(request.number)))

    async def ListIssues(self, request, context):
        reader()
        state = domain.check_state_filter(request.state, domain.ISSUE_STATES)
        issues, token = await self.ingest.list_issues(state, *page(request))
        return ingest_pb2.ListIssuesReply(issues=[issue_message(i) for i in issues], next_page_token=token)

    async def CloseIssue(self, request, context):
        return issue_message(await self.ingest.set_issue_state(caller(), issue_number(request.number), "closed"))

    async def ReopenIssue(self, request, context):
        return issue_message(await self.ingest.set_issue_state(caller(), issue_number(request.number), "open"))

    async def AddComment(self, request, context):
        body = names.text(request.body, "body", domain.COMMENT_BODY_MAX, multiline=True)
        comment = await self.ingest.add_comment(caller(), *thread(request), body)
        return comment_message(comment)

    async def ListComments(self, request, context):
        reader()
        comments, token = await self.ingest.list_comments(*thread(request), *page(request))
        return ingest_pb2.ListCommentsReply(comments=[comment_message(c) for c in comments], next_page_token=token)

    async def RequestJoin(self, request, context):
        note = names.text(request.note, "note", domain.JOIN_NOTE_MAX, multiline=True)
        return join_message(await self.ingest.request_join(caller(), note))

    async def ListJoinRequests(self, request, context):
        state = domain.check_state_filter(request.state, domain.JOIN_STATES, extra=("all",))
        requests, token = await self.ingest.list_join_requests(caller(), state, *page(request))
        return ingest_pb2.ListJoinRequestsReply(requests=[join_message(r) for r in requests], next_page_token=token)

    async def DecideJoin(self, request, context):
        name = names.person(request.name, "name")
        note = names.text(request.note, "note", domain.JOIN_NOTE_MAX, multiline=True)
        return join_message(await self.ingest.decide_join(caller(), name, request.accept, note))

    async def LeaveProject(self, request, context):
        return principal_message(await self.ingest.leave(caller()))


def add_to_server(server: grpc.aio.Server, ingest: Ingest) -> list[str]:
    ingest_pb2_grpc.add_IngestServicer_to_server(IngestServicer(ingest), server)
    return [ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name]
