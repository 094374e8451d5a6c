"""The opt-in real node of the local control plane: kubelet + containerd + runc on this host.

kwok fakes pods; the scheduler's own Deployment has to run for real (its image, its
ServiceAccount token, in-cluster configuration, probes). So `localcluster.py up --real-node`
adds one node whose pods are real containers, next to the kwok nodes. See
docs/control-plane.md ("The real node") for the design; in short:

- kubelet v1.37 (built from Go modules by hack/build-k8s.sh, cached like the other binaries),
  containerd + runc + CNI plugins from Debian's packages, all state under the cluster's state
  dir and /run/py-scheduler/<id>, so two clusters on one host do not meet (own sockets, own
  cgroup root, own bridge, own iptables chain).
- The sandbox image is built here (hack/pause/pause.go, static) and packed into an image
  archive: no registry is needed. Images are loaded with `ctr images import`.
- Pods get their own network namespace on a per-cluster bridge (Debian's bridge + host-local
  plugins, 10.88.N.0/24). The `kubernetes` Service (10.96.0.1:443) is made reachable from
  pods by one DNAT rule on that bridge to the apiserver on 127.0.0.1 (route_localnet on the
  bridge only): the one Service in-cluster configuration needs, where kube-proxy would
  program every Service host-wide (and two clusters' kube-proxies would fight over the same
  chains on a shared host).
- The node is tainted `py-scheduler.dev/real-node=true:NoSchedule` and labelled
  `py-scheduler.dev/real-node=true`: only pods that ask for it run for real.

Root is needed (containerd, cgroups, netns, iptables). Only the standard library is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODE_NAME = "real-node"
NODE_LABEL = "py-scheduler.dev/real-node"
NODE_TAINT = f"{NODE_LABEL}=true:NoSchedule"
PAUSE_IMAGE = "py-scheduler.local/pause:1"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
RUN_ROOT = Path("/run/py-scheduler")
SERVICE_PORT = 443
HOST_TOOLS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "ip": "iproute2",
}
READY_TIMEOUT = 180.0
STOP_GRACE = 15.0


class NodeError(RuntimeError):
    """A prerequisite is missing or the node did not come up; the message says what to do."""


def log(message: str) -> None:
    print(f"[realnode] {message}", flush=True)


def _succeeds(argv: Sequence[str]) -> bool:
    proc = subprocess.run(list(argv), capture_output=True, timeout=30, check=False)
    return proc.returncode == 0


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 120) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


# --------------------------------------------------------------------------------------------
# Prerequisites


def missing_prerequisites(bin_dir: Path) -> list[str]:
    """One line per missing piece, saying how to get it; empty when everything is there."""
    out = []
    if os.geteuid() != 0:
        out.append("the real node needs root (containerd, cgroups, network namespaces)")
    for tool, package in HOST_TOOLS.items():
        if shutil.which(tool) is None:
            out.append(f"'{tool}' is missing: apt-get install {package} (hack/node-deps.sh)")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).exists():
            out.append(
                f"CNI plugin {CNI_BIN_DIR / plugin} is missing: "
                "apt-get install containernetworking-plugins (hack/node-deps.sh)"
            )
    if not os.access(bin_dir / "kubelet", os.X_OK):
        out.append(f"no kubelet in {bin_dir}: run hack/build-k8s.sh kubelet")
    if (
        not Path("/sys/fs/cgroup/memory").is_dir()
        and not Path("/sys/fs/cgroup/cgroup.controllers").exists()
    ):
        out.append("no cgroup hierarchy under /sys/fs/cgroup")
    return out


def pause_archive(cache_root: Path, hack_dir: Path) -> Path:
    """Build hack/pause/pause.go (static) once and pack it as a docker-archive image."""
    source = hack_dir / "pause" / "pause.go"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out_dir = cache_root / "pause" / digest
    archive = out_dir / "pause.tar"
    if archive.exists():
        return archive
    if shutil.which("go") is None:
        raise NodeError("the sandbox image is built from hack/pause/pause.go: install Go >= 1.26")
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "pause"
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    proc = subprocess.run(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), str(source)],
        cwd=out_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise NodeError(f"go build {source} failed: {proc.stderr.strip()}")
    _write_docker_archive(archive, binary, PAUSE_IMAGE)
    return archive


def _write_docker_archive(archive: Path, binary: Path, tag: str) -> None:
    """The `docker save` format with one layer holding /pause; `ctr images import` reads it."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("pause")
        info.size = binary.stat().st_size
        info.mode = 0o755
        with open(binary, "rb") as handle:
            tar.addfile(info, handle)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64" if os.uname().machine == "x86_64" else os.uname().machine,
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "hack/realnode.py: hack/pause/pause.go, static"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": ["layer.tar"]}]
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in (
            ("layer.tar", layer_bytes),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(archive)


# --------------------------------------------------------------------------------------------
# Host facts


def host_ip() -> str:
    """The address the kernel would use towards the default route (no packet is sent)."""
    out = _run(["ip", "-4", "-o", "route", "get", "192.0.2.1"], check=False)
    words = out.split()
    if "src" in words:
        return words[words.index("src") + 1]
    for line in _run(["ip", "-4", "-o", "addr", "show", "scope", "global"]).splitlines():
        return line.split()[3].split("/")[0]
    raise NodeError("no global IPv4 address on this host for the kubelet's node IP")


def free_subnet(used_text: str, seed: int) -> ipaddress.IPv4Network:
    """A 10.88.N.0/24 that no address on this host is in (N from the seed, then the next)."""
    used = set()
    for line in used_text.splitlines():
        words = line.split()
        if len(words) > 3 and words[2] == "inet":
            used.add(ipaddress.ip_interface(words[3]).network)
    for step in range(254):
        net = ipaddress.ip_network(f"10.88.{(seed + step) % 254 + 1}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise NodeError("no free 10.88.N.0/24 for the real node's pod bridge")


def cgroup_v1_hierarchies() -> list[Path]:
    out = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup":
                out.append(Path(left.split()[4]))
    return out


def _mounts_under(prefixes: Sequence[Path]) -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].replace("\\040", " ")
            if any(point == str(p) or point.startswith(f"{p}/") for p in prefixes):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def _proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def _alive(pid: int, binary: str) -> bool:
    argv = _proc_cmdline(pid)
    return bool(argv) and Path(argv[0]).name == binary


# --------------------------------------------------------------------------------------------
# The node


@dataclass(frozen=True)
class NodeLayout:
    """Where one cluster's node keeps everything (derived from the cluster's state dir)."""

    state_dir: Path

    @property
    def ident(self) -> str:
        return hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:8]

    @property
    def node_dir(self) -> Path:
        return self.state_dir / "node"

    @property
    def run_dir(self) -> Path:  # short: unix socket paths are limited to 107 bytes
        return RUN_ROOT / self.ident

    @property
    def containerd_sock(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def bridge(self) -> str:  # at most 15 characters
        return f"pys{self.ident}"

    @property
    def chain(self) -> str:
        return f"PYSCHED-{self.ident}"

    @property
    def cgroup_root(self) -> str:
        return f"py-scheduler-{self.ident}"


def _write_containerd_config(layout: NodeLayout) -> Path:
    node = layout.node_dir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = shutil.which("runc") or "runc"
    text = f"""\
# Written by hack/realnode.py for the local cluster in {layout.state_dir}.
version = 2
root = "{node / "containerd" / "root"}"
state = "{layout.run_dir / "containerd"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{layout.containerd_sock}"
[ttrpc]
  address = "{layout.containerd_sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{node / "containerd" / "opt"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # The kubelet asks for oom_score_adj -998 (sandboxes) and below; lowering it needs
  # CAP_SYS_RESOURCE, which our CI machines do not grant even to root: clamp at ours.
  restrict_oom_score_adj = true
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{runc}"
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{node / "cni" / "net.d"}"
  max_conf_num = 1
"""
    path = node / "containerd.toml"
    path.write_text(text)
    return path


def _write_cni_config(layout: NodeLayout, subnet: ipaddress.IPv4Network) -> None:
    conf_dir = layout.node_dir / "cni" / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    conflist = {
        "cniVersion": "1.0.0",
        "name": f"py-scheduler-{layout.ident}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.node_dir / "cni" / "ipam"),
                },
            }
        ],
    }
    (conf_dir / "10-py-scheduler.conflist").write_text(json.dumps(conflist, indent=2) + "\n")


