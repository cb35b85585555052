"""The runners' partition on the real local Slurm (deploy/local/slurm/up.sh: the nodes runner1..3, AllowAccounts
kb-runners). Skipped where SLURM_CONF is unset, except in CI, where these tests must run."""

import os

import pytest

from tests.missing import missing_service


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SLURM_CONF") or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason=missing_service("Slurm", "no SLURM_CONF: `make up` writes it to .state/stack.env"))
    for item in items:
        if "slurm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF")
    assert conf, "SLURM_CONF must be set: in CI the Slurm tests must run (deploy/local/slurm/up.sh prints it)"
    return conf
