"""Jobs are untrusted code: on the real Slurm they run as the job user, confined, judged before sbatch, and their
results are bounded and final (issue 14). Each attack here succeeded against the scheduler before it confined jobs.
"""

import asyncio
import os
import secrets
import subprocess
from pathlib import Path

import grpc
import pytest

from tests.common.waiting import eventually
from tests.scheduler.conftest import ROOT
from tests.support.scheduler import settled, show

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


@pytest.fixture
def root_secret():
    """A root-only (0600) file where a job could otherwise reach it: in the checkout the services run from."""
    path = ROOT / f".kb-test-secret-{secrets.token_hex(4)}"
    path.write_text("root-only secret\n")
    path.chmod(0o600)
    yield path
    path.unlink()


async def test_a_job_runs_as_the_job_user_and_reaches_no_secret(stack, root_secret):
    escape = f"/tmp/kb-escape-{secrets.token_hex(4)}"
    token = stack.home / "curator.token"
    checks = {
        "user": "id -un",
        "uid": "id -u",
        "root_file": f"cat {root_secret}",
        "token": f"cat {token}",
        "kb_home": f"ls -A {stack.home} | grep -q .",
        "repo": f"cat {stack.home}/repo.git/HEAD",
        "postgres_tcp": "exec 3<>/dev/tcp/127.0.0.1/5432",
        "postgres_socket": "test -S /run/postgresql/.s.PGSQL.5432",
        "other_jobs": f"ls -A {stack.jobs_root} | grep -q .",
        "write_outside": f"touch {escape}",
        "write_etc": "touch /etc/kb-escape",
        "environment": "env | grep -E 'KB_HOME|KB_DATABASE|TOKEN|SLURM_CONF'",
        "capabilities": "grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status | grep -qv '0000000000000000'",
        "no_new_privs": "grep -q '^NoNewPrivs:.1' /proc/self/status",
    }
    lines = "".join(f'if ({command}) >/dev/null 2>&1; then echo "{name}=yes"; else echo "{name}=no"; fi\n'
                    for name, command in checks.items())  # fmt: skip
    script = f"#!/bin/bash\n#SBATCH --time=1\n{{\n{lines}id -un\n}} > report.txt\n"
    sha = await stack.push_script("alice", "fast", "probe.sbatch", script)
    job = await stack.submit("alice", "fast", sha, "probe.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "finished with its result")
    assert (job.state, job.exit_code) == ("COMPLETED", 0)

    report = dict(line.split("=", 1) for line in show(stack, job.result_sha, "routes/fast/report.txt").split()[:-1])
    assert show(stack, job.result_sha, "routes/fast/report.txt").split()[-1] == "kb-job"
    assert report == {
        "user": "yes",
        "uid": "yes",
        "root_file": "no",
        "token": "no",
        "kb_home": "no",
        "repo": "no",
        "postgres_tcp": "no",
        "postgres_socket": "no",
        "other_jobs": "no",
        "write_outside": "yes",  # its own private /tmp, gone with it
        "write_etc": "no",
        "environment": "no",
        "capabilities": "no",
        "no_new_privs": "yes",
    }, report
    assert not os.path.exists(escape)

    # What Slurm itself recorded: the job ran as the job user (accounting shows the submitter, root, for a few
    # seconds after the end, then the job's user).
    async def recorded_user():
        command = ["sacct", "-X", "-P", "-n", "-j", job.job_id, "--format=User"]
        user = subprocess.check_output(command, text=True).strip()
        return user if user != "root" else None

    assert await eventually(recorded_user, "sacct's user of the job", 60, interval_s=2) == "kb-job"


async def test_a_job_sees_only_an_empty_kb_home_and_no_other_job(stack):
    first_sha = await stack.push_script("alice", "fast", "leave.sbatch", "#!/bin/bash\necho mine > mine.txt\n")
    first = await stack.submit("alice", "fast", first_sha, "leave.sbatch")
    first = await stack.wait_job(first.job_id, settled, 60, "finished")
    other_file = Path(first.work_dir) / "routes" / "fast" / "mine.txt"
    assert other_file.read_text() == "mine\n"
    script = f"#!/bin/bash\ncat {other_file} > stolen.txt 2>&1 || true\nls -A {stack.home} > kb_home.txt 2>&1 || true\n"
    sha = await stack.push_script("alice", "fast", "peek.sbatch", script)
    job = await stack.submit("alice", "fast", sha, "peek.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "finished")
    assert "No such file or directory" in show(stack, job.result_sha, "routes/fast/stolen.txt")
    assert "No such file or directory" in show(stack, job.result_sha, "routes/fast/kb_home.txt")


@pytest.mark.parametrize(
    "directive, named, rule",
    [
        ("--uid=0", "--uid", "job user"),
        ("--gid=0", "--gid", "job user"),
        ("--output=/tmp/kb-out-%j", "--output=/tmp/kb-out-%j", "inside the job directory"),
        ("-o /tmp/kb-out-%j", "--output=/tmp/kb-out-%j", "inside the job directory"),
        ("--error=../../e.txt", "--error=../../e.txt", "inside the job directory"),
        ("--chdir=/tmp", "--chdir=/tmp", "inside the job directory"),
        ("--array=1-3", "--array=1-3", "allows no job arrays"),
        ("-a 1-3", "--array=1-3", "allows no job arrays"),
        ("--export=ALL", "--export", "environment"),
        ("--get-user-env", "--get-user-env", "environment"),
        ("--out=/tmp/x", "--out", "abbreviation of --output"),
        ("--mem-per=100", "--mem-per", "ambiguous abbreviation"),
        ("--exclusive", "--exclusive", "not among the options"),
        ("--nice=-10", "--nice", "not among the options"),
    ],
)
async def test_each_refused_option_names_itself_and_the_rule(stack, directive, named, rule):
    name = f"opt-{secrets.token_hex(3)}.sbatch"
    sha = await stack.push_script("alice", "fast", name, f"#!/bin/bash\n#SBATCH {directive}\ntouch ran.txt\n")
    submitted_before = len([e async for e in stack.log.read_all(types={"JobSubmitted"})])
    dirs_before = sorted(stack.jobs_root.iterdir())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stack.submit("alice", "fast", sha, name)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert named in err.value.details() and rule in err.value.details(), err.value.details()
    assert sorted(stack.jobs_root.iterdir()) == dirs_before
    assert len([e async for e in stack.log.read_all(types={"JobSubmitted"})]) == submitted_before


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("crlf.sbatch", b"#!/bin/bash\r\necho hi\r\n", "CRLF"),
        ("binary.sbatch", b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
        ("empty.sbatch", b"", "empty"),
        ("noshebang.sbatch", b"echo hi\n", "#!"),
        ("folder", None, "is a directory"),
    ],
)
async def test_bad_scripts_are_refused_clearly_not_unavailable(stack, name, content, words):
    clone = stack.clones["fast"]
    target = clone / "routes" / "fast" / name
    if content is None:
        target.mkdir(exist_ok=True)
        (target / "inside.sh").write_text("#!/bin/bash\ntrue\n")
        sha = await stack.push_script("alice", "fast", "placeholder.txt", secrets.token_hex(4))
    else:
        target.write_bytes(content)
        sha = await stack.push_script("alice", "fast", "placeholder.txt", secrets.token_hex(4))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stack.submit("alice", "fast", sha, name)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.value.code(), err.value.details())
    assert words in err.value.details()


