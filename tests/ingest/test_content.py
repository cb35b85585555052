"""What a push carries, against the real ingest service (tests/ingest/conftest.py): git objects checked by git's
own strict checks, sizes bounded before anything is read (and ingest's memory with them), unreferenced objects not
kept, the route rule for every commit and every parent, and each request limit with its own message.

Bad trees are made with git plumbing (raw objects through `git hash-object --literally`), since porcelain refuses to
write them."""

import subprocess

import grpc
import pytest
from kernelboard.v1 import events_pb2, ingest_pb2

from contracts import limits
from services.common.grpcserver import start_server
from services.ingest import store
from services.ingest.api import add_to_server, server_options
from services.ingest.app import Ingest
from tests.ingest.gitwork import WorkClone
from tests.support.ingest import clone, push, refused, snapshot, start_route

pytestmark = pytest.mark.timeout(300)


# --- plumbing ------------------------------------------------------------------------------------------------------


def ls_tree(work: WorkClone, rev: str) -> list[tuple[str, str, str, str]]:
    """(mode, type, oid, name) of each entry of ``rev``'s tree."""
    out = work.git("ls-tree", rev).decode()
    return [(*line.split("\t")[0].split(" "), line.split("\t", 1)[1]) for line in out.splitlines()]


def mktree(work: WorkClone, entries) -> str:
    text = "".join(f"{mode} {kind} {oid}\t{name}\n" for mode, kind, oid, name in entries)
    return work.git("mktree", input=text.encode()).decode().strip()


def raw_tree(work: WorkClone, entries: list[tuple[str, bytes, str]]) -> str:
    """A tree object written as given: names and order unchecked."""
    body = b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    return work.git("hash-object", "-t", "tree", "-w", "--literally", "--stdin", input=body).decode().strip()


def blob(work: WorkClone, data: bytes) -> str:
    return work.git("hash-object", "-w", "--stdin", input=data).decode().strip()


def zero_blob(work: WorkClone, size: int) -> str:
    """A blob of ``size`` zero bytes, written without holding it in this process."""
    command = f"head -c {size} /dev/zero | git -C {work.path} hash-object -w --stdin"
    return subprocess.run(command, shell=True, check=True, capture_output=True).stdout.decode().strip()


def with_route_tree(work: WorkClone, base: str, route: str, route_tree: str) -> str:
    """``base``'s root tree with routes/<route> replaced by ``route_tree``."""
    routes = [e for e in ls_tree(work, f"{base}:routes") if e[3] != route] if "routes" in _names(work, base) else []
    routes_tree = mktree(work, [*routes, ("040000", "tree", route_tree, route)])
    root = [e for e in ls_tree(work, base) if e[3] != "routes"]
    return mktree(work, [*root, ("040000", "tree", routes_tree, "routes")])


def _names(work: WorkClone, rev: str) -> set[str]:
    return {e[3] for e in ls_tree(work, rev)}


def commit_tree(work: WorkClone, tree: str, *parents: str, message: str = "hand-made") -> str:
    args = [arg for parent in parents for arg in ("-p", parent)]
    return work.git("commit-tree", tree, *args, "-m", message).decode().strip()


def route_bundle(work: WorkClone, route: str, tip: str, *exclude: str) -> bytes:
    work.git("update-ref", f"refs/heads/routes/{route}", tip)
    return work.bundle(f"refs/heads/routes/{route}", *exclude)


def hand_packed_bundle(work: WorkClone, ref: str, tip: str, base: str, extra: list[str], walk: bool = True) -> bytes:
    """A bundle whose pack holds what ``tip`` brings over ``base`` (``walk``; else ``tip`` alone) and the ``extra``
    objects besides: git's own `bundle create` refuses to walk some bad trees."""
    listed = work.git("rev-list", "--objects", tip, f"^{base}").decode().split() if walk else [tip]
    objects = [o for o in listed if len(o) == 40] + extra
    pack = work.git("pack-objects", "-q", "--stdout", input="".join(f"{o}\n" for o in objects).encode())
    return f"# v2 git bundle\n-{base}\n{tip} {ref}\n\n".encode() + pack


