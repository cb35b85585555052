"""The shared metric helpers: kb_ prefix enforced, re-creation returns the same collector, /metrics served once."""

import urllib.request

import pytest

from services.common import metrics


def test_prefix_is_required():
    with pytest.raises(ValueError, match="must start with 'kb_'"):
        metrics.counter("pushes_total", "no prefix")


def test_same_name_returns_the_same_collector_and_conflicts_are_refused():
    first = metrics.counter("kb_test_things_total", "things", ("kind",))
    assert metrics.counter("kb_test_things_total", "things", ("kind",)) is first
    with pytest.raises(ValueError, match="another type or labels"):
        metrics.gauge("kb_test_things_total", "things", ("kind",))
    with pytest.raises(ValueError, match="another type or labels"):
        metrics.counter("kb_test_things_total", "things", ("other",))


def test_metrics_server_serves_the_registry_once_per_port():
    metrics.counter("kb_test_served_total", "served").inc(3)
    port = metrics.start_metrics_server(0, addr="127.0.0.1")
    assert metrics.start_metrics_server(port, addr="127.0.0.1") == port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert "kb_test_served_total 3.0" in body
    assert "kb_test_served_total 3.0" in metrics.exposition()
