"""The web board's HTTP application: pages rendered on the server from the board service's views, live by SSE.

Read-only and public: no page takes a sign-in, none changes anything, and the process itself signs in to the board
service as system:web (source.py). Every value on a page comes from GetBoard / ListBoards / GetRoute / WatchBoard as
they are; every result is worded by contracts/results.py, as `kb board` and `kb checks` word it.
Every template autoescapes, and the Content-Security-Policy allows scripts from this server's /static only, so text
from the log (route names, reasons, violations) is never markup.
"""

import asyncio
import collections
import contextlib
import gzip
import json
import time
import urllib.parse
import uuid
from pathlib import Path

import grpc
import jinja2
from aiohttp import web
from google.protobuf import json_format

from contracts import names, results
from services.common import metrics
from services.common.logs import bind_ids, get_logger
from services.web import chart
from services.web import threads as thread_pages
from services.web.feeds import Feeds
from services.web.history_chart import history_chart
from services.web.source import BoardSource, ThreadSource

HERE = Path(__file__).resolve().parent
KEEPALIVE_S = 15.0  # a comment line on an idle live stream, so that a gone reader is noticed
DEFAULT_MAX_LIVE = 2000  # live readers served at once (sockets; they share one WatchBoard stream per board)
SOURCE = web.AppKey("source", BoardSource)
LIVE = web.AppKey("live", set)
MAX_LIVE = web.AppKey("max_live", int)

log = get_logger()

REQUESTS = metrics.counter("kb_web_requests_total", "HTTP requests answered, by page and status.", ("page", "code"))
LATENCY = metrics.histogram(
    "kb_web_request_duration_seconds", "HTTP request duration until the response is ready, by page.", ("page",)
)
LIVE_STREAMS = metrics.gauge("kb_web_live_streams", "Live board streams (server-sent events) open now.")
LIVE_REFUSED = metrics.counter("kb_web_live_refused_total", "Live streams refused because the limit was reached.")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def segment(value: str) -> str:
    """A value as one URL path segment: everything but unreserved characters percent-encoded, '/' included."""
    return urllib.parse.quote(value, safe="")


def status_line(status: str, reason: str) -> str:
    return status.capitalize() + (f" — {reason}" if reason else "")


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name: nothing from the log is ever markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.update(
        when=results.when,
        plain=results.plain_value,
        number=results.number,
        reason=results.reason,
        segment=segment,
        short=lambda sha: sha[:10],
        capitalize_first=lambda text: text[:1].upper() + text[1:],
    )
    env.globals.update(
        status_line=status_line,
        entry_verdict=results.entry_verdict,
        entry_reason=results.entry_reason,
        entry_line=results.entry_line,
        place=results.place,
        in_words=results.in_words,
        record_verdict=results.record_verdict,
        record_note=results.record_note,
        route_summary=results.route_summary,
        problem_headings=results.PROBLEM_HEADINGS,
        problem_result=results.problem_result,
        speedup=results.speedup,
        reasons=results.reasons,
        ran_with=results.ran_with,
        check_path=results.check_path,
        leader_row=results.leader_row,
        leader_headings=results.LEADER_HEADINGS,
        NO_SCORE=results.NO_SCORE,
    )
    # A route the log names but GetRoute would refuse (written before the grammar held) is shown, not linked.
    env.tests["route_name"] = names.ROUTE.matches
    return env


TEMPLATES = templates()


def page(name: str, status: int = 200, **context) -> web.Response:
    body = TEMPLATES.get_template(name).render(**context)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


class RenderedPages:
    """Pages already rendered, by what they were rendered from. A view's log position names the projection's whole
    state (a pure fold of the log up to it), so the same template over the same position renders the same page: a
    board is rendered once per change, however many read it."""

    def __init__(self, size: int = 64):
        self.size = size
        self._pages: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()

    def rendered(self, key: tuple, make) -> bytes:
        body = self._pages.get(key)
        if body is None:
            body = self._pages[key] = make()
            if len(self._pages) > self.size:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(key)
        return body

    def response(self, request: web.Request, key: tuple, name: str, **context) -> web.Response:
        """The page, gzipped once per change for readers that take gzip (a 300-row board: 280 kB, 25 kB gzipped)."""
        body = self.rendered(key, lambda: TEMPLATES.get_template(name).render(**context).encode())
        if "gzip" not in request.headers.get("Accept-Encoding", ""):
            return web.Response(body=body, content_type="text/html", charset="utf-8")
        zipped = self.rendered(("gzip", *key), lambda: gzip.compress(body, compresslevel=6, mtime=0))
        response = web.Response(body=zipped, content_type="text/html", charset="utf-8")
        response.headers["Content-Encoding"] = "gzip"
        response.headers["Vary"] = "Accept-Encoding"
        return response


PAGES = web.AppKey("pages", RenderedPages)
FEEDS = web.AppKey("feeds", Feeds)


