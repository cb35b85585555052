"""The ingest service: wiring only (``python -m services.ingest.server``)."""

import asyncio
import os
import sys

from services.common import hostedgit
from services.common.config import ServerConfig, Settings
from services.common.eventlog import EventLog
from services.common.grpcserver import serve
from services.common.logs import configure_logging
from services.ingest.api import add_to_server, server_options
from services.ingest.app import DEFAULT_MAX_BUNDLE_BYTES, Ingest
from services.ingest.gitrepo import HostedRepo


def hosted_repo(settings: Settings) -> HostedRepo:
    return HostedRepo(hostedgit.location(settings.home))


def max_bundle_bytes() -> int:
    return int(os.environ.get("KB_MAX_BUNDLE_BYTES", DEFAULT_MAX_BUNDLE_BYTES))


def watch_children_with_pidfd() -> None:
    """Python 3.11's default child watcher starts a thread for each subprocess (a push's git index-pack) and the
    event loop waits until that thread runs; under load that wait stalled every request. A pidfd in the event loop
    needs no thread (Python 3.12 does this by itself and deprecates the call)."""
    if sys.version_info < (3, 12) and hasattr(os, "pidfd_open"):
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.get_event_loop_policy().set_child_watcher(watcher)


async def main() -> None:
    configure_logging("ingest")
    watch_children_with_pidfd()
    settings = Settings.from_env()
    config = ServerConfig.from_env("ingest")
    log = await EventLog.connect(settings.database_url, **config.pool_options())
    limit = max_bundle_bytes()
    ingest = Ingest(log, hosted_repo(settings), max_bundle_bytes=limit)
    await ingest.start()
    await serve(
        "ingest",
        lambda server: add_to_server(server, ingest),
        port=config.grpc_port,
        metrics_port=config.metrics_port,
        pool=log.pool,
        on_stop=[ingest.stop, log.close],
        options=server_options(limit),
    )


if __name__ == "__main__":
    asyncio.run(main())
