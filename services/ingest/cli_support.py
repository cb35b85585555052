"""What every ``kb`` command of the hosted repository shares: its error, the ingest stub, output, git, pages of a
list, and how a command is registered. cli.py and pulls_cli.py both build on it."""

import json
import subprocess
import sys
from pathlib import Path

from services.cli.client import NotSignedIn, channel, metadata


class CliError(Exception):
    pass


def stub():
    from kernelboard.v1 import ingest_pb2_grpc

    return ingest_pb2_grpc.IngestStub(channel("ingest"))


def emit(args, data: dict, human: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else human)


def git(*args: str, cwd: str | Path | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise CliError(f"git {' '.join(args[:2])}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def git_bytes(*args: str, cwd: str | Path | None = None) -> tuple[int, bytes, str]:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace").strip()


def handler(fn):
    """Run a command, turning service and git errors into one line on stderr and exit status 1."""

    def run(args) -> int:
        import grpc

        try:
            return fn(args) or 0
        except grpc.RpcError as err:
            print(f"kb: {err.code().name}: {err.details()}", file=sys.stderr)
        except (CliError, NotSignedIn) as err:
            print(f"kb: {err}", file=sys.stderr)
        return 1

    return run


def when(stamp) -> str:
    return stamp.ToDatetime().strftime("%Y-%m-%d %H:%M") if stamp.seconds else ""


def comment_dict(c) -> dict:
    return {"id": c.id, "author": c.author, "body": c.body, "created_at": when(c.created_at)}


def all_pages(call, request, field: str, limit: int) -> list:
    """Follow a list's cursor until its last page or ``limit`` items (0: no limit)."""
    items = []
    while True:
        reply = call(request, metadata=metadata())
        items += list(getattr(reply, field))
        if not reply.next_page_token or (limit and len(items) >= limit):
            return items[:limit] if limit else items
        request.page_token = reply.next_page_token


def add(subparsers, name: str, fn, help_: str):
    parser = subparsers.add_parser(name, help=help_, description=help_)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=fn)
    return parser


def group(subparsers, name: str, help_: str):
    parser = subparsers.add_parser(name, help=help_, description=help_)
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)
