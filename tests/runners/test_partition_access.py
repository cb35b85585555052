"""The runners' partition belongs to the maintainers: Slurm itself refuses anyone else's job there (AllowAccounts
kb-runners with associations enforced), whatever account the job names; the verifier's account gets in."""

from pathlib import Path

import pytest

from contracts import runners
from contracts.rules import load_file
from services.common.slurm import Slurm, SlurmError
from tests.common.waiting import eventually

pytestmark = pytest.mark.slurm

PARTITION = load_file(Path(__file__).resolve().parents[2] / "scienceslack.json").check("verify").partition


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "who.sh"
    path.write_text('#!/bin/bash\necho "$SLURMD_NODENAME"\n')
    tmp_path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    "user, account",
    [("kb-job", None), ("kb-job", runners.RUNNERS_ACCOUNT), (None, None), (None, runners.JOBS_ACCOUNT)],
)
async def test_an_outsiders_job_is_refused_by_sbatch(slurm_conf, script, tmp_path, user, account):
    options = [f"--partition={PARTITION}", *([f"--account={account}"] if account else [])]
    with pytest.raises(SlurmError) as refused:
        await Slurm(slurm_conf).submit(str(script), str(tmp_path), job_name="kb-test", hold=False, user=user,
                                       options=options)  # fmt: skip
    assert refused.value.refused and "Invalid account or account/partition combination" in str(refused.value)


async def test_the_runners_account_lands_on_a_runner_node(slurm_conf, script, tmp_path):
    slurm = Slurm(slurm_conf)
    options = [f"--partition={PARTITION}", f"--account={runners.RUNNERS_ACCOUNT}", "--exclusive", "--mem=0"]
    job_id = await slurm.submit(str(script), str(tmp_path), job_name="kb-test", hold=False, options=options)

    async def finished():
        record = (await slurm.accounting([job_id])).get(job_id)
        return record if record and record.state == "COMPLETED" else None

    record = await eventually(finished, "the job on the runners' partition to complete", 60, interval_s=0.5)
    assert record.node in {node.name for node in await slurm.nodes(PARTITION)}
    assert record.node.startswith("runner")
