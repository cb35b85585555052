"""The ingest service's rules as pure functions over plain data: which refs exist, who may write them, what a route's
commits may touch, what a bundle header and a metrics.json must look like. No I/O here; the git and Postgres adapters
gather the facts and these functions judge them.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

from contracts import access, metrics
from contracts.access import Actor
from contracts.metrics import Metrics
from contracts.refusals import Refusal, invalid

ROUTE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,39}$")
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
OBJECT_ID = re.compile(r"^[0-9a-f]{40}$")

MAIN_REF = "refs/heads/main"
CHECKS_TAG = "refs/tags/checks"
ROUTE_PREFIX = "refs/heads/routes/"
JOB_PREFIX = "refs/jobs/"
PULL_REF = re.compile(r"^refs/pull/([1-9][0-9]*)/head$")

PERSON, AGENT, SERVICE = access.PERSON, access.AGENT, access.SERVICE


@dataclass(frozen=True)
class RefTarget:
    """A hosted ref, by its full name, and what writing it means."""

    ref: str
    kind: int  # events_pb2.CommitKind
    route: str = ""
    job_id: str = ""
    pull_number: int = 0

    @property
    def stream(self) -> str:
        """The event stream a commit on this ref belongs to."""
        if self.kind == events_pb2.COMMIT_KIND_ROUTE:
            return f"route:{self.route}"
        if self.kind == events_pb2.COMMIT_KIND_JOB:
            return f"job:{self.job_id}"
        if self.kind == events_pb2.COMMIT_KIND_PULL:
            return f"pull:{self.pull_number}"
        if self.kind == events_pb2.COMMIT_KIND_TAG:
            return "rules"
        return "main"


def validate_route_name(name: str) -> str:
    if not ROUTE_NAME.match(name or ""):
        raise invalid(
            "route_name",
            f"invalid route name {name!r}: 2-40 characters, lower-case letters, digits and '-', "
            "starting with a letter or digit",
        )
    return name


def route_ref(route: str) -> str:
    return ROUTE_PREFIX + route


def pull_ref(number: int) -> str:
    return f"refs/pull/{number}/head"


def parse_ref(name: str) -> RefTarget:
    """The hosted ref a name means; short forms ``main``, ``checks``, ``routes/<r>`` and ``jobs/<id>`` are accepted."""
    full = name or ""
    if full in ("main", "heads/main"):
        full = MAIN_REF
    elif full in ("checks", "tags/checks"):
        full = CHECKS_TAG
    elif full.startswith("routes/"):
        full = "refs/heads/" + full
    elif full.startswith("jobs/"):
        full = "refs/" + full
    if full == MAIN_REF:
        return RefTarget(full, events_pb2.COMMIT_KIND_MAIN)
    if full == CHECKS_TAG:
        return RefTarget(full, events_pb2.COMMIT_KIND_TAG)
    if full.startswith(ROUTE_PREFIX):
        return RefTarget(full, events_pb2.COMMIT_KIND_ROUTE, route=validate_route_name(full[len(ROUTE_PREFIX) :]))
    if full.startswith(JOB_PREFIX):
        job_id = full[len(JOB_PREFIX) :]
        if not JOB_ID.match(job_id):
            raise invalid("ref", f"invalid job ref {name!r}: refs/jobs/<id> with letters, digits, '_', '.', '-'")
        return RefTarget(full, events_pb2.COMMIT_KIND_JOB, job_id=job_id)
    if match := PULL_REF.match(full):
        return RefTarget(full, events_pb2.COMMIT_KIND_PULL, pull_number=int(match.group(1)))
    raise invalid(
        "ref",
        f"unknown ref {name!r}: the hosted refs are main, the tag checks, routes/<route>, refs/jobs/<id> "
        "and refs/pull/<n>/head",
    )


# What writing each kind of hosted ref is, as an action of contracts.access.
WRITE_ACTIONS = {
    events_pb2.COMMIT_KIND_MAIN: access.Action.WRITE_MAIN,
    events_pb2.COMMIT_KIND_TAG: access.Action.APPROVE_RULES,
    events_pb2.COMMIT_KIND_ROUTE: access.Action.WRITE_ROUTE,
    events_pb2.COMMIT_KIND_PULL: access.Action.WRITE_PULL_REF,
    events_pb2.COMMIT_KIND_JOB: access.Action.WRITE_JOB_REF,
}


def check_write(actor: Actor, target: RefTarget, route_owner: str | None, maintainers: tuple[str, ...] | None) -> None:
    """Who may write the ref (contracts.access). ``route_owner`` is the route's owner, None for an unknown route;
    ``maintainers`` those the rules in force name (None before any rules are)."""
    if target.kind == events_pb2.COMMIT_KIND_ROUTE and route_owner is None:
        raise Refusal("NOT_FOUND", "unknown_route", f"unknown route {target.route!r}: start it with StartRoute")
    access.require(
        actor,
        WRITE_ACTIONS[target.kind],
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
            if not OBJECT_ID.match(oid):
                raise invalid("malformed_bundle", f"malformed bundle: bad prerequisite line {line!r}")
            prerequisites.append(oid)
            continue
        oid, _, name = line.partition(" ")
        if not OBJECT_ID.match(oid) or not name:
            raise invalid("malformed_bundle", f"malformed bundle: bad ref line {line!r}")
        refs.append((oid, name))
    if not data[end + 2 : end + 6] == b"PACK":
        raise invalid("malformed_bundle", "malformed bundle: no pack data after the header")
    return BundleHeader(tuple(prerequisites), tuple(refs), end + 2)


def bundle_tip(header: BundleHeader, target: RefTarget) -> str:
    """The one object the bundle offers for the target ref; a bundle for another ref, or for several, is refused."""
    names = [name for _, name in header.refs]
    if len(header.refs) != 1:
        raise invalid(
            "wrong_ref", f"the bundle must hold exactly one ref, {target.ref}; it holds {len(names)}: {names}"
        )
    oid, name = header.refs[0]
    if name != target.ref:
        raise invalid("wrong_ref", f"the bundle holds {name}, not {target.ref}: a push carries the ref it updates")
    return oid


def check_size(size: int, limit: int) -> None:
    if size > limit:
        raise Refusal("RESOURCE_EXHAUSTED", "too_large", f"bundle of {size} bytes exceeds the limit of {limit} bytes")
    if size == 0:
        raise invalid("malformed_bundle", "malformed bundle: it is empty")


# --- fast-forward and paths ----------------------------------------------------------------------------------------


def check_fast_forward(target: RefTarget, old: str, new: str, old_is_ancestor: bool) -> None:
    if old and old != new and not old_is_ancestor:
        raise Refusal(
            "FAILED_PRECONDITION",
            "non_fast_forward",
            f"non-fast-forward: {target.ref} is at {old[:12]}, which {new[:12]} does not contain; fetch and rebase",
        )


@dataclass(frozen=True)
class NewCommit:
    """A commit a push brings, with the paths it changes relative to each of its parents (a root: all its paths)."""

    sha: str
    changes_by_parent: tuple[tuple[str, ...], ...]


def route_folder(route: str) -> str:
    return f"routes/{route}/"


def outside_route(route: str, paths: Iterable[str]) -> list[str]:
    folder = route_folder(route)
    return [p for p in paths if not p.startswith(folder)]


def check_route_commits(route: str, commits: Sequence[NewCommit]) -> None:
    """Every commit a route push brings touches only ``routes/<route>/``: against at least one of its parents, all its
    changes lie inside that folder. So a plain commit must stay inside, and a merge that takes in main (whose commits
    are not new) is fine, while a commit that edits anything else is refused by name."""
    for commit in commits:
        outside = [outside_route(route, changes) for changes in commit.changes_by_parent]
        if any(not paths for paths in outside):
            continue
        stray = min(outside, key=len)
        raise invalid(
            "path_outside_route",
            f"commit {commit.sha[:12]} touches {stray[0]!r}"
            + (f" and {len(stray) - 1} more paths" if len(stray) > 1 else "")
            + f" outside {route_folder(route)}: a route's commits change only its own folder",
        )


REGULAR_FILE_MODES = {"100644", "100755"}


def check_route_files(route: str, entries: Sequence[tuple[str, str]]) -> None:
    """A route's folder holds regular files only: a symlink or a submodule could point a check at files outside
    the route."""
    for mode, path in entries:
        if mode not in REGULAR_FILE_MODES:
            kind = {"120000": "a symlink", "160000": "a submodule"}.get(mode, f"mode {mode}")
            raise invalid("not_a_file", f"{path} is {kind}: {route_folder(route)} may hold regular files only")


# --- metrics and rules ---------------------------------------------------------------------------------------------


def metrics_path(route: str) -> str:
    return f"routes/{route}/metrics.json"


def reported_routes(target: RefTarget, changed_paths: Iterable[str]) -> list[str]:
    """The routes whose metrics.json a push changes: on a route, its own; on main (maintainers), any route's."""
    routes = []
    for path in changed_paths:
        parts = path.split("/")
        if len(parts) == 3 and parts[0] == "routes" and parts[2] == "metrics.json":
            if target.kind == events_pb2.COMMIT_KIND_MAIN or parts[1] == target.route:
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
        raise Refusal("FAILED_PRECONDITION", "pull_closed", f"pull request #{number} is {state}, not open")
