"""ImageLocality: image size scaled by how widely the image is spread, clamped between 23MB
and 1000MB per container. Case names and numbers mirror upstream's
imagelocality/image_locality_test.go."""

from __future__ import annotations

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import CycleState
from scheduler.framework.plugins.imagelocality import ImageLocality, normalized_image_name
from scheduler.types import NodeInfo, PodInfo
from tests.builders import NodeBuilder, make_node, make_pod

MB = 1024 * 1024


def node(name: str, *images: tuple[tuple[str, ...], int]) -> NodeInfo:
    b: NodeBuilder = make_node(name)
    for names, size_mb in images:
        b.image(names[0], size_mb * MB, *names[1:])
    return b.info()


def n403002000(name: str) -> NodeInfo:
    return node(
        name,
        (("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40),
        (("gcr.io/300:latest", "gcr.io/300:v1"), 300),
        (("gcr.io/2000:latest",), 2000),
    )


def n25010(name: str) -> NodeInfo:
    return node(name, (("gcr.io/250:latest",), 250), (("gcr.io/10:latest", "gcr.io/10:v1"), 10))


def n60040900(name: str) -> NodeInfo:
    return node(
        name,
        (("gcr.io/600:latest",), 600),
        (("gcr.io/40:latest",), 40),
        (("gcr.io/900:latest",), 900),
    )


def n300600900(name: str) -> NodeInfo:
    return node(
        name,
        (("gcr.io/300:latest",), 300),
        (("gcr.io/600:latest",), 600),
        (("gcr.io/900:latest",), 900),
    )


def n400030(name: str) -> NodeInfo:
    return node(name, (("gcr.io/4000:latest",), 4000), (("gcr.io/30:latest",), 30))


def n203040(name: str) -> NodeInfo:
    return node(
        name, (("gcr.io/20:latest",), 20), (("gcr.io/30:latest",), 30), (("gcr.io/40:latest",), 40)
    )


def images(*names: str) -> PodInfo:
    return make_pod("p").images(*names).info()


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            images("gcr.io/40", "gcr.io/250"),
            [n403002000("node1"), n25010("node2")],
            [0, 5],
            id="two images spread on two nodes, prefer the larger image one",
        ),
        pytest.param(
            images("gcr.io/40", "gcr.io/300"),
            [n403002000("node1"), n25010("node2")],
            [7, 0],
            id="two images on one node, prefer this node",
        ),
        pytest.param(
            images("gcr.io/10", "gcr.io/4000"),
            [n400030("node1"), n25010("node2")],
            [100, 0],
            id="if exceed limit, use limit",
        ),
        pytest.param(
            images("gcr.io/10", "gcr.io/4000"),
            [n400030("node1"), n25010("node2"), node("node3")],
            [66, 0, 0],
            id="if exceed limit, use limit (with node which has no images present)",
        ),
        pytest.param(
            images("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [n60040900("node1"), n300600900("node2"), node("node3")],
            [32, 36, 0],
            id="pod with multiple large images, node2 is preferred",
        ),
        pytest.param(
            images("gcr.io/30", "gcr.io/40"),
            [n203040("node1"), n400030("node2")],
            [1, 0],
            id="pod with multiple small images",
        ),
        pytest.param(
            make_pod("p").images("gcr.io/30").image_volume("gcr.io/300").info(),
            [n300600900("node1"), n400030("node2")],
            [6, 0],
            id="pod with ImageVolume",
        ),
        pytest.param(
            images("gcr.io/30", "gcr.io/300"),
            [n300600900("node1"), n400030("node2")],
            [6, 0],
            id="same images as ImageVolume pod but as regular container images",
        ),
        pytest.param(
            make_pod("p").images("gcr.io/30").init_container(image="gcr.io/300").info(),
            [n403002000("node1"), n203040("node2")],
            [6, 0],
            id="include InitContainers: two images spread on two nodes, prefer the "
            "larger image one",
        ),
        pytest.param(images(), [n403002000("node1")], [0], id="a pod without images scores 0"),
    ],
)
def test_score(pod: PodInfo, nodes: list[NodeInfo], want: list[int]) -> None:
    plugin = ImageLocality()
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes, Snapshot.from_node_infos(nodes)).is_success()
    got = [plugin.score(state, pod, ni) for ni in nodes]
    normalized = list(got)
    plugin.normalize_scores(state, pod, normalized)
    assert got == normalized == want


DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("root", "root:latest", id="add :latest postfix 1"),
        pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="add :latest postfix 2"),
        pytest.param("root:tag", "root:tag", id="keep it as is 1"),
        pytest.param(f"root@{DIGEST}", f"root@{DIGEST}", id="keep it as is 2"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want
