"""Cache: the scheduler's own picture of nodes and the pods placed on them.

What it owns: NodeInfos (node + pods + running sums), the state of every pod it knows, and
the assumed pods of in-flight bindings. What it does not: queueing (backend/queue), and any
I/O (watch events reach it through ``scheduler.operator``; ``simulate`` feeds it from YAML).

Pod state machine (one per pod key)::

                     +-------------------------------------------+  +----+
                     |                 Add                       |  |    | Update
                     +                                           v  v    |
    Initial +--------> Assumed +------------+---> Added <--------+-------+
                          +     Confirm        +   (Add: the informer sees the binding)
                          |                    |
                     Forget (binding failed)   | Remove
                          |                    v
                          v                  Deleted
                       Initial

- assume_pod: the cycle decided a node; the pod counts on that node at once.
- finish_binding: the Binder returned; the pod stays assumed until the watch confirms it.
- forget_pod: binding failed; undo the assume.
- add_pod for an assumed pod confirms it (moving it if the real node differs).

An assumed pod never expires (upstream's durationToExpireAssumedPod is 0): a watch that lags
must not free room that a binding has taken, or the node is booked twice. Only the watch
(Add) or a failed binding (Forget) ends the Assumed state.

Nodes may be known only through their pods (a bound pod arrives before its node): such
a NodeInfo has ``node is None`` and is not schedulable; it disappears with its last pod.

Runtime complexity: add/update/remove of a pod or node O(1) amortised (plus O(#resources));
update_snapshot O(changed nodes) to re-clone and swap in place, plus O(nodes) to rebuild the
ordered lists when the node set or a node's affinity flags changed.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.types import NodeInfo, NodeRecord, PodInfo, pod_with

__all__ = ["Cache", "CacheError"]


class CacheError(RuntimeError):
    """An operation that contradicts the cache's state machine (a bug upstream of us)."""


@dataclass(slots=True)
class _PodState:
    pod: PodInfo
    assumed: bool = False
    binding_finished: bool = False


