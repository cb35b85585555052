"""The board service (port 50054, metrics 9104): wiring only.

On start it loads the stored projection and catches up from the log, then follows the log through the Consumer
(durable NATS consumer "board"), each event folded and stored in the consumer's transaction.
"""

import asyncio
import gc
import os
import signal

from services.board.api import add_to_server
from services.board.projector import Projector
from services.common.config import ServerConfig, Settings
from services.common.consumer import Consumer
from services.common.eventlog import EventLog
from services.common.grpcserver import serve
from services.common.logs import configure_logging, get_logger

CONSUMER_NAME = "board"

log = get_logger()


class BoardBackground:
    """The projector caught up, and the tasks that keep it current: the consumer and the lag gauge."""

    def __init__(self, event_log: EventLog, settings: Settings, consumer_name: str = CONSUMER_NAME):
        self.event_log = event_log
        self.projector = Projector(event_log)
        self.consumer = Consumer(consumer_name, event_log, settings, self.projector.handle)
        self._tasks: list[asyncio.Task] = []

    async def start(self, *, exit_on_failure: bool = False) -> None:
        await self.projector.start()
        # The loaded projection lives as long as the process: out of the collector's sight, a full collection no
        # longer walks it (a pause in the middle of queries that grows with the board).
        gc.freeze()
        self._tasks = [
            asyncio.create_task(self.consumer.run(), name="board-consumer"),
            asyncio.create_task(self.projector.watch_lag(), name="board-lag"),
        ]
        if exit_on_failure:
            self._tasks[0].add_done_callback(_stop_service_if_failed)

    async def stop(self) -> None:
        await self.consumer.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _stop_service_if_failed(task: asyncio.Task) -> None:
    """Without its consumer the board would go stale silently: stop, so that the supervisor restarts it."""
    if not task.cancelled() and task.exception() is not None:
        log.error("board consumer failed; stopping the service", exc_info=task.exception())
        os.kill(os.getpid(), signal.SIGTERM)


async def run(settings: Settings) -> None:
    config = ServerConfig.from_env("board")
    event_log = await EventLog.connect(settings.database_url, **config.pool_options())
    background = BoardBackground(event_log, settings)
    try:
        await background.start(exit_on_failure=True)  # caught up before the first query is taken
        await serve(
            "board",
            add_to_server(background.projector),
            port=config.grpc_port,
            metrics_port=config.metrics_port,
            pool=event_log.pool,
            on_stop=[background.stop],
        )
    finally:
        await event_log.close()


def main() -> None:
    configure_logging("board")
    asyncio.run(run(Settings.from_env()))


if __name__ == "__main__":
    main()
