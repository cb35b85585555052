"""The sandbox a check runs in: its time limit kills the whole process group, it has no network (nor the host's
PostgreSQL socket), it sees the judge of the RULES commit and nothing of the deployment."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from kernelboard.v1 import events_pb2

from services.common.config import Settings
from services.common.eventlog import NewEvent
from services.common.mounts import Unconfinable
from services.common.sandbox import Sandbox, SandboxConfig, isolation_available, needed_by_checks
from services.verifier.intake import Intake
from services.verifier.worker import Worker, WorkerConfig
from tests.missing import missing_service
from tests.verifier.conftest import (
    CPU_SLOT,
    approve_rules,
    judge_files,
    metrics_script,
    push_route,
    route_name,
    rules_with_checks,
    worker_config,
)

pytestmark = pytest.mark.skipif(
    not isolation_available(), reason=missing_service("the check sandbox", "needs unshare: root or user namespaces")
)


def check(name: str, time_limit_s: int = 60) -> dict:
    return {"name": name, "script": f"checks/{name}.sh", "metrics": f"{name}.json", "time_limit_s": time_limit_s}


async def run_one(log, settings, queue):
    """Queues what the log holds and lets one worker run one check; returns that check's row."""
    async with log.pool.acquire() as conn:
        async for event in log.read_all(types={"RulesApproved", "CommitIngested"}):
            async with conn.transaction():
                await Intake(log, queue).handle(conn, event)
    worker = Worker(queue, worker_config(settings), CPU_SLOT, name="sandbox-test")
    assert await worker.run_once()
    [row] = [r for r in await queue.search() if r.state in ("passed", "failed")]
    return row


