from kernelboard.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetBoardRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class BoardEntry(_message.Message):
    __slots__ = ("rank", "route", "owner", "score", "cost", "sha", "source", "reason", "adopted", "global_position", "verifier_version", "occurred_at", "check_id", "reporter", "runner", "score_low", "score_high", "tied", "job_id")
    RANK_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_VERSION_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SCORE_LOW_FIELD_NUMBER: _ClassVar[int]
    SCORE_HIGH_FIELD_NUMBER: _ClassVar[int]
    TIED_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    rank: int
    route: str
    owner: str
    score: float
    cost: float
    sha: str
    source: str
    reason: str
    adopted: bool
    global_position: int
    verifier_version: int
    occurred_at: str
    check_id: str
    reporter: str
    runner: str
    score_low: float
    score_high: float
    tied: bool
    job_id: str
    def __init__(self, rank: _Optional[int] = ..., route: _Optional[str] = ..., owner: _Optional[str] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., sha: _Optional[str] = ..., source: _Optional[str] = ..., reason: _Optional[str] = ..., adopted: _Optional[bool] = ..., global_position: _Optional[int] = ..., verifier_version: _Optional[int] = ..., occurred_at: _Optional[str] = ..., check_id: _Optional[str] = ..., reporter: _Optional[str] = ..., runner: _Optional[str] = ..., score_low: _Optional[float] = ..., score_high: _Optional[float] = ..., tied: _Optional[bool] = ..., job_id: _Optional[str] = ...) -> None: ...

class BoardHeader(_message.Message):
    __slots__ = ("agents_at_work", "agents_in_all", "routes", "last_active", "started")
    AGENTS_AT_WORK_FIELD_NUMBER: _ClassVar[int]
    AGENTS_IN_ALL_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    agents_at_work: int
    agents_in_all: int
    routes: int
    last_active: str
    started: str
    def __init__(self, agents_at_work: _Optional[int] = ..., agents_in_all: _Optional[int] = ..., routes: _Optional[int] = ..., last_active: _Optional[str] = ..., started: _Optional[str] = ...) -> None: ...

