"""Runs untrusted commands (a check script, a job's script) in a sandboxed subprocess; shared by the verifier and the
scheduler.

Each run gets its own box: `work/` (the working copy), `out/` (where results go), `home/` and `tmp/`.
The command runs as a plain process (not through Slurm), with:
- no network: its own network namespace (`unshare --net`; only a loopback that is down), and the unix sockets of
  the host (PostgreSQL's under /run, test clusters' under /tmp) hidden under empty tmpfs;
- a read-only view of the host, its box the only writable place, KB_HOME and credentials hidden, every capability
  dropped (sandbox_setup.sh);
- its own PID namespace and process group: at the time limit the whole group is killed (and with the namespace's
  first process, everything it started);
- a clean environment (only what the script needs) and rlimits (no core files, bounded file sizes and descriptors,
  CPU time as a backstop to the wall-clock limit).
Where unshare is unavailable the run goes ahead without namespaces and says so loudly ("network not isolated").
"""

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.common.logs import get_logger
from services.common.mounts import MountPlan, Unconfinable, existing, mount_plan

SETUP_SCRIPT = Path(__file__).with_name("sandbox_setup.sh")
INNER_ROOT = "/var/tmp"  # where the box appears inside the namespaces
# Covered by empty tmpfs in every sandbox, besides the box on INNER_ROOT: the host's sockets and other processes' files.
COVERED = ("/tmp", "/run", "/dev/shm")
UNSHARE = ("unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc")
OUTPUT_TAIL_BYTES = 8000
MAX_FILE_BYTES = 4 * 1024**3
# On the CPU profile a check's judge shares outputs with its candidate through a memfd sized to the largest output
# judged (on the GPU through device memory), and RLIMIT_FSIZE bounds memfds too: the benchmark's largest at full
# shapes is rms_norm's 7.5 GB.
MAX_CHECK_FILE_BYTES = 16 * 1024**3
MAX_OPEN_FILES = 4096

log = get_logger()


def isolation_available() -> bool:
    """Whether the whole sandbox works here: namespaces (root or user namespaces), the mounts of sandbox_setup.sh
    and the capability drop, tried once on an empty box."""
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return False
    box = Path(tempfile.mkdtemp(prefix="kb-sandbox-probe-"))
    try:
        (box / "work").mkdir()
        command = [*UNSHARE, "bash", str(SETUP_SCRIPT), str(box), INNER_ROOT, *COVERED, "--", "true"]
        done = subprocess.run(command, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(box, ignore_errors=True)
    return done.returncode == 0


def needed_by_checks() -> tuple[str, ...]:
    """What a check runs on -- this Python (its venv and base install) and the project the harness is imported
    from -- kept visible, read-only, even where it lies under a hidden directory (a clone under /tmp, say)."""
    project = Path(__file__).resolve().parents[2]
    return tuple(dict.fromkeys([sys.prefix, sys.base_prefix, str(project)]))


@dataclass(frozen=True)
class SandboxConfig:
    root: Path  # boxes are made here, one per run
    isolate: bool  # namespaces (see the module doc); False only where unshare is unavailable
    hidden: tuple[str, ...] = ()  # host directories the check must not see (KB_HOME, credentials)
    visible: tuple[str, ...] = field(default_factory=needed_by_checks)  # kept read-only even under a hidden one
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)
    file_bytes: int = MAX_CHECK_FILE_BYTES  # the largest file (memfd included) a check may make


@dataclass(frozen=True)
class Finished:
    """What the sandbox saw of one run."""

    exit_code: int | None  # None when it was killed at its time limit; negative: killed by that signal
    timed_out: bool
    duration_s: float
    output_tail: str  # the end of its stdout + stderr


@dataclass(frozen=True)
class Box:
    path: Path  # on the host
    inner: str  # the same directory as the script sees it

    @property
    def work(self) -> Path:
        return self.path / "work"

    def inner_path(self, *parts: str) -> str:
        return "/".join([self.inner, *parts])


def _guarded(command: Sequence[str], cpu_seconds: int, file_bytes: int) -> list[str]:
    """The command under rlimits (no core files, bounded file sizes and descriptors, CPU time as a backstop) and with
    SIGKILL as its parent-death signal: a verifier killed mid-check takes its check down with it (unshare
    --kill-child then takes the namespace). Done by util-linux tools rather than a preexec_fn: Python code between
    fork and exec is unsafe in a process with threads (gRPC's), and crashed the child here now and then."""
    return [
        "setpriv",
        "--pdeathsig",
        "KILL",
        "--",
        "prlimit",
        "--core=0",
        f"--fsize={file_bytes}",
        f"--nofile={MAX_OPEN_FILES}",
        f"--cpu={cpu_seconds}",
        "--",
        *command,
    ]


