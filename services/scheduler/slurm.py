"""Adapter: the Slurm CLI (sbatch, scontrol, scancel, sacct, squeue) through subprocesses, every call bounded."""

import asyncio
import grp
import os
import pwd
from collections.abc import Sequence

from services.scheduler import slurm_records


class SlurmError(Exception):
    """A Slurm command failed. `code` is the gRPC status name the caller answers with: UNAVAILABLE when the
    controller could not be reached (or did not answer), else what Slurm's refusal means (see `refusal_code`)."""

    def __init__(self, message: str, *, code: str = "UNAVAILABLE"):
        super().__init__(message)
        self.code = code

    @property
    def refused(self) -> bool:
        return self.code != "UNAVAILABLE"


# What jobs see of the scheduler's environment: enough to run, none of its secrets (tokens, database URLs). The
# batch script drops even these (services/common/sandbox.py job_batch_script).
_JOB_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ")

# Slurm's messages when the controller cannot be reached; the only failures that are worth retrying.
_UNREACHABLE = (
    "Unable to contact",
    "connect failure",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes",
    "Could not establish a configuration source",
    "Slurm backup controller in standby mode",
    "Problem talking to the database",
    "Unable to connect to database",
)
# Words of an answer from the controller turning a request down (sbatch: "Batch job submission failed: <why>").
_ANSWERED = ("submission failed", "Invalid", "invalid", "denied", "not permitted", "not available")
# Slurm's refusals, by what the caller can do: wait for room (RESOURCE_EXHAUSTED), fix the cluster's state
# (FAILED_PRECONDITION); anything else Slurm turns down is the request's own fault (INVALID_ARGUMENT).
_EXHAUSTED = ("QOS", "qos", "job limit", "JobLimit", "MaxSubmit", "Resource temporarily unavailable", "too many")
_PRECONDITION = ("Partition in", "partition in", "Access/permission denied", "Invalid account", "Invalid user id",
                 "not available for use", "DOWN", "DRAIN", "INACTIVE")  # fmt: skip


def refusal_code(message: str) -> str:
    """The gRPC status name for a failed Slurm command's message."""
    if any(marker in message for marker in _UNREACHABLE) or not any(word in message for word in _ANSWERED):
        return "UNAVAILABLE"
    if any(marker in message for marker in _EXHAUSTED):
        return "RESOURCE_EXHAUSTED"
    if any(marker in message for marker in _PRECONDITION):
        return "FAILED_PRECONDITION"
    return "INVALID_ARGUMENT"


def is_refusal(message: str) -> bool:
    """Whether Slurm turned the request down (the caller's fault), as opposed to not answering."""
    return refusal_code(message) != "UNAVAILABLE"


class Slurm:
    def __init__(self, slurm_conf: str | None, *, timeout_s: float = 20.0):
        self.env = {key: os.environ[key] for key in _JOB_ENV_KEEP if key in os.environ}
        self.env["HOME"] = "/"  # sbatch reads nothing from a home; jobs never see the scheduler's
        self.env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.timeout_s = timeout_s

    async def _run(self, *args: str) -> str:
        try:
            process = await asyncio.create_subprocess_exec(
                *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env
            )
        except OSError as err:
            raise SlurmError(f"{args[0]}: cannot run: {err}") from err
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), self.timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise SlurmError(f"{args[0]}: no answer within {self.timeout_s:.0f} s") from None
        if process.returncode != 0:
            message = stderr.decode(errors="replace").strip() or f"exit status {process.returncode}"
            raise SlurmError(f"{args[0]}: {message}", code=refusal_code(message))
        return stdout.decode(errors="replace")

    async def submit(
        self,
        script: str,
        work_dir: str,
        *,
        job_name: str,
        hold: bool,
        user: str | None = None,
        options: Sequence[str] = (),
    ) -> str:
        """sbatch the script from its work_dir; a held job is put on admin hold before it could ever start.

        user: who the job runs as (sbatch --uid/--gid, the user and its own group), for a scheduler that runs as
        root; options: the job's judged options (services.scheduler.directives.plan_job). The options that decide
        identity, placement and environment come last, so that nothing before them can override them."""
        args = ["sbatch", "--parsable", *options, "--no-requeue", f"--chdir={work_dir}", f"--job-name={job_name}"]
        args.append("--export=ALL")  # the adapter's own environment, _JOB_ENV_KEEP
        if user:
            args += [f"--uid={user}", f"--gid={_group_of(user)}"]
        if hold:
            args.append("--hold")
        job_id = (await self._run(*args, script)).strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch: unexpected answer {job_id!r}")
        if hold:
            # --hold gives JobHeldUser, which the submitter could release; scontrol hold makes it JobHeldAdmin.
            try:
                await self._run("scontrol", "hold", job_id)
            except SlurmError:
                await self.cancel(job_id)
                raise
        return job_id

    async def release(self, job_id: str) -> None:
        await self._run("scontrol", "release", job_id)

    async def cancel(self, job_id: str) -> None:
        await self._run("scancel", job_id)

    async def accounting(self, job_ids: list[str]) -> dict[str, slurm_records.SacctRecord]:
        """One sacct call for every job followed."""
        text = await self._run(
            "sacct", "-X", "-P", "-n", "-j", ",".join(job_ids), f"--format={slurm_records.SACCT_FORMAT}"
        )
        return slurm_records.parse_sacct(text)

    async def queue(self) -> dict[str, slurm_records.QueueRecord]:
        """Every job squeue knows (a small cluster; squeue -j fails outright on an id it has forgotten)."""
        return slurm_records.parse_squeue(await self._run("squeue", "-h", "-o", slurm_records.SQUEUE_FORMAT))


def _group_of(user: str) -> str:
    """The user's primary group by name (sbatch --gid)."""
    try:
        return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    except KeyError:
        raise SlurmError(f"the job user {user!r} does not exist on this host", code="FAILED_PRECONDITION") from None
