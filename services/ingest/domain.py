"""The ingest service's rules as pure functions over plain data: which refs exist, who may write them, what a route's
commits may touch, what a bundle header and a metrics.json must look like. No I/O here; the git and Postgres adapters
gather the facts and these functions judge them.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

from contracts import access, limits, metrics, names
from contracts.access import Actor
from contracts.metrics import Metrics
from contracts.names import Ref
from contracts.refusals import Refusal, clip, invalid, not_found, precondition, too_large

PERSON, AGENT, SERVICE = access.PERSON, access.AGENT, access.SERVICE


def validate_route_name(name: str) -> str:
    """contracts.names' route grammar, matched in full (a trailing newline is not a route name)."""
    if not names.is_route(name):
        raise invalid("route_name", f"invalid route name {clip(name)}: {names.ROUTE.rule}")
    return name


def check_write(actor: Actor, target: Ref, route_owner: str | None, maintainers: tuple[str, ...] | None) -> None:
    """Who may write the ref (contracts.access). ``route_owner`` is the route's owner, None for an unknown route;
    ``maintainers`` those the rules in force name (None before any rules are)."""
    if target.kind == "route" and route_owner is None:
        raise not_found("unknown_route", f"unknown route {target.route!r}: start it with StartRoute")
    access.require(
        actor,
        access.write_action(target.kind),
        access.Target(owner=route_owner or "", label=f"route {target.route!r}", maintainers=maintainers),
    )


# --- bundles -------------------------------------------------------------------------------------------------------

BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
MAX_HEADER_BYTES = 64 * 1024


@dataclass(frozen=True)
class BundleHeader:
    prerequisites: tuple[str, ...]
    refs: tuple[tuple[str, str], ...]  # (object id, ref name)
    pack_offset: int = 0  # where the pack begins in the bundle


def parse_bundle_header(data: bytes) -> BundleHeader:
    """Read a git bundle's header (gitformat-bundle(5)) without trusting it: the signature, capabilities (v3),
    prerequisites ``-<oid>``, refs ``<oid> <name>``, then an empty line before the pack."""
    signature = next((s for s in BUNDLE_SIGNATURES if data.startswith(s)), None)
    if signature is None:
        raise invalid("malformed_bundle", "malformed bundle: it does not start with '# v2 git bundle' or '# v3 ...'")
    end = data.find(b"\n\n", len(signature) - 1, MAX_HEADER_BYTES)
    if end < 0:
        raise invalid("malformed_bundle", "malformed bundle: no end of header within the first 64 KiB")
    prerequisites, refs = [], []
    for raw in data[len(signature) : end].split(b"\n"):
        line = raw.decode("utf-8", "replace")
        if not line:
            continue
        if line.startswith("@filter="):
            raise invalid("malformed_bundle", "malformed bundle: a filtered (partial) bundle is not accepted")
        if line.startswith("@"):
            if line != "@object-format=sha1":
                raise invalid("malformed_bundle", f"malformed bundle: unsupported capability {line!r}")
            continue
        if line.startswith("-"):
            oid = line[1:].split(" ", 1)[0]
            if not names.OBJECT_ID.matches(oid):
                raise invalid("malformed_bundle", f"malformed bundle: bad prerequisite line {line!r}")
            prerequisites.append(oid)
            continue
        oid, _, name = line.partition(" ")
        if not names.OBJECT_ID.matches(oid) or not name:
            raise invalid("malformed_bundle", f"malformed bundle: bad ref line {line!r}")
        refs.append((oid, name))
    if not data[end + 2 : end + 6] == b"PACK":
        raise invalid("malformed_bundle", "malformed bundle: no pack data after the header")
    return BundleHeader(tuple(prerequisites), tuple(refs), end + 2)


def bundle_tip(header: BundleHeader, target: Ref) -> str:
    """The one object the bundle offers for the target ref; a bundle for another ref, or for several, is refused."""
    offered = [name for _, name in header.refs]
    if len(header.refs) != 1:
        raise invalid(
            "wrong_ref", f"the bundle must hold exactly one ref, {target.name}; it holds {len(offered)}: {offered}"
        )
    oid, name = header.refs[0]
    if name != target.name:
        raise invalid("wrong_ref", f"the bundle holds {name}, not {target.name}: a push carries the ref it updates")
    return oid


