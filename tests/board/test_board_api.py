"""The Board gRPC API on a real server (port 0) with the real auth, over a projector of the real log."""

import asyncio

import grpc
import pytest
from kernelboard.v1 import board_pb2, events_pb2
from prometheus_client import REGISTRY

from services.board import render
from services.common import auth
from services.common.eventlog import NewEvent

from .board_events import append_all, check


def as_(tokens, name):
    return (("authorization", f"Bearer {tokens[name]}"),)


async def rpc_error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_get_board_newest_by_default_a_version_on_request_and_clear_errors(served):
    stub, tokens, *_ = served
    alice = as_(tokens, "alice")
    newest = await stub.GetBoard(board_pb2.GetBoardRequest(), metadata=alice)
    assert newest.version == 2 and [e.route for e in newest.ranked] == ["fast"]
    first = await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=alice)
    assert [(e.rank, e.route, e.source) for e in first.ranked] == [
        (1, "tiled", "reported by maintainer"),
        (2, "fast", "verified"),
    ]
    assert [e.source for e in first.listed_beside] == ["reported", "failed check"]
    assert first.card.name == "KernelBench operators" and first.header.routes == 4

    missing = await rpc_error(stub.GetBoard(board_pb2.GetBoardRequest(version=7), metadata=alice))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    assert missing.details() == "no board for benchmark version 7 (boards: 1, 2)"
    negative = await rpc_error(stub.GetBoard(board_pb2.GetBoardRequest(version=-1), metadata=alice))
    assert negative.code() == grpc.StatusCode.INVALID_ARGUMENT and "not -1" in negative.details()
    anonymous = await rpc_error(stub.GetBoard(board_pb2.GetBoardRequest()))
    assert anonymous.code() == grpc.StatusCode.UNAUTHENTICATED
    labels = {"method": "GetBoard"}
    assert REGISTRY.get_sample_value("kb_board_query_seconds_count", labels) >= 2


async def test_list_boards_card_and_route(served):
    stub, tokens, *_ = served
    alice = as_(tokens, "alice")
    listed = await stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=alice)
    assert [b.version for b in listed.boards] == [1, 2]
    card = await stub.GetBenchmark(board_pb2.GetBenchmarkRequest(version=1), metadata=alice)
    assert list(card.verifier_versions) == [1] and card.rules_commit == "rules1"
    # The principals registered today, a month after the last score: "now" is the latest event, so board 1 is quiet.
    assert (card.status, card.status_reason) == ("quiet", "no route scored for 14 days")
    route = await stub.GetRoute(board_pb2.GetBoardRouteRequest(route="fast"), metadata=alice)
    assert [b.version for b in route.boards] == [1, 2] and len(route.boards[0].history) == 3
    only_2 = await stub.GetRoute(board_pb2.GetBoardRouteRequest(route="fast", version=2), metadata=alice)
    assert [b.version for b in only_2.boards] == [2]
    unknown = await rpc_error(stub.GetRoute(board_pb2.GetBoardRouteRequest(route="nope"), metadata=alice))
    assert unknown.code() == grpc.StatusCode.NOT_FOUND and unknown.details() == "no route 'nope' in the log"
    empty = await rpc_error(stub.GetRoute(board_pb2.GetBoardRouteRequest(), metadata=alice))
    assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_rebuild_is_for_maintainers(served):
    stub, tokens, projector, *_ = served
    denied = await rpc_error(stub.Rebuild(board_pb2.RebuildBoardRequest(), metadata=as_(tokens, "alice")))
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    assert denied.details().startswith("maintainer role needed to rebuild the board")
    reply = await stub.Rebuild(board_pb2.RebuildBoardRequest(), metadata=as_(tokens, "curator"))
    assert reply.boards == 2 and reply.log_position == projector.state.position and reply.events == reply.log_position
    assert REGISTRY.get_sample_value("kb_board_rebuild_seconds_count") >= 1


async def test_watch_board_sends_the_board_then_each_change(served):
    stub, tokens, projector, log, _ = served
    stream = stub.WatchBoard(board_pb2.WatchBoardRequest(version=1), metadata=as_(tokens, "alice"))
    first = await asyncio.wait_for(stream.read(), 10)
    assert [e.route for e in first.ranked] == ["tiled", "fast"]

    # An event that changes nothing on board 1 (a commit on board 2, which is in force) is not sent ...
    quiet = events_pb2.CommitIngested(route="fast", owner="alice", kind=events_pb2.COMMIT_KIND_ROUTE)
    better = check("naive", 1, passed=True, score=5.0, check_id="9")
    appended = await append_all(
        log,
        [
            ("route:fast", NewEvent(quiet, actor="alice", occurred_at=first_time(first))),
            ("check:9", NewEvent(better, actor="system:verifier", verifier_version=1, occurred_at=first_time(first))),
        ],
    )
    for event in appended:
        async with log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)
    second = await asyncio.wait_for(stream.read(), 10)
    assert [e.route for e in second.ranked] == ["naive", "tiled", "fast"]
    assert second.log_position == appended[-1].global_position
    stream.cancel()


def first_time(view):
    from datetime import datetime

    return datetime.fromisoformat(view.header.last_active.replace("Z", "+00:00"))


