"""The git adapter: a commit exported into a job directory comes back as a result commit with its parent."""

import subprocess

import pytest
from kernelboard.v1 import events_pb2

from contracts import limits
from services.common.eventlog import check_event_size
from services.scheduler.jobdir import GitError, HostedRepo


def git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def hosted(tmp_path) -> tuple[HostedRepo, str]:
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", str(work))
    (work / "routes" / "fast").mkdir(parents=True)
    (work / "routes" / "fast" / "job.sbatch").write_text("#!/bin/bash\necho hi > out.txt\n")
    (work / ".gitignore").write_text("*.log\nscratch/\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "repo.git"))
    git("--git-dir", str(tmp_path / "repo.git"), "update-ref", "refs/heads/routes/fast", "main")
    return HostedRepo(tmp_path / "repo.git"), git("rev-parse", "HEAD", cwd=work)


async def test_result_commit_carries_the_directory_less_ignored_and_big_files(hosted, tmp_path):
    repo, sha = hosted
    assert await repo.resolve("refs/heads/routes/fast") == sha
    assert await repo.is_ancestor(sha, sha)
    assert (await repo.read_file(sha, "routes/fast/job.sbatch")).startswith(b"#!/bin/bash")
    assert await repo.read_file(sha, "missing.sbatch") is None

    job_dir = tmp_path / "jobs" / "1"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    assert (job_dir / "routes" / "fast" / "job.sbatch").exists() and not (job_dir / ".git").exists()

    (job_dir / "out.txt").write_text("hi\n")
    (job_dir / "run.log").write_text("noise\n")
    (job_dir / "scratch").mkdir()
    (job_dir / "scratch" / "tmp.bin").write_bytes(b"x" * 10)
    (job_dir / "big.bin").write_bytes(b"y" * 2000)
    (job_dir / "routes" / "fast" / "job.sbatch").write_bytes(b"z" * 3000)  # grew past the limit: keeps the old one

    result = await repo.commit_result(job_dir, sha, "1", "job 1: COMPLETED", max_file_bytes=1000)
    assert sorted(result.excluded) == [
        "big.bin (2000 bytes, over the 1000-byte limit)",
        "routes/fast/job.sbatch (3000 bytes, over the 1000-byte limit)",
        "run.log (.gitignore)",
        "scratch/ (.gitignore)",
    ]

    # The bundle lands in a copy of the hosted repository as ingest would take it.
    bundle = tmp_path / "result.bundle"
    bundle.write_bytes(result.bundle)
    target = tmp_path / "copy.git"
    git("clone", "-q", "--bare", str(repo.git_dir), str(target))
    git("--git-dir", str(target), "fetch", "-q", str(bundle), "refs/jobs/1:refs/jobs/1")
    assert git("--git-dir", str(target), "rev-parse", "refs/jobs/1") == result.sha
    assert git("--git-dir", str(target), "rev-parse", "refs/jobs/1^") == sha
    files = git("--git-dir", str(target), "ls-tree", "-r", "--name-only", "refs/jobs/1").splitlines()
    assert sorted(files) == [".gitignore", "out.txt", "routes/fast/job.sbatch"]
    assert git("--git-dir", str(target), "show", "refs/jobs/1:out.txt") == "hi"
    assert git("--git-dir", str(target), "log", "-1", "--format=%an", "refs/jobs/1") == "system:scheduler"
    assert result.files == 3


async def test_an_unknown_parent_is_an_error(hosted, tmp_path):
    repo, _ = hosted
    with pytest.raises(GitError):
        await repo.commit_result(tmp_path, "0" * 40, "2", "job 2", max_file_bytes=1000)


async def test_thousands_of_left_out_files_are_summed_up_within_the_events_limit(hosted, tmp_path):
    """A job's result leaving out 3,000 files: the listing recorded in JobResultCommitted stays within that event
    field's limit (the log would refuse it, and the result would never be committed)."""
    repo, sha = hosted
    job_dir = tmp_path / "jobs" / "2"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    for i in range(3000):
        (job_dir / f"trace-{i:05d}-{'x' * 40}.log").write_text("noise\n")
    result = await repo.commit_result(job_dir, sha, "2", "job 2: COMPLETED", max_file_bytes=1000)
    assert result.excluded[0] == f"trace-00000-{'x' * 40}.log (.gitignore)"
    assert result.excluded[-1].startswith("… and ") and result.excluded[-1].endswith(" more")
    kept = len(result.excluded) - 1
    assert result.excluded[-1] == f"… and {3000 - kept} more"
    event = events_pb2.JobResultCommitted(job_id="2", ref="refs/jobs/2", sha=result.sha, excluded=result.excluded)
    check_event_size("JobResultCommitted", event, event.ByteSize())
    assert sum(len(e.encode()) for e in result.excluded) <= limits.EVENT_FIELD_BYTES["JobResultCommitted.excluded"]
