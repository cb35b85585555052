"""Properties of the board projection over generated logs: rebuild == live under any delivery, canonical bytes,
ranking order, and that nothing but a counted passing check or a maintainer's report ever ranks."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelboard.v1 import events_pb2

from services.board import codec, projection, standing, views
from services.board.projection import DISQUALIFIED, FAILED_CHECK, REPORTED_BY_MAINTAINER, VERIFIED

from .board_events import DAY_NS, START_NS, check, envelope, report, rules

ROUTES = ["fast", "faster", "tiled", "naive"]
PEOPLE = ["alice", "bob", "curator"]
AGENTS = ["alice/agent-1", "alice/agent-2", "bob/agent-1"]
SCORES = [0.5, 1.0, 1.5, 2.0, 2.0, 3.25, math.nan, math.inf]  # few values, so that ties happen
# A score's interval, as (below, above) the score: none, narrow, wide enough to overlap a neighbour, and hostile ones
# (not holding the score, not finite), which the fold must read as none.
NOISE = [None, (0.05, 0.05), (0.3, 0.2), (0.6, 0.1), (-0.1, 0.2), (0.0, math.nan), (math.inf, 0.1)]


def _step():
    route = st.sampled_from(ROUTES)
    version = st.integers(min_value=0, max_value=3)
    score = st.sampled_from(SCORES)
    noise = st.sampled_from(NOISE)
    return st.one_of(
        st.tuples(st.just("register"), st.sampled_from(PEOPLE + AGENTS + ["system:verifier"]), st.booleans()),
        st.tuples(st.just("start"), route, st.sampled_from(PEOPLE + AGENTS)),
        st.tuples(st.just("push"), route, st.sampled_from(PEOPLE + AGENTS)),
        st.tuples(st.just("rules"), st.integers(0, 1), st.sampled_from([None, [1], [1, 2], [2]])),
        st.tuples(st.just("check"), route, version, st.booleans(), score, st.sampled_from([None, 1, 2]), noise),
        st.tuples(st.just("check"), route, version, st.booleans(), score, st.sampled_from([None, 1, 2]), noise),
        st.tuples(st.just("report"), route, version, st.booleans(), score, noise),
        st.tuples(st.just("status"), version, st.sampled_from(["saturated", "flawed", "active", "bogus"])),
        st.tuples(st.just("adopt"), route, version, st.booleans()),
        # a maintainer disqualifies (or reinstates) one of the checks so far, by its index; or a check not yet seen
        st.tuples(st.just("disqualify"), st.integers(0, 12), st.booleans()),
        st.tuples(st.just("disqualify"), st.integers(0, 12), st.booleans()),
        st.tuples(st.just("wait"), st.integers(0, 20)),
    )


def build_log(steps, holes):
    """Envelopes for the steps, positions increasing (with holes, as a sequence leaves them), time moving on."""
    events, position, now, version = [], 0, START_NS, 0
    checks = []  # (check id, route, benchmark version) of each check so far
    for i, step in enumerate(steps):
        position += 1 + holes[i % len(holes)]
        now += 60 * 1_000_000_000
        kind = step[0]
        if kind == "wait":
            now += step[1] * DAY_NS
            continue
        if kind == "register":
            name, is_agent = step[1], step[2]
            agent = is_agent and "/" in name
            payload = events_pb2.PrincipalRegistered(
                name=name,
                kind=events_pb2.PRINCIPAL_KIND_AGENT if agent else events_pb2.PRINCIPAL_KIND_PERSON,
                owner=name.split("/")[0],
            )
            events.append(envelope(position, payload, actor="system:admin", at_ns=now))
        elif kind == "start":
            route, actor = step[1], step[2]
            payload = events_pb2.RouteStarted(route=route, owner=actor.split("/")[0], started_by=actor)
            events.append(envelope(position, payload, actor=actor, at_ns=now))
        elif kind == "push":
            route, actor = step[1], step[2]
            payload = events_pb2.CommitIngested(
                ref=f"refs/heads/routes/{route}",
                sha=f"s{position}",
                kind=events_pb2.COMMIT_KIND_ROUTE,
                route=route,
                owner=actor.split("/")[0],
            )
            events.append(envelope(position, payload, actor=actor, at_ns=now))
        elif kind == "rules":
            version = max(1, version + step[1])
            events.append(envelope(position, rules(version, verifier_versions=step[2]), at_ns=now))
        elif kind == "check":
            _, route, v, passed, score, verifier, noise = step
            payload = check(
                route,
                v,
                passed=passed,
                score=score,
                reasons=() if passed else ["atol broken"],
                check_id=f"check-{position}",
            )
            with_noise(payload, noise)
            # Per problem: matmul at the check's score, relu at one of few values (ties), kl_div not submitted.
            payload.subtasks.add(id="matmul", submitted=True, passed=passed, speedup=score)
            payload.subtasks.add(id="log_softmax", submitted=True, passed=passed, speedup=[1.5, 2.0][position % 2])
            payload.subtasks.add(id="kl_div", submitted=False, passed=True, speedup=1.0)
            events.append(envelope(position, payload, actor="system:verifier", at_ns=now, verifier_version=verifier))
            checks.append((payload.check_id, route, v))
        elif kind == "report":
            _, route, v, by_maintainer, score, noise = step
            reporter = "curator" if by_maintainer else "alice"
            payload = with_noise(report(route, v, score=score, by_maintainer=by_maintainer, reporter=reporter), noise)
            events.append(envelope(position, payload, actor=reporter, at_ns=now))
        elif kind == "status":
            payload = events_pb2.BenchmarkStatusChanged(benchmark_version=step[1], status=step[2], reason="test")
            events.append(envelope(position, payload, at_ns=now))
        elif kind == "adopt":
            payload = events_pb2.RouteAdopted(route=step[1], benchmark_version=step[2], adopted=step[3])
            events.append(envelope(position, payload, at_ns=now))
        elif kind == "disqualify":
            _, index, disqualified = step
            # Index 0, or past the checks so far: a check folded later (the verdict came first), on route "fast".
            check_id, route, v = checks[index - 1] if 0 < index <= len(checks) else (f"check-{position + 1}", "fast", 0)
            payload = events_pb2.CheckDisqualified(
                check_id=check_id, route=route, benchmark_version=v, reason="cached outputs", disqualified=disqualified
            )
            events.append(envelope(position, payload, actor="curator", at_ns=now))
    return events


def with_noise(payload, noise):
    if noise is not None:
        payload.score_low, payload.score_high = payload.score - noise[0], payload.score + noise[1]
    return payload


def snapshot(state):
    """Everything a reader can see: the state's canonical bytes and every board's view, canonically serialized."""
    boards = {v: views.canonical(views.board_view(state, state.boards[v])) for v in sorted(state.boards)}
    return codec.state_to_json(state), boards


logs = st.builds(
    build_log,
    st.lists(_step(), min_size=1, max_size=80),
    st.lists(st.integers(0, 3), min_size=1, max_size=5),
)


class Store:
    """What the service's store keeps: the globals, a row per board and per route on a board, the touched ones
    written after each delivery."""

    def __init__(self):
        self.globals = codec.globals_to_json(projection.State())
        self.boards: dict[int, bytes] = {}
        self.routes: dict[tuple[int, str], bytes] = {}

    def persist(self, state):
        for version in state.touched_boards:
            self.boards[version] = codec.board_to_json(state.boards[version])
        for version, route in state.touched_routes:
            self.routes[version, route] = codec.route_to_json(state.boards[version].routes[route])
        state.touched_boards.clear()
        state.touched_routes.clear()
        self.globals = codec.globals_to_json(state)

    def load(self):
        routes = [(version, route, data) for (version, route), data in self.routes.items()]
        return codec.state_from_json(self.globals, self.boards.values(), routes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=logs, data=st.data())
def test_live_with_duplicates_and_restarts_equals_rebuild(events, data):
    rebuilt = projection.fold(events)
    assert snapshot(projection.fold(events)) == snapshot(rebuilt), "two rebuilds differ"

    store, live = Store(), projection.State()
    for i, event in enumerate(events):
        projection.apply(live, event)
        if i and data.draw(st.booleans(), label="redeliver"):
            earlier = events[data.draw(st.integers(0, i), label="which")]
            projection.apply(live, earlier)  # a duplicate or a redelivery
        store.persist(live)
        if data.draw(st.integers(0, 9), label="restart") == 0:
            live = store.load()
    assert snapshot(live) == snapshot(rebuilt)
    # a redelivery of anything already folded changes nothing
    for event in events:
        projection.apply(live, event)
    assert snapshot(live) == snapshot(rebuilt)


def noise_of(row) -> tuple[float, float]:
    """A row's interval as an oracle reads the view: none (0/0) is the score alone."""
    if row.score_low == row.score_high == 0:
        return row.score, row.score
    assert math.isfinite(row.score_low) and math.isfinite(row.score_high)
    assert row.score_low <= row.score <= row.score_high, "an interval that does not hold its score was kept"
    return row.score_low, row.score_high