def board_json(view) -> str:
    """The view as `kb board --json` prints it (services/board/cli.py): the same fields, the same names."""
    data = json_format.MessageToDict(view, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return json.dumps(data, sort_keys=True, indent=2)


class PageFailed(Exception):
    """A page that cannot be shown: its HTTP status and the reason the error page gives."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@contextlib.contextmanager
def upstream(what: str, service: str = "board"):
    """A service's error as the page's status: NOT_FOUND 404, a refused argument 400, anything else 503."""
    try:
        yield
    except grpc.aio.AioRpcError as err:
        code = err.code()
        if code == grpc.StatusCode.NOT_FOUND:
            raise PageFailed(404, err.details() or f"no such {what}") from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise PageFailed(400, err.details() or f"a bad {what} request") from None
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            log.error(f"the {service} service refused the web's identity", code=code.name, detail=err.details())
        raise PageFailed(503, f"the {service} service is unavailable ({code.name})") from None


# ---- pages -------------------------------------------------------------------------------------------------------


async def board_page(request: web.Request) -> web.Response:
    """The newest board at /, any version at /board/N; an earlier board is marked so (the board service says which)."""
    version = int(request.match_info.get("version", 0))
    feeds = request.app[FEEDS]
    with upstream("board"):
        view = await feeds.board(version)
    newest = view.current_version or view.version
    return request.app[PAGES].response(
        request,
        ("board", version, view.version, newest, view.log_position),
        "board.html",
        view=view,
        newest=newest,
        earlier=view.earlier,
        live_url=f"/live/{version}",  # version 0 follows the newest board as it moves
    )


async def problems_page(request: web.Request) -> web.Response:
    """/problems (the newest board), /problems/N: each problem's best verified speed-up across routes."""
    version = int(request.match_info.get("version", 0))
    with upstream("board"):
        view = await request.app[SOURCE].problems(version)
    return request.app[PAGES].response(
        request, ("problems", version, view.version, view.log_position), "problems.html", view=view
    )


async def boards_page(request: web.Request) -> web.Response:
    with upstream("board"):
        boards = await request.app[SOURCE].boards()
    return page("boards.html", boards=list(reversed(boards)))


def placing_check(part):
    """The check a route's board part shows per problem, and why that one: the check that ranks the route, else the
    one listed beside for it, else the latest; (None, "") when it has no check."""
    checks = [r for r in part.history if r.kind == "check"]
    for ranked in (True, False):
        placing = {e.global_position for e in part.entries if bool(e.rank) == ranked}
        shown = next((r for r in reversed(checks) if r.global_position in placing), None)
        if shown is not None:
            return shown, "the check that ranks it" if ranked else "the check listed beside, unranked"
    return (checks[-1], "the latest check") if checks else (None, "")


async def route_page(request: web.Request) -> web.Response:
    name = request.match_info["route"]  # checked by GetRoute (contracts.names): a bad name is its 400
    with upstream("route"):
        route = await request.app[SOURCE].route(name)
        newest = (await request.app[FEEDS].board(0)).version
    parts = []
    for part in route.boards:
        shown, why_shown = placing_check(part)
        parts.append(
            {
                "board": part,
                "earlier": part.version != newest,
                "shown": shown,
                "why_shown": why_shown,
                "chart": chart.speedup_chart(shown.subtasks) if shown is not None else None,
                "history_chart": history_chart(part.history),
            }
        )
    return page("route.html", route=route, parts=list(reversed(parts)), newest=newest)


async def check_page(request: web.Request) -> web.Response:
    """/route/R/check/ID: one check of a route as the board holds it (its history on the newest board it is on): the
    per-problem table, reasons, runner, rules commit and its commit."""
    name, wanted = request.match_info["route"], request.match_info["check_id"]
    with upstream("route"):
        route = await request.app[SOURCE].route(name)
    for part in reversed(route.boards):
        record = next((r for r in part.history if r.kind == "check" and r.check_id == wanted), None)
        if record is not None:
            card = (await request.app[FEEDS].board(part.version)).card
            return page(
                "check.html",
                route=route,
                board=part,
                check=record,
                card=card,
                chart=chart.speedup_chart(record.subtasks),
            )
    raise PageFailed(
        404,
        f"no finished check {wanted[:40]!r} among route {name[:40]!r}'s latest checks: a check shows here once it has"
        f" ended (follow a queued or running one with `kb checks {wanted[:40]} --watch`)",
    )


async def board_json_page(request: web.Request) -> web.Response:
    """/board/N.json: the BoardView exactly as `kb board --version N --json` prints it."""
    with upstream("board"):
        view = await request.app[SOURCE].board(int(request.match_info["version"]))
    return web.Response(text=board_json(view) + "\n", content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    """200 when this process can read the board (GetBoard with its own token); 503 saying why not: the pages would
    fail the same way (the board service down, or the token revoked)."""
    problem = await request.app[SOURCE].readable()
    if problem:
        return web.Response(text=problem + "\n", status=503)
    return web.Response(text="ok\n")


# ---- live: server-sent events from WatchBoard ----------------------------------------------------------------------


def sse_event(name: str, data: str, event_id: int) -> bytes:
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {name}\nid: {event_id}\n{lines}\n".encode()


def live_event(view) -> bytes:
    return sse_event("board", TEMPLATES.get_template("_live.html").render(view=view), view.log_position)


async def live(request: web.Request) -> web.StreamResponse:
    """The board's live part (header, ranked, listed beside) rendered again on each change WatchBoard reports; every
    reader of a board waits on the same WatchBoard stream (feeds.py), and each change is rendered once for all."""
    version = int(request.match_info["version"])
    streams = request.app[LIVE]
    if len(streams) >= request.app[MAX_LIVE]:
        LIVE_REFUSED.inc()
        return web.Response(status=503, text="too many live readers; the page still reads without them\n")
    feeds, pages = request.app[FEEDS], request.app[PAGES]
    with upstream("board"):
        await feeds.board(version)  # a board that is not there is a 404 here, which ends the browser's retries
    feed = feeds.follow(version)
    if feed is None:
        return web.Response(status=503, text="too many boards followed; the page still reads without this\n")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    await response.write(b"retry: 3000\n\n")  # the browser reconnects after 3 s when the stream ends
    streams.add(asyncio.current_task())
    LIVE_STREAMS.set(len(streams))
    sent = None
    try:
        while not feed.gone:
            changed, view = feed.changed, feed.view
            if view is not None and (view.version, view.log_position) != sent:
                sent = (view.version, view.log_position)
                await response.write(pages.rendered(("live", *sent), lambda v=view: live_event(v)))
            try:
                await asyncio.wait_for(changed.wait(), KEEPALIVE_S)
            except TimeoutError:
                await response.write(b": keepalive\n\n")
    except ConnectionResetError:
        pass  # the reader left
    finally:
        streams.discard(asyncio.current_task())
        LIVE_STREAMS.set(len(streams))
    return response


# ---- wiring --------------------------------------------------------------------------------------------------------


@web.middleware
async def observed(request: web.Request, handler):
    """Metrics by page (the route's name, never the raw path), security headers, an error page for each failure."""
    started = time.perf_counter()
    page_name = request.match_info.route.name or "unknown"
    with bind_ids(request_id=uuid.uuid4().hex):
        try:
            response = await handler(request)
        except PageFailed as err:
            response = page("error.html", status=err.status, status_code=err.status, message=str(err))
        except web.HTTPException as err:
            response = page("error.html", status=err.status, status_code=err.status, message=err.reason)
        except Exception:
            log.exception("web page failed", path=request.path[:200])
            response = page("error.html", status=500, status_code=500, message="the page failed; see the web log")
        response.headers.update(SECURITY_HEADERS)
        if page_name != "live":  # a live stream's time is how long a reader stayed
            LATENCY.labels(page_name).observe(time.perf_counter() - started)
        REQUESTS.labels(page_name, str(response.status)).inc()
        if response.status >= 500:
            log.warning("web page unavailable", page=page_name, status=response.status)
        return response


async def _end_live_streams(app: web.Application) -> None:
    for task in list(app[LIVE]):
        task.cancel()


async def _stop_following(app: web.Application) -> None:
    await app[FEEDS].close()


def make_app(source: BoardSource, threads: ThreadSource, *, max_live: int = DEFAULT_MAX_LIVE) -> web.Application:
    app = web.Application(middlewares=[observed], handler_args={"max_field_size": 8190})
    app[SOURCE] = source
    app[LIVE] = set()
    app[MAX_LIVE] = max_live
    app[PAGES] = RenderedPages()
    app[FEEDS] = Feeds(source)
    version = r"{version:\d{1,9}}"
    app.router.add_get("/", board_page, name="board")
    app.router.add_get(f"/board/{version}", board_page, name="board_version")
    app.router.add_get(f"/board/{version}.json", board_json_page, name="board_json")
    app.router.add_get("/boards", boards_page, name="boards")
    app.router.add_get("/problems", problems_page, name="problems")
    app.router.add_get(f"/problems/{version}", problems_page, name="problems_version")
    app.router.add_get("/route/{route:[^/]+}/check/{check_id:[^/]+}", check_page, name="check")
    app.router.add_get("/route/{route:.+}", route_page, name="route")
    app.router.add_get(f"/live/{version}", live, name="live")
    thread_pages.add_routes(app, threads, SOURCE, page, upstream)
    app.router.add_get("/healthz", healthz, name="healthz")
    app.router.add_static("/static/", HERE / "static", name="static", append_version=False)
    app.on_shutdown.append(_end_live_streams)
    app.on_cleanup.append(_stop_following)
    return app
