# One file past 500 lines: every test runs against the module's one ingest over gRPC, real git and PostgreSQL (its
# fixture starts it once); the ways in and the refusals of each capability are read side by side.
"""The ingest service over gRPC against real git, PostgreSQL and the event log: every allowed and refused path."""

import asyncio
import json
import os
import subprocess
import time

import grpc
import pytest
from kernelboard.v1 import events_pb2, ingest_pb2
from prometheus_client import REGISTRY

from services.common.eventlog import payload_of
from services.ingest import store
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import PROJECT, seed
from tests.ingest.gitwork import WorkClone
from tests.support.ingest import FETCH, clone, push, refused, start_route


def counter(reason: str, result: str = "refused") -> float:
    value = REGISTRY.get_sample_value("kb_ingest_pushes_total", {"result": result, "reason": reason})
    return value or 0.0


async def test_seeded_main_tag_and_triton_route(stack):
    refs = await store.ref_values(stack.log.pool)
    assert refs["refs/heads/main"] == refs["refs/tags/checks"]
    assert "refs/heads/routes/triton" in refs
    assert await stack.ingest.repo.refs() == refs
    approved = [payload_of(e) for e in await stack.events("RulesApproved")]
    # version 1's rules, then the raise to the project's (services/ingest/seed.py)
    assert [a.benchmark_version for a in approved] == [1, 2] and approved[-1].rules_commit == refs["refs/tags/checks"]
    assert approved[1].previous_commit == approved[0].rules_commit
    assert json.loads(approved[0].rules_json)["maintainers"] == ["curator"]
    started = [payload_of(e) for e in await stack.events("RouteStarted") if payload_of(e).route == "triton"]
    assert started[0].owner == "curator"
    kernels = sorted(p.name for p in (PROJECT / "kernels" / "triton").glob("*.py") if p.name != "__init__.py")
    head = refs["refs/heads/routes/triton"]
    for name in kernels:
        expected = (PROJECT / "kernels" / "triton" / name).read_bytes()
        assert await stack.ingest.repo.read_file(head, f"routes/triton/{name}") == expected
    if kernels:
        seeded = [payload_of(e) for e in await stack.events("CommitIngested") if payload_of(e).route == "triton"]
        assert len(seeded) == 2 and seeded[-1].sha == head  # version 1's commit, then the route on version 2
    assert oct(os.stat(stack.home / "curator.token").st_mode & 0o777) == "0o600"
    position = await stack.log.head_position()
    again = await seed(stack.ingest, stack.home)
    assert again.created == [] and await stack.log.head_position() == position


async def test_who_am_i_and_bad_tokens(stack):
    me = await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=stack.md("alice/agent-1"))
    assert (me.name, me.owner, me.role) == ("alice/agent-1", "alice", events_pb2.ROLE_MEMBER)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=(("authorization", "Bearer kb_" + "x" * 43),))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED and "unknown token" in info.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.StartRoute(ingest_pb2.StartRouteRequest(route="anon"))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_start_route(stack):
    route = await start_route(stack, "alice/agent-1", "fast")
    assert (route.owner, route.started_by) == ("alice", "alice/agent-1")
    assert route.head_sha == (await store.ref_values(stack.log.pool))["refs/heads/main"]
    got = await stack.stub.GetRoute(ingest_pb2.GetRouteRequest(route="fast"), metadata=stack.md("mallory"))
    assert got.owner == "alice"
    listed = await stack.stub.ListRoutes(ingest_pb2.ListRoutesRequest(), metadata=stack.md("bob"))
    assert {"fast", "triton"} <= {r.route for r in listed.routes}
    await refused(stack, start_route(stack, "bob", "fast"), grpc.StatusCode.ALREADY_EXISTS, "owner alice")
    await refused(stack, start_route(stack, "bob", "Bad_Name"), grpc.StatusCode.INVALID_ARGUMENT, "'Bad_Name'")
    await refused(
        stack,
        stack.stub.GetRoute(ingest_pb2.GetRouteRequest(route="nope"), metadata=stack.md("bob")),
        grpc.StatusCode.NOT_FOUND,
        "unknown route 'nope'",
    )


