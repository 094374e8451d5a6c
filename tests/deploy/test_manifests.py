"""manifests/ against the code and the Dockerfile, without a cluster: the pieces that must
agree (names, ports, paths, user, lease) do, the configuration loads, and every RBAC rule
carries its reason. tests/e2e/test_deploy.py checks the same manifests on an API server."""

from __future__ import annotations

import asyncio
import inspect
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from scheduler import cli
from scheduler.config import parse_config
from scheduler.kube.auth import DelegatedAuth
from scheduler.server import ClientCert, HealthServer
from scheduler.servingcert import server_context
from tests.deploy.dockerfile import Dockerfile
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
EXAMPLES = MANIFESTS / "examples"
MAKEFILE = (REPO / "Makefile").read_text()


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _objects() -> dict[tuple[str, str], dict[str, Any]]:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for name in kustomization["resources"]:
        for doc in _docs(MANIFESTS / name):
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


OBJ = _objects()
SA = OBJ[("ServiceAccount", "py-scheduler")]
DEPLOYMENT = OBJ[("Deployment", "py-scheduler")]
CONFIGMAP = OBJ[("ConfigMap", "py-scheduler-config")]
POD = DEPLOYMENT["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]


def test_kustomization_lists_every_manifest_and_no_example() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    files = sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == files
    # The image is overridable by name; the default is the one `make image` builds.
    (image,) = kustomization["images"]
    assert f"{image['newName']}:{image['newTag']}" == CONTAINER["image"] == "py-scheduler:dev"
    assert image["name"] == CONTAINER["image"].split(":")[0]


def test_everything_namespaced_lives_in_kube_system() -> None:
    for (kind, name), obj in OBJ.items():
        if kind not in ("ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"].get("namespace") == "kube-system", f"{kind}/{name}"


def test_configmap_configuration_loads_and_matches_the_rbac_and_the_deployment() -> None:
    config = parse_config(yaml.safe_load(CONFIGMAP["data"]["config.yaml"]), "configmap.yaml")
    assert config.scheduler_name == "py-scheduler"
    assert config.http_bind_address == "0.0.0.0"  # probes and scrapes come to the pod IP
    le = config.leader_election
    assert le.leader_elect
    role = OBJ[("Role", "py-scheduler-leader-election")]
    assert role["metadata"]["namespace"] == le.resource_namespace
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[le.resource_name]]
    # One port for /healthz, /readyz and /metrics: config, container, scrape, image agree.
    (port,) = CONTAINER["ports"]
    assert port["name"] == "metrics" and port["containerPort"] == config.http_port == 10260
    annotations = DEPLOYMENT["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(config.http_port)
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    # kube-scheduler's secure port: HTTPS for the scrape and the probes alike.
    assert config.secure_serving.enabled
    assert annotations["prometheus.io/scheme"] == "https"
    (expose,) = Dockerfile.read(REPO / "Dockerfile").final.all("EXPOSE")
    assert expose.args == str(config.http_port)


def test_deployment_args_are_a_valid_run_command_reading_the_mounted_config() -> None:
    (entrypoint,) = Dockerfile.read(REPO / "Dockerfile").final.all("ENTRYPOINT")
    argv = [*yaml.safe_load(entrypoint.args), *CONTAINER["args"]]
    assert argv[:2] == ["py-scheduler", "run"]
    args = cli._parser().parse_args(argv[1:])
    assert args.command == "run" and args.verbosity == 2
    config_path = Path(args.config)
    (mount,) = [m for m in CONTAINER["volumeMounts"] if m["mountPath"] == str(config_path.parent)]
    assert mount["readOnly"]
    (volume,) = [v for v in POD["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == CONFIGMAP["metadata"]["name"]
    assert config_path.name in CONFIGMAP["data"]
    assert args.leader_elect is None, "leader election comes from the ConfigMap"


def test_deployment_is_ha_critical_and_locked_down() -> None:
    spec = DEPLOYMENT["spec"]
    assert spec["replicas"] == 2
    assert POD["serviceAccountName"] == SA["metadata"]["name"]
    assert POD["priorityClassName"] == "system-cluster-critical"
    assert "schedulerName" not in POD, "its own pods are placed by the default scheduler"
    (term,) = POD["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == spec["selector"]
    user = Dockerfile.read(REPO / "Dockerfile").final.all("USER")[0].args.split(":")[0]
    sc = CONTAINER["securityContext"]
    assert POD["securityContext"]["runAsNonRoot"] and sc["runAsNonRoot"]
    assert str(POD["securityContext"]["runAsUser"]) == str(sc["runAsUser"]) == user == "10001"
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert POD["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    for kind in ("requests", "limits"):
        assert set(CONTAINER["resources"][kind]) == {"cpu", "memory"}, kind
    probes = {k: CONTAINER[k]["httpGet"] for k in ("livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"] == {"scheme": "HTTPS", "path": "/healthz", "port": "metrics"}
    assert probes["readinessProbe"] == {"scheme": "HTTPS", "path": "/readyz", "port": "metrics"}
    assert CONTAINER["startupProbe"]["httpGet"]["scheme"] == "HTTPS"


class _DenyingApiServer:
    """Every TokenReview fails and every SubjectAccessReview denies: the probes must pass
    anyway (their paths are always allowed) and an anonymous /metrics must not."""

    def __init__(self) -> None:
        self.reviews: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.reviews.append(path.rsplit("/", 1)[-1])
        return {"status": {"authenticated": False, "allowed": False}}


def test_probe_paths_are_served_by_the_secure_port_without_credentials() -> None:
    """The probes' paths on the real HealthServer configured as the ConfigMap configures it
    (self-signed TLS, delegated auth): 200 when healthy/ready without any review, not 200
    when not; /metrics without a token is refused."""
    config = parse_config(yaml.safe_load(CONFIGMAP["data"]["config.yaml"]), "configmap.yaml")
    paths = [CONTAINER[k]["httpGet"]["path"] for k in ("startupProbe", "livenessProbe")]
    paths.append(CONTAINER["readinessProbe"]["httpGet"]["path"])
    api = _DenyingApiServer()
    auth = DelegatedAuth(api)  # type: ignore[arg-type]

    async def guard(
        method: str, path: str, authorization: str | None, cert: ClientCert | None
    ) -> tuple[int, str]:
        d = await auth.check(method, path, authorization, cert)
        return d.status, d.message

    async def probe(ok: bool) -> list[int]:
        tls, _ = server_context(
            cert_file=config.secure_serving.cert_file,
            key_file=config.secure_serving.key_file,
            bind_address="127.0.0.1",
        )
        server = HealthServer(
            host="127.0.0.1",
            port=0,
            healthy=lambda: ok,
            ready=lambda: ok,
            registry=CollectorRegistry(),
            tls=tls,
            guard=guard,
        )
        port = await server.start()
        try:
            codes = []
            for path in [*paths, "/metrics"]:
                url = f"https://127.0.0.1:{port}{path}"
                codes.append(await asyncio.to_thread(_status, url))
            return codes
        finally:
            await server.stop()

    assert asyncio.run(probe(True)) == [200, 200, 200, 403]
    assert api.reviews == ["subjectaccessreviews"]  # only /metrics was reviewed
    assert asyncio.run(probe(False))[:3] == [500, 500, 503]


def _status(url: str) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False  # as the kubelet: probes do not verify certificates
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as resp:  # loopback only
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_bindings_grant_the_roles_to_the_service_account() -> None:
    subject = {"kind": "ServiceAccount", "name": "py-scheduler", "namespace": "kube-system"}
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        (binding,) = [o for (k, _), o in OBJ.items() if k == kind]
        assert binding["subjects"] == [subject]
        assert (role_kind, binding["roleRef"]["name"]) in OBJ
        assert binding["roleRef"]["kind"] == role_kind


def test_every_rbac_rule_says_why_it_is_there() -> None:
    lines = (MANIFESTS / "rbac.yaml").read_text().splitlines()
    rules = [
        i
        for i, line in enumerate(lines)
        if line.strip().startswith(("- apiGroups:", "- nonResourceURLs:"))
    ]
    assert len(rules) == sum(
        len(o["rules"]) for (k, _), o in OBJ.items() if k in ("ClusterRole", "Role")
    )
    for i in rules:
        assert lines[i - 1].strip().startswith("#"), f"rbac.yaml:{i + 1} has no reason comment"


@pytest.mark.parametrize("name", ["priorityclasses.yaml", "deployment.yaml", "pdb.yaml"])
def test_walkthrough_applies_each_example(name: str) -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert f"kubectl apply -f manifests/examples/{name}" in readme


def test_the_commands_we_suggest_create_priority_classes_before_pods() -> None:
    """`kubectl apply -f DIR` applies files in name order (deployment.yaml before
    priorityclasses.yaml), and a pod whose PriorityClass does not exist yet is rejected by the
    Priority admission plugin: every suggested apply names the class file first."""
    for doc in (REPO / "Makefile", REPO / "README.md"):
        commands = re.findall(
            r"kubectl [^\n\"]*apply -f manifests/examples/[^\n\"]*", doc.read_text()
        )
        assert commands, f"{doc.name} suggests no apply"
        for command in commands:
            files = re.findall(r"-f (\S+)", command)
            assert files[0] == "manifests/examples/priorityclasses.yaml", (doc.name, command)


def _localcluster_default_cpu() -> str:
    """The CPU of the nodes `make run` creates (hack/localcluster.py create_nodes' default)."""
    module = load_script("hack/localcluster.py")  # the module tests/e2e/conftest.py uses
    return str(inspect.signature(module.create_nodes).parameters["cpu"].default)


def test_examples_are_what_the_walkthrough_says() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    mentioned = set(re.findall(r"manifests/examples/([\w.-]+\.yaml)", readme))
    assert mentioned == {p.name for p in EXAMPLES.glob("*.yaml")}
    classes = {d["metadata"]["name"]: d["value"] for d in _docs(EXAMPLES / "priorityclasses.yaml")}
    assert classes == {"high-priority": 1000000, "low-priority": 100}
    (deployment,) = _docs(EXAMPLES / "deployment.yaml")
    (pod,) = _docs(EXAMPLES / "pod-high-priority.yaml")
    low, high = deployment["spec"]["template"]["spec"], pod["spec"]
    for spec, klass in ((low, "low-priority"), (high, "high-priority")):
        assert spec["schedulerName"] == "py-scheduler"
        assert spec["priorityClassName"] == klass
    # Sized for `make run`'s three 4-CPU nodes: one replica per node, 1 CPU left on each,
    # so the high-priority pod fits only by preempting one replica (README.md).
    run_nodes = re.search(r"^RUN_NODES \?= (\d+)$", MAKEFILE, re.M)
    assert run_nodes, "Makefile: RUN_NODES"
    nodes = int(run_nodes.group(1))
    node_cpu = int(_localcluster_default_cpu())
    low_cpu = int(low["containers"][0]["resources"]["requests"]["cpu"])
    high_cpu = int(high["containers"][0]["resources"]["requests"]["cpu"])
    assert deployment["spec"]["replicas"] == nodes
    assert 2 * low_cpu > node_cpu >= low_cpu, "one replica per node"
    assert node_cpu - low_cpu < high_cpu <= node_cpu, "fits only where a replica goes"
    # The watch transcript shows the documented sequence.
    for step in ("Running", "Pending", "Terminating", "NOMINATED NODE"):
        assert step in readme, step
    assert "kubectl get pod -o wide -w" in readme


def test_the_pdb_keeps_one_replica_through_voluntary_disruptions() -> None:
    pdb = yaml.safe_load((MANIFESTS / "pdb.yaml").read_text())
    deployment = yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())
    assert pdb["metadata"]["namespace"] == "kube-system"
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert 0 < pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]
