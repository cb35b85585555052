"""Waiting, bounded, for what a test cannot be told about: a notice reaching a cache, a server-side counter.

``context.abort`` sends the status to the client before it raises, so the interceptor counts an aborted call a
moment after the client already holds the error; a test reads the counter until it arrives (or gives up).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import REGISTRY

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T], what: str, timeout_s: float = 2.0, interval_s: float = 0.02
) -> T:
    """Polls ``check`` (sync or async) every ``interval_s`` until it returns something truthy, and returns that;
    fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(interval_s)


async def sample_reaches(name: str, labels: dict[str, str], expected: float, timeout_s: float = 2.0) -> None:
    """Waits until the metric sample equals ``expected``; fails with the value it has after ``timeout_s``."""

    def value() -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    try:
        await eventually(lambda: value() == expected, f"{name}{labels} == {expected}", timeout_s)
    except AssertionError:
        raise AssertionError(f"{name}{labels} is {value()}, expected {expected} within {timeout_s} s") from None
