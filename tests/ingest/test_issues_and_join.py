"""Issues, comments and joining the project over gRPC against real PostgreSQL and the event log: who may do what,
bounded sizes, cursor pages, and the role change of an accepted join reaching the servers' token caches."""

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import events_pb2, ingest_pb2

from contracts import names
from services.common import auth
from services.common.eventlog import payload_of
from services.ingest import domain
from services.ingest.domain import Refusal
from tests.common.waiting import eventually
from tests.support.ingest import clone, push, refused, start_route

PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
INVALID = grpc.StatusCode.INVALID_ARGUMENT
DENIED = grpc.StatusCode.PERMISSION_DENIED


async def open_issue(stack, who: str, title: str, body: str = "") -> ingest_pb2.Issue:
    return await stack.stub.OpenIssue(ingest_pb2.OpenIssueRequest(title=title, body=body), metadata=stack.md(who))


async def whoami(stack, who: str) -> ingest_pb2.Principal:
    return await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=stack.md(who))


async def has_role(stack, who: str, role: int) -> bool:
    return (await whoami(stack, who)).role == role


async def test_anyone_signed_in_opens_and_comments_the_author_and_maintainers_close(stack):
    issue = await open_issue(stack, "mallory", "  matmul check flaky  ", "it failed twice on the same commit")
    assert (issue.title, issue.author, issue.state, issue.comments) == ("matmul check flaky", "mallory", "open", 0)
    opened = [payload_of(e) for e in await stack.events("IssueOpened") if payload_of(e).number == issue.number]
    assert [(o.title, o.author, o.author_owner) for o in opened] == [("matmul check flaky", "mallory", "mallory")]

    comment = ingest_pb2.AddCommentRequest(issue_number=issue.number, body="seen it too")
    added = await stack.stub.AddComment(comment, metadata=stack.md("alice/agent-1"))
    assert (added.issue_number, added.author, added.body) == (issue.number, "alice/agent-1", "seen it too")
    events = await stack.log.read_stream(f"issue:{issue.number}")
    assert [e.type for e in events] == ["IssueOpened", "CommentAdded"]

    close = ingest_pb2.SetIssueStateRequest(number=issue.number)
    for who in ("bob", "alice", "alice/agent-1"):
        await refused(stack, stack.stub.CloseIssue(close, metadata=stack.md(who)), DENIED, "only the author")
    closed = await stack.stub.CloseIssue(close, metadata=stack.md("mallory"))
    assert (closed.state, closed.closed_by, closed.comments) == ("closed", "mallory", 1)
    await refused(stack, stack.stub.CloseIssue(close, metadata=stack.md("mallory")), PRECONDITION, "closed already")
    await refused(stack, stack.stub.ReopenIssue(close, metadata=stack.md("bob")), DENIED, "only the author")
    reopened = await stack.stub.ReopenIssue(close, metadata=stack.md("curator"))
    assert (reopened.state, reopened.closed_by) == ("open", "")
    types = [e.type for e in await stack.log.read_stream(f"issue:{issue.number}")]
    assert types == ["IssueOpened", "CommentAdded", "IssueClosed", "IssueReopened"]

    # an agent's issue: its owner (and the owner's other agents) close it too
    by_agent = await open_issue(stack, "alice/agent-1", "layer_norm tolerance")
    await refused(
        stack,
        stack.stub.CloseIssue(ingest_pb2.SetIssueStateRequest(number=by_agent.number), metadata=stack.md("bob")),
        DENIED,
        "alice/agent-1",
    )
    done = await stack.stub.CloseIssue(
        ingest_pb2.SetIssueStateRequest(number=by_agent.number), metadata=stack.md("alice")
    )
    assert done.closed_by == "alice"