def overlap(a, b) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@settings(max_examples=300, deadline=None)
@given(events=logs)
def test_ranking_is_sorted_ties_by_position_and_only_counted_scores_rank(events):
    state = projection.fold(events)
    by_position = {e.global_position: e for e in events}
    for board in state.boards.values():
        view = views.board_view(state, board)
        rows = list(view.ranked)
        for above, below in zip(rows, rows[1:], strict=False):
            tie_to_earlier = above.score == below.score and above.global_position < below.global_position
            assert above.score > below.score or tie_to_earlier
        # Places, checked against pairwise overlaps (an oracle apart from the projection's bisection): a boundary
        # between two rows is a new place exactly when no overlap crosses it; a place is numbered by its first row
        # and tied when it holds more than one.
        noise = [noise_of(r) for r in rows]
        starts = []
        for k in range(len(rows)):
            crossed = any(overlap(noise[i], noise[j]) for i in range(k) for j in range(k, len(rows)))
            starts.append(starts[-1] if k and crossed else k)
        assert [r.rank for r in rows] == [start + 1 for start in starts]
        for k, row in enumerate(rows):
            assert row.tied == (starts.count(starts[k]) > 1)
        for row in rows:
            assert math.isfinite(row.score)
            placing = by_position[row.global_position]
            assert row.source in (VERIFIED, REPORTED_BY_MAINTAINER)
            if row.source == VERIFIED:
                assert placing.HasField("check_completed") and placing.check_completed.passed, "a failed check ranked"
            else:
                assert placing.HasField("metrics_reported") and placing.metrics_reported.by_maintainer
        for row in view.listed_beside:
            assert row.rank == 0
            if row.source == FAILED_CHECK:
                assert not by_position[row.global_position].check_completed.passed
                assert row.reason
            if row.source == DISQUALIFIED:
                assert by_position[row.global_position].check_completed.passed
                assert (row.reporter, row.reason) == ("curator", "cached outputs")
        disqualified = {r.check_id for r in view.listed_beside if r.source == DISQUALIFIED}
        assert not disqualified & {r.check_id for r in rows}, "a disqualified check ranked"