async def test_route_writers_and_events(stack, tmp_path):
    await start_route(stack, "alice", "writers")
    work = await clone(stack, "alice/agent-1", "routes/writers", tmp_path / "w")
    base = work.head()
    sha = work.commit({"routes/writers/matmul.py": "class ModelNew: pass\n"})
    reply = await push(stack, "alice/agent-1", "routes/writers", work.bundle("refs/heads/routes/writers", base))
    assert (reply.sha, reply.parent, list(reply.changed_paths)) == (sha, base, ["routes/writers/matmul.py"])
    ingested = [e for e in await stack.events("CommitIngested") if e.event_id == reply.event_id][0]
    commit = payload_of(ingested)
    assert (ingested.actor, ingested.stream, commit.kind, commit.route, commit.owner) == (
        "alice/agent-1",
        "route:writers",
        events_pb2.COMMIT_KIND_ROUTE,
        "writers",
        "alice",
    )
    assert (await stack.ingest.repo.refs())["refs/heads/routes/writers"] == sha

    # the owner herself and a maintainer may push too; another person's agent and an outsider may not
    sha2 = work.commit({"routes/writers/matmul.py": "class ModelNew: v = 2\n"})
    await push(stack, "alice", "routes/writers", work.bundle("refs/heads/routes/writers", sha))
    sha3 = work.commit({"routes/writers/new_gelu.py": "class ModelNew: pass\n"})
    bundle = work.bundle("refs/heads/routes/writers", sha2)
    for outsider in ("bob/agent-1", "mallory"):
        await refused(
            stack,
            push(stack, outsider, "routes/writers", bundle),
            grpc.StatusCode.PERMISSION_DENIED,
            "belongs to alice",
        )
    assert (await push(stack, "curator", "routes/writers", bundle)).sha == sha3


