"""The ingest service: wiring only (``python -m services.ingest.server``)."""

import asyncio
import os

from services.common.config import GRPC_PORTS, METRICS_PORTS, Settings
from services.common.eventlog import EventLog
from services.common.grpcserver import serve
from services.common.logs import configure_logging
from services.ingest.api import add_to_server
from services.ingest.app import DEFAULT_MAX_BUNDLE_BYTES, Ingest
from services.ingest.gitrepo import HostedRepo


def hosted_repo(settings: Settings) -> HostedRepo:
    return HostedRepo(settings.home / "repo.git")


def max_bundle_bytes() -> int:
    return int(os.environ.get("KB_MAX_BUNDLE_BYTES", DEFAULT_MAX_BUNDLE_BYTES))


async def main() -> None:
    configure_logging("ingest")
    settings = Settings.from_env()
    log = await EventLog.connect(settings.database_url)
    limit = max_bundle_bytes()
    ingest = Ingest(log, hosted_repo(settings), max_bundle_bytes=limit)
    await ingest.start()
    await serve(
        "ingest",
        lambda server: add_to_server(server, ingest),
        port=int(os.environ.get("KB_INGEST_PORT", GRPC_PORTS["ingest"])),
        metrics_port=int(os.environ.get("KB_INGEST_METRICS_PORT", METRICS_PORTS["ingest"])),
        pool=log.pool,
        on_stop=[ingest.stop, log.close],
        # A unary Push carries the whole bundle in one message: let it reach the size check, which names the limit.
        options=[("grpc.max_receive_message_length", limit + 1024 * 1024)],
    )


if __name__ == "__main__":
    asyncio.run(main())