class Cache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        # Node name -> generation of its last change, oldest first: update_snapshot walks it
        # backwards and stops at the first entry its snapshot has already seen.
        self._recent: OrderedDict[str, int] = OrderedDict()
        self._pods: dict[str, _PodState] = {}
        # PersistentVolumeClaim "namespace/name" -> how many cached pods use it.
        self._claim_users: dict[str, int] = {}
        self._assumed = 0  # pods of _pods with assumed set (the cache_size gauge)
        self._generation = 0

    # ----------------------------------------------------------------- internals
    def _bump(self, name: str) -> int:
        self._generation += 1
        self._recent[name] = self._generation
        self._recent.move_to_end(name)
        return self._generation

    def _node_info(self, name: str) -> NodeInfo:
        ni = self._nodes.get(name)
        if ni is None:
            ni = self._nodes[name] = NodeInfo(None)
        return ni

    def _add_to_node(self, pod: PodInfo) -> None:
        ni = self._node_info(pod.node_name)
        ni.add_pod(pod, self._bump(pod.node_name))
        if pod.claims:
            self._count_claims(pod, 1)

    def _count_claims(self, pod: PodInfo, step: int) -> None:
        users = self._claim_users
        for key in {f"{pod.namespace}/{name}" for name, _ in pod.claims}:
            n = users.get(key, 0) + step
            if n > 0:
                users[key] = n
            else:
                users.pop(key, None)

    def claim_in_use(self, key: str) -> bool:
        """Whether a pod in the cache (bound or assumed) uses the PersistentVolumeClaim
        ``namespace/name`` (upstream's StorageInfos().IsPVCUsedByPods). O(1)."""
        return key in self._claim_users

    def _remove_from_node(self, pod: PodInfo) -> None:
        ni = self._nodes.get(pod.node_name)
        if ni is None:
            return
        if pod.claims and pod.key in ni.pods:
            self._count_claims(pod, -1)
        ni.remove_pod(pod.key, self._bump(pod.node_name))
        if ni.node is None and not ni.pods:
            del self._nodes[pod.node_name]

    # ----------------------------------------------------------------- pods
    def assume_pod(self, pod: PodInfo, node_name: str) -> PodInfo:
        """Count ``pod`` on ``node_name`` before the binding is confirmed. O(1)."""
        if pod.key in self._pods:
            raise CacheError(f"pod {pod.key} is already in the cache; cannot assume it")
        assumed = pod_with(pod, node_name=node_name)
        self._add_to_node(assumed)
        self._pods[pod.key] = _PodState(assumed, assumed=True)
        self._assumed += 1
        return assumed

    def finish_binding(self, key: str) -> None:
        """The binding call returned; the pod stays assumed until the watch confirms it."""
        st = self._pods.get(key)
        if st is not None and st.assumed:
            st.binding_finished = True

    def forget_pod(self, key: str) -> None:
        """Undo an assume (binding failed). A confirmed pod is left alone. O(1)."""
        st = self._pods.get(key)
        if st is None or not st.assumed:
            return
        self._remove_from_node(st.pod)
        del self._pods[key]
        self._assumed -= 1

    def is_assumed(self, key: str) -> bool:
        st = self._pods.get(key)
        return st is not None and st.assumed

    def add_pod(self, pod: PodInfo) -> None:
        """A bound pod seen by the watch. Confirms an assumed pod. O(1)."""
        if not pod.node_name:
            raise CacheError(f"pod {pod.key} has no node; only bound pods enter the cache")
        st = self._pods.get(pod.key)
        if st is not None:
            # Confirmation of an assume (possibly on another node), or a re-add: replace.
            self._remove_from_node(st.pod)
            self._assumed -= st.assumed
        self._add_to_node(pod)
        self._pods[pod.key] = _PodState(pod)

    def update_pod(self, pod: PodInfo) -> None:
        st = self._pods.get(pod.key)
        if st is None or st.assumed:
            self.add_pod(pod)
            return
        self._remove_from_node(st.pod)
        self._add_to_node(pod)
        st.pod = pod

    def remove_pod(self, key: str) -> PodInfo | None:
        st = self._pods.pop(key, None)
        if st is None:
            return None
        self._remove_from_node(st.pod)
        self._assumed -= st.assumed
        return st.pod

    def get_pod(self, key: str) -> PodInfo | None:
        st = self._pods.get(key)
        return st.pod if st is not None else None

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        """Pods counted on a node before the watch confirmed their binding. O(1)."""
        return self._assumed

    def node_count(self) -> int:
        """Nodes the cache holds, including placeholders for pods on unknown nodes (as
        upstream's cache_size{type="nodes"}). O(1)."""
        return len(self._nodes)

    # ----------------------------------------------------------------- nodes
    def add_node(self, node: NodeRecord) -> None:
        ni = self._node_info(node.name)
        ni.set_node(node, self._bump(node.name))

    def update_node(self, node: NodeRecord) -> None:
        ni = self._nodes.get(node.name)
        if ni is not None and ni.node == node:
            # Nothing the scheduler reads changed (a kubelet's or kwok's status heartbeat):
            # the snapshot need not copy the NodeInfo again. Upstream's UpdateNode bumps
            # the generation anyway; the snapshot it then builds is the same as this one.
            return
        self.add_node(node)

    def remove_node(self, name: str) -> None:
        ni = self._nodes.get(name)
        if ni is None:
            return
        if ni.pods:
            ni.node = None  # pods still reference it; keep a placeholder until they go
            self._bump(name)
        else:
            del self._nodes[name]
            self._bump(name)

    def node_names(self) -> list[str]:
        return [n for n, ni in self._nodes.items() if ni.node is not None]

    def get_node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # ----------------------------------------------------------------- snapshot
    def update_snapshot(self, snap: Snapshot) -> None:
        """Bring ``snap`` up to date: re-clone only NodeInfos changed since its generation.

        As upstream, the snapshot holds real nodes only (a placeholder NodeInfo, whose node
        is gone or not yet seen, is not schedulable and not listed). Whether the ordered
        lists must be rebuilt is decided from the changes walked here, so that any number of
        snapshots can be kept up to date from one cache."""
        rebuild = False
        changed: list[NodeInfo] = []
        for name, gen in reversed(self._recent.items()):
            if gen <= snap.generation:
                break
            ni = self._nodes.get(name)
            if ni is None or ni.node is None:
                if snap.node_info_map.pop(name, None) is not None:
                    rebuild = True
                continue
            old = snap.node_info_map.get(name)
            new = ni.clone()
            if (
                old is None
                or (old.pods_with_affinity > 0) != (new.pods_with_affinity > 0)
                or (old.pods_with_required_anti_affinity > 0)
                != (new.pods_with_required_anti_affinity > 0)
            ):
                rebuild = True
            snap.node_info_map[name] = new
            changed.append(new)
        if rebuild:
            snap.rebuild_lists()
        else:
            # Same node set: swap the changed clones into the ordered lists in place.
            for ni in changed:
                snap.swap_in(ni)
        snap.generation = self._generation

    # ----------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        placed: dict[str, str] = {}
        for name, ni in self._nodes.items():
            assert ni.node is None or ni.node.name == name, f"node {name} holds {ni.name}"
            assert ni.node is not None or ni.pods, f"empty placeholder node {name}"
            ni.check_invariants()
            for key in ni.pods:
                assert key not in placed, f"pod {key} on {placed[key]} and {name}"
                placed[key] = name
        assert set(placed) == set(self._pods), "pods in nodes != pods in the cache"
        for key, st in self._pods.items():
            assert st.pod.node_name == placed[key], f"pod {key} node mismatch"
            assert self._nodes[placed[key]].pods[key] is st.pod
            assert st.assumed or not st.binding_finished, f"confirmed pod {key} marked binding"
        assert self._assumed == sum(st.assumed for st in self._pods.values()), "assumed count"
        gens = list(self._recent.values())
        assert gens == sorted(gens), "recent-change order is not by generation"
        for name, ni in self._nodes.items():
            assert self._recent.get(name, -1) >= ni.generation, f"node {name} change not recorded"
