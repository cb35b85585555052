"""deploy/k8s rendered by kubectl kustomize (dev and prod) and validated offline by kubernetes-validate --strict.

Then the rendered objects are read for what the issue asks of them: NATS as a 3-node JetStream cluster, the services
with gRPC probes, resources, budgets and Services, the verifier on GPUs and reaching only NATS, PostgreSQL and DNS
(worked out from the NetworkPolicies as Kubernetes applies them), the scheduler's Slurm secrets, and the
repository's own scienceslack.json in the ConfigMap.
"""

import json
import re
import subprocess

import pytest
import yaml

from services.common.config import ServerConfig
from tests.ops.tools import REPO, require

OVERLAYS = ("dev", "prod")
SERVICES = {"ingest": (50051, 9101), "scheduler": (50052, 9102), "verifier": (50053, 9103), "board": (50054, 9104)}
# Custom resources kubernetes-validate has no schema for: checked here by their fields instead.
CRD_KINDS = {"dev": {"ServiceMonitor"}, "prod": {"ServiceMonitor", "Cluster", "ScheduledBackup"}}
# The oldest version the manifests need (native sidecars, grpc probes, appArmorProfile) and the newest
# kubernetes-validate knows.
K8S_VERSIONS = ("1.30.0", "1.37.0")


