"""The grammar of every identifier, defined once. Each name is matched in full with ``re.fullmatch`` (``$`` would
also match before a trailing newline), is bounded in length, and holds no control characters. A check either returns
the name or raises a Refusal (INVALID_ARGUMENT) whose message states the one rule that was broken and quotes only a
short prefix of the input.

The grammars are the ones the hosted repository, the event streams and the board already use (docs/ARCHITECTURE.md,
"Names"): widening one is a contract change.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

from contracts.refusals import Refusal, clip, invalid


@dataclass(frozen=True)
class Grammar:
    """One kind of identifier: its label in messages, its pattern (matched in full) and the rule in words."""

    kind: str
    pattern: re.Pattern[str]
    rule: str
    max_chars: int

    def matches(self, value: object) -> bool:
        return isinstance(value, str) and len(value) <= self.max_chars and self.pattern.fullmatch(value) is not None

    def check(self, value: object, field: str | None = None) -> str:
        """``value`` if it is a well-formed name of this kind, else a Refusal naming the field and the rule."""
        if self.matches(value):
            return value  # type: ignore[return-value]
        raise invalid(f"bad_{self.kind.replace(' ', '_')}", f"{field or self.kind} {clip(value)}: {self.rule}")


def _grammar(kind: str, pattern: str, rule: str, max_chars: int) -> Grammar:
    return Grammar(kind, re.compile(pattern), rule, max_chars)


_PRINCIPAL = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"

ROUTE = _grammar(
    "route", r"[a-z0-9][a-z0-9-]{1,39}", "2-40 characters of a-z, 0-9 and '-', starting with a letter or digit", 40
)
PERSON = _grammar(
    "person", _PRINCIPAL, "1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit", 64
)
AGENT = _grammar(
    "agent",
    rf"{_PRINCIPAL}/{_PRINCIPAL}",
    "<person>/<agent>, each 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
    129,
)
SERVICE = _grammar(
    "service identity",
    rf"system:{_PRINCIPAL}",
    "system:<name>, the name 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
    71,
)
JOB_ID = _grammar("job id", r"[1-9][0-9]{0,17}", "a Slurm job id: 1-18 digits, not starting with 0", 18)
PROBLEM = _grammar(
    "problem id", r"[a-z][a-z0-9_]{0,39}", "1-40 characters of a-z, 0-9 and '_', starting with a letter", 40
)
OBJECT_ID = _grammar("object id", r"[0-9a-f]{40}", "40 lowercase hexadecimal digits (a full git SHA-1)", 40)
PULL_NUMBER_MAX = 2**31 - 1
TOKEN_PREFIX = "kb_"
TOKEN = _grammar("token", r"kb_[A-Za-z0-9_-]{43}", "kb_ and 43 characters of A-Z, a-z, 0-9, '_' and '-'", 46)
TOKEN_HASH = _grammar("token hash", r"[0-9a-f]{64}", "64 lowercase hexadecimal digits (a SHA-256)", 64)

MAIN_REF = "refs/heads/main"
CHECKS_TAG = "refs/tags/checks"
ROUTE_PREFIX = "refs/heads/routes/"
JOB_PREFIX = "refs/jobs/"
PULL_PREFIX = "refs/pull/"

SCHEDULER = "system:scheduler"  # the only identity that writes refs/jobs/*
WEB = "system:web"  # the web board's: signed in, no role; it reads the board, issues and pull requests, writes nothing
SERVICE_PREFIX = "system:"

REF_MAX_CHARS = 100
REF_RULE = "one of refs/heads/main, refs/tags/checks, refs/heads/routes/<route>, refs/pull/<n>/head, refs/jobs/<job id>"


def route(value: object, field: str = "route") -> str:
    return ROUTE.check(value, field)


def person(value: object, field: str = "person") -> str:
    return PERSON.check(value, field)


def agent(value: object, field: str = "agent") -> str:
    return AGENT.check(value, field)


def job_id(value: object, field: str = "job id") -> str:
    return JOB_ID.check(value, field)


def problem(value: object, field: str = "problem id") -> str:
    return PROBLEM.check(value, field)


def object_id(value: object, field: str = "object id") -> str:
    return OBJECT_ID.check(value, field)


CHECK_ID_MAX_CHARS = 64  # a UUID in any of its spellings is shorter


def check_id(value: object, field: str = "check_id") -> str:
    """A check's id (a UUID the verifier derives), in its canonical spelling."""
    try:
        if isinstance(value, str) and len(value) <= CHECK_ID_MAX_CHARS:
            return str(uuid.UUID(value))
    except ValueError:
        pass
    raise invalid("bad_check_id", f"{field} {clip(value)} is not a check id (a UUID)")


def pull_number(value: object, field: str = "pull request number") -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= PULL_NUMBER_MAX:
        return value
    raise invalid("bad_pull_number", f"{field} {clip(value)}: a whole number from 1 to {PULL_NUMBER_MAX}")


def principal(value: object, field: str = "principal") -> str:
    """A person, an agent or a service identity."""
    for grammar in (PERSON, AGENT, SERVICE):
        if grammar.matches(value):
            return value  # type: ignore[return-value]
    raise invalid("bad_principal", f"{field} {clip(value)}: a person, <person>/<agent> or system:<name>")


