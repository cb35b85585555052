"""The git adapter against real repositories: quarantine, migration, ref moves, reconcile, bundles and merges."""

import subprocess

import pytest

from services.ingest.gitrepo import REPACK_AFTER_PACKS, HostedRepo, MergeConflict
from services.ingest.quarantine import UnbundleError
from tests.ingest.gitwork import WorkClone


@pytest.fixture
async def hosted(tmp_path):
    repo = HostedRepo(tmp_path / "repo.git")
    await repo.init()
    return repo


@pytest.fixture
def work(tmp_path):
    return WorkClone.init(tmp_path / "work")


async def test_quarantined_objects_enter_the_repository_only_on_migrate(hosted, work):
    base = work.commit({"a.txt": "a"})
    async with hosted.quarantine(work.bundle("refs/heads/main")) as q:
        assert await q.object_type(base) == "commit"
        assert await hosted.object_type(base) is None
        assert await q.is_connected(base)
        q.migrate()
    assert await hosted.object_type(base) == "commit"
    assert not [p for p in (hosted.path / "kb-quarantine").rglob("*") if not p.is_dir()]  # nothing left behind


async def test_a_thin_bundle_needs_its_prerequisites(hosted, work, tmp_path):
    base = work.commit({"a.txt": "a"})
    full = work.bundle("refs/heads/main")
    tip = work.commit({"b.txt": "b"})
    thin = work.bundle("refs/heads/main", base)
    empty = HostedRepo(tmp_path / "empty.git")
    await empty.init()
    with pytest.raises(UnbundleError) as info:
        async with empty.quarantine(thin):
            pass
    assert info.value.missing_prerequisites
    async with hosted.quarantine(full) as q:
        q.migrate()
    async with hosted.quarantine(thin) as q:
        assert await q.object_type(tip) == "commit"


async def test_a_corrupt_pack_is_refused(hosted, work):
    work.commit({"a.txt": "a" * 1000})
    data = bytearray(work.bundle("refs/heads/main"))
    data[-30:-20] = b"\x00" * 10
    with pytest.raises(UnbundleError) as info:
        async with hosted.quarantine(bytes(data)):
            pass
    assert not info.value.missing_prerequisites


async def test_route_commits_and_their_trees_outside_the_folder(hosted, work):
    base = work.commit({"kernels/x.py": "x"})
    async with hosted.quarantine(work.bundle("refs/heads/main")) as q:
        q.migrate()
    one = work.commit({"routes/r1/a.py": "a"})
    two = work.commit({"routes/r1/a.py": "b", "README": "sneaky"})
    async with hosted.quarantine(work.bundle("refs/heads/main", base)) as q:
        commits = await q.route_commits(two, [base], "r1")
        assert [(c.sha, c.parents) for c in commits] == [(one, (base,)), (two, (one,))]
        assert commits[0].outside == await q.outside_of(base, "r1") != commits[1].outside
        assert await q.paths_outside(one, two, "r1") == ([], ["README"])
        assert await q.paths_outside(two, one, "r1") == (["README"], [])
        assert await q.is_ancestor(base, two) and not await q.is_ancestor(two, base)
        assert await q.changed_paths(base, two) == ["README", "routes/r1/a.py"]
        assert await q.read_file(two, "README") == b"sneaky"
        assert await q.read_file(two, "missing") is None


async def test_ref_updates_are_compare_and_swap_and_reconcile_follows_the_truth(hosted, work):
    first = work.commit({"a": "1"})
    second = work.commit({"a": "2"})
    async with hosted.quarantine(work.bundle("refs/heads/main")) as q:
        q.migrate()
    await hosted.update_refs([("refs/heads/main", first, "")])
    with pytest.raises(Exception, match="refs/heads/main"):
        await hosted.update_refs([("refs/heads/main", second, second)])
    await hosted.update_refs([("refs/heads/main", second, first), ("refs/tags/checks", first, "")])
    assert await hosted.refs() == {"refs/heads/main": second, "refs/tags/checks": first}
    changed = await hosted.reconcile({"refs/heads/main": first, "refs/heads/routes/r1": second})
    assert changed == ["refs/heads/main", "refs/heads/routes/r1", "refs/tags/checks"]
    assert await hosted.refs() == {"refs/heads/main": first, "refs/heads/routes/r1": second}
    assert await hosted.reconcile({"refs/heads/main": first, "refs/heads/routes/r1": second}) == []


async def test_bundle_clone_commit_files_and_merge(hosted, work, tmp_path):
    root = await hosted.commit_files("", {"a.txt": b"a\n", "routes/r1/k.py": b"k\n"}, "seed", "curator")
    route = await hosted.commit_files(root, {"routes/r1/k.py": b"k2\n"}, "route", "alice/agent-1")
    main = await hosted.commit_files(root, {"b.txt": b"b\n"}, "main moves on", "curator")
    merged = await hosted.merge(main, route, "Merge", "curator")
    assert await hosted.read_file(merged, "routes/r1/k.py") == b"k2\n"
    assert await hosted.read_file(merged, "b.txt") == b"b\n"
    author = subprocess.run(
        ["git", f"--git-dir={hosted.path}", "log", "-1", "--format=%an %P", merged], capture_output=True, text=True
    ).stdout.split()
    assert author == ["curator", main, route]
    clash = await hosted.commit_files(root, {"routes/r1/k.py": b"other\n"}, "clash", "bob")
    with pytest.raises(MergeConflict, match="routes/r1/k.py"):
        await hosted.merge(route, clash, "Merge", "curator")
    replaced = await hosted.commit_files(
        root, {"routes/r1/new.py": b"n\n"}, "replace", "curator", remove_prefix="routes/r1"
    )
    assert await hosted.read_file(replaced, "routes/r1/k.py") is None
    await hosted.update_refs([("refs/heads/main", merged, "")])
    (tmp_path / "all.bundle").write_bytes(await hosted.create_bundle(["refs/heads/main"]))
    subprocess.run(["git", "clone", "-q", "-b", "main", str(tmp_path / "all.bundle"), str(tmp_path / "c")], check=True)
    assert (tmp_path / "c" / "b.txt").read_text() == "b\n"


async def test_pushed_packs_are_rolled_together_in_the_background(hosted, work):
    """One pack per push would make every object lookup search thousands of packs; the repository repacks as they
    come, keeping every object, including those of a push not recorded yet."""
    shas = []
    for n in range(2 * REPACK_AFTER_PACKS):
        base = shas[-1] if shas else None
        shas.append(work.commit({"a.txt": f"{n}\n"}))
        async with hosted.quarantine(work.bundle("refs/heads/main", *([base] if base else []))) as q:
            q.migrate()
        hosted.migrated(q)
        if hosted._repacking is not None:
            await hosted._repacking
    packs = list((hosted.path / "objects" / "pack").glob("*.pack"))
    assert len(packs) < REPACK_AFTER_PACKS, packs
    for n, sha in enumerate(shas):  # no ref names them: each is like a push whose transaction has not committed
        assert await hosted.read_file(sha, "a.txt") == f"{n}\n".encode()
    assert await HostedRepo(hosted.path).read_file(shas[-1], "a.txt") is not None  # a reader opened afresh
