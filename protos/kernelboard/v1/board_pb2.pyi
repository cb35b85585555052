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
    __slots__ = ("rank", "route", "owner", "score", "cost", "sha", "source", "reason", "adopted", "global_position")
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
    def __init__(self, rank: _Optional[int] = ..., route: _Optional[str] = ..., owner: _Optional[str] = ..., score: _Optional[float] = ..., cost: _Optional[float] = ..., sha: _Optional[str] = ..., source: _Optional[str] = ..., reason: _Optional[str] = ..., adopted: _Optional[bool] = ..., global_position: _Optional[int] = ...) -> None: ...

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

class BoardView(_message.Message):
    __slots__ = ("version", "status", "header", "ranked", "listed_beside", "log_position")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RANKED_FIELD_NUMBER: _ClassVar[int]
    LISTED_BESIDE_FIELD_NUMBER: _ClassVar[int]
    LOG_POSITION_FIELD_NUMBER: _ClassVar[int]
    version: int
    status: str
    header: BoardHeader
    ranked: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    listed_beside: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    log_position: int
    def __init__(self, version: _Optional[int] = ..., status: _Optional[str] = ..., header: _Optional[_Union[BoardHeader, _Mapping]] = ..., ranked: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., listed_beside: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., log_position: _Optional[int] = ...) -> None: ...

class ListBoardsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListBoardsReply(_message.Message):
    __slots__ = ("boards",)
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    boards: _containers.RepeatedCompositeFieldContainer[BoardView]
    def __init__(self, boards: _Optional[_Iterable[_Union[BoardView, _Mapping]]] = ...) -> None: ...
