"""Adapters: the board service's read RPCs, and ingest's reads of issues and pull requests, called as the web's own
service identity (system:web), which contracts/access.py lets read them (READ_THREADS) and write nothing.

The web board reads the same projection GetBoard serves, through GetBoard itself: it ranks nothing of its own.
"""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from kernelboard.v1 import board_pb2, board_pb2_grpc, ingest_pb2, ingest_pb2_grpc

from contracts import names
from services.common import metrics
from services.common.config import Settings

# A page waits this long for the board service; past it the page says the board is unavailable (503).
CALL_TIMEOUT_S = 5.0

UPSTREAM_ERRORS = metrics.counter(
    "kb_web_board_errors_total",
    "Calls from the web board to the board service that failed, by method and gRPC status.",
    ("method", "code"),
)


class MissingToken(Exception):
    """The web's token file is missing: `make up` (services.ingest.seed) writes it, or KB_WEB_TOKEN_FILE names one."""


def token_path(settings: Settings, environ=None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("KB_WEB_TOKEN_FILE") or settings.home / "web.token")


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        raise MissingToken(
            f"no token for {names.WEB} at {path}: run `make up` (its seed writes it) or "
            f"`kb admin token issue {names.WEB}` into a file named by KB_WEB_TOKEN_FILE"
        ) from None
    if not token:
        raise MissingToken(f"the token file {path} is empty")
    return token


class _SignedIn:
    """One channel to a service whose every call is signed in with the web's token, bounded by CALL_TIMEOUT_S and
    counted in UPSTREAM_ERRORS when it fails."""

    stub_type: type

    def __init__(self, address: str, token: str):
        self.address = address
        self._channel = grpc.aio.insecure_channel(address)
        self._stub = self.stub_type(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),)

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request):
        try:
            return await getattr(self._stub, method)(request, metadata=self._metadata, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            UPSTREAM_ERRORS.labels(method, err.code().name).inc()
            raise


class BoardSource(_SignedIn):
    """GetBoard, ListBoards, GetRoute and WatchBoard on one channel, each call signed in with the web's token."""

    stub_type = board_pb2_grpc.BoardStub

    async def board(self, version: int) -> board_pb2.BoardView:
        return await self._call("GetBoard", board_pb2.GetBoardRequest(version=version))

    async def problems(self, version: int) -> board_pb2.BoardProblems:
        return await self._call("GetProblems", board_pb2.GetBoardRequest(version=version))

    async def boards(self) -> list[board_pb2.BoardView]:
        return list((await self._call("ListBoards", board_pb2.ListBoardsRequest())).boards)

    async def route(self, route: str, version: int = 0) -> board_pb2.BoardRoute:
        return await self._call("GetRoute", board_pb2.GetBoardRouteRequest(route=route, version=version))

    async def watch(self, version: int) -> AsyncIterator[board_pb2.BoardView]:
        """The board now, then each change (WatchBoard); ends when the stream does, raising its error."""
        call = self._stub.WatchBoard(board_pb2.WatchBoardRequest(version=version), metadata=self._metadata)
        try:
            async for view in call:
                yield view
        except grpc.aio.AioRpcError as err:
            UPSTREAM_ERRORS.labels("WatchBoard", err.code().name).inc()
            raise
        finally:
            call.cancel()

    async def readable(self) -> str:
        """'' when this process can read the board (GetBoard answers, or says no board exists yet); else why not."""
        try:
            await self.board(0)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:
                return ""
            if err.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return f"the board service refuses the token of {names.WEB} ({err.code().name})"
            return f"the board service does not answer ({err.code().name})"
        return ""


THREAD_PAGE = 50  # issues and comments per page, as ingest pages them


class ThreadSource(_SignedIn):
    """Ingest's GetIssue, ListIssues, GetPullRequest, ListPullRequests and ListComments, signed in as system:web."""

    stub_type = ingest_pb2_grpc.IngestStub

    async def issues(self, state: str, page_token: str) -> ingest_pb2.ListIssuesReply:
        request = ingest_pb2.ListIssuesRequest(state=state, page_size=THREAD_PAGE, page_token=page_token)
        return await self._call("ListIssues", request)

    async def issue(self, number: int) -> ingest_pb2.Issue:
        return await self._call("GetIssue", ingest_pb2.GetIssueRequest(number=number))

    async def pulls(self, state: str) -> list[ingest_pb2.PullRequest]:
        reply = await self._call("ListPullRequests", ingest_pb2.ListPullRequestsRequest(state=state))
        return list(reply.pull_requests)

    async def pull(self, number: int) -> ingest_pb2.PullRequest:
        return await self._call("GetPullRequest", ingest_pb2.GetPullRequestRequest(number=number))

    async def comments(self, *, issue: int = 0, pull: int = 0) -> list[ingest_pb2.Comment]:
        """Every comment of one thread, oldest first (the pages followed)."""
        thread = {"issue_number": issue} if issue else {"pull_number": pull}  # one of the oneof, never both
        request = ingest_pb2.ListCommentsRequest(**thread, page_size=THREAD_PAGE)
        comments = []
        while True:
            reply = await self._call("ListComments", request)
            comments += reply.comments
            if not reply.next_page_token:
                return comments
            request.page_token = reply.next_page_token