def render(overlay: str, *, restrictor: str = "LoadRestrictionsNone") -> subprocess.CompletedProcess:
    kubectl = require("kubectl")
    return subprocess.run(
        [kubectl, "kustomize", "--load-restrictor", restrictor, str(REPO / "deploy/k8s/overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request, tmp_path_factory):
    result = render(request.param)
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("k8s") / f"{request.param}.yaml"
    path.write_text(result.stdout)
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return request.param, path, objects


def find(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''} rendered"
    return found if name is None else found[0]


def matches(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions In/NotIn/Exists/DoesNotExist) against labels."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def test_the_default_load_restrictor_is_why_the_flag_is_documented():
    result = render("dev", restrictor="LoadRestrictionsRootOnly")
    assert result.returncode != 0 and "scienceslack.json" in result.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_validate_strict_passes_and_names_the_skipped_custom_resources(rendered, version):
    overlay, path, _ = rendered
    validate = require("kubernetes-validate")
    result = subprocess.run(
        [validate, "--strict", "-k", version, str(path)], capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ERROR" not in output
    skipped = set(re.findall(r"Couldn't find schema for kind (\w+)", output))
    assert skipped == CRD_KINDS[overlay], output
    print(f"{overlay} @ {version}: custom resources skipped by kubernetes-validate: {sorted(skipped)}")


def test_strict_validation_catches_a_misspelled_field(rendered, tmp_path):
    """The check above could not fail if --strict let unknown fields through: it does not."""
    _, path, _ = rendered
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", 1))
    result = subprocess.run(
        [require("kubernetes-validate"), "--strict", "-k", K8S_VERSIONS[0], str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "terminationGracePeriodSecond" in result.stdout + result.stderr


def test_everything_is_in_the_kernelboard_namespace(rendered):
    _, _, objects = rendered
    assert find(objects, "Namespace", "kernelboard")
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == "kernelboard", obj["metadata"]["name"]


def test_nats_is_a_three_node_jetstream_cluster_on_persistent_volumes(rendered):
    _, _, objects = rendered
    nats = find(objects, "StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    headless = find(objects, "Service", nats["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert {p["port"] for p in find(objects, "Service", "nats")["spec"]["ports"]} == {4222, 8222}
    config = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("nats-config"))
    conf = config["data"]["nats.conf"]
    assert "jetstream" in conf and "store_dir: /data/jetstream" in conf and "http: 8222" in conf
    routes = re.findall(r"nats://(nats-\d)\.nats-headless:6222", conf)
    assert routes == ["nats-0", "nats-1", "nats-2"]
    mounts = {m["mountPath"] for m in nats["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert "/data" in mounts


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_is_a_deployment_with_grpc_probes_resources_budget_and_service(rendered, service):
    overlay, _, objects = rendered
    grpc_port, metrics_port = SERVICES[service]
    deployment = find(objects, "Deployment", service)
    pod = deployment["spec"]["template"]
    container = next(c for c in pod["spec"]["containers"] if c["name"] == service)
    assert container["command"] == ["python", "-m", f"services.{service}.server"]
    assert container["image"] == f"kernelboard/{service}:{'dev' if overlay == 'dev' else '0.1.0'}"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == grpc_port
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": grpc_port, "metrics": metrics_port}
    env = {e["name"]: e for e in container["env"]}
    assert env["KB_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "kernelboard-db-app", "key": "uri"}
    assert container["envFrom"][0]["configMapRef"]["name"] == "kernelboard-env"
    labels = pod["metadata"]["labels"]
    budgets = [b for b in find(objects, "PodDisruptionBudget") if matches(b["spec"]["selector"], labels)]
    assert len(budgets) == 1
    svc = find(objects, "Service", service)
    assert matches({"matchLabels": svc["spec"]["selector"]}, pod["metadata"]["labels"])
    assert {p["port"] for p in svc["spec"]["ports"]} == {grpc_port, metrics_port}


@pytest.mark.parametrize("service", [*SERVICES, "relay"])
def test_ports_and_pools_are_set_by_the_variables_the_process_reads(rendered, service):
    """The env names are services/common/config.py's: read through ServerConfig, they give the container's ports."""
    _, _, objects = rendered
    container = find(objects, "Deployment", service)["spec"]["template"]["spec"]["containers"]
    container = next(c for c in container if c["name"] == service)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    config = ServerConfig.from_env(service, env)
    declared = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert config.metrics_port == declared["metrics"] and env[f"KB_{service.upper()}_METRICS_PORT"]
    if service in SERVICES:
        assert config.grpc_port == declared["grpc"] and env[f"KB_{service.upper()}_PORT"]
    assert (config.pool_min_size, config.pool_max_size) == (
        int(env["KB_PG_POOL_MIN_SIZE"]),
        int(env["KB_PG_POOL_MAX_SIZE"]),
    )


def test_the_relay_runs_once_and_serves_metrics(rendered):
    _, _, objects = rendered
    relay = find(objects, "Deployment", "relay")
    assert relay["spec"]["replicas"] == 1
    container = relay["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["python", "-m", "services.common.relay"]
    assert find(objects, "PodDisruptionBudget", "relay")


def test_env_config_points_at_nats_and_a_shared_kb_home(rendered):
    overlay, _, objects = rendered
    env = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kernelboard-env")
    assert env["data"]["KB_NATS_URL"] == "nats://nats:4222"
    claim = find(objects, "PersistentVolumeClaim", "kernelboard-home")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for service in ("ingest", "verifier", "scheduler"):
        pod = find(objects, "Deployment", service)["spec"]["template"]["spec"]
        home = next(v["name"] for v in pod["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName"))
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == home)
        assert mount["mountPath"] == env["data"]["KB_HOME"]
    if overlay == "dev":
        secret = find(objects, "Secret", "kernelboard-db-app")
        assert "uri" in secret["data"]


def test_scienceslack_json_is_the_repository_file(rendered):
    _, _, objects = rendered
    config = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("scienceslack-"))
    assert config["data"]["scienceslack.json"] == (REPO / "scienceslack.json").read_text()
    json.loads(config["data"]["scienceslack.json"])
    scheduler = find(objects, "Deployment", "scheduler")["spec"]["template"]["spec"]
    assert any(v.get("configMap", {}).get("name") == config["metadata"]["name"] for v in scheduler["volumes"])


def test_the_grafana_dashboard_ships_as_a_configmap_from_deploy_grafana(rendered):
    _, _, objects = rendered
    config = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("grafana-"))
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["data"]["kernelboard.json"] == (REPO / "deploy/grafana/kernelboard.json").read_text()


def test_the_scheduler_gets_slurm_conf_and_the_munge_key_from_secrets(rendered):
    _, _, objects = rendered
    pod = find(objects, "Deployment", "scheduler")["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    containers = {c["name"]: c for c in pod["containers"] + pod.get("initContainers", [])}
    mounts = {m["mountPath"]: m["name"] for c in containers.values() for m in c["volumeMounts"]}
    assert secrets[mounts["/etc/slurm"]] == "slurm-client"
    assert secrets[mounts["/etc/munge"]] == "munge-key"
    env = {e["name"]: e.get("value") for e in containers["scheduler"]["env"]}
    assert env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert containers["munged"]["restartPolicy"] == "Always"  # a native sidecar: up before the scheduler


def test_the_verifier_runs_on_gpu_nodes_in_prod_and_scales_on_its_queue(rendered):
    overlay, _, objects = rendered
    deployment = find(objects, "Deployment", "verifier")
    pod = deployment["spec"]["template"]["spec"]
    limits = pod["containers"][0]["resources"]["limits"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # What the check sandbox's unshare and mounts need (services/common/sandbox_setup.sh runs as root).
    security = pod["containers"][0]["securityContext"]
    assert security["capabilities"]["add"] == ["SYS_ADMIN"] and security["runAsUser"] == 0
    if overlay == "prod":
        assert limits["nvidia.com/gpu"] == 1
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert env["KB_VERIFIER_DEVICE"] == "cuda"
        assert "replicas" not in deployment["spec"]  # the HPA owns it
        hpa = find(objects, "HorizontalPodAutoscaler", "verifier")
        assert hpa["spec"]["scaleTargetRef"]["name"] == "verifier"
        assert hpa["spec"]["metrics"][0]["external"]["metric"]["name"] == "kb_verifier_queue_depth"
        assert hpa["spec"]["minReplicas"] >= 2
    else:
        assert "nvidia.com/gpu" not in limits and "nodeSelector" not in pod
        assert env["KB_VERIFIER_DEVICE"] == "cpu"


def test_postgresql_is_a_statefulset_in_dev_and_a_cloudnativepg_cluster_in_prod(rendered):
    overlay, _, objects = rendered
    if overlay == "dev":
        db = find(objects, "StatefulSet", "kernelboard-db")
        assert db["spec"]["template"]["metadata"]["labels"]["kernelboard.io/role"] == "database"
        assert find(objects, "Service", "kernelboard-db-rw")
        assert not [o for o in objects if o["kind"] == "Cluster"]
    else:
        cluster = find(objects, "Cluster", "kernelboard-db")
        assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
        assert cluster["spec"]["instances"] == 3
        assert int(cluster["spec"]["postgresql"]["parameters"]["max_connections"]) >= 200
        assert cluster["spec"]["inheritedMetadata"]["labels"]["kernelboard.io/role"] == "database"
        assert cluster["spec"]["backup"]["barmanObjectStore"]["destinationPath"]
        assert not [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "kernelboard-db"]


def test_service_monitors_cover_every_metrics_port(rendered):
    _, _, objects = rendered
    monitors = find(objects, "ServiceMonitor")
    scraped = set()
    for service in find(objects, "Service"):
        for monitor in monitors:
            if matches(monitor["spec"]["selector"], service["metadata"].get("labels", {})):
                names = {e["port"] for e in monitor["spec"]["endpoints"]}
                scraped |= {p["port"] for p in service["spec"]["ports"] if p["name"] in names}
    assert scraped == {9101, 9102, 9103, 9104, 9105, 9106}


def pod_groups(objects) -> dict[str, dict]:
    """Every pod the manifests run, by workload name, with its labels (CloudNativePG's pods: by the Cluster)."""
    groups = {}
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet"):
            groups[obj["metadata"]["name"]] = obj["spec"]["template"]["metadata"]["labels"]
        if obj["kind"] == "Cluster":
            labels = dict(obj["spec"]["inheritedMetadata"]["labels"])
            groups[obj["metadata"]["name"]] = {**labels, "cnpg.io/cluster": obj["metadata"]["name"]}
    return groups


def egress_of(objects, labels: dict) -> set[tuple[str, str]]:
    """What a pod with these labels may reach: (destination, port), unioned over the policies that select it."""
    groups = pod_groups(objects)
    allowed = set()
    for policy in find(objects, "NetworkPolicy"):
        spec = policy["spec"]
        if "Egress" not in spec.get("policyTypes", []) or not matches(spec["podSelector"], labels):
            continue
        for rule in spec.get("egress", []):
            ports = [str(p["port"]) for p in rule.get("ports", [])] or ["any"]
            for peer in rule.get("to", []) or [{}]:
                if "ipBlock" in peer:
                    targets = [f"ip:{peer['ipBlock']['cidr']}"]
                elif "namespaceSelector" in peer:
                    ns = peer["namespaceSelector"].get("matchLabels", {}).get("kubernetes.io/metadata.name", "*")
                    pods = peer.get("podSelector", {}).get("matchLabels", {})
                    targets = [f"{ns}/{','.join(f'{k}={v}' for k, v in pods.items())}"]
                elif "podSelector" in peer:
                    targets = [name for name, pod in groups.items() if matches(peer["podSelector"], pod)]
                else:
                    targets = ["anywhere"]
                allowed |= {(target, port) for target in targets for port in ports}
    return allowed


DNS = {("kube-system/k8s-app=kube-dns", "53")}


def test_the_verifier_reaches_only_nats_postgresql_and_dns(rendered):
    overlay, _, objects = rendered
    database = "kernelboard-db"
    labels = find(objects, "Deployment", "verifier")["spec"]["template"]["metadata"]["labels"]
    assert egress_of(objects, labels) == DNS | {("nats", "4222"), (database, "5432")}


@pytest.mark.parametrize("service", ["ingest", "board", "relay"])
def test_ingest_board_and_relay_reach_nats_and_postgresql(rendered, service):
    _, _, objects = rendered
    labels = find(objects, "Deployment", service)["spec"]["template"]["metadata"]["labels"]
    assert egress_of(objects, labels) == DNS | {("nats", "4222"), ("kernelboard-db", "5432")}


def test_the_scheduler_also_reaches_ingest_and_slurm(rendered):
    _, _, objects = rendered
    labels = find(objects, "Deployment", "scheduler")["spec"]["template"]["metadata"]["labels"]
    assert egress_of(objects, labels) == DNS | {
        ("nats", "4222"),
        ("kernelboard-db", "5432"),
        ("ingest", "50051"),
        ("ip:0.0.0.0/0", "6817"),
        ("ip:0.0.0.0/0", "6819"),
    }


def test_the_web_board_is_public_reaches_only_the_board_and_ingest_and_reads_its_token_from_a_secret(rendered):
    overlay, _, objects = rendered
    deployment = find(objects, "Deployment", "web")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert egress_of(objects, labels) == DNS | {("board", "50054"), ("ingest", "50051")}  # issues and pull requests
    public = [
        p
        for p in find(objects, "NetworkPolicy")
        if "Ingress" in p["spec"]["policyTypes"] and matches(p["spec"]["podSelector"], labels)
    ]
    assert any(
        rule.get("from") is None and rule["ports"] == [{"protocol": "TCP", "port": "http"}]
        for p in public
        for rule in p["spec"].get("ingress", [])
    )
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "services.web.server"]
    assert container["image"] == f"kernelboard/web:{'dev' if overlay == 'dev' else '0.1.0'}"
    env = {e["name"]: e["value"] for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (
        ports
        == {"http": int(env["KB_WEB_PORT"]), "metrics": int(env["KB_WEB_METRICS_PORT"])}
        == {
            "http": 8080,
            "metrics": 9106,
        }
    )
    assert env["KB_BOARD_ADDR"] == "board:50054"
    token_dir = env["KB_WEB_TOKEN_FILE"].rsplit("/", 1)[0]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == token_dir)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "web-token" and "KB_DATABASE_URL" not in env
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert find(objects, "PodDisruptionBudget", "web") and find(objects, "Service", "web")


def test_every_pod_is_under_the_default_deny(rendered):
    _, _, objects = rendered
    deny = find(objects, "NetworkPolicy", "default-deny")["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
