"""Read side of the hosted repository (the bare git repository at $KB_HOME/repo.git that ingest owns).

A check's working copy is built from two commits: the judge -- everything of the RULES commit (scienceslack.json,
checks/, kernels/problems/, ...) except routes/ -- and the judged -- routes/<route>/ of the checked commit, nothing
else of it. So neither a route commit nor a job's result commit can change the check script, the rules or the
reference problems that judge it.
"""

import asyncio
import io
import os
import tarfile
from pathlib import Path

from contracts import names

# A route folder or a rules commit larger than this is not a kernel submission.
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024


class RepoError(Exception):
    """The working copy cannot be built (a commit missing from the hosted repository, a bad name)."""


class HostedRepoReader:
    def __init__(self, git_dir: Path):
        self.git_dir = Path(git_dir)

    async def _archive(self, commit: str, *pathspec: str) -> bytes | None:
        """`git archive` of the commit (limited to pathspec); None when the pathspec matches nothing."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        proc = await asyncio.create_subprocess_exec(
            "git",
            f"--git-dir={self.git_dir}",
            "archive",
            "--format=tar",
            f"{commit}^{{commit}}",
            "--",
            *pathspec,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            message = err.decode("utf-8", "replace").strip()
            if "did not match any files" in message:
                return None
            raise RepoError(f"git archive {commit[:12]} failed: {message}")
        if len(out) > MAX_ARCHIVE_BYTES:
            raise RepoError(f"commit {commit[:12]}: {' '.join(pathspec)} is over {MAX_ARCHIVE_BYTES} bytes")
        return out

    async def export(self, rules_commit: str, sha: str, route: str, dest: Path) -> Path:
        """Builds the working copy in dest (empty); returns the route's folder in it (which may not exist)."""
        for name, commit in (("rules commit", rules_commit), ("commit", sha)):
            if not names.OBJECT_ID.matches(commit):
                raise RepoError(f"{name} {commit!r} is not a full 40-character commit id")
        if not names.is_route(route):
            raise RepoError(f"route name {route!r} is not valid")
        judge = await self._archive(rules_commit, ".", ":(exclude)routes")
        if judge is None:
            raise RepoError(f"rules commit {rules_commit[:12]} is empty")
        judged = await self._archive(sha, names.route_dir(route))
        await asyncio.to_thread(_extract, judge, dest)
        if judged is not None:
            await asyncio.to_thread(_extract, judged, dest)
        # The reference problems are imported as the package `kernels.problems` from the working copy; without this
        # marker `kernels` would be a namespace package that the verifier's own installed copy shadows.
        marker = dest / "kernels" / "__init__.py"
        if marker.parent.is_dir() and not marker.exists():
            marker.write_text("")
        return dest / "routes" / route


def _extract(archive: bytes, dest: Path) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            # The "data" filter refuses absolute paths, paths leaving dest and links pointing outside it.
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as err:
        raise RepoError(f"cannot unpack the working copy: {err}") from err