async def test_links_fifos_and_devices_stay_out_of_the_result(stack):
    script = (
        "#!/bin/bash\n"
        f"ln -s {stack.home}/curator.token token-link\n"
        "ln -s /etc/passwd passwd-link\n"
        "mkfifo pipe\n"
        "echo kept > kept.txt\n"
    )
    sha = await stack.push_script("alice", "fast", "links.sbatch", script)
    job = await stack.submit("alice", "fast", sha, "links.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "finished with its result")
    assert job.result_sha and not job.result_error
    assert {
        "routes/fast/passwd-link (a symlink, not committed)",
        "routes/fast/pipe (a FIFO, not committed)",
        "routes/fast/token-link (a symlink, not committed)",
    } <= set(job.excluded)
    repo = str(stack.home / "repo.git")
    tree = subprocess.check_output(["git", "--git-dir", repo, "ls-tree", "-r", job.result_sha], text=True)
    assert "120000" not in tree and "token-link" not in tree and "routes/fast/kept.txt" in tree


async def test_a_result_over_the_limit_ends_the_job_with_a_reason_and_no_retry(stack):
    # The stack's limits: 4096 bytes a file, 64 kB a result; 20 files of 4000 bytes are 80 kB.
    script = "#!/bin/bash\nfor i in $(seq 20); do head -c 4000 /dev/zero > part$i.bin; done\n"
    sha = await stack.push_script("alice", "fast", "big.sbatch", script)
    job = await stack.submit("alice", "fast", sha, "big.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "ended with its result refused")
    assert (job.state, job.result_sha, job.result_ref) == ("COMPLETED", "", "")
    assert job.result_error == "result 80 kB is over the 64 kB limit; nothing committed"
    version = (await stack.job_events(job.job_id))[-1].stream_version
    await asyncio.sleep(3)  # six polls: nothing is tried again
    events = await stack.job_events(job.job_id)
    assert events[-1].stream_version == version
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds.count("job_result_committed") == 1 and kinds[-1] == "job_result_committed"
    repo = str(stack.home / "repo.git")
    refs = subprocess.run(["git", "--git-dir", repo, "rev-parse", "--verify", "-q", f"refs/jobs/{job.job_id}"])
    assert refs.returncode != 0  # nothing committed


async def test_memory_over_the_request_is_killed_by_slurm_at_run_time(stack):
    script = (
        "#!/bin/bash\n#SBATCH --mem=100\n"
        "python3 -c 'import time; x = bytearray(400 << 20); [x.__setitem__(i, 1) for i in range(0, len(x), 4096)]; "
        "time.sleep(60)'\necho survived > survived.txt\n"
    )
    sha = await stack.push_script("alice", "fast", "hog.sbatch", script)
    job = await stack.submit("alice", "fast", sha, "hog.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "killed for its memory")
    # Without cgroups Slurm polls memory (JobAcctGatherParams=OverMemoryKill): FAILED by signal 9, or OUT_OF_MEMORY.
    assert job.state in {"FAILED", "OUT_OF_MEMORY"} and job.elapsed_s < 30, (job.state, job.signal, job.elapsed_s)
    assert "survived" not in subprocess.check_output(
        ["git", "--git-dir", str(stack.home / "repo.git"), "ls-tree", "-r", "--name-only", job.result_sha], text=True
    )


async def test_a_job_gets_only_the_cpus_it_asked_for(stack):
    """task/affinity binds the job to its allocation: without it a 1-CPU job ran on every CPU of the node."""
    sha = await stack.push_script(
        "alice", "fast", "cpus.sbatch", "#!/bin/bash\n#SBATCH --cpus-per-task=1\nnproc > cpus.txt\n"
    )
    job = await stack.submit("alice", "fast", sha, "cpus.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "finished")
    assert show(stack, job.result_sha, "routes/fast/cpus.txt") == "1\n"


async def test_chdir_and_output_inside_the_job_directory_are_honoured(stack):
    script = "#!/bin/bash\n#SBATCH --chdir=data --output=log-%j.txt\ncat input.txt > copied.txt\necho said\n"
    sha = await stack.push_script("alice", "fast", "placed.sbatch", script, {"data/input.txt": "in\n"})
    job = await stack.submit("alice", "fast", sha, "placed.sbatch")
    job = await stack.wait_job(job.job_id, settled, 60, "finished")
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert show(stack, job.result_sha, "routes/fast/data/copied.txt") == "in\n"
    assert show(stack, job.result_sha, f"routes/fast/data/log-{job.job_id}.txt") == "said\n"
