"""What sacct and squeue print (in the formats the scheduler asks for), parsed into plain records."""

from dataclasses import dataclass


@dataclass(frozen=True)
class SacctRecord:
    job_id: str
    state: str  # the bare state, "CANCELLED by 0" -> "CANCELLED"
    exit_code: int
    signal: int
    elapsed_s: float
    cpu_seconds: float


@dataclass(frozen=True)
class QueueRecord:
    job_id: str
    state: str
    reason: str
    name: str = ""


SACCT_FORMAT = "JobID,State,ExitCode,ElapsedRaw,CPUTimeRAW"
SQUEUE_FORMAT = "%i|%T|%r|%j"


def parse_sacct(text: str) -> dict[str, SacctRecord]:
    """`sacct -X -P -n --format=JobID,State,ExitCode,ElapsedRaw,CPUTimeRAW` lines, by job id.

    CPUTimeRAW (allocated CPUs x elapsed seconds) is the job's cost: what it held, whether or not it used it.
    """
    records = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 5:
            raise ValueError(f"sacct line with {len(fields)} fields, expected 5: {line!r}")
        job_id, state, exit_code, elapsed, cpu = fields
        code, _, signal = exit_code.partition(":")
        records[job_id] = SacctRecord(
            job_id=job_id,
            state=state.split()[0].rstrip("+") if state.strip() else "UNKNOWN",
            exit_code=int(code or 0),
            signal=int(signal or 0),
            elapsed_s=float(elapsed or 0),
            cpu_seconds=float(cpu or 0),
        )
    return records


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
