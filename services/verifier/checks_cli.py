"""``kb checks``: the verifier's checks of routes and commits -- list, show one, or watch them as they run.

grpc and the generated code are imported inside the handler, so that ``kb --help`` stays light.
"""

import json
import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "checks",
        help="list, show or watch the verifier's checks",
        description="Without CHECK_ID: the checks (newest first), filtered by --route/--sha; --watch follows them.",
    )
    parser.add_argument("check_id", nargs="?", metavar="CHECK_ID", help="show this check in full")
    parser.add_argument("--route", default="", help="only this route's checks")
    parser.add_argument("--sha", default="", help="only the checks of this commit (full 40-character id)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many (default 100)")
    parser.add_argument("--watch", action="store_true", help="print each check again whenever it changes")
    parser.add_argument("--json", action="store_true", help="JSON output")
    parser.set_defaults(handler=_handle)


def _row(check) -> str:
    result = check.result
    score = f"{result.score:.4f}" if check.state in ("passed", "failed") else "-"
    line = (
        f"{check.check_id}  {check.route or '-':<16} {check.sha[:12]}  {check.check_name:<10} {check.state:<8} {score}"
    )
    if check.state in ("passed", "failed"):
        line += f"  {result.runner or '-'}"
    if result.reasons:
        line += "  " + "; ".join(result.reasons[:3])
    return line


def _print(check, as_json: bool) -> None:
    if as_json:
        from google.protobuf import json_format

        print(json.dumps(json_format.MessageToDict(check), sort_keys=True), flush=True)
    else:
        print(_row(check), flush=True)


def _handle(args) -> int:
    import grpc
    from kernelboard.v1 import verifier_pb2, verifier_pb2_grpc

    from services.cli.client import NotSignedIn, channel, metadata

    try:
        stub = verifier_pb2_grpc.VerifierStub(channel("verifier"))
        auth = metadata()
        if args.check_id:
            check = stub.GetCheck(verifier_pb2.GetCheckRequest(check_id=args.check_id), metadata=auth)
            if args.json:
                _print(check, True)
            else:
                print(_row(check))
                for subtask in check.result.subtasks:
                    mark = "passed" if subtask.passed else ("-" if not subtask.submitted else "FAILED")
                    print(f"  {subtask.id:<20} {mark:<7} speed-up {subtask.speedup:.3f}")
                    for violation in subtask.violations:
                        print(f"    {violation}")
            return 0
        request = verifier_pb2.ListChecksRequest(route=args.route, sha=args.sha, limit=args.limit)
        if args.watch:
            for check in stub.WatchChecks(request, metadata=auth):
                _print(check, args.json)
            return 0
        for check in stub.ListChecks(request, metadata=auth).checks:
            _print(check, args.json)
        return 0
    except grpc.RpcError as err:
        print(f"kb: {err.code().name}: {err.details()}", file=sys.stderr)
    except NotSignedIn as err:
        print(f"kb: {err}", file=sys.stderr)
    return 1
