"""The maintainers' runners: the Slurm identifiers the verifier (which submits checks), the scheduler (whose jobs
must never land there) and the cluster's configuration (deploy/local/slurm/render.py, up.sh) share.

Standard library only: render.py imports it before any virtualenv exists.

- Which partitions are the runners' is said by the rules (``checks[].partition``, contracts.rules
  ``Rules.runner_partitions``); here is who may use them: the Slurm account ``RUNNERS_ACCOUNT`` alone
  (``AllowAccounts`` on each runners' partition, associations enforced), which only the verifier's user holds. Jobs
  run under ``JOBS_ACCOUNT``, every other user's default.
- A check's Slurm job is named after the check and the attempt (``check_job_name``), so that a verifier that lost
  the job id (it died between sbatch and recording it) finds that attempt's job again by name (sacct --name), and
  never takes an earlier attempt's for it.
"""

RUNNERS_ACCOUNT = "kb-runners"
JOBS_ACCOUNT = "kb-jobs"
CHECK_JOB_PREFIX = "kb-check-"


def check_job_name(check_id: str, attempt: int) -> str:
    """The Slurm job name of a check's attempt (1: its first run)."""
    return f"{CHECK_JOB_PREFIX}{check_id}.{attempt}"
