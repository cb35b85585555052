"""The route page's history chart: each check and report on a board in log order, its score where it has one, and
the route's best counted score so far as a step line; plain geometry for an SVG template (as chart.py, drawn on the
server). What a point says on hover is contracts/results.py's wording of its record, as the history table says it."""

import math
from dataclasses import dataclass

from contracts import results

WIDTH = 960
LEFT = 60
RIGHT_PAD = 20
TOP = 16
PLOT_HEIGHT = 180
BOTTOM = 40
FAILED_BAND = 14  # below the axis: checks without a score (failed, incomplete), marked where they happened


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    state: str  # "counted" | "not-counted" | "failed" (no score to show)
    title: str  # the record in results' words
    position: int


@dataclass(frozen=True)
class YTick:
    y: float
    label: str


@dataclass(frozen=True)
class HistoryChart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    top: int
    bottom: int
    points: tuple[Point, ...]
    best_path: str  # SVG path of the best counted score so far ("" while none counts)
    ticks: tuple[YTick, ...]
    first: str  # when the first and the last record happened
    last: str


def _scored(record, verdict) -> float | None:
    if verdict.score in ("", results.NO_SCORE) or not math.isfinite(record.score):
        return None
    return record.score


def _step(high: float) -> float:
    """A 1-2-5 step giving about four ticks up to ``high``."""
    raw = high / 4
    power = 10 ** math.floor(math.log10(raw))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= raw)


def history_chart(history) -> HistoryChart | None:
    """The chart of a board part's history (BoardRouteRecord, oldest first); None with no check or report."""
    records = [r for r in history if r.kind in ("check", "report")]
    if not records:
        return None
    verdicts = [results.record_verdict(r) for r in records]
    scores = [_scored(r, v) for r, v in zip(records, verdicts, strict=True)]
    high = max([s for s in scores if s is not None] or [1.0]) * 1.1
    step = _step(high)
    high = math.ceil(high / step) * step
    plot_width = WIDTH - LEFT - RIGHT_PAD
    bottom = TOP + PLOT_HEIGHT

    def y_of(score: float) -> float:
        return round(bottom - min(max(score, 0.0), high) / high * PLOT_HEIGHT, 1)

    spacing = plot_width / len(records)
    points, steps, best = [], [], None  # steps: (x, y) where the best counted score so far rose
    for index, (record, verdict, score) in enumerate(zip(records, verdicts, scores, strict=True)):
        x = round(LEFT + spacing * (index + 0.5), 1)
        title = f"{results.when(record.occurred_at)}: {record.kind}, {results.in_words(verdict)}"
        if score is None:
            points.append(Point(x, bottom + FAILED_BAND, "failed", title, record.global_position))
            continue
        state = "counted" if verdict.counts else "not-counted"
        points.append(Point(x, y_of(score), state, title, record.global_position))
        if verdict.counts and (best is None or score > best):
            best = score
            steps.append((x, y_of(score)))
    path = ""
    if steps:
        (x0, y0), rest = steps[0], steps[1:]
        path = " ".join([f"M {x0} {y0}", *(f"H {x} V {y}" for x, y in rest), f"H {LEFT + plot_width}"])
    ticks = tuple(YTick(y_of(i * step), f"{i * step:g}") for i in range(int(round(high / step)) + 1))
    return HistoryChart(
        width=WIDTH,
        height=bottom + BOTTOM,
        plot_left=LEFT,
        plot_right=LEFT + plot_width,
        top=TOP,
        bottom=bottom,
        points=tuple(points),
        best_path=path,
        ticks=ticks,
        first=results.when(records[0].occurred_at),
        last=results.when(records[-1].occurred_at),
    )
