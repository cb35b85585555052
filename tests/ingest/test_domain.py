"""The ingest rules as pure functions: refs, roles, bundle headers, route paths, metrics, tokens."""

import pytest
from kernelboard.v1 import events_pb2

from contracts import access, names
from services.ingest import domain
from services.ingest.domain import Actor, RouteCommit
from tests.support.refusals import refused

ALICE = Actor("alice", domain.PERSON, "alice", events_pb2.ROLE_MEMBER)
ALICE_AGENT = Actor("alice/agent-1", domain.AGENT, "alice", events_pb2.ROLE_MEMBER)
BOB_AGENT = Actor("bob/agent-1", domain.AGENT, "bob", events_pb2.ROLE_SIGNED_IN)
CURATOR = Actor("curator", domain.PERSON, "curator", events_pb2.ROLE_MAINTAINER)
SCHEDULER = Actor("system:scheduler", domain.SERVICE, "system:scheduler", events_pb2.ROLE_SIGNED_IN)
SHA_A, SHA_B = "a" * 40, "b" * 40


def ref(name: str) -> names.Ref:
    return names.ref(name, short_forms=True)


@pytest.mark.parametrize("name", ["triton", "a1", "fast-kernels", "x" * 40])
def test_valid_route_names(name):
    assert domain.validate_route_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "a", "Triton", "-x", "a_b", "x" * 41, "a/b", "ü1", "x-y\n", pytest.param("x" * 3_000_000, id="3MB")],
)
def test_invalid_route_names_are_refused_by_name(name):
    refusal = refused(domain.validate_route_name, name, code="INVALID_ARGUMENT", reason="route_name")
    assert repr(name[:64]) in refusal.message and len(refusal.message) < 200


def test_who_may_write_what():
    main, tag = ref("main"), ref("checks")
    route, job = ref("routes/fast"), ref("refs/jobs/9")
    domain.check_write(CURATOR, main, None, None)
    domain.check_write(CURATOR, tag, None, ("curator",))
    for actor in (ALICE, ALICE_AGENT, BOB_AGENT, SCHEDULER):
        refused(domain.check_write, actor, main, None, None, code="PERMISSION_DENIED", match="maintainer role needed")
        refused(domain.check_write, actor, tag, None, None, code="PERMISSION_DENIED", match="tag checks")
    refused(domain.check_write, CURATOR, tag, None, ("max",), code="PERMISSION_DENIED", match="named in the rules")
    domain.check_write(SCHEDULER, job, None, None)
    for actor in (CURATOR, ALICE, BOB_AGENT):
        refused(domain.check_write, actor, job, None, None, code="PERMISSION_DENIED", match="system:scheduler")
    for actor in (ALICE, ALICE_AGENT, CURATOR):
        domain.check_write(actor, route, "alice", None)
    refused(domain.check_write, BOB_AGENT, route, "alice", None, code="PERMISSION_DENIED", match="belongs to alice")
    refused(domain.check_write, ALICE, route, None, None, code="NOT_FOUND", reason="unknown_route")
    pull = ref("refs/pull/1/head")
    refused(domain.check_write, CURATOR, pull, None, None, code="PERMISSION_DENIED")


def header(*lines: str, pack=b"PACK\x00\x00\x00\x02") -> bytes:
    return ("# v2 git bundle\n" + "".join(line + "\n" for line in lines) + "\n").encode() + pack


def test_bundle_header_is_parsed_and_must_name_the_one_ref():
    target = ref("routes/fast")
    parsed = domain.parse_bundle_header(header(f"-{SHA_A} base", f"{SHA_B} refs/heads/routes/fast"))
    assert parsed.prerequisites == (SHA_A,)
    assert domain.bundle_tip(parsed, target) == SHA_B
    other = domain.parse_bundle_header(header(f"{SHA_B} refs/heads/routes/slow"))
    refused(domain.bundle_tip, other, target, reason="wrong_ref", match="refs/heads/routes/slow")
    two = domain.parse_bundle_header(header(f"{SHA_B} refs/heads/routes/fast", f"{SHA_A} refs/heads/main"))
    refused(domain.bundle_tip, two, target, reason="wrong_ref", match="exactly one ref")


@pytest.mark.parametrize(
    "data",
    [b"", b"hello", b"# v2 git bundle\n" + b"x" * 70000, header("nonsense"), header(f"{SHA_A} refs/x", pack=b"JUNK")],
)
def test_malformed_bundles_are_refused(data):
    refused(domain.parse_bundle_header, data, code="INVALID_ARGUMENT", reason="malformed_bundle")


