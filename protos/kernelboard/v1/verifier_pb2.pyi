import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kernelboard.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Check(_message.Message):
    __slots__ = ("check_id", "check_name", "ref", "sha", "route", "state", "result", "kind", "job_id", "rules_commit", "benchmark_version", "attempts", "claimed_by", "enqueued_at", "started_at", "finished_at", "trigger_event_id", "queue_position", "estimated_wait_s", "runner_node", "slurm_job_id")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RULES_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_BY_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    RUNNER_NODE_FIELD_NUMBER: _ClassVar[int]
    SLURM_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    check_name: str
    ref: str
    sha: str
    route: str
    state: str
    result: _events_pb2.CheckCompleted
    kind: _events_pb2.CommitKind
    job_id: str
    rules_commit: str
    benchmark_version: int
    attempts: int
    claimed_by: str
    enqueued_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    trigger_event_id: str
    queue_position: int
    estimated_wait_s: float
    runner_node: str
    slurm_job_id: str
    def __init__(self, check_id: _Optional[str] = ..., check_name: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., route: _Optional[str] = ..., state: _Optional[str] = ..., result: _Optional[_Union[_events_pb2.CheckCompleted, _Mapping]] = ..., kind: _Optional[_Union[_events_pb2.CommitKind, str]] = ..., job_id: _Optional[str] = ..., rules_commit: _Optional[str] = ..., benchmark_version: _Optional[int] = ..., attempts: _Optional[int] = ..., claimed_by: _Optional[str] = ..., enqueued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger_event_id: _Optional[str] = ..., queue_position: _Optional[int] = ..., estimated_wait_s: _Optional[float] = ..., runner_node: _Optional[str] = ..., slurm_job_id: _Optional[str] = ...) -> None: ...

class GetCheckRequest(_message.Message):
    __slots__ = ("check_id",)
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    def __init__(self, check_id: _Optional[str] = ...) -> None: ...

class ListChecksRequest(_message.Message):
    __slots__ = ("route", "sha", "limit")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    route: str
    sha: str
    limit: int
    def __init__(self, route: _Optional[str] = ..., sha: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListChecksReply(_message.Message):
    __slots__ = ("checks",)
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[Check]
    def __init__(self, checks: _Optional[_Iterable[_Union[Check, _Mapping]]] = ...) -> None: ...
