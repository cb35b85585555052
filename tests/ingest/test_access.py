"""The attacks of issue 12 on who may do what, over gRPC against the real ingest service: an agent acting for a
maintainer, and a maintainer role given through host access, never change the rules that judge."""

import json

import grpc
from kernelboard.v1 import events_pb2, ingest_pb2

from services.common import auth
from services.common.eventlog import payload_of
from tests.support.ingest import clone, push, refused, start_route


async def sign_in(stack, name: str, kind: int, owner: str, role: int) -> None:
    async with stack.log.pool.acquire() as conn:
        if await auth.get_principal(conn, name) is None:
            await auth.register_principal(conn, name, kind, owner, role, log=stack.log, actor="test")
        stack.tokens[name] = await auth.issue_token(conn, name)


def loosened(work, tolerance: float) -> dict:
    rules = json.loads((work.path / "scienceslack.json").read_text())
    rules["guardrails"]["atol"] = rules["guardrails"]["rtol"] = tolerance
    rules["benchmark"]["version"] += 1  # rules that judge differently start a new board (the rules guard)
    return rules


def tag_bundle(work, commit: str, *exclude: str) -> bytes:
    work.git("tag", "-f", "checks", commit)
    return work.git("bundle", "create", "-q", "-", "refs/tags/checks", "--not", *exclude)


async def test_an_agent_of_a_maintainer_neither_pushes_main_nor_approves_rules(stack, tmp_path):
    await sign_in(stack, "curator/agent-1", events_pb2.PRINCIPAL_KIND_AGENT, "curator", events_pb2.ROLE_UNSPECIFIED)
    work = await clone(stack, "curator/agent-1", "main", tmp_path / "main")
    base = work.head()
    loose = work.commit({"scienceslack.json": json.dumps(loosened(work, 0.5), indent=2)}, "atol and rtol 0.5")
    await refused(
        stack,
        push(stack, "curator/agent-1", "main", work.bundle("refs/heads/main", base)),
        grpc.StatusCode.PERMISSION_DENIED,
        "curator/agent-1",
    )
    # Even once the change is on main, only the maintainer in person approves it by moving the tag.
    assert (await push(stack, "curator", "main", work.bundle("refs/heads/main", base))).sha == loose
    details = await refused(
        stack,
        push(stack, "curator/agent-1", "checks", tag_bundle(work, loose, base)),
        grpc.StatusCode.PERMISSION_DENIED,
        "approve",
    )
    assert "agent" in details
    assert not [e for e in await stack.events("RulesApproved") if payload_of(e).rules_commit == loose]


async def test_an_agent_of_a_maintainer_does_not_merge_or_mint_its_owners_tokens(stack, tmp_path):
    await sign_in(stack, "curator/agent-1", events_pb2.PRINCIPAL_KIND_AGENT, "curator", events_pb2.ROLE_UNSPECIFIED)
    await start_route(stack, "alice", "agent-merge")
    work = await clone(stack, "alice", "routes/agent-merge", tmp_path / "route")
    base = work.head()
    work.commit({"routes/agent-merge/matmul.py": "class ModelNew: pass\n"})
    await push(stack, "alice", "routes/agent-merge", work.bundle("refs/heads/routes/agent-merge", base))
    pull = await stack.stub.OpenPullRequest(
        ingest_pb2.OpenPullRequestRequest(route="agent-merge", title="t"), metadata=stack.md("alice")
    )
    await refused(
        stack,
        stack.stub.Merge(ingest_pb2.MergeRequest(number=pull.number), metadata=stack.md("curator/agent-1")),
        grpc.StatusCode.PERMISSION_DENIED,
        "merge",
    )
    # A token for its owner would be the owner's own powers: tokens are a person's act.
    for name in ("curator", "mallory", "curator/agent-2"):
        await refused(
            stack,
            stack.stub.CreateToken(ingest_pb2.CreateTokenRequest(name=name), metadata=stack.md("curator/agent-1")),
            grpc.StatusCode.PERMISSION_DENIED,
            "only people",
        )


async def test_a_maintainer_role_given_through_host_access_does_not_approve_rules(stack, tmp_path):
    # `kb admin user add --role maintainer` on the host: a maintainer role, but not one of the maintainers the rules
    # in force name, who alone approve the rules.
    await sign_in(stack, "hostop", events_pb2.PRINCIPAL_KIND_PERSON, "hostop", events_pb2.ROLE_MAINTAINER)
    work = await clone(stack, "hostop", "main", tmp_path / "main")
    base = work.head()
    loose = work.commit({"scienceslack.json": json.dumps(loosened(work, 0.4), indent=2)}, "atol and rtol 0.4")
    assert (await push(stack, "hostop", "main", work.bundle("refs/heads/main", base))).sha == loose
    await refused(
        stack,
        push(stack, "hostop", "checks", tag_bundle(work, loose, base)),
        grpc.StatusCode.PERMISSION_DENIED,
        "maintainers named in the rules",
    )
    reply = await push(stack, "curator", "checks", tag_bundle(work, loose, base))
    assert reply.rules_approved
