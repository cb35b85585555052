"""Settings from the environment (docs/ARCHITECTURE.md, "The process model"); the defaults serve a local stack.

What each server listens on and how it uses PostgreSQL (``ServerConfig.from_env``), the same names in every process
and in deploy/k8s:

| variable | default |
|---|---|
| ``KB_<SERVICE>_PORT`` | gRPC: ingest 50051, scheduler 50052, verifier 50053, board 50054 (the relay serves none) |
| ``KB_<SERVICE>_METRICS_PORT`` | ingest 9101, scheduler 9102, verifier 9103, board 9104, relay 9105, web 9106 |
| ``KB_WEB_PORT`` | HTTP: the web board 8080 |
| ``KB_PG_POOL_MIN_SIZE``, ``KB_PG_POOL_MAX_SIZE`` | ingest, verifier, board 10 and 10; scheduler 1 and 5; relay 1, 2 |
| ``KB_PG_CONNECT_TIMEOUT_S`` | 10: a connection to an unreachable PostgreSQL fails then (the call: UNAVAILABLE) |
| ``KB_SHUTDOWN_GRACE_S``, ``KB_SLOW_RPC_MS`` | 10 and 250, read by services/common/grpcserver.py |
"""

import os
from dataclasses import dataclass
from pathlib import Path

GRPC_PORTS = {"ingest": 50051, "scheduler": 50052, "verifier": 50053, "board": 50054}
METRICS_PORTS = {"ingest": 9101, "scheduler": 9102, "verifier": 9103, "board": 9104, "relay": 9105, "web": 9106}
# Servers that speak HTTP to people rather than gRPC: the web board (services/web).
HTTP_PORTS = {"web": 8080}
# (min, max) connections. The scheduler appends briefly, one job at a time; the relay holds one connection of its
# own for the advisory lock and reads through this pool.
POOL_SIZES = {"ingest": (10, 10), "scheduler": (1, 5), "verifier": (10, 10), "board": (10, 10), "relay": (1, 2)}
DEFAULT_PG_CONNECT_TIMEOUT_S = 10.0

DEFAULT_DATABASE_URL = "postgresql://root@127.0.0.1:5432/kernelboard"
DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
EVENTS_STREAM = "KB_EVENTS"
EVENTS_SUBJECT_PREFIX = "kb.events"


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    nats_url: str = DEFAULT_NATS_URL
    home: Path = Path.home() / ".kernelboard"
    slurm_conf: str | None = None
    # The JetStream stream and subject prefix: fixed in production, overridable so that tests run side by side.
    events_stream: str = EVENTS_STREAM
    events_subject_prefix: str = EVENTS_SUBJECT_PREFIX

    @classmethod
    def from_env(cls, environ=None) -> "Settings":
        env = os.environ if environ is None else environ
        return cls(
            database_url=env.get("KB_DATABASE_URL", DEFAULT_DATABASE_URL),
            nats_url=env.get("KB_NATS_URL", DEFAULT_NATS_URL),
            home=Path(env.get("KB_HOME", str(Path.home() / ".kernelboard"))),
            slurm_conf=env.get("SLURM_CONF") or None,
            events_stream=env.get("KB_EVENTS_STREAM", EVENTS_STREAM),
            events_subject_prefix=env.get("KB_EVENTS_SUBJECT_PREFIX", EVENTS_SUBJECT_PREFIX),
        )

    def grpc_address(self, service: str, environ=None) -> str:
        """Where a client reaches a service: ``KB_<SERVICE>_ADDR`` or localhost on its fixed port."""
        env = os.environ if environ is None else environ
        return env.get(f"KB_{service.upper()}_ADDR", f"127.0.0.1:{GRPC_PORTS[service]}")


@dataclass(frozen=True)
class ServerConfig:
    """One server process's ports and PostgreSQL pool (the table in the module doc)."""

    service: str
    grpc_port: int | None  # None: the relay serves no gRPC
    metrics_port: int
    pool_min_size: int
    pool_max_size: int
    pg_connect_timeout_s: float

    @classmethod
    def from_env(cls, service: str, environ=None) -> "ServerConfig":
        env = os.environ if environ is None else environ
        prefix = f"KB_{service.upper()}"
        min_default, max_default = POOL_SIZES[service]
        config = cls(
            service=service,
            grpc_port=_port(env, f"{prefix}_PORT", GRPC_PORTS[service]) if service in GRPC_PORTS else None,
            metrics_port=_port(env, f"{prefix}_METRICS_PORT", METRICS_PORTS[service]),
            pool_min_size=env_number(env, "KB_PG_POOL_MIN_SIZE", min_default, int, minimum=0),
            pool_max_size=env_number(env, "KB_PG_POOL_MAX_SIZE", max_default, int, minimum=1),
            pg_connect_timeout_s=env_number(
                env, "KB_PG_CONNECT_TIMEOUT_S", DEFAULT_PG_CONNECT_TIMEOUT_S, float, minimum=0.1
            ),
        )
        if config.pool_min_size > config.pool_max_size:
            raise ValueError(
                f"{service}: KB_PG_POOL_MIN_SIZE={config.pool_min_size} exceeds "
                f"KB_PG_POOL_MAX_SIZE={config.pool_max_size}"
            )
        return config

    def pool_options(self) -> dict:
        """Keyword arguments for ``EventLog.connect`` / ``asyncpg.create_pool``."""
        return {"min_size": self.pool_min_size, "max_size": self.pool_max_size, "timeout": self.pg_connect_timeout_s}


def _port(env, name: str, default: int) -> int:
    return env_number(env, name, default, int, minimum=0, maximum=65535)


def env_number(env, name: str, default, kind, *, minimum, maximum=None):
    """``name`` from ``env`` as ``kind`` (int or float) within bounds, else ``default`` when unset or empty; a value
    that is not a number or out of bounds is a ValueError naming the variable."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"{name}={raw!r} must be {bounds}")
    return value
