# One file past 500 lines: the writer face of one bare repository. Objects (its reads), Quarantine (a push's objects
# checked before they enter) and HostedRepo (which makes quarantines) are one class family over one git runner; moving
# Quarantine out would make a circle with HostedRepo. The other services' reader face is services/common/hostedgit.py.
"""The hosted repository: a bare git repository, written through the git CLI and read through libgit2 (pygit2).

Writes use the git CLI (subprocess): a bundle is a header and a pack, and `git index-pack --fix-thin` indexes the
pack exactly as git does (as `git bundle unbundle` would, once the header's prerequisites are found); `git merge-tree
--write-tree` gives a real three-way merge; `git update-ref --stdin` moves refs in one transaction; and an
object-directory quarantine (GIT_OBJECT_DIRECTORY + GIT_ALTERNATE_OBJECT_DIRECTORIES, as receive-pack does it) lets
every check run on a pushed bundle before any of its objects enter the repository. Reads (object types, ancestry, new
commits, tree diffs, file contents) use pygit2 in this process: they are a push's many small questions, and one git
subprocess per question made them most of a push's cost (bench/load/runs.md has the profile).

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
from services.ingest.domain import BundleHeader, NewObject, RouteCommit, parse_bundle_header, route_folder

log = get_logger()

MANAGED_NAMESPACES = ("refs/heads/", "refs/tags/", "refs/jobs/", "refs/pull/")
QUARANTINE_DIR = "kb-quarantine"
SPARE_QUARANTINES = 64
REPACK_AFTER_PACKS = 16
# git's own checks on every pushed object (`index-pack --strict`, what receive.fsckObjects does): malformed commits,
# trees and tags, and tree entries named '..', '.', '.git' (any case, or an NTFS/HFS alias), '', or containing '/',
# duplicate or unsorted entries. --strict makes git's warnings errors; the three named are made errors explicitly
# (badFilemode is only informational by default).
FSCK_STRICT = "--strict=badFilemode=error,nulInCommit=error,zeroPaddedFilemode=error"


class GitError(Exception):
    def __init__(self, args: Sequence[str], returncode: int, stderr: str):
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


class UnbundleError(Exception):
    """git refused a bundle: ``missing_prerequisites`` tells a stale base from a corrupt bundle."""

    def __init__(self, message: str, missing_prerequisites: bool):
        super().__init__(message)
        self.missing_prerequisites = missing_prerequisites


class MergeConflict(Exception):
    pass


def author_env(name: str) -> dict[str, str]:
    email = name.replace("/", ".").replace(":", ".") + "@kernelboard"
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


async def run_git(
    git_dir: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None, check: bool = True
) -> tuple[int, bytes, str]:
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    full_env.pop("GIT_DIR", None)
    proc = await asyncio.create_subprocess_exec(
        "git",
        f"--git-dir={git_dir}",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=full_env,
    )
    out, err = await proc.communicate(stdin)
    error_text = err.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        raise GitError(args, proc.returncode, error_text)
    return proc.returncode, out, error_text


class Objects:
    """Read access to the repository's objects, optionally with a quarantine's objects on top.

    Reads go through libgit2 (pygit2) in this process: a push's checks read a handful of small objects, and a git
    subprocess for each (fork, exec, start-up: ~3 ms of CPU apiece) was most of a push's cost. The calls are made on
    the event loop's thread (each reads a few objects, well under a millisecond), so one pygit2.Repository is never
    used by two threads at once. libgit2 looks again at the object directory when an object is not found, so objects
    migrated in after it opened are seen.
    """

    def __init__(self, git_dir: Path, env: Mapping[str, str] | None = None):
        self.git_dir = git_dir
        self.env = dict(env or {})
        self._objects: pygit2.Repository | None = None

    async def git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> tuple[int, bytes, str]:
        return await run_git(self.git_dir, *args, env=self.env, stdin=stdin, check=check)

    async def out(self, *args: str, stdin: bytes | None = None) -> str:
        return (await self.git(*args, stdin=stdin))[1].decode()

    def open_objects(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.git_dir))

    @property
    def objects_db(self) -> pygit2.Repository:
        if self._objects is None:
            self._objects = self.open_objects()
        return self._objects

    def _get(self, rev: str):
        try:
            return self.objects_db.get(rev)
        except ValueError:  # not an object id
            return None

    def _commit(self, rev: str) -> pygit2.Commit:
        found = self._get(rev)
        if not isinstance(found, pygit2.Commit):
            raise GitError(("rev-parse", rev), 128, f"{rev} is not a commit in {self.git_dir}")
        return found

    async def object_type(self, rev: str) -> str | None:
        found = self._get(rev)
        return found.type_str if found is not None else None

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        tip = self._commit(descendant)
        return ancestor == str(tip.id) or self.objects_db.descendant_of(tip.id, self._commit(ancestor).id)

    async def merge_base(self, a: str, b: str) -> str:
        base = self.objects_db.merge_base(self._commit(a).id, self._commit(b).id)
        if base is None:
            raise GitError(("merge-base", a, b), 1, f"{a[:12]} and {b[:12]} have no common ancestor")
        return str(base)

    async def is_connected(self, tip: str) -> bool:
        """Every object reachable from ``tip`` is present (index-pack checks the pack, not that it is complete).
        The repository's own objects are complete (only checked pushes and commits made here enter it), so the walk
        follows only objects this quarantine brings."""
        return self._connected(tip, None)

    def _connected(self, tip: str, brought: pygit2.Odb | None) -> bool:
        """Blobs are only looked up, never read: a pushed blob may inflate to far more than its bundle."""
        db = self.objects_db
        pending, seen = [tip], set()
        while pending:
            oid = pending.pop()
            if oid in seen:
                continue
            seen.add(oid)
            if not db.odb.exists(oid):
                return False
            if brought is None or not brought.exists(oid):
                continue  # the repository's own objects are complete
            if db.odb.read_header(oid)[0] == pygit2.enums.ObjectType.BLOB:
                continue
            found = db.get(oid)
            if isinstance(found, pygit2.Commit):
                pending += [str(found.tree_id), *(str(p) for p in found.parent_ids)]
            elif isinstance(found, pygit2.Tree):
                pending += [str(entry.id) for entry in found if entry.filemode != pygit2.enums.FileMode.COMMIT]
            elif isinstance(found, pygit2.Tag):
                pending.append(str(found.target))
        return True

    async def changed_paths(self, old: str, new: str) -> list[str]:
        tree = self._commit(new).tree
        if not old:
            return [path for _, path in _walk_tree(tree, "")]
        paths = (delta.new_file.path for delta in self._commit(old).tree.diff_to_tree(tree).deltas)
        return list(dict.fromkeys(paths))  # a type change shows as a deletion and an addition of one path

    async def first_parent(self, sha: str) -> str:
        return str(self._commit(sha).parent_ids[0])

    async def diff_stat(self, old: str, new: str) -> list[tuple[str, int, int, bool]]:
        """(path, lines added, lines deleted, binary) of each file changed from ``old`` to ``new``."""
        diff = self._commit(old).tree.diff_to_tree(self._commit(new).tree)
        stat = []
        for patch in diff:
            _, added, deleted = patch.line_stats
            stat.append((patch.delta.new_file.path, added, deleted, patch.delta.is_binary))
        return stat

    async def route_commits(self, tip: str, exclude: Sequence[str], route: str) -> list[RouteCommit]:
        """The commits reachable from ``tip`` and from none of ``exclude``, parents first, each with its tree's
        ``outside`` value for ``route`` (domain.RouteCommit)."""
        walker = self.objects_db.walk(
            self._commit(tip).id, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
        )
        for excluded in exclude:
            if excluded:
                walker.hide(self._commit(excluded).id)
        return [
            RouteCommit(str(c.id), tuple(str(p) for p in c.parent_ids), _outside_route(c.tree, route)) for c in walker
        ]

    async def outside_of(self, rev: str, route: str) -> object:
        return _outside_route(self._commit(rev).tree, route)

    async def paths_outside(self, base: str, rev: str, route: str) -> tuple[list[str], list[str]]:
        """The paths outside ``routes/<route>/`` that ``rev`` drops (``base`` has them, ``rev`` not) and that it adds or
        changes, against ``base``."""
        folder = route_folder(route)
        dropped, changed = [], []
        for delta in self._commit(base).tree.diff_to_tree(self._commit(rev).tree).deltas:
            path = delta.old_file.path if delta.status == pygit2.enums.DeltaStatus.DELETED else delta.new_file.path
            if not path.startswith(folder):
                (dropped if delta.status == pygit2.enums.DeltaStatus.DELETED else changed).append(path)
        return dropped, list(dict.fromkeys(changed))

    async def tree_entries(self, rev: str, folder: str) -> list[tuple[str, str]]:
        """(mode, path) of every file, link and submodule under ``folder`` at ``rev``, recursively."""
        tree = self._commit(rev).tree
        prefix = folder.rstrip("/")
        try:
            sub = tree[prefix] if prefix else tree
        except KeyError:
            return []
        if not isinstance(sub, pygit2.Tree):
            return []
        return [(f"{mode:06o}", path) for mode, path in _walk_tree(sub, prefix + "/" if prefix else "")]

    def _entry(self, rev: str, path: str):
        """The object at ``path`` in ``rev``'s tree, not yet read (pygit2 loads an entry's object on first use)."""
        found = self._get(rev)
        if found is None:
            return None
        try:
            return found.peel(pygit2.Tree)[path]
        except (KeyError, ValueError, pygit2.GitError):  # no such path, or the object has no tree
            return None

    async def file_size(self, rev: str, path: str) -> int | None:
        """The size of the file at ``path`` in ``rev`` from its object's header, without reading it; None when
        there is no such file."""
        entry = self._entry(rev, path)
        if entry is None or entry.filemode not in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE):
            return None
        return self.objects_db.odb.read_header(entry.id)[1]

    async def read_file(self, rev: str, path: str) -> bytes | None:
        blob = self._entry(rev, path)
        return blob.data if isinstance(blob, pygit2.Blob) else None


def _pack_index_oids(idx: Path) -> list[str]:
    """The object ids a pack index (version 2) lists: after the header, the fan-out table's last entry is the count,
    and the sorted ids follow."""
    data = idx.read_bytes()
    count = int.from_bytes(data[8 + 255 * 4 : 8 + 256 * 4], "big")
    start = 8 + 256 * 4
    return [data[start + 20 * i : start + 20 * (i + 1)].hex() for i in range(count)]


def _outside_route(tree: pygit2.Tree, route: str) -> tuple:
    """What ``tree`` holds outside ``routes/<route>/``, as entry ids: equal for two trees exactly when they are equal
    there (a missing routes/ and one holding only the route's folder count the same)."""
    top = tuple((e.name, e.filemode, str(e.id)) for e in tree if not (e.name == "routes" and e.type_str == "tree"))
    try:
        routes = tree["routes"]
    except KeyError:
        return top, ()
    if not isinstance(routes, pygit2.Tree):
        return top, ()
    return top, tuple((e.name, e.filemode, str(e.id)) for e in routes if e.name != route)


def _walk_tree(tree: pygit2.Tree, prefix: str):
    """(mode, path) of every entry that is not a tree, as `git ls-tree -r` lists them."""
    for entry in tree:
        path = prefix + entry.name
        if entry.filemode == pygit2.enums.FileMode.TREE:
            yield from _walk_tree(tree[entry.name], path + "/")
        else:
            yield entry.filemode, path


class Quarantine(Objects):
    """A pushed bundle's objects, unbundled into a private object directory that borrows the repository's objects.
    Nothing reaches the repository until ``migrate``."""

    def __init__(self, git_dir: Path, directory: Path):
        objects = directory / "objects"
        super().__init__(
            git_dir,
            {"GIT_OBJECT_DIRECTORY": str(objects), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects")},
        )
        self.objects = objects
        self.packs_migrated = 0
        self.new_objects: list[NewObject] = []  # filled by unbundle

    def open_objects(self) -> pygit2.Repository:
        """The repository's objects with this quarantine's as an alternate (read-only) object directory."""
        repository = super().open_objects()
        repository.odb.add_disk_alternate(str(self.objects))
        return repository

    async def is_connected(self, tip: str) -> bool:
        return self._connected(tip, pygit2.Odb(str(self.objects)))

    async def unbundle(self, header: BundleHeader, bundle: bytes) -> None:
        """What `git bundle unbundle` does, without writing the bundle to a file and one process fewer: the
        prerequisites must be commits of the repository (whose objects are complete), then `git index-pack
        --fix-thin` indexes the pack, completing a thin pack from the repository's objects."""
        missing = [sha for sha in header.prerequisites if not isinstance(self._get(sha), pygit2.Commit)]
        if missing:
            raise UnbundleError(f"the repository lacks these prerequisite commits: {' '.join(missing)}", True)
        pack = bundle[header.pack_offset :]
        code, _, err = await self.git("index-pack", "--stdin", "--fix-thin", FSCK_STRICT, stdin=pack, check=False)
        if code != 0:
            message = " ".join(line.strip() for line in err.splitlines() if line.strip())
            raise UnbundleError(message or f"git index-pack exited {code}", False)
        self.new_objects = await self._reachable_new_objects([oid for oid, _ in header.refs])

    async def _reachable_new_objects(self, tips: Sequence[str]) -> list[NewObject]:
        """Every object the tips reach that no ref of the repository reaches, with its type and inflated size read
        from its header (`git cat-file --batch-check` reads no object's content). `rev-list --objects` also fails
        when one of them is missing, so a bundle that is not self-contained ends here."""
        code, out, err = await self.git("rev-list", "--objects", *tips, "--not", "--all", check=False)
        if code != 0:
            first = next((line.strip() for line in err.splitlines() if line.strip()), f"git rev-list exited {code}")
            raise UnbundleError(f"objects the bundle's tip reaches are missing: {first}", False)
        # One line per object: git prints a path only up to its first newline (split on "\n" alone, as a name may
        # hold any other line separator).
        listed = [line.split(" ", 1) for line in out.decode("utf-8", "replace").split("\n") if line]
        if not listed:
            return []
        query = "".join(f"{entry[0]}\n" for entry in listed).encode()
        _, out, _ = await self.git("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)", stdin=query)
        headers = [line.split(" ") for line in out.decode().split("\n") if line]
        return [
            NewObject(oid, kind, int(size), entry[1] if len(entry) > 1 else "")
            for (oid, kind, size), entry in zip(headers, listed, strict=True)
        ]

    async def keep_only_reachable(self, repository: pygit2.Odb) -> int:
        """Drop from the quarantine what the pushed tips do not reach (and the repository lacks): a pack may carry
        any object, and unreferenced ones would stay in the hosted repository for good. Rewrites the pack only
        when it holds such objects; returns how many were dropped."""
        reachable = {o.oid for o in self.new_objects}
        packs = sorted((self.objects / "pack").glob("*.idx"))
        stray = [
            oid for idx in packs for oid in _pack_index_oids(idx) if oid not in reachable and not repository.exists(oid)
        ]
        if not stray:
            return 0
        old_files = [p for p in (self.objects / "pack").iterdir() if p.is_file()]
        if reachable:
            query = "".join(f"{oid}\n" for oid in sorted(reachable)).encode()
            await self.git("pack-objects", "-q", str(self.objects / "pack" / "pack"), stdin=query)
        for path in old_files:
            path.unlink()
        return len(stray)

    def migrate(self) -> None:
        """Move the quarantined objects into the repository: loose objects first, then packs, each pack's index last
        so that no reader sees an index without its pack."""
        target = self.git_dir / "objects"
        files = [p for p in self.objects.rglob("*") if p.is_file()]
        files.sort(key=lambda p: (p.parent.name == "pack", p.suffix == ".idx"))
        self.packs_migrated = sum(p.suffix == ".pack" for p in files)
        for source in files:
            destination = target / source.relative_to(self.objects)
            if destination.exists():
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, destination)


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
