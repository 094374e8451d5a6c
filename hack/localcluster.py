#!/usr/bin/env python3
"""A local Kubernetes control plane for py-scheduler's development and e2e tests.

Runs real etcd, kube-apiserver and kube-controller-manager processes on loopback ports, plus kwok,
which plays the kubelet for fake nodes (it makes pods Running and finishes graceful deletions).
No containers, no root, nothing bound outside 127.0.0.1. See docs/control-plane.md.

CLI:
    python hack/localcluster.py up [--nodes N] [--state-dir D] [--real-node [--image TAR ...]]
    python hack/localcluster.py down | status | kubeconfig [--state-dir D]
    python hack/localcluster.py nodes add --count N [--prefix P] [--cpu C] [--memory M] [--pods P]
                                          [--label k=v ...] [--taint k=v:Effect ...]
    python hack/localcluster.py kwok-config     # the kwok Stage config, e.g. for a kind cluster

Importable (the e2e fixture uses it):
    info = LocalCluster(state_dir).up(nodes=3)   # -> ClusterInfo(kubeconfig=..., log_dir=...)
    create_nodes(info.kubeconfig, 2, cpu="8", memory="16Gi")
    LocalCluster(state_dir).down()

Only the standard library and PyYAML are used; TLS material is made with the openssl CLI.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HACK_DIR = Path(__file__).resolve().parent
REPO_ROOT = HACK_DIR.parent

# What hack/build-k8s.sh builds and what KUBE_BIN_DIR must hold.
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
# What `up` runs, in start order.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")

# Env vars that pin a port instead of picking a free one; the key is the port's name in pids.json.
PORT_ENV = {
    "etcd": "PY_SCHEDULER_ETCD_PORT",
    "etcd-peer": "PY_SCHEDULER_ETCD_PEER_PORT",
    "kube-apiserver": "PY_SCHEDULER_APISERVER_PORT",
    "kube-controller-manager": "PY_SCHEDULER_KCM_PORT",
    "kwok": "PY_SCHEDULER_KWOK_PORT",
}

# Components whose port nothing but our readiness check talks to: a restart may move them.
MOVABLE_PORTS = ("kube-controller-manager", "kwok")

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the `kubernetes` service
POD_CIDR = "10.244.0.0/16"  # kwok hands out pod IPs from here; nothing routes them
SA_ISSUER = "https://kubernetes.default.svc"

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"
NODE_TYPE_LABEL = "type"
NODE_TYPE_VALUE = "kwok"
DEFAULT_NODE_PREFIX = "kwok-node-"
DEFAULT_DELETE_DELAY = "2s"
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

STATE_MARKER = ".py-scheduler-cluster"  # only directories holding it are ever wiped
STATE_VERSION = 1

# Start-up budgets (seconds) on a slow 2-core machine with cold caches.
READY_TIMEOUT = {
    "etcd": 60.0,
    "kube-apiserver": 180.0,
    "kube-controller-manager": 90.0,
    "kwok": 90.0,
    # The opt-in real node (hack/realnode.py).
    "kube-scheduler": 90.0,
    "containerd": 60.0,
    "kubelet": 240.0,
}
# What `up --real-node` adds to COMPONENTS: the default scheduler (it places the pods of the
# scheduler's own Deployment, as in any cluster), and the node's runtime and kubelet.
REAL_NODE_COMPONENTS = ("kube-scheduler", "containerd", "kubelet")
STOP_GRACE = 10.0


class ClusterError(RuntimeError):
    """Anything that stops the local control plane from coming up, reported to the user as is."""


def log(message: str) -> None:
    print(f"[localcluster] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Paths, versions, binaries


def read_versions() -> dict[str, str]:
    """KEY=VALUE pairs from hack/versions.env (the single place versions are pinned)."""
    versions: dict[str, str] = {}
    for raw in (HACK_DIR / "versions.env").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        versions[key.strip()] = value.strip().strip("\"'")
    return versions


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The same cache root hack/build-k8s.sh uses."""
    env = os.environ if env is None else env
    if env.get("PY_SCHEDULER_CACHE"):
        return Path(env["PY_SCHEDULER_CACHE"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "py-scheduler"


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("PY_SCHEDULER_CLUSTER_DIR"):
        return Path(env["PY_SCHEDULER_CLUSTER_DIR"]).expanduser()
    return cache_root(env) / "cluster"


def check_bin_dir(bin_dir: Path, origin: str = "KUBE_BIN_DIR") -> Path:
    """bin_dir if it holds every binary, executable; else a ClusterError naming what is missing."""
    needs = " ".join(BINARIES)
    if not bin_dir.is_dir():
        raise ClusterError(f"{origin}={bin_dir} is not a directory (it must hold: {needs})")
    missing = [b for b in BINARIES if not _is_executable(bin_dir / b)]
    if missing:
        hint = ""
        if origin == "KUBE_BIN_DIR":
            hint = "; unset KUBE_BIN_DIR to build them with hack/build-k8s.sh"
        raise ClusterError(
            f"{origin}={bin_dir} has no executable {', '.join(repr(m) for m in missing)} "
            f"(it must hold: {needs}){hint}"
        )
    return bin_dir.resolve()


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def resolve_bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """KUBE_BIN_DIR if set (and complete), else the dir hack/build-k8s.sh prints (cache/build)."""
    env = dict(os.environ if env is None else env)
    explicit = env.get("KUBE_BIN_DIR", "").strip()
    if explicit:
        return check_bin_dir(Path(explicit).expanduser())

    script = HACK_DIR / "build-k8s.sh"
    version = read_versions().get("KUBE_VERSION", "?")
    cached = cache_root(env) / f"k8s-{version}" / "bin"
    if not all((cached / f".{b}.ok").is_file() for b in BINARIES):
        log(f"binaries for Kubernetes {version} are not cached yet: running hack/build-k8s.sh")
        log("(the first build compiles from Go modules and takes 20-40 minutes on 2 cores)")
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            ["bash", str(script)], stdout=out, stderr=subprocess.PIPE, env=env, text=True
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line)
        code = proc.wait()
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    if code != 0:
        raise ClusterError(
            f"hack/build-k8s.sh failed with exit code {code}; its last output:\n" + "".join(tail)
        )
    lines = stdout.strip().splitlines()
    if not lines:
        raise ClusterError("hack/build-k8s.sh succeeded but printed no bin directory")
    return check_bin_dir(Path(lines[-1].strip()), origin="hack/build-k8s.sh output")


# --------------------------------------------------------------------------------------------
# Ports


def port_is_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux), else IANA's."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


