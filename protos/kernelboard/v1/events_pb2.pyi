import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrincipalKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRINCIPAL_KIND_UNSPECIFIED: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_PERSON: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_AGENT: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_SERVICE: _ClassVar[PrincipalKind]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_SIGNED_IN: _ClassVar[Role]
    ROLE_MEMBER: _ClassVar[Role]
    ROLE_MAINTAINER: _ClassVar[Role]

class CommitKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMIT_KIND_UNSPECIFIED: _ClassVar[CommitKind]
    COMMIT_KIND_ROUTE: _ClassVar[CommitKind]
    COMMIT_KIND_MAIN: _ClassVar[CommitKind]
    COMMIT_KIND_JOB: _ClassVar[CommitKind]
    COMMIT_KIND_PULL: _ClassVar[CommitKind]
    COMMIT_KIND_TAG: _ClassVar[CommitKind]

class ReviewVerdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVIEW_VERDICT_UNSPECIFIED: _ClassVar[ReviewVerdict]
    REVIEW_VERDICT_APPROVE: _ClassVar[ReviewVerdict]
    REVIEW_VERDICT_REQUEST_CHANGES: _ClassVar[ReviewVerdict]
    REVIEW_VERDICT_COMMENT: _ClassVar[ReviewVerdict]
PRINCIPAL_KIND_UNSPECIFIED: PrincipalKind
PRINCIPAL_KIND_PERSON: PrincipalKind
PRINCIPAL_KIND_AGENT: PrincipalKind
PRINCIPAL_KIND_SERVICE: PrincipalKind
ROLE_UNSPECIFIED: Role
ROLE_SIGNED_IN: Role
ROLE_MEMBER: Role
ROLE_MAINTAINER: Role
COMMIT_KIND_UNSPECIFIED: CommitKind
COMMIT_KIND_ROUTE: CommitKind
COMMIT_KIND_MAIN: CommitKind
COMMIT_KIND_JOB: CommitKind
COMMIT_KIND_PULL: CommitKind
COMMIT_KIND_TAG: CommitKind
REVIEW_VERDICT_UNSPECIFIED: ReviewVerdict
REVIEW_VERDICT_APPROVE: ReviewVerdict
REVIEW_VERDICT_REQUEST_CHANGES: ReviewVerdict
REVIEW_VERDICT_COMMENT: ReviewVerdict