def peak_rss_reset() -> int:
    """Reset this process's peak resident size (Linux clear_refs 5) and return its resident size now, in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    return _status_kib("VmHWM") * 1024


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])


# --- git's checks --------------------------------------------------------------------------------------------------

BAD_ENTRIES = [
    ([b"../../evil.py"], "fullPathname"),
    ([b".."], "hasDotdot"),
    ([b".git"], "hasDotgit"),
    ([b".GIT"], "hasDotgit"),
    ([b"/abs.py"], "fullPathname"),
    ([b"a.py", b"a.py"], "duplicateEntries"),
]


async def test_bad_tree_entries_are_refused_by_gits_strict_checks(stack, tmp_path):
    await start_route(stack, "bob", "fsck")
    work = await clone(stack, "bob", "routes/fsck", tmp_path / "fsck")
    base = work.head()
    content = blob(work, b"print('evil')\n")
    for names, fsck_id in BAD_ENTRIES:
        route_tree = raw_tree(work, [("100644", name, content) for name in names])
        tip = commit_tree(work, with_route_tree(work, base, "fsck", route_tree), base)
        details = await refused(
            stack,
            push(stack, "bob", "routes/fsck", route_bundle(work, "fsck", tip, base)),
            grpc.StatusCode.INVALID_ARGUMENT,
            fsck_id,
        )
        assert "malformed bundle" in details, (names, details)
    # An empty name, and a malformed commit (an author line without an email).
    empty = raw_tree(work, [("100644", b"", content)])
    root = with_route_tree(work, base, "fsck", empty)
    tip = commit_tree(work, root, base)
    routes = work.head(f"{root}:routes")
    bundle = hand_packed_bundle(work, "refs/heads/routes/fsck", tip, base, [root, routes, empty, content], walk=False)
    await refused(
        stack,
        push(stack, "bob", "routes/fsck", bundle),
        grpc.StatusCode.INVALID_ARGUMENT,
        "empty filename in tree entry",
    )
    good_tree = work.git("rev-parse", f"{base}^{{tree}}").decode().strip()
    raw_commit = f"tree {good_tree}\nparent {base}\nauthor nobody\ncommitter x <x> 1 +0000\n\nmsg\n".encode()
    bad_commit = work.git("hash-object", "-t", "commit", "-w", "--literally", "--stdin", input=raw_commit)
    await refused(
        stack,
        push(stack, "bob", "routes/fsck", route_bundle(work, "fsck", bad_commit.decode().strip(), base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "missingEmail",
    )
    # The same route takes a sound commit afterwards.
    work.git("reset", "-q", "--hard", base)
    sound = work.commit({"routes/fsck/a.py": "x = 1\n"})
    assert (await push(stack, "bob", "routes/fsck", route_bundle(work, "fsck", sound, base))).sha == sound


async def test_objects_the_pushed_commits_do_not_reach_are_not_kept(stack, tmp_path):
    await start_route(stack, "bob", "stray")
    work = await clone(stack, "bob", "routes/stray", tmp_path / "stray")
    base = work.head()
    tip = work.commit({"routes/stray/a.py": "x = 1\n"})
    unreferenced = zero_blob(work, 20 * 1000 * 1000)  # 20 MB, about 20 KB packed
    bundle = hand_packed_bundle(work, "refs/heads/routes/stray", tip, base, [unreferenced])
    assert (await push(stack, "bob", "routes/stray", bundle)).sha == tip
    odb = stack.ingest.repo.objects_db.odb
    assert odb.exists(tip) and odb.exists(work.head("HEAD:routes/stray/a.py"))
    assert not odb.exists(unreferenced)
    everything = subprocess.run(
        ["git", f"--git-dir={stack.ingest.repo.path}", "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert unreferenced not in everything


async def test_an_inflating_metrics_json_is_refused_from_its_header_with_memory_bounded(stack, tmp_path):
    await start_route(stack, "bob", "inflate")
    work = await clone(stack, "bob", "routes/inflate", tmp_path / "inflate")
    base = work.head()
    huge = zero_blob(work, 200 * 1000 * 1000)
    route_tree = mktree(work, [("100644", "blob", huge, "metrics.json")])
    tip = commit_tree(work, with_route_tree(work, base, "inflate", route_tree), base)
    bundle = route_bundle(work, "inflate", tip, base)
    assert len(bundle) < 250 * 1024  # 200 MB inflated from a bundle under 250 KB
    state = await snapshot(stack)
    before = peak_rss_reset()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await push(stack, "bob", "routes/inflate", bundle)
    grown = peak_rss() - before
    # The ingest service runs in this process: its peak resident size grew by less than a tenth of the blob.
    assert grown < 20 * 1000 * 1000, f"ingest's peak RSS grew by {grown} bytes"
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
    assert info.value.details() == (
        f"routes/inflate/metrics.json is 200000000 bytes (inflated), over the limit of {limits.MAX_BLOB_BYTES} bytes"
        " a file"
    )
    assert await snapshot(stack) == state


async def test_metrics_json_over_its_limit_is_refused_before_it_is_read(stack, tmp_path):
    await start_route(stack, "alice", "big-metrics")
    work = await clone(stack, "alice", "routes/big-metrics", tmp_path / "bm")
    base = work.head()
    padding = "x" * (1536 * 1024)
    work.commit({"routes/big-metrics/metrics.json": f'{{"score": 1, "cost": 1, "subtasks": ["{padding}"]}}'})
    size = (work.path / "routes/big-metrics/metrics.json").stat().st_size
    await refused(
        stack,
        push(stack, "alice", "routes/big-metrics", work.bundle("refs/heads/routes/big-metrics", base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"routes/big-metrics/metrics.json is {size} bytes, over the limit of {limits.MAX_METRICS_JSON_BYTES}",
    )


# --- the route rule ------------------------------------------------------------------------------------------------


async def test_an_orphan_merged_into_a_route_is_refused_naming_what_it_drops(stack, tmp_path):
    await start_route(stack, "alice", "orphaned")
    work = await clone(stack, "alice", "routes/orphaned", tmp_path / "o")
    base = work.head()
    head = work.commit({"routes/orphaned/a.py": "x = 1\n"})
    await push(stack, "alice", "routes/orphaned", work.bundle("refs/heads/routes/orphaned", base))
    # An orphan holding only routes/orphaned/, merged with the route's head and taking the orphan's tree.
    route_tree = mktree(work, [("100644", "blob", blob(work, b"y = 2\n"), "a.py")])
    only_route = mktree(
        work, [("040000", "tree", mktree(work, [("040000", "tree", route_tree, "orphaned")]), "routes")]
    )
    orphan = commit_tree(work, only_route)
    merge = commit_tree(work, only_route, head, orphan)
    details = await refused(
        stack,
        push(stack, "alice", "routes/orphaned", route_bundle(work, "orphaned", merge, head)),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"commit {orphan[:12]} has no parent",
    )
    assert "would drop 'AGENTS.md'" in details and "outside routes/orphaned/" in details
    # An orphan that keeps main's files exactly is refused all the same.
    full_tree = work.git("rev-parse", f"{head}^{{tree}}").decode().strip()
    full = commit_tree(work, full_tree)
    await refused(
        stack,
        push(
            stack,
            "alice",
            "routes/orphaned",
            route_bundle(work, "orphaned", commit_tree(work, full_tree, head, full), head),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"commit {full[:12]} has no parent",
    )


async def test_a_merge_with_another_routes_history_is_refused(stack, tmp_path):
    """Another route's commits are not main's: merged into this route, they are checked as its own commits."""
    await start_route(stack, "alice", "mine")
    await start_route(stack, "bob", "theirs")
    theirs = await clone(stack, "bob", "routes/theirs", tmp_path / "theirs")
    their_base = theirs.head()
    their_head = theirs.commit({"routes/theirs/t.py": "t = 1\n"})
    await push(stack, "bob", "routes/theirs", theirs.bundle("refs/heads/routes/theirs", their_base))
    mine = await clone(stack, "alice", "routes/mine", tmp_path / "mine")
    my_head = mine.head()
    mine.git("fetch", "-q", str(theirs.path), "routes/theirs")
    mine.git("merge", "-q", "--no-ff", "--no-edit", "FETCH_HEAD")
    await refused(
        stack,
        push(stack, "alice", "routes/mine", mine.bundle("refs/heads/routes/mine", my_head)),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"commit {their_head[:12]} touches 'routes/theirs/t.py' outside routes/mine/",
    )


async def test_a_route_may_merge_main_as_main_stood(stack, tmp_path):
    await start_route(stack, "alice", "follows")
    work = await clone(stack, "alice", "routes/follows", tmp_path / "f")
    base = work.head()
    mine = work.commit({"routes/follows/a.py": "x = 1\n"})
    await push(stack, "alice", "routes/follows", work.bundle("refs/heads/routes/follows", base))
    main = await clone(stack, "curator", "main", tmp_path / "main")
    main_before = main.head()
    newer = main.commit({"kernels/problems/extra.py": "# newer main\n"}, "main moves on")
    await push(stack, "curator", "main", main.bundle("refs/heads/main", main_before))
    work.git("fetch", "-q", str(main.path), "main")
    work.git("merge", "-q", "--no-edit", "FETCH_HEAD")
    merged = work.head()
    reply = await push(stack, "alice", "routes/follows", work.bundle("refs/heads/routes/follows", mine))
    assert reply.sha == merged and newer in work.git("rev-list", merged).decode()


async def test_merging_a_pull_request_rechecks_the_result_against_main(stack, tmp_path):
    """A route head recorded before the rule held for every commit (written here directly, as such a head was) may
    drop main's files: its pull request opens, but the merge is refused, naming them."""
    route = await start_route(stack, "bob", "legacy")
    repo = stack.ingest.repo
    legacy = await repo.commit_files(
        route.head_sha, {"routes/legacy/a.py": b"x = 1\n"}, "drops AGENTS.md", "bob", remove_prefix="AGENTS.md"
    )
    async with stack.log.pool.acquire() as conn:
        await store.move_ref(conn, "refs/heads/routes/legacy", route.head_sha, legacy, "bob")
    await repo.write_refs({"refs/heads/routes/legacy": legacy})
    opened = ingest_pb2.OpenPullRequestRequest(route="legacy", title="legacy")
    pull = await stack.stub.OpenPullRequest(opened, metadata=stack.md("bob"))
    merge = ingest_pb2.MergeRequest(number=pull.number)
    await refused(
        stack,
        stack.stub.Merge(merge, metadata=stack.md("curator")),
        grpc.StatusCode.FAILED_PRECONDITION,
        f"pull request #{pull.number}: merging it would drop 'AGENTS.md' outside routes/legacy/ of main",
    )


