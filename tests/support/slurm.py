"""The Slurm tests' shared rule: where SLURM_CONF is not set they are skipped as a missing service (tests/missing.py),
except in CI, where they must run; ``slurm_conf`` is the fixture that insists on it."""

import os

import pytest

from tests.missing import missing_service

NO_SLURM = "no SLURM_CONF: `make up` writes it to .state/stack.env, which `make test` reads"


def skip_without_slurm(items) -> None:
    """For a conftest's pytest_collection_modifyitems: its items marked slurm skipped where no cluster is named."""
    if os.environ.get("SLURM_CONF") or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason=missing_service("Slurm", NO_SLURM))
    for item in items:
        if "slurm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF")
    assert conf, "SLURM_CONF must be set: in CI the Slurm tests must run (deploy/local/slurm/up.sh prints it)"
    return conf