@dataclass(frozen=True)
class NewObject:
    """An object a push brings that no ref reaches yet, as its header tells (nothing of it read)."""

    oid: str
    type: str  # blob, tree, commit, tag
    size: int  # inflated
    path: str = ""  # where a tip's tree holds it ("" for commits and root trees)


def check_object_sizes(
    objects: Iterable[NewObject],
    max_blob: int = limits.MAX_BLOB_BYTES,
    max_total: int = limits.MAX_PUSH_INFLATED_BYTES,
) -> None:
    """A pushed file may not inflate beyond ``max_blob``, nor all pushed objects beyond ``max_total``: a bundle
    within its size limit can still hold a file that inflates a thousandfold."""
    total = 0
    for obj in objects:
        total += obj.size
        if obj.type == "blob" and obj.size > max_blob:
            raise too_large(
                "file_too_large",
                f"{obj.path or obj.oid[:12]} is {obj.size} bytes (inflated), over the limit of {max_blob} bytes a file",
            )
    if total > max_total:
        raise too_large(
            "push_too_large", f"the push brings {total} bytes of objects (inflated), over the limit of {max_total}"
        )


def check_size(size: int, limit: int) -> None:
    if size > limit:
        raise too_large("too_large", f"bundle of {size} bytes exceeds the limit of {limit} bytes")
    if size == 0:
        raise invalid("malformed_bundle", "malformed bundle: it is empty")


# --- fast-forward and paths ----------------------------------------------------------------------------------------


def check_fast_forward(target: Ref, old: str, new: str, old_is_ancestor: bool) -> None:
    if old and old != new and not old_is_ancestor:
        raise precondition(
            "non_fast_forward",
            f"non-fast-forward: {target.name} is at {old[:12]}, which {new[:12]} does not contain; fetch and rebase",
        )


def route_folder(route: str) -> str:
    """The prefix of every path a route's commits may change: ``routes/<route>/``."""
    return names.route_dir(route) + "/"


def outside_route(route: str, paths: Iterable[str]) -> list[str]:
    folder = route_folder(route)
    return [p for p in paths if not p.startswith(folder)]


@dataclass(frozen=True)
class RouteCommit:
    """A commit a route push brings: its parents, and what its tree holds outside ``routes/<route>/`` (a value
    that is equal for two commits exactly when their trees are equal outside that folder)."""

    sha: str
    parents: tuple[str, ...]
    outside: object


@dataclass(frozen=True)
class RouteCommitProblem:
    sha: str
    kind: str  # "orphan" | "unrelated_parent" | "outside"
    parent: str = ""  # for unrelated_parent: the parent that is neither on main nor on the route


def route_commit_problem(commits: Sequence[RouteCommit], known: dict[str, object]) -> RouteCommitProblem | None:
    """The route rule for every commit and every parent (``commits`` parents first). ``known``: the commits already
    in the repository that a route may build on (main's history and the route's own), with their ``outside``.

    A commit is sound when it has parents, each parent is sound (known, or a sound commit of this push), and its tree
    outside the route's folder equals one parent's. By induction that tree equals main's at some commit main has had:
    a plain commit changes only the folder; a merge of main takes main's files as they are; an orphan is refused
    whatever its tree holds, and with it every merge of a history unrelated to main's (such a history has a root).
    Commits of other refs (another route's) are not known: they are checked like the push's own."""
    sound = dict(known)
    for commit in commits:
        if not commit.parents:
            return RouteCommitProblem(commit.sha, "orphan")
        unrelated = [p for p in commit.parents if p not in sound]
        if unrelated:
            return RouteCommitProblem(commit.sha, "unrelated_parent", unrelated[0])
        if not any(sound[p] == commit.outside for p in commit.parents):
            return RouteCommitProblem(commit.sha, "outside")
        sound[commit.sha] = commit.outside
    return None