async def test_route_commits_stay_in_their_folder(stack, tmp_path):
    await start_route(stack, "bob/agent-1", "paths")
    work = await clone(stack, "bob/agent-1", "routes/paths", tmp_path / "p")
    base = work.head()
    original = (work.path / "scienceslack.json").read_text()
    work.commit({"scienceslack.json": "{}"}, "sneak the rules")
    work.commit({"scienceslack.json": original, "routes/paths/a.py": "x = 1\n"}, "the tip's diff looks clean")
    before = counter("path_outside_route")
    details = await refused(
        stack,
        push(stack, "bob/agent-1", "routes/paths", work.bundle("refs/heads/routes/paths", base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "'scienceslack.json' outside routes/paths/",
    )
    assert "touches" in details
    assert counter("path_outside_route") == before + 1
    work.git("reset", "-q", "--hard", base)
    (work.path / "routes" / "paths").mkdir(parents=True)
    os.symlink("../../scienceslack.json", work.path / "routes" / "paths" / "matmul.py")
    work.git("add", "-A")
    work.git("commit", "-q", "-m", "a symlink out of the route")
    await refused(
        stack,
        push(stack, "bob/agent-1", "routes/paths", work.bundle("refs/heads/routes/paths", base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "routes/paths/matmul.py is a symlink",
    )
    other = WorkClone(work.path, "bob/agent-1")
    other.git("reset", "-q", "--hard", base)
    other.commit({"routes/triton/evil.py": "x"})
    await refused(
        stack,
        push(stack, "bob/agent-1", "routes/paths", other.bundle("refs/heads/routes/paths", base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "routes/triton/evil.py",
    )


async def test_bad_bundles(stack, tmp_path):
    await start_route(stack, "bob", "bundles")
    work = await clone(stack, "bob", "routes/bundles", tmp_path / "b")
    base = work.head()
    work.commit({"routes/bundles/a.py": "x = 1\n"})
    good = work.bundle("refs/heads/routes/bundles", base)
    await refused(
        stack, push(stack, "bob", "routes/bundles", b"not a bundle"), grpc.StatusCode.INVALID_ARGUMENT, "malformed"
    )
    corrupt = bytearray(good)
    corrupt[-25:-21] = b"\xff\xff\xff\xff"
    await refused(
        stack, push(stack, "bob", "routes/bundles", bytes(corrupt)), grpc.StatusCode.INVALID_ARGUMENT, "malformed"
    )
    await refused(
        stack,
        push(stack, "bob", "routes/other", good),
        grpc.StatusCode.INVALID_ARGUMENT,
        "holds refs/heads/routes/bundles",
    )
    await refused(
        stack,
        push(stack, "bob", "routes/nothere", good.replace(b"routes/bundles", b"routes/nothere")),
        grpc.StatusCode.NOT_FOUND,
        "unknown route 'nothere'",
    )
    work.commit({"routes/bundles/big.bin": os.urandom(600 * 1024).hex()})
    before = counter("too_large")
    await refused(
        stack,
        push(stack, "bob", "routes/bundles", work.bundle("refs/heads/routes/bundles", base)),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "exceeds the limit",
    )
    assert counter("too_large") == before + 1
    oversized = work.bundle("refs/heads/routes/bundles", base)

    def chunks():
        for offset in range(0, len(oversized), 64 * 1024):
            yield ingest_pb2.PushChunk(
                ref="routes/bundles" if offset == 0 else "", data=oversized[offset : offset + 65536]
            )

    await refused(
        stack, stack.stub.PushStream(chunks(), metadata=stack.md("bob")), grpc.StatusCode.RESOURCE_EXHAUSTED, "limit"
    )
    assert counter("too_large") == before + 2
    assert REGISTRY.get_sample_value("kb_ingest_bundle_bytes_count") > 0
    assert REGISTRY.get_sample_value("kb_ingest_push_seconds_count", {"result": "refused"}) > 0
    stranger = WorkClone.init(tmp_path / "stranger", "bob")
    stranger.commit({"x": "1"})
    stranger.commit({"routes/bundles/y": "2"})
    stranger.git("branch", "-m", "routes/bundles")
    await refused(
        stack,
        push(stack, "bob", "routes/bundles", stranger.bundle("refs/heads/routes/bundles", "HEAD~1")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "does not have",
    )
    assert (await push(stack, "bob", "routes/bundles", good)).sha


async def test_non_fast_forward(stack, tmp_path):
    await start_route(stack, "alice", "ff")
    work = await clone(stack, "alice", "routes/ff", tmp_path / "f")
    base = work.head()
    work.commit({"routes/ff/a.py": "1"})
    await push(stack, "alice", "routes/ff", work.bundle("refs/heads/routes/ff", base))
    work.git("reset", "-q", "--hard", base)
    work.commit({"routes/ff/a.py": "rewritten"})
    await refused(
        stack,
        push(stack, "alice", "routes/ff", work.bundle("refs/heads/routes/ff", base)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "non-fast-forward",
    )


async def test_metrics_reported_and_validated(stack, tmp_path):
    await start_route(stack, "alice/agent-1", "scored")
    work = await clone(stack, "alice/agent-1", "routes/scored", tmp_path / "m")
    base = work.head()
    work.commit({"routes/scored/metrics.json": json.dumps({"score": 1.0, "cost": 2})})
    await refused(
        stack,
        push(stack, "alice/agent-1", "routes/scored", work.bundle("refs/heads/routes/scored", base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "routes/scored/metrics.json: subtasks",
    )
    work.git("reset", "-q", "--hard", base)
    metrics = {"score": 1.7, "cost": 12.5, "subtasks": [{"id": "matmul", "speedup": 1.7}]}
    sha = work.commit({"routes/scored/metrics.json": json.dumps(metrics)})
    reply = await push(stack, "alice/agent-1", "routes/scored", work.bundle("refs/heads/routes/scored", base))
    assert reply.metrics_reported
    sha2 = work.commit({"routes/scored/metrics.json": json.dumps({**metrics, "score": 1.9})})
    await push(stack, "curator", "routes/scored", work.bundle("refs/heads/routes/scored", sha))
    reported = [payload_of(e) for e in await stack.events("MetricsReported") if payload_of(e).route == "scored"]
    assert [(r.sha, r.score, r.cost, r.by_maintainer, r.reporter, r.benchmark_version) for r in reported] == [
        (sha, 1.7, 12.5, False, "alice/agent-1", 2),  # the version of the rules in force
        (sha2, 1.9, 12.5, True, "curator", 2),
    ]
    assert reported[0].subtasks.list_value.values[0].struct_value["id"] == "matmul"


async def test_main_tag_and_job_refs_by_role(stack, tmp_path):
    work = await clone(stack, "curator", "main", tmp_path / "main")
    base = work.head()
    rules = json.loads((work.path / "scienceslack.json").read_text())
    rules["benchmark"]["version"] = 3
    new_main = work.commit({"scienceslack.json": json.dumps(rules, indent=2)}, "benchmark version 3")
    bundle = work.bundle("refs/heads/main", base)
    for who in ("alice", "alice/agent-1", "mallory", "system:scheduler"):
        await refused(stack, push(stack, who, "main", bundle), grpc.StatusCode.PERMISSION_DENIED, "maintainer role")
    assert (await push(stack, "curator", "main", bundle)).sha == new_main
    assert not [e for e in await stack.events("RulesApproved") if payload_of(e).rules_commit == new_main]

    work.git("tag", "checks", new_main)
    tag_bundle = work.git("bundle", "create", "-q", "-", "refs/tags/checks", "--not", base)
    await refused(stack, push(stack, "alice", "checks", tag_bundle), grpc.StatusCode.PERMISSION_DENIED, "tag checks")
    reply = await push(stack, "curator", "checks", tag_bundle)
    assert reply.rules_approved
    approved = payload_of((await stack.events("RulesApproved"))[-1])
    assert (approved.rules_commit, approved.previous_commit, approved.benchmark_version) == (new_main, base, 3)

    # the tag marks a commit on main only, and only valid rules
    side = work.commit({"scienceslack.json": "{}"}, "not on main")
    work.git("tag", "-f", "checks", side)
    await refused(
        stack,
        push(
            stack, "curator", "checks", work.git("bundle", "create", "-q", "-", "refs/tags/checks", "--not", new_main)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "not on main",
    )
    broken = dict(rules, guardrails={**rules["guardrails"], "atol": -1})
    work.git("reset", "-q", "--hard", new_main)
    bad = work.commit({"scienceslack.json": json.dumps(broken)}, "bad rules")
    await push(stack, "curator", "main", work.bundle("refs/heads/main", new_main))
    work.git("tag", "-f", "checks", bad)
    await refused(
        stack,
        push(
            stack, "curator", "checks", work.git("bundle", "create", "-q", "-", "refs/tags/checks", "--not", new_main)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "atol",
    )

    job = WorkClone(work.path, "system:scheduler")
    job.git("checkout", "-q", "-b", "job", new_main)
    job_sha = job.commit({"jobs/41/out.txt": "done\n"}, "job 41")
    job.git("update-ref", "refs/jobs/41", job_sha)
    job_bundle = job.bundle("refs/jobs/41", new_main)
    for who in ("curator", "alice"):
        await refused(
            stack, push(stack, who, "refs/jobs/41", job_bundle), grpc.StatusCode.PERMISSION_DENIED, "system:scheduler"
        )
    reply = await push(stack, "system:scheduler", "refs/jobs/41", job_bundle)
    commit = payload_of([e for e in await stack.events("CommitIngested") if e.event_id == reply.event_id][0])
    assert (commit.kind, commit.job_id) == (events_pb2.COMMIT_KIND_JOB, "41")


async def test_pull_request_review_and_merge(stack, tmp_path):
    await start_route(stack, "bob/agent-1", "merge-me")
    work = await clone(stack, "bob/agent-1", "routes/merge-me", tmp_path / "pr")
    base = work.head()
    work.commit({"routes/merge-me/matmul.py": "class ModelNew: pass\n"})
    await push(stack, "bob/agent-1", "routes/merge-me", work.bundle("refs/heads/routes/merge-me", base))
    open_ = ingest_pb2.OpenPullRequestRequest(route="merge-me", title="fast matmul", body="tiles of 64\nno split-k")
    await refused(
        stack,
        stack.stub.OpenPullRequest(open_, metadata=stack.md("alice")),
        grpc.StatusCode.PERMISSION_DENIED,
        "belongs to bob",
    )
    pull = await stack.stub.OpenPullRequest(open_, metadata=stack.md("bob/agent-1"))
    assert (pull.state, pull.author) == ("open", "bob/agent-1")
    opened = [payload_of(e) for e in await stack.events("CommitIngested") if payload_of(e).pull_number == pull.number]
    assert [list(c.changed_paths) for c in opened] == [["routes/merge-me/matmul.py"]]
    assert (await stack.ingest.repo.refs())[f"refs/pull/{pull.number}/head"] == pull.head_sha
    assert pull.body == "tiles of 64\nno split-k"
    assert payload_of((await stack.events("PullRequestOpened"))[-1]).body == pull.body
    review = ingest_pb2.ReviewRequest(number=pull.number, verdict=events_pb2.REVIEW_VERDICT_COMMENT, body="looks fun")
    await stack.stub.Review(review, metadata=stack.md("mallory"))
    approve = ingest_pb2.ReviewRequest(number=pull.number, verdict=events_pb2.REVIEW_VERDICT_APPROVE, body="ok")
    # Its author's side -- the agent that opened it and the person it acts for -- comments, but does not approve.
    for who in ("bob/agent-1", "bob"):
        details = await refused(
            stack, stack.stub.Review(approve, metadata=stack.md(who)), grpc.StatusCode.PERMISSION_DENIED, "of its own"
        )
        assert details.startswith(f"{who} may not approve or request changes on a pull request of its own side")
    own_note = ingest_pb2.ReviewRequest(number=pull.number, verdict=events_pb2.REVIEW_VERDICT_COMMENT, body="why 64")
    await stack.stub.Review(own_note, metadata=stack.md("bob"))
    reviewed = await stack.stub.Review(approve, metadata=stack.md("curator"))
    expected = [
        ("mallory", events_pb2.REVIEW_VERDICT_COMMENT, "looks fun"),
        ("bob", events_pb2.REVIEW_VERDICT_COMMENT, "why 64"),
        ("curator", events_pb2.REVIEW_VERDICT_APPROVE, "ok"),
    ]
    assert [(r.reviewer, r.verdict, r.body) for r in reviewed.reviews] == expected
    # Every reply that shows the pull request shows its reviews: the list too (it used to answer "reviews": []).
    listed = await stack.stub.ListPullRequests(ingest_pb2.ListPullRequestsRequest(), metadata=stack.md("mallory"))
    [mine] = [p for p in listed.pull_requests if p.number == pull.number]
    assert [(r.reviewer, r.verdict, r.body) for r in mine.reviews] == expected
    assert all(r.reviewed_at.seconds for r in mine.reviews) and mine.body == pull.body
    get = ingest_pb2.GetPullRequestRequest(number=pull.number)
    shown = await stack.stub.GetPullRequest(get, metadata=stack.md("mallory"))
    assert [(f.path, f.added, f.deleted) for f in shown.files] == [("routes/merge-me/matmul.py", 1, 0)]
    assert len(shown.reviews) == 3 and shown.opened_at.seconds
    merge = ingest_pb2.MergeRequest(number=pull.number)
    for who in ("bob", "bob/agent-1", "alice"):
        await refused(
            stack,
            stack.stub.Merge(merge, metadata=stack.md(who)),
            grpc.StatusCode.PERMISSION_DENIED,
            "maintainer role needed to merge",
        )
    tag_before = (await store.ref_values(stack.log.pool))["refs/tags/checks"]
    old_main = (await store.ref_values(stack.log.pool))["refs/heads/main"]
    merged = await stack.stub.Merge(merge, metadata=stack.md("curator"))
    assert (merged.state, merged.merged_by) == ("merged", "curator")
    assert await stack.ingest.repo.read_file(merged.merge_sha, "routes/merge-me/matmul.py") == b"class ModelNew: pass\n"
    assert await stack.ingest.repo.is_ancestor(old_main, merged.merge_sha)
    refs = await store.ref_values(stack.log.pool)
    assert refs["refs/heads/main"] == merged.merge_sha and refs["refs/tags/checks"] == tag_before
    assert payload_of((await stack.events("PullRequestMerged"))[-1]).merge_sha == merged.merge_sha
    after = await stack.stub.GetPullRequest(get, metadata=stack.md("mallory"))
    assert [f.path for f in after.files] == ["routes/merge-me/matmul.py"]  # against main before the merge
    await refused(
        stack,
        stack.stub.Merge(merge, metadata=stack.md("curator")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "merged, not open",
    )


async def test_tokens(stack):
    create = ingest_pb2.CreateTokenRequest
    reply = await stack.stub.CreateToken(create(name="alice/agent-2"), metadata=stack.md("alice"))
    assert reply.registered and (reply.principal.owner, reply.principal.role) == ("alice", events_pb2.ROLE_MEMBER)
    agent = (("authorization", f"Bearer {reply.token}"),)
    assert (await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=agent)).name == "alice/agent-2"
    await refused(
        stack,
        stack.stub.CreateToken(create(name="bob/agent-9"), metadata=stack.md("alice")),
        grpc.StatusCode.PERMISSION_DENIED,
        "itself and its agents",
    )
    await refused(
        stack,
        stack.stub.CreateToken(create(name="alice/agent-3"), metadata=stack.md("alice/agent-1")),
        grpc.StatusCode.PERMISSION_DENIED,
        "only people",
    )
    service = await stack.stub.CreateToken(create(name="system:scheduler"), metadata=stack.md("curator"))
    assert (service.registered, service.principal.kind) == (False, events_pb2.PRINCIPAL_KIND_SERVICE)
    await refused(
        stack,
        stack.stub.CreateToken(create(name="system:scheduler"), metadata=stack.md("alice")),
        grpc.StatusCode.PERMISSION_DENIED,
        "only for itself",
    )
    newcomer = await stack.stub.CreateToken(create(name="carol", member=True), metadata=stack.md("curator"))
    assert newcomer.principal.role == events_pb2.ROLE_MEMBER
    await refused(
        stack,
        stack.stub.RevokeToken(ingest_pb2.RevokeTokenRequest(token=reply.token), metadata=stack.md("bob")),
        grpc.StatusCode.NOT_FOUND,  # as for a token that does not exist: whose a token is stays unsaid
        "no such token",
    )
    revoked = await stack.stub.RevokeToken(ingest_pb2.RevokeTokenRequest(token=reply.token), metadata=stack.md("alice"))
    assert revoked.principal == "alice/agent-2"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=agent)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED and "revoked" in info.value.details()
    short = await stack.stub.CreateToken(create(name="alice", ttl_seconds=1), metadata=stack.md("alice"))
    await asyncio.sleep(1.2)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=(("authorization", f"Bearer {short.token}"),))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED and "expired" in info.value.details()


async def test_concurrent_pushes_to_one_ref(stack, tmp_path):
    await start_route(stack, "alice", "race")
    one = await clone(stack, "alice", "routes/race", tmp_path / "one")
    two = await clone(stack, "alice/agent-1", "routes/race", tmp_path / "two")
    base = one.head()
    one.commit({"routes/race/a.py": "one"})
    two.commit({"routes/race/a.py": "two"})
    results = await asyncio.gather(
        push(stack, "alice", "routes/race", one.bundle("refs/heads/routes/race", base)),
        push(stack, "alice/agent-1", "routes/race", two.bundle("refs/heads/routes/race", base)),
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, ingest_pb2.PushReply)]
    losers = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert losers[0].code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION)
    assert "non-fast-forward" in losers[0].details()
    assert (await stack.ingest.repo.refs())["refs/heads/routes/race"] == winners[0].sha
    ingested = [payload_of(e) for e in await stack.events("CommitIngested") if payload_of(e).route == "race"]
    assert [c.sha for c in ingested] == [winners[0].sha]


async def test_fetch_stream_clones_everything(stack, tmp_path):
    chunks = [c async for c in stack.stub.FetchStream(FETCH(), metadata=stack.md("mallory"))]
    data = b"".join(c.data for c in chunks)
    assert len(data) == chunks[0].total_bytes
    (tmp_path / "all.bundle").write_bytes(data)
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(tmp_path / "all.bundle")], capture_output=True, text=True
    )
    names = {line.split()[1] for line in heads.stdout.splitlines()}
    assert {"refs/heads/main", "refs/tags/checks", "refs/heads/routes/triton"} <= names
    main = (await store.ref_values(stack.log.pool))["refs/heads/main"]
    unchanged = await stack.stub.Fetch(
        FETCH(refs=["main"], have=[main, "nonsense", "f" * 40]), metadata=stack.md("bob")
    )
    assert unchanged.bundle == b""
    await refused(
        stack,
        stack.stub.Fetch(FETCH(refs=["routes/none"]), metadata=stack.md("bob")),
        grpc.StatusCode.NOT_FOUND,
        "no such ref",
    )


async def test_a_crash_between_commit_and_git_update_is_reconciled_at_start(stack, tmp_path, monkeypatch):
    await start_route(stack, "alice", "crash")
    work = await clone(stack, "alice", "routes/crash", tmp_path / "c")
    base = work.head()
    sha = work.commit({"routes/crash/a.py": "1"})

    async def crash(values):
        raise SystemError("killed after the postgres commit, before the git ref moved")

    monkeypatch.setattr(stack.ingest.repo, "write_refs", crash)
    with pytest.raises(grpc.aio.AioRpcError):
        await push(stack, "alice", "routes/crash", work.bundle("refs/heads/routes/crash", base))
    await stack.ingest.git_refs.stop()  # the process dies here: nothing retries the git update
    monkeypatch.undo()
    assert (await store.ref_values(stack.log.pool))["refs/heads/routes/crash"] == sha
    assert (await stack.ingest.repo.refs())["refs/heads/routes/crash"] == base
    assert [payload_of(e).sha for e in await stack.events("CommitIngested") if payload_of(e).route == "crash"] == [sha]

    # and a git ref that Postgres never recorded (no event) is removed
    subprocess.run(
        ["git", f"--git-dir={stack.ingest.repo.path}", "update-ref", "refs/heads/routes/ghost", sha], check=True
    )
    stale = stack.ingest.repo.path / "kb-quarantine" / "interrupted-push"
    stale.mkdir(parents=True)
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    restarted = Ingest(stack.log, HostedRepo(stack.ingest.repo.path))
    assert await restarted.start() == ["refs/heads/routes/crash", "refs/heads/routes/ghost"]
    git_refs = await stack.ingest.repo.refs()
    assert git_refs["refs/heads/routes/crash"] == sha and "refs/heads/routes/ghost" not in git_refs
    assert git_refs == await store.ref_values(stack.log.pool)
    assert not stale.exists()
    await restarted.stop()
    stack.ingest.git_refs.start()  # the module's server goes on with the next tests
    work.commit({"routes/crash/a.py": "2"})
    assert (await push(stack, "alice", "routes/crash", work.bundle("refs/heads/routes/crash", sha))).parent == sha


async def test_the_seed_reports_the_recorded_h200_run_as_the_maintainer(stack):
    """A fresh board has something real to rank: the bundled route's verified H200 run, reported by curator."""
    recorded = json.loads((PROJECT / "bench/harness/route_triton/after_issue8/route_triton_1.json").read_text())
    reports = [payload_of(e) for e in await stack.events("MetricsReported") if payload_of(e).route == "triton"]
    assert len(reports) == 1
    seeded = reports[0]
    assert (seeded.by_maintainer, seeded.reporter, seeded.score) == (True, "curator", recorded["score"])
    assert (seeded.runner, seeded.measured_at, seeded.rules_commit) == (
        "NVIDIA H200",
        "2026-12-02T18:29:00Z",
        recorded["rules_commit"],
    )
    assert len(seeded.subtasks.list_value.values) == 12
