"""The web board (HTTP 8080, metrics 9106): wiring only.

Its own process rather than a part of the board service: the public HTTP face can fail, be scaled or be exposed
without touching the service that folds the log, and it reads the board only through the board service's RPCs, so it
cannot rank anything differently. It signs in as system:web (the token file that `make up`'s seed writes).

| variable | default |
|---|---|
| ``KB_WEB_PORT``, ``KB_WEB_METRICS_PORT`` | 8080 and 9106 |
| ``KB_BOARD_ADDR`` | where the board service answers: 127.0.0.1:50054 |
| ``KB_INGEST_ADDR`` | where ingest answers (issues and pull requests): 127.0.0.1:50051 |
| ``KB_WEB_TOKEN_FILE`` | the token of system:web: ``$KB_HOME/web.token`` |
| ``KB_WEB_MAX_LIVE`` | live readers served at once (all share one WatchBoard stream per board): 2000 |
"""

import asyncio
import os
import signal

from aiohttp import web

from services.common import metrics
from services.common.config import HTTP_PORTS, METRICS_PORTS, Settings, env_number
from services.common.logs import configure_logging, get_logger
from services.web.app import DEFAULT_MAX_LIVE, make_app
from services.web.source import BoardSource, MissingToken, ThreadSource, read_token, token_path

log = get_logger()


async def run(settings: Settings, environ=None) -> None:
    env = os.environ if environ is None else environ
    port = env_number(env, "KB_WEB_PORT", HTTP_PORTS["web"], int, minimum=0, maximum=65535)
    metrics_port = env_number(env, "KB_WEB_METRICS_PORT", METRICS_PORTS["web"], int, minimum=0, maximum=65535)
    max_live = env_number(env, "KB_WEB_MAX_LIVE", DEFAULT_MAX_LIVE, int, minimum=0)
    token = read_token(token_path(settings, env))
    board_address = settings.grpc_address("board", env)
    try:
        bound_metrics = metrics.start_metrics_server(metrics_port)
    except OSError as err:
        raise OSError(f"web: cannot serve /metrics on port {metrics_port}: {err}") from None
    source = BoardSource(board_address, token)
    threads = ThreadSource(settings.grpc_address("ingest", env), token)
    runner = web.AppRunner(make_app(source, threads, max_live=max_live), access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "0.0.0.0", port, reuse_port=False)
        try:
            await site.start()
        except OSError as err:
            raise OSError(f"web: cannot listen for HTTP on port {port} (in use?): {err}") from None
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        log.info("serving", port=port, metrics_port=bound_metrics, board=board_address)
        await stopping.wait()
        log.info("shutting down")
    finally:
        await runner.cleanup()  # on_shutdown ends the live streams first
        await source.close()
        await threads.close()
        log.info("stopped")


def main() -> None:
    configure_logging("web")
    try:
        asyncio.run(run(Settings.from_env()))
    except (MissingToken, OSError, ValueError) as err:  # a setting or a port: one line that says which
        log.error("cannot start", error=str(err))
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
