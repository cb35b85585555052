"""``kb board`` end to end: the kb entry point, its stored sign-in, a real board server."""

import asyncio
import json
import os
import sys
from asyncio.subprocess import PIPE

from services.common.eventlog import NewEvent

from .board_events import append_all, check, scenario


async def run_kb(served, *argv, token="alice", command=("board",)):
    """``kb board ARGV`` in its own process (the console entry point's module), signed in as ``token``."""
    env = {
        **os.environ,
        "KB_TOKEN": served[1][token],
        "KB_BOARD_ADDR": served[4],
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", *command, *argv, env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()


async def test_kb_board_prints_the_newest_board_and_a_chosen_version(served):
    code, out, _ = await run_kb(served, "--version", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "KernelBench operators, benchmark version 1 [quiet: no route scored for 14 days]"
    assert "How results are judged" in out and "Listed beside (unranked)" in out
    assert any(line.split()[:3] == ["1", "tiled", "3.000"] for line in lines)

    code, out, _ = await run_kb(served, "--json")
    assert code == 0 and json.loads(out)["version"] == 2


async def test_kb_board_says_what_went_wrong(served):
    code, _, err = await run_kb(served, "--version", "9")
    assert code == 1 and err.strip() == "kb board: NOT_FOUND: no board for benchmark version 9 (boards: 1, 2)"
    code, _, err = await run_kb(served, "--rebuild")
    assert code == 1 and "PERMISSION_DENIED: maintainer role needed to rebuild the board" in err
    code, out, _ = await run_kb(served, "--rebuild", token="curator")
    assert code == 0 and out.startswith("rebuilt 2 boards from ")
    code, out, _ = await run_kb(served, "--route", "fast")
    assert code == 0 and out.startswith("route fast (owner alice")
    code, out, _ = await run_kb(served, "--list")
    assert code == 0 and out.splitlines()[0].startswith("version 1  earlier  quiet")
    assert out.splitlines()[1].startswith("version 2  current")
    code, out, _ = await run_kb(served, "--version", "1")
    assert code == 0 and "an earlier board, kept read-only: new checks land on the current board, version 2" in out
    code, out, _ = await run_kb(served, "--version", "1", "--json")
    assert code == 0 and (json.loads(out)["earlier"], json.loads(out)["current_version"]) == (True, 2)


async def test_kb_board_watch_prints_the_board_again_when_it_changes(served):
    _, tokens, projector, log, address = served
    env = {**os.environ, "KB_TOKEN": tokens["alice"], "KB_BOARD_ADDR": address}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "board", "--watch", "--json", "--version", "1", env=env, stdout=PIPE
    )
    try:
        first = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        assert [e["route"] for e in first["ranked"]] == ["tiled", "fast"]
        (event,) = await append_all(log, scenario(start_minute=90)[2:3])  # fast passes again: 2.0 < 2.5 best
        better = check("slow", 1, passed=True, score=9.5, check_id="s")
        (event2,) = await append_all(log, [("check:s", NewEvent(better, actor="v", verifier_version=1))])
        for each in (event, event2):
            async with log.pool.acquire() as conn, conn.transaction():
                await projector.handle(conn, each)
        # Each change prints the board again, a line each, until it shows the new leader.
        changed = first
        while not changed["ranked"] or changed["ranked"][0]["route"] != "slow":
            changed = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
            assert int(changed["log_position"]) > int(first["log_position"])
    finally:
        process.terminate()
        await process.wait()


async def test_kb_admin_disqualify_and_reinstate_as_a_maintainer_signed_in(served):
    cheat = "6f1c2d3e-0000-4000-8000-0000000000aa"
    _, _, projector, log, _ = served
    since = projector.state.position
    checked = NewEvent(check("naive", 1, passed=True, score=7.0, check_id=cheat), "system:verifier", verifier_version=1)
    await append_all(log, [("check:cheat", checked)])
    for event in [e async for e in log.read_all(since)]:
        async with log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)
    admin = ("admin", "disqualify")
    code, _, err = await run_kb(served, cheat, "--reason", "L2 trick", command=admin)
    assert code == 1 and "PERMISSION_DENIED: maintainer role needed to disqualify" in err
    code, out, _ = await run_kb(served, cheat, "--reason", "L2 trick", token="curator", command=admin)
    assert code == 0 and out.startswith(f"check {cheat} disqualified on board 1 (log position ")
    code, _, err = await run_kb(served, cheat, "--reason", "L2 trick", token="curator", command=admin)
    assert code == 1 and err.strip() == f"kb: FAILED_PRECONDITION: check {cheat} is disqualified already"
    reinstate = (cheat, "--reinstate", "--reason", "fine", "--json")
    code, out, _ = await run_kb(served, *reinstate, token="curator", command=admin)
    assert code == 0 and json.loads(out)["reinstated"] is True


async def test_kb_board_problems_prints_each_problems_best_verified_speedup(served):
    _, _, projector, log, _ = served
    since = projector.state.position
    fast = check("tiled", 1, passed=True, score=1.1, check_id="p1")
    fast.subtasks.add(id="matmul", submitted=True, passed=True, speedup=2.25)
    fast.subtasks.add(id="kl_div", submitted=False, passed=True, speedup=1.0)
    await append_all(log, [("check:p1", NewEvent(fast, "system:verifier", verifier_version=1))])
    for event in [e async for e in log.read_all(since)]:
        async with log.pool.acquire() as conn, conn.transaction():
            await projector.handle(conn, event)
    code, out, _ = await run_kb(served, "--problems", "--version", "1")
    lines = out.splitlines()
    assert code == 0 and "the best verified speed-up on each problem" in lines[0], out
    assert [line.split()[:3] for line in lines if line.split()[:1] == ["matmul"]] == [["matmul", "2.250×", "tiled"]]
    assert any(line.split()[:2] == ["kl_div", "—"] and "no verified speed-up yet" in line for line in lines), out
    code, out, _ = await run_kb(served, "--problems", "--version", "1", "--json")
    problems = json.loads(out)["problems"]
    assert len(problems) == 12 and problems[0]["route"] == "tiled" and problems[0]["check_id"] == "p1"
