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
    speedup: float | None  # None: not a finite positive number, no bar
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


def _tick_label(value: float) -> str:
    return f"{value:g}×"


def _finite_positive(value: float) -> float | None:
    return value if math.isfinite(value) and value > 0 else None


def _floor_speedup(subtask: events_pb2.Subtask) -> float | None:
    if subtask.floor_fraction > 0 and subtask.speedup > 0:
        return _finite_positive(subtask.speedup / subtask.floor_fraction)
    return None


def _shown_speedup(subtask: events_pb2.Subtask) -> float | None:
    """A problem not submitted counts as eager (1); a speed-up that is not a finite positive number has no bar."""
    return _finite_positive(subtask.speedup) if subtask.submitted else 1.0


def _ticks(low: float, high: float) -> list[float]:
    """1-2-5 steps over a few decades; powers of ten only (and fewer of them) over a wide range."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    decades = last - first
    steps = STEPS if decades <= 4 else (1,)
    stride = max(1, math.ceil(decades / 8))
    values = [step * 10.0**power for power in range(first, last + 1, stride) for step in steps]
    return [value for value in values if low <= value <= high]


def speedup_chart(subtasks) -> Chart | None:
    """Horizontal bars on a log axis, one per problem, with the floor marked; None when there is nothing to draw."""
    rows = list(subtasks)
    values = [v for s in rows for v in (_shown_speedup(s), _floor_speedup(s)) if v is not None]
    if not values:
        return None
    low = min(0.5, min(values) / 1.25)
    high = max(2.0, max(values) * 1.25)
    log_low, log_span = math.log10(low), math.log10(high) - math.log10(low)

    def x_of(value: float) -> float:
        clamped = min(max(value, low), high)
        return round((math.log10(clamped) - log_low) / log_span * PLOT_WIDTH, 1)

    bars = []
    for index, subtask in enumerate(rows):
        speedup, floor = _shown_speedup(subtask), _floor_speedup(subtask)
        state = "baseline" if not subtask.submitted else ("passed" if subtask.passed else "failed")
        bars.append(
            Bar(
                problem=subtask.id,
                y=TOP + index * ROW_HEIGHT,
                width=x_of(speedup) if speedup is not None else 0.0,
                speedup=speedup,
                floor_x=x_of(floor) if floor is not None else None,
                floor_speedup=floor,
                state=state,
                flagged=subtask.flagged,
            )
        )
    plot_bottom = TOP + len(rows) * ROW_HEIGHT
    return Chart(
        width=WIDTH,
        height=plot_bottom + BOTTOM,
        plot_left=LABEL_WIDTH,
        plot_right=LABEL_WIDTH + PLOT_WIDTH,
        top=TOP,
        bottom=plot_bottom,
        bars=tuple(bars),
        ticks=tuple(Tick(x_of(value), _tick_label(value)) for value in _ticks(low, high)),
        eager_x=x_of(1.0),
    )
