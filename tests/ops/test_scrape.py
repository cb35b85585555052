"""A real Prometheus (Debian's package) scrapes the four services and the relay, each started as its own process
from its real server module, against the real PostgreSQL and NATS JetStream, on free ports; and
`promtool check metrics` finds nothing to complain about in any /metrics body.

Prometheus runs on deploy/prometheus/prometheus.yml with only the targets moved to the ports the processes got, so
the committed job names and rule file are the ones exercised.
"""

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import grpc
import nats
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.ops.tools import REPO, require
from tests.support.services import OWN_METRIC, free_port

# The services whose server module is on this branch (all four once merged; the relay is always there).
ALL_SERVICES = ("ingest", "scheduler", "verifier", "board")
SERVICES = tuple(s for s in ALL_SERVICES if (REPO / "services" / s / "server.py").exists())
DEADLINE_S = 45
# The real servers the tests use (the same overrides as the other suites' conftest).
SERVER_URL = os.environ.get("KB_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")
NATS_URL = os.environ.get("KB_TEST_NATS_URL", "nats://127.0.0.1:4222")
# Start failures caused by the machine, not by the service: another process took the port between our choice and the
# bind, or other test suites hold PostgreSQL's connections. A process failing so is started again, a few times, with
# a growing pause.
MACHINE_FAILURES = ("Address already in use", "too many clients already")
START_ATTEMPTS = 4


def http_get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def wait_for(what: str, check, deadline: float):
    """Polls check() until it returns something true (returned) or the deadline passes (fails, naming what)."""
    last_error = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, urllib.error.URLError, ValueError, KeyError) as err:
            last_error = err
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error!r})")


async def admin_sql(statement: str) -> None:
    conn = await asyncpg.connect(f"{SERVER_URL}/postgres")
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def delete_stream(name: str) -> None:
    nc = await nats.connect(NATS_URL)
    try:
        await nc.jetstream().delete_stream(name)
    except nats.js.errors.NotFoundError:
        pass
    finally:
        await nc.close()


@dataclass
class Running:
    name: str
    process: subprocess.Popen
    grpc_port: int | None
    metrics_port: int
    log: Path

    def metrics(self) -> str:
        if self.process.poll() is not None:
            raise ProcessExited(self)
        return http_get(f"http://127.0.0.1:{self.metrics_port}/metrics").decode()


class ProcessExited(Exception):
    def __init__(self, running: Running):
        self.running = running
        self.output = running.log.read_text(errors="replace")
        super().__init__(f"{running.name} exited {running.process.returncode}:\n{self.output[-3000:]}")


def launch(name: str, env: dict, directory: Path, deadline: float) -> Running:
    """Starts one process on fresh ports and waits until its /metrics shows its own metric."""
    for attempt in range(1, START_ATTEMPTS + 1):
        grpc_port, metrics_port = (None if name == "relay" else free_port()), free_port()
        # The ports through the environment names every deployment uses (services/common/config.py).
        ports = {f"KB_{name.upper()}_METRICS_PORT": str(metrics_port)}
        if grpc_port is not None:
            ports[f"KB_{name.upper()}_PORT"] = str(grpc_port)
        module = "services.common.relay" if name == "relay" else f"services.{name}.server"
        log = directory / f"{name}.{attempt}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=REPO,
            env={**env, **ports},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running = Running(name, process, grpc_port, metrics_port, log)
        try:
            shown = OWN_METRIC[name]
            wait_for(f"{name}'s /metrics to show {shown}", lambda r=running, m=shown: m in r.metrics(), deadline)
            return running
        except ProcessExited as exited:
            if attempt == START_ATTEMPTS or not any(cause in exited.output for cause in MACHINE_FAILURES):
                pytest.fail(str(exited))
            print(f"{name}: start {attempt} failed on the machine ({exited.output.strip().splitlines()[-1]}); again")
            time.sleep(2 * attempt)
        except BaseException:
            stop(process)
            raise
    raise AssertionError("unreachable")


