"""The ingest use cases: each gathers facts through the adapters (git, Postgres), lets the domain judge them, then
writes the ref and its events in one Postgres transaction, and has the git ref follow after the commit.

Why this order is crash-safe: a push's objects enter the repository (quarantine migration) before the transaction,
so when the transaction commits, the recorded ref value always names objects that exist. Postgres holds the truth for
refs; the git refs follow it in batches (gitrefs.GitRefFollower) before the caller gets its reply, and ``start``
reconciles every git ref from the table, so a crash between the two never leaves a ref without its event or an event
without its ref.
"""

import time
from dataclasses import dataclass, field

from google.protobuf import json_format, struct_pb2
from kernelboard.v1 import events_pb2

from contracts import access, limits, names, rules, rules_guard
from contracts.names import Ref
from contracts.refusals import check_length, conflict, exists, not_found, precondition
from services.common import auth, metrics, routes
from services.common.eventlog import EventLog, NewEvent
from services.common.logs import bind_ids, get_logger
from services.common.setaside import SetAside
from services.ingest import domain, store
from services.ingest.domain import Actor, Refusal
from services.ingest.gitrefs import GitRefFollower
from services.ingest.gitrepo import HostedRepo
from services.ingest.issues import Issues
from services.ingest.members import Members
from services.ingest.pulls import PullRequests, recorded_paths
from services.ingest.quarantine import UnbundleError

DEFAULT_MAX_BUNDLE_BYTES = limits.MAX_BUNDLE_BYTES

PUSHES = metrics.counter(
    "kb_ingest_pushes_total",
    "Pushes to the hosted repository, by result and the reason of a refusal",
    ["result", "reason"],
)
BUNDLE_BYTES = metrics.histogram(
    "kb_ingest_bundle_bytes",
    "Size of pushed bundles in bytes",
    buckets=(1e3, 1e4, 1e5, 1e6, 4e6, 16e6, 64e6, 256e6),
)
PUSH_SECONDS = metrics.histogram("kb_ingest_push_seconds", "Time to check and record a push", ["result"])

log = get_logger()


@dataclass(frozen=True)
class PushResult:
    ref: str
    sha: str
    parent: str
    event_id: str
    changed_paths: tuple[str, ...] = ()
    metrics_reported: bool = False
    rules_approved: bool = False


@dataclass
class CheckedPush:
    """What a push will record once its checks passed."""

    target: Ref
    old: str
    new: str
    changed_paths: list[str]
    metrics: dict[str, domain.Metrics] = field(default_factory=dict)
    rules: tuple[int, str] | None = None  # (benchmark version, scienceslack.json) when the tag moves


def refused_by_git(err: UnbundleError) -> Refusal:
    if err.missing_prerequisites:
        return precondition(
            "missing_prerequisites",
            f"the bundle builds on commits the hosted repository does not have; fetch and bundle again ({err})",
        )
    return domain.invalid("malformed_bundle", f"malformed bundle: git could not read it ({err})")