@settings(max_examples=300, deadline=None)
@given(events=logs)
def test_a_routes_verified_entry_is_its_best_counted_check_earliest_on_ties(events):
    """An oracle written apart from the fold: per board and route, the best accepted passing finite score among the
    checks whose latest verdict (if any) is not a disqualification, whenever that verdict came."""
    accepted: dict[int, tuple[int, ...]] = {}
    in_force = 0
    passes: list[tuple[int, str, str, float, int]] = []  # (board, route, check id, score, position)
    verdicts: dict[tuple[int, str, str], bool] = {}
    for event in events:
        if event.HasField("check_disqualified"):
            d = event.check_disqualified
            if d.benchmark_version or in_force:
                verdicts[d.benchmark_version or in_force, d.route, d.check_id] = d.disqualified
        if event.HasField("rules_approved"):
            v = event.rules_approved.benchmark_version
            in_force = max(in_force, v)
            accepted[v] = projection.read_card(event.rules_approved.rules_json, "", 0)[0].verifier_versions
        if event.HasField("check_completed"):
            c = event.check_completed
            v = c.benchmark_version or in_force
            if not v or not c.passed or not math.isfinite(c.score):
                continue
            versions = accepted.get(v, ())
            if versions and event.verifier_version not in versions:
                continue
            passes.append((v, c.route, c.check_id, c.score, event.global_position))
    best: dict[tuple[int, str], tuple[float, int]] = {}
    for v, route, check_id, score, position in passes:
        if verdicts.get((v, route, check_id)):
            continue
        if (v, route) not in best or score > best[v, route][0]:
            best[v, route] = (score, position)
    state = projection.fold(events)
    found = {
        (v, route): (r.verified.score, r.verified.position)
        for v, board in state.boards.items()
        for route, r in board.routes.items()
        if r.verified is not None
    }
    assert found == best


@settings(max_examples=300, deadline=None)
@given(events=logs)
def test_each_problems_leader_is_its_best_verified_speedup_earliest_on_ties(events):
    """An oracle apart from the fold: per board and problem, the best speed-up among the counted verified checks that
    stand (not disqualified), the earlier check on a tie; a problem not submitted has no leader. The service reads
    each standing check's problems from the log: here, from the events themselves."""
    state = projection.fold(events)
    speedups = {
        e.global_position: standing.check_speedups(e.check_completed) for e in events if e.HasField("check_completed")
    }
    for board in state.boards.values():
        expected: dict[str, tuple[float, int, str]] = {}
        for route, on_board in board.routes.items():
            stands = [p for p in on_board.passes if p.check_id not in on_board.disqualified]
            for placed in stands:
                event = next(e for e in events if e.global_position == placed.position)
                for s in event.check_completed.subtasks:
                    if not (s.submitted and s.passed and math.isfinite(s.speedup) and s.speedup > 0):
                        continue
                    held = expected.get(s.id)
                    if held is None or s.speedup > held[0] or (s.speedup == held[0] and placed.position < held[1]):
                        expected[s.id] = (s.speedup, placed.position, route)
        view = views.problems_view(state, board, speedups)
        found = {p.problem: (p.speedup, p.global_position, p.route) for p in view.problems if p.route}
        assert found == expected
        assert "kl_div" not in found
        if board.card is not None:
            assert [p.problem for p in view.problems] == list(board.card.kernels)
