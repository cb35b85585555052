"""The scheduler service (gRPC :50052, metrics :9102): wiring only; the work is in jobs.JobService."""

import asyncio
import os
import pwd
import sys
from datetime import timedelta
from pathlib import Path

from kernelboard.v1 import events_pb2, scheduler_pb2, scheduler_pb2_grpc

from contracts import names
from services.common import auth, sandbox
from services.common.config import ServerConfig, Settings
from services.common.eventlog import EventLog
from services.common.grpcserver import serve
from services.common.logs import configure_logging, get_logger
from services.common.slurm import Slurm
from services.scheduler.api import SchedulerServicer
from services.scheduler.ingest_client import IngestPusher
from services.scheduler.jobdir import HostedRepo, closed_folder, default_jobs_dir
from services.scheduler.jobs import JobService, SchedulerConfig

log = get_logger(component="scheduler")
REPO_ROOT = Path(__file__).resolve().parents[2]


async def scheduler_token(event_log: EventLog, settings: Settings) -> str:
    """The token of system:scheduler: KB_SCHEDULER_TOKEN_FILE, else $KB_HOME/scheduler.token (written by ingest's
    seed); without either, a fresh token for the identity, registered on first start."""
    path = Path(os.environ.get("KB_SCHEDULER_TOKEN_FILE", settings.home / "scheduler.token"))
    if path.exists():
        return path.read_text().strip()
    async with event_log.pool.acquire() as conn:
        if await auth.get_principal(conn, names.SCHEDULER) is None:
            try:
                await auth.register_principal(
                    conn,
                    names.SCHEDULER,
                    events_pb2.PRINCIPAL_KIND_SERVICE,
                    names.SCHEDULER,
                    events_pb2.ROLE_SIGNED_IN,
                    log=event_log,
                    actor=names.SCHEDULER,
                )
            except auth.PrincipalExists:
                pass  # registered meanwhile by ingest's seed or another scheduler
        return await auth.issue_token(conn, names.SCHEDULER, ttl=timedelta(days=30))


def config_from_env(settings: Settings) -> SchedulerConfig:
    rules = os.environ.get("KB_RULES", str(REPO_ROOT / "scienceslack.json"))
    jobs_root = os.environ.get("KB_JOBS_DIR")
    # As root the scheduler submits with sbatch --uid=<job user>; otherwise (a container) jobs run as its own uid on
    # the Slurm nodes, which must be the job user there (deploy/k8s/README.md), and KB_JOB_USER is empty.
    job_user = os.environ.get("KB_JOB_USER", "kb-job" if os.getuid() == 0 else "")
    # Jobs run with the Python the checks use (its torch and triton): the verifier's, unless KB_JOB_PYTHON says.
    python = os.environ.get("KB_JOB_PYTHON") or os.environ.get("KB_VERIFIER_PYTHON", sys.executable)
    try:
        job_python = sandbox.job_python(python)
    except ValueError as err:
        raise SystemExit(f"scheduler: {err} (KB_JOB_PYTHON, else KB_VERIFIER_PYTHON, names it)") from None
    return SchedulerConfig(
        home=settings.home,
        rules_path=Path(rules) if Path(rules).exists() else None,
        max_result_file_bytes=int(os.environ.get("KB_JOB_RESULT_MAX_FILE_BYTES", 10 * 1024 * 1024)),
        max_result_bytes=int(os.environ.get("KB_JOB_RESULT_MAX_BYTES", 64 * 1000 * 1000)),
        poll_base_s=float(os.environ.get("KB_SCHEDULER_POLL_S", "1")),
        job_user=job_user,
        jobs_root=Path(jobs_root) if jobs_root else default_jobs_dir(settings.home),
        hidden=slurm_state_dirs(settings.slurm_conf),
        python=job_python,
    )


def slurm_state_dirs(slurm_conf: str | None) -> tuple[str, ...]:
    """Slurm's spool and controller state (every job's script lies there), read from slurm.conf: hidden from jobs.
    A path with a per-node part (``spool/%n``) is hidden from its folder above that part: every node's spool."""
    if not slurm_conf or not Path(slurm_conf).is_file():
        return ()
    dirs = []
    for line in Path(slurm_conf).read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() in {"slurmdspooldir", "statesavelocation"} and value.strip():
            path = value.split("#", 1)[0].strip()
            if "%" in path:
                path = str(Path(path.split("%", 1)[0] + "x").parent)
            dirs.append(path)
    return tuple(dirs)


def check_job_user(config: SchedulerConfig) -> None:
    """Refuse to start when jobs could not run as an unprivileged user of their own, or could not reach their
    directories: better no scheduler than jobs run as root."""
    if os.getuid() != 0:
        if config.job_user and config.job_user != pwd.getpwuid(os.getuid()).pw_name:
            raise SystemExit(
                f"scheduler: KB_JOB_USER={config.job_user} needs root (sbatch --uid); not root, jobs run as this "
                "process's uid on the Slurm nodes: set KB_JOB_USER= (empty) and make that uid the job user there"
            )
        log.info("jobs run as this process's uid on the Slurm nodes", uid=os.getuid())
        return
    if not config.job_user:
        raise SystemExit("scheduler: running as root, KB_JOB_USER must name the job user (default kb-job)")
    try:
        entry = pwd.getpwnam(config.job_user)
    except KeyError:
        raise SystemExit(
            f"scheduler: the job user {config.job_user!r} (KB_JOB_USER) does not exist; `make up` creates it "
            "(deploy/local/slurm/up.sh)"
        ) from None
    if entry.pw_uid == 0 or entry.pw_uid == os.getuid():
        raise SystemExit(f"scheduler: the job user {config.job_user!r} must be neither root nor the scheduler's user")
    config.jobs_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
    config.jobs_dir.chmod(0o711)
    if blocked := closed_folder(config.jobs_dir):
        raise SystemExit(
            f"scheduler: the job user cannot reach {config.jobs_dir} ({blocked} is mode "
            f"{blocked.stat().st_mode & 0o777:o}); set KB_JOBS_DIR to a folder whose parents others may pass"
        )


async def main() -> None:
    configure_logging("scheduler")
    settings = Settings.from_env()
    server_config = ServerConfig.from_env("scheduler")
    event_log = await EventLog.connect(settings.database_url, **server_config.pool_options())
    config = config_from_env(settings)
    check_job_user(config)
    jobs = JobService(
        event_log,
        Slurm(settings.slurm_conf),
        HostedRepo(config.repo_dir),
        IngestPusher(settings.grpc_address("ingest"), await scheduler_token(event_log, settings)),
        config,
    )
    await jobs.load()
    await jobs.cancel_orphans()
    following: list[asyncio.Task] = []

    def add_servicers(server):
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(SchedulerServicer(jobs), server)
        return [scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name]

    async def stop_following():
        jobs.stop()
        await asyncio.gather(*following, return_exceptions=True)
        await event_log.close()

    await serve(
        "scheduler",
        add_servicers,
        port=server_config.grpc_port,
        metrics_port=server_config.metrics_port,
        pool=event_log.pool,
        on_start=[lambda: following.append(asyncio.create_task(jobs.follow(), name="follow-jobs"))],
        on_stop=[stop_following],
    )


if __name__ == "__main__":
    asyncio.run(main())