def pick_free_port(avoid: set[int] | None = None) -> int:
    """A free loopback port below the ephemeral range when there is room (10000 and up).

    A component's port must stay its own while the component restarts: a port from the
    ephemeral range can be taken in between as the local end of any outgoing connection
    (the clients reconnecting to a restarted API server make many), and the restart then
    fails with the port in use. Ports below the range are only ever bound on purpose."""
    avoid = avoid or set()
    low, high = _ephemeral_range()
    candidates = (
        [p for p in range(10000, low) if p not in avoid]
        if low > 10000 + 1000
        else [p for p in range(high + 1, 65536) if p not in avoid]
    )
    rng = random.Random()
    for port in rng.sample(candidates, min(200, len(candidates))):
        if port_is_free(port):
            return port
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise ClusterError("could not find a free port on 127.0.0.1")


def _port_holders(port: int) -> str:
    """The sockets on a loopback port as ``ss`` lists them (with their processes when it may
    say), for an error message; empty when ``ss`` is missing."""
    try:
        out = subprocess.run(
            ["ss", "-Htanp"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [" ".join(line.split()) for line in out.splitlines() if f":{port} " in line]
    return "".join(f"\n  {line}" for line in lines[:10])


def _port_owner(key: str) -> str:
    return "etcd" if key.startswith("etcd") else key


def _port_label(key: str, port: int) -> str:
    suffix = " (peer)" if key == "etcd-peer" else ""
    return f"port {LOOPBACK}:{port}{suffix}"


def allocate_ports(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """One loopback port per PORT_ENV key: the pinned one from the env (checked free), else free."""
    env = os.environ if env is None else env
    ports: dict[str, int] = {}
    for key, var in PORT_ENV.items():
        raw = env.get(var, "").strip()
        if not raw:
            continue
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise ClusterError(f"{var}={raw!r} is not a port number")
        port = int(raw)
        if port in ports.values():
            raise ClusterError(f"{var}={port}: that port is pinned twice")
        if not port_is_free(port):
            raise ClusterError(
                f"{_port_owner(key)}: {_port_label(key, port)} is in use (pinned by {var})"
            )
        ports[key] = port
    for key in PORT_ENV:
        if key not in ports:
            ports[key] = pick_free_port(set(ports.values()))
    return ports


# --------------------------------------------------------------------------------------------
# TLS material (openssl CLI) and the admin kubeconfig


def _openssl(args: Sequence[str], cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ClusterError(
            f"openssl {args[0]} failed (exit {result.returncode}):\n{result.stderr.strip()}"
        )


def generate_pki(pki_dir: Path) -> None:
    """A throw-away CA; apiserver serving cert; admin client cert; service-account key pair."""
    if shutil.which("openssl") is None:
        raise ClusterError("the 'openssl' command is needed to make the cluster's certificates")
    pki_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(pki_dir, 0o700)
    days = "3650"
    _openssl(
        [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", days,
            "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=py-scheduler-local-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyCertSign,cRLSign",
        ],
        pki_dir,
    )  # fmt: skip
    sans = [
        f"IP:{LOOPBACK}",
        f"IP:{SERVICE_IP}",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ]
    leaves = {
        "apiserver": ("/CN=kube-apiserver", "serverAuth", "subjectAltName=" + ",".join(sans)),
        # O=system:masters: the group RBAC treats as cluster-admin.
        "admin": ("/O=system:masters/CN=py-scheduler-admin", "clientAuth", ""),
    }
    for serial, (name, (subject, usage, extra)) in enumerate(leaves.items(), start=2):
        ext = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if extra:
            ext.append(extra)
        (pki_dir / f"{name}.ext").write_text("\n".join(ext) + "\n")
        _openssl(
            [
                "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", subject,
            ],
            pki_dir,
        )  # fmt: skip
        _openssl(
            [
                "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-set_serial", str(serial), "-days", days, "-sha256",
                "-extfile", f"{name}.ext", "-out", f"{name}.crt",
            ],
            pki_dir,
        )  # fmt: skip
    _openssl(
        ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key"],
        pki_dir,
    )
    _openssl(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"], pki_dir)
    for key in pki_dir.glob("*.key"):
        os.chmod(key, 0o600)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def issue_client_cert(pki_dir: Path, name: str, subject: str) -> tuple[Path, Path]:
    """A client certificate signed by the cluster's CA (e.g. a kubelet's system:node:NAME)."""
    ext = pki_dir / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
    )
    _openssl(
        ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
         "-out", f"{name}.csr", "-subj", subject],
        pki_dir,
    )  # fmt: skip
    _openssl(
        ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "3650", "-sha256",
         "-extfile", f"{name}.ext", "-out", f"{name}.crt"],
        pki_dir,
    )  # fmt: skip
    os.chmod(pki_dir / f"{name}.key", 0o600)
    return pki_dir / f"{name}.crt", pki_dir / f"{name}.key"


def write_kubeconfig(
    path: Path,
    server: str,
    pki_dir: Path,
    cert: Path | None = None,
    key: Path | None = None,
) -> None:
    """Admin kubeconfig with the CA and client cert embedded (so it can be copied elsewhere);
    ``cert``/``key`` give another identity (the real node's kubelet)."""
    name = "py-scheduler-local"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": _b64(cert or pki_dir / "admin.crt"),
                    "client-key-data": _b64(key or pki_dir / "admin.key"),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    os.chmod(path, 0o600)


# --------------------------------------------------------------------------------------------
# kwok stages


def parse_duration_ms(text: str) -> int:
    """'2s', '1500ms', '1m', '0' or a bare number of seconds ('2.5') -> milliseconds."""
    value = text.strip().lower()
    units = {"ms": 1, "s": 1000, "m": 60_000}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|m)?", value)
    if not match:
        raise ValueError(f"not a duration: {text!r} (examples: 2s, 500ms, 0)")
    return int(float(match.group(1)) * units[match.group(2) or "s"])


def delete_delay_ms(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    raw = env.get("PY_SCHEDULER_KWOK_DELETE_DELAY", "").strip() or DEFAULT_DELETE_DELAY
    try:
        return parse_duration_ms(raw)
    except ValueError as err:
        raise ClusterError(f"PY_SCHEDULER_KWOK_DELETE_DELAY: {err}") from None


DEFAULT_NODE_LEASE_SECONDS = 40


def node_lease_seconds(env: Mapping[str, str] | None = None) -> int:
    """kwok's node lease duration (PY_SCHEDULER_NODE_LEASE_SECONDS, default 40; kwok renews
    every quarter of it). Thousands of fake nodes on 2 cores need longer: at 40 s, 5000 nodes
    are 500 lease renewals a second, more than kwok and the API server keep up with here,
    and nodes fall back to NotReady."""
    env = os.environ if env is None else env
    raw = env.get("PY_SCHEDULER_NODE_LEASE_SECONDS", "").strip()
    if not raw:
        return DEFAULT_NODE_LEASE_SECONDS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 10:
        raise ClusterError(
            f"PY_SCHEDULER_NODE_LEASE_SECONDS: {raw!r} is not a whole number of seconds >= 10"
        )
    return value


def _jq(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"jq": expression}


def _status_patch(template: str) -> dict[str, Any]:
    # Strategic merge keeps list entries we do not mention (e.g. the pod's PodScheduled condition).
    patch = {"subresource": "status", "root": "status", "type": "strategic", "template": template}
    return {"patch": patch}


def _stage(name: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind}, **spec},
    }