def read_result_file(path: Path, limit: int) -> tuple[bytes | None, str]:
    """(a file a sandboxed run wrote: its bytes, at most limit + 1; or None when absent) and why it could not be
    read; never follows a symlink out of the box."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None, ""
    except OSError as err:  # ELOOP: a symlink
        return None, f"cannot open it ({err.strerror}): a check writes a plain file"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1), ""
    finally:
        os.close(fd)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - OUTPUT_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def setup_arguments(plan: MountPlan) -> list[str]:
    """sandbox_setup.sh's arguments for ``plan``: its covers (the box covers INNER_ROOT), +bind-backs, ^re-covers."""
    covers = [path for path in plan.covers if path != INNER_ROOT]
    return [*covers, *(f"+{path}" for path in plan.bind_backs), *(f"^{path}" for path in plan.recovers)]


def planned_mounts(config: SandboxConfig) -> MountPlan:
    """The mounts of ``config``'s runs; a layout they cannot confine is refused before any (Unconfinable, naming the
    path): the verifier does not start on it."""
    plan = mount_plan([INNER_ROOT, *COVERED], existing(config.hidden, os.path.isdir), existing(config.visible))
    if config.isolate and plan.unconfinable:
        raise Unconfinable(plan.unconfinable)
    return plan


class Sandbox:
    def __init__(self, config: SandboxConfig):
        self.config = config
        self.mounts = planned_mounts(config)
        if not config.isolate:
            log.warning("network not isolated: unshare is unavailable, checks run without namespaces")

    def make_box(self, name: str) -> Box:
        self.config.root.mkdir(parents=True, exist_ok=True)
        path = self.config.root / name
        if path.exists():  # left by a worker that died mid-check
            shutil.rmtree(path)
        for part in ("work", "out", "home", "tmp"):
            (path / part).mkdir(parents=True)
        return Box(path, INNER_ROOT if self.config.isolate else str(path))

    def remove_box(self, box: Box) -> None:
        shutil.rmtree(box.path, ignore_errors=True)

    async def run(self, box: Box, command: Sequence[str], env: Mapping[str, str], *, time_limit_s: int) -> Finished:
        """Runs ``command`` from the box's working copy; env is its whole environment (paths in it are as the
        command sees them: box.inner_path(...))."""
        command = list(command)
        if self.config.isolate:
            command = [
                *UNSHARE,
                "bash",
                str(SETUP_SCRIPT),
                str(box.path),
                box.inner,
                *setup_arguments(self.mounts),
                "--",
                *command,
            ]
        else:
            log.warning("network not isolated: running without namespaces", box=str(box.path))
        output = box.path / "output.log"
        started = time.monotonic()
        timed_out = False
        with open(output, "wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                *_guarded(command, time_limit_s * self.config.cpu_count + 60, self.config.file_bytes),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=box.work,
                env=dict(env),
                start_new_session=True,  # its own process group, killed as one
            )
            try:
                await asyncio.wait_for(proc.wait(), timeout=time_limit_s)
            except TimeoutError:
                timed_out = True
                _kill_group(proc.pid)
                await proc.wait()
            except asyncio.CancelledError:
                _kill_group(proc.pid)
                await proc.wait()
                raise
            finally:
                _kill_group(proc.pid)  # whatever it left behind in its group
        return Finished(
            exit_code=None if timed_out else proc.returncode,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            output_tail=_tail(output),
        )


# ---------------------------------------------------------------------------------------------------------------------
# Slurm jobs: the same confinement, entered by the job itself.
#
# Slurm starts a job's batch step as the job user (sbatch --uid), a real unprivileged uid: that is the privilege drop.
# The batch script the scheduler submits is the launcher below; it never runs the pushed script directly, but through
# an unprivileged user namespace that maps the job user to itself and keeps its capabilities (ambient, in that
# namespace only) for sandbox_setup.sh's mounts (unshare --keep-caps); sandbox_setup.sh's setpriv clears the ambient
# set and sets no_new_privs, so the script, a non-root uid even in its namespace, starts with none. The
# launcher carries sandbox_setup.sh's text, so that the node needs nothing of this checkout (the job user could not
# read a checkout under /root, and slurmd in a cluster runs from its own image).

