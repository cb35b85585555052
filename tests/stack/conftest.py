"""deploy/local/stack.py and probes.py are scripts, not packages: load them as modules for the tests (stack.py imports
processes.py, datastores.py and components.py beside it as deploy.local.*)."""

import importlib.util
import socket
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "deploy" / "local"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"kb_local_{name}", LOCAL / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def stack():
    return load("stack")


@pytest.fixture(scope="session")
def processes(stack):
    """deploy/local/processes.py as stack.py imports it: pid files, probes, Layout and Context."""
    return importlib.import_module("deploy.local.processes")


@pytest.fixture(scope="session")
def datastores(stack):
    """deploy/local/datastores.py as stack.py imports it: PostgreSQL and NATS."""
    return importlib.import_module("deploy.local.datastores")


@pytest.fixture(scope="session")
def components(stack):
    """deploy/local/components.py as stack.py imports it: the stack's own processes and their waits."""
    return importlib.import_module("deploy.local.components")


@pytest.fixture(scope="session")
def probes():
    return load("probes")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def layout(stack, tmp_path):
    """A state directory of its own, beside the real repository (its configs, its probes)."""
    return stack.Layout(repo=REPO, home=tmp_path / "state")


@pytest.fixture
def health_server():
    """A real gRPC server that serves grpc.health.v1: (its servicer, to set statuses on, and its port)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(grace=None)