_READY_STATUS = '.status.conditions.[] | select(.type == "Ready") | .status'

# Go templates rendered by kwok (with its helper functions) into the status patch.
_NODE_READY_TEMPLATE = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
"""

# Refresh only the heartbeat time of every existing condition (merged by type).
_NODE_HEARTBEAT_TEMPLATE = """\
{{ $now := Now }}
conditions:
{{ range .status.conditions }}
- type: {{ .type | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
{{ end }}
"""

_POD_RUNNING_TEMPLATE = """\
{{ $now := Now }}
{{ $hostIP := NodeIPWith .spec.nodeName }}
{{ $podIP := PodIPWith .spec.nodeName (or .spec.hostNetwork false) (or .metadata.uid "") \
(or .metadata.name "") (or .metadata.namespace "") }}
phase: Running
startTime: {{ $now | Quote }}
{{ with $hostIP }}
hostIP: {{ . | Quote }}
hostIPs:
- ip: {{ . | Quote }}
{{ end }}
{{ with $podIP }}
podIP: {{ . | Quote }}
podIPs:
- ip: {{ . | Quote }}
{{ end }}
conditions:
{{ range list "PodReadyToStartContainers" "Initialized" "ContainersReady" "Ready" }}
- type: {{ . | Quote }}
  status: "True"
  lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: {{ printf "kwok://%s" .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: {{ printf "kwok://%s" .image | Quote }}
  ready: true
  restartCount: 0
{{ if .restartPolicy }}
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ else }}
  started: false
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
{{ end }}
"""


def _delete_delay_jq(cap_ms: int) -> str:
    """jq: milliseconds until the pod's deletionTimestamp, clamped to [0, cap_ms], as '<n>ms'.

    deletionTimestamp is `delete time + grace period`, so this is min(remaining grace, cap).
    If the expression fails kwok falls back to durationMilliseconds, which is the cap.
    """
    return (
        ".metadata.deletionTimestamp | fromdateiso8601 | (. - now) * 1000 | floor"
        f' | [., {cap_ms}] | min | [., 0] | max | "\\(.)ms"'
    )


def kwok_stages(delete_cap_ms: int) -> list[dict[str, Any]]:
    """The Stage objects kwok plays: nodes turn Ready (and heartbeat), pods on them turn Running,
    and a pod being deleted stays Terminating for min(its grace period, delete_cap_ms) before
    kwok removes it (as a kubelet would after stopping its containers)."""
    return [
        _stage(
            "py-scheduler-node-ready",
            "Node",
            {
                "selector": {"matchExpressions": [_jq(_READY_STATUS, "NotIn", "True")]},
                "steps": [_status_patch(_NODE_READY_TEMPLATE)],
            },
        ),
        _stage(
            "py-scheduler-node-heartbeat",
            "Node",
            {
                "selector": {"matchExpressions": [_jq(_READY_STATUS, "In", "True")]},
                # The node lease (renewed by kwok every 10s) is what the node lifecycle
                # controller watches; this only keeps the conditions' heartbeat times fresh.
                "delay": {"durationMilliseconds": 60_000, "jitterDurationMilliseconds": 66_000},
                "steps": [_status_patch(_NODE_HEARTBEAT_TEMPLATE)],
            },
        ),
        _stage(
            "py-scheduler-pod-running",
            "Pod",
            {
                "selector": {
                    "matchExpressions": [
                        _jq(".metadata.deletionTimestamp", "DoesNotExist"),
                        _jq(".status.phase", "In", "Pending"),
                    ]
                },
                "steps": [_status_patch(_POD_RUNNING_TEMPLATE)],
            },
        ),
        _stage(
            "py-scheduler-pod-delete",
            "Pod",
            {
                "selector": {
                    "matchExpressions": [
                        _jq(".metadata.deletionTimestamp", "Exists"),
                        # A finalizer keeps the pod until its owner removes it, as upstream.
                        _jq(".metadata.finalizers", "DoesNotExist"),
                    ]
                },
                "delay": {
                    "durationMilliseconds": delete_cap_ms,
                    "durationFrom": {"jq": {"expression": _delete_delay_jq(delete_cap_ms)}},
                },
                "steps": [{"delete": True}],
            },
        ),
    ]


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks so the written kwok config stays readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)


def kwok_config_yaml(delete_cap_ms: int) -> str:
    header = (
        "# kwok Stage config written by hack/localcluster.py (see docs/control-plane.md).\n"
        f"# Pod delete delay: min(grace period, {delete_cap_ms}ms)"
        " (PY_SCHEDULER_KWOK_DELETE_DELAY).\n"
    )
    body = yaml.dump_all(kwok_stages(delete_cap_ms), Dumper=_BlockDumper, sort_keys=False)
    return header + body


# --------------------------------------------------------------------------------------------
# A minimal Kubernetes API client (stdlib only)


class KubeApiError(ClusterError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


_NO_PROXY = urllib.request.ProxyHandler({})


class KubeClient:
    """Just enough of the REST API for nodes, service accounts and readiness, from a kubeconfig
    (embedded or file CA/client certs, bearer tokens; not exec or auth-provider plugins)."""

    def __init__(self, server: str, context: ssl.SSLContext | None, token: str | None = None):
        self.server = server.rstrip("/")
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        handlers: list[urllib.request.BaseHandler] = [_NO_PROXY]
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike[str]) -> KubeClient:
        path = Path(path)
        config = yaml.safe_load(path.read_text()) or {}
        base = path.parent

        def named(kind: str, name: str) -> dict[str, Any]:
            for item in config.get(kind) or []:
                if item.get("name") == name:
                    return dict(item.get(kind[:-1]) or {})
            raise ClusterError(f"{path}: no {kind[:-1]} named {name!r}")

        context = named("contexts", config.get("current-context", ""))
        cluster = named("clusters", context.get("cluster", ""))
        user = named("users", context.get("user", "")) if context.get("user") else {}
        if user.get("exec") or user.get("auth-provider"):
            raise ClusterError(
                f"{path}: exec/auth-provider credentials are not supported by this stdlib client"
            )

        def material(key: str) -> bytes | None:
            if cluster.get(f"{key}-data") or user.get(f"{key}-data"):
                return base64.b64decode(cluster.get(f"{key}-data") or user[f"{key}-data"])
            file = cluster.get(key) or user.get(key)
            return (base / file).read_bytes() if file else None

        ssl_context: ssl.SSLContext | None = None
        server = str(cluster.get("server", ""))
        if server.startswith("https://"):
            ssl_context = ssl.create_default_context()
            if cluster.get("insecure-skip-tls-verify"):
                ssl_context.check_hostname = False
                ssl_context.verify_mode = ssl.CERT_NONE
            else:
                ca = material("certificate-authority")
                if ca:
                    ssl_context.load_verify_locations(cadata=ca.decode())
            cert, key = material("client-certificate"), material("client-key")
            if cert and key:
                _load_client_cert(ssl_context, cert, key)
        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = (base / user["tokenFile"]).read_text().strip()
        return cls(server, ssl_context, token)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 15.0,
    ) -> Any:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            with contextlib.suppress(ValueError):
                detail = json.loads(detail).get("message", detail)
            raise KubeApiError(err.code, f"{method} {path}: {detail}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads client certs from files: write them privately, load, delete.
    with tempfile.TemporaryDirectory(prefix="localcluster-") as tmp:
        cert_file, key_file = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        for file, content in ((cert_file, cert), (key_file, key)):
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
        context.load_cert_chain(cert_file, key_file)


# --------------------------------------------------------------------------------------------
# Nodes


def parse_label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ClusterError(f"label {text!r} is not key=value")
    return key, value


def parse_taint(text: str) -> dict[str, str]:
    """'key=value:Effect' or 'key:Effect'."""
    head, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not head:
        raise ClusterError(
            f"taint {text!r} is not key[=value]:Effect (NoSchedule|PreferNoSchedule|NoExecute)"
        )
    key, _, value = head.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _node_ip(name: str) -> str:
    # A stable, distinct-looking InternalIP per node name (10.64.0.0/10); nothing routes it.
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{64 + digest[0] % 64}.{digest[1]}.{1 + digest[2] % 254}"


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int | str = 110,
    ephemeral_storage: str | None = "100Gi",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node that kwok manages (annotation kwok.x-k8s.io/node=fake) with the given resources.

    Status is accepted on create for nodes, so capacity/allocatable/addresses are set here;
    kwok then adds the Ready conditions. No taints unless asked for."""
    resources = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)}
    if ephemeral_storage:
        resources["ephemeral-storage"] = str(ephemeral_storage)
    all_labels = {
        NODE_TYPE_LABEL: NODE_TYPE_VALUE,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **(labels or {}),
    }
    versions = _versions_or_empty()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {KWOK_ANNOTATION: KWOK_ANNOTATION_VALUE},
        },
        "spec": {"taints": [dict(t) for t in taints or []]},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "addresses": [
                {"type": "InternalIP", "address": _node_ip(name)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": versions.get("KUBE_VERSION", ""),
                "containerRuntimeVersion": f"kwok://{versions.get('KWOK_VERSION', '')}",
                "kernelVersion": "",
                "osImage": "kwok",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kubeProxyVersion": "",
            },
        },
    }


