"""Shared fixtures: the real Slurm cluster (deploy/local/slurm/up.sh) is required in CI, optional on a laptop."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SLURM_CONF") or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="no SLURM_CONF: run deploy/local/slurm/up.sh and export what it prints")
    for item in items:
        if "slurm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF")
    assert conf, "SLURM_CONF must be set: in CI the Slurm tests must run (deploy/local/slurm/up.sh prints it)"
    return conf
