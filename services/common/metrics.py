"""Prometheus helpers shared by the services: one registry, the ``kb_`` prefix, one /metrics server per process.

Metrics are created through ``counter``/``gauge``/``histogram``, which return the existing collector when a module is
imported twice (tests, reloads) instead of failing on a duplicate registration, and refuse names without ``kb_``.
"""

import threading

import prometheus_client
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "kb_"
# Request latencies: from a cached read (1 ms) to a large bundle push (a minute).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_lock = threading.Lock()
_collectors: dict[str, object] = {}
_servers: dict[int, int] = {}


def _get_or_create(kind, name: str, documentation: str, labelnames, **kwargs):
    if not name.startswith(PREFIX):
        raise ValueError(f"metric {name!r} must start with {PREFIX!r}")
    with _lock:
        existing = _collectors.get(name)
        if existing is not None:
            if not isinstance(existing, kind) or tuple(existing._labelnames) != tuple(labelnames):
                raise ValueError(f"metric {name!r} already registered with another type or labels")
            return existing
        collector = kind(name, documentation, labelnames=tuple(labelnames), registry=REGISTRY, **kwargs)
        _collectors[name] = collector
        return collector


def counter(name: str, documentation: str, labelnames=()) -> Counter:
    return _get_or_create(Counter, name, documentation, labelnames)


def gauge(name: str, documentation: str, labelnames=()) -> Gauge:
    return _get_or_create(Gauge, name, documentation, labelnames)


def histogram(name: str, documentation: str, labelnames=(), buckets=LATENCY_BUCKETS) -> Histogram:
    return _get_or_create(Histogram, name, documentation, labelnames, buckets=buckets)


def start_metrics_server(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry = REGISTRY) -> int:
    """Serve /metrics on ``port`` (0: any free port) once per process and port; returns the bound port."""
    with _lock:
        if port and port in _servers:
            return _servers[port]
        server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
        bound = server.server_port
        _servers[port or bound] = bound
        return bound


def exposition(registry: CollectorRegistry = REGISTRY) -> str:
    """The text /metrics would serve now."""
    return prometheus_client.generate_latest(registry).decode()


# The gRPC request metrics every service exposes (labelled by the gRPC service and method, as called).
GRPC_REQUESTS = counter(
    "kb_grpc_requests_total", "gRPC requests handled, by final status code.", ("service", "method", "code")
)
GRPC_LATENCY = histogram(
    "kb_grpc_request_duration_seconds", "gRPC request duration from arrival to final status.", ("service", "method")
)
GRPC_IN_FLIGHT = gauge("kb_grpc_in_flight", "gRPC requests being handled now.", ("service",))