class Event(_message.Message):
    __slots__ = ("event_id", "stream", "stream_version", "global_position", "type", "occurred_at", "actor", "verifier_version", "principal_registered", "route_started", "commit_ingested", "metrics_reported", "rules_approved", "job_submitted", "job_held", "job_released", "job_state_changed", "job_finished", "job_result_committed", "check_requested", "check_completed", "benchmark_status_changed", "route_adopted", "pull_request_opened", "pull_request_reviewed", "pull_request_merged", "event_dead_lettered", "issue_opened", "issue_closed", "issue_reopened", "comment_added", "join_requested", "join_decided", "role_changed", "check_disqualified")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_VERSION_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    ROUTE_STARTED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INGESTED_FIELD_NUMBER: _ClassVar[int]
    METRICS_REPORTED_FIELD_NUMBER: _ClassVar[int]
    RULES_APPROVED_FIELD_NUMBER: _ClassVar[int]
    JOB_SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    JOB_HELD_FIELD_NUMBER: _ClassVar[int]
    JOB_RELEASED_FIELD_NUMBER: _ClassVar[int]
    JOB_STATE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    JOB_FINISHED_FIELD_NUMBER: _ClassVar[int]
    JOB_RESULT_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CHECK_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CHECK_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_STATUS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ADOPTED_FIELD_NUMBER: _ClassVar[int]
    PULL_REQUEST_OPENED_FIELD_NUMBER: _ClassVar[int]
    PULL_REQUEST_REVIEWED_FIELD_NUMBER: _ClassVar[int]
    PULL_REQUEST_MERGED_FIELD_NUMBER: _ClassVar[int]
    EVENT_DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    ISSUE_OPENED_FIELD_NUMBER: _ClassVar[int]
    ISSUE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    ISSUE_REOPENED_FIELD_NUMBER: _ClassVar[int]
    COMMENT_ADDED_FIELD_NUMBER: _ClassVar[int]
    JOIN_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    JOIN_DECIDED_FIELD_NUMBER: _ClassVar[int]
    ROLE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    CHECK_DISQUALIFIED_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    stream: str
    stream_version: int
    global_position: int
    type: str
    occurred_at: _timestamp_pb2.Timestamp
    actor: str
    verifier_version: int
    principal_registered: PrincipalRegistered
    route_started: RouteStarted
    commit_ingested: CommitIngested
    metrics_reported: MetricsReported
    rules_approved: RulesApproved
    job_submitted: JobSubmitted
    job_held: JobHeld
    job_released: JobReleased
    job_state_changed: JobStateChanged
    job_finished: JobFinished
    job_result_committed: JobResultCommitted
    check_requested: CheckRequested
    check_completed: CheckCompleted
    benchmark_status_changed: BenchmarkStatusChanged
    route_adopted: RouteAdopted
    pull_request_opened: PullRequestOpened
    pull_request_reviewed: PullRequestReviewed
    pull_request_merged: PullRequestMerged
    event_dead_lettered: EventDeadLettered
    issue_opened: IssueOpened
    issue_closed: IssueClosed
    issue_reopened: IssueReopened
    comment_added: CommentAdded
    join_requested: JoinRequested
    join_decided: JoinDecided
    role_changed: RoleChanged
    check_disqualified: CheckDisqualified
    def __init__(self, event_id: _Optional[str] = ..., stream: _Optional[str] = ..., stream_version: _Optional[int] = ..., global_position: _Optional[int] = ..., type: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., verifier_version: _Optional[int] = ..., principal_registered: _Optional[_Union[PrincipalRegistered, _Mapping]] = ..., route_started: _Optional[_Union[RouteStarted, _Mapping]] = ..., commit_ingested: _Optional[_Union[CommitIngested, _Mapping]] = ..., metrics_reported: _Optional[_Union[MetricsReported, _Mapping]] = ..., rules_approved: _Optional[_Union[RulesApproved, _Mapping]] = ..., job_submitted: _Optional[_Union[JobSubmitted, _Mapping]] = ..., job_held: _Optional[_Union[JobHeld, _Mapping]] = ..., job_released: _Optional[_Union[JobReleased, _Mapping]] = ..., job_state_changed: _Optional[_Union[JobStateChanged, _Mapping]] = ..., job_finished: _Optional[_Union[JobFinished, _Mapping]] = ..., job_result_committed: _Optional[_Union[JobResultCommitted, _Mapping]] = ..., check_requested: _Optional[_Union[CheckRequested, _Mapping]] = ..., check_completed: _Optional[_Union[CheckCompleted, _Mapping]] = ..., benchmark_status_changed: _Optional[_Union[BenchmarkStatusChanged, _Mapping]] = ..., route_adopted: _Optional[_Union[RouteAdopted, _Mapping]] = ..., pull_request_opened: _Optional[_Union[PullRequestOpened, _Mapping]] = ..., pull_request_reviewed: _Optional[_Union[PullRequestReviewed, _Mapping]] = ..., pull_request_merged: _Optional[_Union[PullRequestMerged, _Mapping]] = ..., event_dead_lettered: _Optional[_Union[EventDeadLettered, _Mapping]] = ..., issue_opened: _Optional[_Union[IssueOpened, _Mapping]] = ..., issue_closed: _Optional[_Union[IssueClosed, _Mapping]] = ..., issue_reopened: _Optional[_Union[IssueReopened, _Mapping]] = ..., comment_added: _Optional[_Union[CommentAdded, _Mapping]] = ..., join_requested: _Optional[_Union[JoinRequested, _Mapping]] = ..., join_decided: _Optional[_Union[JoinDecided, _Mapping]] = ..., role_changed: _Optional[_Union[RoleChanged, _Mapping]] = ..., check_disqualified: _Optional[_Union[CheckDisqualified, _Mapping]] = ...) -> None: ...

