"""The hosted repository's objects as ingest reads them, and the git runner every write goes through.

Reads (object types, ancestry, new commits, tree diffs, file contents) use libgit2 (pygit2) in this process: they are
a push's many small questions, and one git subprocess per question made them most of a push's cost (bench/load/runs.md
has the profile). ``Objects`` reads one object store: the repository's (gitrepo.HostedRepo) or a push's quarantine
(quarantine.Quarantine) in front of it.
"""

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pygit2

from services.ingest.domain import RouteCommit, route_folder


class GitError(Exception):
    def __init__(self, args: Sequence[str], returncode: int, stderr: str):
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


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
