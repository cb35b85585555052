"""Faults on a real private stack (tests/faults/conftest.py): kill -9 of each component in the middle of the flow and
restart, NATS restarted, PostgreSQL restarted, a consumer slower than the producer, a poisoned event. Each test ends
with: the rebuilt board equals the live board, no event lost, none duplicated (tests/e2e/invariants.py)."""

import asyncio
import json
import shutil
import signal
import subprocess
import time

import grpc
import pytest
from kernelboard.v1 import board_pb2, scheduler_pb2, verifier_pb2
from prometheus_client import REGISTRY

from services.common.config import Settings
from services.common.consumer import Consumer
from services.common.eventlog import EventLog
from tests.e2e.invariants import assert_board_rebuilds, read_log
from tests.e2e.stack import ROOT, wait_for
from tests.faults.helpers import RouteClone, payloads, push_with_retry, squeue_state

pytestmark = pytest.mark.timeout(300)

JOB = "#!/bin/bash\n#SBATCH --time=2\n#SBATCH --cpus-per-task=1\nsleep 6\necho done > out.txt\n"


async def clone_for(stack, tokens, stubs, route: str) -> RouteClone:
    return await RouteClone(route, tokens["agent"], stack.root / f"clone-{route}", stack.env()).start(stubs.ingest)


async def board_shows(stubs, tokens, route: str, score: float) -> bool:
    md = (("authorization", f"Bearer {tokens['curator']}"),)
    try:
        view = await stubs.board.GetBoard(board_pb2.GetBoardRequest(version=0), metadata=md, timeout=5)
    except grpc.RpcError:
        return False
    return any(e.route == route and abs(e.score - score) < 1e-9 for e in [*view.ranked, *view.listed_beside])


async def events_of(stack, kind: str) -> list:
    return payloads(await read_log(stack.database_url), kind)


async def test_kill9_verifier_mid_check(stack, tokens, stubs):
    clone = await clone_for(stack, tokens, stubs, "kill-verifier")
    sha = await clone.push_metrics(stubs.ingest, 1.7, {"notes.txt": "a check to interrupt\n"})
    md = clone.md

    async def running():
        reply = await stubs.verifier.ListChecks(verifier_pb2.ListChecksRequest(sha=sha), metadata=md)
        return [c for c in reply.checks if c.state == "running"]

    await wait_for(running, "the check running", 180, 0.2)
    stack.kill("verifier")  # its process group: the sandboxed check dies too
    stack.restart("verifier")
    await wait_for(lambda: _checked(stack, sha), "the check completed after the restart", 180, 1)
    reply = await stubs.verifier.ListChecks(verifier_pb2.ListChecksRequest(sha=sha), metadata=md)
    assert [c.attempts for c in reply.checks] == [2], reply  # one run lost with the worker, one that completed
    await assert_board_rebuilds(stack, tokens["curator"])


async def test_kill9_scheduler_while_its_job_runs(stack, tokens, stubs):
    clone = await clone_for(stack, tokens, stubs, "kill-scheduler")
    sha = await clone.push_metrics(stubs.ingest, 1.5, {"job.sbatch": JOB})
    md = clone.md
    job = await stubs.scheduler.SubmitJob(
        scheduler_pb2.SubmitJobRequest(ref=clone.ref, sha=sha, script_path=f"routes/{clone.route}/job.sbatch"),
        metadata=md,
    )
    await wait_for(lambda: squeue_state(stack, job.job_id) == "RUNNING", "the job running", 60, 0.3)
    stack.kill("scheduler")
    await asyncio.sleep(8)  # the job ends while no scheduler follows it
    stack.restart("scheduler")
    finished = await wait_for(
        lambda: _job_done(stubs, job.job_id, md), f"job {job.job_id}'s result committed after the restart", 90, 1
    )
    assert finished.state == "COMPLETED"
    await wait_for(lambda: _checked(stack, finished.result_sha), "the job commit checked", 180, 2)
    await assert_board_rebuilds(stack, tokens["curator"])


@pytest.fixture
def verifier_stopped(stack):
    """The tests from here on need no checks, and each of their pushes would queue a CPU check that competes for this
    2-core machine: the verifier is stopped (its own kill -9 test ran above) to keep the suite bounded."""
    if stack.procs["verifier"].poll() is None:
        stack.kill("verifier", signal.SIGTERM)


async def test_kill9_relay_and_board_between_push_and_board(stack, tokens, stubs, verifier_stopped):
    clone = await clone_for(stack, tokens, stubs, "kill-relay-board")
    await clone.push_metrics(stubs.ingest, 1.01)
    stack.kill("relay")
    stack.kill("board")
    await clone.push_metrics(stubs.ingest, 1.02)  # in the log; nobody publishes or folds it yet
    await clone.push_metrics(stubs.ingest, 1.03)
    stack.restart("relay")
    stack.restart("board")
    await wait_for(lambda: board_shows(stubs, tokens, clone.route, 1.03), "the board after restarts", 60)
    await assert_board_rebuilds(stack, tokens["curator"])


