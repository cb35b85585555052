"""The intake (consumer handler) and the durable queue on the real PostgreSQL: each commit's checks are queued once,
leases expire, and each check is completed exactly once however many workers race for it."""

import asyncio
import contextlib

from kernelboard.v1 import events_pb2

from contracts import names
from contracts.metrics import VERIFIER_VERSION
from services.common.consumer import Consumer
from services.common.eventlog import NewEvent
from services.verifier import domain
from services.verifier.intake import EVENT_TYPES, Intake
from services.verifier.queue import CheckQueue
from services.verifier.worker import Worker
from tests.verifier.conftest import (
    CPU_SLOT,
    approve_rules,
    metrics_script,
    push_route,
    route_name,
    rules_with_checks,
    worker_config,
)

QUICK = {"name": "quick", "script": "checks/quick.sh", "metrics": "quick.json", "time_limit_s": 60}
LINT = {"name": "lint", "script": "checks/lint.sh", "metrics": "lint.json", "time_limit_s": 60}


def consumer(log, settings, queue, name="verifier") -> Consumer:
    return Consumer(name, log, settings, Intake(log, queue).handle, types=set(EVENT_TYPES))


async def stream_types(log, check_id: str) -> list[str]:
    return [e.type for e in await log.read_stream(names.check_stream(check_id))]


async def test_each_check_of_a_route_commit_is_queued_once_even_when_the_commit_is_redelivered(
    log, settings, queue, repo
):
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK, LINT))
    route = route_name()
    sha, trigger = await push_route(log, repo, route, {"new_gelu.py": "x = 1\n"}, rules_commit)
    intake = consumer(log, settings, queue)
    await intake.catch_up()

    rows = await queue.search(sha=sha)
    assert sorted(r.item.check_name for r in rows) == ["lint", "quick"]
    assert {(r.state, r.item.route, r.item.rules_commit, r.item.trigger_event_id) for r in rows} == {
        ("queued", route, rules_commit, trigger)
    }
    for row in rows:
        [requested] = await log.read_stream(names.check_stream(row.item.check_id))
        assert requested.check_requested.check_id == row.item.check_id
        assert requested.check_requested.trigger_event_id == trigger

    # The checkpoint lost (or a consumer replaying the log): the same CommitIngested applied again.
    async with log.pool.acquire() as conn:
        await conn.execute("UPDATE consumer_checkpoints SET position = 0 WHERE consumer = 'verifier'")
    await intake.catch_up()
    [commit_event] = [e for e in await log.read_stream(f"route:{route}")]
    async with log.pool.acquire() as conn, conn.transaction():
        await Intake(log, queue).handle(conn, commit_event)

    assert len(await queue.search(sha=sha)) == 2
    for row in rows:
        assert await stream_types(log, row.item.check_id) == ["CheckRequested"]
    assert await queue.depth() == 2


async def test_job_commits_are_checked_for_their_route_and_other_commits_not_at_all(log, settings, queue, repo):
    intake = consumer(log, settings, queue)
    early = events_pb2.CommitIngested(ref="refs/heads/routes/x", sha="1" * 40, kind=events_pb2.COMMIT_KIND_ROUTE)
    await log.append("route:x", None, [NewEvent(early, actor="alice")])
    await intake.catch_up()
    assert await queue.search() == []  # no rules approved yet: nothing to judge by

    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK))
    route = route_name()
    submitted = events_pb2.JobSubmitted(job_id="17", route=route, sha="2" * 40)
    await log.append("job:17", None, [NewEvent(submitted, actor="system:scheduler")])
    job = events_pb2.CommitIngested(
        ref="refs/jobs/17", sha="3" * 40, parent="2" * 40, kind=events_pb2.COMMIT_KIND_JOB, job_id="17"
    )
    main = events_pb2.CommitIngested(ref="refs/heads/main", sha="4" * 40, kind=events_pb2.COMMIT_KIND_MAIN)
    pull = events_pb2.CommitIngested(ref="refs/pull/1/head", sha="5" * 40, kind=events_pb2.COMMIT_KIND_PULL)
    await log.append("job:17", None, [NewEvent(job, actor="system:scheduler")])
    await log.append("main", None, [NewEvent(main, actor="curator")])
    await log.append("pull:1", None, [NewEvent(pull, actor="alice")])
    await intake.catch_up()

    [row] = await queue.search()
    assert (row.item.sha, row.item.route, row.item.job_id, row.item.kind) == (
        "3" * 40,
        route,
        "17",
        events_pb2.COMMIT_KIND_JOB,
    )
    assert row.item.rules_commit == rules_commit