@pytest.fixture
def stack(tmp_path):
    """The four services and the relay, each its own process on free ports, on a database and stream of their own;
    returned once each one's /metrics answers."""
    suffix = secrets.token_hex(4)
    database, stream = f"kb_test_ops_{suffix}", f"KB_EVENTS_OPS_{suffix.upper()}"
    asyncio.run(admin_sql(f'CREATE DATABASE "{database}"'))
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}:{REPO / 'protos'}",
        "KB_DATABASE_URL": f"{SERVER_URL}/{database}",
        "KB_NATS_URL": NATS_URL,
        "KB_HOME": str(tmp_path / "home"),
        "KB_EVENTS_STREAM": stream,
        "KB_EVENTS_SUBJECT_PREFIX": f"kbtest.ops{suffix}",
        "KB_VERIFIER_DEVICE": "cpu",
    }
    deadline = time.monotonic() + DEADLINE_S
    running: dict[str, Running] = {}
    try:
        # Ingest first: the scheduler is told where it is.
        for name in [*SERVICES, "relay"]:
            if name == "scheduler" and "ingest" in running:
                env["KB_INGEST_ADDR"] = f"127.0.0.1:{running['ingest'].grpc_port}"
            running[name] = launch(name, env, tmp_path, deadline)
        yield running
    finally:
        for each in running.values():
            stop(each.process)
        asyncio.run(admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        asyncio.run(delete_stream(stream))


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def prometheus_config(targets: dict[str, int], directory: Path) -> Path:
    """deploy/prometheus/prometheus.yml with each job's target moved to its port (1 s scrapes for the test)."""
    config = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert set(targets) <= jobs, f"prometheus.yml has no job for {sorted(set(targets) - jobs)}"
    config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] in targets]
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"}
    config["rule_files"] = [str(REPO / "deploy/prometheus/alerts.yml")]
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [f"127.0.0.1:{targets[job['job_name']]}"]}]
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def query(base: str, promql: str) -> list[dict]:
    body = json.loads(http_get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"))
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_a_real_prometheus_scrapes_every_service_and_promtool_accepts_their_metrics(stack, tmp_path):
    promtool, prometheus = require("promtool"), require("prometheus")
    deadline = time.monotonic() + DEADLINE_S
    print(f"scraped: {', '.join(stack)}")

    # The call Kubernetes' grpc probe makes (service ""): SERVING, and counted in kb_grpc_requests_total.
    for name in SERVICES:
        with grpc.insecure_channel(f"127.0.0.1:{stack[name].grpc_port}") as channel:
            request = health_pb2.HealthCheckRequest(service="")
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=10, wait_for_ready=True)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, name

    config = prometheus_config({name: each.metrics_port for name, each in stack.items()}, tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(tmp_path / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for("Prometheus to be ready", lambda: http_get(f"{base}/-/ready"), deadline)

        def all_up():
            targets = json.loads(http_get(f"{base}/api/v1/targets"))["data"]["activeTargets"]
            return len(targets) == len(stack) and all(t["health"] == "up" for t in targets) and targets

        targets = wait_for("every target to be scraped up", all_up, deadline)
        assert {t["labels"]["job"] for t in targets} == set(stack)

        # Stored and queryable, each job with its own module's metrics, not just `up`.
        up = {r["metric"]["job"]: r["value"][1] for r in query(base, "up")}
        assert up == dict.fromkeys(stack, "1")
        expected = [(name, OWN_METRIC[name]) for name in stack]
        expected += [(name, "kb_grpc_requests_total") for name in SERVICES]
        for name, metric in expected:
            selector = f'{metric}{{job="{name}"}}'
            wait_for(f"{selector} in Prometheus", lambda q=selector: query(base, q), deadline)
        # Every dashboard query runs on the live series (promtool only parses them).
        dashboard = json.loads((REPO / "deploy/grafana/kernelboard.json").read_text())
        for panel in (p for p in dashboard["panels"] if p["type"] != "row"):
            for target in panel["targets"]:
                query(base, target["expr"].replace("$__rate_interval", "1m"))
        # The alert rules load and evaluate on these series without error.
        declared = yaml.safe_load((REPO / "deploy/prometheus/alerts.yml").read_text())["groups"]
        loaded = [r for g in json.loads(http_get(f"{base}/api/v1/rules"))["data"]["groups"] for r in g["rules"]]
        assert len(loaded) == sum(len(g["rules"]) for g in declared)
        assert all(r["health"] != "err" for r in loaded), loaded
    finally:
        stop(server)

    for name, each in stack.items():
        body = each.metrics()
        check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), (
            f"promtool check metrics on {name}'s /metrics:\n{check.stdout}{check.stderr}"
        )
