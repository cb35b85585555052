"""Adapter: git. A job's commit is exported into its job directory; on its end the directory becomes a commit.

The hosted repository is only read (git archive, cat-file, merge-base). The result commit is built in a scratch
repository that borrows the hosted one's objects (alternates) and leaves as a bundle for Ingest.Push, so that ingest
stays the only writer of the hosted repository.
"""

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from contracts import names


class GitError(Exception):
    pass


@dataclass(frozen=True)
class ResultCommit:
    sha: str
    bundle: bytes
    files: int
    bytes: int
    excluded: list[str] = field(default_factory=list)


async def _git(*args: str, env: dict | None = None, stdin: bytes | None = None, timeout_s: float = 60) -> bytes:
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(stdin), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise GitError(f"git {args[0]}: no answer within {timeout_s:.0f} s") from None
    if process.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])}: {stderr.decode(errors='replace').strip()}")
    return stdout


class HostedRepo:
    """Reads the hosted bare repository ($KB_HOME/repo.git, written by ingest)."""

    def __init__(self, git_dir: Path):
        self.git_dir = Path(git_dir)

    async def resolve(self, ref: str) -> str | None:
        try:
            return (
                (await _git("--git-dir", str(self.git_dir), "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"))
                .decode()
                .strip()
            )
        except GitError:
            return None

    async def is_ancestor(self, sha: str, ref_sha: str) -> bool:
        try:
            await _git("--git-dir", str(self.git_dir), "merge-base", "--is-ancestor", sha, ref_sha)
            return True
        except GitError:
            return False

    async def read_file(self, sha: str, path: str) -> bytes | None:
        try:
            return await _git("--git-dir", str(self.git_dir), "show", f"{sha}:{path}")
        except GitError:
            return None

    async def export(self, sha: str, dest: Path) -> None:
        """The commit's tree as plain files in dest (no .git: the job cannot touch the hosted repository)."""
        archive = await _git("--git-dir", str(self.git_dir), "archive", "--format=tar", sha, timeout_s=120)
        process = await asyncio.create_subprocess_exec(
            "tar", "-x", "-C", str(dest), stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await asyncio.wait_for(process.communicate(archive), 120)
        if process.returncode != 0:
            raise GitError(f"tar: {stderr.decode(errors='replace').strip()}")

    async def commit_result(
        self, work_dir: Path, parent: str, job_id: str, message: str, *, max_file_bytes: int, date: int | None = None
    ) -> ResultCommit:
        """The job directory as a commit on top of parent, less .gitignore'd files and files over max_file_bytes."""
        if not work_dir.is_dir():
            raise GitError(f"job directory {work_dir} is gone")
        scratch = Path(tempfile.mkdtemp(prefix=f"kb-job-{job_id}-"))
        try:
            await _git("init", "-q", "--bare", str(scratch))
            (scratch / "objects" / "info" / "alternates").write_text(str((self.git_dir / "objects").resolve()) + "\n")
            env = {
                "GIT_DIR": str(scratch),
                "GIT_WORK_TREE": str(work_dir),
                "GIT_INDEX_FILE": str(scratch / "index"),
                "GIT_AUTHOR_NAME": names.SCHEDULER,
                "GIT_AUTHOR_EMAIL": "scheduler@kernelboard.local",
                "GIT_COMMITTER_NAME": names.SCHEDULER,
                "GIT_COMMITTER_EMAIL": "scheduler@kernelboard.local",
            }
            if date is not None:  # a fixed date: the same directory always gives the same commit
                env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{date} +0000"
            await _git("read-tree", parent, env=env)
            await _git("add", "-A", "--", ".", env=env, timeout_s=300)
            excluded = []
            changed = (
                await _git("diff", "--cached", "--name-only", "-z", "--diff-filter=AM", parent, env=env)
            ).decode()
            for path in filter(None, changed.split("\0")):
                size = (work_dir / path).lstat().st_size
                if size > max_file_bytes:
                    await _git("reset", "-q", parent, "--", path, env=env)
                    excluded.append(f"{path} ({size} bytes, over the {max_file_bytes}-byte limit)")
            ignored = await _git("ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", env=env)
            excluded.extend(f"{path} (.gitignore)" for path in filter(None, ignored.decode().split("\0")))
            tree = (await _git("write-tree", env=env)).decode().strip()
            sha = (await _git("commit-tree", tree, "-p", parent, "-m", message, env=env)).decode().strip()
            ref = f"refs/jobs/{job_id}"
            await _git("update-ref", ref, sha, env=env)
            bundle_path = scratch / "result.bundle"
            await _git("bundle", "create", "-q", str(bundle_path), ref, f"^{parent}", env=env, timeout_s=300)
            listing = (await _git("ls-tree", "-r", "-l", "-z", tree, env=env)).decode()
            entries = [entry.split(None, 4) for entry in filter(None, listing.split("\0"))]
            total = sum(int(entry[3]) for entry in entries if entry[3].isdigit())
            return ResultCommit(
                sha=sha, bundle=bundle_path.read_bytes(), files=len(entries), bytes=total, excluded=sorted(excluded)
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
