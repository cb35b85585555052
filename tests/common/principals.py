"""Principals and tokens made the way an operator makes them, for the auth tests."""

from services.common import auth
from services.common.auth import MEMBER, PERSON


async def register(event_log, name, kind=PERSON, owner="", role=MEMBER):
    async with event_log.pool.acquire() as conn:
        return await auth.register_principal(conn, name, kind, owner, role, log=event_log, actor="operator")


async def token_for(event_log, name, ttl=None) -> str:
    async with event_log.pool.acquire() as conn:
        return await auth.issue_token(conn, name, ttl=ttl)