JOB_PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_JOB_PROCESSES = 4096
# Covered in a job besides COVERED and its hidden directories: root's home (where a Python may be installed, which is
# bound back on top). The job user may pass through it on the host to reach that Python (deploy/local/slurm/job-user.sh)
# but must see nothing else there.
JOB_COVERED = (*COVERED, "/root")


@dataclass(frozen=True)
class JobPython:
    """The interpreter a job runs with: the one the checks use (its torch and triton), first on the job's PATH as
    ``python`` and ``python3``, and ``KB_PYTHON``. ``prefixes``: its venv and base install, bound back read-only where
    the job's covers would hide them."""

    executable: str
    prefixes: tuple[str, ...]

    @property
    def bin_dir(self) -> str:
        return os.path.dirname(self.executable)


def job_python(executable: str = sys.executable) -> JobPython:
    """``executable`` with its prefixes (sys.prefix and sys.base_prefix, as that interpreter reports them)."""
    if os.path.realpath(executable) == os.path.realpath(sys.executable):
        prefixes = [sys.prefix, sys.base_prefix]
    else:
        ask = [executable, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"]
        try:
            prefixes = subprocess.run(ask, capture_output=True, text=True, check=True, timeout=60).stdout.split()
        except (OSError, subprocess.SubprocessError) as err:
            raise ValueError(f"the Python for jobs, {executable}, does not run here: {err}") from None
    return JobPython(executable, tuple(existing(prefixes, os.path.isdir)))


def job_batch_script(
    *,
    box: Path,
    workdir: str,
    command: Sequence[str],
    hidden: Sequence[str],
    network: bool,
    cpu_seconds: int,
    label: str,
    python: JobPython,
) -> str:
    """The batch script that runs ``command`` confined, for sbatch --uid=<job user>.

    box is the job's directory on the node (its commit in box/work, the only writable place, seen inside at
    INNER_ROOT); workdir is where the command starts, relative to box/work; hidden are the host directories covered
    by empty tmpfs besides /tmp, /run and /dev/shm (KB_HOME, the other jobs, Slurm's spool); network False gives the
    job a network namespace of its own with a loopback that is down; python is the interpreter the job finds first
    (the checks'), its install bound back read-only."""
    inner_work = f"{INNER_ROOT}/work"
    inner_dir = f"{inner_work}/{workdir}".rstrip("/") if workdir not in {"", "."} else inner_work
    unshare = ["unshare", "--user", '--map-user="$(id -u)"', '--map-group="$(id -g)"', "--keep-caps"]
    unshare += ([] if network else ["--net"]) + ["--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
    q = shlex.quote
    launch = [
        "env -i",
        '"${job_env[@]}"',
        "setpriv --pdeathsig KILL --",
        "prlimit --core=0",
        f"--fsize={MAX_FILE_BYTES} --nofile={MAX_OPEN_FILES} --nproc={MAX_JOB_PROCESSES} --cpu={cpu_seconds} --",
        *unshare,
        'bash -c "$setup" kb-sandbox-setup',
        q(str(box)),
        q(INNER_ROOT),
        *(q(path) for path in setup_arguments(mount_plan([INNER_ROOT, *JOB_COVERED], list(hidden), python.prefixes))),
        "--",
        '/bin/sh -c \'cd "$1" && shift && exec "$@"\' kb-job',
        q(inner_dir),
        *(q(part) for part in command),
    ]
    setup = SETUP_SCRIPT.read_text()
    return f"""#!/bin/bash
# kernelboard job {label}: written by the scheduler (services/common/sandbox.py job_batch_script). Runs as the job
# user and confines the pushed script: read-only host, only its directory writable, KB_HOME and sockets hidden,
# {"the network of the node" if network else "no network"}, its own PID namespace, no capabilities, rlimits.
set -euo pipefail
if [[ "$(id -u)" == 0 ]]; then
  echo "kernelboard: refusing to run a job as root; Slurm must start it as the job user" >&2
  exit 126
fi
setup=$(cat <<'KB_SANDBOX_SETUP'
{setup}
KB_SANDBOX_SETUP
)
job_env=(PATH={q(python.bin_dir + ":" + JOB_PATH)} KB_PYTHON={q(python.executable)} HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8
  PYTHONNOUSERSITE=1 KB_JOB_DIR={q(inner_work)} SLURM_SUBMIT_DIR={q(inner_dir)})
while IFS= read -r -d '' var; do
  case "$var" in
  SLURM_CONF=* | SLURM_SUBMIT_DIR=*) ;;
  SLURM_*) job_env+=("$var") ;;
  esac
done < <(env -0)
exec {" ".join(launch)}
"""
