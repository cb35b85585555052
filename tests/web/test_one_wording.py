"""One story on every surface: the same log rendered through `kb board`, `kb board --route`, `kb checks ID`,
`kb verify`'s summary, the web route page and the web check page words each check alike (contracts/results.py).

The checks cover every state a result can be in: passed and verified with a noise interval, failed, passed
unverified (a CPU profile), and incomplete (a problem the judge could not judge)."""

import asyncio
import html
import os
import re
import sys
from asyncio.subprocess import PIPE

import pytest
from google.protobuf import json_format
from kernelboard.v1 import verifier_pb2

from contracts import results
from services.cli import checks as kb_checks
from services.verifier.harness.main import summary

from .test_web_http import get
from .web_events import NOT_JUDGED, seeded

# check id -> (route, what every surface must say: result, score)
EXPECTED = {
    "101": ("old", "passed, verified", "1.700 (1.650–1.750)"),
    "206": ("markup", "failed", "—"),
    "207": ("smoke", "passed, unverified (CPU profile)", "—"),
    "208": ("halfway", "incomplete: 1 problem not judged", "—"),
}


def completed(check_id: str):
    return next(e.payload for _, e in seeded() if getattr(e.payload, "check_id", None) == check_id)


async def kb(stack, *argv) -> str:
    env = {
        **os.environ,
        "KB_TOKEN": stack.tokens["curator"],
        "KB_BOARD_ADDR": stack.board_address,
        "KB_WEB_URL": stack.web_url,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", *argv, env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


def page_text(body: str) -> str:
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", body).split()))


def verify_summary(check) -> str:
    """`kb verify`'s summary of the same result, from the metrics document the harness writes."""
    document = json_format.MessageToDict(
        check, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    document.update(wall_s=1.0, torch=check.torch_version, triton=check.triton_version)
    return summary(document, "/tmp/metrics.json")


@pytest.mark.parametrize("check_id", sorted(EXPECTED))
async def test_a_check_reads_the_same_on_every_surface(stack, check_id):
    route, label, score = EXPECTED[check_id]
    check = completed(check_id)
    verdict = results.check_verdict(check)
    assert (verdict.label, verdict.score) == (label, score)

    # kb checks ID and kb verify: the same result and score lines, every problem's line
    finished = verifier_pb2.Check(check_id=check_id, route=route, sha=check.sha, state="failed", result=check)
    shown = "\n".join(kb_checks.in_full(finished, stack.web_url))
    local = verify_summary(check)
    for text in (shown, local):
        assert f"result  {label}\n" in text and f"score   {score}\n" in text
        for subtask in check.subtasks:
            assert re.search(rf"^\s*{subtask.id}\s+{re.escape(results.problem_result(subtask))}", text, re.M)
    assert f"page    {stack.web_url}/route/{route}/check/{check_id}" in shown

    # the web check page: the same words, the same per-problem lines, what it ran beside the baseline
    status, body, _ = await get(stack, f"/route/{route}/check/{check_id}")
    assert status == 200
    assert re.search(r'id="check-result"[^>]*>([^<]*)<', body).group(1) == html.escape(label)
    assert re.search(r'id="check-score">([^<]*)<', body).group(1) == score
    assert f"torch {check.torch_version}" in page_text(body) and "the rules' baseline: PyTorch eager" in body
    for subtask in check.subtasks:
        row = re.search(rf'<tr data-problem="{subtask.id}">(.*?)</tr>', body, re.S).group(1)
        assert page_text(row).startswith(f"{subtask.id} {results.problem_result(subtask)}")

    # the route page and kb board --route: the check's row in the history says the same, and links its page
    status, body, _ = await get(stack, f"/route/{route}")
    row = re.search(rf'<tr data-position="\d+">((?:(?!</tr>).)*?/check/{check_id}".*?)</tr>', body, re.S).group(1)
    assert f"{score} {label}" in page_text(row)
    text = await kb(stack, "board", "--route", route)
    [line] = [line for line in text.splitlines() if f" {check_id} " in f"{line} "]
    assert re.split(r"\s{2,}", line.strip())[4:7] == [score, label, check_id]  # sha, score, result, check


async def test_an_incomplete_check_says_which_problem_was_not_judged_and_why(stack):
    status, body, _ = await get(stack, "/route/halfway/check/208")
    assert status == 200
    assert f"not judged: {NOT_JUDGED}" in page_text(body)
    board = await kb(stack, "board")
    [line] = [line for line in board.splitlines() if line.startswith("  halfway")]
    assert "incomplete: 1 problem not judged" in line and f"matmul: {NOT_JUDGED}" in line and " — " in line


async def test_a_route_page_links_each_check_and_an_unknown_check_is_not_found(stack):
    status, body, _ = await get(stack, "/route/fast")
    assert 'href="/route/fast/check/202"' in body and 'href="/route/fast/check/201"' in body
    status, body, _ = await get(stack, "/route/fast/check/999")
    assert status == 404 and "no finished check &#39;999&#39;" in body and "kb checks 999 --watch" in body
