"""tests/e2e: one private stack per module (tests/e2e/stack.py), torn down however the module ends."""

import pytest

from tests.e2e.stack import Stack, slurm_conf


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    conf = slurm_conf()
    assert conf, "SLURM_CONF must name the local cluster (deploy/local/slurm/up.sh prints it; make up records it)"
    stack = Stack(tmp_path_factory.mktemp("stack"), conf)
    try:
        await stack.setup()
        yield stack
    finally:
        await stack.teardown()
