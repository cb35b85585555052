"""The board rules, one at a time, on small hand-written logs."""

from kernelboard.v1 import events_pb2

from services.board import codec, projection, standing, views

from .board_events import DAY_NS, START_NS, check, envelope, report, rules, rules_json

AGENT = events_pb2.PRINCIPAL_KIND_AGENT


def log(*payloads, actor="curator"):
    """Envelopes at positions 1..n, a minute apart; an item may be (payload, dict of envelope arguments)."""
    events = []
    for position, item in enumerate(payloads, start=1):
        payload, extra = item if isinstance(item, tuple) else (item, {})
        extra = {"actor": actor, "at_ns": START_NS + position * 60_000_000_000, **extra}
        events.append(envelope(position, payload, **extra))
    return events


def board_of(events, version=None):
    state = projection.fold(events)
    version = version or standing.newest_version(state)
    return state, views.board_view(state, state.boards[version])


def test_verified_and_maintainer_scores_rank_others_and_failures_are_listed_beside():
    state, view = board_of(
        log(
            rules(1, verifier_versions=[1]),
            (check("fast", 1, passed=True, score=2.0, check_id="c1"), {"verifier_version": 1}),
            (check("fast", 1, passed=True, score=1.5, check_id="c2"), {"verifier_version": 1}),
            report("tiled", 1, score=3.0, by_maintainer=True, reporter="curator"),
            report("naive", 1, score=9.0, by_maintainer=False, reporter="alice"),
            (check("naive", 1, passed=False, score=0.0, reasons=["atol broken on matmul"]), {"verifier_version": 1}),
        )
    )
    assert [(e.rank, e.route, e.score, e.source) for e in view.ranked] == [
        (1, "tiled", 3.0, "reported by maintainer"),
        (2, "fast", 2.0, "verified"),
    ]
    assert view.ranked[1].check_id == "c1" and view.ranked[1].verifier_version == 1
    assert [(e.rank, e.route, e.source, e.reason) for e in view.listed_beside] == [
        (0, "naive", "reported", ""),
        (0, "naive", "failed check", "atol broken on matmul"),
    ]


def test_ties_break_on_the_earlier_position_and_a_later_pass_clears_a_failure():
    _, view = board_of(
        log(
            rules(1),
            check("b", 1, passed=True, score=2.0),
            check("a", 1, passed=False, score=0.0, reasons=["timeout"]),
            check("a", 1, passed=True, score=2.0),
        )
    )
    assert [e.route for e in view.ranked] == ["b", "a"]
    assert list(view.listed_beside) == []


def test_checks_of_a_verifier_version_the_rules_do_not_accept_do_not_count():
    events = log(
        rules(1, verifier_versions=[2]),
        (check("fast", 1, passed=True, score=5.0), {"verifier_version": 1}),
        check("slow", 1, passed=True, score=1.0),
    )
    state, view = board_of(events)
    assert list(view.ranked) == [] and list(view.listed_beside) == []
    by_position = {e.global_position: e for e in events}
    assert views.history_positions(state, "fast") == [2]
    history = views.route_view(state, "fast", events=by_position).boards[0].history
    assert [(h.global_position, h.kind, h.counted) for h in history] == [(2, "check", False)]
    assert history[0].note == "verifier version 1 is not accepted by the rules (they accept 2)"
    slow = views.route_view(state, "slow", events=by_position).boards[0].history[0]
    assert slow.note == "a check without a verifier version is not accepted by the rules (they accept 2)"


def test_a_raised_version_starts_a_new_board_and_the_old_one_stays_readable():
    state, newest = board_of(
        log(
            rules(1),
            check("fast", 1, passed=True, score=2.0),
            rules(2),
            events_pb2.RouteStarted(route="new", owner="bob", started_by="bob"),
            check("new", 2, passed=True, score=1.1),
        )
    )
    assert newest.version == 2 and [e.route for e in newest.ranked] == ["new"]
    old = views.board_view(state, state.boards[1])
    assert [e.route for e in old.ranked] == ["fast"] and old.header.routes == 1
    assert newest.header.routes == 1 and newest.card.version == 2