async def test_an_expired_lease_passes_the_check_on_and_only_the_first_completion_counts(log, settings, repo):
    queue = CheckQueue(log, lease_s=0.5)
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK))
    sha, _ = await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    await consumer(log, settings, queue).catch_up()

    first = await queue.claim("w1")
    assert first is not None and first.attempts == 1
    assert await queue.claim("w2") is None  # leased to w1
    assert await queue.heartbeat(first.item.check_id, "w1")
    await asyncio.sleep(0.7)  # w1 stops renewing: as if it died
    assert await queue.depth() == 1
    second = await queue.claim("w2")
    assert second is not None and second.item.check_id == first.item.check_id and second.attempts == 2
    assert not await queue.heartbeat(first.item.check_id, "w1")  # w1 learns it lost the check

    outcome = domain.RunOutcome(0, False, 1.0, b'{"score": 1, "cost": 0, "subtasks": []}')
    verdict = domain.judge(second.item, outcome, host="w2")
    event = await queue.complete(second.item.check_id, verdict)
    assert event is not None and event.verifier_version == VERIFIER_VERSION
    assert await queue.complete(first.item.check_id, domain.judge(first.item, outcome, host="w1")) is None
    assert await stream_types(log, first.item.check_id) == ["CheckRequested", "CheckCompleted"]
    row = await queue.get(first.item.check_id)
    assert (row.state, row.attempts, row.result.verifier_host) == ("passed", 2, "w2")
    assert await queue.claim("w3") is None and await queue.depth() == 0


async def test_two_workers_share_the_queue_and_each_check_completes_exactly_once(log, settings, queue, repo):
    quick = metrics_script("sleep 0.5")
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK), extra={"checks/quick.sh": quick})
    shas = [(await push_route(log, repo, route_name(), {"new_gelu.py": f"# {i}\n"}, rules_commit))[0] for i in range(6)]
    await consumer(log, settings, queue).catch_up()
    config = worker_config(settings)
    workers = [Worker(queue, config, CPU_SLOT, name=f"worker-{i}") for i in range(2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        async with asyncio.timeout(120):
            while len([r for r in await queue.search() if r.state in ("passed", "failed")]) < len(shas):
                await asyncio.sleep(0.2)
    finally:
        for worker in workers:
            await worker.stop()
        await asyncio.gather(*tasks)

    rows = await queue.search()
    assert sorted(r.item.sha for r in rows) == sorted(shas)
    for row in rows:
        assert row.state == "passed", list(row.result.reasons)
        assert await stream_types(log, row.item.check_id) == ["CheckRequested", "CheckCompleted"]
        assert row.result.score == 1.5 and row.result.subtasks[0].id == "new_gelu"
    assert {r.result.verifier_host for r in rows} == {"worker-0", "worker-1"}
    completed = [e async for e in log.read_all(types={"CheckCompleted"})]
    assert len(completed) == len(shas)


async def test_a_worker_stopped_mid_check_hands_it_back(log, settings, queue, repo):
    slow = metrics_script("sleep 30")
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK), extra={"checks/quick.sh": slow})
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    await consumer(log, settings, queue).catch_up()
    worker = Worker(queue, worker_config(settings), CPU_SLOT, name="stopping")
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(30):
        while not [r for r in await queue.search() if r.state == "running"]:
            await asyncio.sleep(0.1)
    await worker.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    [row] = await queue.search()
    assert (row.state, row.claimed_by, row.attempts) == ("queued", None, 0)


