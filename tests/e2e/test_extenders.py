"""Scheduler extenders (KubeSchedulerConfiguration ``extenders``) against the real API
server: an HTTP extender served by this test process on loopback, asked by a live
py-scheduler to filter, prioritize and bind, with what it is sent checked (the pod and Node
objects as the API server has them), its rejections in the FailedScheduling message, a pod
it turned away scheduled once it accepts and a cluster event comes, managed resources that
decide which pods it is asked about, and an extender that is down, ignorable or not."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, pod_manifest
from tests.jsonserver import JsonServer

Decide = Callable[[str, dict[str, Any]], Any]


class Extender:
    """An extender on 127.0.0.1: ``answer[verb](body)`` makes each reply; every call is
    kept as (verb, body)."""

    def __init__(self) -> None:
        self.answer: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.server = JsonServer(lambda path, body: (200, self.answer[_verb(path)](body)))
        self.url = self.server.url("/ext")

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        with self.server.lock:
            return [(_verb(path), body) for path, body in self.server.seen]

    def verbs_for(self, pod: str) -> list[str]:
        return [v for v, body in self.calls if _pod_name(body) == pod]

    def stop(self) -> None:
        self.server.stop()


def _verb(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _pod_name(body: dict[str, Any]) -> str:
    if "PodName" in body:
        return str(body["PodName"])
    return str(body["Pod"]["metadata"]["name"])


@pytest.fixture
def extender() -> Iterator[Extender]:
    ext = Extender()
    yield ext
    ext.stop()


def _names(body: dict[str, Any]) -> list[str]:
    if body.get("NodeNames") is not None:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]


def test_filter_and_prioritize_with_node_objects(
    kit: Kit, spawn_scheduler: Any, extender: Extender
) -> None:
    nodes = kit.nodes(3, cpu="4", memory="8Gi")
    banned, favourite = nodes[0], nodes[1]
    state = {"accept": True}

    def filter_(body: dict[str, Any]) -> Any:
        ok = [n for n in body["Nodes"]["items"] if n["metadata"]["name"] != banned]
        failed = {banned: "banned by the extender"}
        if not state["accept"]:
            ok, failed = [], {n: "the extender says wait" for n in _names(body)}
        return {"Nodes": {"items": ok}, "FailedNodes": failed, "Error": ""}

    def prioritize(body: dict[str, Any]) -> Any:
        return [{"Host": n, "Score": 10 if n == favourite else 0} for n in _names(body)]

    extender.answer = {"filter": filter_, "prioritize": prioritize}
    name = f"ext-{kit.ns}"[:60]
    sched = spawn_scheduler(
        name=name,
        config={
            "extenders": [
                {
                    "urlPrefix": extender.url,
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 5,
                }
            ]
        },
    )
    # The plugins spread these pods; the extender's 10 x 5 x 10 = 500 keeps every one on
    # its favourite, never on the banned node.
    for i in range(3):
        kit.create(f"p{i}", cpu="500m", memory="512Mi", scheduler=name)
        assert kit.wait_bound(f"p{i}") == favourite
    body = next(b for v, b in extender.calls if v == "filter")
    assert body["NodeNames"] is None
    sent = {n["metadata"]["name"]: n for n in body["Nodes"]["items"]}
    assert set(sent) == set(nodes)
    assert sent[banned]["metadata"]["labels"]["kubernetes.io/hostname"] == banned
    assert sent[banned]["status"]["allocatable"]["cpu"] == "4"
    assert body["Pod"]["metadata"]["namespace"] == kit.ns
    assert body["Pod"]["spec"]["schedulerName"] == name
    assert extender.verbs_for("p0") == ["filter", "prioritize"]

    # Turned away everywhere: the extender's reasons are the FailedScheduling message.
    state["accept"] = False
    kit.create("waits", cpu="500m", memory="512Mi", scheduler=name)
    ev = kit.wait_event("waits", "FailedScheduling")
    # Its three nodes: the extender's reason (other tests' nodes, if any, fail the pod's
    # node selector); then DefaultPreemption's "preemption: ..." part (nodes an extender
    # turned down are Unschedulable, so candidates, as upstream's).
    reasons = ev["message"].split(" preemption: ")[0]
    assert re.fullmatch(
        r"0/\d+ nodes are available: (.+, )?3 the extender says wait(, .+)?\.", reasons
    ), ev
    # No hint tells when an extender changes its mind: any cluster event brings the pod
    # back (upstream's Extender entry in its unschedulable plugins).
    state["accept"] = True
    kit.nodes(1, cpu="4", memory="8Gi")
    assert kit.wait_bound("waits", timeout=30) == favourite
    assert sched.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 4


def test_a_binder_extender_binds_and_managed_resources_choose_the_pods(
    kit: Kit, spawn_scheduler: Any, extender: Extender
) -> None:
    nodes = kit.nodes(2, cpu="4", memory="8Gi")

    def bind(body: dict[str, Any]) -> Any:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": body["PodName"], "uid": body["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]},
        }
        kit.core.create_namespaced_binding(body["PodNamespace"], binding, _preload_content=False)
        return {"Error": ""}

    extender.answer = {
        "filter": lambda body: {"NodeNames": [n for n in body["NodeNames"] if n == nodes[1]]},
        "bind": bind,
    }
    name = f"ext-{kit.ns}"[:60]
    spawn_scheduler(
        name=name,
        config={
            "extenders": [
                {
                    "urlPrefix": extender.url,
                    "filterVerb": "filter",
                    "bindVerb": "bind",
                    "nodeCacheCapable": True,
                    "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
                }
            ]
        },
    )
    # A pod asking for the managed resource: the extender filters (node names only) and
    # binds it; NodeResourcesFit ignores example.com/gpu, which no node advertises.
    body = pod_manifest("gpu", scheduler=name, node_selector=kit.selector)
    body["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "1"}
    kit.core.create_namespaced_pod(kit.ns, body)
    assert kit.wait_bound("gpu") == nodes[1]
    assert extender.verbs_for("gpu") == ["filter", "bind"]
    uid = kit.pod("gpu")["metadata"]["uid"]  # type: ignore[index]
    bind_body = next(b for v, b in extender.calls if v == "bind")
    assert (bind_body["PodUID"], bind_body["PodNamespace"]) == (uid, kit.ns)
    ev = kit.wait_event("gpu", "Scheduled")
    assert ev["message"] == f"Successfully assigned {kit.ns}/gpu to {nodes[1]}"
    # A pod without it: the extender is not asked; the Binding API binds it.
    kit.create("plain", scheduler=name)
    kit.wait_bound("plain")
    assert extender.verbs_for("plain") == []


def test_an_extender_that_is_down(kit: Kit, spawn_scheduler: Any, extender: Extender) -> None:
    kit.nodes(2, cpu="4", memory="8Gi")
    url = extender.url
    extender.stop()  # nothing listens there any more
    strict = f"strict-{kit.ns}"[:60]
    lenient = f"lenient-{kit.ns}"[:60]
    spawn_scheduler(
        name=strict,
        config={
            "profiles": [{}],
            "extenders": [{"urlPrefix": url, "filterVerb": "filter"}],
        },
    )
    spawn_scheduler(
        name=lenient,
        config={"extenders": [{"urlPrefix": url, "filterVerb": "filter", "ignorable": True}]},
    )
    kit.create("skipped", scheduler=lenient)
    kit.wait_bound("skipped")
    kit.create("failed", scheduler=strict)
    ev = kit.wait_event("failed", "FailedScheduling")
    assert ev["message"].startswith(f'Post "{url}/filter": '), ev["message"]
    cond = wait_for(
        lambda: kit.condition("failed", "PodScheduled"), 30, "the PodScheduled condition"
    )
    assert cond["reason"] == "SchedulerError"
    assert not kit.node_of("failed")


def test_an_extender_narrows_preemption(kit: Kit, spawn_scheduler: Any, extender: Extender) -> None:
    """DefaultPreemption finds two candidate nodes (one cheap victim each); the extender,
    sent the victims whole (nodeCacheCapable off), keeps only the second node and names
    its victim by UID: that pod is preempted, the preemptor nominated there and bound."""
    nodes = kit.nodes(2, cpu="1", memory="8Gi")
    name = f"ext-{kit.ns}"[:60]
    for i, n in enumerate(nodes):
        kit.create(f"low-{i}", cpu="800m", node_name=n, grace=0)
        kit.wait_running(f"low-{i}")
    keep = nodes[1]

    def preempt(body: dict[str, Any]) -> Any:
        victims = body["NodeNameToVictims"]
        pods = victims[keep]["Pods"]
        return {
            "NodeNameToMetaVictims": {
                keep: {
                    "Pods": [{"UID": p["metadata"]["uid"]} for p in pods],
                    "NumPDBViolations": 0,
                }
            }
        }

    extender.answer = {"preempt": preempt}
    spawn_scheduler(
        name=name,
        config={"extenders": [{"urlPrefix": extender.url, "preemptVerb": "preempt"}]},
    )
    high = kit.priority_class(1000)
    kit.create("high", cpu="800m", priority_class=high, scheduler=name)
    ev = kit.wait_event("low-1", "Preempted")
    assert ev["message"].startswith("Preempted by pod "), ev
    assert kit.wait_bound("high", timeout=60) == keep
    body = next(b for v, b in extender.calls if v == "preempt")
    assert body["NodeNameToMetaVictims"] is None
    sent = {
        n: [p["metadata"]["name"] for p in v["Pods"]] for n, v in body["NodeNameToVictims"].items()
    }
    assert sent == {nodes[0]: ["low-0"], nodes[1]: ["low-1"]}
    whole = body["NodeNameToVictims"][keep]["Pods"][0]
    assert whole["spec"]["nodeName"] == keep and whole["status"]["phase"] == "Running"
    assert kit.pod("low-0") is not None  # the other candidate's pod was left alone


def test_a_slow_extender_holds_the_cycle_not_the_loop(
    kit: Kit, spawn_scheduler: Any, extender: Extender
) -> None:
    """Each filter call takes 2 s, four pods 8 s and more, beyond the lease (6 s, renew
    deadline 4 s here): while a cycle waits, the loop serves /metrics, renews the lease
    and keeps its watches, as kube-scheduler's scheduling goroutine blocks only itself."""
    kit.nodes(2, cpu="4", memory="8Gi")
    inside = threading.Event()

    def slow(body: dict[str, Any]) -> Any:
        inside.set()
        time.sleep(2.0)
        return {"Nodes": body["Nodes"], "FailedNodes": {}}

    extender.answer = {"filter": slow}
    name = f"slow-{kit.ns}"[:60]
    lease = f"lease-{kit.ns}"[:60]
    sched = spawn_scheduler(
        name=name,
        leader_elect=True,
        lease_name=lease,
        config={"extenders": [{"urlPrefix": extender.url, "filterVerb": "filter"}]},
    )
    wait_for(lambda: sched.metric("py_scheduler_leader") == 1.0, 20, "leadership")
    coord = k8s.CoordinationV1Api(kit.cluster.api)
    before = coord.read_namespaced_lease(lease, "kube-system").spec
    for i in range(4):
        kit.create(f"p{i}", scheduler=name)
    assert inside.wait(20), "the extender was never called"
    t0 = time.monotonic()
    assert sched.metric("py_scheduler_leader") == 1.0  # answered by the loop, mid-call
    assert time.monotonic() - t0 < 1.5
    for i in range(4):
        kit.wait_bound(f"p{i}", timeout=60)
    after = coord.read_namespaced_lease(lease, "kube-system").spec
    assert sched.alive, sched.tail()
    assert after.holder_identity == before.holder_identity
    assert (after.lease_transitions or 0) == (before.lease_transitions or 0)
    assert after.renew_time > before.renew_time
    assert not sched.log_events("leader_lost"), sched.tail()