async def test_comments_on_pull_requests(stack, tmp_path):
    await start_route(stack, "bob", "talk-me")
    work = await clone(stack, "bob", "routes/talk-me", tmp_path / "talk")
    base = work.head()
    work.commit({"routes/talk-me/matmul.py": "class ModelNew: pass\n"})
    await push(stack, "bob", "routes/talk-me", work.bundle("refs/heads/routes/talk-me", base))
    pull = await stack.stub.OpenPullRequest(
        ingest_pb2.OpenPullRequestRequest(route="talk-me", title="talk"), metadata=stack.md("bob")
    )
    for who, body in (("mallory", "why this tile size?"), ("bob", "L2 fits")):
        await stack.stub.AddComment(
            ingest_pb2.AddCommentRequest(pull_number=pull.number, body=body), metadata=stack.md(who)
        )
    listed = await stack.stub.ListComments(
        ingest_pb2.ListCommentsRequest(pull_number=pull.number), metadata=stack.md("alice")
    )
    assert [(c.author, c.body, c.pull_number) for c in listed.comments] == [
        ("mallory", "why this tile size?", pull.number),
        ("bob", "L2 fits", pull.number),
    ]
    assert listed.next_page_token == ""
    assert [e.type for e in await stack.log.read_stream(f"pull:{pull.number}")][-2:] == ["CommentAdded"] * 2

    for request, code, fragment in (
        (ingest_pb2.AddCommentRequest(pull_number=9999, body="x"), grpc.StatusCode.NOT_FOUND, "no pull request #9999"),
        (ingest_pb2.AddCommentRequest(issue_number=9999, body="x"), grpc.StatusCode.NOT_FOUND, "no issue #9999"),
        (ingest_pb2.AddCommentRequest(body="x"), INVALID, "name the issue or the pull request"),
        (ingest_pb2.AddCommentRequest(pull_number=-1, body="x"), INVALID, "pull_number '-1'"),
        (ingest_pb2.AddCommentRequest(pull_number=pull.number, body="   "), INVALID, "body is empty"),
    ):
        await refused(stack, stack.stub.AddComment(request, metadata=stack.md("mallory")), code, fragment)


@pytest.mark.parametrize(
    "title, body, fragment",
    [
        ("", "", "title is empty"),
        ("    ", "", "title is empty"),
        ("two\nlines", "", "control character"),
        ("t" * 201, "", "title is 201 characters, over the limit of 200"),
        ("ok", "b" * 20_001, "body is 20001 characters, over the limit of 20000"),
        ("nul\x00", "", "control character"),
        ("ok", "nul \x00 in body", "control character"),
        ("x" * 3_000_000, "", "over the limit of 200"),
    ],
    ids=["empty", "blank", "two-lines", "long-title", "long-body", "nul-title", "nul-body", "3MB-title"],
)
async def test_bad_issue_text_is_refused_by_field_and_writes_nothing(stack, title, body, fragment):
    details = await refused(stack, open_issue(stack, "mallory", title, body), INVALID, fragment)
    assert len(details) < 200, "the refusal must not echo the input"


async def test_unsigned_callers_are_refused(stack):
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.OpenIssue(ingest_pb2.OpenIssueRequest(title="anon"))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_issue_lists_page_by_cursor(stack):
    numbers = [(await open_issue(stack, "bob", f"page {i}")).number for i in range(5)]
    await stack.stub.CloseIssue(ingest_pb2.SetIssueStateRequest(number=numbers[1]), metadata=stack.md("bob"))
    everything = await stack.stub.ListIssues(ingest_pb2.ListIssuesRequest(page_size=200), metadata=stack.md("bob"))
    seen, token, pages = [], "", 0
    while True:
        page = await stack.stub.ListIssues(
            ingest_pb2.ListIssuesRequest(state="open", page_size=2, page_token=token), metadata=stack.md("mallory")
        )
        assert len(page.issues) <= 2
        seen += [i.number for i in page.issues]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    expected = [i.number for i in everything.issues if i.state == "open"]
    assert seen == expected and numbers[1] not in seen and set(numbers) - {numbers[1]} <= set(seen)
    assert pages == len(expected) // 2 + 1
    for request, fragment in (
        (ingest_pb2.ListIssuesRequest(page_token="abc"), "page_token 'abc'"),
        (ingest_pb2.ListIssuesRequest(page_token="9" * 5000), "page_token"),
        (ingest_pb2.ListIssuesRequest(page_size=-1), "page_size"),
        (ingest_pb2.ListIssuesRequest(state="merged"), "state 'merged'"),
    ):
        details = await refused(stack, stack.stub.ListIssues(request, metadata=stack.md("bob")), INVALID, fragment)
        assert len(details) < 200
    await refused(
        stack,
        stack.stub.GetIssue(ingest_pb2.GetIssueRequest(number=123456), metadata=stack.md("bob")),
        grpc.StatusCode.NOT_FOUND,
        "no issue #123456",
    )


