"""The board as text, the way the benchmark's page reads: header, the judging card, the ranked table, listed beside."""

import json

from kernelboard.v1 import board_pb2

from services.board.projection import FAILED_CHECK, UNVERIFIED_CHECK


def _table(headings: list[str], rows: list[list[str]], numeric: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headings)]

    def line(cells):
        parts = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  " + "  ".join(parts).rstrip()

    return [line(headings), "  " + "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def score_text(value: float) -> str:
    """A score (or a cost) as the board shows it, `kb board` and the web board alike."""
    return f"{value:.3f}"


def when(rfc3339: str) -> str:
    """2026-12-02T14:03:09.5Z -> 2026-12-02 14:03 UTC."""
    return f"{rfc3339[:10]} {rfc3339[11:16]} UTC" if rfc3339 else "never"


def plain_value(json_value: str) -> str:
    """A guardrail's JSON value as text: strings without their quotes."""
    return json.loads(json_value) if json_value.startswith('"') else json_value


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
        ("guardrails", ", ".join(f"{g.name} {plain_value(g.value)}" for g in card.guardrails)),
        ("status", card.status + (f" ({card.status_reason})" if card.status_reason else "")),
    ]
    if card.rules_commit:
        fields.append(("rules", f"{card.rules_commit[:12]}, approved {when(card.approved_at)}"))
    lines.extend(f"  {name:<11} {value}" for name, value in fields if value)
    return lines


# Listed beside without a score: a failed check has none, and an unverified check's numbers (a CPU profile's host
# timer at smoke shapes) say nothing about speed; they show their outcome instead. `kb board` and the web board both
# word an entry listed beside through beside_score and beside_reason.
UNSCORED = (FAILED_CHECK, UNVERIFIED_CHECK)


def beside_score(e: board_pb2.BoardEntry) -> str:
    return "" if e.source in UNSCORED else score_text(e.score)


def beside_failed(e: board_pb2.BoardEntry) -> bool:
    return e.source == FAILED_CHECK


def beside_reason(e: board_pb2.BoardEntry) -> str:
    if e.source == UNVERIFIED_CHECK:
        return f"passed on {e.runner or 'an unpinned runner'}, not verified: {e.reason}"
    return e.reason or (f"reported by {e.reporter}" if e.reporter else "")


def render_board(view: board_pb2.BoardView) -> str:
    head = view.header
    title = view.card.name or "Board"
    status = view.status + (f": {view.status_reason}" if view.status_reason else "")
    lines = [
        f"{title}, benchmark version {view.version} [{status}]",
        f"  agents at work {head.agents_at_work} of {head.agents_in_all} in all · routes {head.routes}"
        f" · last active {when(head.last_active)} · started {when(head.started)}",
        "",
        *card_lines(view.card),
        "",
        "Ranked",
    ]
    if view.ranked:
        rows = [
            [
                str(e.rank),
                e.route,
                e.owner,
                score_text(e.score),
                e.source,
                e.sha[:10],
                e.runner,
                "; ".join(x for x in ("adopted" if e.adopted else "", e.reason) if x),
            ]
            for e in view.ranked
        ]
        lines += _table(["#", "route", "owner", "score", "source", "sha", "runner", ""], rows, numeric={0, 3})
    else:
        lines.append("  no ranked scores yet")
    lines += ["", "Listed beside (unranked)"]
    if view.listed_beside:
        rows = [
            [
                e.route,
                e.owner,
                beside_score(e),
                e.source,
                e.sha[:10],
                beside_reason(e),
            ]
            for e in view.listed_beside
        ]
        lines += _table(["route", "owner", "score", "source", "sha", "reason"], rows, numeric={2})
    else:
        lines.append("  nothing listed beside")
    lines.append(f"\n(as of log position {view.log_position})")
    return "\n".join(lines)


def render_route(route: board_pb2.BoardRoute) -> str:
    started = f", started {when(route.started)} by {route.started_by}" if route.started else ""
    lines = [f"route {route.route} (owner {route.owner or 'unknown'}{started})"]
    for part in route.boards:
        lines += [
            "",
            f"board {part.version}: {part.checks} checks, {part.checks_passed} passed, {part.reports} reports"
            + (" · adopted" if part.adopted else ""),
        ]
        for e in part.entries:
            place = f"#{e.rank}" if e.rank else "beside"
            lines.append(f"  {place:<7} {score_text(e.score)} {e.source}" + (f": {e.reason}" if e.reason else ""))
        rows = [
            [
                str(r.global_position),
                when(r.occurred_at),
                r.kind,
                r.sha[:10],
                score_text(r.score) if r.kind in ("check", "report") else "",
                ("passed" if r.passed else "failed") if r.kind == "check" else "",
                "counted" if r.counted else "not counted",
                r.note or "; ".join(r.reasons),
            ]
            for r in part.history
        ]
        lines += _table(["position", "when", "what", "sha", "score", "result", "", "note"], rows, numeric={0, 4})
    return "\n".join(lines)
