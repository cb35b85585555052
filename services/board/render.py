"""The board as text, the way the benchmark's page reads: header, the judging card, the ranked table, listed beside.

Every result is worded by contracts/results.py, as on the web board; the tables come from services/common/text.py.
"""

from kernelboard.v1 import board_pb2

from contracts import results
from services.common.text import table


def card_lines(card: board_pb2.BenchmarkCard) -> list[str]:
    lines = ["How results are judged"]
    if card.rules_error:
        lines.append(f"  rules       {card.rules_error}")
    fields = [
        ("task", card.task),
        ("metric", card.metric),
        ("baseline", card.baseline),
        ("kernels", ", ".join(card.kernels)),
        ("score", card.score_rule),
        (
            "verifier",
            "version " + ", ".join(map(str, card.verifier_versions)) if card.verifier_versions else "any version",
        ),
        ("guardrails", ", ".join(f"{g.name} {results.plain_value(g.value)}" for g in card.guardrails)),
        ("status", card.status + (f" ({card.status_reason})" if card.status_reason else "")),
    ]
    if card.rules_commit:
        fields.append(("rules", f"{card.rules_commit[:12]}, approved {results.when(card.approved_at)}"))
    lines.extend(f"  {name:<11} {value}" for name, value in fields if value)
    return lines


def render_board(view: board_pb2.BoardView) -> str:
    head = view.header
    title = view.card.name or "Board"
    status = view.status + (f": {view.status_reason}" if view.status_reason else "")
    earlier = (
        f"  an earlier board, kept read-only: new checks land on the current board, version {view.current_version}"
    )
    lines = [
        f"{title}, benchmark version {view.version} [{status}]",
        *([earlier] if view.earlier else []),
        f"  agents at work {head.agents_at_work} of {head.agents_in_all} in all · routes {head.routes}"
        f" · last active {results.when(head.last_active)} · started {results.when(head.started)}",
        "",
        *card_lines(view.card),
        "",
        "Ranked",
    ]
    if view.ranked:
        rows = [
            [
                results.place(e),
                e.route,
                e.owner,
                results.entry_verdict(e).score,
                results.entry_verdict(e).label,
                e.sha[:10],
                e.runner,
                "; ".join(x for x in ("adopted" if e.adopted else "", results.entry_reason(e)) if x),
            ]
            for e in view.ranked
        ]
        lines += table(["#", "route", "owner", "score", "result", "sha", "runner", "note"], rows, numeric={0, 3})
    else:
        lines.append("  no ranked scores yet")
    lines += ["", "Listed beside (unranked)"]
    if view.listed_beside:
        rows = [
            [
                e.route,
                e.owner,
                results.entry_verdict(e).score,
                results.entry_verdict(e).label,
                e.sha[:10],
                results.entry_reason(e),
            ]
            for e in view.listed_beside
        ]
        lines += table(["route", "owner", "score", "result", "sha", "reason"], rows, numeric={2})
    else:
        lines.append("  nothing listed beside")
    lines.append(f"\n(as of log position {view.log_position})")
    return "\n".join(lines)


def render_problems(view: board_pb2.BoardProblems) -> str:
    """Each problem's own leaderboard: its best verified speed-up across the routes, and who holds it."""
    title = view.name or "Board"
    lines = [f"{title}, benchmark version {view.version}: the best verified speed-up on each problem", ""]
    rows = [results.leader_row(p) for p in view.problems]
    lines += table(results.LEADER_HEADINGS, rows, numeric={1}) if rows else ["  no problems on this board"]
    lines.append(f"\n(as of log position {view.log_position})")
    return "\n".join(lines)


def render_route(route: board_pb2.BoardRoute, web_url: str = "") -> str:
    """A route's entries and history on each board; ``web_url``: the web board, for each check's page."""
    started = f", started {results.when(route.started)} by {route.started_by}" if route.started else ""
    lines = [f"route {route.route} (owner {route.owner or 'unknown'}{started})"]
    for part in route.boards:
        lines += ["", f"board {part.version}: {results.route_summary(part)}" + (" · adopted" if part.adopted else "")]
        lines.extend(f"  {results.entry_line(e)}" for e in part.entries)
        rows = []
        for r in part.history:
            verdict = results.record_verdict(r)
            rows.append(
                [
                    str(r.global_position),
                    results.when(r.occurred_at),
                    r.kind,
                    r.sha[:10],
                    verdict.score,
                    verdict.label,
                    r.check_id,
                    results.record_note(r),
                ]
            )
        lines += table(["position", "when", "what", "sha", "score", "result", "check", "note"], rows, numeric={0})
        if web_url and any(r.check_id for r in part.history):
            lines.append(f"  a check's page: {web_url}{results.check_path(route.route, 'CHECK')}")
    return "\n".join(lines)
