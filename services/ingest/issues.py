"""The issue use cases of the ingest service: open, show, list, close and reopen an issue, and comment on an issue or
a pull request. Mixed into services.ingest.app.Ingest, whose pool and log they use; who may do what is
contracts.access's."""

from kernelboard.v1 import events_pb2

from contracts import access, names
from contracts.refusals import not_found
from services.common.eventlog import NewEvent
from services.common.logs import get_logger
from services.ingest import domain, store
from services.ingest.domain import Actor

log = get_logger()


class Issues:
    async def open_issue(self, actor: Actor, title: str, body: str) -> store.IssueRow:
        access.require(actor, access.Action.OPEN_ISSUE)
        title, body = domain.non_empty("title", title), body.strip()
        async with self.pool.acquire() as conn, conn.transaction():
            number = await store.insert_issue(conn, title, body, actor.name, access.owner_of(actor))
            opened = events_pb2.IssueOpened(
                number=number, title=title, body=body, author=actor.name, author_owner=access.owner_of(actor)
            )
            await self.log.append(names.issue_stream(number), 0, [NewEvent(opened, actor.name)], conn=conn)
        log.info("issue opened", number=number, actor=actor.name)
        return await self.get_issue(number)

    async def get_issue(self, number: int) -> store.IssueRow:
        issue = await store.get_issue(self.pool, number)
        if issue is None:
            raise not_found("unknown_issue", f"no issue #{number}")
        return issue

    async def list_issues(self, state: str, size: int, after: int) -> tuple[list[store.IssueRow], str]:
        """A page of issues, oldest first, after the cursor ``after``; the next page's token ("" when last)."""
        issues = await store.list_issues(self.pool, state, after, size)
        return issues, domain.next_page_token([i.number for i in issues], size)

    async def set_issue_state(self, actor: Actor, number: int, to: str) -> store.IssueRow:
        async with self.pool.acquire() as conn, conn.transaction():
            issue = await store.get_issue(conn, number, for_update=True)
            if issue is None:
                raise not_found("unknown_issue", f"no issue #{number}")
            domain.check_issue_state_change(actor, number, issue.author, issue.author_owner, issue.state, to)
            await store.set_issue_state(conn, number, to, actor.name)
            if to == "closed":
                changed = events_pb2.IssueClosed(number=number, closed_by=actor.name)
            else:
                changed = events_pb2.IssueReopened(number=number, reopened_by=actor.name)
            await self.log.append(names.issue_stream(number), None, [NewEvent(changed, actor.name)], conn=conn)
        log.info("issue state changed", number=number, state=to, actor=actor.name)
        return await self.get_issue(number)

    async def add_comment(self, actor: Actor, issue_number: int, pull_number: int, body: str) -> store.CommentRow:
        access.require(actor, access.Action.COMMENT)
        body = domain.non_empty("body", body)
        async with self.pool.acquire() as conn, conn.transaction():
            await self._check_thread(conn, issue_number, pull_number)
            comment = await store.insert_comment(conn, issue_number, pull_number, body, actor.name)
            added = events_pb2.CommentAdded(
                comment_id=comment.id,
                issue_number=issue_number,
                pull_number=pull_number,
                body=body,
                author=actor.name,
            )
            stream = names.issue_stream(issue_number) if issue_number else names.pull_stream(pull_number)
            await self.log.append(stream, None, [NewEvent(added, actor.name)], conn=conn)
        log.info("comment added", issue=issue_number, pull=pull_number, comment_id=comment.id, actor=actor.name)
        return comment

    async def list_comments(
        self, issue_number: int, pull_number: int, size: int, after: int
    ) -> tuple[list[store.CommentRow], str]:
        async with self.pool.acquire() as conn:
            await self._check_thread(conn, issue_number, pull_number)
            comments = await store.list_comments(conn, issue_number, pull_number, after, size)
        return comments, domain.next_page_token([c.id for c in comments], size)

    @staticmethod
    async def _check_thread(conn, issue_number: int, pull_number: int) -> None:
        """The issue or pull request a comment belongs to (the edge names exactly one) exists."""
        if issue_number and await store.get_issue(conn, issue_number) is None:
            raise not_found("unknown_issue", f"no issue #{issue_number}")
        if pull_number and await store.get_pull(conn, pull_number) is None:
            raise not_found("unknown_pull", f"no pull request #{pull_number}")
