"""The project's issues and pull requests on the web board, in a real browser: read-only and public as the board is,
read from the real ingest service as system:web; what they say is what `kb issue` and `kb pr` say, and text from
outside (titles, bodies, comments) that carries markup reads as text and runs nothing."""

import pytest
from kernelboard.v1 import events_pb2

from contracts import access, names
from services.common import auth
from services.common.eventlog import NewEvent

from .conftest import web_stack
from .web_events import check

MARKUP = "<img src=x onerror=alert('issue')> tiles of <b>64</b>"


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    async with web_stack(tmp_path_factory.mktemp("web-threads"), with_ingest=True) as running:
        await project(running)
        yield running


async def project(stack) -> None:
    """Through the ingest use cases, as `kb` would: main, a route with one kernel, its pull request reviewed and
    commented, and two issues (one closed) with comments."""
    ingest, log = stack.ingest, stack.log
    async with log.pool.acquire() as conn:
        for name, kind, owner, role in (
            ("alice", auth.PERSON, "alice", auth.MEMBER),
            ("alice/agent-1", auth.AGENT, "alice", 0),
        ):
            await auth.register_principal(conn, name, kind, owner, role, log=log, actor="system:admin")
        names_ = ("curator", "alice", "alice/agent-1")
        people = {name: access.Actor.of(await auth.get_principal(conn, name)) for name in names_}
    main = await ingest.repo.commit_files("", {"README.md": b"kernelboard\n"}, "main", "curator")
    await ingest.advance(people["curator"], names.ref(names.MAIN_REF), main)
    await ingest.start_route(people["alice/agent-1"], "tiles")
    head = await ingest.repo.commit_files(main, {"routes/tiles/matmul.py": b"class ModelNew:\n    pass\n"}, "k", "a")
    await ingest.advance(people["alice/agent-1"], names.ref(names.route_ref("tiles")), head)
    # The verifier's check of the route's head, as it records it: the pull request's page lists it.
    judged = check("tiles", 2, 1.8, check_id="301")
    judged.sha = head
    await log.append("check:301", None, [NewEvent(judged, actor="system:verifier", verifier_version=1)])
    await stack.until_folded()
    pull = await ingest.open_pull(people["alice/agent-1"], "tiles", "Tiled matmul", f"Why: {MARKUP}\nsecond line")
    await ingest.review(people["alice"], pull.number, events_pb2.REVIEW_VERDICT_COMMENT, "64 fits the L2")
    await ingest.review(people["curator"], pull.number, events_pb2.REVIEW_VERDICT_APPROVE, "good")
    await ingest.add_comment(people["curator"], 0, pull.number, "merging after its check")
    flaky = await ingest.open_issue(people["alice"], "matmul check flaky", MARKUP)
    await ingest.add_comment(people["curator"], flaky.number, 0, "looking")
    done = await ingest.open_issue(people["curator"], "a closed one", "")
    await ingest.set_issue_state(people["curator"], done.number, "closed")
    stack.numbers = {"pull": pull.number, "flaky": flaky.number, "done": done.number}


async def test_issues_list_and_read_with_their_comments(stack, page):
    await page.goto(stack.web_url + "/issues")
    rows = await page.locator("#issues tbody tr").all_inner_texts()
    assert len(rows) == 1 and "matmul check flaky" in rows[0] and "alice" in rows[0]  # open ones by default
    await page.goto(stack.web_url + "/issues?state=all")
    assert await page.locator("#issues tbody tr").count() == 2
    await page.click(f'#issues a[href="/issues/{stack.numbers["flaky"]}"] >> nth=0')
    await page.wait_for_url(stack.web_url + f"/issues/{stack.numbers['flaky']}")
    assert await page.inner_text("#issue-title") == "matmul check flaky"
    assert await page.inner_text("#issue-state") == "open"
    assert await page.inner_text("#issue-body") == MARKUP  # the markup reads as text
    assert "looking" in await page.inner_text("#comments")
    assert await page.locator("main img, main b").count() == 0 and page.dialogs == []
    await page.goto(stack.web_url + f"/issues/{stack.numbers['done']}")
    assert await page.inner_text("#issue-state") == "closed"


async def test_a_pull_request_shows_its_body_files_reviews_and_conversation(stack, page):
    await page.goto(stack.web_url + "/pulls")
    rows = await page.locator("#pulls tbody tr").all_inner_texts()
    assert len(rows) == 1 and "Tiled matmul" in rows[0] and "1 approve, 1 comment" in rows[0]
    await page.goto(stack.web_url + f"/pulls/{stack.numbers['pull']}")
    assert await page.inner_text("#pull-title") == "Tiled matmul"
    assert await page.inner_text("#pull-body") == f"Why: {MARKUP}\nsecond line"
    assert await page.inner_text("#review-summary") == "1 approve, 1 comment"
    files = await page.locator("#files tbody tr").all_inner_texts()
    assert [" ".join(f.split()) for f in files] == ["routes/tiles/matmul.py +2 −0"]
    conversation = await page.locator("#conversation li .meta").all_inner_texts()
    assert [line.split(",")[0] for line in conversation] == [
        "alice commented",
        "curator approved",
        "curator commented",
    ]
    assert await page.locator('a[href="/route/tiles"]').count() >= 1
    checks = await page.locator("#checks tbody tr").all_inner_texts()
    assert len(checks) == 1 and "passed, verified" in checks[0] and "1.800" in checks[0], checks
    assert await page.locator('#checks a[href="/route/tiles/check/301"]').count() == 1
    assert await page.locator("main img, main b").count() == 0 and page.dialogs == []


async def test_missing_threads_are_404_and_the_web_can_write_nothing(stack, page):
    response = await page.goto(stack.web_url + "/issues/999")
    assert response.status == 404 and "no issue #999" in await page.inner_text("main")
    response = await page.goto(stack.web_url + "/pulls/999")
    assert response.status == 404
    response = await page.goto(stack.web_url + "/issues?state=bogus")
    assert response.status == 400
    web = access.Actor(names.WEB, auth.SERVICE, names.WEB, auth.SIGNED_IN)
    with pytest.raises(Exception, match="speaks for nobody"):
        await stack.ingest.open_issue(web, "spam", "")
