"""The stack's own processes: the relay, the four services and the web board started in the background, each
waited for until healthy, then the bundled route's check waited for and the board printed.

Standard library only, like deploy/local/stack.py, which imports it (the bootstrap Python runs both).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from deploy.local.processes import (
    Context,
    Layout,
    StackError,
    log_tail,
    module_exists,
    read_pid,
    run,
    running_pid,
    start_process,
    tcp_answers,
)
from services.common.config import GRPC_PORTS, HTTP_PORTS, METRICS_PORTS

HERE = Path(__file__).resolve().parent
SERVICES = tuple(GRPC_PORTS)

BUNDLED_ROUTE = "triton"


def component_modules() -> dict[str, str]:
    """The long-running processes of the stack and the module each runs, in start order (the web board last: it
    reads the board service)."""
    return {
        "relay": "services.common.relay",
        **{name: f"services.{name}.server" for name in SERVICES},
        "web": "services.web.server",
    }


def step_processes(ctx: Context, health_deadline_s: float) -> tuple[str, list[str]]:
    """Start the relay, the four services and the web board where not running, then wait for each one's health: gRPC
    health for the services, ``/healthz`` for the web board (200 once it reads the board service)."""
    started, kept, missing, targets = [], [], [], []
    env = ctx.service_env()
    for name, module in component_modules().items():
        if not module_exists(ctx.layout, module):
            missing.append(f"{name} ({module.replace('.', '/')}.py)")
            continue
        if (name in GRPC_PORTS or name in HTTP_PORTS) and running_pid(ctx.layout, name, module) is None:
            ensure_ports_free(name, ctx.layout)
        pid, fresh = start_process(ctx.layout, name, [str(ctx.layout.python), "-m", module], module, env)
        (started if fresh else kept).append(f"{name}:{pid}")
        if name in GRPC_PORTS:
            targets.append(f"{name}=127.0.0.1:{GRPC_PORTS[name]}:{pid}")
    if any(entry.startswith("relay:") for entry in started):
        # The relay serves no port: alive after a short grace is its health.
        time.sleep(1.0)
        if running_pid(ctx.layout, "relay", "services.common.relay") is None:
            log = ctx.layout.log_file("relay")
            raise StackError(f"the relay exited right after start; log {log}:\n{log_tail(log)}")
    if targets:
        wait_healthy(ctx, targets, health_deadline_s)
    for name in HTTP_PORTS:
        if running_pid(ctx.layout, name, component_modules()[name]) is not None:
            wait_http_healthy(ctx.layout, name, health_deadline_s)
    summary = f"started {' '.join(started) or 'none'}; already running {' '.join(kept) or 'none'}"
    return summary, missing


def http_healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def wait_http_healthy(layout: Layout, name: str, deadline_s: float, interval_s: float = 0.2) -> None:
    """Until ``name`` answers 200 on /healthz; its exit or the deadline fails naming it, with the tail of its log."""
    module, port, log = component_modules()[name], HTTP_PORTS[name], layout.log_file(name)
    deadline = time.monotonic() + deadline_s
    while not http_healthy(port):
        if running_pid(layout, name, module) is None:
            raise StackError(f"{name} exited at start; log {log}:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            raise StackError(
                f"{name} on http://127.0.0.1:{port}/healthz: not 200 after {deadline_s:.0f} s; log {log}:\n"
                f"{log_tail(log)}"
            )
        time.sleep(interval_s)


def ensure_ports_free(name: str, layout: Layout) -> None:
    """A service's ports held by a process that is not ours (another checkout's stack, a service run by hand) would
    answer our health check in its place: refuse, naming the holder."""
    serving = ("gRPC", GRPC_PORTS[name]) if name in GRPC_PORTS else ("HTTP", HTTP_PORTS[name])
    for kind, port in (serving, ("metrics", METRICS_PORTS[name])):
        if tcp_answers("127.0.0.1", port, timeout_s=0.5):
            raise StackError(
                f"{name}'s {kind} port {port} is already taken by {port_holder(port)}, not by this stack "
                f"(KB_HOME={layout.home}); stop that process and run `make up` again"
            )


def port_holder(port: int) -> str:
    """Who listens on ``port``, from ``ss`` (iproute2): e.g. ``python (pid 123)``."""
    try:
        done = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return "another process"
    match = re.search(r'users:\(\("([^"]+)",pid=(\d+)', done.stdout)
    return f"{match.group(1)} (pid {match.group(2)})" if match else "another process"


def wait_healthy(ctx: Context, targets: Sequence[str], deadline_s: float) -> None:
    argv = [str(ctx.layout.python), str(HERE / "probes.py"), "health", "--deadline", str(deadline_s), *targets]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=deadline_s + 30, env=ctx.service_env())
    except subprocess.TimeoutExpired as err:
        raise StackError(f"the gRPC health probe hung past its deadline of {deadline_s:.0f} s") from err
    failures = []
    for line in done.stdout.splitlines():
        result = json.loads(line)
        if result["status"] != "SERVING":
            log = ctx.layout.log_file(result["name"])
            failures.append(
                f"  {result['name']} on {result['target']}: {result['detail']}\n  log {log}:\n{log_tail(log)}"
            )
    if done.returncode != 0 and not failures:
        failures.append(f"  the health probe itself failed:\n{done.stderr[-2000:]}")
    if failures:
        raise StackError("gRPC health check failed:\n" + "\n".join(failures))


def check_outcome(check: dict) -> str:
    """A check's outcome in words: a score only where it is a verified one (a CPU-profile check times with a host
    timer at smoke shapes, so its numbers say nothing about speed)."""
    if not check["passed"]:
        return "FAILED: " + "; ".join(check["reasons"])
    if check.get("verified"):
        return f"passed, verified score {check['score']:.3f} on {check['runner']}"
    why = "; ".join(check.get("not_verified_because") or []) or "not judged on the pinned GPU at full shapes"
    return f"passed on {check['runner']} (not a verified score: {why})"


def step_route_checked(ctx: Context, deadline_s: float) -> dict:
    watch = []
    for name in ("verifier", "ingest", "relay"):
        pid = read_pid(ctx.layout.pid_file(name))
        if pid is not None:
            watch += ["--watch", f"{name}={pid}"]
    argv = [
        str(ctx.layout.python),
        str(HERE / "probes.py"),
        "route-checked",
        BUNDLED_ROUTE,
        "--deadline",
        str(deadline_s),
        *watch,
    ]
    # The probe's progress notes and its reason for failing go straight to the terminal (stderr).
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=ctx.service_env(), cwd=str(ctx.layout.repo))
    try:
        out, _ = proc.communicate(timeout=deadline_s + 60)
    except subprocess.TimeoutExpired as timeout:
        proc.kill()
        raise StackError(
            f"waiting for the check of route {BUNDLED_ROUTE}: the probe hung past its deadline"
        ) from timeout
    if proc.returncode != 0:
        log = ctx.layout.log_file("verifier")
        raise StackError(
            f"route {BUNDLED_ROUTE} was not checked (reason above)\n  verifier log {log}:\n{log_tail(log)}"
        )
    return json.loads(out.strip().splitlines()[-1])


def step_board(ctx: Context) -> str:
    """``kb board``, signed in as the seeded maintainer (services.ingest.seed writes $KB_HOME/curator.token)."""
    env = ctx.service_env()
    token_file = ctx.layout.home / "curator.token"
    if "KB_TOKEN" not in env and token_file.exists():
        env["KB_TOKEN"] = token_file.read_text().strip()
    done = run([str(ctx.layout.venv / "bin" / "kb"), "board"], "kb board", 60, env=env)
    return done.stdout
