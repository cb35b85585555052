"""``kb checks``: the verifier's checks of routes and commits -- list them, show one, or follow them until they end.

grpc and the generated code are imported inside the handler, so that ``kb --help`` stays light.
"""

import json
import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "checks",
        help="list the verifier's checks, show one in full, or follow them until they end",
        description=(
            "kb checks [list] [--route R] [--sha SHA]: the checks, newest first (a queued one with its place in line "
            "and an estimate). kb checks CHECK_ID: one check in full, every problem and reason, and its web page. "
            "--watch: print each change until every check it follows has ended (exit 0 all passed, 1 otherwise)."
        ),
    )
    parser.add_argument("check_id", nargs="?", metavar="CHECK_ID|list", help="show this check in full; 'list': list")
    parser.add_argument("--route", default="", help="only this route's checks")
    parser.add_argument("--sha", default="", help="only the checks of this commit (full 40-character id)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many (default 100)")
    parser.add_argument("--watch", action="store_true", help="follow them until each has ended (passed or failed)")
    parser.add_argument("--json", action="store_true", help="JSON output, a check a line")
    parser.set_defaults(handler=_handle)


def _json(check) -> str:
    from google.protobuf import json_format

    return json.dumps(json_format.MessageToDict(check, preserving_proto_field_name=True), sort_keys=True)


def _handle(args) -> int:
    import grpc
    from kernelboard.v1 import verifier_pb2, verifier_pb2_grpc

    from contracts import results
    from services.cli import checks as shown
    from services.cli.client import NotSignedIn, channel, metadata, web_url

    try:
        stub = verifier_pb2_grpc.VerifierStub(channel("verifier"))
        auth = metadata()
        if args.check_id and args.check_id != "list":
            check = stub.GetCheck(verifier_pb2.GetCheckRequest(check_id=args.check_id), metadata=auth)
            if args.watch and check.state not in results.FINAL_STATES:
                request = verifier_pb2.ListChecksRequest(route=check.route, sha=check.sha)
                check = shown.follow(stub, request, auth, {check.check_id}, lambda c: None)[check.check_id]
            print(_json(check) if args.json else "\n".join(shown.in_full(check, web_url())))
            return 0 if not args.watch or shown.all_passed([check]) else 1
        request = verifier_pb2.ListChecksRequest(route=args.route, sha=args.sha, limit=args.limit)
        checks = list(stub.ListChecks(request, metadata=auth).checks)
        if args.json:
            for check in checks:
                print(_json(check))
        else:
            print("\n".join(shown.rows(checks)) if checks else "no checks")
        if not args.watch:
            return 0
        wanted = {c.check_id for c in checks if c.state not in results.FINAL_STATES}
        if not wanted:
            return 0
        request.limit = 0
        final = shown.follow(
            stub,
            request,
            auth,
            wanted,
            lambda c: print(_json(c) if args.json else "\n".join(shown.rows([c])[2:]), flush=True),
        )
        return 0 if shown.all_passed(final.values()) else 1
    except grpc.RpcError as err:
        print(f"kb checks: {err.code().name}: {err.details()}", file=sys.stderr)
    except NotSignedIn as err:
        print(f"kb checks: {err}", file=sys.stderr)
    return 1