def test_bundle_capabilities():
    v3 = b"# v3 git bundle\n@object-format=sha1\n" + f"{SHA_B} refs/heads/main\n\n".encode() + b"PACK"
    assert domain.parse_bundle_header(v3).refs == ((SHA_B, "refs/heads/main"),)
    for capability in (b"@filter=blob:none", b"@object-format=sha256"):
        data = b"# v3 git bundle\n" + capability + b"\n" + f"{SHA_B} refs/heads/main\n\n".encode() + b"PACK"
        refused(domain.parse_bundle_header, data, reason="malformed_bundle")


def test_size_limit():
    domain.check_size(10, 10)
    refused(domain.check_bundle_size, 11, 10, code="RESOURCE_EXHAUSTED", reason="too_large", match="11 bytes")
    refused(domain.check_bundle_size, 0, 10, reason="malformed_bundle")


def test_fast_forward_only():
    target = ref("routes/fast")
    domain.check_fast_forward(target, "", SHA_B, False)
    domain.check_fast_forward(target, SHA_A, SHA_B, True)
    domain.check_fast_forward(target, SHA_A, SHA_A, False)
    refused(domain.check_fast_forward, target, SHA_A, SHA_B, False, code="FAILED_PRECONDITION", match="non-fast")


def test_route_rule_holds_for_every_commit_and_every_parent():
    main_old, main_new, head = "m" * 40, "n" * 40, "h" * 40
    known = {main_old: "main-1", main_new: "main-2", head: "main-1"}  # the route's head is main-1 outside its folder
    inside = RouteCommit(SHA_A, (head,), "main-1")
    assert domain.route_commit_problem([inside], known) is None
    # A merge of main takes main's files as they are: equal to one parent outside the folder.
    merge_main = RouteCommit(SHA_B, (SHA_A, main_new), "main-2")
    assert domain.route_commit_problem([inside, merge_main], known) is None
    sneaky = RouteCommit(SHA_B, (SHA_A,), "edited")
    assert domain.route_commit_problem([inside, sneaky], known).kind == "outside"
    # An orphan, whatever its tree, and a merge with it or with any history not main's nor the route's.
    orphan = RouteCommit("o" * 40, (), "main-2")
    assert domain.route_commit_problem([orphan], known).kind == "orphan"
    stranger = "s" * 40
    problem = domain.route_commit_problem([RouteCommit(SHA_B, (head, stranger), "main-1")], known)
    assert (problem.kind, problem.parent) == ("unrelated_parent", stranger)
    refusal = domain.refuse_route_commit("fast", problem, ["AGENTS.md", "scienceslack.json"], [])
    assert refusal.reason == "unrelated_history" and "would drop 'AGENTS.md', 'scienceslack.json'" in refusal.message
    refusal = domain.refuse_route_commit("fast", domain.route_commit_problem([inside, sneaky], known), [], ["README"])
    assert refusal.reason == "path_outside_route" and "touches 'README' outside routes/fast/" in refusal.message


def test_pushed_objects_are_bounded_by_their_inflated_size():
    domain.check_object_sizes([domain.NewObject(SHA_A, "blob", 10, "routes/r/a.py")], max_blob=10, max_total=20)
    refused(
        domain.check_object_sizes,
        [domain.NewObject(SHA_A, "blob", 11, "routes/r/metrics.json")],
        10,
        100,
        code="RESOURCE_EXHAUSTED",
        match="routes/r/metrics.json is 11 bytes",
    )
    many = [domain.NewObject(SHA_A, "tree", 8), domain.NewObject(SHA_B, "blob", 8, "x")]
    refused(domain.check_object_sizes, many, 10, 15, reason="push_too_large")


def test_route_folders_hold_regular_files_only():
    domain.check_route_files("fast", [("100644", "routes/fast/a.py"), ("100755", "routes/fast/run.sh")])
    refused(domain.check_route_files, "fast", [("120000", "routes/fast/a.py")], reason="not_a_file", match="symlink")
    refused(domain.check_route_files, "fast", [("160000", "routes/fast/sub")], match="submodule")


def test_metrics_validation():
    good = domain.parse_metrics("routes/r/metrics.json", '{"score": 1.5, "cost": 20, "subtasks": [{"id": "x"}]}')
    assert (good.score, good.cost, good.subtasks) == (1.5, 20.0, [{"id": "x"}])
    for text, fragment in [
        ("{", "not valid JSON"),
        ("[" * 100_000, "nested too deeply"),
        ("[]", "must be a JSON object"),
        ('{"cost": 1, "subtasks": []}', "score"),
        ('{"score": "fast", "cost": 1, "subtasks": []}', "score"),
        ('{"score": 1, "cost": -1, "subtasks": []}', "cost"),
        ('{"score": 1, "cost": 1}', "subtasks"),
        ('{"score": true, "cost": 1, "subtasks": []}', "score"),
    ]:
        refused(domain.parse_metrics, "routes/r/metrics.json", text, reason="malformed_metrics", match=fragment)


