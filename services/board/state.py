"""What the board's fold builds (projection.py) and every reader of it reads (standing.py, views.py, codec.py): the
boards, each route's place and history on them, and the routes and principals the log has named. Plain data with
slots or NamedTuples, built without copying on the fold's hot path.
"""

from array import array
from typing import NamedTuple

ACTIVE = "active"
QUIET = "quiet"
SET_STATUSES = frozenset({"active", "saturated", "superseded", "flawed"})


class Entry(NamedTuple):
    """A row of a board: the score one event placed for a route."""

    source: str
    score: float
    cost: float
    sha: str
    reason: str
    position: int
    occurred_ns: int
    verifier_version: int
    check_id: str
    reporter: str
    runner: str
    score_low: float  # the score's interval from its own noise; 0/0: none (the score alone)
    score_high: float
    job_id: str  # a check of a job's result commit: the job ("" for a push's check, and for reports)


# A route's history on a board is the log positions of its checks, reports and adoption marks, each with what the
# fold decided of it: position * 4 + one of these. The events themselves stay in the log (GetRoute reads them back);
# keeping copies here would cost the fold most of its throughput and the stored state most of its size.
COUNTED = 0

NOT_ACCEPTED = 1  # a check of a verifier version the board's rules do not accept

NOT_FINITE = 2  # a score that is not a finite number

NOT_VERIFIED = 3  # a passing check not judged on the pinned runner at full shapes (e.g. a CPU profile)


class Record(NamedTuple):
    """One thing that happened to a route on a board, read back from the log (for GetRoute)."""

    position: int
    occurred_ns: int
    kind: str  # "check" | "report" | "adopted" | "unadopted" | "disqualified" | "reinstated"
    sha: str
    score: float
    cost: float
    passed: bool
    reasons: tuple[str, ...]
    verifier_version: int
    counted: bool
    note: str
    check_id: str
    reporter: str
    by_maintainer: bool


class RouteOnBoard:
    __slots__ = (
        "verified",
        "by_maintainer",
        "reported",
        "failed",
        "adopted",
        "checks",
        "checks_passed",
        "reports",
        "history",
        "passes",
        "disqualified",
        "key",
    )

    def __init__(self, key: tuple[int, str]):
        self.verified: Entry | None = None
        self.by_maintainer: Entry | None = None
        self.reported: Entry | None = None
        self.failed: Entry | None = None  # the latest check that did not count (failed, or passed unverified)
        self.adopted = False
        self.checks = 0
        self.checks_passed = 0
        self.reports = 0
        self.history = array("q")  # position * 4 + COUNTED | NOT_ACCEPTED | NOT_FINITE | NOT_VERIFIED
        self.passes: list[Entry] = []  # every verified pass, in log order: the best one not disqualified ranks
        self.disqualified: dict[str, tuple[str, str]] = {}  # check id -> (the maintainer, the reason)
        # (board version, route): its key in State.touched_routes, built once rather than for each of its events
        # (not stored: it is the row's own key).
        self.key = key


class Card(NamedTuple):
    """The judging card's fields, read from RulesApproved.rules_json."""

    name: str
    task: str
    metric: str
    baseline: str
    kernels: tuple[str, ...]
    score_rule: str
    verifier_versions: tuple[int, ...]  # empty: any
    guardrails: tuple[tuple[str, str], ...]  # (dotted name, JSON value), sorted
    rules_commit: str
    approved_ns: int
    rules_error: str


class Board:
    __slots__ = (
        "version",
        "card",
        "status",
        "status_reason",
        "started_ns",
        "last_active_ns",
        "last_scored_ns",
        "routes",
        "actors",
    )

    def __init__(self, version: int, started_ns: int):
        self.version = version
        self.card: Card | None = None
        self.status = ACTIVE
        self.status_reason = ""
        self.started_ns = started_ns
        self.last_active_ns = started_ns
        self.last_scored_ns = 0
        self.routes: dict[str, RouteOnBoard] = {}
        self.actors: dict[str, int] = {}  # actor -> time of its latest event on this board


class RouteInfo(NamedTuple):
    owner: str
    started_by: str
    started_ns: int
    position: int


class State:
    __slots__ = (
        "position",
        "now_ns",
        "in_force",
        "boards",
        "routes",
        "agents",
        "not_agents",
        "touched_boards",
        "touched_routes",
    )

    def __init__(self):
        self.position = 0  # the last event folded
        self.now_ns = 0  # the latest event time folded
        self.in_force = 0  # the highest version whose rules were approved; 0: none yet
        self.boards: dict[int, Board] = {}
        self.routes: dict[str, RouteInfo] = {}
        self.agents: set[str] = set()
        self.not_agents: set[str] = set()  # registered as persons or services
        # What changed since the store last wrote it: bookkeeping for persistence, not part of the state.
        self.touched_boards: set[int] = set()
        self.touched_routes: set[tuple[int, str]] = set()
