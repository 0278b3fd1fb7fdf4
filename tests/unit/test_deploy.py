"""deploy/: the compose file and the Kubernetes manifests parse, and hang together: every gateway
shares the Redis store and advertises its own address, workers register with the gateways, the
proxy upgrades WebSockets to both gateways, every OMNIVOX_* variable is a setting, Services select
the pods they name and reach their ports, and a stopping gateway drains. Where kubectl is installed,
``kubectl kustomize`` builds the manifests too (no cluster needed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from omnivox.core.config import Settings

DEPLOY = Path(__file__).parents[2] / "deploy"
SETTINGS = {f"OMNIVOX_{name.upper()}" for name in Settings.model_fields}


def _env_names(env: Any) -> set[str]:
    if isinstance(env, dict):
        return set(env)
    return {e["name"] for e in env}


def test_every_omnivox_variable_used_is_a_setting() -> None:
    used = set(re.findall(r"\bOMNIVOX_[A-Z_]+\b", "\n".join(p.read_text() for p in DEPLOY.rglob("*.y*ml"))))
    assert used - {"OMNIVOX_IMAGE"} <= SETTINGS, used - SETTINGS  # (OMNIVOX_IMAGE: compose's own)
    assert "OMNIVOX_STORE_URL" in used and "OMNIVOX_ADVERTISE_URL" in used


def test_the_compose_file_runs_two_gateways_on_one_store_behind_a_proxy() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    gateways = {n: s for n, s in services.items() if s.get("command", [None, None])[1:2] == ["gateway"]}
    workers = {n: s for n, s in services.items() if s.get("command", [None, None])[1:2] == ["worker"]}
    assert len(gateways) == 2 and len(workers) >= 1 and {"redis", "proxy"} <= set(services)
    for name, gateway in gateways.items():
        env = gateway["environment"]
        assert env["OMNIVOX_STORE_URL"] == "redis://redis:6379"
        assert env["OMNIVOX_ADVERTISE_URL"] == f"http://{name}:8000"
        assert "OMNIVOX_MEDIA_SECRET" in env  # media links open on any gateway
    for name, worker in workers.items():
        flags = dict(a.split("=", 1) for a in worker["command"] if a.startswith("--"))
        assert set(flags["--gateway"].split(",")) == {f"http://{g}:8000" for g in gateways}
        assert flags["--public-url"] == f"http://{name}:9000"
    for service in services.values():
        assert set(service.get("depends_on", [])) <= set(services)
    nginx = (DEPLOY / "compose" / "nginx.conf").read_text()
    assert all(f"server {g}:8000" in nginx for g in gateways)
    assert "proxy_set_header Upgrade $http_upgrade" in nginx and "proxy_read_timeout 3600s" in nginx


def _manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if d]
    return docs


def test_the_manifests_hang_together() -> None:
    docs = _manifests()
    for doc in docs:
        assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"]
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    deployments, services = by_kind["Deployment"], by_kind["Service"]
    assert set(deployments) == {"omnivox-redis", "omnivox-gateway", "omnivox-worker"}
    for service in services.values():  # each Service selects pods of a Deployment, on a named port
        target = next(
            d
            for d in deployments.values()
            if d["spec"]["template"]["metadata"]["labels"] == service["spec"]["selector"]
        )
        ports = {p["name"] for c in target["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    for deployment in deployments.values():
        assert (
            deployment["spec"]["selector"]["matchLabels"]
            == deployment["spec"]["template"]["metadata"]["labels"]
        )
    gateway = deployments["omnivox-gateway"]["spec"]
    container = gateway["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OMNIVOX_STORE_URL"] == "redis://omnivox-redis:6379" and "omnivox-redis" in services
    assert env["OMNIVOX_ADVERTISE_URL"] == "http://$(POD_IP):8000" and "POD_IP" in env
    assert gateway["replicas"] >= 2 and container["readinessProbe"]["httpGet"]["path"] == "/health"
    drain = "\n".join(container["lifecycle"]["preStop"]["exec"]["command"])
    assert "/api/drain" in drain and "active_sessions" in drain
    assert gateway["template"]["spec"]["terminationGracePeriodSeconds"] >= 60
    worker = deployments["omnivox-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert "--gateway=http://omnivox-gateway:8000" in worker["args"]
    assert "OMNIVOX_WORKER_PUBLIC_URL" in _env_names(worker["env"])
    ingress = by_kind["Ingress"]["omnivox"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "omnivox-gateway"
    secrets = by_kind["Secret"]["omnivox-keys"]["stringData"]
    assert {"OMNIVOX_API_KEY", "OMNIVOX_WORKER_KEY", "OMNIVOX_MEDIA_SECRET"} <= set(secrets)


def test_kubectl_builds_the_manifests_where_it_is_installed() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # the structural checks above stand alone
        return
    built = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "k8s")], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    assert len([d for d in yaml.safe_load_all(built.stdout) if d]) == len(_manifests())


def _exported_metrics() -> set[str]:
    """The metric families a real gateway app's /metrics names (counters as exported, _total)."""
    from fastapi.testclient import TestClient

    from omnivox.gateway.app import create_gateway_app

    text = TestClient(create_gateway_app(Settings())).get("/metrics").text
    families = set(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    names = {name for name, _ in families}
    names |= {f"{name}_total" for name, kind in families if kind == "counter"}
    names |= {
        f"{name}_{s}" for name, kind in families if kind == "histogram" for s in ("bucket", "sum", "count")
    }
    return names


def _expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "omnivox.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return exprs + [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_the_dashboard_and_alerts_name_only_metrics_the_gateway_exports() -> None:
    exported = _exported_metrics()
    named = {m for e in _expressions() for m in re.findall(r"\bomnivox_[a-z_]+\b", e)}
    assert named and named <= exported, named - exported
    # what the issue asks the dashboard to show
    for needed in ("omnivox_active_sessions", "omnivox_queue_length", "omnivox_voice_to_voice_seconds_bucket",
                   "omnivox_realtime_interruptions_total", "omnivox_errors_total", "omnivox_workers",
                   "omnivox_pipeline_stages_alive", "omnivox_turn_stage_seconds_bucket"):  # fmt: skip
        assert needed in named, needed


def test_the_alert_rules_cover_the_obvious_failures() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {"OmnivoxNoUsableWorker", "OmnivoxQueueWaitHigh", "OmnivoxErrorRateHigh"} <= names
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        assert rule["for"] and rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]
