"""Adapter: git. A job's commit is exported into its job directory; on its end the directory becomes a commit.

The hosted repository is only read (git archive, cat-file, merge-base). The result commit is built in a scratch
repository that borrows the hosted one's objects (alternates) and leaves as a bundle for Ingest.Push, so that ingest
stays the only writer of the hosted repository.
"""

import hashlib
import os
import pwd
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from contracts import limits, names
from services.common.hostedgit import HostedRepoReader, run_git
from services.scheduler.directives import DirectiveError


class ScriptError(ValueError):
    """The named path is not a job script the scheduler can run (a directory, a symlink, a submodule)."""


class ResultRejected(Exception):
    """The job's directory cannot become a result (over the result limit): final, never retried."""


@dataclass(frozen=True)
class ResultCommit:
    sha: str
    bundle: bytes
    files: int
    bytes: int
    excluded: list[str] = field(default_factory=list)


class HostedRepo(HostedRepoReader):
    """The hosted repository as the scheduler reads it (services/common/hostedgit.py), and the scratch repository a
    job's result commit is built in."""

    async def read_script(self, sha: str, path: str) -> bytes | None:
        """The bytes of a regular file at path in the commit; None when there is nothing there; ScriptError when
        it is a directory, a symlink or a submodule."""
        entry = await self.entry(sha, path)
        if entry is None:
            return None
        if entry.kind == "tree":
            raise ScriptError(f"{path} is a directory; give the script file in it")
        if not entry.is_regular_file:
            what = {"120000": "a symlink", "160000": "a submodule"}.get(entry.mode, f"mode {entry.mode}")
            raise ScriptError(f"{path} is {what}, not a regular file")
        return await self.read_file(sha, path)

    async def commit_result(
        self,
        work_dir: Path,
        parent: str,
        job_id: str,
        message: str,
        *,
        max_file_bytes: int,
        max_result_bytes: int,
        date: int | None = None,
    ) -> ResultCommit:
        """The job directory as a commit on top of parent: its regular files only (see `irregular_entries`), less
        .gitignore'd files and files over max_file_bytes; ResultRejected when what it adds exceeds
        max_result_bytes (nothing is committed then)."""
        if not work_dir.is_dir():
            raise ResultRejected(f"the job directory {work_dir} is gone; nothing committed")
        dropped = irregular_entries(work_dir)
        scratch = Path(tempfile.mkdtemp(prefix=f"kb-result-{job_id}-"))
        try:
            await run_git("init", "-q", "--bare", str(scratch))
            (scratch / "objects" / "info" / "alternates").write_text(str((self.git_dir / "objects").resolve()) + "\n")
            env = {
                "GIT_DIR": str(scratch),
                "GIT_WORK_TREE": str(work_dir),
                "GIT_INDEX_FILE": str(scratch / "index"),
                "GIT_LITERAL_PATHSPECS": "1",  # a path the job chose is a name, never a pattern
                "GIT_AUTHOR_NAME": names.SCHEDULER,
                "GIT_AUTHOR_EMAIL": "scheduler@kernelboard.local",
                "GIT_COMMITTER_NAME": names.SCHEDULER,
                "GIT_COMMITTER_EMAIL": "scheduler@kernelboard.local",
            }
            if date is not None:  # a fixed date: the same directory always gives the same commit
                env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{date} +0000"
            await run_git("read-tree", parent, env=env)
            await run_git("add", "-A", "--", ".", env=env, timeout_s=300)
            excluded = [f"{path} ({why}, not committed)" for path, why in dropped.items()]
            if dropped:
                # Out of the index whatever stands at those paths: a symlink replacing a file removes that file.
                pathspecs = "".join(f"{path}\0" for path in dropped).encode()
                await run_git(
                    "rm", "-q", "-r", "--cached", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul",
                    env=env, stdin=pathspecs,
                )  # fmt: skip
            added = 0
            changed = (
                await run_git("diff", "--cached", "--name-only", "-z", "--diff-filter=AM", parent, env=env)
            ).decode()
            for path in filter(None, changed.split("\0")):
                size = (work_dir / path).lstat().st_size
                if size > max_file_bytes:
                    await run_git("reset", "-q", parent, "--", path, env=env)
                    excluded.append(f"{path} ({size} bytes, over the {max_file_bytes}-byte limit)")
                else:
                    added += size
            if added > max_result_bytes:
                raise ResultRejected(
                    f"result {_megabytes(added)} is over the {_megabytes(max_result_bytes)} limit; nothing committed"
                )
            ignored = await run_git("ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", env=env)
            excluded.extend(f"{path} (.gitignore)" for path in filter(None, ignored.decode().split("\0")))
            tree = (await run_git("write-tree", env=env)).decode().strip()
            sha = (await run_git("commit-tree", tree, "-p", parent, "-m", message, env=env)).decode().strip()
            ref = names.job_ref(job_id)
            await run_git("update-ref", ref, sha, env=env)
            bundle_path = scratch / "result.bundle"
            await run_git("bundle", "create", "-q", str(bundle_path), ref, f"^{parent}", env=env, timeout_s=300)
            listing = (await run_git("ls-tree", "-r", "-l", "-z", tree, env=env)).decode()
            entries = [entry.split(None, 4) for entry in filter(None, listing.split("\0"))]
            total = sum(int(entry[3]) for entry in entries if entry[3].isdigit())
            return ResultCommit(
                sha=sha,
                bundle=bundle_path.read_bytes(),
                files=len(entries),
                bytes=total,
                # Recorded in JobResultCommitted: a job that leaves thousands of files out is summed up, not refused.
                excluded=limits.fit_list(sorted(excluded), limits.EVENT_FIELD_BYTES["JobResultCommitted.excluded"]),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _megabytes(size: int) -> str:
    if size >= 10e6:
        return f"{size / 1e6:.0f} MB"
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


MAX_RESULT_ENTRIES = 100_000  # files and folders a job directory may hold for its result to be read at all


def irregular_entries(work_dir: Path, max_entries: int = MAX_RESULT_ENTRIES) -> dict[str, str]:
    """Every entry of the job directory that is not a plain file of its own, by relative path, with what it is:
    symlinks (which would point the commit anywhere), FIFOs, sockets, devices, nested .git directories, and files
    hard-linked to something outside the directory (more links than the directory holds). Read with lstat only:
    nothing here follows a link. ResultRejected when the directory holds more than max_entries entries (walked
    without recursion: a job may nest folders as deep as it likes)."""
    dropped: dict[str, str] = {}
    files: dict[tuple[int, int], list[tuple[str, int]]] = {}
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}
    pending = [(str(work_dir), "")]
    seen = 0
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    raise ResultRejected(
                        f"the job directory holds more than {max_entries} files and folders; nothing committed"
                    )
                path = f"{prefix}{entry.name}"
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    dropped[path] = "a symlink"
                elif stat.S_ISDIR(info.st_mode):
                    if entry.name == ".git":
                        dropped[path] = "a .git directory"
                    else:
                        pending.append((entry.path, f"{path}/"))
                elif stat.S_ISREG(info.st_mode):
                    files.setdefault((info.st_dev, info.st_ino), []).append((path, info.st_nlink))
                else:
                    dropped[path] = next((kind for test, kind in kinds.items() if test(info.st_mode)), "not a file")
    for links in files.values():
        if links[0][1] > len(links):
            for path, _ in links:
                dropped[path] = "a hard link to a file outside the job directory"
    return dropped


