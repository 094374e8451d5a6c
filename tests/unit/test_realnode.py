"""hack/realnode.py's pure parts: the pod subnet choice, the sandbox image archive, the
per-cluster names (kernel limits), the kubelet configuration this host needs."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from tests.scripts import load_script

realnode = load_script("hack/realnode.py")

ADDRS = """\
1: lo    inet 127.0.0.1/8 scope host lo
4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0
5: pysaaaa    inet 10.88.6.1/24 scope global pysaaaa
"""


@pytest.mark.parametrize(
    ("addrs", "seed", "want"),
    [
        pytest.param("", 5, "10.88.6.0/24", id="free-at-the-seed"),
        pytest.param(ADDRS, 5, "10.88.7.0/24", id="taken-by-another-bridge-next-one"),
        pytest.param("", 253, "10.88.254.0/24", id="last"),
        pytest.param("", 254, "10.88.1.0/24", id="wraps"),
    ],
)
def test_free_subnet_avoids_addresses_on_the_host(addrs: str, seed: int, want: str) -> None:
    assert str(realnode.free_subnet(addrs, seed)) == want


def test_names_fit_the_kernel_limits_for_a_deep_state_dir() -> None:
    layout = realnode.NodeLayout(Path("/root/.cache/py-scheduler/e2e/" + "x" * 80))
    assert len(layout.bridge) <= 15  # IFNAMSIZ - 1
    assert len(str(layout.containerd_sock) + ".ttrpc") < 108  # sun_path
    assert len(layout.chain) <= 28  # iptables chain names
    other = realnode.NodeLayout(Path("/root/.cache/py-scheduler/e2e/y"))
    assert other.ident != layout.ident and other.bridge != layout.bridge


def test_the_sandbox_archive_is_a_docker_save_with_one_layer(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    archive = tmp_path / "pause.tar"
    realnode._write_docker_archive(archive, binary, realnode.PAUSE_IMAGE)
    with tarfile.open(archive) as tar:
        (manifest,) = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert manifest["RepoTags"] == [realnode.PAUSE_IMAGE]
        layer = tar.extractfile(manifest["Layers"][0]).read()  # type: ignore[union-attr]
        config = json.loads(tar.extractfile(manifest["Config"]).read())  # type: ignore[union-attr]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert (
        manifest["Config"]
        == hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest() + ".json"
    )


def test_kubelet_configuration_for_this_host(tmp_path: Path) -> None:
    layout = realnode.NodeLayout(tmp_path)
    config = realnode._kubelet_config(
        layout, node_ip="192.0.2.2", port=1, healthz_port=2, ca_file=tmp_path / "ca.crt"
    )
    assert config["failCgroupV1"] is False  # cgroup v1 host
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == f"/{layout.cgroup_root}"  # not shared with another node
    assert config["containerRuntimeEndpoint"] == f"unix://{layout.containerd_sock}"
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["readOnlyPort"] == 0
