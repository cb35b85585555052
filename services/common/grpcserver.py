"""gRPC server scaffolding shared by the four services (grpc.aio).

Every server gets: grpc.health.v1 (SERVING for each of its services and for ""), server reflection, request metrics
(kb_grpc_*), a request id bound to the logs, a log line for each failed or slow call (KB_SLOW_RPC_MS, default 250),
the bearer-token AuthInterceptor when given a database pool, and a graceful shutdown on SIGTERM/SIGINT: health goes
NOT_SERVING first, the server stops taking new calls and lets the running ones finish within a grace period, then
the on_stop hooks run. A call that fails because PostgreSQL cannot be reached ends UNAVAILABLE ("event log
unavailable: ..."), which tells a client to retry, rather than UNKNOWN.
"""

import asyncio
import contextlib
import inspect
import os
import signal
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from contracts.refusals import Refusal
from services.common import metrics
from services.common.auth import DEFAULT_OPEN_METHODS, AuthInterceptor
from services.common.config import env_number
from services.common.handlers import Around, HandlerWrappers
from services.common.logs import bind_ids, get_logger

AddServicers = Callable[[grpc.aio.Server], Sequence[str]]
Hook = Callable[[], Awaitable[None] | None]

HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
DEFAULT_GRACE_S = env_number(os.environ, "KB_SHUTDOWN_GRACE_S", 10.0, float, minimum=0)
# A call this slow is logged at info whatever its outcome (see ObservabilityInterceptor).
DEFAULT_SLOW_RPC_MS = env_number(os.environ, "KB_SLOW_RPC_MS", 250.0, float, minimum=0)
# Probes and reflection are frequent and uninteresting, and their streams long by design: never logged as slow.
_QUIET_PREFIXES = (f"/{HEALTH_SERVICE}/", f"/{reflection.SERVICE_NAME}/", "/grpc.reflection.v1.ServerReflection/")

log = get_logger()


def split_method(full_method: str) -> tuple[str, str]:
    """``/kernelboard.v1.Board/GetBoard`` → (``kernelboard.v1.Board``, ``GetBoard``)."""
    service, _, method = full_method.lstrip("/").partition("/")
    return service, method


# What losing PostgreSQL looks like to a handler: the server gone, shutting down, full, or the connection cut.
_EVENT_LOG_LOST = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.InterfaceError,  # "connection is closed", "pool is closing"
    asyncpg.InternalClientError,  # the server closed the connection in the middle of a message
)


def event_log_unavailable(error: BaseException) -> str | None:
    """The UNAVAILABLE message when ``error`` means PostgreSQL could not be reached, else None.

    A refused or timed-out connection is a plain OSError (ConnectionRefusedError, TimeoutError from a pool's
    acquire): it counts when it was raised inside asyncpg, so that a git or file error keeps its own status."""
    if isinstance(error, _EVENT_LOG_LOST) or (isinstance(error, OSError) and _raised_in(error, "asyncpg")):
        return f"event log unavailable: {type(error).__name__}: {error}"
    return None


def _raised_in(error: BaseException, package: str) -> bool:
    for frame, _line in traceback.walk_tb(error.__traceback__):
        module = frame.f_globals.get("__name__", "")
        if module == package or module.startswith(package + "."):
            return True
    return False


MAX_STATUS_MESSAGE_CHARS = 1024  # a status message stays far below gRPC's 8 KB metadata limit


def bounded_message(message: str) -> str:
    """A refusal's message, cut so that it always reaches the client as the status the server chose."""
    if len(message) <= MAX_STATUS_MESSAGE_CHARS:
        return message
    return message[: MAX_STATUS_MESSAGE_CHARS - 20] + f"… ({len(message)} characters)"


