from kernelboard.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitJobRequest(_message.Message):
    __slots__ = ("ref", "sha", "script_path")
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_PATH_FIELD_NUMBER: _ClassVar[int]
    ref: str
    sha: str
    script_path: str
    def __init__(self, ref: _Optional[str] = ..., sha: _Optional[str] = ..., script_path: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "route", "ref", "sha", "script_path", "owner", "state", "reason", "held", "exit_code", "elapsed_s", "cpu_seconds", "result_ref", "result_sha", "resources", "work_dir", "signal", "finished", "submitted_by", "released_by", "excluded", "version", "result_error")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_PATH_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_REF_FIELD_NUMBER: _ClassVar[int]
    RESULT_SHA_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_BY_FIELD_NUMBER: _ClassVar[int]
    RELEASED_BY_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESULT_ERROR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    route: str
    ref: str
    sha: str
    script_path: str
    owner: str
    state: str
    reason: str
    held: bool
    exit_code: int
    elapsed_s: float
    cpu_seconds: float
    result_ref: str
    result_sha: str
    resources: _events_pb2.JobResources
    work_dir: str
    signal: int
    finished: bool
    submitted_by: str
    released_by: str
    excluded: _containers.RepeatedScalarFieldContainer[str]
    version: int
    result_error: str
    def __init__(self, job_id: _Optional[str] = ..., route: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., script_path: _Optional[str] = ..., owner: _Optional[str] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., held: _Optional[bool] = ..., exit_code: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., cpu_seconds: _Optional[float] = ..., result_ref: _Optional[str] = ..., result_sha: _Optional[str] = ..., resources: _Optional[_Union[_events_pb2.JobResources, _Mapping]] = ..., work_dir: _Optional[str] = ..., signal: _Optional[int] = ..., finished: _Optional[bool] = ..., submitted_by: _Optional[str] = ..., released_by: _Optional[str] = ..., excluded: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., result_error: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("route", "owner", "live_only")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    LIVE_ONLY_FIELD_NUMBER: _ClassVar[int]
    route: str
    owner: str
    live_only: bool
    def __init__(self, route: _Optional[str] = ..., owner: _Optional[str] = ..., live_only: _Optional[bool] = ...) -> None: ...

class ListJobsReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class ReleaseJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...
