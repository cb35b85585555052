"""The verifier end to end on the CPU: events through the relay and NATS to its consumer, the real check script
running the real harness (smoke shapes, TRITON_INTERPRET=1) in the sandbox, and the gRPC API watching it happen."""

import asyncio
import json
import re

import grpc
import pytest
from kernelboard.v1 import verifier_pb2

from contracts.metrics import VERIFIER_VERSION
from services.cli.main import main as kb_main
from services.common import metrics
from services.verifier.api import queue_places
from tests.verifier.conftest import (
    REPO,
    approve_rules,
    metrics_script,
    project_rules,
    push_route,
    rules_with_checks,
)

CHECK_ROW = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}  ")
REFERENCE_ROUTE = {"new_gelu.py": (REPO / "tests/harness/routes/reference/new_gelu.py").read_text()}
CHEATING_ROUTE = {"new_gelu.py": (REPO / "tests/harness/cheats/c03_input_mutation/new_gelu.py").read_text()}


async def test_pushed_routes_are_verified_and_watched_over_grpc(log, repo, service):
    stub, signed_in = service.stub, service.signed_in
    rules_commit = await approve_rules(log, repo, project_rules())
    good_sha, _ = await push_route(log, repo, "good", REFERENCE_ROUTE, rules_commit)
    cheat_sha, _ = await push_route(log, repo, "cheat", CHEATING_ROUTE, rules_commit)

    seen: dict[str, list[str]] = {}
    final: dict[str, verifier_pb2.Check] = {}
    watch = stub.WatchChecks(verifier_pb2.ListChecksRequest(), metadata=signed_in)
    async with asyncio.timeout(400):  # two 12-problem smoke checks on a busy 2-core machine
        async for check in watch:
            seen.setdefault(check.route, []).append(check.state)
            if check.state in ("passed", "failed"):
                final[check.route] = check
            if len(final) == 2:
                break
    watch.cancel()

    good, cheat = final["good"], final["cheat"]
    assert "queued" in seen["good"] + seen["cheat"] and "running" in seen["good"]
    assert good.state == "passed", list(good.result.reasons)
    result = good.result
    assert result.passed and (result.sha, result.route, result.rules_commit) == (good_sha, "good", rules_commit)
    assert (result.runner, result.check_name, result.benchmark_version) == ("cpu", "verify", 2)  # the bundled rules
    assert result.torch_version and result.triton_version and result.duration_s > 0
    assert not result.verified and any("CPU profile" in why for why in result.not_verified_because)
    assert [s.id for s in result.subtasks] == project_rules()["benchmark"]["kernels"]
    [gelu] = [s for s in result.subtasks if s.id == "new_gelu"]
    assert gelu.submitted and gelu.passed and gelu.speedup > 0
    assert all(not s.submitted and s.speedup == 1 for s in result.subtasks if s.id != "new_gelu")
    assert 0.2 < result.score < 5

    assert cheat.state == "failed" and cheat.sha == cheat_sha
    assert any("class 3 (input mutation)" in reason for reason in cheat.result.reasons), list(cheat.result.reasons)

    # The log holds each CheckCompleted once, with the verifier's version on its envelope.
    [completed] = await log.read_stream(f"check:{good.check_id}", from_version=2)
    assert completed.type == "CheckCompleted" and completed.verifier_version == VERIFIER_VERSION == 2

    fetched = await stub.GetCheck(verifier_pb2.GetCheckRequest(check_id=good.check_id), metadata=signed_in)
    assert fetched.result == good.result and fetched.attempts == 1 and fetched.trigger_event_id
    listed = await stub.ListChecks(verifier_pb2.ListChecksRequest(sha=cheat_sha), metadata=signed_in)
    assert [c.check_id for c in listed.checks] == [cheat.check_id]
    by_route = await stub.ListChecks(verifier_pb2.ListChecksRequest(route="good"), metadata=signed_in)
    assert [c.check_id for c in by_route.checks] == [good.check_id]

    text = metrics.exposition()
    assert 'kb_verifier_checks_total{result="passed"}' in text
    assert 'kb_verifier_failures_total{reason="guardrail"}' in text
    assert 'kb_verifier_check_seconds_count{check="verify"}' in text
    assert "kb_verifier_queue_depth 0.0" in text