def _versions_or_empty() -> dict[str, str]:
    try:
        return read_versions()
    except OSError:
        return {}


def node_is_ready(node: Mapping[str, Any]) -> bool:
    """Ready=True and without the not-ready/unreachable taints the control plane manages."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") in NOT_READY_TAINTS for t in taints)


def next_node_names(existing: Sequence[str], prefix: str, count: int) -> list[str]:
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    used = [int(m.group(1)) for n in existing if (m := pattern.fullmatch(n))]
    start = max(used) + 1 if used else 0
    return [f"{prefix}{i}" for i in range(start, start + count)]


def create_nodes(
    kubeconfig: str | os.PathLike[str],
    count: int,
    *,
    prefix: str = DEFAULT_NODE_PREFIX,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int | str = 110,
    ephemeral_storage: str | None = "100Gi",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str] | str] | None = None,
    wait: bool = True,
    timeout: float = 120.0,
) -> list[str]:
    """Create `count` kwok nodes named <prefix><n> (n continues after existing ones); wait until
    kwok has made them Ready and the node lifecycle controller has lifted the not-ready taint."""
    if count <= 0:
        return []
    client = KubeClient.from_kubeconfig(kubeconfig)
    taint_dicts = [parse_taint(t) if isinstance(t, str) else dict(t) for t in taints or []]
    existing = [n["metadata"]["name"] for n in client.request("GET", "/api/v1/nodes")["items"]]
    names = next_node_names(existing, prefix, count)
    for name in names:
        manifest = node_manifest(
            name,
            cpu=cpu,
            memory=memory,
            pods=pods,
            ephemeral_storage=ephemeral_storage,
            labels=labels,
            taints=taint_dicts,
        )
        client.request("POST", "/api/v1/nodes", manifest)
    log(f"created {count} kwok node(s): {', '.join(names)}")
    if wait:
        wait_nodes_ready(client, names, timeout)
    return names


def wait_nodes_ready(client: KubeClient, names: Sequence[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        pending = [
            n for n in pending if not node_is_ready(client.request("GET", f"/api/v1/nodes/{n}"))
        ]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"node(s) {', '.join(pending)} not Ready (or still tainted not-ready) after "
                f"{timeout:.0f}s: is kwok running and managing nodes annotated "
                f"{KWOK_ANNOTATION}={KWOK_ANNOTATION_VALUE}? (local cluster: see logs/kwok.log)"
            )
        time.sleep(0.25)


def count_kwok_nodes(client: KubeClient, prefix: str) -> int:
    nodes = client.request("GET", "/api/v1/nodes")["items"]
    return sum(1 for n in nodes if n["metadata"]["name"].startswith(prefix))


# --------------------------------------------------------------------------------------------
# Processes


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc/<pid>/stat, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # the command name may contain spaces
    return fields[0], int(fields[19])


def _proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def process_matches(pid: int, binary: str, starttime: int | None = None) -> bool:
    """True if pid is alive (not a zombie) and still the process we started: its argv[0] is the
    binary and, when known, its start time is the recorded one (guards against pid reuse)."""
    stat = _proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    argv = _proc_cmdline(pid)
    if not argv or Path(argv[0]).name != binary:
        return False
    return starttime is None or stat[1] == starttime


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    # SIGKILL, not SIGTERM: etcd's graceful stop waits for the apiserver's watch streams while
    # the apiserver's waits for etcd, and the pair would linger. The state is throw-away anyway.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        content = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])


_IN_USE = re.compile(r"address already in use", re.IGNORECASE)
_ADDR = re.compile(r"127\.0\.0\.1:(\d+)")


@dataclass
class Component:
    name: str
    argv: list[str]
    ports: dict[str, int]
    ready: Callable[[], bool]
    env: dict[str, str] | None = None


# --------------------------------------------------------------------------------------------
# The cluster


@dataclass(frozen=True)
class ClusterInfo:
    state_dir: Path
    kubeconfig: Path
    log_dir: Path
    server: str
    components: dict[str, dict[str, Any]] = field(default_factory=dict)


class LocalCluster:
    """The control plane kept in one state directory (pids.json, logs/, pki/, etcd/, ...)."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        bin_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool = False,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        chosen = state_dir if state_dir is not None else default_state_dir(self.env)
        self.state_dir = Path(chosen).expanduser().absolute()
        self.bin_dir = Path(bin_dir) if bin_dir is not None else None
        self.die_with_parent = die_with_parent
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # paths
    @property
    def pids_file(self) -> Path:
        return self.state_dir / "pids.json"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def kwok_config(self) -> Path:
        return self.state_dir / "kwok.yaml"

    def log_path(self, component: str) -> Path:
        return self.log_dir / f"{component}.log"

    # state file
    def read_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.pids_file.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.pids_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.pids_file)

    @property
    def lock_path(self) -> Path:
        """Next to the state dir, so it survives `down` (whoever owns the dir may delete it)."""
        return self.state_dir.parent / f".{self.state_dir.name}.lock"

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise up/down on one state dir."""
        self.state_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # health
    def _alive(self, state: Mapping[str, Any]) -> dict[str, bool]:
        return {
            name: process_matches(int(c["pid"]), c["binary"], c.get("starttime"))
            for name, c in (state.get("components") or {}).items()
        }

    def apiserver_ready(self, state: Mapping[str, Any] | None = None) -> bool:
        state = state if state is not None else self.read_state()
        if not state or not self.kubeconfig.exists():
            return False
        try:
            client = KubeClient.from_kubeconfig(self.kubeconfig)
            return bool(client.request("GET", "/readyz", timeout=5) == "ok")
        except (ClusterError, OSError, ssl.SSLError):
            return False

    @staticmethod
    def expected_components(state: Mapping[str, Any]) -> set[str]:
        extra = REAL_NODE_COMPONENTS if state.get("real_node") else ()
        return {*COMPONENTS, *extra}

    def healthy(self, state: Mapping[str, Any] | None = None) -> bool:
        state = state if state is not None else self.read_state()
        if not state:
            return False
        alive = self._alive(state)
        return (
            set(alive) == self.expected_components(state)
            and all(alive.values())
            and self.apiserver_ready(state)
        )

    def info(self, state: Mapping[str, Any] | None = None) -> ClusterInfo:
        state = state if state is not None else (self.read_state() or {})
        return ClusterInfo(
            state_dir=self.state_dir,
            kubeconfig=self.kubeconfig,
            log_dir=self.log_dir,
            server=str(state.get("server", "")),
            components=dict(state.get("components") or {}),
        )

    # up
    def up(
        self,
        nodes: int = 0,
        *,
        node_prefix: str = DEFAULT_NODE_PREFIX,
        real_node: bool = False,
        images: Sequence[Path] = (),
    ) -> ClusterInfo:
        """Start (or reuse) the control plane with ``nodes`` kwok nodes; ``real_node`` adds the
        kubelet + containerd node of hack/realnode.py, with the image archives ``images``
        imported into its containerd."""
        with self._lock():
            state = self.read_state()
            if state is not None:
                if self.healthy(state) and bool(state.get("real_node")) >= real_node:
                    log(f"already running: {state.get('server')} (state {self.state_dir})")
                    self._top_up_nodes(nodes, node_prefix)
                    return self.info(state)
                log(f"stale cluster state in {self.state_dir}: stopping leftovers, starting afresh")
                self._stop(state)
            self._wipe()
            return self._start(nodes, node_prefix, real_node, images)

    def _top_up_nodes(self, nodes: int, prefix: str) -> None:
        if nodes <= 0:
            return
        have = count_kwok_nodes(KubeClient.from_kubeconfig(self.kubeconfig), prefix)
        if have < nodes:
            create_nodes(self.kubeconfig, nodes - have, prefix=prefix)

    def _start(
        self, nodes: int, node_prefix: str, real_node: bool, images: Sequence[Path]
    ) -> ClusterInfo:
        started = time.monotonic()
        if self.bin_dir is not None:
            bin_dir = check_bin_dir(self.bin_dir, origin="bin_dir")
        else:
            bin_dir = resolve_bin_dir(self.env)
        delete_cap = delete_delay_ms(self.env)
        ports = allocate_ports(self.env)

        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        (self.state_dir / STATE_MARKER).write_text(
            "state of hack/localcluster.py; safe to delete\n"
        )
        self.log_dir.mkdir(exist_ok=True)
        log(f"state dir {self.state_dir}")
        log("generating certificates (openssl)")
        generate_pki(self.pki_dir)
        server = f"https://{LOOPBACK}:{ports['kube-apiserver']}"
        write_kubeconfig(self.kubeconfig, server, self.pki_dir)
        self.kwok_config.write_text(kwok_config_yaml(delete_cap))
        (self.state_dir / "kwok-home").mkdir(exist_ok=True)

        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "bin_dir": str(bin_dir),
            "server": server,
            "kubeconfig": str(self.kubeconfig),
            "log_dir": str(self.log_dir),
            "ports": ports,
            "components": {},
        }
        self._write_state(state)
        try:
            for component in self._components(bin_dir, ports):
                self._launch(component, state)
            self._wait_default_service_account()
            if nodes > 0:
                create_nodes(self.kubeconfig, nodes, prefix=node_prefix)
            if real_node:
                self._start_real_node(bin_dir, server, ports, state, images)
        except BaseException:
            log(f"start-up failed: stopping what was started (logs kept in {self.log_dir})")
            self._stop(state)
            self.pids_file.unlink(missing_ok=True)
            raise
        log(f"control plane ready in {time.monotonic() - started:.1f}s: {server}")
        return self.info(state)

    def _start_real_node(
        self,
        bin_dir: Path,
        server: str,
        ports: Mapping[str, int],
        state: dict[str, Any],
        images: Sequence[Path],
    ) -> None:
        realnode = load_realnode()
        client = KubeClient.from_kubeconfig(self.kubeconfig)

        def launch(name: str, argv: list[str], ready: Callable[[], bool]) -> None:
            self._launch(Component(name, argv, {}, ready), state)

        def node_ready(name: str) -> bool:
            node = client.request("GET", f"/api/v1/nodes/{name}", timeout=5)
            return node_is_ready(node)

        # Recorded before the start, so that a half-started node is cleaned up by _stop.
        state["real_node"] = {"state_dir": str(self.state_dir)}
        self._write_state(state)
        kubeconfig = str(self.kubeconfig)
        sched_port = pick_free_port(set(ports.values()))
        launch(
            "kube-scheduler",
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={sched_port}",
                f"--cert-dir={self.state_dir / 'kube-scheduler'}",
                "--leader-elect=false",
                f"--v={self.env.get('PY_SCHEDULER_CLUSTER_VERBOSITY', '1')}",
            ],
            lambda: _http_ok(f"https://{LOOPBACK}:{sched_port}/healthz", expect="ok"),
        )
        try:
            facts = realnode.start(
                state_dir=self.state_dir,
                bin_dir=bin_dir,
                pki_dir=self.pki_dir,
                server=server,
                apiserver_port=ports["kube-apiserver"],
                images=list(images),
                cache_root=cache_root(self.env),
                hack_dir=HACK_DIR,
                launch=launch,
                make_node_cert=lambda name: issue_client_cert(
                    self.pki_dir, "kubelet", f"/O=system:nodes/CN=system:node:{name}"
                ),
                write_kubeconfig=lambda path, srv, cert, key: write_kubeconfig(
                    path, srv, self.pki_dir, cert, key
                ),
                pick_port=lambda: pick_free_port(set(ports.values())),
                node_ready=node_ready,
                facts=state["real_node"],
            )
        except realnode.NodeError as err:
            raise ClusterError(f"real node: {err}") from err
        state["real_node"] = facts
        self._write_state(state)

    def _components(self, bin_dir: Path, ports: Mapping[str, int]) -> list[Component]:
        lease = node_lease_seconds(self.env)
        # The node lifecycle controller's patience: upstream's default (50 s) for the
        # default lease; for a longer one, the lease plus a renewal interval and a minute.
        grace_flags = (
            []
            if lease == DEFAULT_NODE_LEASE_SECONDS
            else [f"--node-monitor-grace-period={lease + lease // 4 + 60}s"]
        )
        pki = self.pki_dir
        verbosity = self.env.get("PY_SCHEDULER_CLUSTER_VERBOSITY", "1")
        etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
        peer_url = f"http://{LOOPBACK}:{ports['etcd-peer']}"
        kcm_port, kwok_port = ports["kube-controller-manager"], ports["kwok"]
        kubeconfig = str(self.kubeconfig)
        kwok_selector = f"{KWOK_ANNOTATION}={KWOK_ANNOTATION_VALUE}"
        return [
            Component(
                "etcd",
                [
                    str(bin_dir / "etcd"),
                    "--name=default",
                    f"--data-dir={self.state_dir / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=default={peer_url}",
                    "--initial-cluster-state=new",
                    "--unsafe-no-fsync=true",  # throw-away data: skip fsync, much faster on CI
                    "--log-level=warn",
                ],
                {"client": ports["etcd"], "peer": ports["etcd-peer"]},
                lambda: _http_ok(f"{etcd_url}/health", expect='"health":"true"'),
            ),
            Component(
                "kube-apiserver",
                [
                    str(bin_dir / "kube-apiserver"),
                    f"--etcd-servers={etcd_url}",
                    f"--bind-address={LOOPBACK}",
                    f"--advertise-address={LOOPBACK}",
                    f"--secure-port={ports['kube-apiserver']}",
                    f"--cert-dir={self.state_dir / 'apiserver'}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    "--authorization-mode=Node,RBAC",
                    f"--service-account-issuer={SA_ISSUER}",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    # On top of the default-on set (which already has these); named for clarity.
                    "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,Priority,"
                    "DefaultTolerationSeconds,TaintNodesByCondition,ResourceQuota,LimitRanger",
                    "--allow-privileged=true",
                    # 127.0.0.1 is not a valid Endpoints address: do not publish one.
                    "--endpoint-reconciler-type=none",
                    # `kubectl logs` on the real node: the apiserver's client cert towards
                    # kubelets, and their InternalIP (the Hostname address does not resolve).
                    f"--kubelet-client-certificate={pki / 'admin.crt'}",
                    f"--kubelet-client-key={pki / 'admin.key'}",
                    "--kubelet-preferred-address-types=InternalIP",
                    f"--v={verbosity}",
                ],
                {"secure": ports["kube-apiserver"]},
                self.apiserver_ready,
            ),
            Component(
                "kube-controller-manager",
                [
                    str(bin_dir / "kube-controller-manager"),
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    f"--bind-address={LOOPBACK}",
                    f"--secure-port={kcm_port}",
                    f"--cert-dir={self.state_dir / 'kube-controller-manager'}",
                    # Everything but pod CIDR allocation (nothing routes pod IPs here).
                    "--controllers=*,-node-ipam-controller",
                    "--leader-elect=false",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    f"--root-ca-file={pki / 'ca.crt'}",
                    # Lift the not-ready taint soon after kwok marks a node Ready.
                    "--node-monitor-period=2s",
                    *grace_flags,
                    "--kube-api-qps=100",
                    "--kube-api-burst=200",
                    f"--v={verbosity}",
                ],
                {"secure": kcm_port},
                lambda: _http_ok(f"https://{LOOPBACK}:{kcm_port}/healthz", expect="ok"),
            ),
            Component(
                "kwok",
                [
                    str(bin_dir / "kwok"),
                    f"--kubeconfig={kubeconfig}",
                    f"--config={self.kwok_config}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={kwok_selector}",
                    f"--cidr={POD_CIDR}",
                    f"--node-lease-duration-seconds={lease}",
                    f"--server-address={LOOPBACK}:{kwok_port}",
                ],
                {"server": kwok_port},
                lambda: _http_ok(f"http://{LOOPBACK}:{kwok_port}/healthz", expect="ok"),
                # kwok also reads ~/.kwok/kwok.yaml if present: point its home into the state dir.
                env={"KWOK_WORKDIR": str(self.state_dir / "kwok-home")},
            ),
        ]

    def _launch(self, component: Component, state: dict[str, Any]) -> None:
        name, log_path = component.name, self.log_path(component.name)
        for label, port in component.ports.items():
            if not port_is_free(port):
                key = "etcd-peer" if (name, label) == ("etcd", "peer") else name
                raise ClusterError(
                    f"{name}: {_port_label(key, port)} is in use{_port_holders(port)}"
                )
        env = dict(self.env)
        env.update(component.env or {})
        with open(log_path, "ab") as log_file:
            log_file.write(f"# {time.strftime('%F %T')} {' '.join(component.argv)}\n".encode())
            log_file.flush()
            proc = subprocess.Popen(
                component.argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.state_dir,
                start_new_session=True,
                preexec_fn=_set_pdeathsig if self.die_with_parent else None,
            )
        self._children[proc.pid] = proc
        stat = _proc_stat(proc.pid)
        state["components"][name] = {
            "pid": proc.pid,
            "starttime": stat[1] if stat else None,
            "binary": Path(component.argv[0]).name,
            "ports": component.ports,
            "log": str(log_path),
        }
        self._write_state(state)
        ports = " ".join(f"{k}={LOOPBACK}:{v}" for k, v in component.ports.items())
        log(f"started {name} (pid {proc.pid}, {ports}); waiting until ready")
        deadline = time.monotonic() + READY_TIMEOUT[name]
        while True:
            code = proc.poll()
            if code is not None:
                raise self._exited_error(name, code, log_path)
            with contextlib.suppress(Exception):
                if component.ready():
                    return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{name} did not become ready within {READY_TIMEOUT[name]:.0f}s; see {log_path}"
                    f"\n--- last lines of {log_path} ---\n{_log_tail(log_path)}"
                )
            time.sleep(0.25)

    @staticmethod
    def _exited_error(name: str, code: int, log_path: Path) -> ClusterError:
        tail = _log_tail(log_path)
        for line in reversed(tail.splitlines()):
            if _IN_USE.search(line):
                match = _ADDR.search(line)
                where = f"port {match.group(0)}" if match else "a port"
                return ClusterError(f"{name}: {where} is in use; see {log_path}\n{line.strip()}")
        how = f"code {code}" if code >= 0 else f"signal {-code}"
        return ClusterError(
            f"{name} exited with {how} during start-up; see {log_path}\n"
            f"--- last lines of {log_path} ---\n{tail}"
        )

    def _wait_default_service_account(self, timeout: float = 60.0) -> None:
        """Pods are rejected until the serviceaccount controller made default/default."""
        client = KubeClient.from_kubeconfig(self.kubeconfig)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
                return
            except KubeApiError as err:
                if err.status != 404 or time.monotonic() > deadline:
                    raise ClusterError(
                        "service account default/default was not created within "
                        f"{timeout:.0f}s; see {self.log_path('kube-controller-manager')}"
                    ) from err
            time.sleep(0.25)

    # restart one component (fault-injection in the e2e suite)
    def restart(self, name: str, *, down_seconds: float = 0.0) -> None:
        """Stop one running component (by its recorded pid) and start it again with the same
        arguments, ports and log file; ``down_seconds`` keeps it down that long."""
        with self._lock():
            state = self.read_state()
            if state is None:
                raise ClusterError(f"no cluster in {self.state_dir}")
            bin_dir = Path(state["bin_dir"])
            components = {c.name: c for c in self._components(bin_dir, state["ports"])}
            if name not in components or name not in (state.get("components") or {}):
                raise ClusterError(f"unknown component {name!r}; have {sorted(components)}")
            self._stop({"components": {name: state["components"][name]}})
            log(f"stopped {name} for a restart")
            time.sleep(down_seconds)
            component = components[name]
            if self._move_port_if_taken(name, state):
                component = {c.name: c for c in self._components(bin_dir, state["ports"])}[name]
            self._launch(component, state)

    def _move_port_if_taken(self, name: str, state: dict[str, Any]) -> bool:
        """A component whose port only our readiness check uses (kwok, the controller
        manager) gets a new port when its old one cannot be bound again: the old process's
        own connections can hold it in TIME-WAIT for a minute. A pinned port is never moved
        (the launch then reports it in use). Returns whether the port moved."""
        ports = state["ports"]
        if name not in MOVABLE_PORTS or self.env.get(PORT_ENV[name], "").strip():
            return False
        old = int(ports[name])
        if port_is_free(old):
            return False
        ports[name] = pick_free_port(set(ports.values()))
        self._write_state(state)
        log(f"{name}: port {LOOPBACK}:{old} is still held{_port_holders(old)}")
        log(f"{name}: restarting on port {LOOPBACK}:{ports[name]} instead")
        return True

    # down
    def down(self) -> None:
        with self._lock():
            state = self.read_state()
            if state is None and not self.state_dir.exists():
                log(f"no cluster in {self.state_dir}")
                return
            if state is not None:
                self._stop(state)
            self._wipe()
            log(f"stopped; removed {self.state_dir}")

    def _stop(self, state: Mapping[str, Any]) -> None:
        """SIGTERM exactly our recorded processes (if still the same command), SIGKILL later."""
        # One at a time in reverse start order: the apiserver shuts down in about a second while
        # etcd is up, but hangs in its graceful termination if etcd went first.
        components = state.get("components") or {}
        if state.get("real_node"):
            # Its own order (kubelet, containers, containerd, mounts, network, cgroups).
            try:
                load_realnode().stop(state["real_node"], components)
            except Exception as err:  # keep going: the control plane must still be stopped
                log(f"real node teardown: {err}")
        for name in reversed(list(components)):
            entry = components[name]
            pid, binary, start = int(entry["pid"]), entry["binary"], entry.get("starttime")
            if not process_matches(pid, binary, start):
                self._reap(pid)
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while time.monotonic() < deadline:
                self._reap(pid)
                if not process_matches(pid, binary, start):
                    break
                time.sleep(0.05)
            else:
                log(f"{name} (pid {pid}) ignored SIGTERM for {STOP_GRACE:.0f}s: SIGKILL")
                if process_matches(pid, binary, start):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self._reap(pid, block=True)

    def _reap(self, pid: int, block: bool = False) -> None:
        child = self._children.get(pid)
        if child is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5 if block else 0)
            self._children.pop(pid, None)

    def _wipe(self) -> None:
        if not self.state_dir.exists():
            return
        if not (self.state_dir / STATE_MARKER).exists() and any(self.state_dir.iterdir()):
            raise ClusterError(
                f"{self.state_dir} is not empty and was not made by hack/localcluster.py "
                f"(no {STATE_MARKER}); refusing to delete it: choose another --state-dir"
            )
        shutil.rmtree(self.state_dir)

    # status
    def status(self) -> dict[str, Any]:
        state = self.read_state()
        if state is None:
            return {"running": False, "state_dir": str(self.state_dir)}
        alive = self._alive(state)
        ready = self.apiserver_ready(state)
        components = {
            name: {**entry, "alive": alive.get(name, False)}
            for name, entry in (state.get("components") or {}).items()
        }
        return {
            "running": ready
            and all(alive.values())
            and set(alive) == self.expected_components(state),
            "state_dir": str(self.state_dir),
            "server": state.get("server"),
            "apiserver_ready": ready,
            "kubeconfig": str(self.kubeconfig),
            "log_dir": str(self.log_dir),
            "bin_dir": state.get("bin_dir"),
            "components": components,
        }


def load_realnode() -> Any:
    """hack/realnode.py (hack/ is not a package), loaded once."""
    if "realnode" in sys.modules:
        return sys.modules["realnode"]
    import importlib.util

    spec = importlib.util.spec_from_file_location("realnode", HACK_DIR / "realnode.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["realnode"] = module
    spec.loader.exec_module(module)
    return module


def _http_ok(url: str, expect: str) -> bool:
    """GET url (no proxy; TLS unverified, for the self-signed KCM cert) contains `expect`."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(_NO_PROXY, urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(url, timeout=2) as resp:
            return resp.status == 200 and expect in resp.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return False