async def test_a_check_whose_worker_keeps_dying_is_failed_as_abandoned(log, settings, repo):
    queue = CheckQueue(log, lease_s=0.1)
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK))
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    await consumer(log, settings, queue).catch_up()
    for dying in ("w1", "w2", "w3"):  # each claims it, then dies (never renews, never completes)
        assert await queue.claim(dying) is not None
        await asyncio.sleep(0.15)
    worker = Worker(queue, worker_config(settings), CPU_SLOT, name="w4")
    assert await worker.run_once()
    [row] = await queue.search()
    assert (row.state, row.attempts) == ("failed", 4)
    assert list(row.result.reasons) == ["abandoned: the check's worker died 3 times before it finished"]


async def test_a_queued_check_is_told_its_place_in_line_and_about_when_it_starts(log, settings, queue, repo):
    """kb checks shows a queued check's place and an estimate from recent check times (issue 37)."""
    from services.verifier.api import with_places

    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK))
    shas = [(await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit))[0] for _ in range(3)]
    await consumer(log, settings, queue).catch_up()
    outcome = domain.RunOutcome(0, False, 1.0, b'{"score": 1, "cost": 0, "subtasks": []}')
    done = await queue.claim("w1")  # one check ran before: its time is the estimate's
    await queue.complete(done.item.check_id, domain.judge(done.item, outcome, host="w1"))
    running = await queue.claim("w1")
    waiting = [r for sha in shas for r in await queue.search(sha=sha) if r.state == "queued"]

    [check] = await with_places(queue, waiting)
    assert check.state == "queued" and check.queue_position == 1  # next, behind the one running
    assert 0 < check.estimated_wait_s < 60  # one recent check's time, for the one running ahead of it
    [shown] = await with_places(queue, [await queue.get(running.item.check_id)])
    assert (shown.state, shown.queue_position) == ("running", 0)


async def test_an_incomplete_check_runs_once_more_then_is_recorded_incomplete_with_what_it_judged(
    log, settings, queue, repo, monkeypatch
):
    """A check whose judge could not judge a problem (its own out-of-memory, a harness bug) is never a verdict on the
    route: the worker runs it again once, then records it incomplete, keeping the problems it judged."""
    incomplete = (
        '#!/usr/bin/env bash\ncat > "$2" <<JSON\n{"score": 1.5, "cost": 0.25, "passed": true, "runner": "cpu", '
        '"incomplete": true, "subtasks": [{"id": "new_gelu", "passed": true, "submitted": true, "speedup": 1.5, '
        '"peak_device_bytes": {"judge": 1024, "candidate": 2048}}, {"id": "rms_norm", "submitted": true, '
        '"not_judged": "rms_norm not judged: the judge ran out of memory"}]}\nJSON\n'
    )
    rules_commit = await approve_rules(log, repo, rules_with_checks(QUICK), extra={"checks/quick.sh": incomplete})
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    await consumer(log, settings, queue).catch_up()
    runs = []
    run_script = Worker._outcome

    async def counted(self, item, box):
        runs.append(item.check_id)
        return await run_script(self, item, box)

    monkeypatch.setattr(Worker, "_outcome", counted)
    assert await Worker(queue, worker_config(settings), CPU_SLOT, name="w").run_once()
    [row] = await queue.search()
    assert runs == [row.item.check_id] * domain.INCOMPLETE_ATTEMPTS
    result = row.result
    assert (result.incomplete, result.verified, result.attempts) == (True, False, 2)
    assert [(s.id, s.not_judged) for s in result.subtasks] == [
        ("new_gelu", ""),
        ("rms_norm", "rms_norm not judged: the judge ran out of memory"),
    ]
    assert (result.subtasks[0].peak_judge_bytes, result.subtasks[0].peak_candidate_bytes) == (1024, 2048)
    assert await stream_types(log, row.item.check_id) == ["CheckRequested", "CheckCompleted"]