def _kubelet_config(
    layout: NodeLayout, *, node_ip: str, port: int, healthz_port: int, ca_file: Path
) -> dict[str, Any]:
    node = layout.node_dir
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This host has the cgroup v1 hierarchy; kubelet 1.35+ refuses it unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{layout.cgroup_root}",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "containerRuntimeEndpoint": f"unix://{layout.containerd_sock}",
        "address": node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": False,
        "podLogsDir": str(node / "pod-logs"),
        "volumePluginDir": str(node / "volume-plugins"),
        "serializeImagePulls": False,
        "maxPods": 30,
        # A shared CI disk: do not evict or collect images because other jobs fill it.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "protectKernelDefaults": False,
        "shutdownGracePeriod": "0s",
    }  # fmt: skip


def start(
    *,
    state_dir: Path,
    bin_dir: Path,
    pki_dir: Path,
    server: str,
    apiserver_port: int,
    images: Sequence[Path],
    cache_root: Path,
    hack_dir: Path,
    launch: Callable[[str, list[str], Callable[[], bool]], None],
    make_node_cert: Callable[[str], tuple[Path, Path]],
    write_kubeconfig: Callable[[Path, str, Path, Path], None],
    pick_port: Callable[[], int],
    node_ready: Callable[[str], bool],
    facts: dict[str, Any],
) -> dict[str, Any]:
    """Bring the node up; returns the facts `stop` needs (kept in the cluster's state file).

    ``launch(name, argv, ready)`` is the control plane's own process launcher (log file, pid
    bookkeeping, readiness wait); the others are small callbacks into localcluster.py so that
    this module needs no copy of its PKI and kubeconfig code. ``facts`` is filled in as
    things are made (the caller persists it), so that `stop` undoes a half-made node too."""
    missing = missing_prerequisites(bin_dir)
    if missing:
        raise NodeError("; ".join(missing))
    for image in images:
        if not image.is_file():
            raise NodeError(f"image archive {image} is missing: run `make image`")
    layout = NodeLayout(state_dir)
    facts.update(ident=layout.ident, state_dir=str(state_dir))
    layout.node_dir.mkdir(parents=True, exist_ok=True)
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    pause = pause_archive(cache_root, hack_dir)

    # containerd, then the images.
    config = _write_containerd_config(layout)
    sock = layout.containerd_sock
    ctr = ["ctr", "--address", str(sock), "--namespace", "k8s.io"]
    facts["containerd_sock"] = str(sock)
    launch(
        "containerd",
        ["containerd", "--config", str(config), "--log-level", "warn"],
        lambda: sock.exists() and _succeeds([*ctr, "version"]),
    )
    for archive in (pause, *images):
        log(f"importing {archive} into the node's containerd")
        _run([*ctr, "images", "import", str(archive)], timeout=600)

    # The pod network: our bridge, the DNAT for the `kubernetes` Service, the CNI config.
    subnet = free_subnet(_run(["ip", "-4", "-o", "addr", "show"]), int(layout.ident, 16))
    gateway = next(subnet.hosts())
    facts.update(bridge=layout.bridge, subnet=str(subnet))
    _run(["ip", "link", "add", "name", layout.bridge, "type", "bridge"])
    _run(["ip", "addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", layout.bridge])
    _run(["ip", "link", "set", layout.bridge, "up"])
    Path(f"/proc/sys/net/ipv4/conf/{layout.bridge}/route_localnet").write_text("1\n")
    service_ip = facts["service_ip"] = "10.96.0.1"
    facts["chain"] = layout.chain
    _run(["iptables", "-t", "nat", "-N", layout.chain])
    _run(
        [
            "iptables", "-t", "nat", "-A", layout.chain, "-d", f"{service_ip}/32", "-p", "tcp",
            "--dport", str(SERVICE_PORT), "-j", "DNAT",
            "--to-destination", f"127.0.0.1:{apiserver_port}",
        ]
    )  # fmt: skip
    _run(
        [
            "iptables", "-t", "nat", "-I", "PREROUTING", "-i", layout.bridge, "-j", layout.chain,
            "-m", "comment", "--comment", f"py-scheduler real node {state_dir}",
        ]
    )  # fmt: skip
    _write_cni_config(layout, subnet)

    # cgroups: our own root in every v1 hierarchy (the kubelet checks that it exists).
    facts["cgroup_root"] = layout.cgroup_root
    for hierarchy in cgroup_v1_hierarchies():
        root = hierarchy / layout.cgroup_root
        root.mkdir(exist_ok=True)
        if (hierarchy / "cpuset.cpus").exists():
            for key in ("cpuset.cpus", "cpuset.mems"):
                (root / key).write_text((hierarchy / key).read_text())

    # The kubelet.
    cert, key = make_node_cert(NODE_NAME)
    kubeconfig = layout.node_dir / "kubelet.kubeconfig"
    write_kubeconfig(kubeconfig, server, cert, key)
    node_ip = host_ip()
    port, healthz = pick_port(), pick_port()
    kubelet_config = _kubelet_config(
        layout, node_ip=node_ip, port=port, healthz_port=healthz, ca_file=pki_dir / "ca.crt"
    )
    (layout.node_dir / "kubelet.yaml").write_text(json.dumps(kubelet_config, indent=2) + "\n")
    facts.update(node_name=NODE_NAME, node_ip=node_ip, kubelet_port=port)
    launch(
        "kubelet",
        [
            str(bin_dir / "kubelet"),
            f"--config={layout.node_dir / 'kubelet.yaml'}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={layout.node_dir / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={node_ip}",
            f"--node-labels={NODE_LABEL}=true",
            f"--register-with-taints={NODE_TAINT}",
            "--v=1",
        ],
        lambda: node_ready(NODE_NAME),
    )
    log(f"node {NODE_NAME} Ready (kubelet {node_ip}:{port}, pods on {subnet} via {layout.bridge})")
    return facts


