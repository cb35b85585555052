"""PostgreSQL and NATS JetStream for the local stack: reused when they answer, else started from deploy/local (a
throwaway PostgreSQL cluster, a nats-server with JetStream), and stopped only when the stack started them.

Standard library only, like deploy/local/stack.py, which imports it (the bootstrap Python runs both).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

from deploy.local.processes import (
    Context,
    Layout,
    StackError,
    host_port,
    log_tail,
    nats_info,
    process_matches,
    read_pid,
    run,
    running_pid,
    start_process,
    stop_process,
    tcp_answers,
    wait_until,
)

NATS_MONITOR_PORT = 8222


def find_postgres_bin(tool: str) -> str | None:
    """Debian keeps initdb/pg_ctl under /usr/lib/postgresql/<version>/bin, off the PATH."""
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), key=lambda p: int(Path(p).parts[-3]))
    return candidates[-1] if candidates else None


def postgres_data_dir(layout: Layout) -> Path:
    """Where a new throwaway cluster goes: under KB_HOME when user postgres can reach it, else under /var/tmp."""
    layout.home.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(layout.home)], capture_output=True)
    if probe.returncode == 0:
        return layout.home / "postgres"
    tag = hashlib.sha256(str(layout.home).encode()).hexdigest()[:12]
    return Path("/var/tmp") / f"kernelboard-{tag}" / "postgres"


def our_postgres(layout: Layout) -> tuple[int, Path] | None:
    """The cluster `up` started, from run/postgres.pid (the postmaster's pid, then its directory), if it still runs."""
    try:
        recorded = Path(layout.pid_file("postgres").read_text().split()[1])
    except (FileNotFoundError, IndexError):
        layout.pid_file("postgres").unlink(missing_ok=True)
        return None
    pid = running_pid(layout, "postgres", str(recorded / "data"))
    return (pid, recorded) if pid is not None else None


def step_postgres(ctx: Context) -> str:
    host, port = host_port(ctx.database_url, 5432)
    ours = our_postgres(ctx.layout)
    if ours is not None:
        return f"already running (ours, pid {ours[0]}, {ours[1]})"
    if tcp_answers(host, port):
        return f"reusing the server on {host}:{port}"
    if host not in ("127.0.0.1", "localhost"):
        raise StackError(f"PostgreSQL at {host}:{port} does not answer, and the stack only starts one on localhost")
    initdb, pg_ctl = find_postgres_bin("initdb"), find_postgres_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise StackError("PostgreSQL does not answer and initdb/pg_ctl are not installed (apt-get install postgresql)")
    user = urllib.parse.urlsplit(ctx.database_url).username or "root"
    as_postgres = ["runuser", "-u", "postgres", "--"]
    cluster = postgres_data_dir(ctx.layout)
    data = str(cluster / "data")
    # pg_ctl writes its log as user postgres, so it lives in the cluster's own directory.
    log = cluster / "server.log"
    cluster.mkdir(parents=True, exist_ok=True)
    shutil.chown(cluster, "postgres", "postgres")
    if not (cluster / "data" / "PG_VERSION").exists():
        run([*as_postgres, initdb, "-D", data, "-U", user, "--auth=trust", "-E", "UTF8"], "initdb", 120)
    options = f"-p {port} -k {cluster} -c listen_addresses=127.0.0.1"
    run(
        [*as_postgres, pg_ctl, "-D", data, "-w", "-t", "60", "-l", str(log), "-o", options, "start"],
        f"starting PostgreSQL (log {log})",
        90,
    )
    pid = read_pid(cluster / "data" / "postmaster.pid")
    if pid is None:
        raise StackError(f"PostgreSQL started but wrote no postmaster.pid; log {log}")
    ctx.layout.run_dir.mkdir(parents=True, exist_ok=True)
    ctx.layout.pid_file("postgres").write_text(f"{pid}\n{cluster}\n")
    wait_until(lambda: tcp_answers(host, port), 30, f"PostgreSQL on {host}:{port} (log {log})")
    return f"started a throwaway cluster in {cluster} on {host}:{port} (pid {pid})"


def nats_command(conf: Path, port: int | None = None, monitor_port: int | None = None) -> list[str]:
    argv = [shutil.which("nats-server") or "nats-server", "-c", str(conf)]
    if port is not None:
        argv += ["-p", str(port)]
    if monitor_port is not None:
        argv += ["-m", str(monitor_port)]
    return argv


def nats_healthy(monitor_port: int) -> bool:
    url = f"http://127.0.0.1:{monitor_port}/healthz?js-enabled-only=true"
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return reply.status == 200
    except OSError:
        return False


def start_nats(layout: Layout, port: int, monitor_port: int, deadline_s: float = 30) -> tuple[int, bool]:
    """Start nats-server from deploy/local/nats.conf (JetStream store under KB_HOME) and wait for /healthz."""
    conf = layout.repo / "deploy" / "local" / "nats.conf"
    store = layout.home / "nats"
    store.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KB_NATS_STORE_DIR=str(store))
    argv = nats_command(
        conf, None if port == 4222 else port, None if monitor_port == NATS_MONITOR_PORT else monitor_port
    )
    pid, started = start_process(layout, "nats", argv, str(conf), env)

    log = layout.log_file("nats")

    def healthy() -> bool:
        # Our process must be alive and our client port must speak JetStream: a monitor port answering alone could be
        # another server's.
        if not process_matches(pid, str(conf)):
            raise StackError(f"nats-server exited at start; log {log}:\n{log_tail(log)}")
        info = nats_info("127.0.0.1", port, timeout_s=0.5)
        return bool(info and info.get("jetstream")) and nats_healthy(monitor_port)

    wait_until(healthy, deadline_s, f"nats-server on 127.0.0.1:{port}, health on :{monitor_port} (log {log})")
    return pid, started


def step_nats(ctx: Context) -> str:
    host, port = host_port(ctx.nats_url, 4222)
    conf = ctx.layout.repo / "deploy" / "local" / "nats.conf"
    pid = running_pid(ctx.layout, "nats", str(conf))
    if pid is not None:
        return f"already running (ours, pid {pid})"
    info = nats_info(host, port)
    if info is not None:
        if not info.get("jetstream"):
            raise StackError(f"the NATS server on {host}:{port} runs without JetStream; restart it with -js")
        return f"reusing the server on {host}:{port} (nats-server {info.get('version', '?')}, JetStream on)"
    if tcp_answers(host, port):
        raise StackError(f"something on {host}:{port} answers but it is not NATS")
    if host not in ("127.0.0.1", "localhost"):
        raise StackError(f"NATS at {host}:{port} does not answer, and the stack only starts one on localhost")
    pid, _ = start_nats(ctx.layout, port, NATS_MONITOR_PORT)
    return f"started nats-server (pid {pid}, JetStream store {ctx.layout.home / 'nats'})"


def stop_postgres(layout: Layout) -> str:
    """Stop the throwaway cluster we started (a reused server has no pid file of ours and is never touched)."""
    ours = our_postgres(layout)
    if ours is None:
        return "not started by the stack"
    pid, cluster = ours
    data = str(cluster / "data")
    pg_ctl = find_postgres_bin("pg_ctl")
    if pg_ctl:
        # A fast shutdown through pg_ctl lets PostgreSQL end its backends itself; stop_process is the fallback.
        subprocess.run(
            ["runuser", "-u", "postgres", "--", pg_ctl, "-D", data, "-m", "fast", "-w", "-t", "30", "stop"],
            capture_output=True,
            timeout=60,
        )
    outcome = stop_process(layout, "postgres", data)
    return f"stopped (pid {pid})" if outcome == "not running" else outcome