@given(st.text(max_size=300))
def test_any_title_is_kept_stripped_or_refused_invalid(text):
    """The edge (contracts.names.text) and the domain (non_empty) together: a title is kept as sent, stripped, or
    refused INVALID_ARGUMENT with a short message; nothing else."""
    try:
        kept = domain.non_empty("title", names.text(text, "title", domain.ISSUE_TITLE_MAX))
    except Refusal as refusal:
        assert refusal.code == "INVALID_ARGUMENT" and "title" in refusal.reason
        assert len(refusal.message) < 400  # clip: a short prefix of the input, escaped
    else:
        assert kept == text.strip() and kept


async def test_join_accept_decline_and_leave(stack):
    async with stack.log.pool.acquire() as conn:
        for name in ("erin", "frank"):
            await auth.register_principal(
                conn, name, domain.PERSON, name, events_pb2.ROLE_SIGNED_IN, log=stack.log, actor="test"
            )
            stack.tokens[name] = await auth.issue_token(conn, name)
        await auth.register_principal(conn, "erin/bot", domain.AGENT, "erin", 0, log=stack.log, actor="test")
        stack.tokens["erin/bot"] = await auth.issue_token(conn, "erin/bot")
    # signed in twice: the server's token cache holds erin's and her agent's sign-ins from now on
    for who in ("erin", "erin/bot"):
        for _ in range(2):
            assert (await whoami(stack, who)).role == events_pb2.ROLE_SIGNED_IN

    asked = await stack.stub.RequestJoin(
        ingest_pb2.RequestJoinRequest(note="I write Triton"), metadata=stack.md("erin")
    )
    assert (asked.name, asked.note, asked.state) == ("erin", "I write Triton", "pending")
    join = ingest_pb2.RequestJoinRequest
    await refused(
        stack, stack.stub.RequestJoin(join(), metadata=stack.md("erin")), grpc.StatusCode.ALREADY_EXISTS, "pending"
    )
    await refused(stack, stack.stub.RequestJoin(join(), metadata=stack.md("erin/bot")), DENIED, "ask as erin")
    await refused(stack, stack.stub.RequestJoin(join(), metadata=stack.md("alice")), PRECONDITION, "member already")
    await refused(stack, stack.stub.RequestJoin(join(), metadata=stack.md("system:scheduler")), DENIED, "people ask")
    await refused(
        stack, stack.stub.RequestJoin(join(note="n" * 1001), metadata=stack.md("frank")), INVALID, "note is 1001"
    )
    await stack.stub.RequestJoin(join(note="me too"), metadata=stack.md("frank"))

    listing = ingest_pb2.ListJoinRequestsRequest()
    for who in ("erin", "alice", "alice/agent-1"):
        await refused(stack, stack.stub.ListJoinRequests(listing, metadata=stack.md(who)), DENIED, "maintainer role")
    pending = await stack.stub.ListJoinRequests(listing, metadata=stack.md("curator"))
    assert [(r.name, r.note) for r in pending.requests] == [("erin", "I write Triton"), ("frank", "me too")]
    first = await stack.stub.ListJoinRequests(
        ingest_pb2.ListJoinRequestsRequest(page_size=1), metadata=stack.md("curator")
    )
    second = await stack.stub.ListJoinRequests(
        ingest_pb2.ListJoinRequestsRequest(page_size=1, page_token=first.next_page_token), metadata=stack.md("curator")
    )
    assert [r.name for r in [*first.requests, *second.requests]] == ["erin", "frank"]

    accept = ingest_pb2.DecideJoinRequest(name="erin", accept=True, note="welcome")
    for who in ("alice", "erin", "erin/bot"):
        await refused(stack, stack.stub.DecideJoin(accept, metadata=stack.md(who)), DENIED, "maintainer role")
    decided = await stack.stub.DecideJoin(accept, metadata=stack.md("curator"))
    assert (decided.state, decided.decided_by, decided.decision_note) == ("accepted", "curator", "welcome")
    # the role change reaches the token cache through LISTEN/NOTIFY (milliseconds): the person and their agent are
    # members without signing in again
    for who in ("erin", "erin/bot"):
        await eventually(lambda w=who: has_role(stack, w, events_pb2.ROLE_MEMBER), f"{who} a member in the cache")
    await refused(
        stack, stack.stub.DecideJoin(accept, metadata=stack.md("curator")), grpc.StatusCode.NOT_FOUND, "no pending"
    )

    declined = await stack.stub.DecideJoin(
        ingest_pb2.DecideJoinRequest(name="frank", accept=False, note="not now"), metadata=stack.md("curator")
    )
    assert declined.state == "declined"
    assert (await whoami(stack, "frank")).role == events_pb2.ROLE_SIGNED_IN
    await stack.stub.RequestJoin(join(note="again"), metadata=stack.md("frank"))  # may ask again after a decline

    types = [e.type for e in await stack.log.read_stream("principal:erin")]
    assert types == ["PrincipalRegistered", "JoinRequested", "JoinDecided", "RoleChanged"]
    changed = payload_of((await stack.log.read_stream("principal:erin"))[-1])
    assert (changed.role, changed.previous_role, changed.cause) == (
        events_pb2.ROLE_MEMBER,
        events_pb2.ROLE_SIGNED_IN,
        "join accepted",
    )
    assert [e.type for e in await stack.log.read_stream("principal:frank")][-3:] == [
        "JoinRequested",
        "JoinDecided",
        "JoinRequested",
    ]

    leave = ingest_pb2.LeaveProjectRequest()
    await refused(stack, stack.stub.LeaveProject(leave, metadata=stack.md("erin/bot")), DENIED, "people leave")
    await refused(stack, stack.stub.LeaveProject(leave, metadata=stack.md("curator")), PRECONDITION, "maintainer")
    await refused(
        stack, stack.stub.LeaveProject(leave, metadata=stack.md("frank")), PRECONDITION, "not a project member"
    )
    left = await stack.stub.LeaveProject(leave, metadata=stack.md("erin"))
    assert left.role == events_pb2.ROLE_SIGNED_IN
    await eventually(lambda: has_role(stack, "erin/bot", events_pb2.ROLE_SIGNED_IN), "erin/bot signed-in again")
    assert payload_of((await stack.log.read_stream("principal:erin"))[-1]).cause == "left the project"


