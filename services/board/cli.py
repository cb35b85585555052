"""``kb board``: the board as the benchmark's page reads, a route's history, every board, and (maintainers) rebuild."""

import json
import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "board",
        help="the board: header, how results are judged, the ranked table, what is listed beside",
        description="Shows a benchmark version's board (default: the newest).",
    )
    parser.add_argument("--version", type=int, default=0, metavar="N", help="the benchmark version (default: newest)")
    parser.add_argument("--json", action="store_true", help="print the BoardView as JSON")
    parser.add_argument("--watch", action="store_true", help="follow the board live, printing it again on each change")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--route", metavar="NAME", help="a route's checks and reports over time instead of the board")
    what.add_argument("--list", action="store_true", help="every board, a line each")
    what.add_argument(
        "--problems", action="store_true", help="each problem's best verified speed-up across routes, and who holds it"
    )
    what.add_argument("--rebuild", action="store_true", help="maintainers: rebuild the projection from the log")
    what.add_argument("--adopt", metavar="ROUTE", help="maintainers: mark ROUTE adopted on the board")
    what.add_argument("--unadopt", metavar="ROUTE", help="maintainers: withdraw ROUTE's adopted mark")
    what.add_argument(
        "--set-status",
        choices=["active", "saturated", "superseded", "flawed"],
        help="maintainers: set the board's status (with --reason)",
    )
    parser.add_argument("--note", default="", help="with --adopt: why")
    parser.add_argument("--reason", default="", help="with --set-status: why")
    parser.set_defaults(handler=run)


def _json(message, *, indent: int | None = 2) -> str:
    from google.protobuf import json_format

    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return json.dumps(data, sort_keys=True, indent=indent)


def run(args) -> int:
    import grpc
    from kernelboard.v1 import board_pb2, board_pb2_grpc

    from contracts import results
    from services.board import render
    from services.cli import client

    try:
        metadata = client.metadata()
    except client.NotSignedIn as err:
        print(f"kb board: {err}", file=sys.stderr)
        return 1
    if args.version < 0:
        print(f"kb board: --version must be 0 (newest) or a benchmark version, not {args.version}", file=sys.stderr)
        return 2
    stub = board_pb2_grpc.BoardStub(client.channel("board"))
    try:
        if args.route:
            route = stub.GetRoute(
                board_pb2.GetBoardRouteRequest(route=args.route, version=args.version), metadata=metadata
            )
            print(_json(route) if args.json else render.render_route(route, client.web_url()))
        elif args.problems:
            view = stub.GetProblems(board_pb2.GetBoardRequest(version=args.version), metadata=metadata)
            print(_json(view) if args.json else render.render_problems(view))
        elif args.list:
            reply = stub.ListBoards(board_pb2.ListBoardsRequest(), metadata=metadata)
            if args.json:
                print(_json(reply))
            for view in [] if args.json else reply.boards:
                top = view.ranked[0] if view.ranked else None
                score = results.entry_verdict(top).score if top else ""
                best = f"top {top.route} {score} ({top.source})" if top else "no ranked scores"
                when = "earlier" if view.earlier else "current"
                print(f"version {view.version}  {when:<8} {view.status:<10} {len(view.ranked)} ranked  {best}")
        elif args.rebuild:
            reply = stub.Rebuild(board_pb2.RebuildBoardRequest(), metadata=metadata)
            print(
                _json(reply)
                if args.json
                else f"rebuilt {reply.boards} boards from {reply.events} events in {reply.seconds:.2f} s"
                f" (log position {reply.log_position})"
            )
        elif args.adopt or args.unadopt:
            request = board_pb2.AdoptRouteRequest(
                route=args.adopt or args.unadopt, version=args.version, adopted=bool(args.adopt), note=args.note
            )
            reply = stub.AdoptRoute(request, metadata=metadata)
            mark = "adopted" if args.adopt else "no longer adopted"
            print(f"{request.route} {mark} on board {reply.version} (log position {reply.global_position})")
        elif args.set_status:
            request = board_pb2.SetBenchmarkStatusRequest(
                version=args.version, status=args.set_status, reason=args.reason
            )
            reply = stub.SetBenchmarkStatus(request, metadata=metadata)
            print(f"board {reply.version} marked {args.set_status} (log position {reply.global_position})")
        elif args.watch:
            return _watch(stub, args, metadata, board_pb2, render)
        else:
            view = stub.GetBoard(board_pb2.GetBoardRequest(version=args.version), metadata=metadata)
            print(_json(view) if args.json else render.render_board(view))
    except grpc.RpcError as err:
        print(f"kb board: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    return 0


def _watch(stub, args, metadata, board_pb2, render) -> int:
    clear = sys.stdout.isatty() and not args.json
    try:
        for view in stub.WatchBoard(board_pb2.WatchBoardRequest(version=args.version), metadata=metadata):
            if args.json:
                print(_json(view, indent=None), flush=True)  # one board a line, for tools
            else:
                print(
                    ("\x1b[2J\x1b[H" if clear else "") + render.render_board(view) + ("" if clear else "\n"), flush=True
                )
    except KeyboardInterrupt:
        return 0
    return 0