def test_status_is_quiet_after_14_days_without_a_score_and_maintainers_set_it():
    base = START_NS
    events = log(
        (rules(1), {"at_ns": base}),
        (check("fast", 1, passed=True, score=2.0), {"at_ns": base + DAY_NS}),
        (events_pb2.CommitIngested(route="fast", owner="alice"), {"at_ns": base + 14 * DAY_NS, "actor": "alice"}),
    )
    assert board_of(events)[1].status == "active"
    later = envelope(4, events_pb2.CommitIngested(route="fast", owner="alice"), actor="alice", at_ns=base + 15 * DAY_NS)
    _, view = board_of([*events, later])
    assert (view.status, view.status_reason) == ("quiet", "no route scored for 14 days")
    flawed = envelope(
        5,
        events_pb2.BenchmarkStatusChanged(benchmark_version=1, status="flawed", reason="leak"),
        at_ns=base + 15 * DAY_NS,
    )
    _, view = board_of([*events, later, flawed])
    assert (view.status, view.status_reason, view.card.status) == ("flawed", "leak", "flawed")


def test_header_counts_agents_at_work_within_7_days_of_the_latest_event():
    base = START_NS
    events = [
        envelope(1, rules(1), at_ns=base),
        envelope(2, events_pb2.PrincipalRegistered(name="alice/a1", kind=AGENT, owner="alice"), at_ns=base),
        envelope(
            3, events_pb2.RouteStarted(route="r1", owner="alice", started_by="alice/a1"), actor="alice/a1", at_ns=base
        ),
        # bob/b1 is not registered but acts for bob: an agent by what it does
        envelope(4, events_pb2.CommitIngested(route="r2", owner="bob"), actor="bob/b1", at_ns=base + 5 * DAY_NS),
        envelope(5, events_pb2.CommitIngested(route="r2", owner="bob"), actor="bob", at_ns=base + 9 * DAY_NS),
    ]
    _, view = board_of(events)
    assert (view.header.agents_in_all, view.header.agents_at_work, view.header.routes) == (2, 1, 2)
    assert view.header.started == views.rfc3339(base)
    assert view.header.last_active == views.rfc3339(base + 9 * DAY_NS)


def test_adopted_marks_follow_the_latest_event_and_the_card_reads_the_rules():
    state, view = board_of(
        log(
            rules(1, verifier_versions=[1]),
            (check("fast", 1, passed=True, score=2.0), {"verifier_version": 1}),
            events_pb2.RouteAdopted(route="fast", benchmark_version=1, adopted=True, note="merged"),
        )
    )
    assert view.ranked[0].adopted
    card = view.card
    assert card.name == "KernelBench operators" and len(card.kernels) == 12 and list(card.verifier_versions) == [1]
    assert ("atol", "0.01") in [(g.name, g.value) for g in card.guardrails]
    assert ("timing.statistic", '"median"') in [(g.name, g.value) for g in card.guardrails]
    withdrawn = envelope(4, events_pb2.RouteAdopted(route="fast", benchmark_version=1, adopted=False))
    _, view = board_of([*log(rules(1), check("fast", 1, passed=True, score=2.0)), withdrawn])
    assert not view.ranked[0].adopted


def test_unreadable_rules_give_a_card_that_says_why_and_accept_any_verifier():
    bad = events_pb2.RulesApproved(rules_commit="abc", benchmark_version=1, rules_json="{not json")
    _, view = board_of(log(bad, check("fast", 1, passed=True, score=2.0)))
    assert view.card.rules_error.startswith("the rules could not be read")
    assert [e.route for e in view.ranked] == ["fast"]


def test_events_before_any_rules_without_a_version_place_nothing():
    state = projection.fold(log(events_pb2.RouteStarted(route="early", owner="alice", started_by="alice")))
    assert state.boards == {} and state.routes["early"].owner == "alice"
    assert views.route_view(state, "early").owner == "alice"
    assert views.route_view(state, "never") is None


def test_a_pass_that_is_not_verified_is_listed_beside_with_why_and_never_ranks():
    state, view = board_of(
        log(
            rules(1),
            check("cpu-only", 1, passed=True, score=0.5, verified=False),
            check("gpu", 1, passed=True, score=1.2),
            check("gpu", 1, passed=True, score=9.0, verified=False),
        )
    )
    assert [(e.route, e.score, e.source) for e in view.ranked] == [("gpu", 1.2, "verified")]
    assert [(e.route, e.source, e.reason) for e in view.listed_beside] == [
        ("cpu-only", "unverified check", "runner cpu is not the pinned NVIDIA H200"),
        ("gpu", "unverified check", "runner cpu is not the pinned NVIDIA H200"),
    ]


def test_rules_without_a_version_are_only_activity_on_the_board_in_force():
    unversioned = [
        events_pb2.RulesApproved(rules_commit="x", benchmark_version=v, rules_json=rules_json(v)) for v in (0, -1)
    ]
    events = log(rules(1), *((payload, {"actor": "alice"}) for payload in unversioned))
    state = projection.fold(events)
    board = state.boards[1]
    assert list(state.boards) == [1] and state.in_force == 1 and board.card.rules_commit == "rules1"
    assert board.last_active_ns == events[-1].occurred_at.ToNanoseconds() and "alice" in board.actors