class Ingest(PullRequests, Issues, Members):
    def __init__(self, log: EventLog, repo: HostedRepo, *, max_bundle_bytes: int = DEFAULT_MAX_BUNDLE_BYTES):
        self.log = log
        self.pool = log.pool
        self.repo = repo
        self.max_bundle_bytes = max_bundle_bytes
        self.git_refs = GitRefFollower(self.pool, repo)

    async def start(self) -> list[str]:
        """Create the repository if new and bring its refs in step with Postgres (before any request, so nothing
        writes them meanwhile); returns the refs it repaired."""
        await self.repo.init()
        self.repo.clear_quarantine()
        repaired = await self.repo.reconcile(await self._refs_git_can_take())
        if repaired:
            log.warning("git refs reconciled from postgres", refs=repaired)
        self.git_refs.start()
        self.repo.repack_when_many_packs()
        return repaired

    async def stop(self) -> None:
        await self.git_refs.stop()

    async def _refs_git_can_take(self) -> dict[str, str]:
        """The recorded refs, less the rows git could not take, which are set aside: an ill-formed name (an older
        version let ``routes/x-y\n`` in, and git refused it on every start) or a commit the repository lacks. A
        route row with such a name is set aside too, so that no listing prints it."""
        set_aside = SetAside("ingest_reconcile")
        good = {}
        for ref, sha in (await store.ref_values(self.pool)).items():
            if not names.is_ref(ref):
                reason = "not a well-formed hosted ref"
            elif await self.repo.object_type(sha) not in ("commit", "tag"):
                reason = f"{sha} is not a commit of the hosted repository"
            else:
                good[ref] = sha
                continue
            async with self.pool.acquire() as conn:
                moved = await store.set_ref_aside(conn, ref, sha, reason)
            if moved:
                set_aside.record(ref, reason, sha=sha)
        for route in await store.list_routes(self.pool):
            if not names.is_route(route.route):
                async with self.pool.acquire() as conn:
                    moved = await store.set_route_aside(conn, route.route, "not a route name")
                set_aside.record(route.route, "not a route name" + ("" if moved else " (pull requests refer to it)"))
        set_aside.finish(await store.records_set_aside(self.pool))
        return good

    # --- push ------------------------------------------------------------------------------------------------------

    def refuse_size(self, size: int) -> None:
        """Refuse a bundle that has grown over the limit while it streams in, counted like any refused push."""
        try:
            domain.check_size(size, self.max_bundle_bytes)
        except Refusal as refusal:
            self.count_refusal(refusal, size)
            raise

    def count_refusal(self, refusal: Refusal, size: int, started: float | None = None) -> None:
        BUNDLE_BYTES.observe(size)
        PUSHES.labels("refused", refusal.reason).inc()
        if started is not None:
            PUSH_SECONDS.labels("refused").observe(time.monotonic() - started)

    async def push(self, actor: Actor, target: Ref, bundle: bytes) -> PushResult:
        """Check a bundle for one ref and record it, or raise the Refusal that names what is wrong. Nothing is
        written unless every check passed."""
        started = time.monotonic()
        try:
            result = await self._push(actor, target, bundle)
        except Refusal as refusal:
            self.count_refusal(refusal, len(bundle), started)
            log.info("push refused", ref=target.name, actor=actor.name, reason=refusal.reason, message=refusal.message)
            raise
        BUNDLE_BYTES.observe(len(bundle))
        PUSHES.labels("accepted", "").inc()
        PUSH_SECONDS.labels("accepted").observe(time.monotonic() - started)
        return result

    async def _push(self, actor: Actor, target: Ref, bundle: bytes) -> PushResult:
        domain.check_size(len(bundle), self.max_bundle_bytes)
        tip = domain.bundle_tip(domain.parse_bundle_header(bundle), target)
        old, main = await self._check_writer(actor, target)
        with bind_ids(ref=target.name, sha=tip):
            if old == tip:
                return PushResult(target.name, tip, old, "")
            try:
                async with self.repo.quarantine(bundle, check_objects=domain.check_object_sizes) as quarantine:
                    checked = await self._check(quarantine, target, old, tip, main)
                    quarantine.migrate()
                self.repo.migrated(quarantine)
            except UnbundleError as err:
                raise refused_by_git(err) from None
            return await self._record(actor, checked)

    async def advance(self, actor: Actor, target: Ref, sha: str) -> PushResult:
        """Move a ref to a commit already in the repository (made here, e.g. by seeding), through the same checks
        and records as a push."""
        old, main = await self._check_writer(actor, target)
        if old == sha:
            return PushResult(target.name, sha, old, "")
        return await self._record(actor, await self._check(self.repo, target, old, sha, main))

    async def _check_writer(self, actor: Actor, target: Ref) -> tuple[str, str]:
        """Who may write the ref; returns its recorded value ("" when new) and main's, read on one connection."""
        async with self.pool.acquire() as conn:
            owner = await routes.route_owner(self.log, target.route, conn=conn) if target.route else None
            recorded = await store.ref_values_of(conn, [target.name, names.MAIN_REF, names.CHECKS_TAG])
        maintainers = None
        if target.kind == "checks":
            maintainers = await self.maintainers_in_force(recorded.get(names.CHECKS_TAG, ""))
        domain.check_write(actor, target, owner, maintainers)
        return recorded.get(target.name, ""), recorded.get(names.MAIN_REF, "")

    async def maintainers_in_force(self, tag: str) -> tuple[str, ...] | None:
        """The maintainers the rules at the tag checks name (who alone approve new rules); None before any rules."""
        if not tag:
            return None
        return rules.read_card(await self.repo.read_file(tag, rules.RULES_FILE) or b"null").maintainers

    async def _check(self, q, target: Ref, old: str, tip: str, main: str) -> CheckedPush:
        if await q.object_type(tip) != "commit":
            raise domain.invalid(
                "malformed_bundle", f"{target.name} must point at a commit; the bundle's {tip[:12]} is not"
            )
        if not await q.is_connected(tip):
            raise domain.invalid("malformed_bundle", f"malformed bundle: objects reachable from {tip[:12]} are missing")
        domain.check_fast_forward(target, old, tip, bool(old) and await q.is_ancestor(old, tip))
        if target.kind == "route":
            await self._check_route_history(q, target.route, tip, old, main)
            domain.check_route_files(target.route, await q.tree_entries(tip, domain.route_folder(target.route)))
        checked = CheckedPush(target, old, tip, await q.changed_paths(old, tip))
        domain.check_path_names(checked.changed_paths)
        if target.kind == "checks":
            checked.rules = await self._check_rules(q, tip, main, old)
        for route in domain.reported_routes(target, checked.changed_paths):
            path = names.route_metrics_path(route)
            size = await q.file_size(tip, path)
            if size is not None:
                check_length(path, size, limits.MAX_METRICS_JSON_BYTES)  # from the object's header, before reading
                text = await q.read_file(tip, path)
                checked.metrics[route] = domain.parse_metrics(path, text.decode("utf-8", "replace"))
        return checked

    async def _check_route_history(self, q, route: str, tip: str, old: str, main: str) -> None:
        """The route rule for every commit the push brings and every parent (domain.route_commit_problem): the parents
        it may build on are main's commits and the route's own."""
        commits = await q.route_commits(tip, [old, main], route)
        new = {c.sha for c in commits}
        known = {}
        for parent in {p for c in commits for p in c.parents if p not in new}:
            if (main and await q.is_ancestor(parent, main)) or (old and await q.is_ancestor(parent, old)):
                known[parent] = await q.outside_of(parent, route)
        problem = domain.route_commit_problem(commits, known)
        if problem is None:
            return
        if problem.kind == "outside":
            parents = [c for c in commits if c.sha == problem.sha][0].parents
            found = [await q.paths_outside(p, problem.sha, route) for p in parents]
            dropped, changed = min(found, key=lambda pair: len(pair[0]) + len(pair[1]))
        else:
            dropped, changed = await q.paths_outside(main, problem.sha, route)
        raise domain.refuse_route_commit(route, problem, dropped, changed)

    async def _check_rules(self, objects, commit: str, main: str, previous: str) -> tuple[int, str]:
        """The rules at ``commit`` if they may replace those at ``previous`` (the tag's value, "" before the first)."""
        if not main or not await objects.is_ancestor(commit, main):
            raise precondition(
                "tag_not_on_main",
                f"the tag checks marks a commit on main; {commit[:12]} is not on main (merge it first)",
            )
        size = await objects.file_size(commit, rules.RULES_FILE)
        if size is None:
            raise domain.invalid("malformed_rules", f"{commit[:12]} has no {rules.RULES_FILE}")
        check_length(rules.RULES_FILE, size, limits.MAX_RULES_JSON_BYTES)
        text = await objects.read_file(commit, rules.RULES_FILE)
        try:
            approved = rules.parse(text)
        except rules.RulesError as err:
            raise domain.invalid("malformed_rules", f"{rules.RULES_FILE} at {commit[:12]}: {err}") from None
        approved_before = await objects.read_file(previous, rules.RULES_FILE) if previous else None
        rules_guard.check_change(rules_guard.approved_rules(approved_before), approved)
        return approved.benchmark_version, text.decode()

    async def rules_at_tag(self, conn=None) -> rules.Card:
        """What scienceslack.json at the tag checks, the rules that judge, says (an empty card before seeding)."""
        tag = await store.ref_value(conn or self.pool, names.CHECKS_TAG)
        text = await self.repo.read_file(tag, rules.RULES_FILE) if tag else None
        return rules.read_card(text) if text else rules.Card()

    async def _record(self, actor: Actor, checked: CheckedPush) -> PushResult:
        target = checked.target
        commit = events_pb2.CommitIngested(
            ref=target.name,
            sha=checked.new,
            parent=checked.old,
            kind=target.commit_kind,
            route=target.route,
            job_id=target.job_id,
            pull_number=target.pull_number,
            changed_paths=recorded_paths(checked.changed_paths),
            owner=access.owner_of(actor),
        )
        # Everything is computed before the transaction, and the appends come last in it: an append holds the log's
        # position lock until the commit.
        appends = [(target.stream, commit)]
        if checked.metrics:
            version = (await self.rules_at_tag()).version
            appends += [
                (names.route_stream(route), self._metrics_event(actor, route, checked.new, reported, version))
                for route, reported in checked.metrics.items()
            ]
        if checked.rules:
            version, text = checked.rules
            approved = events_pb2.RulesApproved(
                rules_commit=checked.new, previous_commit=checked.old, benchmark_version=version, rules_json=text
            )
            appends.append(("rules", approved))
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                await store.move_ref(conn, target.name, checked.old, checked.new, actor.name)
            except store.RefMoved as err:
                raise conflict("conflict", str(err)) from None
            if checked.rules:
                synced = await auth.set_maintainers(conn, rules.parse(checked.rules[1]).maintainers)
                if synced.promoted or synced.demoted:
                    log.info("maintainers changed with the rules", promoted=synced.promoted, demoted=synced.demoted)
            appended = [
                (await self.log.append(stream, None, [NewEvent(payload, actor.name)], conn=conn))[0]
                for stream, payload in appends
            ]
        await self.git_refs.follow([target.name])
        log.info(
            "push accepted",
            ref=target.name,
            sha=checked.new,
            parent=checked.old,
            actor=actor.name,
            event_id=appended[0].event_id,
        )
        return PushResult(
            target.name,
            checked.new,
            checked.old,
            appended[0].event_id,
            tuple(checked.changed_paths),
            bool(checked.metrics),
            bool(checked.rules),
        )

    @staticmethod
    def _metrics_event(actor: Actor, route: str, sha: str, reported: domain.Metrics, version: int):
        subtasks = json_format.ParseDict(reported.subtasks, struct_pb2.Value())
        return events_pb2.MetricsReported(
            route=route,
            sha=sha,
            score=reported.score,
            cost=reported.cost,
            subtasks=subtasks,
            by_maintainer=actor.is_maintainer,
            reporter=actor.name,
            benchmark_version=version,
            runner=reported.runner,
            measured_at=reported.measured_at,
            rules_commit=reported.rules_commit,
            score_low=reported.score_low,
            score_high=reported.score_high,
        )

    # --- routes ----------------------------------------------------------------------------------------------------

    async def start_route(self, actor: Actor, name: str) -> store.RouteRow:
        access.require(actor, access.Action.START_ROUTE)
        domain.validate_route_name(name)
        main = await store.ref_value(self.pool, names.MAIN_REF)
        if not main:
            raise precondition("no_main", "main is not seeded yet: run `python -m services.ingest.seed`")
        ref = names.route_ref(name)
        async with self.pool.acquire() as conn, conn.transaction():
            route = await store.insert_route(conn, name, access.owner_of(actor), actor.name, main)
            if route is None:
                existing = await store.get_route(conn, name)
                raise exists("route_exists", f"route {name!r} exists (owner {existing.owner})")
            await store.move_ref(conn, ref, "", main, actor.name)
            started = events_pb2.RouteStarted(route=name, owner=route.owner, started_by=actor.name, base_sha=main)
            await self.log.append(names.route_stream(name), None, [NewEvent(started, actor.name)], conn=conn)
        await self.git_refs.follow([ref])
        log.info("route started", route=name, owner=route.owner, actor=actor.name, base_sha=main)
        return route

    async def get_route(self, name: str) -> tuple[store.RouteRow, str]:
        route = await store.get_route(self.pool, domain.validate_route_name(name))
        if route is None:
            raise not_found("unknown_route", f"unknown route {name!r}")
        return route, await store.ref_value(self.pool, names.route_ref(name))

    async def list_routes(self) -> list[tuple[store.RouteRow, str]]:
        async with self.pool.acquire() as conn:
            heads = await store.ref_values(conn)
            return [(r, heads.get(names.route_ref(r.route), "")) for r in await store.list_routes(conn)]

    # --- fetch -----------------------------------------------------------------------------------------------------

    async def fetch(self, refs: list[str], have: list[str] = ()) -> bytes:
        """A bundle of the named refs (default: main, the tag checks and every route), without what the caller's
        ``have`` commits reach; empty when they reach everything."""
        await self.git_refs.caught_up()  # the bundle is made from git's refs: at least the values recorded before now
        recorded = await store.ref_values(self.pool)
        if refs:
            wanted = list(refs)  # full names: the API parsed each once
            missing = [ref for ref in wanted if ref not in recorded]
            if missing:
                more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                raise not_found("unknown_ref", f"no such ref: {', '.join(missing[:3])}{more}")
        else:
            wanted = [
                ref
                for ref in sorted(recorded)
                if ref in (names.MAIN_REF, names.CHECKS_TAG) or ref.startswith(names.ROUTE_PREFIX)
            ]
        if not wanted:
            raise precondition("no_main", "the hosted repository is empty: nothing to fetch")
        known = await self.repo.known_commits([sha for sha in have if names.OBJECT_ID.matches(sha)])
        return await self.repo.create_bundle(wanted, exclude=known)
