"""A private kernelboard stack for end-to-end, fault and load tests: the real relay and four services as processes.

Each instance has its own PostgreSQL database (on the machine's server, or on a throwaway cluster it starts), its own
nats-server (free port, own JetStream store), KB_HOME, JetStream stream and free gRPC/metrics ports, so it runs beside
`make up` and beside other helpers' tests. Only processes this module started are ever signalled, by their pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.common.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("ingest", "scheduler", "verifier", "board")
MODULES = {"relay": "services.common.relay", **{name: f"services.{name}.server" for name in SERVICES}}
ADMIN_URL = os.environ.get("KB_TEST_ADMIN_DATABASE_URL", "postgresql://root@127.0.0.1:5432/postgres")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def slurm_conf() -> str | None:
    """SLURM_CONF, else the one `make up`/`stack.py prepare` recorded in $KB_HOME/stack.env."""
    if conf := os.environ.get("SLURM_CONF"):
        return conf
    env_file = Path(os.environ.get("KB_HOME", ROOT / ".state")) / "stack.env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("SLURM_CONF="):
                return line.split("=", 1)[1]
    return None


def postgres_bin(tool: str) -> str:
    found = shutil.which(tool) or next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))), None)
    if not found:
        raise RuntimeError(f"{tool} not found (apt-get install postgresql)")
    return str(found)


class ThrowawayPostgres:
    """A PostgreSQL cluster of our own (initdb as user postgres into a temp dir), so that a test may restart it."""

    def __init__(self):
        # User postgres must reach it: /var/tmp, not pytest's private (mode 700) temporary directory.
        self.root = Path(tempfile.mkdtemp(prefix="kb-e2e-pg-", dir="/var/tmp"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://root@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str, timeout: float = 120) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True, timeout=timeout)

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres(postgres_bin("initdb"), "-D", str(self.data), "-U", "root", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        log = str(self.root / "server.log")
        self._as_postgres(
            postgres_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", log, "-o", options, "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres(postgres_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateNats:
    """nats-server with JetStream on free ports and its own store directory."""

    def __init__(self, root: Path, max_payload: int | None = None):
        self.max_payload = max_payload  # None: the server's default, 1 MiB
        self.store = root / "nats"
        self.port = free_port()
        self.monitor_port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = root / "nats.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        argv = ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.monitor_port)]
        if self.max_payload is not None:  # no command-line flag for it: a config file of one line
            config = self.store.parent / "nats-limits.conf"
            config.write_text(f"max_payload: {self.max_payload}\n")
            argv += ["-c", str(config)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*argv, "-sd", str(self.store)], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    if conn.recv(4096).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"private nats-server did not answer on {self.port}; log {self.log}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)


@dataclass
class Stack:
    root: Path
    slurm_conf: str | None
    private_postgres: bool = False
    poll_s: str = "0.5"
    components: tuple[str, ...] = ("relay", *SERVICES)
    rules_through: int | None = None  # bootstrap the rules up to this benchmark version (None: the project's own)
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        # Job directories where the job user can reach them (the stack's root is pytest's, root's alone).
        self.jobs_root = Path(tempfile.mkdtemp(prefix="kb-e2e-jobs-", dir="/var/tmp"))
        self.jobs_root.chmod(0o711)
        self.tag = uuid.uuid4().hex[:10]
        self.db_name = f"kb_test_e2e_{self.tag}"
        self.nats = PrivateNats(self.root)
        self.postgres = ThrowawayPostgres() if self.private_postgres else None
        admin = self.postgres.url if self.postgres else ADMIN_URL
        self.admin_url = admin
        self.database_url = admin.rsplit("/", 1)[0] + "/" + self.db_name
        for name in ("relay", *SERVICES):
            self.ports[f"{name}_metrics"] = free_port()
        for name in SERVICES:
            self.ports[name] = free_port()

    # --- environment ------------------------------------------------------------------------------------------

    def env(self, **more: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("KB_TOKEN", None)
        env.update(
            PYTHONPATH=f"{ROOT}:{ROOT / 'protos'}",
            PYTHONUNBUFFERED="1",
            KB_DATABASE_URL=self.database_url,
            KB_NATS_URL=self.nats.url,
            KB_HOME=str(self.home),
            KB_JOBS_DIR=str(self.jobs_root),
            KB_EVENTS_STREAM=f"KB_EVENTS_E2E_{self.tag}",
            KB_EVENTS_SUBJECT_PREFIX=f"kbe2e.{self.tag}",
            KB_CREDENTIALS=str(self.root / "credentials.json"),
            KB_SCHEDULER_POLL_S=self.poll_s,
            KB_VERIFIER_POLL_S=self.poll_s,
            KB_VERIFIER_DEVICE="cpu",
            KB_VERIFIER_SHAPES="smoke",
            GIT_AUTHOR_NAME="e2e",
            GIT_AUTHOR_EMAIL="e2e@kernelboard.invalid",
            GIT_COMMITTER_NAME="e2e",
            GIT_COMMITTER_EMAIL="e2e@kernelboard.invalid",
        )
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        for name in SERVICES:
            env[f"KB_{name.upper()}_PORT"] = str(self.ports[name])
            env[f"KB_{name.upper()}_METRICS_PORT"] = str(self.ports[f"{name}_metrics"])
            env[f"KB_{name.upper()}_ADDR"] = f"127.0.0.1:{self.ports[name]}"
        env.update(self.extra_env)
        env.update(more)
        return env

    def address(self, service: str) -> str:
        return f"127.0.0.1:{self.ports[service]}"

    def token(self, name: str) -> str:
        return (self.home / f"{name}.token").read_text().strip()

    # --- bring-up -----------------------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Infrastructure, database, migrations, the benchmark's main + tag checks and the maintainer, then the
        relay and the services. No bundled route: its twelve-kernel check would hold the CPU verifier for minutes."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        if self.postgres:
            self.postgres.init()
            self.postgres.start()
        self.nats.start()
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f'CREATE DATABASE "{self.db_name}"')
        finally:
            await admin.close()
        self.kb("admin", "migrate")
        through = () if self.rules_through is None else ("--rules-through", str(self.rules_through))
        self.python("-m", "tests.e2e.bootstrap", *through)
        for name in self.components:
            self.start(name)
        for name in self.components:
            self.wait_ready(name)

    def python(self, *argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, env=self.env(**env), capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def kb(self, *argv: str, token: str | None = None, cwd: Path | None = None, check: bool = True, timeout=180):
        env = self.env(**({"KB_TOKEN": token} if token else {}))
        done = subprocess.run(
            [sys.executable, "-m", "services.cli.main", *argv],
            cwd=cwd or ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kb {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def start(self, name: str) -> None:
        argv = [sys.executable, "-m", MODULES[name]]
        if name == "relay":
            argv += ["--metrics-port", str(self.ports["relay_metrics"]), "--poll-interval", "0.2"]
        with open(self.log_path(name), "ab") as out:
            out.write(f"\n--- starting {name}\n".encode())
            self.procs[name] = subprocess.Popen(
                argv, cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, name: str, deadline_s: float = 90) -> None:
        """A service is ready when its gRPC health says SERVING; the relay when it has lived a moment."""
        proc = self.procs[name]
        deadline = time.monotonic() + deadline_s
        if name == "relay":
            time.sleep(0.5)
            if proc.poll() is not None:
                raise RuntimeError(f"relay exited at start:\n{self.tail(name)}")
            return
        with grpc.insecure_channel(self.address(name)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited at start ({proc.returncode}):\n{self.tail(name)}")
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
        raise RuntimeError(f"{name} not SERVING after {deadline_s} s:\n{self.tail(name)}")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)  # its own session: the verifier's sandboxed check goes with it
            proc.wait(timeout=30)

    def restart(self, name: str) -> None:
        self.start(name)
        self.wait_ready(name)

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    async def teardown(self) -> None:
        for name in reversed(list(self.procs)):
            try:
                self.kill(name, signal.SIGTERM)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill(name, signal.SIGKILL)
        self.cancel_slurm_jobs()
        shutil.rmtree(self.jobs_root, ignore_errors=True)
        self.nats.stop()
        if self.postgres:
            try:
                self.postgres.stop("immediate")
            except subprocess.CalledProcessError:
                pass  # already stopped (a test failed while it was down)
            self.postgres.remove()
            return
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        finally:
            await admin.close()

    def cancel_slurm_jobs(self) -> None:
        """Jobs of ours left on the shared cluster (a failed test) are cancelled by id, from the log."""
        if not self.slurm_conf:
            return
        try:
            done = self.python("-m", "tests.e2e.bootstrap", "--job-ids", timeout=60)
        except (RuntimeError, subprocess.TimeoutExpired):
            return
        for job_id in json.loads(done.stdout or "[]"):
            subprocess.run(["scancel", job_id], env=self.env(), capture_output=True, timeout=30)


async def wait_for(predicate, what: str, deadline_s: float, interval_s: float = 0.5):
    """Await ``predicate()`` (sync or async) until it returns something truthy; return it, or fail naming ``what``.
    Every half second by default: each poll is a call to the stack's services, which the flow is timing."""
    return await eventually(predicate, what, deadline_s, interval_s)