def test_issues_comments_and_joining_keep_the_header_counts():
    """A person asking to join and being accepted, issues and comments: activity on the board in force, but a person
    is no agent and none of it starts a route; an agent commenting is an agent at work."""
    person = events_pb2.PRINCIPAL_KIND_PERSON
    agent = events_pb2.PRINCIPAL_KIND_AGENT
    events = [
        envelope(1, rules(1)),
        envelope(2, events_pb2.PrincipalRegistered(name="erin", kind=person, owner="erin", role=1), actor="curator"),
        envelope(3, events_pb2.PrincipalRegistered(name="erin/bot", kind=agent, owner="erin"), actor="erin"),
        envelope(4, events_pb2.RouteStarted(route="fast", owner="erin", started_by="erin/bot"), actor="erin/bot"),
        envelope(5, events_pb2.JoinRequested(request_id=1, name="erin", note="hi"), actor="erin"),
        envelope(6, events_pb2.JoinDecided(request_id=1, name="erin", accepted=True, decided_by="curator")),
        envelope(7, events_pb2.RoleChanged(name="erin", role=2, previous_role=1, cause="join accepted")),
        envelope(8, events_pb2.IssueOpened(number=1, title="t", author="erin", author_owner="erin"), actor="erin"),
        envelope(
            9, events_pb2.CommentAdded(comment_id=1, issue_number=1, body="b", author="erin/bot"), actor="erin/bot"
        ),
        envelope(10, events_pb2.IssueClosed(number=1, closed_by="curator")),
        envelope(11, events_pb2.CommentAdded(comment_id=2, pull_number=3, body="b", author="mallory"), actor="mallory"),
    ]
    state = projection.fold(events)
    head = standing.header(state, state.boards[1])
    assert (head.agents_in_all, head.agents_at_work, head.routes) == (1, 1, 1)
    assert state.agents == {"erin/bot"}
    assert codec.state_to_json(projection.fold(events)) == codec.state_to_json(state)


def test_an_incomplete_check_is_listed_beside_without_a_score_and_never_ranks():
    """A check that left a problem not judged (the judge's failure) is never ranked, even where it says it passed."""
    incomplete = check("half", 1, passed=True, score=3.0, check_id="c9")
    incomplete.incomplete = True
    incomplete.subtasks.add(id="matmul", submitted=True, not_judged="CUDA error: out of memory in the judge")
    _, view = board_of(log(rules(1), (incomplete, {"verifier_version": 1})))
    assert list(view.ranked) == []
    [entry] = view.listed_beside
    assert (entry.source, entry.reason) == (
        "incomplete check",
        "1 problem not judged: matmul: CUDA error: out of memory in the judge",
    )


def noisy(payload, low: float, high: float):
    payload.score_low, payload.score_high = low, high
    return payload


def test_routes_whose_intervals_overlap_are_tied_not_ordered_by_noise():
    """a [3.00, 3.20] and b [2.95, 3.05] overlap: one place, "=1"; c [2.50, 2.60] is beyond their noise: place 3;
    d [2.40, 2.58] overlaps c and e's point 2.45 lies in d's interval: "=3" for all three; f (no interval, 1.0)
    alone: 6."""
    _, view = board_of(
        log(
            rules(2, verifier_versions=[2]),
            (noisy(check("a", 2, passed=True, score=3.1, check_id="a"), 3.0, 3.2), {"verifier_version": 2}),
            (noisy(check("b", 2, passed=True, score=3.0, check_id="b"), 2.95, 3.05), {"verifier_version": 2}),
            noisy(report("c", 2, score=2.55, by_maintainer=True, reporter="curator"), 2.5, 2.6),
            (noisy(check("d", 2, passed=True, score=2.5, check_id="d"), 2.4, 2.58), {"verifier_version": 2}),
            (check("e", 2, passed=True, score=2.45, check_id="e"), {"verifier_version": 2}),
            (check("f", 2, passed=True, score=1.0, check_id="f"), {"verifier_version": 2}),
        )
    )
    assert [(e.route, e.rank, e.tied) for e in view.ranked] == [
        ("a", 1, True),
        ("b", 1, True),
        ("c", 3, True),
        ("d", 3, True),
        ("e", 3, True),
        ("f", 6, False),
    ]
    assert (view.ranked[0].score_low, view.ranked[0].score_high) == (3.0, 3.2)
    assert (view.ranked[4].score_low, view.ranked[4].score_high) == (0.0, 0.0)