@pytest.mark.parametrize(
    ("call", "request_", "code", "words"),
    [
        ("GetCheck", verifier_pb2.GetCheckRequest(check_id="nope"), grpc.StatusCode.INVALID_ARGUMENT, "not a check id"),
        (
            "GetCheck",
            verifier_pb2.GetCheckRequest(check_id="00000000-0000-0000-0000-000000000000"),
            grpc.StatusCode.NOT_FOUND,
            "no check",
        ),
        ("ListChecks", verifier_pb2.ListChecksRequest(sha="abc"), grpc.StatusCode.INVALID_ARGUMENT, "40 lowercase"),
        ("ListChecks", verifier_pb2.ListChecksRequest(limit=5000), grpc.StatusCode.INVALID_ARGUMENT, "limit"),
    ],
)
async def test_bad_requests_get_a_status_naming_the_problem(service, call, request_, code, words):
    stub, signed_in = service.stub, service.signed_in
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await getattr(stub, call)(request_, metadata=signed_in)
    assert err.value.code() == code and words in err.value.details()


async def test_the_api_needs_a_signed_in_caller(service):
    stub = service.stub
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListChecks(verifier_pb2.ListChecksRequest())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_kb_checks_lists_and_shows_the_checks(log, repo, service, monkeypatch, capsys):
    quick = {"name": "quick", "script": "checks/quick.sh", "metrics": "quick.json", "time_limit_s": 60}
    rules_commit = await approve_rules(
        log, repo, rules_with_checks(quick), extra={"checks/quick.sh": metrics_script("")}
    )
    sha, _ = await push_route(log, repo, "listed", {"new_gelu.py": ""}, rules_commit)
    request = verifier_pb2.ListChecksRequest(sha=sha)
    async with asyncio.timeout(60):
        while [c.state for c in (await service.stub.ListChecks(request, metadata=service.signed_in)).checks] != [
            "passed"
        ]:
            await asyncio.sleep(0.2)
    monkeypatch.setenv("KB_VERIFIER_ADDR", service.address)
    monkeypatch.setenv("KB_TOKEN", service.token)

    # The CLI is synchronous: it runs in a thread while this loop serves it.
    assert await asyncio.to_thread(kb_main, ["checks", "--sha", sha]) == 0
    # (stdout also carries the in-process server's log lines: pick the table's row)
    [line] = [row for row in capsys.readouterr().out.splitlines() if CHECK_ROW.match(row)]
    # worded by contracts/results.py: a CPU pass is not verified, so it shows no score
    assert "listed" in line and sha[:12] in line and "quick" in line and "passed, unverified (CPU profile)" in line
    check_id = line.split()[0]
    assert await asyncio.to_thread(kb_main, ["checks", "list", "--route", "listed"]) == 0
    assert check_id in capsys.readouterr().out
    # --watch ends once every check it follows has ended (this one has), with the checks' verdict
    async with asyncio.timeout(60):
        assert await asyncio.to_thread(kb_main, ["checks", "--sha", sha, "--watch"]) == 0
    assert await asyncio.to_thread(kb_main, ["checks", check_id]) == 0
    shown_text = capsys.readouterr().out
    assert "result  passed, unverified (CPU profile)" in shown_text and "new_gelu  passed" in shown_text
    assert f"/route/listed/check/{check_id}" in shown_text
    # an unknown route is NOT_FOUND, as kb board --route says it
    assert await asyncio.to_thread(kb_main, ["checks", "--route", "nosuch"]) == 1
    assert "NOT_FOUND: no route 'nosuch' in the log" in capsys.readouterr().err
    assert await asyncio.to_thread(kb_main, ["checks", check_id, "--json"]) == 0
    [shown] = [json.loads(row) for row in capsys.readouterr().out.splitlines() if row.startswith('{"attempts"')]
    assert shown["state"] == "passed" and shown["result"]["subtasks"][0]["id"] == "new_gelu"
    assert await asyncio.to_thread(kb_main, ["checks", "--sha", "abc"]) == 1
    assert "INVALID_ARGUMENT" in capsys.readouterr().err


def test_a_queued_check_knows_its_place_and_about_when_it_starts():
    line = [("a", "running"), ("b", "running"), ("c", "queued"), ("d", "queued"), ("e", "queued")]
    places = queue_places(line, median_s=60.0)
    # two workers busy: c waits for one of them (2 checks ahead / 2 workers), d and e behind it
    assert places == {"c": (1, 60.0), "d": (2, 90.0), "e": (3, 120.0)}
    assert queue_places([("x", "queued")], median_s=0.0) == {"x": (1, 0.0)}
