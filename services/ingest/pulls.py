"""The pull-request use cases of the ingest service: open (with a body), show (with its reviews and the files it
changes), list, review and merge. Mixed into services.ingest.app.Ingest, whose pool, repository, log and git ref
follower they use; who may do what is contracts.access's."""

from kernelboard.v1 import events_pb2

from contracts import access, limits, names
from contracts.refusals import conflict, not_found, precondition
from services.common import routes
from services.common.eventlog import NewEvent
from services.common.logs import get_logger
from services.ingest import domain, store
from services.ingest.domain import Actor
from services.ingest.gitrepo import MergeConflict

MAX_FILES_SHOWN = 300  # a pull request's diff stat lists at most this many files (a route's folder is small)

log = get_logger()


def recorded_paths(paths: list[str]) -> list[str]:
    """The changed paths a CommitIngested records: a commit of thousands of files (a job's results) is summed up
    ("… and N more") within the event field's limit rather than refused; the push's reply lists them all."""
    return limits.fit_list(paths, limits.EVENT_FIELD_BYTES["CommitIngested.changed_paths"])


def verdict_target(pull: store.PullRow) -> access.Target:
    """What a verdict on ``pull`` is given to: its author's side (contracts.access, APPROVE_PULL)."""
    return access.Target(owner=pull.author_owner, name=pull.author, label=f"pull request #{pull.number}")


class PullRequests:
    async def open_pull(self, actor: Actor, route_name: str, title: str, body: str = "") -> store.PullRow:
        route, head = await self.get_route(route_name)
        owner = await routes.route_owner(self.log, route.route)
        access.require(actor, access.Action.OPEN_PULL, access.Target(owner=owner or "", label=f"route {route.route!r}"))
        main = await store.ref_value(self.pool, names.MAIN_REF)
        if await self.repo.is_ancestor(head, main):
            raise precondition("nothing_to_merge", f"route {route.route!r} brings nothing main lacks")
        title, body = title.strip() or f"Merge route {route.route}", body.strip()
        changed = await self.repo.changed_paths(await self.repo.merge_base(main, head), head)  # what the route brings
        author_owner = access.owner_of(actor)
        async with self.pool.acquire() as conn, conn.transaction():
            number = await store.insert_pull(
                conn, route.route, head, names.MAIN_REF, title, body, actor.name, author_owner
            )
            target = names.ref(names.pull_ref(number))
            await store.move_ref(conn, target.name, "", head, actor.name)
            opened = events_pb2.PullRequestOpened(
                number=number,
                route=route.route,
                head_sha=head,
                base_ref=names.MAIN_REF,
                title=title,
                author=actor.name,
                body=body,
            )
            commit = events_pb2.CommitIngested(
                ref=target.name,
                sha=head,
                kind=events_pb2.COMMIT_KIND_PULL,
                route=route.route,
                pull_number=number,
                changed_paths=recorded_paths(changed),
                owner=author_owner,
            )
            await self.log.append(
                target.stream, 0, [NewEvent(opened, actor.name), NewEvent(commit, actor.name)], conn=conn
            )
        await self.git_refs.follow([target.name])
        log.info("pull request opened", number=number, route=route.route, head=head, actor=actor.name)
        return await self.get_pull(number)

    async def get_pull(self, number: int) -> store.PullRow:
        pull = await store.get_pull(self.pool, number)
        if pull is None:
            raise not_found("unknown_pull", f"no pull request #{number}")
        return pull

    async def pull_files(self, pull: store.PullRow) -> list[tuple[str, int, int, bool]]:
        """The files ``pull`` changes, from its merge base with its base ref (with main as it was merged into, once
        merged) to its head: what a reviewer reads."""
        if pull.merge_sha:
            base = await self.repo.first_parent(pull.merge_sha)  # main as it was before the merge
        else:
            base = await store.ref_value(self.pool, pull.base_ref)
        merge_base = await self.repo.merge_base(base, pull.head_sha)
        return (await self.repo.diff_stat(merge_base, pull.head_sha))[:MAX_FILES_SHOWN]

    async def list_pulls(self, route: str, state: str) -> list[store.PullRow]:
        return await store.list_pulls(self.pool, route, state)

    async def review(self, actor: Actor, number: int, verdict: int, body: str) -> store.PullRow:
        access.require(actor, access.Action.REVIEW_PULL)
        async with self.pool.acquire() as conn, conn.transaction():
            pull = await store.get_pull(conn, number, for_update=True)
            if pull is None:
                raise not_found("unknown_pull", f"no pull request #{number}")
            domain.check_review(verdict, pull.state, number)
            if verdict != events_pb2.REVIEW_VERDICT_COMMENT:
                access.require(actor, access.Action.APPROVE_PULL, verdict_target(pull))
            await store.insert_review(conn, number, verdict, body, actor.name)
            reviewed = events_pb2.PullRequestReviewed(number=number, verdict=verdict, body=body, reviewer=actor.name)
            await self.log.append(names.pull_stream(number), None, [NewEvent(reviewed, actor.name)], conn=conn)
        return await self.get_pull(number)

    async def merge(self, actor: Actor, number: int) -> store.PullRow:
        """A merge commit of the pull request's head into main (maintainers only). The rules that judge change only
        when a maintainer moves the tag checks, never by a merge."""
        access.require(actor, access.Action.MERGE_PULL)
        pull = await self.get_pull(number)
        domain.check_open(pull.state, number)
        main = await store.ref_value(self.pool, names.MAIN_REF)
        message = f"Merge route {pull.route} (#{number}): {pull.title}"
        try:
            merge_sha = await self.repo.merge(main, pull.head_sha, message, actor.name)
        except MergeConflict as err:
            raise precondition("merge_conflict", f"pull request #{number}: {err}") from None
        # Checked again against main as it is now: a merge into main changes only the route's folder, whatever the
        # route's history let through (a head recorded before the route rule held for every commit).
        dropped, changed = await self.repo.paths_outside(main, merge_sha, pull.route)
        if dropped or changed:
            raise domain.refuse_merge_outside_route(number, pull.route, dropped, changed)
        commit = events_pb2.CommitIngested(
            ref=names.MAIN_REF,
            sha=merge_sha,
            parent=main,
            kind=events_pb2.COMMIT_KIND_MAIN,
            changed_paths=recorded_paths(await self.repo.changed_paths(main, merge_sha)),
            owner=access.owner_of(actor),
        )
        merged = events_pb2.PullRequestMerged(
            number=number, merge_sha=merge_sha, base_ref=names.MAIN_REF, merged_by=actor.name
        )
        async with self.pool.acquire() as conn, conn.transaction():
            locked = await store.get_pull(conn, number, for_update=True)
            domain.check_open(locked.state, number)
            try:
                await store.move_ref(conn, names.MAIN_REF, main, merge_sha, actor.name)
            except store.RefMoved as err:
                raise conflict("conflict", str(err)) from None
            await store.mark_merged(conn, number, merge_sha, actor.name)
            await self.log.append(names.MAIN_STREAM, None, [NewEvent(commit, actor.name)], conn=conn)
            await self.log.append(names.pull_stream(number), None, [NewEvent(merged, actor.name)], conn=conn)
        await self.git_refs.follow([names.MAIN_REF])
        log.info("pull request merged", number=number, merge_sha=merge_sha, actor=actor.name)
        return await self.get_pull(number)