def test_an_interval_that_does_not_hold_its_score_is_read_as_none():
    _, view = board_of(
        log(
            rules(2),
            noisy(check("a", 2, passed=True, score=3.0), 3.1, 3.3),
            noisy(check("b", 2, passed=True, score=2.0), 1.0, float("nan")),
        )
    )
    assert [(e.route, e.score_low, e.score_high, e.rank, e.tied) for e in view.ranked] == [
        ("a", 0.0, 0.0, 1, False),
        ("b", 0.0, 0.0, 2, False),
    ]


def test_a_raised_version_marks_the_earlier_board_and_keeps_it_as_it_was():
    """Board 1's results stay as they were once version 2 is approved; the view says it is earlier and which board
    is current; new checks (requested under version 2's rules) land on board 2."""
    before = log(
        rules(1, verifier_versions=[1]),
        (check("fast", 1, passed=True, score=2.0, check_id="c1"), {"verifier_version": 1}),
        report("tiled", 1, score=3.0, by_maintainer=True, reporter="curator"),
    )
    state = projection.fold(before)
    board_1 = views.board_view(state, state.boards[1])
    assert (board_1.earlier, board_1.current_version) == (False, 1)
    raised = [
        *before,
        envelope(4, rules(2, verifier_versions=[2])),
        envelope(5, check("fast", 2, passed=True, score=2.5, check_id="c2"), verifier_version=2),
    ]
    state = projection.fold(raised)
    earlier, current = (views.board_view(state, state.boards[v]) for v in (1, 2))
    assert (earlier.earlier, earlier.current_version, current.earlier, current.current_version) == (True, 2, False, 2)
    assert list(earlier.ranked) == list(board_1.ranked)
    assert [(e.route, e.score, e.verifier_version) for e in current.ranked] == [("fast", 2.5, 2)]


def test_a_job_results_check_keeps_its_job_on_the_board_and_in_the_routes_history():
    job_check = check("fast", 1, passed=True, score=2.0, check_id="j1")
    job_check.kind, job_check.job_id = events_pb2.COMMIT_KIND_JOB, "42"
    events = [envelope(1, rules(1)), envelope(2, job_check, actor="system:verifier", verifier_version=1)]
    state = projection.fold(events)
    [ranked] = views.board_view(state, state.boards[1]).ranked
    assert (ranked.route, ranked.job_id) == ("fast", "42")
    [part] = views.route_view(state, "fast", 1, {e.global_position: e for e in events}).boards
    assert [(r.kind, r.job_id) for r in part.history] == [("check", "42")]


def test_each_problem_is_led_by_its_best_verified_speedup_across_routes_and_a_disqualified_check_leads_none():
    def judged(route, position, check_id, speedups, *, passed=True, verified=None):
        payload = check(route, 1, passed=passed, score=1.0, check_id=check_id, verified=verified)
        for problem, speedup in speedups.items():
            payload.subtasks.add(id=problem, submitted=speedup is not None, passed=passed, speedup=speedup or 1.0)
        return envelope(position, payload, actor="system:verifier", verifier_version=1)

    events = [
        envelope(1, rules(1)),
        judged("fast", 2, "a", {"matmul": 3.0, "log_softmax": 1.2, "kl_div": None}),
        judged("tiled", 3, "b", {"matmul": 3.0, "log_softmax": 2.5}),  # ties fast's matmul later: fast keeps it
        judged("cheat", 4, "c", {"log_softmax": 9.0}, passed=False),  # a failed check leads nothing
        judged("cpu", 5, "d", {"log_softmax": 8.0}, verified=False),  # nor does an unverified pass
        judged("hack", 6, "e", {"matmul": 50.0}),
        envelope(7, events_pb2.CheckDisqualified(check_id="e", route="hack", benchmark_version=1, disqualified=True)),
        envelope(8, report("tiled", 1, score=99.0, by_maintainer=True, reporter="curator")),  # reports: no problems
    ]
    state = projection.fold(events)
    speedups = {e.global_position: standing.check_speedups(e.check_completed) for e in events[1:6]}
    leaders = {p.problem: p for p in views.problems_view(state, state.boards[1], speedups).problems}
    assert (leaders["matmul"].route, leaders["matmul"].speedup, leaders["matmul"].check_id) == ("fast", 3.0, "a")
    assert (leaders["log_softmax"].route, leaders["log_softmax"].speedup) == ("tiled", 2.5)
    assert leaders["kl_div"].route == "" and leaders["kl_div"].speedup == 0  # submitted by nobody: eager
    assert list(leaders) == list(state.boards[1].card.kernels)  # the rules' twelve, in their order