# --------------------------------------------------------------------------------------------
# CLI


def _print_status(status: Mapping[str, Any]) -> None:
    if "components" not in status:
        print(f"no cluster (state dir {status['state_dir']})")
        return
    ready = "ready" if status["apiserver_ready"] else "NOT ready"
    print(f"state dir:  {status['state_dir']}")
    print(f"server:     {status['server']} ({ready})")
    print(f"kubeconfig: {status['kubeconfig']}")
    print(f"logs:       {status['log_dir']}")
    print(f"{'COMPONENT':<25} {'PID':>8}  {'ALIVE':<5}  PORTS")
    for name, entry in status["components"].items():
        ports = " ".join(f"{k}={LOOPBACK}:{v}" for k, v in entry.get("ports", {}).items())
        alive = "yes" if entry["alive"] else "no"
        print(f"{name:<25} {entry['pid']:>8}  {alive:<5}  {ports}")


def _cmd_up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.state_dir)
    images = [Path(p) for p in args.image]
    if args.real_node and not images:
        default = cache_root() / "images" / "py-scheduler-dev.tar"
        images = [default] if default.exists() else []
    info = cluster.up(nodes=args.nodes, real_node=args.real_node, images=images)
    print(f"kubeconfig: {info.kubeconfig}")
    print(f"logs:       {info.log_dir}")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    LocalCluster(args.state_dir).down()
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    status = LocalCluster(args.state_dir).status()
    _print_status(status)
    return 0 if status["running"] else 1


