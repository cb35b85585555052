"""A push's quarantine: an object directory in front of the hosted repository (GIT_OBJECT_DIRECTORY +
GIT_ALTERNATE_OBJECT_DIRECTORIES, as receive-pack does it), where a pushed bundle's pack is indexed by git's own strict
checks and every check runs before any of its objects enter the repository (``migrate``).
"""

import os
from collections.abc import Sequence
from pathlib import Path

import pygit2

from services.ingest.domain import BundleHeader, NewObject
from services.ingest.gitobjects import Objects

# git's own checks on every pushed object (`index-pack --strict`, what receive.fsckObjects does): malformed commits,
# trees and tags, and tree entries named '..', '.', '.git' (any case, or an NTFS/HFS alias), '', or containing '/',
# duplicate or unsorted entries. --strict makes git's warnings errors; the three named are made errors explicitly
# (badFilemode is only informational by default).
FSCK_STRICT = "--strict=badFilemode=error,nulInCommit=error,zeroPaddedFilemode=error"


class UnbundleError(Exception):
    """git refused a bundle: ``missing_prerequisites`` tells a stale base from a corrupt bundle."""

    def __init__(self, message: str, missing_prerequisites: bool):
        super().__init__(message)
        self.missing_prerequisites = missing_prerequisites


def _pack_index_oids(idx: Path) -> list[str]:
    """The object ids a pack index (version 2) lists: after the header, the fan-out table's last entry is the count,
    and the sorted ids follow."""
    data = idx.read_bytes()
    count = int.from_bytes(data[8 + 255 * 4 : 8 + 256 * 4], "big")
    start = 8 + 256 * 4
    return [data[start + 20 * i : start + 20 * (i + 1)].hex() for i in range(count)]


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