def agent_owner(name: str) -> str:
    """The person an agent's name says it acts for: ``alice`` of ``alice/bot`` (check the name first)."""
    return name.partition("/")[0]


def principal_kind(name: str) -> str:
    """'person', 'agent' or 'service' for a well-formed principal name (check it first)."""
    if name.startswith(SERVICE_PREFIX):
        return "service"
    return "agent" if "/" in name else "person"


# The short forms a person types and a clone's branches are named by: main, checks, routes/<r>, jobs/<id>,
# heads/<b>, tags/<t>, pull/<n>/head; a name under refs/ is already full.
_SHORT_FORMS = {"main": MAIN_REF, "checks": CHECKS_TAG}
_SHORT_PREFIXES = ("heads/", "tags/", "jobs/", "pull/")


def full_ref(name: str) -> str:
    """The full ref a short form names (``routes/x`` -> ``refs/heads/routes/x``); not checked: ``ref`` checks."""
    if name.startswith("refs/"):
        return name
    if name in _SHORT_FORMS:
        return _SHORT_FORMS[name]
    return "refs/" + name if name.startswith(_SHORT_PREFIXES) else "refs/heads/" + name


def route_branch(name: str) -> str:
    """A route's branch in a clone, the short form of its ref: ``routes/<route>``."""
    return ROUTE_PREFIX.removeprefix("refs/heads/") + name


@dataclass(frozen=True)
class Ref:
    """A hosted ref, parsed: ``kind`` is main, checks, route, pull or job; the matching field is set."""

    name: str
    kind: str
    route: str = ""
    pull_number: int = 0
    job_id: str = ""

    @property
    def stream(self) -> str:
        """The event stream whose events concern this ref."""
        if self.kind == "route":
            return route_stream(self.route)
        if self.kind == "pull":
            return pull_stream(self.pull_number)
        if self.kind == "job":
            return job_stream(self.job_id)
        return RULES_STREAM if self.kind == "checks" else MAIN_STREAM

    @property
    def commit_kind(self) -> int:
        """The events' CommitKind of a commit on this ref."""
        return _COMMIT_KINDS[self.kind]


_COMMIT_KINDS = {
    "main": events_pb2.COMMIT_KIND_MAIN,
    "checks": events_pb2.COMMIT_KIND_TAG,
    "route": events_pb2.COMMIT_KIND_ROUTE,
    "pull": events_pb2.COMMIT_KIND_PULL,
    "job": events_pb2.COMMIT_KIND_JOB,
}


def ref(value: object, field: str = "ref", *, short_forms: bool = False) -> Ref:
    """Parse a full hosted ref name (or, with ``short_forms``, a short form of one), or refuse it naming the rule."""
    if isinstance(value, str) and len(value) <= REF_MAX_CHARS:
        name = full_ref(value) if short_forms else value
        if name == MAIN_REF:
            return Ref(name, "main")
        if name == CHECKS_TAG:
            return Ref(name, "checks")
        if name.startswith(ROUTE_PREFIX) and ROUTE.matches(name[len(ROUTE_PREFIX) :]):
            return Ref(name, "route", route=name[len(ROUTE_PREFIX) :])
        if name.startswith(JOB_PREFIX) and JOB_ID.matches(name[len(JOB_PREFIX) :]):
            return Ref(name, "job", job_id=name[len(JOB_PREFIX) :])
        match = re.fullmatch(r"refs/pull/([1-9][0-9]{0,9})/head", name)
        if match and int(match[1]) <= PULL_NUMBER_MAX:
            return Ref(name, "pull", pull_number=int(match[1]))
    raise invalid("bad_ref", f"{field} {clip(value)}: {REF_RULE}")


def route_ref(name: str) -> str:
    return ROUTE_PREFIX + name


def job_ref(job: str) -> str:
    return JOB_PREFIX + job


def pull_ref(number: int) -> str:
    return f"{PULL_PREFIX}{number}/head"


# --- a route's folder in the tree ----------------------------------------------------------------------------------

ROUTES_DIR = "routes"
METRICS_FILE = "metrics.json"


def route_dir(name: str) -> str:
    """The folder a route's commits may change: ``routes/<route>`` (its paths start with this and a '/')."""
    return f"{ROUTES_DIR}/{name}"


def route_file(name: str, file: str) -> str:
    return f"{route_dir(name)}/{file}"


def route_metrics_path(name: str) -> str:
    """Where a route reports its own measurements: ``routes/<route>/metrics.json``."""
    return route_file(name, METRICS_FILE)


# --- event streams and their NATS subjects -------------------------------------------------------------------------

MAIN_STREAM = "main"
RULES_STREAM = "rules"


def _stream_of(kind: str, what: str):
    """The names of one kind of stream, ``<kind>:<key>``; ``what`` says what such a stream holds."""

    def name(key: object) -> str:
        return f"{kind}:{key}"

    name.__name__ = name.__qualname__ = f"{kind}_stream"
    name.__doc__ = f"``{kind}:<key>``: {what}."
    return name


