"""Helpers shared by the log, relay and consumer tests."""

import asyncio
import contextlib

from kernelboard.v1 import events_pb2 as pb

from services.common.eventlog import EventLog, NewEvent
from tests.common.waiting import eventually


class Crash(BaseException):
    """Stands for the process dying: neither the relay nor the consumer catches it."""


async def append_jobs(log: EventLog, count: int, batch: int = 100) -> None:
    for start in range(0, count, batch):
        events = [NewEvent(pb.JobStateChanged(job_id=str(i), state="RUNNING"), actor="s") for i in range(batch)]
        await log.append(f"job:bulk-{start}", None, events[: min(batch, count - start)])


async def wait_for(condition, timeout: float, what: str):
    return await eventually(condition, what, timeout, interval_s=0.05)


@contextlib.asynccontextmanager
async def running(*workers):
    """Runs relays/consumers as tasks; stops them and surfaces their errors on the way out."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        yield tasks
    finally:
        for w in workers:
            await w.stop()
        for task in tasks:
            await asyncio.wait_for(task, 15)  # a worker that died re-raises its error here