async def test_the_longest_texts_in_the_widest_characters_are_recorded(stack):
    """Every limit at the edge fits its event field's limit at append (contracts.limits), in 4-byte characters too."""
    wide = "\U0001f600"
    issue = await open_issue(stack, "bob", wide * domain.ISSUE_TITLE_MAX, wide * domain.ISSUE_BODY_MAX)
    comment = ingest_pb2.AddCommentRequest(issue_number=issue.number, body=wide * domain.COMMENT_BODY_MAX)
    assert len((await stack.stub.AddComment(comment, metadata=stack.md("bob"))).body) == domain.COMMENT_BODY_MAX
    async with stack.log.pool.acquire() as conn:
        await auth.register_principal(conn, "ivan", domain.PERSON, "ivan", 1, log=stack.log, actor="test")
        stack.tokens["ivan"] = await auth.issue_token(conn, "ivan")
    note = wide * domain.JOIN_NOTE_MAX
    await stack.stub.RequestJoin(ingest_pb2.RequestJoinRequest(note=note), metadata=stack.md("ivan"))
    decide = ingest_pb2.DecideJoinRequest(name="ivan", accept=False, note=note)
    assert (await stack.stub.DecideJoin(decide, metadata=stack.md("curator"))).decision_note == note
    assert [e.type for e in await stack.log.read_stream(f"issue:{issue.number}")] == ["IssueOpened", "CommentAdded"]