def test_reported_routes():
    route, main = ref("routes/rr"), ref("main")
    paths = ["routes/rr/metrics.json", "routes/s/metrics.json", "routes/rr/x/metrics.json"]
    assert domain.reported_routes(route, paths) == ["rr"]
    assert domain.reported_routes(main, paths) == ["rr", "s"]


def test_roles():
    assert domain.role_for("curator", domain.PERSON, ["curator"], False) == events_pb2.ROLE_MAINTAINER
    assert domain.role_for("alice", domain.PERSON, ["curator"], True) == events_pb2.ROLE_MEMBER
    assert domain.role_for("zed", domain.PERSON, ["curator"], False) == events_pb2.ROLE_SIGNED_IN
    assert domain.role_for("alice/a", domain.AGENT, [], True) == events_pb2.ROLE_UNSPECIFIED
    assert domain.role_for("system:x", domain.SERVICE, ["system:x"], False) == events_pb2.ROLE_SIGNED_IN


def test_reviews_and_merges():
    domain.check_review(events_pb2.REVIEW_VERDICT_APPROVE, "open", 1)
    refused(domain.check_review, events_pb2.REVIEW_VERDICT_UNSPECIFIED, "open", 1, reason="verdict")
    refused(domain.check_review, events_pb2.REVIEW_VERDICT_COMMENT, "merged", 1, code="FAILED_PRECONDITION")
    domain.check_open("open", 1)
    refused(domain.check_open, "closed", 1, code="FAILED_PRECONDITION")


def test_who_closes_issues_and_decides_joins():
    erin = Actor("erin", domain.PERSON, "erin", events_pb2.ROLE_SIGNED_IN)
    erin_bot = Actor("erin/bot", domain.AGENT, "erin", events_pb2.ROLE_SIGNED_IN)
    close = access.Action.CLOSE_ISSUE
    assert access.decide(ALICE_AGENT, close, access.Target(owner="alice", name="alice/agent-1")) is None
    assert access.decide(ALICE, close, access.Target(owner="alice", name="alice/agent-1")) is None  # its person
    assert access.decide(CURATOR, close, access.Target(owner="bob", name="bob")) is None
    assert access.decide(BOB_AGENT, close, access.Target(owner="alice", name="alice")) is not None
    join = access.Action.REQUEST_JOIN
    assert access.decide(erin, join) is None and access.decide(erin_bot, join) is not None
    assert access.decide(SCHEDULER, join) is not None
    decide = access.Action.DECIDE_JOIN
    assert access.decide(CURATOR, decide) is None and access.decide(ALICE, decide) is not None
    domain.check_leave(ALICE)
    refused(domain.check_leave, erin, code="FAILED_PRECONDITION", reason="not_member")
    refused(domain.check_leave, erin_bot, code="PERMISSION_DENIED", match="people leave")
    refused(domain.check_join_request, ALICE, code="FAILED_PRECONDITION", reason="already_member")
    refused(domain.check_join_request, erin_bot, code="PERMISSION_DENIED", match="ask as erin")
    refused(domain.check_join_decision, ALICE, "erin", True, code="PERMISSION_DENIED")
    refused(domain.check_join_decision, CURATOR, "erin", False, code="NOT_FOUND")
    refused(domain.check_leave, CURATOR, code="FAILED_PRECONDITION", reason="maintainer_leaves")
    refused(domain.check_issue_state_change, BOB_AGENT, 4, "alice", "alice", "open", "closed", code="PERMISSION_DENIED")
    refused(domain.check_issue_state_change, ALICE, 4, "alice", "alice", "closed", "closed", code="FAILED_PRECONDITION")


def test_cursor_pages():
    assert domain.page_size(0) == domain.PAGE_SIZE_DEFAULT and domain.page_size(10_000) == domain.PAGE_SIZE_MAX
    refused(domain.page_size, -1, code="INVALID_ARGUMENT")
    assert domain.page_after("") == 0 and domain.page_after("17") == 17
    for token in ("abc", "017", "-1", "1" * 21, "1e3"):
        refused(domain.page_after, token, code="INVALID_ARGUMENT", reason="page_token")
    assert domain.next_page_token([3, 5], 2) == "5" and domain.next_page_token([3], 2) == ""
