"""The verifier's checks as ``kb`` shows them (``kb checks``, ``kb push``): rows, one check in full, and following
checks until they end. Every result is worded by contracts/results.py, as on the web board.

grpc and the generated code are imported inside the functions, so that ``kb --help`` stays light.
"""

from collections.abc import Callable

from contracts import results
from services.common.text import table

HEADINGS = ["check", "route", "sha", "name", "result", "score", "runner"]
FOLLOW_HINT = "kb checks --sha {sha} --watch"  # what kb push prints for following its checks
CHECKS_APPEAR_S = 5.0  # kb push waits this long for the verifier to queue the pushed commit's checks
PUSH_WAIT_S = 120.0  # ... and with --wait, this long


def row(check) -> list[str]:
    verdict = results.live_verdict(check)
    runner = check.result.runner if check.HasField("result") else ""
    return [check.check_id, check.route or "-", check.sha[:12], check.check_name, verdict.label, verdict.score, runner]


def rows(checks) -> list[str]:
    return table(HEADINGS, [row(c) for c in checks], numeric=set(), indent="")


def page_url(check, web_url: str) -> str:
    return f"{web_url}{results.check_path(check.route, check.check_id)}" if check.route else ""


def in_full(check, web_url: str) -> list[str]:
    """One check: its verdict, what it ran on, every problem's line, every reason, and its page on the web board."""
    verdict = results.live_verdict(check)
    lines = [
        f"check {check.check_id} ({check.check_name}) of {check.route or 'job ' + check.job_id} {check.sha}",
        f"  result  {verdict.label}",
        f"  score   {verdict.score}",
    ]
    if check.HasField("result"):
        result = check.result
        lines.append(f"  ran on  {results.ran_with(result)}")
        lines.append(f"  rules   {result.rules_commit[:12] or check.rules_commit[:12]}")
        if result.subtasks:
            lines += ["", *table(results.PROBLEM_HEADINGS, results.problem_rows(result), numeric={2})]
        if result.reasons:
            lines += ["", "  reasons", *(f"  - {results.reason(r)}" for r in result.reasons)]
    url = page_url(check, web_url)
    if url and check.state in results.FINAL_STATES:
        lines += ["", f"  page    {url}"]
    return lines


def follow(stub, request, auth, wanted: set[str], on_change: Callable) -> dict:
    """WatchChecks until every check in ``wanted`` (ids) is final; ``on_change(check)`` for each change of one of
    them. Returns the final checks by id."""
    latest = {}
    call = stub.WatchChecks(request, metadata=auth)
    try:
        for check in call:
            if check.check_id not in wanted:
                continue
            before = latest.get(check.check_id)
            if before is None or (before.state, before.queue_position) != (check.state, check.queue_position):
                on_change(check)
            latest[check.check_id] = check
            if all(latest.get(i) is not None and latest[i].state in results.FINAL_STATES for i in wanted):
                break
    finally:
        call.cancel()
    return latest


def all_passed(checks) -> bool:
    return bool(checks) and all(results.live_verdict(c).state == "passed" for c in checks)


def _verifier():
    from kernelboard.v1 import verifier_pb2_grpc

    from services.cli.client import channel

    return verifier_pb2_grpc.VerifierStub(channel("verifier"))


def queued_for(route: str, sha: str, auth, wait_s: float) -> list:
    """The checks the verifier queued for a pushed commit, waiting up to ``wait_s`` for its intake to queue them
    (it follows the log, so they appear a moment after the push); [] when none appeared in time."""
    import time

    from kernelboard.v1 import verifier_pb2

    stub, deadline = _verifier(), time.monotonic() + wait_s
    while True:
        checks = list(stub.ListChecks(verifier_pb2.ListChecksRequest(route=route, sha=sha), metadata=auth).checks)
        if checks or time.monotonic() >= deadline:
            return checks
        time.sleep(0.3)


def follow_push(route: str, sha: str, checks: list, auth, print_line: Callable) -> bool:
    """``kb push --wait``: each change of the pushed commit's checks until all have ended; True when all passed."""
    from kernelboard.v1 import verifier_pb2

    wanted = {c.check_id for c in checks}
    request = verifier_pb2.ListChecksRequest(route=route, sha=sha)
    final = follow(_verifier(), request, auth, wanted, lambda c: print_line("  " + "  ".join(row(c)).rstrip()))
    return all_passed(final.values())


def after_push(args, data: dict, human: str, route: str, sha: str, emit: Callable) -> int:
    """`kb push`: the checks the push queued and how to follow them (also in --json); with --wait, follows them to the
    end and exits with their verdict (0 passed, 1 not)."""
    import json

    import grpc

    from services.cli.client import metadata, web_url

    follow = FOLLOW_HINT.format(sha=sha)
    answered = True
    try:
        queued = queued_for(route, sha, metadata(), PUSH_WAIT_S if args.wait else CHECKS_APPEAR_S)
    except grpc.RpcError as err:  # the push stands; only following it has to wait
        queued, answered = [], False
        human += f"\nthe verifier did not answer ({err.code().name}); later: {follow}"
    data["checks"] = [{"check_id": c.check_id, "check_name": c.check_name, "state": c.state} for c in queued]
    data["follow"] = follow
    data["pages"] = [page_url(c, web_url()) for c in queued]
    if queued:
        human += "\nchecks queued:\n" + "\n".join(rows(queued)) + f"\nfollow them: {follow}"
    elif answered:
        human += f"\nno check queued yet (the verifier queues it from the log); follow: {follow}"
    if not args.wait or not queued:
        emit(args, data, human)
        return 1 if args.wait else 0
    if not args.json:
        print(human, flush=True)
    passed = follow_push(route, sha, queued, metadata(), lambda line: None if args.json else print(line))
    final = queued_for(route, sha, metadata(), 0)
    data["checks"] = [{"check_id": c.check_id, "check_name": c.check_name, "state": c.state} for c in final]
    data["passed"] = passed
    print(
        json.dumps(data, indent=2, sort_keys=True)
        if args.json
        else "\n".join(line for c in final for line in in_full(c, web_url()))
    )
    return 0 if passed else 1
