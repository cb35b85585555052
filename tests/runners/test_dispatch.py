"""The verifier dispatches, Slurm runs, on the real local Slurm's runners (runner1..3): one job per check on the
runners' partition, three at once on three nodes, the node and Slurm's cost in the result; a runner lost mid-check
(scancel, node DOWN) runs the check again elsewhere and it lands once; a dispatcher that died finds its jobs again;
each fault ends in a clear state."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from contracts import results, runners
from services.common.config import Settings
from services.common.slurm import Slurm
from services.verifier.api import to_proto
from services.verifier.dispatch import RUNNERS, SLURM_ERRORS, DispatchConfig
from services.verifier.intake import Intake
from tests.runners.runs import approve, check, dispatcher, drive, finished, jobs_named, push, worker_config
from tests.verifier.conftest import REPO, approve_rules, metrics_script, project_rules, rules_with_checks

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(330)]


async def test_three_runners_run_three_checks_at_once(log, queue, repo, home, slurm_conf):
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 6"))
    checks = [c for owner in ("a", "b", "c") for c in await push(log, queue, repo, rules_sha, owner=owner)]
    dispatch = dispatcher(queue, home, slurm_conf)
    seen_at_once = set()

    async def watch(_):
        rows = [await queue.get(c) for c in checks]
        running = {r.runner_node for r in rows if r.state == "running" and r.runner_node}
        for row in rows:  # what kb checks and the web show of it: the node it runs on
            if row.state == "running" and row.runner_node:
                label = results.live_verdict(to_proto(row)).label
                assert label == f"running on {row.runner_node} (Slurm job {row.slurm_job_id})"
        if len(running) > len(seen_at_once):
            seen_at_once.clear()
            seen_at_once.update(running)

    started = time.monotonic()
    await drive(dispatch, lambda: finished(queue, checks), 90, during=watch)
    wall = time.monotonic() - started
    assert seen_at_once == {"runner1", "runner2", "runner3"}  # all three running at one moment, one a node
    rows = [await queue.get(c) for c in checks]
    assert [r.state for r in rows] == ["passed"] * 3, [r.result.reasons for r in rows]
    assert {r.result.verifier_host for r in rows} == {"runner1", "runner2", "runner3"}
    assert all(r.result.attempts == 1 and r.result.cost >= 6 for r in rows)  # Slurm's elapsed, not the script's 0.25
    assert wall < 6 * 3, f"three 6 s checks took {wall:.1f} s: not at once"
    for row in rows:  # one Slurm job each, named after the check and its attempt
        assert len(jobs_named(slurm_conf, runners.check_job_name(row.item.check_id, 1))) == 1


async def test_a_cancelled_runner_job_runs_again_elsewhere_and_lands_once(log, queue, repo, home, slurm_conf):
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 8"))
    [check_id] = await push(log, queue, repo, rules_sha)
    dispatch = dispatcher(queue, home, slurm_conf)
    killed = {}

    async def cancel_once(_):
        row = await queue.get(check_id)
        if not killed and row.state == "running" and row.runner_node:
            killed[row.runner_node] = row.slurm_job_id
            subprocess.run(["scancel", row.slurm_job_id], env={"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"},
                           check=True)  # fmt: skip

    await drive(dispatch, lambda: finished(queue, [check_id]), 120, during=cancel_once)
    row = await queue.get(check_id)
    assert killed and row.state == "passed" and row.result.attempts == 2
    assert len(await log.read_stream(f"check:{check_id}")) == 2  # CheckRequested, one CheckCompleted
    assert len(jobs_named(slurm_conf, runners.check_job_name(check_id, 1))) == 1
    assert len(jobs_named(slurm_conf, runners.check_job_name(check_id, 2))) == 1


async def test_a_runner_set_down_mid_check_runs_it_on_another(log, queue, repo, home, slurm_conf):
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 8"))
    [check_id] = await push(log, queue, repo, rules_sha)
    dispatch = dispatcher(queue, home, slurm_conf)
    downed = []
    env = {"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"}

    async def down_once(_):
        row = await queue.get(check_id)
        if not downed and row.state == "running" and row.runner_node:
            downed.append(row.runner_node)
            subprocess.run(["scontrol", "update", f"nodename={row.runner_node}", "state=down", "reason=kb-test"],
                           env=env, check=True)  # fmt: skip

    try:
        await drive(dispatch, lambda: finished(queue, [check_id]), 120, during=down_once)
    finally:
        for node in downed:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=env, check=False)
    row = await queue.get(check_id)
    assert downed and row.state == "passed" and row.result.attempts == 2, row.result.reasons
    assert row.result.verifier_host not in downed


async def test_a_dispatcher_that_died_mid_dispatch_is_followed_not_doubled(log, queue, repo, home, slurm_conf):
    """The first dispatcher submits both checks and dies; for one it had not even recorded the job id. The next
    finds both jobs (one by its name), submits nothing again, and each check lands once."""
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 3"))
    checks = await push(log, queue, repo, rules_sha, owner="a") + await push(log, queue, repo, rules_sha, owner="b")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that is no more: the first dispatcher's process, dead
    first = dispatcher(queue, home, slurm_conf, name=f"slurm:{dispatcher(queue, home, slurm_conf).host}:{gone.pid}")
    await first.cycle()
    rows = [await queue.get(c) for c in checks]
    assert all(r.state == "running" and r.slurm_job_id for r in rows)
    await log.pool.execute("UPDATE verifier_checks SET slurm_job_id = NULL WHERE check_id = $1", checks[0])

    second = dispatcher(queue, home, slurm_conf)
    await drive(second, lambda: finished(queue, checks), 90)
    for check_id in checks:
        row = await queue.get(check_id)
        assert row.state == "passed" and row.result.attempts == 1
        assert len(jobs_named(slurm_conf, runners.check_job_name(check_id, 1))) == 1
        assert not jobs_named(slurm_conf, runners.check_job_name(check_id, 2))


async def test_faults_end_in_clear_states(log, queue, repo, home, slurm_conf):
    """Slurm refuses the job (a time limit over the partition's): failed at once with Slurm's answer. A check that
    writes no metrics file: failed, saying so."""
    rules_sha = await approve(log, queue, repo, metrics_script(""), time_limit_s=3600)
    [refused] = await push(log, queue, repo, rules_sha)
    await approve(log, queue, repo, "#!/bin/bash\nexit 0\n")
    [silent] = await push(log, queue, repo, rules_sha)
    await drive(dispatcher(queue, home, slurm_conf), lambda: finished(queue, [refused, silent]), 90)
    row = await queue.get(refused)
    assert row.state == "failed" and row.result.reasons[0].startswith(
        "could not run: Slurm refused the check's job on partition runners: sbatch:"
    ), row.result.reasons
    row = await queue.get(silent)
    assert row.state == "failed" and "wrote no metrics file" in row.result.reasons[0], row.result.reasons


async def test_a_partition_the_cluster_lacks_fails_each_check_with_slurms_answer(log, queue, repo, home, slurm_conf):
    rules = rules_with_checks(check("checks/fast.sh", partition="ghost"))
    rules["limits"]["partitions"]["ghost"] = dict(rules["limits"]["partitions"]["runners"])
    rules_sha = await approve_rules(log, repo, rules, extra={"checks/fast.sh": metrics_script("")})
    async with log.pool.acquire() as conn, conn.transaction():
        await Intake(log, queue).handle(conn, (await log.read_stream("rules"))[-1])
    checks = await push(log, queue, repo, rules_sha) + await push(log, queue, repo, rules_sha)
    await drive(dispatcher(queue, home, slurm_conf), lambda: finished(queue, checks), 60)
    for check_id in checks:
        row = await queue.get(check_id)
        assert row.state == "failed" and "Slurm refused the check's job on partition ghost" in row.result.reasons[0]
        assert "invalid partition" in row.result.reasons[0].lower(), row.result.reasons


async def test_a_job_slurm_never_starts_is_run_again_then_fails_saying_why(log, queue, repo, home, slurm_conf):
    rules_sha = await approve(log, queue, repo, metrics_script(""))
    [check_id] = await push(log, queue, repo, rules_sha)
    env = {"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"}
    nodes = "runner[1-3]"
    subprocess.run(["scontrol", "update", f"nodename={nodes}", "state=drain", "reason=kb-test"], env=env, check=True)
    try:
        # slots: submit though no runner is up; a job pending past start_timeout_s is cancelled and run again.
        dispatch = dispatcher(queue, home, slurm_conf, slots=1, start_timeout_s=2)
        dispatch.worker = worker_config(home, max_attempts=2)
        await drive(dispatch, lambda: finished(queue, [check_id]), 60)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={nodes}", "state=resume"], env=env, check=False)
    row = await queue.get(check_id)
    assert row.state == "failed" and row.result.attempts == 2
    assert row.result.reasons[0].startswith("runner lost: 2 attempts on the runners, the last not started by Slurm")


async def test_an_unreachable_slurm_changes_nothing(log, queue, repo, home, tmp_path):
    rules_sha = await approve(log, queue, repo, metrics_script(""))
    [check_id] = await push(log, queue, repo, rules_sha)
    (tmp_path / "slurm.conf").write_text("ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n")
    before = SLURM_ERRORS.labels("sinfo", "unreachable")._value.get()
    dispatch = dispatcher(queue, home, str(tmp_path / "slurm.conf"))
    dispatch.slurm = Slurm(str(tmp_path / "slurm.conf"), timeout_s=10)
    await dispatch.cycle()
    assert (await queue.get(check_id)).state == "queued"
    assert SLURM_ERRORS.labels("sinfo", "unreachable")._value.get() == before + 1


async def test_the_bundled_check_on_a_runner_is_judged_as_a_workers_is(log, queue, repo, home, slurm_conf):
    """checks/verify.sbatch and the real harness on a runner node (the CPU profile): the same sandbox, the
    candidate confined by the harness, the result as the verifier's own worker records it (tests/verifier)."""
    rules_commit = await approve_rules(log, repo, project_rules())
    async with log.pool.acquire() as conn, conn.transaction():
        await Intake(log, queue).handle(conn, (await log.read_stream("rules"))[-1])
    reference = {"new_gelu.py": (REPO / "tests/harness/routes/reference/new_gelu.py").read_text()}
    [check_id] = await push(log, queue, repo, rules_commit, files=reference)
    await drive(dispatcher(queue, home, slurm_conf, poll_s=2), lambda: finished(queue, [check_id]), 280)
    row = await queue.get(check_id)
    result = row.result
    assert row.state == "passed", list(result.reasons)
    assert (result.runner, result.check_name, result.rules_commit) == ("cpu", "verify", rules_commit)
    assert result.verifier_host.startswith("runner") and result.attempts == 1 and result.cost > 0
    [gelu] = [s for s in result.subtasks if s.id == "new_gelu"]
    assert gelu.submitted and gelu.passed and gelu.speedup > 0


async def test_an_idle_dispatcher_reports_the_runners_states(log, queue, repo, home, slurm_conf):
    await approve(log, queue, repo, metrics_script(""))
    dispatch = dispatcher(queue, home, slurm_conf)
    await dispatch.cycle()  # no check queued: the rules' runners' partition is reported all the same
    up = RUNNERS.labels("runners", "up")._value.get()
    down = RUNNERS.labels("runners", "down")._value.get()
    env = {"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"}
    sinfo = ["sinfo", "-h", "-N", "-p", "runners", "-o", "%T"]
    states = subprocess.run(sinfo, capture_output=True, text=True, env=env, check=True).stdout.split()
    assert up + down == len(states) == 3 and up == sum(state == "idle" for state in states)


def test_dispatching_without_a_cluster_named_refuses_to_start(home):
    if Path("/etc/slurm/slurm.conf").is_file():
        pytest.skip("this machine has a default slurm.conf")
    with pytest.raises(ValueError, match="needs the cluster's slurm.conf: set SLURM_CONF"):
        DispatchConfig.from_env(Settings(home=home), {})


async def test_a_runner_whose_slurmd_dies_loses_its_check_to_another(log, queue, repo, home, slurm_conf):
    """slurmd killed under a running check: Slurm marks the node DOWN (SlurmdTimeout, about a minute here) and the
    job NODE_FAIL; the check runs again on another node. up.sh brings the slurmd back."""
    state = Path(slurm_conf).parents[1]  # $KB_HOME/slurm
    rules_sha = await approve(log, queue, repo, metrics_script("sleep 60"), time_limit_s=120)
    [check_id] = await push(log, queue, repo, rules_sha)
    dispatch = dispatcher(queue, home, slurm_conf, poll_s=2)
    killed = []

    async def kill_its_slurmd(_):
        row = await queue.get(check_id)
        if not killed and row.state == "running" and row.runner_node:
            killed.append(row.runner_node)
            os.kill(int((state / "run" / f"slurmd-{row.runner_node}.pid").read_text()), signal.SIGTERM)

    try:
        await drive(dispatch, lambda: finished(queue, [check_id]), 280, during=kill_its_slurmd)
    finally:
        env = {**os.environ, "KB_HOME": str(state.parent)}
        subprocess.run(["bash", str(REPO / "deploy/local/slurm/up.sh")], env=env, capture_output=True, check=False)
    row = await queue.get(check_id)
    assert killed and row.state == "passed" and row.result.attempts == 2, list(row.result.reasons)
    assert row.result.verifier_host not in killed
