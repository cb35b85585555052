"""Loaded first by every pytest run under tests/.

hypothesis is imported here, at the session's start, and not left to hypothesis' own pytest plugin, which imports it
at the session's end (pytest_terminal_summary) in a run that has no property-based test (make e2e). That late import
goes through pytest's assertion rewriter and hypothesis' own decorators, both of which call ast.parse, while the
garbage the session left (asyncio tasks, transports) is being collected; a finalizer that formats a traceback parses
source too (Python 3.11 places its carets with ast), and CPython before 3.11.8 (Debian 12 ships 3.11.2) shares one
AST recursion counter between the two parses: "SystemError: AST constructor recursion depth mismatch", exit 1 after
every test passed (CPython gh-106905, fixed in 3.11.8).
"""

import hypothesis  # noqa: F401

from tests.missing import MISSING_SERVICE, skip_reason

# The Slurm tests' fixture (slurm_conf), for every folder that has them: tests/scheduler, tests/runners.
pytest_plugins = ["tests.support.slurm"]


def pytest_terminal_summary(terminalreporter):
    """Every test skipped because a service is missing (tests/missing.py), by name and grouped by reason: "tests
    pass" then says what it did not test (a shell without the stack's environment skips the Slurm tests)."""
    skipped: dict[str, list[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = skip_reason(report)
        if reason is not None and reason.startswith(MISSING_SERVICE):
            skipped.setdefault(reason, []).append(report.nodeid)
    if not skipped:
        return
    count = sum(len(ids) for ids in skipped.values())
    terminalreporter.write_sep("=", f"{count} skipped for a missing service: not tested by this run", yellow=True)
    for reason, ids in skipped.items():
        terminalreporter.write_line(f"{reason}: {len(ids)}")
        for nodeid in ids:
            terminalreporter.write_line(f"  {nodeid}")