async def test_maintainers_adopt_routes_and_set_a_boards_status_through_the_log(served):
    stub, tokens, projector, log, _ = served
    curator, alice = as_(tokens, "curator"), as_(tokens, "alice")
    denied = await rpc_error(stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="tiled", adopted=True), metadata=alice))
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    absent = await rpc_error(
        stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="tiled", version=2, adopted=True), metadata=curator)
    )
    assert (absent.code(), absent.details()) == (grpc.StatusCode.NOT_FOUND, "route 'tiled' is not on board 2")
    bogus = await rpc_error(
        stub.SetBenchmarkStatus(board_pb2.SetBenchmarkStatusRequest(version=1, status="done"), metadata=curator)
    )
    assert bogus.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bogus.details() == "status must be one of active, flawed, saturated, superseded, not 'done'"
    no_reason = await rpc_error(
        stub.SetBenchmarkStatus(board_pb2.SetBenchmarkStatusRequest(version=1, status="flawed"), metadata=curator)
    )
    assert no_reason.details() == "a reason is required to mark a board flawed"

    adopted = await stub.AdoptRoute(
        board_pb2.AdoptRouteRequest(route="tiled", version=1, adopted=True, note="merged into main"), metadata=curator
    )
    await stub.AdoptRoute(board_pb2.AdoptRouteRequest(route="fast", version=1, adopted=False), metadata=curator)
    flawed = await stub.SetBenchmarkStatus(
        board_pb2.SetBenchmarkStatusRequest(version=1, status="flawed", reason="timer leak"), metadata=curator
    )
    appended = [e async for e in log.read_all(adopted.global_position - 1)]
    assert [e.actor for e in appended] == ["curator"] * 3
    assert appended[-1].global_position == flawed.global_position
    for event in appended:  # what the consumer does once the relay publishes them
        async with log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)
    view = await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=alice)
    assert (view.status, view.status_reason) == ("flawed", "timer leak")
    assert [(e.route, e.adopted) for e in view.ranked] == [("tiled", True), ("fast", False)]


async def fold_new(projector, log, since: int) -> None:
    """What the consumer does once the relay publishes the events appended after ``since``."""
    for event in [e async for e in log.read_all(since)]:
        async with log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)


async def test_a_maintainer_in_person_disqualifies_a_check_after_the_fact_and_reinstates_it(served):
    stub, tokens, projector, log, _ = served
    curator, alice = as_(tokens, "curator"), as_(tokens, "alice")
    async with log.pool.acquire() as conn:
        await auth.register_principal(conn, "curator/bot", auth.AGENT, "curator", 0, log=log, actor="system:admin")
        bot = (("authorization", f"Bearer {await auth.issue_token(conn, 'curator/bot')}"),)
    cheat = "6f1c2d3e-0000-4000-8000-00000000c0de"
    before = log_position = projector.state.position
    checked = NewEvent(check("fast", 1, passed=True, score=40.0, check_id=cheat), "system:verifier", verifier_version=1)
    await append_all(log, [("check:cheat", checked)])
    await fold_new(projector, log, log_position)
    board = await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=alice)
    assert [(e.route, e.score) for e in board.ranked][0] == ("fast", 40.0)

    def ask(check_id=cheat, reason="outputs cached on pointers", reinstate=False):
        return board_pb2.DisqualifyCheckRequest(check_id=check_id, reason=reason, reinstate=reinstate)

    for who, words in ((alice, "maintainer role needed"), (bot, "only a maintainer in person")):
        denied = await rpc_error(stub.DisqualifyCheck(ask(), metadata=who))
        assert denied.code() == grpc.StatusCode.PERMISSION_DENIED and words in denied.details()
    for request, code, words in (
        (ask(reason="  "), grpc.StatusCode.INVALID_ARGUMENT, "a reason is required to disqualify a check"),
        (ask(check_id="not-a-check"), grpc.StatusCode.INVALID_ARGUMENT, "is not a check id"),
        (ask(check_id="6f1c2d3e-0000-4000-8000-000000000000"), grpc.StatusCode.NOT_FOUND, "no verified check"),
        (ask(reinstate=True), grpc.StatusCode.FAILED_PRECONDITION, "not disqualified: nothing to reinstate"),
    ):
        refused = await rpc_error(stub.DisqualifyCheck(request, metadata=curator))
        assert (refused.code(), words in refused.details()) == (code, True), refused.details()
    assert [e async for e in log.read_all(projector.state.position)] == [], "a refused request appended an event"

    done = await stub.DisqualifyCheck(ask(), metadata=curator)
    await fold_new(projector, log, done.global_position - 1)
    board = await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=alice)
    assert [(e.route, e.score, e.check_id) for e in board.ranked] == [("tiled", 3.0, ""), ("fast", 2.5, "3")]
    [marked] = [e for e in board.listed_beside if e.source == "disqualified"]
    assert (marked.route, marked.score, marked.check_id) == ("fast", 40.0, cheat)  # kept, as evidence
    assert (marked.reporter, marked.reason) == ("curator", "outputs cached on pointers")
    assert "disqualified by curator: outputs cached on pointers" in render.render_board(board)
    again = await rpc_error(stub.DisqualifyCheck(ask(), metadata=curator))
    assert again.code() == grpc.StatusCode.FAILED_PRECONDITION and "disqualified already" in again.details()

    back = await stub.DisqualifyCheck(ask(reason="the cache was the harness's", reinstate=True), metadata=curator)
    await fold_new(projector, log, back.global_position - 1)
    board = await stub.GetBoard(board_pb2.GetBoardRequest(version=1), metadata=alice)
    assert [(e.route, e.score) for e in board.ranked][0] == ("fast", 40.0)
    assert not [e for e in board.listed_beside if e.source == "disqualified"]
    route = await stub.GetRoute(board_pb2.GetBoardRouteRequest(route="fast", version=1), metadata=alice)
    assert [(r.kind, r.reporter, r.note) for r in route.boards[0].history[-2:]] == [
        ("disqualified", "curator", "outputs cached on pointers"),
        ("reinstated", "curator", "the cache was the harness's"),
    ]
    assert "reinstated by curator: the cache was the harness's" in render.render_route(route)
    assert before < projector.state.position
