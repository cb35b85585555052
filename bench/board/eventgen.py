"""A generated log for the board's benchmarks: a busy benchmark's mix of events, seeded so every run folds the same.

The mix (per 100 events, roughly): 40 checks completed (a fifth failing), 30 commits ingested, 10 metrics reported
(a tenth by a maintainer), 10 job events, 5 routes started, 5 other events; 2,000 routes of 200 agents, the rules'
version raised every 250,000 events. Each check carries its twelve problems (one not submitted), as the verifier
records them: the per-problem board reads them (since 2026-12-07; earlier rows of results.md folded checks without).
"""

import random

from kernelboard.v1 import events_pb2

START_NS = 1_780_000_000 * 1_000_000_000
PROBLEMS = ["matmul", "log_softmax", "rms_norm", "layer_norm", "sum_dim", "new_gelu", "cumsum_reverse",
            "cross_entropy", "huber_loss", "kl_div", "triplet_margin_loss", "hinge_loss"]  # fmt: skip


def rules_json(version: int) -> str:
    return (
        '{"benchmark": {"name": "KernelBench operators", "task": "t", "metric": "speed-up", "baseline": "eager",'
        f' "kernels": ["matmul"], "score_rule": "geomean", "version": {version}, "verifier_version": 1,'
        ' "status": "active"}, "guardrails": {"atol": 0.01, "rtol": 0.01}, "maintainers": ["curator"]}'
    )


def generate(count: int, *, seed: int = 7, routes: int = 2000, agents: int = 200, raise_every: int = 250_000):
    rng = random.Random(seed)
    agent_names = [f"owner{i % 50}/agent-{i}" for i in range(agents)]
    route_names = [f"route-{i}" for i in range(routes)]
    owner_of = {r: agent_names[i % agents] for i, r in enumerate(route_names)}
    events = []
    version = 0
    ns = START_NS
    for position in range(1, count + 1):
        ns += rng.randrange(1, 3_000_000_000)  # about 1.5 s apart: a million events span ~17 days
        event = events_pb2.Event(
            event_id=f"{seed:08x}-0000-4000-8000-{position:012x}", stream_version=1, global_position=position
        )
        event.occurred_at.FromNanoseconds(ns)
        roll = rng.random()
        route = route_names[rng.randrange(routes)]
        agent = owner_of[route]
        owner = agent.split("/")[0]
        if (position - 1) % raise_every == 0:
            version += 1
            event.actor = "curator"
            event.rules_approved.CopyFrom(
                events_pb2.RulesApproved(
                    rules_commit=f"{version:040x}", benchmark_version=version, rules_json=rules_json(version)
                )
            )
        elif roll < 0.40:
            passed = rng.random() < 0.8
            event.actor = "system:verifier"
            event.verifier_version = 1
            c = event.check_completed
            c.check_id = f"check-{position}"
            c.check_name = "verify"
            c.ref = f"refs/heads/routes/{route}"
            c.sha = f"{rng.getrandbits(160):040x}"
            c.route = route
            c.kind = events_pb2.COMMIT_KIND_ROUTE
            c.passed = passed
            c.verified = passed  # judged on the pinned H200 at full shapes
            if not passed:
                c.reasons.append("matmul: max abs error 0.3 > atol 0.01")
            c.score = round(rng.uniform(0.5, 4.0), 3)
            c.cost = 120.0
            c.benchmark_version = version
            c.runner = "NVIDIA H200"
            for index, problem in enumerate(PROBLEMS):
                c.subtasks.add(
                    id=problem,
                    submitted=index != len(PROBLEMS) - 1,
                    passed=passed,
                    speedup=round(rng.uniform(0.5, 4.0), 3),
                    reference_ms=2.0 + index,
                    candidate_ms=1.0 + index,
                    max_abs_error=1e-6,
                    error_ratio=1.0,
                    floor_fraction=0.5,
                )
        elif roll < 0.70:
            event.actor = agent
            c = event.commit_ingested
            c.ref = f"refs/heads/routes/{route}"
            c.sha = f"{rng.getrandbits(160):040x}"
            c.kind = events_pb2.COMMIT_KIND_ROUTE
            c.route = route
            c.owner = owner
            c.changed_paths.append(f"routes/{route}/matmul.py")
        elif roll < 0.80:
            by_maintainer = rng.random() < 0.1
            event.actor = "curator" if by_maintainer else agent
            m = event.metrics_reported
            m.route, m.sha, m.score, m.cost = (
                route,
                f"{rng.getrandbits(160):040x}",
                round(rng.uniform(0.5, 4.0), 3),
                1.0,
            )
            m.by_maintainer, m.reporter, m.benchmark_version = by_maintainer, event.actor, version
        elif roll < 0.90:
            event.actor = "system:scheduler"
            event.job_state_changed.job_id = str(position)
            event.job_state_changed.state = "RUNNING"
        elif roll < 0.95:
            event.actor = agent
            event.route_started.CopyFrom(events_pb2.RouteStarted(route=route, owner=owner, started_by=agent))
        elif roll < 0.97:
            event.actor = "system:admin"
            event.principal_registered.CopyFrom(
                events_pb2.PrincipalRegistered(name=agent, kind=events_pb2.PRINCIPAL_KIND_AGENT, owner=owner)
            )
        elif roll < 0.99:
            event.actor = "curator"
            event.route_adopted.CopyFrom(events_pb2.RouteAdopted(route=route, benchmark_version=version, adopted=True))
        else:
            event.actor = agent
            event.pull_request_opened.CopyFrom(events_pb2.PullRequestOpened(number=position, route=route))
        event.type = type(getattr(event, event.WhichOneof("payload"))).__name__
        events.append(event)
    return events
