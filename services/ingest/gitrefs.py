"""The git refs follow PostgreSQL's: one task applies the recorded values of the refs that moved, in batches, each
batch one `git update-ref --stdin` transaction.

Why one task and batches: a ref's truth is its row in ingest_refs, moved by compare-and-swap in the transaction that
records its events. The git ref is a copy for git's readers (fetch bundles, the scheduler, the verifier). Copying it
after each commit under a process-wide lock made every push wait for every other push's `git update-ref`; here a push
marks its ref, and the task reads the current values of all marked refs and writes them in one subprocess. Reading
the value when writing it (not the value a push recorded) makes the git ref converge on the latest commit whatever
order pushes finish in. A push replies only once the batch holding its ref is applied, so whoever got a reply finds
the ref moved in git too; a crash before that is repaired by ``Ingest.start``'s reconcile.
"""

import asyncio
from collections.abc import Iterable

from services.common import metrics
from services.common.logs import get_logger
from services.ingest import store
from services.ingest.gitrepo import HostedRepo

BATCH_REFS = metrics.histogram(
    "kb_ingest_git_ref_batch_refs", "Refs written to git per batch", buckets=(1, 2, 4, 8, 16, 32, 64)
)
BATCH_SECONDS = metrics.histogram("kb_ingest_git_ref_batch_seconds", "Time to apply one batch of refs to git")

RETRY_S = 1.0

log = get_logger()


class GitRefFollower:
    def __init__(self, pool, repo: HostedRepo):
        self.pool = pool
        self.repo = repo
        self._marked: set[str] = set()
        self._next: asyncio.Future | None = None  # resolves once the marked refs are in git
        self._applying: asyncio.Future | None = None  # the batch being written
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._wake.set()  # refs marked before a stop go with the first batch
            self._next = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(), name="git-ref-follower")

    async def stop(self) -> None:
        """Stop writing git refs; whoever still waits is told so (``Ingest.start`` reconciles what was left)."""
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        for waiting in (self._next, self._applying):
            if waiting is not None and not waiting.done():
                waiting.set_exception(RuntimeError("ingest stopped before git caught up with postgres"))
                waiting.exception()

    async def follow(self, refs: Iterable[str]) -> None:
        """Returns once git holds the values PostgreSQL had for ``refs`` when this was called, or later ones; raises
        when git could not be written (the task retries those refs until it can)."""
        self.start()
        self._marked.update(refs)
        batch = self._next
        self._wake.set()
        await asyncio.shield(batch)  # a cancelled caller must not cancel the batch others wait for

    async def caught_up(self) -> None:
        """Returns once every ref moved before this call is in git (readers that serve git refs wait for this)."""
        waiting = self._next if self._marked else self._applying
        if waiting is not None and not waiting.done():
            await asyncio.shield(waiting)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._marked:
                continue
            refs, self._marked = self._marked, set()
            batch, self._next = self._next, asyncio.get_running_loop().create_future()
            self._applying = batch
            try:
                with BATCH_SECONDS.time():
                    await self._apply(refs)
            except Exception as err:  # noqa: BLE001 - every waiter of this batch gets the error; the refs are retried
                log.warning("git refs not updated; retrying in 1 s", refs=sorted(refs), error=str(err))
                if not batch.done():
                    batch.set_exception(err)
                    batch.exception()  # retrieved here too: a batch whose waiters all left must not warn at exit
                self._marked |= refs
                await asyncio.sleep(RETRY_S)
                self._wake.set()
            else:
                BATCH_REFS.observe(len(refs))
                if not batch.done():
                    batch.set_result(None)

    async def _apply(self, refs: set[str]) -> None:
        truth = await store.ref_values_of(self.pool, sorted(refs))
        await self.repo.write_refs(truth)