async def test_kill9_ingest_during_concurrent_pushes(stack, tokens, stubs, verifier_stopped):
    clones = [await clone_for(stack, tokens, stubs, f"kill-ingest-{i}") for i in range(3)]

    restarted = asyncio.Event()
    pushed: dict[str, list[float]] = {c.route: [] for c in clones}

    async def keep_pushing(clone: RouteClone) -> None:
        # Pushing the whole time, so that the kill lands on pushes in flight; two more after the restart.
        n = after = 0
        while after < 2:
            n += 1
            await push_with_retry(clone, stubs.ingest, 1 + n / 100)
            pushed[clone.route].append(1 + n / 100)
            after += restarted.is_set()

    pushing = [asyncio.create_task(keep_pushing(c)) for c in clones]
    await asyncio.sleep(1.5)
    stack.kill("ingest")
    await asyncio.sleep(1.0)
    stack.restart("ingest")
    restarted.set()
    await asyncio.wait_for(asyncio.gather(*pushing), 120)
    assert sum(c.failed_pushes for c in clones) > 0, "no push was in flight when ingest was killed"
    for clone in clones:
        last_score = pushed[clone.route][-1]
        await wait_for(lambda c=clone, s=last_score: board_shows(stubs, tokens, c.route, s), f"{clone.route} shown", 60)
    events = await assert_board_rebuilds(stack, tokens["curator"])
    # Each score reached the log exactly once per route, and the hosted refs are where the log says.
    for clone in clones:
        scores = [m.score for m in payloads(events, "metrics_reported") if m.route == clone.route]
        assert scores == pushed[clone.route], (clone.route, scores)
        last = [c.sha for c in payloads(events, "commit_ingested") if c.route == clone.route][-1]
        hosted = subprocess.run(
            ["git", "--git-dir", str(stack.home / "repo.git"), "rev-parse", clone.ref], capture_output=True, text=True
        )
        assert hosted.stdout.strip() == last == clone.base


async def _job_done(stubs, job_id, md):
    job = await stubs.scheduler.GetJob(scheduler_pb2.GetJobRequest(job_id=job_id), metadata=md)
    return job if job.result_sha else None


async def _checked(stack, sha: str) -> bool:
    return any(c.sha == sha for c in await events_of(stack, "check_completed"))


async def test_nats_restarted(stack, tokens, stubs, verifier_stopped):
    clone = await clone_for(stack, tokens, stubs, "nats-restart")
    await clone.push_metrics(stubs.ingest, 1.11)
    stack.nats.stop()
    await clone.push_metrics(stubs.ingest, 1.12)  # the log takes it; NATS is down
    await asyncio.sleep(2)
    stack.nats.start()  # same port, same JetStream store
    await clone.push_metrics(stubs.ingest, 1.13)
    await wait_for(lambda: board_shows(stubs, tokens, clone.route, 1.13), "the board after NATS came back", 60)
    await assert_board_rebuilds(stack, tokens["curator"])


async def test_postgres_restarted(stack, tokens, stubs, verifier_stopped):
    clone = await clone_for(stack, tokens, stubs, "pg-restart")
    await clone.push_metrics(stubs.ingest, 1.21)
    running = [name for name, proc in stack.procs.items() if proc.poll() is None]
    stack.postgres.stop("fast")
    # Refused while the log is down, as UNAVAILABLE naming the log, and nothing of it is half-written: the next push
    # starts from the hosted head.
    with pytest.raises(grpc.RpcError) as refused:
        await clone.push_metrics(stubs.ingest, 1.22)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value.details()
    assert refused.value.details().startswith("event log unavailable: "), refused.value.details()
    stack.postgres.start()
    await clone.sync(stubs.ingest)
    await push_with_retry(clone, stubs.ingest, 1.23)
    await wait_for(lambda: board_shows(stubs, tokens, clone.route, 1.23), "the board after PostgreSQL came back", 60)
    for name in running:
        assert stack.procs[name].poll() is None, f"{name} died with PostgreSQL:\n{stack.tail(name)}"
    await assert_board_rebuilds(stack, tokens["curator"])


DEAD_LETTER_DESCRIPTION = (
    "A handler failed on an event after its retries; the event is recorded as EventDeadLettered on the stream "
    "deadletter:faults-picky and the consumer moved on. Its effect is missing until someone handles it."
)


