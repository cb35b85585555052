"""The git adapter: a commit exported into a job directory comes back as a result commit with its parent."""

import os
import shutil
import subprocess

import pytest
from kernelboard.v1 import events_pb2

from contracts import limits
from services.common.eventlog import check_event_size
from services.common.hostedgit import GitError
from services.scheduler.jobdir import HostedRepo, ResultRejected, irregular_entries


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

    result = await repo.commit_result(
        job_dir, sha, "1", "job 1: COMPLETED", max_file_bytes=1000, max_result_bytes=10_000
    )
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
        await repo.commit_result(tmp_path, "0" * 40, "2", "job 2", max_file_bytes=1000, max_result_bytes=10_000)


async def test_only_regular_files_of_the_directory_are_committed(hosted, tmp_path):
    """A job's symlink to a token, a hard link to a file outside, a FIFO and a nested .git never reach the commit;
    each is named in the excluded list."""
    repo, sha = hosted
    job_dir = tmp_path / "jobs" / "3"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    secret = tmp_path / "secret.token"
    secret.write_text("kb_secret\n")
    (job_dir / "token-link").symlink_to(secret)
    (job_dir / "routes" / "fast" / "job.sbatch").unlink()
    (job_dir / "routes" / "fast" / "job.sbatch").symlink_to("/etc/passwd")  # a link replacing a file
    os.link(secret, job_dir / "hard.txt")
    os.mkfifo(job_dir / "pipe")
    (job_dir / "sub").mkdir()
    (job_dir / "sub" / ".git").mkdir()
    (job_dir / "sub" / ".git" / "config").write_text("[core]\n")
    (job_dir / "sub" / "kept.txt").write_text("kept\n")
    (job_dir / "a.txt").write_text("a\n")
    os.link(job_dir / "a.txt", job_dir / "b.txt")  # both links inside: a plain file twice

    result = await repo.commit_result(job_dir, sha, "3", "job 3", max_file_bytes=1000, max_result_bytes=10_000)
    assert sorted(result.excluded) == [
        "hard.txt (a hard link to a file outside the job directory, not committed)",
        "pipe (a FIFO, not committed)",
        "routes/fast/job.sbatch (a symlink, not committed)",
        "sub/.git (a .git directory, not committed)",
        "token-link (a symlink, not committed)",
    ]
    bundle = tmp_path / "result.bundle"
    bundle.write_bytes(result.bundle)
    target = tmp_path / "copy.git"
    git("clone", "-q", "--bare", str(repo.git_dir), str(target))
    git("--git-dir", str(target), "fetch", "-q", str(bundle), "refs/jobs/3:refs/jobs/3")
    listing = git("--git-dir", str(target), "ls-tree", "-r", "refs/jobs/3")
    assert "120000" not in listing and "kb_secret" not in git("--git-dir", str(target), "log", "-p", "refs/jobs/3")
    files = sorted(line.split("\t")[1] for line in listing.splitlines())
    assert files == [".gitignore", "a.txt", "b.txt", "sub/kept.txt"]


async def test_a_result_over_the_limit_is_refused_whole(hosted, tmp_path):
    repo, sha = hosted
    job_dir = tmp_path / "jobs" / "4"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    for index in range(7):
        (job_dir / f"part{index}.bin").write_bytes(b"x" * 1_000_000)
    with pytest.raises(ResultRejected) as err:
        await repo.commit_result(job_dir, sha, "4", "job 4", max_file_bytes=2_000_000, max_result_bytes=6_400_000)
    assert str(err.value) == "result 7.0 MB is over the 6.4 MB limit; nothing committed"


async def test_a_directory_too_full_or_gone_is_refused_whole_not_retried(hosted, tmp_path):
    repo, sha = hosted
    job_dir = tmp_path / "jobs" / "5"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    nested = job_dir / "a" / "b" / "c"
    nested.mkdir(parents=True)
    assert irregular_entries(job_dir) == {}
    for index in range(1000):
        (nested / f"f{index}").write_text("x")
    with pytest.raises(ResultRejected, match="more than 1000 files and folders; nothing committed"):
        irregular_entries(job_dir, max_entries=1000)
    shutil.rmtree(job_dir)
    with pytest.raises(ResultRejected, match="is gone; nothing committed"):
        await repo.commit_result(job_dir, sha, "5", "job 5", max_file_bytes=1000, max_result_bytes=10_000)


async def test_thousands_of_left_out_files_are_summed_up_within_the_events_limit(hosted, tmp_path):
    """A job's result leaving out 3,000 files: the listing recorded in JobResultCommitted stays within that event
    field's limit (the log would refuse it, and the result would never be committed)."""
    repo, sha = hosted
    job_dir = tmp_path / "jobs" / "2"
    job_dir.mkdir(parents=True)
    await repo.export(sha, job_dir)
    for i in range(3000):
        (job_dir / f"trace-{i:05d}-{'x' * 40}.log").write_text("noise\n")
    result = await repo.commit_result(
        job_dir, sha, "2", "job 2: COMPLETED", max_file_bytes=1000, max_result_bytes=10_000_000
    )
    assert result.excluded[0] == f"trace-00000-{'x' * 40}.log (.gitignore)"
    assert result.excluded[-1].startswith("… and ") and result.excluded[-1].endswith(" more")
    kept = len(result.excluded) - 1
    assert result.excluded[-1] == f"… and {3000 - kept} more"
    event = events_pb2.JobResultCommitted(job_id="2", ref="refs/jobs/2", sha=result.sha, excluded=result.excluded)
    check_event_size("JobResultCommitted", event, event.ByteSize())
    assert sum(len(e.encode()) for e in result.excluded) <= limits.EVENT_FIELD_BYTES["JobResultCommitted.excluded"]
