#!/usr/bin/env python3
"""The local stack: ``make up`` (a fresh Debian machine to a running stack with the bundled route scored),
``make down`` and ``status``.

Standard library only: this script creates the virtualenv, so it cannot need one. What must speak gRPC or PostgreSQL
(health checks, the database, the event log) runs in ``deploy/local/probes.py`` under the venv's Python. Beside it,
standard library too: ``processes.py`` (where things live, pid files, probes, a command within a deadline),
``datastores.py`` (PostgreSQL and NATS) and ``components.py`` (the relay, the services and the web board, their health
waits, the bundled route's check); this file keeps the packages, the venv, Slurm and the job user, the database
steps, and the commands.

Every step says what it did (reused, started, already running, skipped) and every wait has a deadline; a failure names
what failed and shows the tail of its log. Only what this script started is ever stopped, by the pid it recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# The fixed contracts (ports, default URLs) come from the project's settings, which need only the standard library.
sys.path.insert(0, str(REPO))
from deploy.local.components import (  # noqa: E402
    BUNDLED_ROUTE,
    check_outcome,
    component_modules,
    step_board,
    step_processes,
    step_route_checked,
)
from deploy.local.datastores import find_postgres_bin, step_nats, step_postgres, stop_postgres  # noqa: E402
from deploy.local.processes import (  # noqa: E402
    Context,
    Layout,
    StackError,
    host_port,
    layout_from_env,
    module_exists,
    nats_info,
    run,
    running_pid,
    say,
    stop_process,
    tcp_answers,
)
from services.common.config import (  # noqa: E402
    DEFAULT_DATABASE_URL,
    DEFAULT_NATS_URL,
    GRPC_PORTS,
    HTTP_PORTS,
)

# --- the steps of `up` ---------------------------------------------------------------------------------------------


def missing_packages(ctx: Context) -> list[str]:
    """The Debian packages this machine lacks for what `up` must do here (services already answering need none)."""
    packages = []
    if not shutil.which("git"):
        packages.append("git")
    if not ctx.layout.python.exists():
        probe = subprocess.run([sys.executable, "-c", "import ensurepip, venv"], capture_output=True)
        if probe.returncode != 0:
            packages.append(f"python3.{sys.version_info.minor}-venv")
    if not shutil.which("gcc"):  # for any dependency that has to build from source
        packages += ["gcc", "python3-dev"]
    pg_host, pg_port = host_port(ctx.database_url, 5432)
    if not tcp_answers(pg_host, pg_port) and not (find_postgres_bin("initdb") and find_postgres_bin("pg_ctl")):
        packages.append("postgresql")
    nats_host, nats_port = host_port(ctx.nats_url, 4222)
    if nats_info(nats_host, nats_port) is None and not shutil.which("nats-server"):
        packages.append("nats-server")
    if not shutil.which("bwrap"):  # bubblewrap confines route code in checks and jobs (harness/confine.py)
        packages.append("bubblewrap")
    # `make test` right after `make up` runs every test: the alert rules and scrape tests need promtool and prometheus
    # (tests/ops), which Debian's prometheus package holds. Its service is not started (services_not_autostarted).
    if not (shutil.which("promtool") and shutil.which("prometheus")):
        packages.append("prometheus")
    # tests/web drives Debian's Chromium (Playwright's own browser download is out of reach here).
    if not shutil.which("chromium"):
        packages.append("chromium")
    return packages


def step_packages(ctx: Context) -> str:
    packages = missing_packages(ctx)
    if not packages:
        return "nothing missing"
    if os.geteuid() != 0:
        raise StackError(f"these Debian packages are missing and installing them needs root: {' '.join(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = ctx.layout.log_file("apt")
    say(f"    installing {' '.join(packages)} (tail -f {log})")
    run(["apt-get", "update"], "apt-get update", 600, env=env, log=log)
    with services_not_autostarted():
        run(
            ["apt-get", "install", "-y", "--no-install-recommends", *packages],
            "apt-get install",
            1200,
            env=env,
            log=log,
        )
    return f"installed {' '.join(packages)} (log {log})"


POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


@contextlib.contextmanager
def services_not_autostarted():
    """Keep apt from starting what it installs (Debian's policy-rc.d, exit 101 = action forbidden).

    A freshly installed postgresql would otherwise start Debian's own cluster on 5432, which refuses root over TCP
    without a password; the stack starts PostgreSQL and NATS itself, from deploy/local. An existing policy is kept.
    """
    if POLICY_RC_D.exists():
        yield
        return
    POLICY_RC_D.write_text(
        "#!/bin/sh\n# kernelboard deploy/local/stack.py: no service starts during apt-get install\nexit 101\n"
    )
    POLICY_RC_D.chmod(0o755)
    try:
        yield
    finally:
        POLICY_RC_D.unlink(missing_ok=True)


def requirements_stamp(layout: Layout) -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
        digest.update((layout.repo / name).read_bytes())
    return digest.hexdigest()


def step_venv(ctx: Context) -> str:
    layout = ctx.layout
    stamp_file = layout.venv / ".kb-requirements"
    stamp = requirements_stamp(layout)
    if layout.python.exists() and stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        return f"up to date ({layout.venv})"
    log = layout.log_file("venv")
    done = []
    if not layout.python.exists():
        run([sys.executable, "-m", "venv", str(layout.venv)], "creating the venv", 300, log=log)
        done.append("created")
    pip = [str(layout.python), "-m", "pip", "--disable-pip-version-check"]
    say(f"    installing requirements.txt into {layout.venv}: minutes on a fresh machine (tail -f {log})")
    # torch==2.13.0 (pinned) comes from this machine's disk as a CPU build; pip finds it through its own config.
    run(
        [*pip, "install", "-r", str(layout.repo / "requirements.txt")], "pip install -r requirements.txt", 1800, log=log
    )
    run([*pip, "install", "--no-deps", "-e", str(layout.repo)], "pip install -e .", 600, log=log)
    stamp_file.write_text(stamp + "\n")
    done.append("requirements installed")
    return f"{', '.join(done)} ({layout.venv}; log {log})"


def step_slurm(ctx: Context) -> str:
    """deploy/local/slurm/up.sh (the scheduler's) installs and starts munge, MariaDB, slurmdbd, slurmctld, slurmd."""
    script = ctx.layout.repo / "deploy" / "local" / "slurm" / "up.sh"
    ctx.slurm_conf = os.environ.get("SLURM_CONF") or None
    if ctx.slurm_conf and slurm_answers(ctx.slurm_conf):
        # One Slurm cluster per machine: its daemons' ports are fixed, so a second up.sh could not start another.
        ctx.runners = runners_partition(ctx.layout, ctx.slurm_conf)
        return f"reusing the cluster of SLURM_CONF={ctx.slurm_conf}{runners_note(ctx)}"
    if not script.exists():
        return "skipped: deploy/local/slurm/up.sh is not in this checkout"
    env = dict(os.environ, KB_HOME=str(ctx.layout.home))
    say(f"    deploy/local/slurm/up.sh (tail -f {ctx.layout.log_file('slurm')})")
    done = run(
        ["bash", str(script)], "Slurm (deploy/local/slurm/up.sh)", 900, env=env, log=ctx.layout.log_file("slurm")
    )
    ctx.slurm_conf = slurm_conf_from(done.stdout, ctx.layout) or ctx.slurm_conf
    ctx.runners = runners_partition(ctx.layout, ctx.slurm_conf) if ctx.slurm_conf else ""
    return f"up (SLURM_CONF={ctx.slurm_conf or 'default /etc/slurm/slurm.conf'}){runners_note(ctx)}"


def runners_partition(layout: Layout, slurm_conf: str) -> str:
    """The rules' runners' partition (checks[].partition) when this cluster has nodes in it, else ""."""
    from contracts import rules

    try:
        wanted = sorted(rules.load_file(layout.repo / rules.RULES_FILE).runner_partitions)
    except rules.RulesError:
        return ""
    for partition in wanted:
        with contextlib.suppress(FileNotFoundError, subprocess.TimeoutExpired):
            done = subprocess.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"], capture_output=True, text=True,
                                  timeout=10, env=dict(os.environ, SLURM_CONF=slurm_conf))  # fmt: skip
            if done.returncode == 0 and done.stdout.split():
                return partition
    return ""


def runners_note(ctx: Context) -> str:
    if ctx.runners:
        return f"; checks run on the runners' partition {ctx.runners} (KB_VERIFIER_DISPATCH=slurm)"
    return "; no runners' partition in this cluster: checks run on the verifier's host"


def slurm_answers(slurm_conf: str) -> bool:
    """Whether the controller of ``slurm_conf`` answers and its node can take jobs."""
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=10,
            env=dict(os.environ, SLURM_CONF=slurm_conf),
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False
    states = done.stdout.split()
    return done.returncode == 0 and any(state in ("idle", "mixed", "allocated", "completing") for state in states)


def slurm_conf_from(output: str, layout: Layout) -> str | None:
    """The slurm.conf up.sh made: its ``export SLURM_CONF=<path>`` line, else $KB_HOME/slurm/etc/slurm.conf."""
    for line in reversed(output.splitlines()):
        line = line.strip().removeprefix("export ").strip()
        if line.startswith("SLURM_CONF="):
            return line.split("=", 1)[1].strip()
    conventional = layout.home / "slurm" / "etc" / "slurm.conf"
    return str(conventional) if conventional.exists() else None


def step_job_user(ctx: Context) -> str:
    """The unprivileged user route code runs as, in checks (services/verifier/harness/confine.py) and in Slurm jobs:
    deploy/local/slurm/job-user.sh (idempotent; also checks it can enter a user namespace, which a job's sandbox
    needs). up.sh runs it too, but a reused cluster skips up.sh."""
    script = ctx.layout.repo / "deploy" / "local" / "slurm" / "job-user.sh"
    if not script.exists():
        return "skipped: deploy/local/slurm/job-user.sh is not in this checkout"
    return run(["bash", str(script)], "the job user (deploy/local/slurm/job-user.sh)", 60).stdout.strip()


def probe(ctx: Context, args: Sequence[str], what: str, timeout_s: float) -> subprocess.CompletedProcess:
    """Run deploy/local/probes.py (gRPC, PostgreSQL, the event log) under the venv's Python."""
    argv = [str(ctx.layout.python), str(HERE / "probes.py"), *args]
    return run(argv, what, timeout_s, env=ctx.service_env())


def step_database(ctx: Context) -> str:
    done = probe(ctx, ["ensure-db", ctx.database_url], "creating the database", 60)
    return done.stdout.strip()


def step_migrate(ctx: Context) -> str:
    kb = str(ctx.layout.venv / "bin" / "kb")
    done = run([kb, "admin", "migrate"], "kb admin migrate", 120, env=ctx.service_env())
    return f"applied (kb admin migrate{': ' + done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ''})"


def step_seed(ctx: Context) -> str:
    if not module_exists(ctx.layout, "services.ingest.seed"):
        return "skipped: services/ingest/seed.py is not in this checkout"
    log = ctx.layout.log_file("seed")
    run(
        [str(ctx.layout.python), "-m", "services.ingest.seed"],
        "seeding (python -m services.ingest.seed)",
        300,
        env=ctx.service_env(),
        log=log,
    )
    return f"done (log {log})"


# --- commands ------------------------------------------------------------------------------------------------------


class Timer:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        took, self.start = now - self.start, now
        return took


def step(name: str, action: Callable[[], str]) -> str:
    say(f"==> {name}")
    timer = Timer()
    result = action()
    say(f"    {result} [{timer.lap():.1f} s]")
    return result


def lock(layout: Layout):
    """One `up`/`down` at a time per state directory."""
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    handle = open(layout.run_dir / "stack.lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as err:
        raise StackError(f"another `make up`/`make down` holds {layout.run_dir / 'stack.lock'}") from err
    return handle


def context_from_env() -> Context:
    return Context(
        layout=layout_from_env(),
        database_url=os.environ.get("KB_DATABASE_URL", DEFAULT_DATABASE_URL),
        nats_url=os.environ.get("KB_NATS_URL", DEFAULT_NATS_URL),
    )


def prepare(ctx: Context) -> None:
    """What the tests need too: packages, the venv, Slurm, PostgreSQL and NATS answering; .ci/run stops here."""
    step("Debian packages", lambda: step_packages(ctx))
    step("job user (checks and Slurm jobs run as it)", lambda: step_job_user(ctx))
    step("Python venv (.venv, requirements.txt)", lambda: step_venv(ctx))
    step("Slurm", lambda: step_slurm(ctx))
    step("PostgreSQL", lambda: step_postgres(ctx))
    step("NATS JetStream", lambda: step_nats(ctx))
    write_env_file(ctx)


def write_env_file(ctx: Context) -> None:
    """$KB_HOME/stack.env: the environment a shell needs to reach this stack (``set -a; . .state/stack.env``)."""
    lines = [
        f"KB_HOME={ctx.layout.home}",
        f"KB_DATABASE_URL={ctx.database_url}",
        f"KB_NATS_URL={ctx.nats_url}",
    ]
    if ctx.slurm_conf:
        lines.append(f"SLURM_CONF={ctx.slurm_conf}")
    ctx.layout.home.mkdir(parents=True, exist_ok=True)
    (ctx.layout.home / "stack.env").write_text("\n".join(lines) + "\n")


def cmd_prepare(args) -> int:
    ctx = context_from_env()
    say(f"kernelboard stack: KB_HOME={ctx.layout.home}")
    with lock(ctx.layout):
        prepare(ctx)
    return 0


def cmd_up(args) -> int:
    ctx = context_from_env()
    total = Timer()
    say(f"kernelboard stack: KB_HOME={ctx.layout.home}")
    with lock(ctx.layout):
        prepare(ctx)
        step("database", lambda: step_database(ctx))
        step("migrations", lambda: step_migrate(ctx))
        step("seed (bundled route)", lambda: step_seed(ctx))
        missing: list[str] = []

        def processes() -> str:
            summary, found_missing = step_processes(ctx, args.health_timeout)
            missing.extend(found_missing)
            return summary

        step("relay and services (gRPC health)", processes)
        if missing:
            say("\nThe stack is up without: " + ", ".join(missing) + ".")
            say("These are not in this checkout yet; `make up` completes once they land.")
            return 1
        say(f"==> waiting for the verifier to check route {BUNDLED_ROUTE} (up to {args.check_timeout:.0f} s)")
        timer = Timer()
        check = step_route_checked(ctx, args.check_timeout)
        say(f"    route {BUNDLED_ROUTE} at {check['sha'][:12]}: {check_outcome(check)} [{timer.lap():.1f} s]")
        say("==> kb board")
        say(step_board(ctx))
        say(f"==> the board on the web: http://127.0.0.1:{HTTP_PORTS['web']}/ (public read; `make status` lists it)")
        say(f"stack up in {total.lap():.1f} s; logs in {ctx.layout.log_dir}; `make down` stops it.")
        return 0 if check["passed"] else 1


def cmd_down(args) -> int:
    ctx = context_from_env()
    layout = ctx.layout
    processes = component_modules()
    unknown = sorted(set(args.components) - set(processes))
    if unknown:
        raise StackError(f"no component named {', '.join(unknown)}; components: {', '.join(processes)}")
    with lock(layout):
        for name, module in reversed(processes.items()):
            if not args.components or name in args.components:
                say(f"{name}: {stop_process(layout, name, module)}")
        if args.components:
            return 0
        conf = layout.repo / "deploy" / "local" / "nats.conf"
        say(f"nats: {stop_process(layout, 'nats', str(conf))}")
        say(f"postgres: {stop_postgres(layout)}")
        slurm_down = layout.repo / "deploy" / "local" / "slurm" / "down.sh"
        if slurm_down.exists():
            env = dict(os.environ, KB_HOME=str(layout.home))
            done = run(["bash", str(slurm_down)], "Slurm (deploy/local/slurm/down.sh)", 120, env=env)
            for line in (done.stdout + done.stderr).strip().splitlines():
                say(f"slurm: {line}")
        return 0


def cmd_status(args) -> int:
    ctx = context_from_env()
    layout = ctx.layout
    pg_host, pg_port = host_port(ctx.database_url, 5432)
    nats_host, nats_port = host_port(ctx.nats_url, 4222)
    say(f"KB_HOME {layout.home}")
    say(f"postgres   {'answers' if tcp_answers(pg_host, pg_port) else 'DOWN'} on {pg_host}:{pg_port}")
    say(f"nats       {'answers' if nats_info(nats_host, nats_port) else 'DOWN'} on {nats_host}:{nats_port}")
    all_up = True
    for name, module in component_modules().items():
        pid = running_pid(layout, name, module)
        port = f" :{GRPC_PORTS.get(name) or HTTP_PORTS[name]}" if name in GRPC_PORTS or name in HTTP_PORTS else ""
        state = f"running (pid {pid}){port}" if pid else "stopped"
        all_up = all_up and pid is not None
        say(f"{name:<10} {state}; log {layout.log_file(name)}")
    return 0 if all_up else 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="install what is missing, start what is not running, wait for the first check")
    up.add_argument("--health-timeout", type=float, default=float(os.environ.get("KB_UP_HEALTH_TIMEOUT", 90)))
    up.add_argument("--check-timeout", type=float, default=float(os.environ.get("KB_UP_CHECK_TIMEOUT", 900)))
    up.set_defaults(handler=cmd_up)
    sub.add_parser("prepare", help="packages, venv, Slurm, PostgreSQL and NATS only (for CI)").set_defaults(
        handler=cmd_prepare
    )
    down = sub.add_parser("down", help="stop what `up` started, by pid")
    down.add_argument("components", nargs="*", help="only these of the relay and the services (default: everything)")
    down.set_defaults(handler=cmd_down)
    sub.add_parser("status", help="what runs; exit 3 when a component is stopped").set_defaults(handler=cmd_status)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except StackError as err:
        print(f"\nFAILED: {err}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
