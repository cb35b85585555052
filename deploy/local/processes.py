"""What ``deploy/local/stack.py`` stands on: where the stack's files live, the processes it started (by pid file, and
only those), probes that need no venv, and a command run to completion within a deadline.

Standard library only, like stack.py, which imports it (the bootstrap Python runs both before any venv exists).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class StackError(Exception):
    """A step failed; the message says what, and where its log is."""


def say(message: str) -> None:
    print(message, flush=True)


# --- where things live -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    repo: Path
    home: Path  # KB_HOME: the state directory

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def venv(self) -> Path:
        return self.repo / ".venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"


def layout_from_env(environ=os.environ) -> Layout:
    return Layout(repo=REPO, home=Path(environ.get("KB_HOME") or REPO / ".state").resolve())


# --- processes we started: pid files -------------------------------------------------------------------------------


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def process_matches(pid: int, marker: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process whose command line contains ``marker``.

    The marker guards against a recycled pid: a pid file left from an earlier boot may name an unrelated process now.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and marker in _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")


def _cmdline(pid: int) -> bytes:
    """The process's command line, empty when it is gone (or, for a moment, while it execs)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return b""


def running_pid(layout: Layout, name: str, marker: str) -> int | None:
    """The pid of our running ``name``, or None; a stale pid file (dead or recycled pid) is removed."""
    path = layout.pid_file(name)
    pid = read_pid(path)
    if pid is None:
        return None
    if process_matches(pid, marker):
        return pid
    path.unlink(missing_ok=True)
    return None


def start_process(
    layout: Layout, name: str, argv: Sequence[str], marker: str, env: dict[str, str], cwd: Path | None = None
) -> tuple[int, bool]:
    """Start ``argv`` in the background (own session, output to logs/<name>.log) unless ours already runs.

    Returns (pid, started): started is False when a running process was found and left alone.
    """
    pid = running_pid(layout, name, marker)
    if pid is not None:
        return pid, False
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    with open(layout.log_file(name), "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(cwd or layout.repo),
            env=env,
            start_new_session=True,
        )
    layout.pid_file(name).write_text(f"{proc.pid}\n")
    # Popen returns once exec has closed the child's descriptors, a moment before the kernel gives it its new command
    # line; a check by command line in that moment took a starting nats-server for dead (seen in CI). Wait it out.
    deadline = time.monotonic() + 2.0
    while proc.poll() is None and not _cmdline(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc.pid, True


def stop_process(layout: Layout, name: str, marker: str, timeout_s: float = 15.0) -> str:
    """Stop our ``name`` by its recorded pid: SIGTERM (its own graceful shutdown), then after ``timeout_s`` SIGKILL to
    its whole process group (start_process made it a group leader), so that nothing it started is left behind."""
    pid = running_pid(layout, name, marker)
    if pid is None:
        layout.pid_file(name).unlink(missing_ok=True)
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, marker, timeout_s):
        layout.pid_file(name).unlink(missing_ok=True)
        return f"stopped (pid {pid})"
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, marker, 5.0):
        raise StackError(f"{name} (pid {pid}) survived SIGKILL; log {layout.log_file(name)}")
    layout.pid_file(name).unlink(missing_ok=True)
    return f"killed (pid {pid} ignored SIGTERM for {timeout_s:.0f} s)"


def wait_gone(pid: int, marker: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_matches(pid, marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join("    " + line for line in text[-lines:])


# --- probes that need no venv --------------------------------------------------------------------------------------


def host_port(url: str, default_port: int) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    return parsed.hostname or "127.0.0.1", parsed.port or default_port


def tcp_answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def nats_info(host: str, port: int, timeout_s: float = 2.0) -> dict | None:
    """The INFO a NATS server sends on connect, or None when nothing (or not NATS) answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.settimeout(timeout_s)
            data = b""
            while b"\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\r\n", 1)[0]
    if not line.startswith(b"INFO "):
        return None
    try:
        return json.loads(line[5:])
    except ValueError:
        return None


def wait_until(check: Callable[[], bool], deadline_s: float, what: str, interval_s: float = 0.2) -> float:
    """Poll ``check`` until it holds; return the seconds waited. Past the deadline, raise StackError naming ``what``."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > deadline_s:
            raise StackError(f"{what}: not ready after {deadline_s:.0f} s")
        time.sleep(interval_s)


def run(
    argv: Sequence[str], what: str, timeout_s: float, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.CompletedProcess:
    """Run a command to completion within ``timeout_s``; on failure raise StackError with its output's tail.

    With ``log`` the output (stdout and stderr together) goes to that file as it comes, so a long step can be
    followed with ``tail -f``, and is returned as ``stdout``; without, it is captured.
    """
    command = " ".join(argv)
    try:
        if log is None:
            done = subprocess.run(
                list(argv),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
                cwd=REPO,
            )
            output = done.stdout + done.stderr
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as out:
                out.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {command}\n")
                out.flush()
                start = out.tell()
                done = subprocess.run(
                    list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s,
                    env=env, cwd=REPO,
                )  # fmt: skip
            with open(log, errors="replace") as written:
                written.seek(start)
                output = written.read()
            done = subprocess.CompletedProcess(argv, done.returncode, stdout=output, stderr="")
    except subprocess.TimeoutExpired as err:
        where = f"; log {log}" if log else ""
        raise StackError(f"{what}: still running after {timeout_s:.0f} s ({command}){where}") from err
    except FileNotFoundError as err:
        raise StackError(f"{what}: {argv[0]} not found") from err
    if done.returncode != 0:
        tail = "\n".join("    " + line for line in output.strip().splitlines()[-25:])
        where = f"\n  full log: {log}" if log else ""
        raise StackError(f"{what} failed (exit {done.returncode}): {command}\n{tail}{where}")
    return done


@dataclass
class Context:
    layout: Layout
    database_url: str
    nats_url: str
    slurm_conf: str | None = None
    runners: str = ""  # the runners' partition when the cluster has its nodes: the verifier dispatches there

    def service_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            KB_DATABASE_URL=self.database_url,
            KB_NATS_URL=self.nats_url,
            KB_HOME=str(self.layout.home),
            PYTHONUNBUFFERED="1",
        )
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        if self.runners:
            env.setdefault("KB_VERIFIER_DISPATCH", "slurm")
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{self.layout.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        return env


def module_exists(layout: Layout, module: str) -> bool:
    return (layout.repo / (module.replace(".", "/") + ".py")).exists()
