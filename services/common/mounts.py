"""Which directories a sandbox covers, binds back and covers again: the one mount plan both layers follow, the check's
sandbox (sandbox_setup.sh, given the plan as its arguments) and the candidate's (services/verifier/harness/confine.py,
bubblewrap). Stdlib only: the verifier's harness imports it on the GPU machine.

A sandbox covers some directories with empty tmpfs: those everything private lives under (/tmp, /run, ...) and the
hidden ones (KB_HOME, credentials, the judge's files). What it must still run (the project, the Python) is bound back
read-only on top where a cover took it away; a bound-back path brings back everything inside it, so every covered
directory inside a bound-back path is covered again after it. A visible path that is a covered directory, or lies
inside a hidden one, cannot be shown without showing what must stay hidden: the layout cannot be confined.
"""

import os
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class MountPlan:
    covers: tuple[str, ...]  # covered by empty tmpfs first (none inside another)
    bind_backs: tuple[str, ...]  # then bound back read-only on top, in this order (none inside another)
    recovers: tuple[str, ...]  # then covered again: covered directories that lie inside a bound-back path
    unconfinable: tuple[str, ...]  # why this layout cannot be confined, each naming its path (empty: it can)


def _inside(path: PurePosixPath, outer: PurePosixPath) -> bool:
    return path != outer and path.is_relative_to(outer)


def _outermost(paths: list[PurePosixPath]) -> list[PurePosixPath]:
    """``paths`` without duplicates and without those inside another of them, in their order."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(_inside(p, q) for q in unique)]


def mount_plan(base: list[str], hidden: list[str], visible: list[str]) -> MountPlan:
    """The plan for covering ``base`` (where everything private lives) and ``hidden`` (what must never be seen) while
    keeping ``visible`` readable. Absolute paths as the sandbox sees them: resolved, existing (``existing_dirs``)."""
    base_paths = [PurePosixPath(p) for p in base]
    hidden_paths = [PurePosixPath(p) for p in hidden]
    every_cover = list(dict.fromkeys([*base_paths, *hidden_paths]))
    covers = _outermost(every_cover)
    visible_paths = list(dict.fromkeys(PurePosixPath(p) for p in visible))
    unconfinable = [f"{v} is kept visible to run and is covered too" for v in visible_paths if v in every_cover]
    unconfinable += [
        f"{v} is kept visible to run but lies inside {h}, which must stay hidden"
        for v in visible_paths
        for h in hidden_paths
        if _inside(v, h)
    ]
    under_a_cover = [v for v in visible_paths if any(_inside(v, c) for c in covers)]
    bind_backs = _outermost(under_a_cover)
    recovers = _outermost([c for c in every_cover if any(_inside(c, b) for b in bind_backs)])
    return MountPlan(
        covers=tuple(map(str, covers)),
        bind_backs=tuple(map(str, bind_backs)),
        recovers=tuple(map(str, recovers)),
        unconfinable=tuple(unconfinable),
    )


def existing(paths, kind=os.path.exists) -> list[str]:
    """Those of ``paths`` that exist here (``kind``: os.path.isdir for directories only), symbolic links resolved: a
    hidden directory reached through a link is covered, and compared with the visible paths, where it really is."""
    return list(dict.fromkeys(real for real in map(os.path.realpath, paths) if kind(real)))


class Unconfinable(LookupError):
    """A layout no sandbox can confine: a visible path that would show what must stay hidden. Refused before anything
    runs, as a missing job user is (a LookupError too: the check could not run)."""

    def __init__(self, reasons: tuple[str, ...]):
        super().__init__(
            "this layout cannot be confined: "
            + "; ".join(reasons)
            + " (a folder that must stay hidden, KB_HOME, the metrics file's or the kb sign-in's, holds code that runs:"
            " move one of them)"
        )
        self.reasons = reasons