def _some_paths(paths: Sequence[str]) -> str:
    shown = ", ".join(repr(p) for p in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def refuse_route_commit(route: str, problem: RouteCommitProblem, dropped: Sequence[str], changed: Sequence[str]):
    """The refusal for a route commit, naming the paths outside the folder it would drop or change (against main
    for an orphan or an unrelated merge, against its closest parent otherwise)."""
    folder = route_folder(route)
    effect = "; ".join(
        part
        for part in (
            f"it would drop {_some_paths(dropped)}" if dropped else "",
            f"it would change {_some_paths(changed)}" if changed else "",
        )
        if part
    )
    if problem.kind == "orphan":
        return invalid(
            "orphan_commit",
            f"commit {problem.sha[:12]} has no parent (a history unrelated to main's): a route's history grows from "
            f"main's, and against main {effect or 'it replaces the history'} outside {folder}",
        )
    if problem.kind == "unrelated_parent":
        return invalid(
            "unrelated_history",
            f"commit {problem.sha[:12]} merges {problem.parent[:12]}, which is neither on main nor on route "
            f"{route!r} (an unrelated history): against main {effect or 'it brings another history'} outside {folder}",
        )
    stray = [*dropped, *changed]
    return invalid(
        "path_outside_route",
        f"commit {problem.sha[:12]} touches {stray[0]!r}"
        + (f" and {len(stray) - 1} more paths" if len(stray) > 1 else "")
        + f" outside {folder}: a route's commits change only its own folder"
        + (f" ({effect})" if dropped else ""),
    )


def refuse_merge_outside_route(number: int, route: str, dropped: Sequence[str], changed: Sequence[str]) -> Refusal:
    effect = ", ".join(
        part
        for part in (
            f"drop {_some_paths(dropped)}" if dropped else "",
            f"change {_some_paths(changed)}" if changed else "",
        )
        if part
    )
    return precondition(
        "merge_outside_route",
        f"pull request #{number}: merging it would {effect} outside {route_folder(route)} of main; "
        "a route merges only its own folder",
    )


def check_path_names(paths: Iterable[str]) -> None:
    """Paths the log records are UTF-8 text (git allows any bytes; the adapter keeps the others as surrogates)."""
    for path in paths:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise invalid("path_not_utf8", f"path {clip(path)} is not UTF-8: name files in UTF-8") from None


REGULAR_FILE_MODES = {"100644", "100755"}


def check_route_files(route: str, entries: Sequence[tuple[str, str]]) -> None:
    """A route's folder holds regular files only: a symlink or a submodule could point a check at files outside
    the route."""
    for mode, path in entries:
        if mode not in REGULAR_FILE_MODES:
            kind = {"120000": "a symlink", "160000": "a submodule"}.get(mode, f"mode {mode}")
            raise invalid("not_a_file", f"{path} is {kind}: {route_folder(route)} may hold regular files only")


# --- metrics and rules ---------------------------------------------------------------------------------------------


def reported_routes(target: Ref, changed_paths: Iterable[str]) -> list[str]:
    """The routes whose metrics.json a push changes: on a route, its own; on main (maintainers), any route's."""
    routes = []
    for path in changed_paths:
        parts = path.split("/")
        if len(parts) == 3 and parts[0] == names.ROUTES_DIR and parts[2] == names.METRICS_FILE:
            if target.kind == "main" or parts[1] == target.route:
                routes.append(parts[1])
    return sorted(set(routes))


def parse_metrics(path: str, text: str) -> Metrics:
    """A route's own metrics.json, in contracts.metrics' REPORT profile: at least ``{"score", "cost", "subtasks"}``,
    finite non-negative numbers and a list or object of subtasks."""
    try:
        return metrics.parse(text, metrics.REPORT)
    except metrics.MetricsError as err:
        raise invalid("malformed_metrics", f"malformed {path}: {err}") from None


# --- identities and tokens -----------------------------------------------------------------------------------------


def owner_from_name(name: str, kind: int) -> str:
    return name.partition("/")[0] if kind == AGENT else name


def role_for(name: str, kind: int, maintainers: Iterable[str], member: bool) -> int:
    """A new principal's stored role: a person named in ``maintainers`` is a maintainer, one registered as a member a
    member, anyone else signed in; services are signed in; an agent has none of its own (it takes its owner's)."""
    if kind == AGENT:
        return events_pb2.ROLE_UNSPECIFIED
    if kind == PERSON and name in set(maintainers):
        return access.MAINTAINER
    if kind == PERSON and member:
        return events_pb2.ROLE_MEMBER
    return events_pb2.ROLE_SIGNED_IN


# --- pull requests -------------------------------------------------------------------------------------------------

VERDICTS = {
    events_pb2.REVIEW_VERDICT_APPROVE,
    events_pb2.REVIEW_VERDICT_REQUEST_CHANGES,
    events_pb2.REVIEW_VERDICT_COMMENT,
}


def check_review(verdict: int, state: str, number: int) -> None:
    if verdict not in VERDICTS:
        raise invalid("verdict", "a review is approve, request_changes or comment")
    check_open(state, number)


def check_open(state: str, number: int) -> None:
    if state != "open":
        raise precondition("pull_closed", f"pull request #{number} is {state}, not open")


# --- issues, comments and joining: who may do what (pure; named for contracts/access.py) ---------------------------

ISSUE_TITLE_MAX = limits.MAX_ISSUE_TITLE_CHARS
ISSUE_BODY_MAX = limits.MAX_ISSUE_BODY_CHARS
COMMENT_BODY_MAX = limits.MAX_COMMENT_CHARS
JOIN_NOTE_MAX = limits.MAX_JOIN_NOTE_CHARS
PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 200
ISSUE_STATES = ("open", "closed")
JOIN_STATES = ("pending", "accepted", "declined")


def non_empty(field_name: str, text: str) -> str:
    """Text the edge has bounded and cleared of control characters (contracts.names.text), stripped; a title or a
    comment of nothing but spaces is refused."""
    text = text.strip()
    if not text:
        raise invalid(f"{field_name}_empty", f"{field_name} is empty")
    return text


def check_bundle_size(size: int, limit: int) -> None:
    if size > limit:
        raise too_large("too_large", f"bundle of {size} bytes exceeds the limit of {limit} bytes")
    if size == 0:
        raise invalid("malformed_bundle", "malformed bundle: it is empty")


def page_size(requested: int) -> int:
    if requested < 0:
        raise invalid("page_size", f"page_size must be >= 0, got {requested}")
    return min(requested or PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX)


def page_after(token: str) -> int:
    """A list's cursor: the id or number of the last item of the previous page ("" = from the start)."""
    if not token:
        return 0
    if len(token) > 20 or not token.isdigit() or token.startswith("0"):
        raise invalid("page_token", f"page_token {clip(token)} is not one this service gave out")
    return int(token)


def next_page_token(keys: list[int], size: int) -> str:
    """A full page may have a successor: its last key is the cursor; a short page is the last."""
    return str(keys[-1]) if len(keys) == size else ""


def check_state_filter(state: str, states: Sequence[str], *, extra: Sequence[str] = ()) -> str:
    if state and state not in (*states, *extra):
        raise invalid("state", f"state {clip(state)}: one of {', '.join((*states, *extra))} (or empty)")
    return state


def check_issue_state_change(actor: Actor, number: int, author: str, author_owner: str, state: str, to: str) -> None:
    access.require(
        actor, access.Action.CLOSE_ISSUE, access.Target(owner=author_owner, name=author, label=f"issue #{number}")
    )
    if state == to:
        raise precondition(f"issue_{to}", f"issue #{number} is {state} already")


def check_join_request(actor: Actor) -> None:
    access.require(actor, access.Action.REQUEST_JOIN)
    if actor.is_member:
        raise precondition("already_member", f"{actor.name} is a project member already")


def check_join_decision(actor: Actor, name: str, pending: bool) -> None:
    access.require(actor, access.Action.DECIDE_JOIN)
    if not pending:
        raise not_found("no_join_request", f"{clip(name)} has no pending join request")


def check_leave(actor: Actor) -> None:
    access.require(actor, access.Action.LEAVE)
    if actor.is_maintainer:
        raise precondition(
            "maintainer_leaves",
            f"{actor.name} is a maintainer, named in scienceslack.json: a rules change removes a maintainer",
        )
    if not actor.is_member:
        raise precondition("not_member", f"{actor.name} is not a project member")
