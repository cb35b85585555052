"""Adapter: the Slurm CLI (sbatch, scontrol, scancel, sacct, squeue) through subprocesses, every call bounded."""

import asyncio
import os

from services.scheduler import domain


class SlurmError(Exception):
    """A Slurm command failed; `refused` is true when Slurm turned the request down (the caller's fault)."""

    def __init__(self, message: str, *, refused: bool = False):
        super().__init__(message)
        self.refused = refused


# What jobs see of the scheduler's environment: enough to run, none of its secrets (tokens, database URLs).
_JOB_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL")


# sbatch says "submission failed" both for a request it turns down and when the controller is unreachable.
_UNREACHABLE = ("Unable to contact", "connect failure", "Socket timed out", "Connection refused", "Zero Bytes")
_REFUSED = ("submission failed", "Invalid", "denied")


def is_refusal(message: str) -> bool:
    """Whether Slurm turned the request down (the caller's fault), as opposed to not answering."""
    return not any(marker in message for marker in _UNREACHABLE) and any(marker in message for marker in _REFUSED)


class Slurm:
    def __init__(self, slurm_conf: str | None, *, timeout_s: float = 20.0):
        self.env = {key: os.environ[key] for key in _JOB_ENV_KEEP if key in os.environ}
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
            raise SlurmError(f"{args[0]}: {message}", refused=is_refusal(message))
        return stdout.decode(errors="replace")

    async def submit(self, script: str, work_dir: str, *, job_name: str, hold: bool) -> str:
        """sbatch the script from its work_dir; a held job is put on admin hold before it could ever start."""
        args = ["sbatch", "--parsable", f"--chdir={work_dir}", f"--job-name={job_name}", "--export=ALL"]
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

    async def accounting(self, job_ids: list[str]) -> dict[str, domain.SacctRecord]:
        """One sacct call for every job followed."""
        text = await self._run("sacct", "-X", "-P", "-n", "-j", ",".join(job_ids), f"--format={domain.SACCT_FORMAT}")
        return domain.parse_sacct(text)

    async def queue(self) -> dict[str, domain.QueueRecord]:
        """Every job squeue knows (a small cluster; squeue -j fails outright on an id it has forgotten)."""
        return domain.parse_squeue(await self._run("squeue", "-h", "-o", domain.SQUEUE_FORMAT))