def _cmd_kubeconfig(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.state_dir)
    if not cluster.kubeconfig.exists():
        raise ClusterError(f"no cluster in {cluster.state_dir}: run `hack/localcluster.py up`")
    print(cluster.kubeconfig)
    return 0


def _cmd_nodes_add(args: argparse.Namespace) -> int:
    kubeconfig = args.kubeconfig or LocalCluster(args.state_dir).kubeconfig
    if not Path(kubeconfig).exists():
        raise ClusterError(f"no kubeconfig at {kubeconfig}: run `hack/localcluster.py up` first")
    names = create_nodes(
        kubeconfig,
        args.count,
        prefix=args.prefix,
        cpu=args.cpu,
        memory=args.memory,
        pods=args.pods,
        ephemeral_storage=args.ephemeral_storage or None,
        labels=dict(parse_label(label) for label in args.label),
        taints=[parse_taint(taint) for taint in args.taint],
    )
    for name in names:
        print(name)
    return 0


def _cmd_kwok_config(args: argparse.Namespace) -> int:
    sys.stdout.write(kwok_config_yaml(delete_delay_ms()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        default=None,
        help="state directory (default: $PY_SCHEDULER_CLUSTER_DIR or "
        "${PY_SCHEDULER_CACHE:-~/.cache/py-scheduler}/cluster)",
    )
    parser = argparse.ArgumentParser(
        prog="localcluster.py",
        description="Local control plane (etcd, kube-apiserver, kube-controller-manager, kwok) "
        "for py-scheduler. See docs/control-plane.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", parents=[common], help="start (or reuse) the control plane")
    up.add_argument("--nodes", type=int, default=0, help="kwok nodes to have (default 0)")
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also a real node: kubelet + containerd + runc on this host (root; see "
        "docs/control-plane.md)",
    )
    up.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="TAR",
        help="image archive (docker save) to import into the real node's containerd "
        "(default: the one `make image` saved, if any)",
    )
    up.set_defaults(func=_cmd_up)
    sub.add_parser("down", parents=[common], help="stop it and delete its state").set_defaults(
        func=_cmd_down
    )
    sub.add_parser("status", parents=[common], help="components, ports, paths").set_defaults(
        func=_cmd_status
    )
    sub.add_parser(
        "kubeconfig", parents=[common], help="print the admin kubeconfig path"
    ).set_defaults(func=_cmd_kubeconfig)
    sub.add_parser(
        "kwok-config", help="print the kwok Stage config (e.g. to run kwok against kind)"
    ).set_defaults(func=_cmd_kwok_config)

    nodes = sub.add_parser("nodes", help="manage kwok nodes")
    nodes_sub = nodes.add_subparsers(dest="nodes_command", required=True)
    add = nodes_sub.add_parser("add", parents=[common], help="create kwok nodes, wait Ready")
    add.add_argument("--count", type=int, required=True)
    add.add_argument("--prefix", default=DEFAULT_NODE_PREFIX)
    add.add_argument("--cpu", default="4")
    add.add_argument("--memory", default="32Gi")
    add.add_argument("--pods", default="110")
    add.add_argument("--ephemeral-storage", default="100Gi", help="'' to leave it out")
    add.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument("--taint", action="append", default=[], metavar="KEY[=VALUE]:EFFECT")
    add.add_argument("--kubeconfig", default=None, help="another cluster (default: the local one)")
    add.set_defaults(func=_cmd_nodes_add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ClusterError as err:
        print(f"localcluster: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
