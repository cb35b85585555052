"""Adapter: the Slurm CLI (sbatch, scontrol, scancel, sacct, squeue, sinfo) through subprocesses, every call bounded;
the one adapter of the scheduler (jobs) and the verifier (checks on the runners' partition), with the parsing of what
Slurm answers."""

from __future__ import annotations

import asyncio
import grp
import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass


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

    async def accounting(self, job_ids: list[str]) -> dict[str, SacctRecord]:
        """One sacct call for every job followed."""
        text = await self._run("sacct", "-X", "-P", "-n", "-j", ",".join(job_ids), f"--format={SACCT_FORMAT}")
        return parse_sacct(text)

    async def jobs_named(self, job_names: Sequence[str], *, since: str = "now-7days") -> dict[str, SacctRecord]:
        """The jobs of these names submitted since ``since`` (any state, pending included), by job id: how a
        client that lost its job ids (a restart between sbatch and its own record) finds its jobs again."""
        if not job_names:
            return {}
        text = await self._run(
            "sacct", "-X", "-P", "-n", f"--name={','.join(job_names)}", f"--starttime={since}",
            f"--format={SACCT_FORMAT}",
        )  # fmt: skip
        return parse_sacct(text)

    async def queue(self) -> dict[str, QueueRecord]:
        """Every job squeue knows (a small cluster; squeue -j fails outright on an id it has forgotten)."""
        return parse_squeue(await self._run("squeue", "-h", "-o", SQUEUE_FORMAT))

    async def nodes(self, partition: str) -> list[NodeRecord]:
        """The partition's nodes and their states (sinfo -N)."""
        return parse_sinfo(await self._run("sinfo", "-h", "-N", "-p", partition, "-o", SINFO_FORMAT))


def _group_of(user: str) -> str:
    """The user's primary group by name (sbatch --gid)."""
    try:
        return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    except KeyError:
        raise SlurmError(f"the job user {user!r} does not exist on this host", code="FAILED_PRECONDITION") from None


# ---------------------------------------------------------------------------------------------------------------------
# What Slurm answers, parsed: pure functions.


@dataclass(frozen=True)
class SacctRecord:
    job_id: str
    state: str  # the bare state, "CANCELLED by 0" -> "CANCELLED"
    exit_code: int
    signal: int
    elapsed_s: float
    cpu_seconds: float
    node: str = ""  # NodeList: where it ran ("None assigned" while pending -> "")
    gpus: int = 0  # GPUs of the allocation (AllocTRES gres/gpu)
    name: str = ""


@dataclass(frozen=True)
class QueueRecord:
    job_id: str
    state: str
    reason: str
    name: str = ""


@dataclass(frozen=True)
class NodeRecord:
    name: str
    state: str  # sinfo's long state without its flags: idle, mixed, allocated, down, drained, ...
    flagged: bool  # a flag on the state ("*" not responding, "~" powered off, "#" powering up, "!" ...)
    gpus: int = 0  # its GRES gpu count (sinfo %G: "gpu:4", "gpu:h200:8(S:0-1)")

    @property
    def up(self) -> bool:
        """Can take a job now or later without an operator: responding, neither down, drained nor failing."""
        return not self.flagged and self.state in ("idle", "mixed", "allocated", "completing", "planned")


SACCT_FORMAT = "JobID,State,ExitCode,ElapsedRaw,CPUTimeRAW,NodeList,AllocTRES,JobName"
SQUEUE_FORMAT = "%i|%T|%r|%j"
SINFO_FORMAT = "%N|%T|%G"


def parse_sacct(text: str) -> dict[str, SacctRecord]:
    """`sacct -X -P -n --format=SACCT_FORMAT` lines, by job id.

    CPUTimeRAW (allocated CPUs x elapsed seconds) is a job's cost: what it held, whether or not it used it. The job
    name is the last field and split once from the left, so a name holding "|" stays whole.
    """
    records = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 7)
        if len(fields) != 8:
            raise ValueError(f"sacct line with {len(fields)} fields, expected 8: {line!r}")
        job_id, state, exit_code, elapsed, cpu, node, tres, name = fields
        code, _, signal = exit_code.partition(":")
        records[job_id] = SacctRecord(
            job_id=job_id,
            state=state.split()[0].rstrip("+") if state.strip() else "UNKNOWN",
            exit_code=int(code or 0),
            signal=int(signal or 0),
            elapsed_s=float(elapsed or 0),
            cpu_seconds=float(cpu or 0),
            node="" if node.startswith("None") else node,
            gpus=_gpus_of(tres),
            name=name,
        )
    return records


def _gpus_of(tres: str) -> int:
    """GPUs in an AllocTRES list ("cpu=2,gres/gpu=1,mem=1G"): gres/gpu's count (typed entries, gres/gpu:h200=1,
    repeat it); 0 when none."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu" and value.isdigit():
            return int(value)
    return 0


def parse_squeue(text: str) -> dict[str, QueueRecord]:
    records = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 3)
        if len(fields) != 4:
            raise ValueError(f"squeue line with {len(fields)} fields, expected 4: {line!r}")
        job_id, state, reason, name = fields
        records[job_id] = QueueRecord(job_id=job_id, state=state, reason="" if reason == "None" else reason, name=name)
    return records


def parse_sinfo(text: str) -> list[NodeRecord]:
    """`sinfo -h -N -p P -o "%N|%T|%G"` lines (a node in two partitions is listed once per partition: kept once)."""
    nodes: dict[str, NodeRecord] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 3:
            raise ValueError(f"sinfo line with {len(fields)} fields, expected 3: {line!r}")
        name, state, gres = fields
        bare = state.strip().rstrip("*~#!%$@^-+")
        nodes[name] = NodeRecord(name=name, state=bare, flagged=bare != state.strip(), gpus=_gres_gpus(gres))
    return list(nodes.values())


def _gres_gpus(gres: str) -> int:
    """GPUs in sinfo's GRES list ("gpu:4", "gpu:h200:8(S:0-1),shard:2", "(null)"): 0 when none."""
    for item in gres.split(","):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            return int(parts[-1])
    return 0
