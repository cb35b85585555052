"""Structured JSON logs for every service, carrying the ids that tie a log line to events, commits, jobs and checks.

Ids are bound in contextvars (structlog.contextvars), so a handler binds them once and every line logged while it
works, in the same task, carries them; tasks started from there inherit a copy.
"""

import logging
import os
import sys
from contextlib import AbstractContextManager
from typing import TextIO

import structlog

# The ids the services bind; bind_ids takes others too, but these are the ones dashboards and queries rely on.
KNOWN_IDS = ("event_id", "sha", "job_id", "check_id", "route", "request_id", "rpc", "principal")

_service = "kernelboard"


def _add_service(_logger, _method, event_dict):
    event_dict.setdefault("service", _service)
    return event_dict


def configure_logging(service: str, *, level: str | int | None = None, stream: TextIO | None = None) -> None:
    """One JSON object a line on ``stream`` (stderr by default, so stdout stays free for command output), at
    ``level`` or KB_LOG_LEVEL (default INFO).

    Also routes the standard library's loggers (grpc, asyncpg, nats) through the same renderer, so that a service
    writes one format only.
    """
    global _service
    _service = service
    level = level if level is not None else os.environ.get("KB_LOG_LEVEL", "INFO")
    level_no = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(level_no, int):
        raise ValueError(f"unknown log level {level!r}: DEBUG, INFO, WARNING or ERROR")
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service,
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_no)


def get_logger(**bind):
    """A logger with ``bind`` attached; lazy, so a module-level logger follows a later configure_logging."""
    return structlog.get_logger(**bind)


class BoundIds(AbstractContextManager):
    """Ids bound for the rest of the current context; used as a context manager, unbound again on exit."""

    def __init__(self, ids: dict):
        self._tokens = structlog.contextvars.bind_contextvars(**ids)

    def __exit__(self, *exc_info):
        try:
            structlog.contextvars.reset_contextvars(**self._tokens)
        except ValueError:
            # Exited from another context (an abandoned async generator closed by the loop): nothing left to unbind.
            pass
        return False


def bind_ids(**ids) -> BoundIds:
    """Bind ids (``event_id=…, sha=…, job_id=…``) to every log line of this context; ``None`` values are skipped."""
    return BoundIds({key: value for key, value in ids.items() if value is not None})