class PrincipalRegistered(_message.Message):
    __slots__ = ("name", "kind", "owner", "role")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: PrincipalKind
    owner: str
    role: Role
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[PrincipalKind, str]] = ..., owner: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...

class RouteStarted(_message.Message):
    __slots__ = ("route", "owner", "started_by", "base_sha")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    BASE_SHA_FIELD_NUMBER: _ClassVar[int]
    route: str
    owner: str
    started_by: str
    base_sha: str
    def __init__(self, route: _Optional[str] = ..., owner: _Optional[str] = ..., started_by: _Optional[str] = ..., base_sha: _Optional[str] = ...) -> None: ...

class CommitIngested(_message.Message):
    __slots__ = ("ref", "sha", "parent", "kind", "route", "job_id", "pull_number", "changed_paths", "owner")
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PULL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    CHANGED_PATHS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ref: str
    sha: str
    parent: str
    kind: CommitKind
    route: str
    job_id: str
    pull_number: int
    changed_paths: _containers.RepeatedScalarFieldContainer[str]
    owner: str
    def __init__(self, ref: _Optional[str] = ..., sha: _Optional[str] = ..., parent: _Optional[str] = ..., kind: _Optional[_Union[CommitKind, str]] = ..., route: _Optional[str] = ..., job_id: _Optional[str] = ..., pull_number: _Optional[int] = ..., changed_paths: _Optional[_Iterable[str]] = ..., owner: _Optional[str] = ...) -> None: ...

class MetricsReported(_message.Message):
    __slots__ = ("route", "sha", "score", "cost", "subtasks", "by_maintainer", "reporter", "benchmark_version", "runner", "measured_at", "rules_commit", "score_low", "score_high")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    SUBTASKS_FIELD_NUMBER: _ClassVar[int]
    BY_MAINTAINER_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    MEASURED_AT_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    SCORE_LOW_FIELD_NUMBER: _ClassVar[int]
    SCORE_HIGH_FIELD_NUMBER: _ClassVar[int]
    route: str
    sha: str
    score: float
    cost: float
    subtasks: _struct_pb2.Value
    by_maintainer: bool
    reporter: str
    benchmark_version: int
    runner: str
    measured_at: str
    rules_commit: str
    score_low: float
    score_high: float
    def __init__(self, route: _Optional[str] = ..., sha: _Optional[str] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., subtasks: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., by_maintainer: _Optional[bool] = ..., reporter: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., runner: _Optional[str] = ..., measured_at: _Optional[str] = ..., rules_commit: _Optional[str] = ..., score_low: _Optional[float] = ..., score_high: _Optional[float] = ...) -> None: ...

class RulesApproved(_message.Message):
    __slots__ = ("rules_commit", "previous_commit", "benchmark_version", "rules_json")
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    RULES_JSON_FIELD_NUMBER: _ClassVar[int]
    rules_commit: str
    previous_commit: str
    benchmark_version: int
    rules_json: str
    def __init__(self, rules_commit: _Optional[str] = ..., previous_commit: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., rules_json: _Optional[str] = ...) -> None: ...

class JobResources(_message.Message):
    __slots__ = ("partition", "cpus", "mem_mb", "time_limit_s", "gpus")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    partition: str
    cpus: int
    mem_mb: int
    time_limit_s: int
    gpus: int
    def __init__(self, partition: _Optional[str] = ..., cpus: _Optional[int] = ..., mem_mb: _Optional[int] = ..., time_limit_s: _Optional[int] = ..., gpus: _Optional[int] = ...) -> None: ...