def assert_dead_letter_alert_fires(tmp, before: float, after: float) -> None:
    """The dead-letter gauge as this consumer moved it, through the operators' alert rules
    (deploy/prometheus/alerts.yml) with promtool: KernelboardDeadLetters fires for this consumer."""
    rules = ROOT / "deploy" / "prometheus" / "alerts.yml"
    if not rules.exists() or not shutil.which("promtool"):
        pytest.skip("deploy/prometheus/alerts.yml or promtool missing")
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'kb_consumer_dead_letters{job="faults", consumer="faults-picky"}',
                        "values": f"{before:g} {before:g} {after:g}x80",
                    }
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "3m",
                        "alertname": "KernelboardDeadLetters",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "consumer": "faults-picky"},
                                "exp_annotations": {
                                    "summary": f"Consumer faults-picky dead-lettered {after - before:g} events in the "
                                    "last hour",
                                    "description": DEAD_LETTER_DESCRIPTION,
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp / "deadletter_alert_test.yml"
    path.write_text(json.dumps(test))  # JSON is YAML
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _settings(stack) -> Settings:
    return Settings.from_env(stack.env())


async def test_consumer_slower_than_the_producer(stack, tokens, stubs, verifier_stopped):
    """A consumer that takes 0.6 s a new event falls behind a burst of pushes, holds nobody up (the board keeps pace),
    and ends having applied every event once, in log order."""
    log = await EventLog.connect(stack.database_url, migrate=False)
    seen: list[int] = []
    # Slow only for this test's burst: the earlier tests' metrics, caught up first, would otherwise take 0.6 s each
    # before the consumer follows the stream (the CI run that timed out waiting for it had enough of them).
    slow_after = await log.head_position()

    async def slow(conn, event):
        if event.global_position > slow_after:
            await asyncio.sleep(0.6)
        seen.append(event.global_position)

    slow_consumer = Consumer("faults-slow", log, _settings(stack), slow, types={"MetricsReported"})
    following = asyncio.create_task(slow_consumer.run())
    try:
        await asyncio.wait_for(slow_consumer.ready.wait(), 30)
        clone = await clone_for(stack, tokens, stubs, "slow-consumer")
        started = time.monotonic()
        for n in range(1, 13):
            await clone.push_metrics(stubs.ingest, 1 + n / 100)
        pushing_s = time.monotonic() - started
        await wait_for(lambda: board_shows(stubs, tokens, clone.route, 1.12), "the board keeping pace", 30, 0.2)
        had = len(seen)
        head = await log.head_position()
        await wait_for(lambda: slow_consumer.checkpoint >= head, "the slow consumer catching up", 120, 0.5)
        wanted = [e.global_position async for e in log.read_all(types={"MetricsReported"})]
        assert seen == wanted, "the slow consumer skipped, repeated or reordered events"
        assert had < len(wanted), f"the consumer was not slower: it had {had} of {len(wanted)} when the board had all"
        print(f"12 pushes in {pushing_s:.1f} s; the slow consumer had {had} of {len(wanted)} when the board had all")
    finally:
        await slow_consumer.stop()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await log.close()
    await assert_board_rebuilds(stack, tokens["curator"])


async def test_poisoned_event_is_dead_lettered_and_the_stream_moves_on(stack, tokens, stubs, verifier_stopped):
    log = await EventLog.connect(stack.database_url, migrate=False)
    poison_score = 6.66
    applied: list[float] = []

    async def picky(conn, event):
        if event.metrics_reported.score == poison_score:
            raise ValueError("this consumer cannot handle a score of 6.66")
        applied.append(event.metrics_reported.score)

    consumer = Consumer("faults-picky", log, _settings(stack), picky, types={"MetricsReported"}, retry_backoff_s=0.05)
    metric = ("kb_consumer_dead_letters", {"consumer": "faults-picky"})
    before = REGISTRY.get_sample_value(*metric) or 0.0
    following = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(consumer.ready.wait(), 30)
        clone = await clone_for(stack, tokens, stubs, "poisoned")
        for score in (1.31, poison_score, 1.33):
            await clone.push_metrics(stubs.ingest, score)
        await wait_for(lambda: 1.33 in applied, "the event after the poisoned one applied", 60, 0.2)
        assert poison_score not in applied and 1.31 in applied
        after = REGISTRY.get_sample_value(*metric) or 0.0
        assert after - before == 1.0
        assert_dead_letter_alert_fires(stack.root, before, after)
        letters = [e for e in await log.read_stream("deadletter:faults-picky")]
        assert len(letters) == 1 and "6.66" in letters[0].event_dead_lettered.error
        poisoned = [
            e for e in await read_log(stack.database_url) if e.event_id == letters[0].event_dead_lettered.event_id
        ]
        assert poisoned[0].metrics_reported.score == poison_score
        # The board (another consumer) handled the same event: it shows the poisoned score's successor.
        await wait_for(lambda: board_shows(stubs, tokens, "poisoned", 1.33), "the board past the poisoned event", 30)
    finally:
        await consumer.stop()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await log.close()
    await assert_board_rebuilds(stack, tokens["curator"])