def final_code(context: grpc.aio.ServicerContext, error: BaseException | None) -> grpc.StatusCode:
    # GeneratorExit: a streaming call abandoned by its client, its generator closed later.
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    code = context.code()  # set by abort() or set_code(); None when the handler just returned
    if error is not None and not isinstance(error, grpc.aio.AbortError):
        return code if code not in (None, grpc.StatusCode.OK) else grpc.StatusCode.UNKNOWN
    return code or grpc.StatusCode.OK


class _MethodMetrics:
    """One method's metric children, resolved once: ``labels()`` takes a lock and a dict lookup on every use."""

    def __init__(self, service: str, method: str):
        self._service, self._method = service, method
        self.in_flight = metrics.GRPC_IN_FLIGHT.labels(service)
        self.latency = metrics.GRPC_LATENCY.labels(service, method)
        self._requests: dict[grpc.StatusCode, object] = {}

    def finished(self, code: grpc.StatusCode, elapsed_s: float) -> None:
        requests = self._requests.get(code)
        if requests is None:
            requests = self._requests[code] = metrics.GRPC_REQUESTS.labels(self._service, self._method, code.name)
        requests.inc()
        self.latency.observe(elapsed_s)


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """Counts and times every call, logs it, and binds a request id (``x-request-id`` metadata, or a new one).

    Calls that fail, or take ``slow_rpc_ms`` or longer, are logged at info ("rpc finished"); the rest at debug
    (KB_LOG_LEVEL=DEBUG shows every call): at a thousand calls a second a line for each costs more CPU than the call,
    and kb_grpc_requests_total already counts them. A method's handler is wrapped once, not on every call.
    """

    def __init__(self, slow_rpc_ms: float = DEFAULT_SLOW_RPC_MS):
        self._slow_s = slow_rpc_ms / 1000
        # The first interceptor of every chain (start_server): it decodes requests, so a bad one is a refusal.
        self._wrappers = HandlerWrappers(self._around, decode_inside=True)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return self._wrappers.wrap(handler_call_details.method, handler)

    def _around(self, full_method: str) -> Around:
        service, method = split_method(full_method)
        quiet = full_method.startswith(_QUIET_PREFIXES)
        method_metrics = _MethodMetrics(service, method)
        slow_s = self._slow_s

        @contextlib.asynccontextmanager
        async def observed(context):
            request_id = _request_id(context.invocation_metadata())
            method_metrics.in_flight.inc()
            started = time.perf_counter()
            error = None
            with bind_ids(request_id=request_id, rpc=full_method):
                try:
                    yield
                except Refusal as refusal:
                    error = refusal
                    await context.abort(grpc.StatusCode[refusal.code], bounded_message(refusal.message))
                except BaseException as exc:
                    error = exc
                    if unavailable := event_log_unavailable(exc):
                        log.warning("rpc failed: event log unavailable", error=repr(exc))
                        await context.abort(grpc.StatusCode.UNAVAILABLE, unavailable)
                    raise
                finally:
                    elapsed = time.perf_counter() - started
                    method_metrics.in_flight.dec()
                    code = final_code(context, error)
                    method_metrics.finished(code, elapsed)
                    duration_ms = round(elapsed * 1000, 2)
                    if error is not None and code == grpc.StatusCode.UNKNOWN:
                        log.error("rpc failed", code=code.name, duration_ms=duration_ms, exc_info=error)
                    elif code != grpc.StatusCode.OK:
                        log.info("rpc finished", code=code.name, duration_ms=duration_ms)
                    elif elapsed >= slow_s and not quiet:  # a health Watch stream is long by design
                        log.info("rpc finished", code=code.name, duration_ms=duration_ms, slow=True)
                    else:
                        log.debug("rpc finished", code=code.name, duration_ms=duration_ms)

        return observed


def _request_id(metadata) -> str:
    for key, value in metadata or ():
        if key == "x-request-id" and value:
            return value if isinstance(value, str) else value.decode()
    return uuid.uuid4().hex[:16]


