"""``kb board`` prints the board the way the benchmark's page reads."""

from kernelboard.v1 import events_pb2

from services.board import projection, render, views

from .board_events import check, envelope, report, rules


def logged():
    return [
        envelope(1, rules(1, verifier_versions=[1])),
        envelope(2, events_pb2.RouteStarted(route="fast", owner="alice", started_by="alice/a1"), actor="alice/a1"),
        envelope(3, check("fast", 1, passed=True, score=2.345), verifier_version=1, actor="system:verifier"),
        envelope(4, report("tiled", 1, score=3.1, by_maintainer=True, reporter="curator")),
        envelope(5, report("naive", 1, score=9.0, by_maintainer=False, reporter="bob"), actor="bob"),
        envelope(6, check("naive", 1, passed=False, score=0, reasons=["matmul: atol broken"]), verifier_version=1),
        envelope(7, events_pb2.RouteAdopted(route="fast", benchmark_version=1, adopted=True, note="merged")),
    ]


def folded():
    return projection.fold(logged())


def test_the_board_reads_header_card_ranked_then_listed_beside():
    state = folded()
    text = render.render_board(views.board_view(state, state.boards[1]))
    lines = text.splitlines()
    assert lines[0] == "KernelBench operators, benchmark version 1 [active]"
    assert "agents at work 1 of 1 in all · routes 3" in lines[1]
    order = [text.index(s) for s in ("How results are judged", "Ranked", "Listed beside (unranked)")]
    assert order == sorted(order)
    assert "  verifier    version 1" in lines
    assert "timing.statistic median" in text
    ranked = text[text.index("Ranked") : text.index("Listed beside")].splitlines()
    assert ranked[3].split() == ["1", "tiled", "3.100", "reported", "by", "maintainer", "sha-tiled"] + [
        "reported",
        "by",
        "curator",
    ]
    assert ranked[4].split() == ["2", "fast", "alice", "2.345", "passed,", "verified", "sha-fast"] + [
        "NVIDIA",
        "H200",
        "adopted",
    ]
    beside = text[text.index("Listed beside") :]
    assert "reported by bob" in beside and "9.000 (not counted)" in beside
    failed = next(line for line in beside.splitlines() if "naive" in line and "failed" in line)
    assert failed.split()[:4] == ["naive", "—", "failed", "sha-naive"] and "matmul: atol broken" in failed


def test_a_route_shows_its_place_and_history():
    events = {e.global_position: e for e in logged()}
    text = render.render_route(views.route_view(folded(), "fast", events=events), "http://board.example")
    assert text.startswith("route fast (owner alice, started")
    assert "board 1: 1 check, 1 counted (passed, verified), 0 reports · adopted" in text
    assert "\n  ranked #2: passed, verified, score 2.345\n" in text
    history = text.splitlines()[-3:-1]
    assert history[0].split()[4:9] == ["check", "sha-fast", "2.345", "passed,", "verified"]
    assert history[1].split()[-2:] == ["adopted", "merged"]
    assert text.splitlines()[-1].startswith("  a check's page: http")


def test_a_first_run_ranks_the_maintainers_h200_report_and_shows_the_cpu_check_plainly():
    """What `make up` ends on: the bundled route's recorded H200 run reported by a maintainer (with where, when and
    under which rules it was measured) ranks; this machine's CPU check is listed as passed, without a score."""
    measured = report("triton", 1, score=3.771, by_maintainer=True, reporter="curator")
    measured.runner, measured.measured_at, measured.rules_commit = "NVIDIA H200", "2026-12-02T18:29:00Z", "b93c155f" * 5
    cpu = check("triton", 1, passed=True, score=0.0, verified=False)
    state = projection.fold(
        [envelope(1, rules(1, verifier_versions=[1])), envelope(2, measured), envelope(3, cpu, verifier_version=1)]
    )
    text = render.render_board(views.board_view(state, state.boards[1]))
    ranked = text[text.index("Ranked") : text.index("Listed beside")]
    row = ranked.splitlines()[3]
    assert row.split()[:5] == ["1", "triton", "3.771", "reported", "by"]
    assert "NVIDIA H200" in row and "measured 2026-12-02T18:29:00Z on NVIDIA H200 under rules b93c155fb93c" in row
    beside = text[text.index("Listed beside") :].splitlines()[3]
    assert "passed, unverified (CPU profile)" in beside and "not verified: runner cpu is not the pinned" in beside
    assert "0.000" not in text


def test_a_score_shows_its_interval_and_a_tied_place_its_equals_sign():
    """kb board words a score with its interval and a shared place as "=1", from the projection's places; the route
    view says the same."""
    first = check("fast", 2, passed=True, score=3.1, check_id="c1")
    first.score_low, first.score_high = 3.0, 3.2
    second = report("tiled", 2, score=3.05, by_maintainer=True, reporter="curator")
    second.score_low, second.score_high = 2.9, 3.15
    events = [
        envelope(1, rules(2, verifier_versions=[2])),
        envelope(2, first, verifier_version=2),
        envelope(3, second),
        envelope(4, check("naive", 2, passed=True, score=1.5, check_id="c2"), verifier_version=2),
    ]
    state = projection.fold(events)
    text = render.render_board(views.board_view(state, state.boards[2]))
    ranked = text[text.index("Ranked") : text.index("Listed beside")].splitlines()
    assert ranked[3].split()[:4] == ["=1", "fast", "3.100", "(3.000–3.200)"]  # no owner: no RouteStarted
    assert ranked[4].split()[:4] == ["=1", "tiled", "3.050", "(2.900–3.150)"]
    assert ranked[5].split()[:3] == ["3", "naive", "1.500"]
    route = render.render_route(views.route_view(state, "tiled", events={e.global_position: e for e in events}))
    assert "ranked #=1: reported by maintainer, score 3.050 (2.900–3.150)" in route
    assert "3.050 (2.900–3.150)" in route.splitlines()[-1]  # the report in the route's history, with its interval
