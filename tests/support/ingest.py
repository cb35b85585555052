"""What the ingest tests share: calls on the running service (tests/ingest/conftest.py's ``stack``) and what a
refused one must leave as it was."""

import subprocess

import grpc
import pytest
from kernelboard.v1 import ingest_pb2

from services.ingest import store
from tests.ingest.gitwork import WorkClone

FETCH = ingest_pb2.FetchRequest


async def snapshot(stack):
    """Everything a refused request must leave as it was: recorded refs, git refs and the log's head."""
    return (
        await store.ref_values(stack.log.pool),
        await stack.ingest.repo.refs(),
        await stack.log.head_position(),
    )


async def clone(stack, who: str, branch: str, dest) -> WorkClone:
    reply = await stack.stub.Fetch(FETCH(refs=[branch]), metadata=stack.md(who))
    bundle = dest.parent / f"{dest.name}.bundle"
    bundle.write_bytes(reply.bundle)
    subprocess.run(["git", "clone", "-q", "-b", branch, str(bundle), str(dest)], check=True)
    return WorkClone(dest, author=who)


async def push(stack, who: str, ref: str, bundle: bytes) -> ingest_pb2.PushReply:
    return await stack.stub.Push(ingest_pb2.PushRequest(ref=ref, bundle=bundle), metadata=stack.md(who))


async def refused(stack, call, code: grpc.StatusCode, fragment: str):
    before = await snapshot(stack)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert fragment in info.value.details(), info.value.details()
    assert await snapshot(stack) == before, "a refused request wrote something"
    return info.value.details()


async def start_route(stack, who: str, name: str) -> ingest_pb2.Route:
    return await stack.stub.StartRoute(ingest_pb2.StartRouteRequest(route=name), metadata=stack.md(who))