class StartedServer:
    """A started server; unpacks as ``server, port`` and knows how to shut itself down gracefully."""

    def __init__(
        self,
        server: grpc.aio.Server,
        port: int,
        health: health_aio.HealthServicer,
        names: Sequence[str],
        on_stop: Sequence[Hook] = (),
    ):
        self.server = server
        self.port = port
        self.health = health
        self.service_names = tuple(names)
        self._on_stop = tuple(on_stop)  # run once the server has stopped: the auth listener's stop

    def __iter__(self):
        return iter((self.server, self.port))

    async def stop(self, grace: float = DEFAULT_GRACE_S) -> None:
        """NOT_SERVING first (so balancers and probes move away), then stop taking calls and finish running ones."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await _run_hooks(self._on_stop)


async def start_server(
    service: str,
    add_servicers: AddServicers,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    pool=None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    open_methods: Iterable[str] = (),
    options: Sequence[tuple[str, int | str]] = (),
) -> StartedServer:
    """Build and start the server; ``port=0`` binds any free port. Returns ``StartedServer`` (``server, port``).

    ``add_servicers(server)`` registers the service's servicers and returns their full names
    (e.g. ``kernelboard.v1.Board``) for health and reflection. With ``pool`` every method needs a valid bearer token
    except health, reflection and the full method names in ``open_methods`` (``/kernelboard.v1.Board/GetBoard``);
    the auth token cache's change listener starts with the server and stops with it.
    """
    chain: list[grpc.aio.ServerInterceptor] = [ObservabilityInterceptor()]
    auth = None
    if pool is not None:
        auth = AuthInterceptor(pool, open_methods=DEFAULT_OPEN_METHODS | set(open_methods))
        chain.append(auth)
    chain.extend(interceptors)
    # No SO_REUSEPORT: a second copy of a service on the same port must fail, not silently share its traffic.
    # options: e.g. ingest's larger grpc.max_receive_message_length for pushed bundles.
    server = grpc.aio.server(interceptors=chain, options=[("grpc.so_reuseport", 0), *options])
    names = list(add_servicers(server))
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    for name in ["", *names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection([*names, HEALTH_SERVICE, reflection.SERVICE_NAME], server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as err:
        raise OSError(f"{service}: cannot listen for gRPC on {host}:{port} (in use?): {err}") from None
    await server.start()
    if auth is not None:
        auth.start()  # once the port is bound: a server that fails to start leaves no listener behind
    log.info("grpc server started", grpc_service=service, port=bound, services=names, auth=pool is not None)
    return StartedServer(server, bound, health, names, on_stop=[auth.stop] if auth is not None else [])


async def _run_hooks(hooks: Sequence[Hook]) -> None:
    for hook in hooks:
        result = hook()
        if inspect.isawaitable(result):
            await result


async def serve(
    service: str,
    add_servicers: AddServicers,
    *,
    port: int,
    metrics_port: int,
    pool=None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    on_start: Sequence[Hook] = (),
    on_stop: Sequence[Hook] = (),
    host: str = "0.0.0.0",
    grace: float = DEFAULT_GRACE_S,
    open_methods: Iterable[str] = (),
    options: Sequence[tuple[str, int | str]] = (),
) -> None:
    """Run a service until SIGTERM or SIGINT, then shut down gracefully (see the module doc)."""
    try:
        bound_metrics = metrics.start_metrics_server(metrics_port)
    except OSError as err:
        raise OSError(f"{service}: cannot serve /metrics on port {metrics_port}: {err}") from None
    started = await start_server(
        service,
        add_servicers,
        port=port,
        host=host,
        pool=pool,
        interceptors=interceptors,
        open_methods=open_methods,
        options=options,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await _run_hooks(on_start)
        log.info("serving", grpc_service=service, port=started.port, metrics_port=bound_metrics)
        await stopping.wait()
        log.info("shutting down", grpc_service=service, grace_s=grace)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await started.stop(grace)
        await _run_hooks(on_stop)
        log.info("stopped", grpc_service=service)
