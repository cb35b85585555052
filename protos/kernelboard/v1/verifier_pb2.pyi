from kernelboard.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Check(_message.Message):
    __slots__ = ("check_id", "check_name", "ref", "sha", "route", "state", "result")
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    check_name: str
    ref: str
    sha: str
    route: str
    state: str
    result: _events_pb2.CheckCompleted
    def __init__(self, check_id: _Optional[str] = ..., check_name: _Optional[str] = ..., ref: _Optional[str] = ..., sha: _Optional[str] = ..., route: _Optional[str] = ..., state: _Optional[str] = ..., result: _Optional[_Union[_events_pb2.CheckCompleted, _Mapping]] = ...) -> None: ...

class GetCheckRequest(_message.Message):
    __slots__ = ("check_id",)
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    check_id: str
    def __init__(self, check_id: _Optional[str] = ...) -> None: ...

class ListChecksRequest(_message.Message):
    __slots__ = ("route", "sha")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    route: str
    sha: str
    def __init__(self, route: _Optional[str] = ..., sha: _Optional[str] = ...) -> None: ...

class ListChecksReply(_message.Message):
    __slots__ = ("checks",)
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[Check]
    def __init__(self, checks: _Optional[_Iterable[_Union[Check, _Mapping]]] = ...) -> None: ...
