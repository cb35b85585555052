"""The Slurm adapter against the real cluster: submit, admin hold, release, cancel, one batched poll."""

import shutil
import tempfile
from pathlib import Path

import pytest

from services.common.slurm import Slurm, SlurmError
from tests.common.waiting import eventually

pytestmark = pytest.mark.slurm


async def wait_until(predicate, timeout_s: float, what: str):
    return await eventually(predicate, what, timeout_s, interval_s=0.5)  # each poll runs Slurm's commands


async def test_submit_poll_hold_release_cancel(slurm_conf, tmp_path):
    slurm = Slurm(slurm_conf)
    (tmp_path / "ok.sh").write_text("#!/bin/bash\necho done > out.txt\nexit 3\n")
    (tmp_path / "long.sh").write_text("#!/bin/bash\nsleep 120\n")
    failing = await slurm.submit(str(tmp_path / "ok.sh"), str(tmp_path), job_name="kb-test", hold=False)
    held = await slurm.submit(str(tmp_path / "long.sh"), str(tmp_path), job_name="kb-test", hold=True)

    queue = await slurm.queue()
    assert (queue[held].state, queue[held].reason) == ("PENDING", "JobHeldAdmin")

    async def failed_in_accounting():
        records = await slurm.accounting([failing, held])
        return records.get(failing) if records.get(failing) and records[failing].state == "FAILED" else None

    record = await wait_until(failed_in_accounting, 30, "the exit-3 job FAILED in sacct")
    assert record.exit_code == 3
    assert (tmp_path / "out.txt").read_text() == "done\n"

    await slurm.release(held)

    async def running():
        return (await slurm.queue()).get(held, None) and (await slurm.queue())[held].state == "RUNNING"

    await wait_until(running, 30, "the released job runs")
    await slurm.cancel(held)

    async def cancelled():
        record = (await slurm.accounting([held])).get(held)
        return record if record and record.state == "CANCELLED" else None

    assert (await wait_until(cancelled, 30, "the cancelled job CANCELLED in sacct")).state == "CANCELLED"


async def test_slurm_refuses_what_no_node_can_hold(slurm_conf, tmp_path):
    (tmp_path / "big.sh").write_text("#!/bin/bash\n#SBATCH --cpus-per-task=64\ntrue\n")
    with pytest.raises(SlurmError) as err:
        await Slurm(slurm_conf).submit(str(tmp_path / "big.sh"), str(tmp_path), job_name="kb-test", hold=False)
    assert err.value.refused and "processors" in str(err.value)


async def test_an_unreachable_cluster_is_an_error_not_an_answer(tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n")
    slurm = Slurm(str(tmp_path / "slurm.conf"), timeout_s=15)
    with pytest.raises(SlurmError):
        await slurm.accounting(["1"])


async def test_a_job_submitted_for_the_job_user_runs_as_it(slurm_conf, tmp_path_factory):
    folder = Path(tempfile.mkdtemp(prefix="kb-adapter-", dir="/var/tmp"))
    try:
        folder.chmod(0o777)
        (folder / "who.sh").write_text("#!/bin/bash\nid -un > who.txt\n")
        slurm = Slurm(slurm_conf)
        job_id = await slurm.submit(str(folder / "who.sh"), str(folder), job_name="kb-test", hold=False, user="kb-job")

        async def ended():
            record = (await slurm.accounting([job_id])).get(job_id)
            return record if record and record.state == "COMPLETED" else None

        await wait_until(ended, 30, "the job COMPLETED")
        assert (folder / "who.txt").read_text() == "kb-job\n" and (folder / "who.txt").stat().st_uid != 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