def stop(facts: Mapping[str, Any], components: Mapping[str, Mapping[str, Any]]) -> None:
    """Undo `start`, best effort and in order: kubelet, containers, containerd, mounts,
    network, cgroups. Only what this node made is touched (checked by name and pid)."""
    layout = NodeLayout(Path(facts["state_dir"]))
    kubelet = components.get("kubelet")
    if kubelet:
        _terminate(int(kubelet["pid"]), "kubelet")
    sock = Path(facts.get("containerd_sock", layout.containerd_sock))
    containerd = components.get("containerd")
    if containerd and _alive(int(containerd["pid"]), "containerd") and sock.exists():
        ctr = ["ctr", "--address", str(sock), "--namespace", "k8s.io"]
        tasks = _run([*ctr, "tasks", "ls", "-q"], check=False, timeout=30).split()
        for task in tasks:
            _run([*ctr, "tasks", "kill", "--signal", "SIGKILL", task], check=False, timeout=30)
        for task in tasks:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if _run([*ctr, "tasks", "delete", task], check=False, timeout=30) == "":
                    status = _run([*ctr, "tasks", "ls", "-q"], check=False, timeout=30)
                    if task not in status.split():
                        break
                time.sleep(0.2)
        for container in _run([*ctr, "containers", "ls", "-q"], check=False, timeout=30).split():
            _run([*ctr, "containers", "delete", container], check=False, timeout=30)
    if containerd:
        _terminate(int(containerd["pid"]), "containerd")
    # Shims that outlived containerd (they are started with our socket as -address).
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            argv = _proc_cmdline(int(pid_dir.name))
            if argv and "containerd-shim" in Path(argv[0]).name and str(sock) in argv:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_dir.name), signal.SIGKILL)
    # Container processes whose shim is gone (e.g. everything was SIGKILLed): by cgroup.
    if facts.get("cgroup_root"):
        for _ in range(50):
            pids = _cgroup_pids(layout.cgroup_root)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
    for point in _mounts_under([layout.node_dir, layout.run_dir]):
        _run(["umount", "--lazy", point], check=False)
    if facts.get("chain"):
        _run(
            [
                "iptables", "-t", "nat", "-D", "PREROUTING", "-i", layout.bridge, "-j",
                layout.chain, "-m", "comment", "--comment",
                f"py-scheduler real node {layout.state_dir}",
            ],
            check=False,
        )  # fmt: skip
        _run(["iptables", "-t", "nat", "-F", layout.chain], check=False)
        _run(["iptables", "-t", "nat", "-X", layout.chain], check=False)
    if facts.get("bridge"):
        _run(["ip", "link", "del", layout.bridge], check=False)
    if facts.get("cgroup_root"):
        for hierarchy in cgroup_v1_hierarchies():
            root = hierarchy / layout.cgroup_root
            if root.is_dir():
                for dirpath, _dirs, _files in sorted(
                    os.walk(root), key=lambda entry: len(entry[0]), reverse=True
                ):
                    with contextlib.suppress(OSError):
                        os.rmdir(dirpath)
    # The kubelet's /var/log/containers symlinks into our pod logs.
    links = Path("/var/log/containers")
    if links.is_dir():
        for link in links.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and os.readlink(link).startswith(f"{layout.node_dir}/"):
                    link.unlink()
    shutil.rmtree(layout.run_dir, ignore_errors=True)


def _cgroup_pids(cgroup_root: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in cgroup_v1_hierarchies():
        root = hierarchy / cgroup_root
        if not root.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(root):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError):
                    text = (Path(dirpath) / "cgroup.procs").read_text()
                    pids.update(int(p) for p in text.split())
        break  # one hierarchy lists every process
    return pids


def _terminate(pid: int, binary: str) -> None:
    if not _alive(pid, binary):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        if not _alive(pid, binary):
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
