"""The maintainers' runners: the Slurm identifiers the verifier (which submits checks), the scheduler (whose jobs
must never land there) and the cluster's configuration (deploy/local/slurm/render.py, up.sh) share.

Standard library only: render.py imports it before any virtualenv exists.

- Which partitions are the runners' is said by the rules (``checks[].partition``, contracts.rules
  ``Rules.runner_partitions``); here is who may use them: the Slurm account ``RUNNERS_ACCOUNT`` alone
  (``AllowAccounts`` on each runners' partition, associations enforced), which only the verifier's user holds. Jobs
  run under ``JOBS_ACCOUNT``, every other user's default.
- A check's Slurm job is named after the check (``check_job_name``), so that a verifier that lost the job id (it died
  between sbatch and recording it) finds its job again by name (sacct --name).
"""

import re

RUNNERS_ACCOUNT = "kb-runners"
JOBS_ACCOUNT = "kb-jobs"
CHECK_JOB_PREFIX = "kb-check-"
_CHECK_JOB = re.compile(r"^kb-check-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def check_job_name(check_id: str) -> str:
    """The Slurm job name of a check's runs (every attempt of one check shares it)."""
    return CHECK_JOB_PREFIX + check_id


def check_of_job_name(name: str) -> str | None:
    """The check id a job name carries; None for a job that is not a check's."""
    match = _CHECK_JOB.match(name)
    return match[1] if match else None
