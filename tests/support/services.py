"""What tests that start the services as processes share: a free port, and a metric each service exports."""

import random
import socket
from pathlib import Path

# A metric each process exports from its start, before any traffic: proof that its own module's metrics are scraped.
OWN_METRIC = {
    "ingest": "kb_ingest_bundle_bytes_count",
    "scheduler": "kb_scheduler_held_jobs",
    "verifier": "kb_verifier_queue_depth",
    "board": "kb_board_projection_lag_events",
    "relay": "kb_relay_active",
    "web": "kb_web_live_streams",
}


def free_port() -> int:
    """A free port below the kernel's ephemeral range, so that no outgoing connection takes it before the bind."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        port = random.randrange(20000, low)
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
