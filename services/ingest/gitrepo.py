"""The hosted repository: a bare git repository, written through the git CLI and read through libgit2 (pygit2).

Writes use the git CLI (subprocess): a bundle is a header and a pack, and `git index-pack --fix-thin` indexes the
pack exactly as git does (as `git bundle unbundle` would, once the header's prerequisites are found); `git merge-tree
--write-tree` gives a real three-way merge; `git update-ref --stdin` moves refs in one transaction; and an
object-directory quarantine (quarantine.py) lets every check run on a pushed bundle before any of its objects enter
the repository. Reads use pygit2 in this process (gitobjects.Objects, which HostedRepo and Quarantine extend).

Postgres holds the truth for ref values (services/ingest/store.py); the git refs follow it (`write_refs`,
`reconcile`).
"""

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pygit2

from services.common.logs import get_logger
from services.ingest.domain import NewObject, parse_bundle_header
from services.ingest.gitobjects import GitError, Objects, author_env, run_git
from services.ingest.quarantine import Quarantine

log = get_logger()

MANAGED_NAMESPACES = ("refs/heads/", "refs/tags/", "refs/jobs/", "refs/pull/")
QUARANTINE_DIR = "kb-quarantine"
SPARE_QUARANTINES = 64
REPACK_AFTER_PACKS = 16


class MergeConflict(Exception):
    pass


