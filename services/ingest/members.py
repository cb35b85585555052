"""The members' use cases of the ingest service: API tokens (create, revoke), asking to join the project, a
maintainer's decision, and leaving it. Mixed into services.ingest.app.Ingest, whose pool and log they use; who may do
what is contracts.access's."""

from datetime import timedelta

from kernelboard.v1 import events_pb2

from contracts import access, names
from contracts.refusals import exists, not_found, precondition
from services.common import auth
from services.common.eventlog import NewEvent
from services.common.logs import get_logger
from services.ingest import domain, store
from services.ingest.domain import Actor

log = get_logger()


class Members:
    async def create_token(
        self, actor: Actor, name: str, kind: int, ttl_s: int, member: bool
    ) -> tuple[str, Actor, bool]:
        name = name or actor.name
        if ttl_s < 0:
            raise domain.invalid("ttl", f"ttl_seconds must be >= 0, got {ttl_s}")
        async with self.pool.acquire() as conn, conn.transaction():
            principal = await auth.get_principal(conn, name)
            registered = principal is None
            if not kind:
                kind = principal.kind if principal else domain.AGENT if "/" in name else domain.PERSON
            owner = principal.owner if principal else domain.owner_from_name(name, kind)
            access.require(actor, access.Action.CREATE_TOKEN, access.Target(owner=owner, name=name, member=member))
            if registered:
                role = domain.role_for(name, kind, (await self.rules_at_tag(conn)).maintainers, member)
                try:
                    principal = await auth.register_principal(
                        conn, name, kind, owner, role, log=self.log, actor=actor.name
                    )
                except ValueError as err:
                    raise domain.invalid("principal", str(err)) from None
            elif principal.kind != kind:
                raise domain.invalid("principal", f"{name} is registered as another kind of principal")
            token = await auth.issue_token(conn, name, ttl=timedelta(seconds=ttl_s) if ttl_s else None)
        log.info("token created", principal=name, actor=actor.name, registered=registered)
        return token, principal, registered

    async def revoke_token(self, actor: Actor, token: str) -> str:
        """Revoke a token the actor may revoke. An unknown, malformed, expired or revoked token and another's token
        all get the same NOT_FOUND: the answer must not tell whether a made-up token exists, or whose a real one is."""
        try:
            holder = await auth.authenticate(self.pool, token)
        except auth.AuthError:
            holder = None
        if holder is None or access.decide(
            actor, access.Action.REVOKE_TOKEN, access.Target(owner=holder.owner, name=holder.name)
        ):
            raise not_found("unknown_token", "no such token among those you may revoke")
        async with self.pool.acquire() as conn:
            await auth.revoke_token(conn, token)
        log.info("token revoked", principal=holder.name, actor=actor.name)
        return holder.name

    async def request_join(self, actor: Actor, note: str) -> store.JoinRow:
        domain.check_join_request(actor)
        note = note.strip()
        async with self.pool.acquire() as conn, conn.transaction():
            request = await store.insert_join_request(conn, actor.name, note)
            if request is None:
                raise exists("join_pending", f"{actor.name} has asked to join already: pending")
            asked = events_pb2.JoinRequested(request_id=request.id, name=actor.name, note=note)
            await self.log.append(names.principal_stream(actor.name), None, [NewEvent(asked, actor.name)], conn=conn)
        log.info("join requested", principal=actor.name, request_id=request.id)
        return request

    async def list_join_requests(self, actor: Actor, state: str, size: int, after: int):
        """Maintainers: a page of join requests in ``state`` ("": pending, "all": every state)."""
        access.require(actor, access.Action.DECIDE_JOIN)
        state = "" if state == "all" else state or "pending"
        requests = await store.list_join_requests(self.pool, state, after, size)
        return requests, domain.next_page_token([r.id for r in requests], size)

    async def decide_join(self, actor: Actor, name: str, accept: bool, note: str) -> store.JoinRow:
        note = note.strip()
        async with self.pool.acquire() as conn, conn.transaction():
            request = await store.pending_join_request(conn, name, for_update=True)
            domain.check_join_decision(actor, name, request is not None)
            decided = await store.decide_join_request(
                conn, request.id, "accepted" if accept else "declined", actor.name, note
            )
            events = [
                events_pb2.JoinDecided(
                    request_id=request.id, name=name, accepted=accept, decided_by=actor.name, note=note
                )
            ]
            # A person who became a member meanwhile (e.g. by a maintainer's token) keeps their role.
            if accept and await auth.change_role(conn, name, events_pb2.ROLE_MEMBER, events_pb2.ROLE_SIGNED_IN):
                events.append(
                    events_pb2.RoleChanged(
                        name=name,
                        role=events_pb2.ROLE_MEMBER,
                        previous_role=events_pb2.ROLE_SIGNED_IN,
                        cause="join accepted",
                    )
                )
            await self.log.append(
                names.principal_stream(name), None, [NewEvent(e, actor.name) for e in events], conn=conn
            )
        log.info("join decided", principal=name, accepted=accept, actor=actor.name)
        return decided

    async def leave(self, actor: Actor) -> Actor:
        domain.check_leave(actor)
        async with self.pool.acquire() as conn, conn.transaction():
            if not await auth.change_role(conn, actor.name, events_pb2.ROLE_SIGNED_IN, events_pb2.ROLE_MEMBER):
                raise precondition("not_member", f"{actor.name} is not a project member")
            left = events_pb2.RoleChanged(
                name=actor.name,
                role=events_pb2.ROLE_SIGNED_IN,
                previous_role=events_pb2.ROLE_MEMBER,
                cause="left the project",
            )
            await self.log.append(names.principal_stream(actor.name), None, [NewEvent(left, actor.name)], conn=conn)
            principal = await auth.get_principal(conn, actor.name)
        log.info("member left", principal=actor.name)
        return principal
