"""Waiting for a server-side counter the client cannot see being updated.

``context.abort`` sends the status to the client before it raises, so the interceptor counts an aborted call a
moment after the client already holds the error; a test reads the counter until it arrives (or gives up)."""

import asyncio
import time

from prometheus_client import REGISTRY


async def sample_reaches(name: str, labels: dict[str, str], expected: float, timeout_s: float = 2.0) -> float:
    """The sample's value once it equals ``expected``; fails with the last value seen after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = REGISTRY.get_sample_value(name, labels) or 0.0
        if value == expected or time.monotonic() > deadline:
            assert value == expected, f"{name}{labels} is {value}, expected {expected} within {timeout_s} s"
            return value
        await asyncio.sleep(0.01)