# --- request limits ------------------------------------------------------------------------------------------------


async def test_text_and_list_limits_are_refused_each_with_its_message(stack, tmp_path):
    await start_route(stack, "bob", "texts")
    work = await clone(stack, "bob", "routes/texts", tmp_path / "texts")
    base = work.head()
    work.commit({"routes/texts/a.py": "x = 1\n"})
    await push(stack, "bob", "routes/texts", work.bundle("refs/heads/routes/texts", base))
    long_title = "t" * (limits.MAX_PULL_TITLE_CHARS + 1)
    await refused(
        stack,
        stack.stub.OpenPullRequest(
            ingest_pb2.OpenPullRequestRequest(route="texts", title=long_title), metadata=stack.md("bob")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"title is {len(long_title)} characters, over the limit of {limits.MAX_PULL_TITLE_CHARS}",
    )
    opened = ingest_pb2.OpenPullRequestRequest(route="texts", title="t" * limits.MAX_PULL_TITLE_CHARS)
    number = (await stack.stub.OpenPullRequest(opened, metadata=stack.md("bob"))).number
    body = "b" * (1536 * 1024)  # from an outsider: once an event over NATS's 1 MiB
    review = ingest_pb2.ReviewRequest(number=number, verdict=events_pb2.REVIEW_VERDICT_COMMENT, body=body)
    await refused(
        stack,
        stack.stub.Review(review, metadata=stack.md("mallory")),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"body is {len(body)} characters, over the limit of {limits.MAX_REVIEW_BODY_CHARS}",
    )
    fetch = ingest_pb2.FetchRequest(refs=["main"] * (limits.MAX_FETCH_REFS + 1))
    await refused(
        stack,
        stack.stub.Fetch(fetch, metadata=stack.md("bob")),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"a fetch names at most {limits.MAX_FETCH_REFS} refs, not {limits.MAX_FETCH_REFS + 1}",
    )


async def test_a_push_over_the_default_bundle_limit_gets_the_documented_message(stack):
    """The service as `python -m services.ingest.server` starts it (the default 64 MiB limit and its gRPC options):
    a 70 MB unary Push reaches the size check instead of gRPC's generic message-size error."""
    ingest = Ingest(stack.log, stack.ingest.repo, max_bundle_bytes=limits.MAX_BUNDLE_BYTES)
    started = await start_server(
        "ingest",
        lambda server: add_to_server(server, ingest),
        port=0,
        pool=stack.log.pool,
        options=server_options(limits.MAX_BUNDLE_BYTES),
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{started.port}", options=[("grpc.max_send_message_length", -1)])
    try:
        from kernelboard.v1 import ingest_pb2_grpc

        stub = ingest_pb2_grpc.IngestStub(channel)
        size = 70 * 1000 * 1000
        before = await snapshot(stack)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Push(
                ingest_pb2.PushRequest(ref="routes/texts", bundle=b"\0" * size), metadata=stack.md("bob"), timeout=120
            )
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert info.value.details() == (
            f"bundle of {size} bytes exceeds the limit of {limits.MAX_BUNDLE_BYTES} bytes"
        ), info.value.details()
        assert await snapshot(stack) == before
    finally:
        await channel.close()
        await started.stop(0)


async def test_a_commit_of_thousands_of_files_is_recorded_with_its_paths_summed_up(stack, tmp_path):
    """Changed paths over their event field's limit: the push is accepted, its reply lists every path, and its
    CommitIngested (which the log would refuse whole) lists as many as fit and counts the rest."""
    work = await clone(stack, "curator", "main", tmp_path / "many")
    base = work.head()
    folder = work.path / "kernels" / "data" / ("d" * 100)
    folder.mkdir(parents=True)
    for i in range(2500):
        (folder / f"f{i:05d}.txt").write_text(f"{i}\n")
    work.git("add", "-A")
    work.git("commit", "-q", "-m", "2,500 files")
    reply = await push(stack, "curator", "main", work.bundle("refs/heads/main", base))
    assert len(reply.changed_paths) == 2500
    [event] = [e for e in await stack.events("CommitIngested") if e.event_id == reply.event_id]
    recorded = list(event.commit_ingested.changed_paths)
    assert recorded[:-1] == list(reply.changed_paths[: len(recorded) - 1])
    assert recorded[-1] == f"… and {2500 - (len(recorded) - 1)} more"
    assert sum(len(p.encode()) for p in recorded) <= limits.EVENT_FIELD_BYTES["CommitIngested.changed_paths"]


async def test_file_names_with_line_breaks_are_listed_and_names_not_utf8_refused(stack, tmp_path):
    """git allows any byte but NUL and '/' in a name: the objects a push brings are still listed one by one, and a
    name the log cannot record as text is refused by name (it ended UNKNOWN)."""
    await start_route(stack, "alice", "odd-names")
    work = await clone(stack, "alice", "routes/odd-names", tmp_path / "odd")
    base = work.head()
    content = blob(work, b"x = 1\n")

    def tip_with(names: list[bytes]) -> str:
        route_tree = raw_tree(work, sorted((("100644", name, content) for name in names), key=lambda e: e[1]))
        return commit_tree(work, with_route_tree(work, base, "odd-names", route_tree), base)

    not_utf8 = tip_with([b"ok.py", b"\xff\xfe.py"])
    await refused(
        stack,
        push(stack, "alice", "routes/odd-names", route_bundle(work, "odd-names", not_utf8, base)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "is not UTF-8",
    )
    names = [b"a\nb.py", "c\u2028d.py".encode(), "e\u0085f.py".encode(), b"g\rh.py"]
    tip = tip_with(names)
    reply = await push(stack, "alice", "routes/odd-names", route_bundle(work, "odd-names", tip, base))
    assert reply.sha == tip
    assert sorted(reply.changed_paths) == sorted(f"routes/odd-names/{n.decode()}" for n in names)
