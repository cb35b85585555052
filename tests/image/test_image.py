"""The container image (deploy/container/Containerfile), built with podman by deploy/container/build.sh, runs each
process the way deploy/k8s/base runs it (its command, uid 10001, the env names of services/common/config.py) against
the real PostgreSQL and NATS JetStream: gRPC health SERVING, /metrics with its own metrics, and the event log
written through the containerised ingest.

Run by `make image-test` (not `make test`: the first build takes minutes). Outside CI a machine without podman
skips; in CI (CI=true) that fails.
"""

import os
import secrets
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import asyncpg
import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc

from services.verifier.intake import CONSUMER_NAME as VERIFIER_CONSUMER
from tests.streams import delete_stream, stream_settings
from tests.support.databases import throwaway_database
from tests.support.services import OWN_METRIC, free_port

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/kernelboard:test"
# What this machine needs to run a container (see deploy/container/build.sh): runc, and limits it may set.
RUN_FLAGS = ["--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
SLURM_CONF = os.environ.get("SLURM_CONF")
MUNGE_SOCKET_DIR = Path("/run/munge")

pytestmark = pytest.mark.timeout(1500)


def podman_flags() -> list[str]:
    return ["--runtime", "runc"] if shutil.which("runc") else []


@pytest.fixture(scope="module")
def image():
    if not shutil.which("podman"):
        message = "podman not found: apt-get install -y podman runc debootstrap"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    built = subprocess.run(
        [str(REPO / "deploy/container/build.sh"), "test"], capture_output=True, text=True, timeout=1400
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    return IMAGE


def k8s_container(service: str) -> dict:
    """The main container of the service's Deployment in deploy/k8s/base."""
    for doc in yaml.safe_load_all((REPO / f"deploy/k8s/base/{service}.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            containers = doc["spec"]["template"]["spec"]["containers"]
            return next(c for c in containers if c["name"] == service)
    raise AssertionError(f"no Deployment in deploy/k8s/base/{service}.yaml")


def k8s_command(service: str) -> list[str]:
    return k8s_container(service)["command"]


def test_the_build_tags_the_image_names_deploy_k8s_uses(image):
    for service in ("ingest", "scheduler", "verifier", "board", "relay", "web"):
        name = f"{k8s_container(service)['image']}:test"
        assert subprocess.run(["podman", "image", "exists", name], timeout=30).returncode == 0, name


class Container:
    def __init__(self, image: str, service: str, env: dict[str, str], volumes: tuple[str, ...] = ()):
        self.service = service
        self.name = f"kb-image-test-{service}-{secrets.token_hex(3)}"
        argv = ["podman", *podman_flags(), "run", "-d", "--name", self.name, *RUN_FLAGS]
        for key, value in env.items():
            argv += ["-e", f"{key}={value}"]
        for volume in volumes:
            argv += ["-v", volume]
        started = subprocess.run([*argv, image, *k8s_command(service)], capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr

    def logs(self) -> str:
        done = subprocess.run(["podman", "logs", self.name], capture_output=True, text=True, timeout=30)
        return (done.stdout + done.stderr)[-4000:]

    def running(self) -> bool:
        done = subprocess.run(
            ["podman", "inspect", "-f", "{{.State.Running}}", self.name], capture_output=True, text=True, timeout=30
        )
        return done.stdout.strip() == "true"

    def exec(self, *argv: str) -> str:
        done = subprocess.run(["podman", "exec", self.name, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def remove(self) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "5", self.name], capture_output=True, timeout=60)


def wait_until(what: str, check, container: Container, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not container.running():
            pytest.fail(f"{container.service} exited while waiting for {what}:\n{container.logs()}")
        try:
            if check():
                return
        except (OSError, grpc.RpcError):
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n{container.logs()}")


def serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        return reply.status == health_pb2.HealthCheckResponse.SERVING


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        return response.read().decode()


@pytest.fixture(scope="module")
async def backing():
    """A database and a JetStream stream of the test's own."""
    async with throwaway_database("image") as url:
        settings = stream_settings("image")
        env = {
            "KB_DATABASE_URL": url,
            "KB_NATS_URL": settings.nats_url,
            "KB_EVENTS_STREAM": settings.events_stream,
            "KB_EVENTS_SUBJECT_PREFIX": settings.events_subject_prefix,
        }
        yield env
        await delete_stream(settings)


async def test_the_image_runs_each_process_as_deployed(image, backing):
    containers: list[Container] = []
    ports: dict[str, tuple[int | None, int]] = {}
    try:
        for service in ("ingest", "verifier", "board", "relay", "scheduler"):
            if service == "scheduler" and not (SLURM_CONF and MUNGE_SOCKET_DIR.exists()):
                pytest.fail("the scheduler needs the machine's Slurm: SLURM_CONF and munged (deploy/local/stack.py)")
            grpc_port = None if service == "relay" else free_port()
            metrics_port = free_port()
            env = {**backing, f"KB_{service.upper()}_METRICS_PORT": str(metrics_port)}
            if grpc_port:
                env[f"KB_{service.upper()}_PORT"] = str(grpc_port)
            volumes: tuple[str, ...] = ()
            if service == "verifier":
                env["KB_VERIFIER_DEVICE"] = "cpu"
            if service == "scheduler":
                env["KB_INGEST_ADDR"] = f"127.0.0.1:{ports['ingest'][0]}"
                env["SLURM_CONF"] = "/etc/slurm-kb/slurm.conf"
                volumes = (f"{Path(SLURM_CONF).parent}:/etc/slurm-kb:ro", f"{MUNGE_SOCKET_DIR}:/run/munge")
            container = Container(image, service, env, volumes)
            containers.append(container)
            ports[service] = (grpc_port, metrics_port)
            if grpc_port:
                wait_until(f"{service}'s gRPC health", lambda p=grpc_port: serving(p), container)
            wait_until(
                f"{service}'s /metrics", lambda p=metrics_port, s=service: OWN_METRIC[s] in metrics(p), container
            )

        stream = backing["KB_EVENTS_STREAM"]
        assert containers[0].exec("id", "-u").strip() == "10001"
        # The containerised ingest seeded the log and answers a signed-out caller as the service does.
        with grpc.insecure_channel(f"127.0.0.1:{ports['ingest'][0]}") as channel:
            with pytest.raises(grpc.RpcError) as refused:
                ingest_pb2_grpc.IngestStub(channel).WhoAmI(ingest_pb2.WhoAmIRequest(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The containers' consumers and relay keep their checkpoints in the test's database.
        conn = await asyncpg.connect(backing["KB_DATABASE_URL"])
        try:
            consumers = {row["consumer"] for row in await conn.fetch("SELECT consumer FROM consumer_checkpoints")}
            relayed = await conn.fetchval("SELECT count(*) FROM relay_checkpoints WHERE stream = $1", stream)
        finally:
            await conn.close()
        assert {"board", VERIFIER_CONSUMER} <= consumers and relayed == 1
    finally:
        for container in containers:
            container.remove()
