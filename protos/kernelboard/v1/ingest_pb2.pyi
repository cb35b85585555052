import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
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
    __slots__ = ("route", "owner", "head_sha", "started_by", "base_sha")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HEAD_SHA_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    BASE_SHA_FIELD_NUMBER: _ClassVar[int]
    route: str
    owner: str
    head_sha: str
    started_by: str
    base_sha: str
    def __init__(self, route: _Optional[str] = ..., owner: _Optional[str] = ..., head_sha: _Optional[str] = ..., started_by: _Optional[str] = ..., base_sha: _Optional[str] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("ref", "bundle")
    REF_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    ref: str
    bundle: bytes
    def __init__(self, ref: _Optional[str] = ..., bundle: _Optional[bytes] = ...) -> None: ...

class PushReply(_message.Message):
    __slots__ = ("ref", "sha", "parent", "event_id", "changed_paths", "metrics_reported", "rules_approved")
    REF_FIELD_NUMBER: _ClassVar[int]
    SHA_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGED_PATHS_FIELD_NUMBER: _ClassVar[int]
    METRICS_REPORTED_FIELD_NUMBER: _ClassVar[int]
    RULES_APPROVED_FIELD_NUMBER: _ClassVar[int]
    ref: str
    sha: str
    parent: str
    event_id: str
    changed_paths: _containers.RepeatedScalarFieldContainer[str]
    metrics_reported: bool
    rules_approved: bool
    def __init__(self, ref: _Optional[str] = ..., sha: _Optional[str] = ..., parent: _Optional[str] = ..., event_id: _Optional[str] = ..., changed_paths: _Optional[_Iterable[str]] = ..., metrics_reported: _Optional[bool] = ..., rules_approved: _Optional[bool] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("refs", "have")
    REFS_FIELD_NUMBER: _ClassVar[int]
    HAVE_FIELD_NUMBER: _ClassVar[int]
    refs: _containers.RepeatedScalarFieldContainer[str]
    have: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, refs: _Optional[_Iterable[str]] = ..., have: _Optional[_Iterable[str]] = ...) -> None: ...

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

class PushChunk(_message.Message):
    __slots__ = ("ref", "data")
    REF_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ref: str
    data: bytes
    def __init__(self, ref: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class BundleChunk(_message.Message):
    __slots__ = ("data", "total_bytes")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    total_bytes: int
    def __init__(self, data: _Optional[bytes] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class OpenPullRequestRequest(_message.Message):
    __slots__ = ("route", "title", "body")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    route: str
    title: str
    body: str
    def __init__(self, route: _Optional[str] = ..., title: _Optional[str] = ..., body: _Optional[str] = ...) -> None: ...

class GetPullRequestRequest(_message.Message):
    __slots__ = ("number",)
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    number: int
    def __init__(self, number: _Optional[int] = ...) -> None: ...

class Review(_message.Message):
    __slots__ = ("verdict", "body", "reviewer", "reviewed_at")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    REVIEWED_AT_FIELD_NUMBER: _ClassVar[int]
    verdict: _events_pb2.ReviewVerdict
    body: str
    reviewer: str
    reviewed_at: _timestamp_pb2.Timestamp
    def __init__(self, verdict: _Optional[_Union[_events_pb2.ReviewVerdict, str]] = ..., body: _Optional[str] = ..., reviewer: _Optional[str] = ..., reviewed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ChangedFile(_message.Message):
    __slots__ = ("path", "added", "deleted", "binary")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    path: str
    added: int
    deleted: int
    binary: bool
    def __init__(self, path: _Optional[str] = ..., added: _Optional[int] = ..., deleted: _Optional[int] = ..., binary: _Optional[bool] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("number", "route", "head_sha", "base_ref", "title", "author", "state", "merge_sha", "merged_by", "reviews", "body", "opened_at", "files")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    HEAD_SHA_FIELD_NUMBER: _ClassVar[int]
    BASE_REF_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MERGE_SHA_FIELD_NUMBER: _ClassVar[int]
    MERGED_BY_FIELD_NUMBER: _ClassVar[int]
    REVIEWS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    OPENED_AT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    number: int
    route: str
    head_sha: str
    base_ref: str
    title: str
    author: str
    state: str
    merge_sha: str
    merged_by: str
    reviews: _containers.RepeatedCompositeFieldContainer[Review]
    body: str
    opened_at: _timestamp_pb2.Timestamp
    files: _containers.RepeatedCompositeFieldContainer[ChangedFile]
    def __init__(self, number: _Optional[int] = ..., route: _Optional[str] = ..., head_sha: _Optional[str] = ..., base_ref: _Optional[str] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., state: _Optional[str] = ..., merge_sha: _Optional[str] = ..., merged_by: _Optional[str] = ..., reviews: _Optional[_Iterable[_Union[Review, _Mapping]]] = ..., body: _Optional[str] = ..., opened_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., files: _Optional[_Iterable[_Union[ChangedFile, _Mapping]]] = ...) -> None: ...

class ReviewRequest(_message.Message):
    __slots__ = ("number", "verdict", "body")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    number: int
    verdict: _events_pb2.ReviewVerdict
    body: str
    def __init__(self, number: _Optional[int] = ..., verdict: _Optional[_Union[_events_pb2.ReviewVerdict, str]] = ..., body: _Optional[str] = ...) -> None: ...

class MergeRequest(_message.Message):
    __slots__ = ("number",)
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    number: int
    def __init__(self, number: _Optional[int] = ...) -> None: ...

class ListPullRequestsRequest(_message.Message):
    __slots__ = ("route", "state")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    route: str
    state: str
    def __init__(self, route: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ListPullRequestsReply(_message.Message):
    __slots__ = ("pull_requests",)
    PULL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    pull_requests: _containers.RepeatedCompositeFieldContainer[PullRequest]
    def __init__(self, pull_requests: _Optional[_Iterable[_Union[PullRequest, _Mapping]]] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("name", "kind", "ttl_seconds", "member")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: _events_pb2.PrincipalKind
    ttl_seconds: int
    member: bool
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[_events_pb2.PrincipalKind, str]] = ..., ttl_seconds: _Optional[int] = ..., member: _Optional[bool] = ...) -> None: ...

class CreateTokenReply(_message.Message):
    __slots__ = ("token", "principal", "registered")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    token: str
    principal: Principal
    registered: bool
    def __init__(self, token: _Optional[str] = ..., principal: _Optional[_Union[Principal, _Mapping]] = ..., registered: _Optional[bool] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class RevokeTokenReply(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: str
    def __init__(self, principal: _Optional[str] = ...) -> None: ...

class OpenIssueRequest(_message.Message):
    __slots__ = ("title", "body")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    title: str
    body: str
    def __init__(self, title: _Optional[str] = ..., body: _Optional[str] = ...) -> None: ...

class Issue(_message.Message):
    __slots__ = ("number", "title", "body", "author", "state", "closed_by", "comments", "opened_at")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLOSED_BY_FIELD_NUMBER: _ClassVar[int]
    COMMENTS_FIELD_NUMBER: _ClassVar[int]
    OPENED_AT_FIELD_NUMBER: _ClassVar[int]
    number: int
    title: str
    body: str
    author: str
    state: str
    closed_by: str
    comments: int
    opened_at: _timestamp_pb2.Timestamp
    def __init__(self, number: _Optional[int] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., author: _Optional[str] = ..., state: _Optional[str] = ..., closed_by: _Optional[str] = ..., comments: _Optional[int] = ..., opened_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetIssueRequest(_message.Message):
    __slots__ = ("number",)
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    number: int
    def __init__(self, number: _Optional[int] = ...) -> None: ...

class ListIssuesRequest(_message.Message):
    __slots__ = ("state", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: str
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListIssuesReply(_message.Message):
    __slots__ = ("issues", "next_page_token")
    ISSUES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    issues: _containers.RepeatedCompositeFieldContainer[Issue]
    next_page_token: str
    def __init__(self, issues: _Optional[_Iterable[_Union[Issue, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetIssueStateRequest(_message.Message):
    __slots__ = ("number",)
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    number: int
    def __init__(self, number: _Optional[int] = ...) -> None: ...

class AddCommentRequest(_message.Message):
    __slots__ = ("issue_number", "pull_number", "body")
    ISSUE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PULL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    issue_number: int
    pull_number: int
    body: str
    def __init__(self, issue_number: _Optional[int] = ..., pull_number: _Optional[int] = ..., body: _Optional[str] = ...) -> None: ...

class Comment(_message.Message):
    __slots__ = ("id", "issue_number", "pull_number", "body", "author", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ISSUE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PULL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    issue_number: int
    pull_number: int
    body: str
    author: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., issue_number: _Optional[int] = ..., pull_number: _Optional[int] = ..., body: _Optional[str] = ..., author: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListCommentsRequest(_message.Message):
    __slots__ = ("issue_number", "pull_number", "page_size", "page_token")
    ISSUE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PULL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    issue_number: int
    pull_number: int
    page_size: int
    page_token: str
    def __init__(self, issue_number: _Optional[int] = ..., pull_number: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCommentsReply(_message.Message):
    __slots__ = ("comments", "next_page_token")
    COMMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    comments: _containers.RepeatedCompositeFieldContainer[Comment]
    next_page_token: str
    def __init__(self, comments: _Optional[_Iterable[_Union[Comment, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RequestJoinRequest(_message.Message):
    __slots__ = ("note",)
    NOTE_FIELD_NUMBER: _ClassVar[int]
    note: str
    def __init__(self, note: _Optional[str] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("id", "name", "note", "state", "decided_by", "decision_note", "requested_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECISION_NOTE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    note: str
    state: str
    decided_by: str
    decision_note: str
    requested_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., note: _Optional[str] = ..., state: _Optional[str] = ..., decided_by: _Optional[str] = ..., decision_note: _Optional[str] = ..., requested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListJoinRequestsRequest(_message.Message):
    __slots__ = ("state", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: str
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJoinRequestsReply(_message.Message):
    __slots__ = ("requests", "next_page_token")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[JoinRequest]
    next_page_token: str
    def __init__(self, requests: _Optional[_Iterable[_Union[JoinRequest, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DecideJoinRequest(_message.Message):
    __slots__ = ("name", "accept", "note")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    name: str
    accept: bool
    note: str
    def __init__(self, name: _Optional[str] = ..., accept: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class LeaveProjectRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
