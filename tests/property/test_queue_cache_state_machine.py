"""Hypothesis state machines for the scheduling queue and the cache.

Random add/update/delete/pop/fail/done/move/flush sequences drive the PriorityQueue on a
FakeClock, and add/update/remove/assume/forget/finish-binding/time-passing/node/snapshot sequences
drive the Cache. After every step ``check_invariants()`` runs, and a small model checks that
every pod added and not deleted is in exactly one place.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scheduler.backend.cache import Cache, Snapshot
from scheduler.backend.queue import (
    ACTIVE_Q,
    BACKOFF_Q,
    UNSCHEDULABLE_Q,
    PriorityQueue,
    QueuedPodInfo,
)
from scheduler.clock import FakeClock
from scheduler.framework.interface import ClusterEvent
from scheduler.framework.plugins import names
from scheduler.framework.plugins.nodeaffinity import NodeAffinity
from scheduler.framework.plugins.nodeports import NodePorts
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.framework.plugins.tainttoleration import TaintToleration
from scheduler.types import NodeRecord, PodInfo
from tests.builders import make_node, make_pod

SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
IN_FLIGHT = "in_flight"

# --------------------------------------------------------------------------- queue

QUEUE_NAMES = ["a", "b", "c", "d", "e"]
_PLUGINS: list[Any] = [NodeResourcesFit(), NodeAffinity(), TaintToleration(), NodePorts()]
HINTS = {p.name: list(p.events_to_register()) for p in _PLUGINS}
REJECTORS = [
    names.NODE_RESOURCES_FIT,
    names.NODE_AFFINITY,
    names.TAINT_TOLERATION,
    names.NODE_PORTS,
]


def _queue_pod(name: str, prio: int, nominated: str, variant: int) -> PodInfo:
    b = make_pod(name).req(cpu=f"{variant + 1}").priority(prio).host_port(8080)
    if nominated:
        b.nominated(nominated)
    if variant:
        b.node_selector(disk="ssd")
    return b.info()


QUEUE_PODS = {
    (n, p, nom, v): _queue_pod(n, p, nom, v)
    for n in QUEUE_NAMES
    for p in range(3)
    for nom in ("", "n1", "n2")
    for v in range(2)
}
_SSD = make_node("n1").label("disk", "ssd").record()
_PLAIN = make_node("n1").record()
_TAINTED = make_node("n1").taint("dedicated", "x").record()
_BIG = make_node("n1").alloc(cpu="64", memory="64Gi", pods=110).record()
_GONE = make_pod("gone").req(cpu="1").host_port(8080).node("n1").info()
EVENTS: list[tuple[ClusterEvent, Any, Any]] = [
    (ClusterEvent("Node", "Add"), None, _SSD),
    (ClusterEvent("Node", "Add"), None, _PLAIN),
    (ClusterEvent("Node", "Update"), _TAINTED, _PLAIN),
    (ClusterEvent("Node", "Update"), _PLAIN, _BIG),
    (ClusterEvent("Node", "Update"), _PLAIN, _PLAIN),
    (ClusterEvent("AssignedPod", "Delete"), _GONE, None),
    (ClusterEvent("PodDisruptionBudget", "Add"), None, None),
]

pod_choice = st.tuples(
    st.sampled_from(QUEUE_NAMES),
    st.integers(0, 2),
    st.sampled_from(["", "n1", "n2"]),
    st.integers(0, 1),
)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.q = PriorityQueue(self.clock, hints=HINTS)
        self.queued: set[str] = set()  # keys waiting in activeQ, backoffQ or unschedulable
        self.cycles: dict[str, QueuedPodInfo] = {}  # keys popped and not yet returned
        self.zombies: list[QueuedPodInfo] = []  # popped, then deleted during their cycle

    def _known(self, key: str) -> None:
        if key not in self.cycles:
            self.queued.add(key)

    @rule(choice=pod_choice)
    def add(self, choice: tuple[str, int, str, int]) -> None:
        pod = QUEUE_PODS[choice]
        self.q.add(pod)
        self._known(pod.key)

    @rule(choice=pod_choice)
    def update(self, choice: tuple[str, int, str, int]) -> None:
        pod = QUEUE_PODS[choice]
        self.q.update(pod)
        self._known(pod.key)

    @rule(name=st.sampled_from(QUEUE_NAMES))
    def delete(self, name: str) -> None:
        key = f"default/{name}"
        known = key in self.queued or key in self.cycles
        assert self.q.delete(key) is known
        self.queued.discard(key)
        if key in self.cycles:
            self.zombies.append(self.cycles.pop(key))
        assert self.q.nominator.nominated_node(key) is None

    @rule()
    def pop(self) -> None:
        qpi = self.q.pop()
        if qpi is None:
            assert self.q.counts()[ACTIVE_Q] == 0
            return
        key = qpi.pod.key
        assert key in self.queued, f"{key} popped but not queued"
        self.queued.remove(key)
        self.cycles[key] = qpi
        assert qpi.attempts >= 1 and not qpi.unschedulable_plugins

    @precondition(lambda self: self.cycles)
    @rule(data=st.data(), plugins=st.sets(st.sampled_from(REJECTORS), max_size=2))
    def fail(self, data: st.DataObject, plugins: set[str]) -> None:
        key = data.draw(st.sampled_from(sorted(self.cycles)))
        qpi = self.cycles.pop(key)
        qpi.unschedulable_plugins = set(plugins)
        qpi.errored = not plugins
        self.q.add_unschedulable_if_not_present(qpi)
        self.queued.add(key)
        where = self.q.where(key)
        if not plugins:
            assert where == BACKOFF_Q
        else:
            assert where in (BACKOFF_Q, UNSCHEDULABLE_Q)

    @precondition(lambda self: self.zombies)
    @rule()
    def fail_deleted(self) -> None:
        qpi = self.zombies.pop()
        before = self.q.where(qpi.pod.key)
        qpi.unschedulable_plugins = {names.NODE_RESOURCES_FIT}
        self.q.add_unschedulable_if_not_present(qpi)
        assert self.q.where(qpi.pod.key) == before  # a deleted pod's failure is dropped

    @precondition(lambda self: self.cycles)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.cycles)))
        del self.cycles[key]
        self.q.done(key)

    @rule(i=st.integers(0, len(EVENTS) - 1))
    def move(self, i: int) -> None:
        event, old, new = EVENTS[i]
        before = self.q.counts()[UNSCHEDULABLE_Q]
        moved = self.q.move_all_to_active_or_backoff(event, old, new)
        assert self.q.counts()[UNSCHEDULABLE_Q] == before - moved

    @rule()
    def flush_backoff(self) -> None:
        self.q.flush_backoff_completed()
        expiry = self.q.next_backoff_expiry()
        assert expiry is None or expiry > self.clock.now()

    @rule()
    def flush_unschedulable(self) -> None:
        self.q.flush_unschedulable_left_over()
        limit = self.q.max_unschedulable_duration
        for qpi in self.q._unschedulable.values():
            assert self.clock.now() - qpi.timestamp < limit

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 10.0, 301.0]))
    def tick(self, seconds: float) -> None:
        self.clock.step(seconds)

    @rule(chosen=st.sets(st.sampled_from(QUEUE_NAMES)))
    def activate(self, chosen: set[str]) -> None:
        self.q.activate(f"default/{n}" for n in chosen)

    @invariant()
    def every_pod_in_exactly_one_place(self) -> None:
        self.q.check_invariants()
        pending = self.q.pending_pods()
        keys = [p.key for lst in pending.values() for p in lst]
        assert len(keys) == len(set(keys)), "a pod in two sub-queues"
        assert set(keys) == self.queued
        for key, qpi in self.cycles.items():
            assert self.q.where(key) == IN_FLIGHT and self.q.get(key) is qpi
        assert len(self.q) == len(self.queued) + len(self.cycles)
        active = [(-p.priority, self.q.get(p.key).timestamp) for p in pending[ACTIVE_Q]]  # type: ignore[union-attr]
        assert active == sorted(active), "activeQ out of order"
        for key in (p.key for p in pending[UNSCHEDULABLE_Q]):
            qpi = self.q.get(key)
            assert qpi is not None and qpi.unschedulable_plugins and not qpi.errored


TestQueueStateMachine = QueueMachine.TestCase
TestQueueStateMachine.settings = SETTINGS

# --------------------------------------------------------------------------- cache

NODE_NAMES = ["n1", "n2", "n3"]
CACHE_POD_NAMES = ["a", "b", "c", "d"]
_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "zone"}
        ]
    }
}


def _cache_pod(name: str, node: str, variant: int) -> PodInfo:
    b = make_pod(name).req(cpu=f"{variant + 1}", memory="1Gi")
    if variant == 2:
        b.affinity(_AFFINITY).host_port(80)
    if node:
        b.node(node)
    return b.info()


CACHE_PODS = {
    (n, node, v): _cache_pod(n, node, v)
    for n in CACHE_POD_NAMES
    for node in ["", *NODE_NAMES]
    for v in range(3)
}


def _cache_node(name: str, variant: int) -> NodeRecord:
    b = make_node(name).alloc(cpu=str(4 * (variant + 1)), memory="8Gi", pods=110)
    if variant:  # images and taints: the snapshot's image counts and array flags follow
        b.image("shared:1", 1000).image(f"own-{name}:1", 10).taint("soft", "", "PreferNoSchedule")
        b.label("disk", "ssd")
    return b.record()


NODES: dict[tuple[str, int], NodeRecord] = {
    (n, v): _cache_node(n, v) for n in NODE_NAMES for v in range(2)
}


def _view(snap: Snapshot) -> dict[str, tuple[Any, ...]]:
    return {
        name: (ni.node, dict(ni.pods), ni.requested, ni.non_zero_cpu, ni.used_ports)
        for name, ni in snap.node_info_map.items()
    }


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.cache = Cache()
        self.snap = Snapshot()
        self.nodes: set[str] = set()  # nodes the cache has a record of
        self.pods: dict[str, str] = {}  # key -> node
        self.assumed: dict[str, None] = {}  # keys of assumed pods
        self.dirty: set[str] = set()  # nodes changed since the last update_snapshot

    def _touch(self, *nodes: str) -> None:
        self.dirty.update(n for n in nodes if n)

    @rule(node=st.sampled_from(NODE_NAMES), v=st.integers(0, 1))
    def add_or_update_node(self, node: str, v: int) -> None:
        if node in self.nodes:
            self.cache.update_node(NODES[node, v])
        else:
            self.cache.add_node(NODES[node, v])
        self.nodes.add(node)
        self._touch(node)

    @rule(node=st.sampled_from(NODE_NAMES))
    def remove_node(self, node: str) -> None:
        self.cache.remove_node(node)
        self.nodes.discard(node)
        self._touch(node)

    @rule(
        name=st.sampled_from(CACHE_POD_NAMES), node=st.sampled_from(NODE_NAMES), v=st.integers(0, 2)
    )
    def assume(self, name: str, node: str, v: int) -> None:
        key = f"default/{name}"
        if key in self.pods:
            return
        assumed = self.cache.assume_pod(CACHE_PODS[name, "", v], node)
        assert assumed.node_name == node and self.cache.is_assumed(key)
        self.pods[key] = node
        self.assumed[key] = None
        self._touch(node)

    @precondition(lambda self: self.assumed)
    @rule(data=st.data())
    def finish_binding(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.assumed)))
        self.cache.finish_binding(key)

    @precondition(lambda self: self.assumed)
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.assumed)))
        self.cache.forget_pod(key)
        self._touch(self.pods.pop(key))
        del self.assumed[key]

    @rule(
        name=st.sampled_from(CACHE_POD_NAMES), node=st.sampled_from(NODE_NAMES), v=st.integers(0, 2)
    )
    def add_pod(self, name: str, node: str, v: int) -> None:
        """A bound pod seen by the watch: confirms an assume, possibly on another node."""
        key = f"default/{name}"
        self.cache.add_pod(CACHE_PODS[name, node, v])
        self._touch(self.pods.get(key, ""), node)
        self.pods[key] = node
        self.assumed.pop(key, None)

    @precondition(lambda self: self.pods)
    @rule(data=st.data(), v=st.integers(0, 2))
    def update_pod(self, data: st.DataObject, v: int) -> None:
        key = data.draw(st.sampled_from(sorted(self.pods)))
        node = self.pods[key]
        self.cache.update_pod(CACHE_PODS[key.split("/")[1], node, v])
        self.assumed.pop(key, None)
        self._touch(node)

    @rule(name=st.sampled_from(CACHE_POD_NAMES))
    def remove_pod(self, name: str) -> None:
        key = f"default/{name}"
        removed = self.cache.remove_pod(key)
        assert (removed is not None) is (key in self.pods)
        if key in self.pods:
            self._touch(self.pods.pop(key))
            self.assumed.pop(key, None)

    @rule(seconds=st.sampled_from([1.0, 10.0, 31.0, 3600.0]))
    def time_passes(self, seconds: float) -> None:
        """Assumed pods never expire: time alone changes nothing."""
        self.clock.step(seconds)
        for key in self.assumed:
            assert self.cache.is_assumed(key), f"{key} stopped being assumed with time"

    @rule(fresh_first=st.booleans())
    def update_snapshot(self, fresh_first: bool) -> None:
        """Bring the long-lived snapshot up to date and compare it with one made from scratch
        (in either order: each snapshot must decide for itself what to rebuild)."""
        before = dict(self.snap.node_info_map)
        fresh = Snapshot()
        if fresh_first:
            self.cache.update_snapshot(fresh)
        self.cache.update_snapshot(self.snap)
        if not fresh_first:
            self.cache.update_snapshot(fresh)
        assert all(ni.node is not None for ni in self.snap.node_info_map.values())
        assert _view(self.snap) == _view(fresh)
        # The derived views (index, image counts, numpy rows) follow incremental updates.
        self.snap.check_invariants()
        self.snap.arrays()  # built now, so that later updates rewrite rows in place
        self.snap.label_mask("disk", "ssd")  # likewise
        assert self.snap.image_num_nodes == fresh.image_num_nodes
        assert sorted(ni.name for ni in self.snap.node_info_list) == sorted(self.cache.node_names())
        assert all(ni is self.snap.node_info_map[ni.name] for ni in self.snap.node_info_list)
        assert [ni.name for ni in self.snap.have_pods_with_affinity] == [
            ni.name for ni in self.snap.node_info_list if ni.pods_with_affinity
        ]
        for name, ni in before.items():
            if name not in self.dirty and name in self.snap.node_info_map:
                assert self.snap.node_info_map[name] is ni, f"unchanged {name} was re-cloned"
        self.dirty.clear()

    @invariant()
    def matches_the_model(self) -> None:
        self.cache.check_invariants()
        assert self.cache.pod_count() == len(self.pods)
        for key, node in self.pods.items():
            pod = self.cache.get_pod(key)
            assert pod is not None and pod.node_name == node
            assert self.cache.is_assumed(key) is (key in self.assumed)
            ni = self.cache.get_node(node)
            assert ni is not None and key in ni.pods  # in exactly one NodeInfo (check_invariants)
        assert sorted(self.cache.node_names()) == sorted(self.nodes)
        holding = set(self.pods.values())
        for node in NODE_NAMES:
            ni = self.cache.get_node(node)
            if node in self.nodes:
                assert ni is not None and ni.node is not None
            elif node in holding:
                assert ni is not None and ni.node is None  # a placeholder
            else:
                assert ni is None


TestCacheStateMachine = CacheMachine.TestCase
TestCacheStateMachine.settings = SETTINGS
