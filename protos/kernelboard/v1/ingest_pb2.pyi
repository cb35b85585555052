from kernelboard.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Principal(_message.Message):
    __slots__ = ("name", "kind", "owner", "role")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: _events_pb2.PrincipalKind
    owner: str
    role: _events_pb2.Role
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[_events_pb2.PrincipalKind, str]] = ..., owner: _Optional[str] = ..., role: _Optional[_Union[_events_pb2.Role, str]] = ...) -> None: ...

class StartRouteRequest(_message.Message):
    __slots__ = ("route",)
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    route: str
    def __init__(self, route: _Optional[str] = ...) -> None: ...

class Route(_message.Message):
    __slots__ = ("route", "owner", "head_sha", "started_by")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HEAD_SHA_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    route: str
    owner: str
    head_sha: str
    started_by: str
    def __init__(self, route: _Optional[str] = ..., owner: _Optional[str] = ..., head_sha: _Optional[str] = ..., started_by: _Optional[str] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("ref", "bundle")
    REF_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    ref: str
    bundle: bytes
    def __init__(self, ref: _Optional[str] = ..., bundle: _Optional[bytes] = ...) -> None: ...

class PushReply(_message.Message):
    __slots__ = ("ref", "sha", "parent", "event_id")
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    ref: str
    sha: str
    parent: str
    event_id: str
    def __init__(self, ref: _Optional[str] = ..., sha: _Optional[str] = ..., parent: _Optional[str] = ..., event_id: _Optional[str] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("refs",)
    REFS_FIELD_NUMBER: _ClassVar[int]
    refs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, refs: _Optional[_Iterable[str]] = ...) -> None: ...

class FetchReply(_message.Message):
    __slots__ = ("bundle",)
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    bundle: bytes
    def __init__(self, bundle: _Optional[bytes] = ...) -> None: ...

class ListRoutesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRoutesReply(_message.Message):
    __slots__ = ("routes",)
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    routes: _containers.RepeatedCompositeFieldContainer[Route]
    def __init__(self, routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ...) -> None: ...

class GetRouteRequest(_message.Message):
    __slots__ = ("route",)
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    route: str
    def __init__(self, route: _Optional[str] = ...) -> None: ...
