"""The git refs follow PostgreSQL's in batches (services/ingest/gitrefs.py): a reply means git has the ref, readers
wait for git to catch up, a failed git write is retried, and concurrent pushes leave git equal to the table."""

import asyncio

import grpc
import pytest

from services.ingest import store
from tests.support.ingest import FETCH, clone, push, start_route


async def git_equals_postgres(stack) -> bool:
    return await stack.ingest.repo.refs() == await store.ref_values(stack.log.pool)


async def test_concurrent_pushes_leave_git_equal_to_postgres(stack, tmp_path):
    routes = [f"many-{i}" for i in range(8)]
    clones = []
    for route in routes:
        await start_route(stack, "alice", route)
        clones.append(await clone(stack, "alice", f"routes/{route}", tmp_path / route))
    for round_ in range(3):
        bundles = []
        for route, work in zip(routes, clones, strict=True):
            base = work.head()
            work.commit({f"routes/{route}/metrics.json": f'{{"score": {round_}, "cost": 0, "subtasks": []}}'})
            bundles.append(work.bundle(f"refs/heads/routes/{route}", base))
        replies = await asyncio.gather(
            *(push(stack, "alice", f"routes/{r}", b) for r, b in zip(routes, bundles, strict=True))
        )
        git_refs = await stack.ingest.repo.refs()
        assert [git_refs[f"refs/heads/routes/{r}"] for r in routes] == [reply.sha for reply in replies]
        assert await git_equals_postgres(stack)


async def test_a_push_replies_and_a_fetch_serves_only_once_git_has_the_ref(stack, tmp_path, monkeypatch):
    await start_route(stack, "alice", "gated")
    work = await clone(stack, "alice", "routes/gated", tmp_path / "gated")
    base = work.head()
    sha = work.commit({"routes/gated/a.py": "1"})
    gate = asyncio.Event()
    write_refs = stack.ingest.repo.write_refs

    async def slow_git(values):
        await gate.wait()
        await write_refs(values)

    monkeypatch.setattr(stack.ingest.repo, "write_refs", slow_git)
    pushing = asyncio.create_task(push(stack, "alice", "routes/gated", work.bundle("refs/heads/routes/gated", base)))
    while (await store.ref_values(stack.log.pool))["refs/heads/routes/gated"] != sha:
        await asyncio.sleep(0.02)  # recorded in postgres; git waits at the gate
    fetching = asyncio.ensure_future(stack.stub.Fetch(FETCH(refs=["routes/gated"]), metadata=stack.md("bob")))
    await asyncio.sleep(0.5)
    assert not pushing.done() and not fetching.done()
    assert (await stack.ingest.repo.refs())["refs/heads/routes/gated"] == base
    gate.set()
    assert (await pushing).sha == sha
    (tmp_path / "f.bundle").write_bytes((await fetching).bundle)
    heads = await asyncio.create_subprocess_exec(
        "git", "bundle", "list-heads", str(tmp_path / "f.bundle"), stdout=asyncio.subprocess.PIPE
    )
    assert (await heads.communicate())[0].decode().split()[0] == sha


async def test_a_failed_git_write_fails_the_reply_and_is_retried(stack, tmp_path, monkeypatch):
    await start_route(stack, "alice", "retried")
    work = await clone(stack, "alice", "routes/retried", tmp_path / "retried")
    base = work.head()
    sha = work.commit({"routes/retried/a.py": "1"})
    write_refs = stack.ingest.repo.write_refs
    failures = []

    async def fails_once(values):
        if not failures:
            failures.append(values)
            raise OSError("disk full")
        await write_refs(values)

    monkeypatch.setattr(stack.ingest.repo, "write_refs", fails_once)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await push(stack, "alice", "routes/retried", work.bundle("refs/heads/routes/retried", base))
    assert "disk full" in info.value.details()
    # recorded (the event and the ref are the truth), and git catches up without another push
    assert (await store.ref_values(stack.log.pool))["refs/heads/routes/retried"] == sha
    await asyncio.wait_for(stack.ingest.git_refs.caught_up(), 5)
    assert (await stack.ingest.repo.refs())["refs/heads/routes/retried"] == sha
    assert await git_equals_postgres(stack)
