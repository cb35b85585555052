"""The web board's pages of the project's conversation: issues and pull requests, read-only and public as the board
is, read through ingest's RPCs as system:web (source.ThreadSource). A pull request's reviews are worded by
contracts/threads.py, as `kb pr` words them; its checks are the board's view of its route (a link)."""

import grpc
from aiohttp import web

from contracts import names, results, threads
from services.web.source import BoardSource, ThreadSource

THREADS = web.AppKey("threads", ThreadSource)
ISSUE_STATES = {"open": "open", "closed": "closed", "all": ""}
PULL_STATES = {"open": "open", "merged": "merged", "all": ""}


def stamp(timestamp) -> str:
    """A protobuf Timestamp as every page says a time (contracts.results.when)."""
    return results.when(timestamp.ToJsonString()) if timestamp.seconds else ""


def _state(request: web.Request, states: dict[str, str]) -> str:
    wanted = request.query.get("state", "open")
    if wanted not in states:
        raise web.HTTPBadRequest(reason=f"state is one of {', '.join(states)}")
    return wanted


def _number(request: web.Request) -> int:
    return int(request.match_info["number"])  # the route's pattern admits digits only; ingest checks the range


def conversation(pull, comments) -> list[dict]:
    """Reviews and comments in the order they were written, as GitHub shows them (and `kb pr comments`)."""
    entries = [
        {"at": r.reviewed_at, "who": r.reviewer, "what": threads.verdict_words(r.verdict), "body": r.body}
        for r in pull.reviews
    ]
    entries += [{"at": c.created_at, "who": c.author, "what": "commented", "body": c.body} for c in comments]
    entries.sort(key=lambda e: (e["at"].seconds, e["at"].nanos))
    return [{**e, "at": stamp(e["at"])} for e in entries]


async def head_checks(board: BoardSource, route: str, sha: str) -> list:
    """The checks of a pull request's head as the board holds them (its route's history, newest board first): what
    `kb pr show` lists from the verifier. None yet (or a route the board never saw): an empty list."""
    if not names.ROUTE.matches(route):
        return []
    try:
        view = await board.route(route)
    except grpc.aio.AioRpcError as err:
        if err.code() == grpc.StatusCode.NOT_FOUND:
            return []
        raise
    return [
        (part.version, record)
        for part in reversed(view.boards)
        for record in reversed(part.history)
        if record.kind == "check" and record.sha == sha
    ]


def add_routes(app: web.Application, source: ThreadSource, board_key, page, upstream) -> None:
    """Register the pages; ``board_key``: the app's board source (for a pull request's checks), ``page`` renders a
    template, ``upstream(what, service)`` turns an RPC's failure into the page's status."""
    app[THREADS] = source

    async def issues_page(request: web.Request) -> web.Response:
        state = _state(request, ISSUE_STATES)
        with upstream("issue", "ingest"):
            reply = await request.app[THREADS].issues(ISSUE_STATES[state], request.query.get("after", ""))
        return page("issues.html", issues=reply.issues, state=state, next_token=reply.next_page_token, stamp=stamp)

    async def issue_page(request: web.Request) -> web.Response:
        number = _number(request)
        with upstream("issue", "ingest"):
            issue = await request.app[THREADS].issue(number)
            comments = await request.app[THREADS].comments(issue=number)
        return page("issue.html", issue=issue, comments=comments, stamp=stamp)

    async def pulls_page(request: web.Request) -> web.Response:
        state = _state(request, PULL_STATES)
        with upstream("pull request", "ingest"):
            pulls = await request.app[THREADS].pulls(PULL_STATES[state])
        return page("pulls.html", pulls=pulls, state=state, summary=threads.review_summary, stamp=stamp)

    async def pull_page(request: web.Request) -> web.Response:
        number = _number(request)
        with upstream("pull request", "ingest"):
            pull = await request.app[THREADS].pull(number)
            comments = await request.app[THREADS].comments(pull=number)
        with upstream("route"):
            checks = await head_checks(request.app[board_key], pull.route, pull.head_sha)
        return page(
            "pull.html",
            pull=pull,
            conversation=conversation(pull, comments),
            summary=threads.review_summary(pull.reviews),
            added=sum(f.added for f in pull.files),
            deleted=sum(f.deleted for f in pull.files),
            checks=checks,
            stamp=stamp,
        )

    number = r"{number:\d{1,18}}"
    app.router.add_get("/issues", issues_page, name="issues")
    app.router.add_get(f"/issues/{number}", issue_page, name="issue")
    app.router.add_get("/pulls", pulls_page, name="pulls")
    app.router.add_get(f"/pulls/{number}", pull_page, name="pull")
