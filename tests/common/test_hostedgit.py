"""The hosted repository's two faces: the reader (services/common/hostedgit.py) that the scheduler and the verifier
use, and ingest's writer (services/ingest/gitrepo.py), which reads it too. What both can answer, they answer the
same; the reader's own answers are held to the repository ingest wrote."""

import pytest

from services.common import hostedgit
from services.common.hostedgit import GitError, HostedRepoReader
from services.ingest.gitrepo import HostedRepo

FILES = {"a.txt": b"first\n", "routes/r/k.py": b"print('k')\n", "checks/verify.sh": b"exit 0\n"}


@pytest.fixture
async def written(tmp_path):
    """The hosted repository as ingest writes it: main at a second commit on top of a first."""
    writer = HostedRepo(hostedgit.location(tmp_path))
    await writer.init()
    first = await writer.commit_files("", FILES, "first", "alice")
    second = await writer.commit_files(first, {"a.txt": b"second\n"}, "second", "alice")
    await writer.git("update-ref", "refs/heads/main", second)
    return writer, first, second


def faces(writer: HostedRepo):
    return {"reader": HostedRepoReader(writer.path), "writer": writer}


@pytest.mark.parametrize("face", ["reader", "writer"])
async def test_both_faces_agree_on_ancestry(written, face):
    writer, first, second = written
    repo = faces(writer)[face]
    assert await repo.is_ancestor(first, second)
    assert await repo.is_ancestor(second, second)
    assert not await repo.is_ancestor(second, first)


@pytest.mark.parametrize("face", ["reader", "writer"])
async def test_both_faces_agree_on_files(written, face):
    writer, first, second = written
    repo = faces(writer)[face]
    assert await repo.read_file(first, "a.txt") == b"first\n"
    assert await repo.read_file(second, "a.txt") == b"second\n"
    assert await repo.read_file(second, "routes/r/k.py") == FILES["routes/r/k.py"]
    assert await repo.read_file(second, "routes/r") is None  # a folder is no file
    assert await repo.read_file(second, "missing.txt") is None


async def test_the_reader_resolves_refs_and_says_what_a_path_is(written):
    writer, first, second = written
    reader = HostedRepoReader(writer.path)
    assert await reader.resolve("refs/heads/main") == second
    assert await reader.resolve(first) == first
    assert await reader.resolve("refs/heads/nothing") is None
    assert not await reader.is_ancestor("0" * 40, second)
    assert (await reader.entry(second, "routes")).kind == "tree"
    file = await reader.entry(second, "a.txt")
    assert file.kind == "blob" and file.is_regular_file
    assert await reader.entry(second, "missing") is None


async def test_the_reader_exports_a_tree_or_part_of_it_without_git(written, tmp_path):
    writer, _, second = written
    reader = HostedRepoReader(writer.path)
    whole, part = tmp_path / "whole", tmp_path / "part"
    whole.mkdir(), part.mkdir()
    assert await reader.export(second, whole)
    assert (whole / "a.txt").read_bytes() == b"second\n" and not (whole / ".git").exists()
    assert await reader.export(second, part, "routes/r")
    assert [p.relative_to(part).as_posix() for p in part.rglob("*") if p.is_file()] == ["routes/r/k.py"]
    assert not await reader.export(second, part, "routes/nothing")  # names nothing: nothing written
    with pytest.raises(GitError, match="over 10 bytes"):
        await reader.archive(second, max_bytes=10)
    with pytest.raises(GitError):
        await reader.archive("9" * 40)