def no_process_with(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1


async def test_a_check_over_its_time_limit_is_killed_with_everything_it_started(log, settings, queue, repo):
    marker = "sleep 4242.5"
    script = metrics_script(f"{marker} &\n{marker}")
    rules_commit = await approve_rules(
        log, repo, rules_with_checks(check("slow", time_limit_s=2)), extra={"checks/slow.sh": script}
    )
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    started = time.monotonic()
    row = await run_one(log, settings, queue)
    assert time.monotonic() - started < 30
    assert row.state == "failed"
    assert row.result.reasons == ["time limit: the check ran past 2 s and was killed"]
    assert 2 <= row.result.duration_s < 10
    assert no_process_with(marker), "a process the check started outlived its time limit"


NETWORK_PROBE = """
probe() {
  "$KB_PYTHON" - "$@" <<'PY'
import socket, sys
kind, where = sys.argv[1], sys.argv[2]
try:
    if kind == "tcp":
        socket.create_connection((where, 5432), timeout=3).close()
    else:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(where); s.close()
except OSError as err:
    print(f"{kind} {where}: {err.strerror}")
    sys.exit(1)
print(f"{kind} {where}: connected")
PY
}
reached=()
seen=()
tcp="$(probe tcp 127.0.0.1)" && reached+=("tcp 127.0.0.1:5432")
unix="$(probe unix /run/postgresql/.s.PGSQL.5432)" && reached+=("unix socket of PostgreSQL")
seen+=("$tcp" "$unix")
[ -e "$HIDDEN/repo.git" ] && reached+=("KB_HOME")
touch "$RULES_FILE" 2>/dev/null && reached+=("wrote outside its box")
if [ ${#reached[@]} -gt 0 ]; then
  printf '{"score": 0, "cost": 0, "subtasks": [], "passed": false, "reasons": [' > "$2"
  printf '"%s",' "${reached[@]}" | sed 's/,$//' >> "$2"
  printf ']}' >> "$2"
  exit 1
fi
printf '{"score": 1, "cost": 0, "subtasks": [], "passed": true, "not_verified_because": [' > "$2"
printf '"%s",' "${seen[@]}" | sed 's/,$//' >> "$2"
printf ']}' >> "$2"
exit 0
"""


async def test_the_sandbox_has_no_network_no_database_socket_and_a_read_only_host(log, settings, queue, repo):
    rules_file = repo.git_dir / "HEAD"  # any host file: the check must not be able to touch it
    probe = f'HIDDEN="{settings.home}"\nRULES_FILE="{rules_file}"\n' + NETWORK_PROBE
    script = "#!/usr/bin/env bash\n" + probe

    # Outside the sandbox the same script reaches PostgreSQL: the probe itself works.
    outside = settings.home / "outside"
    outside.mkdir()
    (outside / "probe.sh").write_text(script)
    done = subprocess.run(
        ["bash", "probe.sh", ".", str(outside / "m.json")],
        cwd=outside,
        env={**os.environ, "KB_PYTHON": "python3"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tcp 127.0.0.1:5432" in json.loads((outside / "m.json").read_text())["reasons"]

    rules_commit = await approve_rules(log, repo, rules_with_checks(check("probe")), extra={"checks/probe.sh": script})
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    row = await run_one(log, settings, queue)
    assert row.state == "passed", list(row.result.reasons)
    # The probes did run, and failed for the sandbox's reasons.
    assert list(row.result.not_verified_because) == [
        "tcp 127.0.0.1: Network is unreachable",
        "unix /run/postgresql/.s.PGSQL.5432: No such file or directory",
    ]


JUDGE = """
test -f "routes/$ROUTE/new_gelu.py" || { echo "the route's folder is missing"; exit 2; }
test -f "routes/$ROUTE/notes.txt" && { echo "only routes/<route>/*.py expected here"; }
test -e kernels/problems/new_gelu.py || { echo "the reference problems are missing"; exit 2; }
grep -q '"judge-from-rules"' scienceslack.json || { echo "scienceslack.json is not the rules commit's"; exit 2; }
test -e routes/other || test -e injected.py && { echo "the job commit's other files leaked in"; exit 2; }
printf '{"score": 0, "cost": 0, "subtasks": [], "passed": false, "reasons": ["judged by the rules commit"]}' > "$2"
exit 1
"""


async def test_the_judge_comes_from_the_rules_commit_never_from_the_checked_commit(log, settings, queue, repo):
    route = route_name()
    rules = rules_with_checks(check("judge"))
    rules["benchmark"]["task"] = "judge-from-rules"
    rules_commit = await approve_rules(
        log, repo, rules, extra={"checks/judge.sh": f'ROUTE="{route}"\n' + JUDGE.lstrip()}
    )
    # A job's result commit can hold anything: its own check script and rules that would pass it, other files.
    forged = {
        **judge_files(rules_with_checks(check("judge"))),
        "checks/judge.sh": metrics_script("true"),
        "injected.py": "raise SystemExit('imported')\n",
        f"routes/{route}/new_gelu.py": "ModelNew = None\n",
        "routes/other/new_gelu.py": "",
    }
    sha = repo.commit(forged, "refs/jobs/9", parent=rules_commit)
    await log.append(
        "job:9", None, [NewEvent(events_pb2.JobSubmitted(job_id="9", route=route), actor="system:scheduler")]
    )
    job = events_pb2.CommitIngested(ref="refs/jobs/9", sha=sha, kind=events_pb2.COMMIT_KIND_JOB, job_id="9")
    await log.append("job:9", None, [NewEvent(job, actor="system:scheduler")])
    row = await run_one(log, settings, queue)
    assert (row.state, list(row.result.reasons)) == ("failed", ["judged by the rules commit"])


async def test_a_commit_missing_from_the_hosted_repository_could_not_run(log, settings, queue, repo):
    rules_commit = await approve_rules(
        log, repo, rules_with_checks(check("quick")), extra={"checks/quick.sh": metrics_script("")}
    )
    ghost = events_pb2.CommitIngested(
        ref="refs/heads/routes/ghost", sha="9" * 40, parent=rules_commit, kind=events_pb2.COMMIT_KIND_ROUTE
    )
    ghost.route = "ghost"
    await log.append("route:ghost", None, [NewEvent(ghost, actor="alice")])
    row = await run_one(log, settings, queue)
    assert row.state == "failed"
    assert row.result.reasons[0].startswith("could not run: git archive 999999999999 failed")


async def test_a_metrics_file_that_is_a_symlink_is_not_followed(log, settings, queue, repo):
    secret = settings.home / "secret.json"
    secret.write_text('{"score": 99, "cost": 0, "subtasks": [], "passed": true}')
    script = f'#!/usr/bin/env bash\nln -s "{secret}" "$2"\nexit 0\n'
    rules_commit = await approve_rules(log, repo, rules_with_checks(check("link")), extra={"checks/link.sh": script})
    await push_route(log, repo, route_name(), {"new_gelu.py": ""}, rules_commit)
    row = await run_one(log, settings, queue)
    assert row.state == "failed" and row.result.score == 0
    assert "a check writes a plain file" in row.result.reasons[0]


async def test_the_python_and_project_under_a_hidden_tmp_stay_visible_read_only_and_kb_home_inside_stays_hidden(
    tmp_path,
):
    """A clone under /tmp (CI's, say) runs its checks with its own venv; its KB_HOME inside stays hidden."""
    project = Path(tempfile.mkdtemp(prefix="kb-visible-", dir="/tmp"))
    try:
        (project / "tool.txt").write_text("the harness\n")
        (project / ".state").mkdir()
        (project / ".state" / "curator.token").write_text("secret\n")
        sandbox = Sandbox(
            SandboxConfig(
                root=tmp_path / "boxes", isolate=True, hidden=(str(project / ".state"),), visible=(str(project),)
            )
        )
        box = sandbox.make_box("visible")
        (box.work / "probe.sh").write_text(
            f"""
set -u
cat {project}/tool.txt
test -e {project}/.state/curator.token && echo "token seen" || echo "token hidden"
touch {project}/written 2>/dev/null && echo "project writable" || echo "project read-only"
"""
        )
        outcome = await sandbox.run(box, ["bash", "probe.sh"], {"PATH": os.environ["PATH"]}, time_limit_s=30)
        assert outcome.exit_code == 0, outcome.output_tail
        assert "the harness" in outcome.output_tail
        assert "token hidden" in outcome.output_tail and "project read-only" in outcome.output_tail
        assert not (project / "written").exists()
    finally:
        shutil.rmtree(project, ignore_errors=True)


async def test_a_check_can_share_an_output_as_large_as_the_benchmarks_largest_through_a_memfd(settings, tmp_path):
    """The judge shares each output with its candidate through a memfd sized to the largest output of the problems
    judged (rms_norm's 7.5 GB at full shapes), and RLIMIT_FSIZE bounds memfds too: under the worker's file-size cap
    of 4 GiB every full-shape check on the H200 could not run (EFBIG; docs/decisions/0003)."""
    config = WorkerConfig.from_env(settings, {"KB_VERIFIER_SANDBOX_DIR": str(tmp_path), "KB_VERIFIER_DEVICE": "cpu"})
    sandbox = Sandbox(config.sandbox)
    box = sandbox.make_box("memfd")
    grow = "import os; fd = os.memfd_create('out'); os.ftruncate(fd, 8 << 30); print('grown')"  # sparse: no memory
    outcome = await sandbox.run(box, [sys.executable, "-c", grow], {"PATH": os.environ["PATH"]}, time_limit_s=30)
    assert outcome.exit_code == 0 and "grown" in outcome.output_tail, outcome.output_tail
    # Still bounded: the cap is raised to fit the judge's buffers, not removed.
    over = "import os; fd = os.memfd_create('out'); os.ftruncate(fd, 64 << 30)"
    outcome = await sandbox.run(box, [sys.executable, "-c", over], {"PATH": os.environ["PATH"]}, time_limit_s=30)
    assert outcome.exit_code != 0 and "File too large" in outcome.output_tail, outcome.output_tail


def test_the_verifier_refuses_to_start_where_kb_home_holds_the_project_its_checks_run(tmp_path):
    """Its checks could not see the project without seeing KB_HOME: it names the path rather than running them."""
    project = Path(needed_by_checks()[-1])
    env = {"KB_VERIFIER_SANDBOX_DIR": str(tmp_path), "KB_VERIFIER_DEVICE": "cpu"}
    with pytest.raises(Unconfinable, match=f"{project} is kept visible to run but lies inside {project.parent}"):
        WorkerConfig.from_env(Settings(home=project.parent), env)
