"""The route page's chart, speed-up per problem against the bandwidth floor, as plain geometry for an SVG template.

Drawn on the server (no chart library, no JavaScript): the page reads fully without scripts, every label passes the
template's escaping, and the numbers are the check's own. The floor's speed-up is reference time / floor time, which a
subtask carries as speedup / floor_fraction (floor_fraction = floor time / candidate time).
"""

import math
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

WIDTH = 960
LABEL_WIDTH = 170
RIGHT_PAD = 70
ROW_HEIGHT = 22
TOP = 28
BOTTOM = 30
PLOT_WIDTH = WIDTH - LABEL_WIDTH - RIGHT_PAD
STEPS = (1, 2, 5)  # ticks at 1-2-5 times powers of ten


@dataclass(frozen=True)
class Bar:
    problem: str
    y: float  # top of the row
    width: float  # from the plot's left edge to the speed-up
    speedup: float
    floor_x: float | None  # where the floor's speed-up falls; None when the check recorded no floor fraction
    floor_speedup: float | None
    state: str  # "passed" | "failed" | "baseline" (not submitted: counts as eager, speed-up 1)
    flagged: bool


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    top: int
    bottom: float
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    eager_x: float  # speed-up 1: PyTorch eager


def _floor_speedup(subtask: events_pb2.Subtask) -> float | None:
    if subtask.floor_fraction > 0 and subtask.speedup > 0:
        return subtask.speedup / subtask.floor_fraction
    return None


def _tick_label(value: float) -> str:
    return f"{value:g}×"


def speedup_chart(subtasks) -> Chart | None:
    """Horizontal bars on a log axis, one per problem, with the floor marked; None when there is nothing to draw."""
    rows = [s for s in subtasks if (math.isfinite(s.speedup) and s.speedup > 0) or not s.submitted]
    if not rows:
        return None
    values = [s.speedup if s.submitted else 1.0 for s in rows]
    values += [f for f in map(_floor_speedup, rows) if f is not None and math.isfinite(f)]
    low = min(0.5, min(values) / 1.25)
    high = max(2.0, max(values) * 1.25)
    log_low, log_span = math.log10(low), math.log10(high) - math.log10(low)

    def x_of(value: float) -> float:
        clamped = min(max(value, low), high)
        return round((math.log10(clamped) - log_low) / log_span * PLOT_WIDTH, 1)

    bars = []
    for index, subtask in enumerate(rows):
        speedup = subtask.speedup if subtask.submitted else 1.0
        floor = _floor_speedup(subtask)
        floor = floor if floor is not None and math.isfinite(floor) else None
        state = "baseline" if not subtask.submitted else ("passed" if subtask.passed else "failed")
        bars.append(
            Bar(
                problem=subtask.id,
                y=TOP + index * ROW_HEIGHT,
                width=x_of(speedup),
                speedup=speedup,
                floor_x=x_of(floor) if floor is not None else None,
                floor_speedup=floor,
                state=state,
                flagged=subtask.flagged,
            )
        )
    ticks = []
    for power in range(math.floor(log_low) - 1, math.ceil(math.log10(high)) + 1):
        for step in STEPS:
            value = step * 10.0**power
            if low <= value <= high:
                ticks.append(Tick(x_of(value), _tick_label(value)))
    plot_bottom = TOP + len(rows) * ROW_HEIGHT
    return Chart(
        width=WIDTH,
        height=plot_bottom + BOTTOM,
        plot_left=LABEL_WIDTH,
        plot_right=LABEL_WIDTH + PLOT_WIDTH,
        top=TOP,
        bottom=plot_bottom,
        bars=tuple(bars),
        ticks=tuple(ticks),
        eager_x=x_of(1.0),
    )