class BoardGuardrail(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class BenchmarkCard(_message.Message):
    __slots__ = ("version", "name", "task", "metric", "baseline", "kernels", "score_rule", "verifier_versions", "guardrails", "status", "status_reason", "rules_commit", "approved_at", "rules_error")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    SCORE_RULE_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    GUARDRAILS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    APPROVED_AT_FIELD_NUMBER: _ClassVar[int]
    RULES_ERROR_FIELD_NUMBER: _ClassVar[int]
    version: int
    name: str
    task: str
    metric: str
    baseline: str
    kernels: _containers.RepeatedScalarFieldContainer[str]
    score_rule: str
    verifier_versions: _containers.RepeatedScalarFieldContainer[int]
    guardrails: _containers.RepeatedCompositeFieldContainer[BoardGuardrail]
    status: str
    status_reason: str
    rules_commit: str
    approved_at: str
    rules_error: str
    def __init__(self, version: _Optional[int] = ..., name: _Optional[str] = ..., task: _Optional[str] = ..., metric: _Optional[str] = ..., baseline: _Optional[str] = ..., kernels: _Optional[_Iterable[str]] = ..., score_rule: _Optional[str] = ..., verifier_versions: _Optional[_Iterable[int]] = ..., guardrails: _Optional[_Iterable[_Union[BoardGuardrail, _Mapping]]] = ..., status: _Optional[str] = ..., status_reason: _Optional[str] = ..., rules_commit: _Optional[str] = ..., approved_at: _Optional[str] = ..., rules_error: _Optional[str] = ...) -> None: ...

class BoardView(_message.Message):
    __slots__ = ("version", "status", "header", "ranked", "listed_beside", "log_position", "card", "status_reason", "earlier", "current_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RANKED_FIELD_NUMBER: _ClassVar[int]
    LISTED_BESIDE_FIELD_NUMBER: _ClassVar[int]
    LOG_POSITION_FIELD_NUMBER: _ClassVar[int]
    CARD_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    EARLIER_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    status: str
    header: BoardHeader
    ranked: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    listed_beside: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    log_position: int
    card: BenchmarkCard
    status_reason: str
    earlier: bool
    current_version: int
    def __init__(self, version: _Optional[int] = ..., status: _Optional[str] = ..., header: _Optional[_Union[BoardHeader, _Mapping]] = ..., ranked: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., listed_beside: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., log_position: _Optional[int] = ..., card: _Optional[_Union[BenchmarkCard, _Mapping]] = ..., status_reason: _Optional[str] = ..., earlier: _Optional[bool] = ..., current_version: _Optional[int] = ...) -> None: ...

class BoardProblems(_message.Message):
    __slots__ = ("version", "name", "earlier", "problems", "log_position")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EARLIER_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    LOG_POSITION_FIELD_NUMBER: _ClassVar[int]
    version: int
    name: str
    earlier: bool
    problems: _containers.RepeatedCompositeFieldContainer[ProblemLeader]
    log_position: int
    def __init__(self, version: _Optional[int] = ..., name: _Optional[str] = ..., earlier: _Optional[bool] = ..., problems: _Optional[_Iterable[_Union[ProblemLeader, _Mapping]]] = ..., log_position: _Optional[int] = ...) -> None: ...

class ProblemLeader(_message.Message):
    __slots__ = ("problem", "speedup", "route", "owner", "sha", "check_id", "global_position", "occurred_at", "job_id")
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    problem: str
    speedup: float
    route: str
    owner: str
    sha: str
    check_id: str
    global_position: int
    occurred_at: str
    job_id: str
    def __init__(self, problem: _Optional[str] = ..., speedup: _Optional[float] = ..., route: _Optional[str] = ..., owner: _Optional[str] = ..., sha: _Optional[str] = ..., check_id: _Optional[str] = ..., global_position: _Optional[int] = ..., occurred_at: _Optional[str] = ..., job_id: _Optional[str] = ...) -> None: ...

class ListBoardsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListBoardsReply(_message.Message):
    __slots__ = ("boards",)
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    boards: _containers.RepeatedCompositeFieldContainer[BoardView]
    def __init__(self, boards: _Optional[_Iterable[_Union[BoardView, _Mapping]]] = ...) -> None: ...

class GetBoardRouteRequest(_message.Message):
    __slots__ = ("route", "version")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    route: str
    version: int
    def __init__(self, route: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class BoardRouteRecord(_message.Message):
    __slots__ = ("global_position", "occurred_at", "kind", "sha", "score", "cost", "passed", "reasons", "verifier_version", "counted", "note", "check_id", "reporter", "by_maintainer", "subtasks", "runner", "verified", "incomplete", "score_low", "score_high", "torch_version", "triton_version", "rules_commit", "not_verified_because", "job_id")
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_VERSION_FIELD_NUMBER: _ClassVar[int]
    COUNTED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    BY_MAINTAINER_FIELD_NUMBER: _ClassVar[int]
    SUBTASKS_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    SCORE_LOW_FIELD_NUMBER: _ClassVar[int]
    SCORE_HIGH_FIELD_NUMBER: _ClassVar[int]
    TORCH_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRITON_VERSION_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    NOT_VERIFIED_BECAUSE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    global_position: int
    occurred_at: str
    kind: str
    sha: str
    score: float
    cost: float
    passed: bool
    reasons: _containers.RepeatedScalarFieldContainer[str]
    verifier_version: int
    counted: bool
    note: str
    check_id: str
    reporter: str
    by_maintainer: bool
    subtasks: _containers.RepeatedCompositeFieldContainer[_events_pb2.Subtask]
    runner: str
    verified: bool
    incomplete: bool
    score_low: float
    score_high: float
    torch_version: str
    triton_version: str
    rules_commit: str
    not_verified_because: _containers.RepeatedScalarFieldContainer[str]
    job_id: str
    def __init__(self, global_position: _Optional[int] = ..., occurred_at: _Optional[str] = ..., kind: _Optional[str] = ..., sha: _Optional[str] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., passed: _Optional[bool] = ..., reasons: _Optional[_Iterable[str]] = ..., verifier_version: _Optional[int] = ..., counted: _Optional[bool] = ..., note: _Optional[str] = ..., check_id: _Optional[str] = ..., reporter: _Optional[str] = ..., by_maintainer: _Optional[bool] = ..., subtasks: _Optional[_Iterable[_Union[_events_pb2.Subtask, _Mapping]]] = ..., runner: _Optional[str] = ..., verified: _Optional[bool] = ..., incomplete: _Optional[bool] = ..., score_low: _Optional[float] = ..., score_high: _Optional[float] = ..., torch_version: _Optional[str] = ..., triton_version: _Optional[str] = ..., rules_commit: _Optional[str] = ..., not_verified_because: _Optional[_Iterable[str]] = ..., job_id: _Optional[str] = ...) -> None: ...

class BoardRouteVersion(_message.Message):
    __slots__ = ("version", "adopted", "entries", "checks", "checks_passed", "reports", "history")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_PASSED_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    version: int
    adopted: bool
    entries: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    checks: int
    checks_passed: int
    reports: int
    history: _containers.RepeatedCompositeFieldContainer[BoardRouteRecord]
    def __init__(self, version: _Optional[int] = ..., adopted: _Optional[bool] = ..., entries: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., checks: _Optional[int] = ..., checks_passed: _Optional[int] = ..., reports: _Optional[int] = ..., history: _Optional[_Iterable[_Union[BoardRouteRecord, _Mapping]]] = ...) -> None: ...

class BoardRoute(_message.Message):
    __slots__ = ("route", "owner", "started_by", "started", "boards", "log_position")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    LOG_POSITION_FIELD_NUMBER: _ClassVar[int]
    route: str
    owner: str
    started_by: str
    started: str
    boards: _containers.RepeatedCompositeFieldContainer[BoardRouteVersion]
    log_position: int
    def __init__(self, route: _Optional[str] = ..., owner: _Optional[str] = ..., started_by: _Optional[str] = ..., started: _Optional[str] = ..., boards: _Optional[_Iterable[_Union[BoardRouteVersion, _Mapping]]] = ..., log_position: _Optional[int] = ...) -> None: ...

class GetBenchmarkRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class WatchBoardRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class RebuildBoardRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RebuildBoardReply(_message.Message):
    __slots__ = ("events", "seconds", "log_position", "boards")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    LOG_POSITION_FIELD_NUMBER: _ClassVar[int]
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    events: int
    seconds: float
    log_position: int
    boards: int
    def __init__(self, events: _Optional[int] = ..., seconds: _Optional[float] = ..., log_position: _Optional[int] = ..., boards: _Optional[int] = ...) -> None: ...

class AdoptRouteRequest(_message.Message):
    __slots__ = ("route", "version", "adopted", "note")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    route: str
    version: int
    adopted: bool
    note: str
    def __init__(self, route: _Optional[str] = ..., version: _Optional[int] = ..., adopted: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class SetBenchmarkStatusRequest(_message.Message):
    __slots__ = ("version", "status", "reason")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    version: int
    status: str
    reason: str
    def __init__(self, version: _Optional[int] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DisqualifyCheckRequest(_message.Message):
    __slots__ = ("check_id", "reason", "reinstate")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REINSTATE_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    reason: str
    reinstate: bool
    def __init__(self, check_id: _Optional[str] = ..., reason: _Optional[str] = ..., reinstate: _Optional[bool] = ...) -> None: ...

class BoardChangeReply(_message.Message):
    __slots__ = ("version", "global_position")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    version: int
    global_position: int
    def __init__(self, version: _Optional[int] = ..., global_position: _Optional[int] = ...) -> None: ...
