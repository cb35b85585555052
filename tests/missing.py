"""The one wording of a skip for something the stack provides that this machine lacks (Slurm, NATS, the job user and
bubblewrap, ...): tests/conftest.py names every test skipped so at the end of the run, so that a run whose tests
pass says what it did not test."""

MISSING_SERVICE = "missing service"


def missing_service(service: str, how: str) -> str:
    """A skip reason: ``service`` is not here, and ``how`` says what provides it."""
    return f"{MISSING_SERVICE}: {service} ({how})"


def skip_reason(report) -> str | None:
    """The reason of a skipped test's (or module's) report, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return None
