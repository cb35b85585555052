"""The alert rules (promtool check + promtool's unit tests), the local scrape config, and the Grafana dashboard:
every query parses, and every kb_ metric the rules and panels use is one the services define."""

import json
import re
import subprocess

import pytest
import yaml

from tests.ops.tools import REPO, require

PROMETHEUS = REPO / "deploy/prometheus"
DASHBOARD = REPO / "deploy/grafana/kernelboard.json"
# Grafana's interval variables, given a value so that promtool can parse the panels' queries.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}
# Areas that own metrics, by name prefix; anything else is services/common's.
AREAS = ("ingest", "scheduler", "verifier", "board")


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [require("promtool"), *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=PROMETHEUS
    )


def alert_rules() -> list[dict]:
    groups = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def panels() -> list[dict]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def dashboard_queries() -> list[tuple[str, str]]:
    return [(f"{p['title']} / {t['refId']}", t["expr"]) for p in panels() for t in p["targets"]]


def test_alert_rules_pass_promtool_check():
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_alert_unit_tests_pass():
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_can_fail(tmp_path):
    """A rule changed to never fire makes promtool's unit tests fail: they test the rules, not themselves."""
    broken = (PROMETHEUS / "alerts.yml").read_text().replace("> 4 * 3600", "> 400 * 3600")
    (tmp_path / "alerts.yml").write_text(broken)
    (tmp_path / "alerts_test.yml").write_text((PROMETHEUS / "alerts_test.yml").read_text())
    result = subprocess.run(
        [require("promtool"), "test", "rules", "alerts_test.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode != 0 and "KernelboardHeldJobWaiting" in result.stdout + result.stderr


def test_every_alert_is_unit_tested_firing():
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yml").read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}
    declared = {rule["alert"] for rule in alert_rules()}
    assert declared - fired == set(), "alerts without a test that fires them"
    assert fired <= declared


def test_every_alert_says_what_and_how_bad():
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_the_local_scrape_config_is_valid():
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets == {
        "ingest": ["127.0.0.1:9101"],
        "scheduler": ["127.0.0.1:9102"],
        "verifier": ["127.0.0.1:9103"],
        "board": ["127.0.0.1:9104"],
        "relay": ["127.0.0.1:9105"],
        "web": ["127.0.0.1:9106"],
    }


def test_every_dashboard_query_parses(tmp_path):
    rules = []
    for index, (_, expr) in enumerate(dashboard_queries()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"unknown Grafana variable in {expr}"
        rules.append({"record": f"dashboard:query_{index}", "expr": expr})
    (tmp_path / "dashboard_rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run(
        [require("promtool"), "check", "rules", "dashboard_rules.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_has_the_panels_an_operator_needs():
    used = " ".join(expr for _, expr in dashboard_queries())
    needed = {
        "pushes accepted/refused": 'kb_ingest_pushes_total{result="refused"}',
        "check queue depth": "kb_verifier_queue_depth",
        "check durations": "kb_verifier_check_seconds_bucket",
        "check failures": "kb_verifier_failures_total",
        "held jobs": "kb_scheduler_held_jobs",
        "held jobs' age": "kb_scheduler_oldest_held_job_age_seconds",
        "projection lag": "kb_board_projection_lag_seconds",
        "gRPC latency": "kb_grpc_request_duration_seconds_bucket",
        "gRPC errors per service": "sum by (service) (rate(kb_grpc_requests_total{code=~",
        "relay lag": "kb_relay_lag_events",
        "dead-lettered events": "kb_consumer_dead_letters",
        "Slurm poll errors": "kb_scheduler_poll_errors_total",
        "auth token cache hits/bypasses": "kb_auth_token_cache_lookups_total",
        "auth change listener": "kb_auth_listener_connected",
        "runners up/down": "kb_verifier_runners",
        "checks waiting for a runner": "kb_verifier_slurm_queue_depth",
        "dispatch overhead": "kb_verifier_dispatch_seconds_bucket",
    }
    missing = [what for what, fragment in needed.items() if fragment not in used]
    assert not missing, f"no panel for: {missing}"


def test_the_dashboard_is_importable_grafana_json():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "kernelboard" and dashboard["schemaVersion"] >= 36
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def defined_metrics() -> dict[str, set[str]]:
    """The series names each metric defined under services/ exposes, by area (a prefix's service or common)."""
    pattern = re.compile(r"\b(counter|gauge|histogram|Counter|Gauge|Histogram)\(\s*\"(kb_[a-z0-9_]+)\"", re.S)
    exposed: dict[str, set[str]] = {}
    for path in (REPO / "services").rglob("*.py"):
        for kind, name in pattern.findall(path.read_text()):
            kind = kind.lower()
            if kind == "counter":
                names = {name if name.endswith("_total") else f"{name}_total"}
            elif kind == "histogram":
                names = {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            else:
                names = {name}
            exposed.setdefault(area_of(name), set()).update(names)
    return exposed


def area_of(metric: str) -> str:
    return next((area for area in AREAS if metric.startswith(f"kb_{area}_")), "common")


def used_metrics() -> set[str]:
    texts = [rule["expr"] for rule in alert_rules()] + [expr for _, expr in dashboard_queries()]
    return {name for text in texts for name in re.findall(r"\bkb_[a-z0-9_]+\b", text)}


# The services on this branch (all four once merged): each one's metrics are checked against its own code.
PRESENT = [area for area in AREAS if (REPO / "services" / area / "server.py").exists()]


@pytest.mark.parametrize("area", ["common", *PRESENT])
def test_rules_and_panels_use_only_metrics_the_services_define(area):
    used = {name for name in used_metrics() if area_of(name) == area}
    assert used, f"no rule or panel watches {area}"
    undefined = used - defined_metrics().get(area, set())
    assert not undefined, f"used in deploy/ but defined nowhere in services/: {sorted(undefined)}"
