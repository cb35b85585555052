"""A check's working copy, read from the hosted repository (services/common/hostedgit.py, its reader face).

It is built from two commits: the judge -- everything of the RULES commit (scienceslack.json, checks/,
kernels/problems/, ...) except routes/ -- and the judged -- routes/<route>/ of the checked commit, nothing else of it.
So neither a route commit nor a job's result commit can change the check script, the rules or the reference problems
that judge it.
"""

from pathlib import Path

from contracts import names
from services.common.hostedgit import GitError, HostedRepoReader

# A route folder or a rules commit larger than this is not a kernel submission.
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024


class RepoError(Exception):
    """The working copy cannot be built (a commit missing from the hosted repository, a bad name)."""


class CheckCheckout:
    def __init__(self, git_dir: Path):
        self.repo = HostedRepoReader(git_dir)

    async def export(self, rules_commit: str, sha: str, route: str, dest: Path) -> Path:
        """Builds the working copy in dest (empty); returns the route's folder in it (which may not exist)."""
        for name, commit in (("rules commit", rules_commit), ("commit", sha)):
            if not names.OBJECT_ID.matches(commit):
                raise RepoError(f"{name} {commit!r} is not a full 40-character commit id")
        if not names.is_route(route):
            raise RepoError(f"route name {route!r} is not valid")
        if not await self._export(rules_commit, dest, ".", ":(exclude)routes"):
            raise RepoError(f"rules commit {rules_commit[:12]} is empty")
        await self._export(sha, dest, names.route_dir(route))
        # The reference problems are imported as the package `kernels.problems` from the working copy; without this
        # marker `kernels` would be a namespace package that the verifier's own installed copy shadows.
        marker = dest / "kernels" / "__init__.py"
        if marker.parent.is_dir() and not marker.exists():
            marker.write_text("")
        return dest / names.ROUTES_DIR / route

    async def _export(self, commit: str, dest: Path, *pathspec: str) -> bool:
        try:
            return await self.repo.export(commit, dest, *pathspec, max_bytes=MAX_ARCHIVE_BYTES)
        except GitError as err:
            raise RepoError(f"git archive {commit[:12]} failed: {err}") from None