class HostedRepo(Objects):
    def __init__(self, path: Path):
        super().__init__(Path(path))
        self.path = Path(path)
        self._spare_quarantines: list[Path] = []
        self._packs_since_repack = 0
        self._repacking: asyncio.Task | None = None

    async def init(self) -> None:
        if (self.path / "HEAD").exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            "git", "init", "--quiet", "--bare", "--initial-branch=main", str(self.path)
        )
        if await proc.wait() != 0:
            raise RuntimeError(f"git init --bare {self.path} failed")
        # Objects migrate in before their ref moves: never let an automatic gc prune them in that window.
        await self.git("config", "gc.auto", "0")

    def clear_quarantine(self, older_than_s: float = 3600) -> None:
        """Remove what pushes interrupted by a crash left in quarantine. Only old entries: another process on the
        same repository (the seed beside a running server) may be checking a push right now."""
        root = self.path / QUARANTINE_DIR
        if root.exists():
            for entry in root.iterdir():
                if time.time() - entry.stat().st_mtime > older_than_s:
                    shutil.rmtree(entry, ignore_errors=True)

    @asynccontextmanager
    async def quarantine(self, bundle: bytes, check_objects: Callable[[list[NewObject]], None] | None = None):
        """The bundle's objects in a quarantine of their own for the duration of the block: checked by git
        (FSCK_STRICT), then by ``check_objects`` (from their headers: types, sizes, paths) before anything reads
        them, and without the objects its tip does not reach."""
        directory = self._spare_quarantines.pop() if self._spare_quarantines else self._new_quarantine()
        os.utime(directory)  # in use: another process's clear_quarantine leaves it alone
        try:
            quarantine = Quarantine(self.path, directory)
            await quarantine.unbundle(parse_bundle_header(bundle), bundle)
            if check_objects is not None:
                check_objects(quarantine.new_objects)
            dropped = await quarantine.keep_only_reachable(self.objects_db.odb)
            if dropped:
                log.info("unreferenced pushed objects dropped", objects=dropped)
            yield quarantine
        finally:
            self._recycle_quarantine(directory)

    def repack_when_many_packs(self) -> None:
        """At start: a repository left with many packs is repacked in the background."""
        packs = len(list((self.path / "objects" / "pack").glob("*.pack")))
        self._packs_since_repack = packs
        self.migrated(None)

    def migrated(self, quarantine: "Quarantine | None") -> None:
        """Note the packs a quarantine brought in; every REPACK_AFTER_PACKS of them, roll small packs together in the
        background. Every push brings one pack, and an object lookup (git's and libgit2's) searches pack after pack:
        after a few thousand pushes that was most of a push's cost."""
        self._packs_since_repack += quarantine.packs_migrated if quarantine else 0
        if self._packs_since_repack >= REPACK_AFTER_PACKS and (self._repacking is None or self._repacking.done()):
            self._packs_since_repack = 0
            self._repacking = asyncio.create_task(self.repack(), name="git-repack")

    async def repack(self) -> None:
        """`git repack --geometric=2 -d`: merges the smallest packs until each is at least twice the size of the
        ones below it (cheap, as it rewrites mostly small packs). It packs every object of the packs it merges,
        referenced or not, so objects that migrated in for a push whose transaction is still running are kept."""
        started = time.monotonic()
        code, _, err = await self.git("repack", "--geometric=2", "-d", "-q", "--no-write-bitmap-index", check=False)
        if code != 0:
            log.warning("git repack failed; the packs stay as they are", error=err.strip())
        else:
            log.info("git repack done", seconds=round(time.monotonic() - started, 3))

    def _new_quarantine(self) -> Path:
        root = self.path / QUARANTINE_DIR
        root.mkdir(exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix=f"{uuid.uuid4().hex[:8]}-", dir=root))
        (directory / "objects" / "pack").mkdir(parents=True)
        return directory

    def _recycle_quarantine(self, directory: Path) -> None:
        """Empty the quarantine (what a refused push left) and keep it for the next push: on this disk, making and
        removing a quarantine's directories for every push cost more than checking the push. Anything but files in
        objects/pack, and it is removed instead."""
        pack = directory / "objects" / "pack"
        try:
            for entry in os.scandir(pack):
                os.unlink(entry.path)
            reusable = os.listdir(directory) == ["objects"] and os.listdir(directory / "objects") == ["pack"]
        except OSError:
            reusable = False
        if reusable and len(self._spare_quarantines) < SPARE_QUARANTINES:
            self._spare_quarantines.append(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)

    async def refs(self) -> dict[str, str]:
        out = await self.out("for-each-ref", "--format=%(refname) %(objectname)", *MANAGED_NAMESPACES)
        return dict(line.split(" ", 1) for line in out.splitlines())

    async def update_refs(self, updates: Sequence[tuple[str, str, str]]) -> None:
        """Move refs together: (ref, new, old) with ``old`` "" for a new ref and ``new`` "" to delete."""
        zero = "0" * 40
        lines = []
        for ref, new, old in updates:
            if new:
                lines.append(f"update {ref} {new} {old or zero}")
            else:
                lines.append(f"delete {ref} {old}")
        await self.git("update-ref", "--stdin", stdin=("\n".join(["start", *lines, "commit"]) + "\n").encode())

    async def write_refs(self, values: Mapping[str, str]) -> None:
        """Set refs to these values in one transaction, whatever they held before."""
        if values:
            lines = [f"update {ref} {sha}" for ref, sha in sorted(values.items())]
            await self.git("update-ref", "--stdin", stdin=("\n".join(["start", *lines, "commit"]) + "\n").encode())

    async def reconcile(self, truth: Mapping[str, str]) -> list[str]:
        """Make the git refs equal Postgres's: after a crash between the transaction and the git update, the ref
        moves to its recorded value; a git ref Postgres never recorded is removed. Returns the refs it changed."""
        actual = await self.refs()
        updates = [(ref, sha, actual.get(ref, "")) for ref, sha in truth.items() if actual.get(ref) != sha]
        updates += [(ref, "", sha) for ref, sha in actual.items() if ref not in truth]
        if updates:
            await self.update_refs(updates)
        return sorted(ref for ref, _, _ in updates)

    async def known_commits(self, shas: Sequence[str]) -> list[str]:
        """The commits among ``shas`` that this repository has (a caller's claims, checked)."""
        return [sha for sha in shas if isinstance(self._get(sha), pygit2.Commit)]

    async def create_bundle(self, refs: Sequence[str], exclude: Sequence[str] = ()) -> bytes:
        """A bundle of ``refs`` without what ``exclude`` reaches; empty when that leaves nothing to send."""
        args = ["bundle", "create", "--quiet", "-", *refs]
        if exclude:
            args += ["--not", *exclude]
        code, out, err = await self.git(*args, check=False)
        if code != 0 and "empty bundle" in err:
            return b""
        if code != 0:
            raise GitError(("bundle", "create"), code, err)
        return out

    async def commit_files(
        self, parent: str, files: Mapping[str, bytes], message: str, author: str, *, remove_prefix: str = ""
    ) -> str:
        """A new commit: ``parent``'s tree (none for a root commit) with ``files`` written (and, when
        ``remove_prefix`` is given, everything else under it removed)."""
        with tempfile.TemporaryDirectory() as tmp:
            index = Objects(self.path, {"GIT_INDEX_FILE": str(Path(tmp) / "index")})
            if parent:
                await index.git("read-tree", parent)
            if remove_prefix:
                await index.git("rm", "--cached", "-r", "--quiet", "--ignore-unmatch", "--", remove_prefix)
            entries = []
            for path, content in sorted(files.items()):
                oid = (await index.out("hash-object", "-w", "--stdin", stdin=content)).strip()
                entries.append(f"100644 {oid}\t{path}")
            if entries:
                await index.git("update-index", "--index-info", stdin=("\n".join(entries) + "\n").encode())
            tree = (await index.out("write-tree")).strip()
        parents = ["-p", parent] if parent else []
        return await self.commit_tree(tree, parents, message, author)

    async def commit_tree(self, tree: str, parent_args: Sequence[str], message: str, author: str) -> str:
        _, out, _ = await run_git(self.path, "commit-tree", tree, *parent_args, "-m", message, env=author_env(author))
        return out.decode().strip()

    async def merge(self, base: str, head: str, message: str, author: str) -> str:
        """A merge commit of ``head`` into ``base`` (parents base, head), or MergeConflict naming the paths."""
        code, out, err = await self.git("merge-tree", "--write-tree", "--name-only", "-z", base, head, check=False)
        if code == 1:
            conflicted = [p for p in out.decode().split("\0\0", 1)[0].split("\0")[1:] if p]
            raise MergeConflict(f"merge conflict in {', '.join(conflicted) or 'the trees'}")
        if code != 0:
            raise GitError(("merge-tree",), code, err)
        tree = out.decode().split("\0", 1)[0].strip()
        return await self.commit_tree(tree, ["-p", base, "-p", head], message, author)