class JobSubmitted(_message.Message):
    __slots__ = ("job_id", "route", "ref", "sha", "script_path", "owner", "submitted_by", "resources", "held", "work_dir")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_PATH_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_BY_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    route: str
    ref: str
    sha: str
    script_path: str
    owner: str
    submitted_by: str
    resources: JobResources
    held: bool
    work_dir: str
    def __init__(self, job_id: _Optional[str] = ..., route: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., script_path: _Optional[str] = ..., owner: _Optional[str] = ..., submitted_by: _Optional[str] = ..., resources: _Optional[_Union[JobResources, _Mapping]] = ..., held: _Optional[bool] = ..., work_dir: _Optional[str] = ...) -> None: ...

class JobHeld(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobReleased(_message.Message):
    __slots__ = ("job_id", "released_by")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASED_BY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    released_by: str
    def __init__(self, job_id: _Optional[str] = ..., released_by: _Optional[str] = ...) -> None: ...

class JobStateChanged(_message.Message):
    __slots__ = ("job_id", "state", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobFinished(_message.Message):
    __slots__ = ("job_id", "state", "exit_code", "elapsed_s", "cpu_seconds", "signal")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: str
    exit_code: int
    elapsed_s: float
    cpu_seconds: float
    signal: int
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., cpu_seconds: _Optional[float] = ..., signal: _Optional[int] = ...) -> None: ...

class JobResultCommitted(_message.Message):
    __slots__ = ("job_id", "ref", "sha", "parent", "files", "bytes", "excluded", "not_committed")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_FIELD_NUMBER: _ClassVar[int]
    NOT_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    ref: str
    sha: str
    parent: str
    files: int
    bytes: int
    excluded: _containers.RepeatedScalarFieldContainer[str]
    not_committed: str
    def __init__(self, job_id: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., parent: _Optional[str] = ..., files: _Optional[int] = ..., bytes: _Optional[int] = ..., excluded: _Optional[_Iterable[str]] = ..., not_committed: _Optional[str] = ...) -> None: ...

class CheckRequested(_message.Message):
    __slots__ = ("check_id", "check_name", "ref", "sha", "route", "kind", "job_id", "rules_commit", "benchmark_version", "trigger_event_id")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    check_name: str
    ref: str
    sha: str
    route: str
    kind: CommitKind
    job_id: str
    rules_commit: str
    benchmark_version: int
    trigger_event_id: str
    def __init__(self, check_id: _Optional[str] = ..., check_name: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., route: _Optional[str] = ..., kind: _Optional[_Union[CommitKind, str]] = ..., job_id: _Optional[str] = ..., rules_commit: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., trigger_event_id: _Optional[str] = ...) -> None: ...

class Subtask(_message.Message):
    __slots__ = ("id", "passed", "submitted", "speedup", "reference_ms", "candidate_ms", "max_abs_error", "error_ratio", "floor_fraction", "violations", "flagged", "not_judged", "peak_judge_bytes", "peak_candidate_bytes", "speedup_low", "speedup_high", "candidate_rsd", "host_synced")
    ID_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_MS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_RATIO_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FRACTION_FIELD_NUMBER: _ClassVar[int]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_FIELD_NUMBER: _ClassVar[int]
    NOT_JUDGED_FIELD_NUMBER: _ClassVar[int]
    PEAK_JUDGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PEAK_CANDIDATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_LOW_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_HIGH_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RSD_FIELD_NUMBER: _ClassVar[int]
    HOST_SYNCED_FIELD_NUMBER: _ClassVar[int]
    id: str
    passed: bool
    submitted: bool
    speedup: float
    reference_ms: float
    candidate_ms: float
    max_abs_error: float
    error_ratio: float
    floor_fraction: float
    violations: _containers.RepeatedScalarFieldContainer[str]
    flagged: bool
    not_judged: str
    peak_judge_bytes: int
    peak_candidate_bytes: int
    speedup_low: float
    speedup_high: float
    candidate_rsd: float
    host_synced: bool
    def __init__(self, id: _Optional[str] = ..., passed: _Optional[bool] = ..., submitted: _Optional[bool] = ..., speedup: _Optional[float] = ..., reference_ms: _Optional[float] = ..., candidate_ms: _Optional[float] = ..., max_abs_error: _Optional[float] = ..., error_ratio: _Optional[float] = ..., floor_fraction: _Optional[float] = ..., violations: _Optional[_Iterable[str]] = ..., flagged: _Optional[bool] = ..., not_judged: _Optional[str] = ..., peak_judge_bytes: _Optional[int] = ..., peak_candidate_bytes: _Optional[int] = ..., speedup_low: _Optional[float] = ..., speedup_high: _Optional[float] = ..., candidate_rsd: _Optional[float] = ..., host_synced: _Optional[bool] = ...) -> None: ...

class CheckCompleted(_message.Message):
    __slots__ = ("check_id", "check_name", "ref", "sha", "route", "kind", "job_id", "passed", "reasons", "score", "cost", "subtasks", "rules_commit", "benchmark_version", "runner", "torch_version", "triton_version", "duration_s", "verifier_host", "verified", "not_verified_because", "incomplete", "score_low", "score_high", "timing_protocol", "attempts")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    SUBTASKS_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    TORCH_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRITON_VERSION_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_HOST_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    NOT_VERIFIED_BECAUSE_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    SCORE_LOW_FIELD_NUMBER: _ClassVar[int]
    SCORE_HIGH_FIELD_NUMBER: _ClassVar[int]
    TIMING_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    check_name: str
    ref: str
    sha: str
    route: str
    kind: CommitKind
    job_id: str
    passed: bool
    reasons: _containers.RepeatedScalarFieldContainer[str]
    score: float
    cost: float
    subtasks: _containers.RepeatedCompositeFieldContainer[Subtask]
    rules_commit: str
    benchmark_version: int
    runner: str
    torch_version: str
    triton_version: str
    duration_s: float
    verifier_host: str
    verified: bool
    not_verified_because: _containers.RepeatedScalarFieldContainer[str]
    incomplete: bool
    score_low: float
    score_high: float
    timing_protocol: str
    attempts: int
    def __init__(self, check_id: _Optional[str] = ..., check_name: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., route: _Optional[str] = ..., kind: _Optional[_Union[CommitKind, str]] = ..., job_id: _Optional[str] = ..., passed: _Optional[bool] = ..., reasons: _Optional[_Iterable[str]] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., subtasks: _Optional[_Iterable[_Union[Subtask, _Mapping]]] = ..., rules_commit: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., runner: _Optional[str] = ..., torch_version: _Optional[str] = ..., triton_version: _Optional[str] = ..., duration_s: _Optional[float] = ..., verifier_host: _Optional[str] = ..., verified: _Optional[bool] = ..., not_verified_because: _Optional[_Iterable[str]] = ..., incomplete: _Optional[bool] = ..., score_low: _Optional[float] = ..., score_high: _Optional[float] = ..., timing_protocol: _Optional[str] = ..., attempts: _Optional[int] = ...) -> None: ...

class BenchmarkStatusChanged(_message.Message):
    __slots__ = ("benchmark_version", "status", "reason")
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    benchmark_version: int
    status: str
    reason: str
    def __init__(self, benchmark_version: _Optional[int] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RouteAdopted(_message.Message):
    __slots__ = ("route", "benchmark_version", "adopted", "note")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    route: str
    benchmark_version: int
    adopted: bool
    note: str
    def __init__(self, route: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., adopted: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class CheckDisqualified(_message.Message):
    __slots__ = ("check_id", "route", "sha", "benchmark_version", "reason", "disqualified")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DISQUALIFIED_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    route: str
    sha: str
    benchmark_version: int
    reason: str
    disqualified: bool
    def __init__(self, check_id: _Optional[str] = ..., route: _Optional[str] = ..., sha: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., reason: _Optional[str] = ..., disqualified: _Optional[bool] = ...) -> None: ...

class PullRequestOpened(_message.Message):
    __slots__ = ("number", "route", "head_sha", "base_ref", "title", "author", "body")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    HEAD_SHA_FIELD_NUMBER: _ClassVar[int]
    BASE_REF_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    number: int
    route: str
    head_sha: str
    base_ref: str
    title: str
    author: str
    body: str
    def __init__(self, number: _Optional[int] = ..., route: _Optional[str] = ..., head_sha: _Optional[str] = ..., base_ref: _Optional[str] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., body: _Optional[str] = ...) -> None: ...

class PullRequestReviewed(_message.Message):
    __slots__ = ("number", "verdict", "body", "reviewer")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    number: int
    verdict: ReviewVerdict
    body: str
    reviewer: str
    def __init__(self, number: _Optional[int] = ..., verdict: _Optional[_Union[ReviewVerdict, str]] = ..., body: _Optional[str] = ..., reviewer: _Optional[str] = ...) -> None: ...

class PullRequestMerged(_message.Message):
    __slots__ = ("number", "merge_sha", "base_ref", "merged_by")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    MERGE_SHA_FIELD_NUMBER: _ClassVar[int]
    BASE_REF_FIELD_NUMBER: _ClassVar[int]
    MERGED_BY_FIELD_NUMBER: _ClassVar[int]
    number: int
    merge_sha: str
    base_ref: str
    merged_by: str
    def __init__(self, number: _Optional[int] = ..., merge_sha: _Optional[str] = ..., base_ref: _Optional[str] = ..., merged_by: _Optional[str] = ...) -> None: ...

class EventDeadLettered(_message.Message):
    __slots__ = ("consumer", "event_id", "global_position", "error", "attempts")
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    consumer: str
    event_id: str
    global_position: int
    error: str
    attempts: int
    def __init__(self, consumer: _Optional[str] = ..., event_id: _Optional[str] = ..., global_position: _Optional[int] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ...) -> None: ...

class IssueOpened(_message.Message):
    __slots__ = ("number", "title", "body", "author", "author_owner")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_OWNER_FIELD_NUMBER: _ClassVar[int]
    number: int
    title: str
    body: str
    author: str
    author_owner: str
    def __init__(self, number: _Optional[int] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., author: _Optional[str] = ..., author_owner: _Optional[str] = ...) -> None: ...

class IssueClosed(_message.Message):
    __slots__ = ("number", "closed_by")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    CLOSED_BY_FIELD_NUMBER: _ClassVar[int]
    number: int
    closed_by: str
    def __init__(self, number: _Optional[int] = ..., closed_by: _Optional[str] = ...) -> None: ...

class IssueReopened(_message.Message):
    __slots__ = ("number", "reopened_by")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    REOPENED_BY_FIELD_NUMBER: _ClassVar[int]
    number: int
    reopened_by: str
    def __init__(self, number: _Optional[int] = ..., reopened_by: _Optional[str] = ...) -> None: ...

class CommentAdded(_message.Message):
    __slots__ = ("comment_id", "issue_number", "pull_number", "body", "author")
    COMMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ISSUE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PULL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    comment_id: int
    issue_number: int
    pull_number: int
    body: str
    author: str
    def __init__(self, comment_id: _Optional[int] = ..., issue_number: _Optional[int] = ..., pull_number: _Optional[int] = ..., body: _Optional[str] = ..., author: _Optional[str] = ...) -> None: ...

class JoinRequested(_message.Message):
    __slots__ = ("request_id", "name", "note")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    name: str
    note: str
    def __init__(self, request_id: _Optional[int] = ..., name: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class JoinDecided(_message.Message):
    __slots__ = ("request_id", "name", "accepted", "decided_by", "note")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    name: str
    accepted: bool
    decided_by: str
    note: str
    def __init__(self, request_id: _Optional[int] = ..., name: _Optional[str] = ..., accepted: _Optional[bool] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class RoleChanged(_message.Message):
    __slots__ = ("name", "role", "previous_role", "cause")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_ROLE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: Role
    previous_role: Role
    cause: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., previous_role: _Optional[_Union[Role, str]] = ..., cause: _Optional[str] = ...) -> None: ...
