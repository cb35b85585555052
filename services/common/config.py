"""Settings from the environment (DESIGN.md's fixed contracts); the defaults serve a local stack."""

import os
from dataclasses import dataclass
from pathlib import Path

GRPC_PORTS = {"ingest": 50051, "scheduler": 50052, "verifier": 50053, "board": 50054}
METRICS_PORTS = {"ingest": 9101, "scheduler": 9102, "verifier": 9103, "board": 9104}

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
