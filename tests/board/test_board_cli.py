"""``kb board`` end to end: the kb entry point, its stored sign-in, a real board server."""

import asyncio
import json
import os
import sys
from asyncio.subprocess import PIPE


async def run_kb(served, *argv, token="alice"):
    """``kb board ARGV`` in its own process (the console entry point's module), signed in as ``token``."""
    env = {
        **os.environ,
        "KB_TOKEN": served[1][token],
        "KB_BOARD_ADDR": served[4],
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "board", *argv, env=env, stdout=PIPE, stderr=PIPE
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
    assert code == 0 and out.splitlines()[0].startswith("version 1  quiet")
