"""The hosted repository: the bare git repository at ``$KB_HOME/repo.git`` that ingest alone writes (through
services/ingest/gitrepo.py, its writer face). Here: where it is, and its reader face, what the scheduler and the
verifier read from it -- a ref's commit, ancestry, a file, what a path is, a tree or part of it as plain files.

The reader runs git's command line, one process a call, with no terminal prompt and the C locale. Anything a caller
names is passed after the options, so a name cannot become an option. tests/common/test_hostedgit.py holds the
reader and ingest's writer to the same answers.
"""

import asyncio
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO_DIR = "repo.git"  # under KB_HOME


def location(home: Path) -> Path:
    """The hosted repository of a KB_HOME."""
    return Path(home) / REPO_DIR


class GitError(Exception):
    """A git command failed or did not answer in time; the message names the command and git's own words."""


async def run_git(*args: str, env: dict | None = None, stdin: bytes | None = None, timeout_s: float = 60) -> bytes:
    """``git *args``'s standard output, or GitError."""
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **(env or {})},
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


@dataclass(frozen=True)
class Entry:
    """What a path is in a commit's tree: git's mode (``100644``, ``100755``, ``120000``, ``040000``, ``160000``)
    and kind (``blob``, ``tree``, ``commit`` for a submodule)."""

    mode: str
    kind: str

    @property
    def is_regular_file(self) -> bool:
        return self.mode in ("100644", "100755")


class HostedRepoReader:
    """The hosted repository, read only."""

    def __init__(self, git_dir: Path):
        self.git_dir = Path(git_dir)

    async def _git(self, *args: str, timeout_s: float = 60) -> bytes:
        return await run_git("--git-dir", str(self.git_dir), *args, timeout_s=timeout_s)

    async def resolve(self, ref: str) -> str | None:
        """The commit a ref (or a commit id) names; None when it names none."""
        try:
            return (await self._git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}")).decode().strip()
        except GitError:
            return None

    async def is_ancestor(self, sha: str, of: str) -> bool:
        """Whether commit ``sha`` is ``of`` or one of its ancestors (False when either is missing)."""
        try:
            await self._git("merge-base", "--is-ancestor", sha, of)
        except GitError:
            return False
        return True

    async def read_file(self, sha: str, path: str) -> bytes | None:
        """The bytes of the file at ``path`` in commit ``sha``; None when there is none (a folder is no file)."""
        try:
            return await self._git("cat-file", "blob", f"{sha}:{path}")
        except GitError:
            return None

    async def entry(self, sha: str, path: str) -> Entry | None:
        """What ``path`` is in commit ``sha``; None when nothing is there (or no such commit)."""
        try:
            listing = await self._git("ls-tree", "-z", sha, "--", path)
        except GitError:
            return None
        line = listing.split(b"\0", 1)[0].decode(errors="replace")
        if not line:
            return None
        mode, kind, _ = line.split(" ", 2)
        return Entry(mode, kind)

    async def archive(self, commit: str, *pathspec: str, max_bytes: int | None = None) -> bytes | None:
        """``git archive`` (tar) of the commit, or of the paths ``pathspec`` names in it; None when they name
        nothing; GitError for a missing commit or an archive over ``max_bytes``."""
        try:
            out = await self._git("archive", "--format=tar", f"{commit}^{{commit}}", "--", *pathspec, timeout_s=120)
        except GitError as err:
            if "did not match any files" in str(err):
                return None
            raise
        if max_bytes is not None and len(out) > max_bytes:
            raise GitError(f"commit {commit[:12]}: {' '.join(pathspec) or 'its tree'} is over {max_bytes} bytes")
        return out

    async def export(self, commit: str, dest: Path, *pathspec: str, max_bytes: int | None = None) -> bool:
        """The commit's tree (or the part ``pathspec`` names) as plain files in ``dest``, with no .git: whoever
        works there cannot touch the hosted repository. False when ``pathspec`` names nothing."""
        archive = await self.archive(commit, *pathspec, max_bytes=max_bytes)
        if archive is None:
            return False
        await asyncio.to_thread(extract, archive, Path(dest))
        return True


def extract(archive: bytes, dest: Path) -> None:
    """A tar archive into ``dest``; the "data" filter refuses absolute paths, paths leaving dest and links pointing
    outside it."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as err:
        raise GitError(f"cannot unpack the archive: {err}") from err
