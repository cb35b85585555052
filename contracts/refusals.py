"""Refusals: the one exception type a service raises for a request it will not serve. It knows its gRPC status by
name (this module imports no grpc, so that the harness can import it); one interceptor in services/common/grpcserver
turns it into that status for all four services, and servicers hold no try/except of their own for it.

Messages may quote what the caller sent, but only through ``clip``: a 3 MB name echoed back would turn an
INVALID_ARGUMENT into a client-side RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

# The statuses a refusal may carry. UNKNOWN and INTERNAL are not among them: they mean a bug, never bad input.
STATUSES = frozenset(
    {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "RESOURCE_EXHAUSTED",
        "OUT_OF_RANGE",
        "UNAVAILABLE",
        "DEADLINE_EXCEEDED",
        "CANCELLED",
    }
)

CLIP_CHARS = 64  # how much of a caller's input a message quotes


class Refusal(Exception):
    """A request refused: ``code`` names the gRPC status, ``reason`` is a short label for metrics (one word,
    bounded cardinality), ``message`` tells the caller what is wrong and, where it can, what to do."""

    def __init__(self, code: str, reason: str, message: str):
        if code not in STATUSES:
            raise ValueError(f"a refusal cannot carry status {code!r}")
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def __repr__(self) -> str:
        return f"Refusal({self.code}, {self.reason!r}, {clip(self.message, 200)!r})"


def clip(value: object, limit: int = CLIP_CHARS) -> str:
    """``value`` as a quoted, printable prefix of at most ``limit`` characters: safe to put into any message."""
    text = value if isinstance(value, str) else repr(value)
    cut = len(text) > limit
    shown = repr(text[:limit])
    return f"{shown}… ({len(text)} characters)" if cut else shown


def invalid(reason: str, message: str) -> Refusal:
    return Refusal("INVALID_ARGUMENT", reason, message)


def not_found(reason: str, message: str) -> Refusal:
    return Refusal("NOT_FOUND", reason, message)


def denied(message: str, reason: str = "role") -> Refusal:
    return Refusal("PERMISSION_DENIED", reason, message)


def precondition(reason: str, message: str) -> Refusal:
    return Refusal("FAILED_PRECONDITION", reason, message)


def exists(reason: str, message: str) -> Refusal:
    return Refusal("ALREADY_EXISTS", reason, message)


def too_large(reason: str, message: str) -> Refusal:
    return Refusal("RESOURCE_EXHAUSTED", reason, message)


def conflict(reason: str, message: str) -> Refusal:
    return Refusal("ABORTED", reason, message)


def unavailable(reason: str, message: str) -> Refusal:
    return Refusal("UNAVAILABLE", reason, message)


def unauthenticated(reason: str, message: str) -> Refusal:
    return Refusal("UNAUTHENTICATED", reason, message)


def check_size(field: str, value: str | bytes, limit: int) -> None:
    """Refuse ``field`` when it is longer than ``limit`` (characters for text, bytes for bytes), naming the field,
    its size and the limit."""
    unit = "bytes" if isinstance(value, bytes | bytearray) else "characters"
    check_length(field, len(value), limit, unit)


def check_length(field: str, size: int, limit: int, unit: str = "bytes") -> None:
    """Refuse ``field`` when its ``size`` (known without holding the value, e.g. from a git object's header) is over
    ``limit``, with the same message as ``check_size``."""
    if size > limit:
        raise invalid(f"{field}_too_long", f"{field} is {size} {unit}, over the limit of {limit}")
