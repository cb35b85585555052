"""The verifier service: wiring only (``python -m services.verifier.server``).

The consumer queues checks of ingested route and job commits; one worker per GPU (one on a CPU-only machine) runs
them, or, with KB_VERIFIER_DISPATCH=slurm, the dispatcher sends those that name a partition to the runners as Slurm
jobs (dispatch.py); gRPC on 50053 answers GetCheck/ListChecks/WatchChecks; Prometheus on 9103.
"""

import asyncio

from services.common.config import ServerConfig, Settings
from services.common.consumer import Consumer
from services.common.eventlog import EventLog
from services.common.grpcserver import serve
from services.common.logs import configure_logging, get_logger
from services.verifier.api import ChangeFeed, add_to_server
from services.verifier.dispatch import DispatchConfig, Dispatcher, dispatching
from services.verifier.intake import CONSUMER_NAME, EVENT_TYPES, Intake
from services.verifier.queue import CheckQueue
from services.verifier.worker import WorkerConfig, make_workers

log = get_logger()


async def main() -> None:
    configure_logging("verifier")
    settings = Settings.from_env()
    config = WorkerConfig.from_env(settings)
    server_config = ServerConfig.from_env("verifier")
    event_log = await EventLog.connect(settings.database_url, **server_config.pool_options())
    on_runners = dispatching()
    queue = CheckQueue(event_log, lease_s=config.lease_s, runners=on_runners)
    consumer = Consumer(CONSUMER_NAME, event_log, settings, Intake(event_log, queue).handle, types=set(EVENT_TYPES))
    workers = make_workers(queue, config)
    dispatcher = Dispatcher(queue, config, DispatchConfig.from_env(settings)) if on_runners else None
    feed = ChangeFeed(event_log.pool)
    tasks: list[asyncio.Task] = []

    def start() -> None:
        tasks.append(asyncio.create_task(consumer.run(), name="verifier-consumer"))
        tasks.extend(asyncio.create_task(w.run(), name=f"verifier-worker-{w.slot.name}") for w in workers)
        if dispatcher is not None:
            tasks.append(asyncio.create_task(dispatcher.run(), name="verifier-dispatcher"))
        log.info(
            "verifier started",
            slots=[w.slot.name for w in workers],
            isolated=config.sandbox.isolate,
            dispatcher=dispatcher.name if dispatcher else None,
        )

    async def stop() -> None:
        await consumer.stop()
        for worker in workers:
            await worker.stop()
        if dispatcher is not None:
            await dispatcher.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await feed.close()
        await event_log.close()

    await serve(
        "verifier",
        lambda server: add_to_server(server, queue, feed),
        port=server_config.grpc_port,
        metrics_port=server_config.metrics_port,
        pool=event_log.pool,
        on_start=[start],
        on_stop=[stop],
    )


if __name__ == "__main__":
    asyncio.run(main())