def placement(work_dir: Path, folder: str, paths: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """Where the job starts (the script's folder, or its --chdir under it) and its --output/--error/--input as
    absolute paths, each checked to lie inside work_dir once symlinks in the exported commit are followed: Slurm
    opens them outside the sandbox. DirectiveError names the option that leads out."""
    root = work_dir.resolve()

    def inside(option: str, value: str, path: Path) -> Path:
        resolved = Path(os.path.realpath(path))
        if resolved != root and root not in resolved.parents:
            raise DirectiveError(f"#SBATCH --{option}={value}: leads outside the job directory (through a symlink)")
        return resolved

    chdir = inside("chdir", folder, work_dir / folder)
    if "chdir" in paths:
        chdir = inside("chdir", paths["chdir"], chdir / paths["chdir"])
        if not chdir.is_dir():
            raise DirectiveError(f"#SBATCH --chdir={paths['chdir']}: no such folder in the commit")
    placed = {}
    for option in ("output", "error", "input"):
        if option in paths:
            # %-patterns stay as they are (Slurm fills them in); only the folders on the way are resolved.
            target = chdir / paths[option]
            placed[option] = str(inside(option, paths[option], target.parent) / target.name)
    return chdir, placed


def hand_over(work_dir: Path, user: str) -> None:
    """The exported commit becomes the job user's (its only writable place); never following a link."""
    entry = pwd.getpwnam(user)
    for directory, folders, files in os.walk(work_dir):
        for name in [*folders, *files]:
            os.chown(os.path.join(directory, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    os.chown(work_dir, entry.pw_uid, entry.pw_gid)


def closed_folder(path: Path) -> Path | None:
    """The first folder from / down to path that others may not pass through (no o+x), or None."""
    for folder in [*reversed(path.resolve().parents), path.resolve()]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


def default_jobs_dir(home: Path) -> Path:
    """$KB_HOME/jobs when the job user may pass through every folder down to KB_HOME; else (a KB_HOME under /root,
    or in a private temporary folder) a folder of its own in /var/tmp, named after KB_HOME."""
    home.mkdir(parents=True, exist_ok=True)
    if closed_folder(home) is None:
        return home / "jobs"
    return Path("/var/tmp") / f"kernelboard-jobs-{hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]}"