route_stream = _stream_of("route", "a route's start, its pushes' commits, its reported metrics")
job_stream = _stream_of("job", "a job's submission, its states and its result commit")
pull_stream = _stream_of("pull", "a pull request's opening, reviews, comments and merge")
issue_stream = _stream_of("issue", "an issue's opening, comments and state changes")
benchmark_stream = _stream_of("benchmark", "a board's own events: its status and the routes adopted onto it")
principal_stream = _stream_of("principal", "a principal's registration, role changes, join requests and leaving")
check_stream = _stream_of("check", "a check's request, its result, and any maintainer's verdict on it afterwards")
deadletter_stream = _stream_of("deadletter", "a consumer's dead letters")


def consumer_actor(consumer: str) -> str:
    """Who a consumer's own events (its dead letters) are recorded as: ``system:consumer:<name>``."""
    return f"{SERVICE_PREFIX}consumer:{consumer}"


def operator(user: str) -> str:
    """The actor name of an operator acting through host access (``kb admin``): ``operator:<user>``."""
    return f"operator:{user}"


def event_subject(prefix: str, event_type: str) -> str:
    """The NATS subject an event of this type is published on: ``<prefix>.<EventType>``."""
    return f"{prefix}.{event_type}"


def every_event_subject(prefix: str) -> str:
    """The NATS subject filter that matches every event type under ``prefix``."""
    return f"{prefix}.>"


STREAM_MAX_CHARS = 160


def stream(value: object, field: str = "stream") -> str:
    """An event stream name: ``<kind>:<id>`` with a well-formed id for the kinds above, or a plain service stream
    (letters, digits, '-', '_', ':', '/', '.')."""
    if isinstance(value, str) and len(value) <= STREAM_MAX_CHARS:
        kind, _, rest = value.partition(":")
        typed = {"route": ROUTE, "job": JOB_ID}.get(kind)
        if typed is not None:
            if typed.matches(rest):
                return value
        elif kind == "pull":
            if rest.isdigit() and rest[0] != "0" and int(rest) <= PULL_NUMBER_MAX:
                return value
        elif re.fullmatch(r"[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9][A-Za-z0-9._:/-]{0,126})?", value):
            return value
    raise invalid("bad_stream", f"{field} {clip(value)}: <kind>:<id>, printable, at most {STREAM_MAX_CHARS} characters")


# Free text (titles, review bodies, notes, reasons): bounded, and no control characters, which would forge lines in
# logs and terminals (NUL is also refused by PostgreSQL's text type); bidirectional overrides would let shown text
# differ from stored text. Multi-line text may hold newlines and tabs.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text(value: object, field: str, max_chars: int, *, multiline: bool = False) -> str:
    """``value`` if it is printable text of at most ``max_chars`` characters, else a Refusal naming the field."""
    if not isinstance(value, str):
        raise invalid(f"bad_{field}", f"{field} {clip(value)}: text expected")
    if len(value) > max_chars:
        raise invalid(f"{field}_too_long", f"{field} is {len(value)} characters, over the limit of {max_chars}")
    allowed = "\n\t" if multiline else ""
    for char in value:
        if (unicodedata.category(char) == "Cc" and char not in allowed) or char in _BIDI_CONTROLS:
            raise invalid(
                f"bad_{field}",
                f"{field} {clip(value)}: control character {char!r} not allowed"
                + ("" if multiline else " (one line of text)"),
            )
    return value


def is_route(value: object) -> bool:
    return ROUTE.matches(value)


def is_ref(value: object) -> bool:
    """Whether ``value`` is a full hosted ref name (for records read back from storage, where a bad one is set
    aside, not refused)."""
    try:
        ref(value)
    except Refusal:
        return False
    return True


__all__ = [
    "consumer_actor",
    "benchmark_stream",
    "principal_stream",
    "operator",
    "route_stream",
    "route_metrics_path",
    "route_file",
    "route_dir",
    "route_branch",
    "pull_stream",
    "job_stream",
    "issue_stream",
    "full_ref",
    "every_event_subject",
    "event_subject",
    "deadletter_stream",
    "agent_owner",
    "TOKEN_PREFIX",
    "TOKEN_HASH",
    "TOKEN",
    "RULES_STREAM",
    "ROUTES_DIR",
    "MAIN_STREAM",
    "METRICS_FILE",
    "AGENT",
    "CHECKS_TAG",
    "JOB_ID",
    "JOB_PREFIX",
    "MAIN_REF",
    "OBJECT_ID",
    "PERSON",
    "PROBLEM",
    "PULL_PREFIX",
    "ROUTE",
    "ROUTE_PREFIX",
    "SCHEDULER",
    "SERVICE",
    "WEB",
    "Grammar",
    "Ref",
    "Refusal",
    "agent",
    "check_id",
    "check_stream",
    "is_ref",
    "is_route",
    "job_id",
    "job_ref",
    "object_id",
    "person",
    "principal",
    "principal_kind",
    "problem",
    "pull_number",
    "pull_ref",
    "ref",
    "route",
    "route_ref",
    "stream",
    "text",
]
