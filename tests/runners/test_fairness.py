"""The order checks go to the runners in (services/verifier/runnerqueue.py): fair between owners, a newer push
superseding older queued checks only where the rules say so, and how many a partition takes at once."""

from services.common.slurm import NodeRecord
from services.verifier.dispatch import runner_slots
from services.verifier.runnerqueue import RunnerQueue
from tests.runners.conftest import item


async def enqueue(queue, items):
    async with queue.pool.acquire() as conn, conn.transaction():
        return await queue.enqueue(conn, items)


async def test_one_agents_fifty_checks_do_not_starve_anothers_one(queue):
    runners = RunnerQueue(queue)
    mine = [item("alice", "fast", f"{n:040x}") for n in range(50)]
    await enqueue(queue, mine)
    await enqueue(queue, [item("bob", "slow", "b" * 40)])
    first = await runners.claim_next("d", "runners")
    second = await runners.claim_next("d", "runners")
    # alice's first check went first (queued first); bob's one is next, ahead of alice's 49 others.
    assert (first.item.owner, second.item.owner) == ("alice", "bob")
    third = await runners.claim_next("d", "runners")
    assert third.item.owner == "alice"


async def test_owners_take_turns(queue):
    runners = RunnerQueue(queue)
    for owner in ("a", "b", "c"):
        await enqueue(queue, [item(owner, owner, f"{n:039x}{ord(owner):x}"[-40:]) for n in range(4)])
    order = [(await runners.claim_next("d", "runners")).item.owner for _ in range(9)]
    assert order == ["a", "b", "c"] * 3


async def test_the_order_is_per_partition_and_ignores_local_checks(queue):
    runners = RunnerQueue(queue)
    await enqueue(queue, [item("a", "x", "1" * 40, partition=""), item("b", "y", "2" * 40, partition="gpu")])
    assert await runners.claim_next("d", "runners") is None
    assert (await runners.claim_next("d", "gpu")).item.owner == "b"
    assert (await queue.claim("worker")).item.owner == "a"  # the verifier's own workers take only local checks


async def test_a_newer_push_supersedes_queued_checks_only_where_the_rules_say_so(queue):
    runners = RunnerQueue(queue)
    kept = item("alice", "keep", "1" * 40)
    old = item("alice", "fast", "2" * 40, supersede=True)
    await enqueue(queue, [kept, old])
    async with queue.pool.acquire() as conn, conn.transaction():
        newer_kept = item("alice", "keep", "3" * 40)
        await queue.enqueue(conn, [newer_kept])
        assert await runners.supersede(conn, newer_kept) == []  # supersede off (the default): every push judged
        newer = item("alice", "fast", "4" * 40, supersede=True)
        await queue.enqueue(conn, [newer])
        assert await runners.supersede(conn, newer) == [old.check_id]
    dropped = await queue.get(old.check_id)
    assert dropped.state == "failed" and dropped.result.reasons[0].startswith("superseded: not run, the route's")
    assert "444444444444" in dropped.result.reasons[0]
    assert (await queue.get(kept.check_id)).state == "queued" and (await queue.get(newer.check_id)).state == "queued"


def test_a_partition_runs_one_check_per_gpu_or_per_cpu_runner_up():
    nodes = [NodeRecord("runner1", "idle", False, 8), NodeRecord("runner2", "mixed", False, 2),
             NodeRecord("runner3", "down", True, 8)]  # fmt: skip
    assert runner_slots(nodes, "cuda") == 10
    assert runner_slots(nodes, "cpu") == 2
