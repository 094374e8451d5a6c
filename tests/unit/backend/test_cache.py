"""Cache: the pod state machine (assume/finish_binding/forget/add/update/remove),
placeholder nodes, and incremental snapshots. ``check_invariants`` runs after every
mutation."""

from __future__ import annotations

import pytest

from scheduler.backend.cache import Cache, CacheError, Snapshot
from scheduler.clock import FakeClock
from scheduler.types import NodeInfo, PodInfo, Resource
from tests.builders import make_node, make_pod


class Checked:
    """A Cache whose every mutation is followed by ``check_invariants``."""

    def __init__(self) -> None:
        self.cache = Cache()

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.cache, name)
        if not callable(attr):
            return attr

        def checked(*args: object, **kw: object) -> object:
            out = attr(*args, **kw)
            self.cache.check_invariants()
            return out

        return checked


@pytest.fixture
def cache() -> Cache:
    return Checked()  # type: ignore[return-value]


def pod(name: str, node: str = "", cpu: str = "1") -> PodInfo:
    b = make_pod(name).req(cpu=cpu, memory="1Gi")
    if node:
        b.node(node)
    return b.info()


def requested(cache: Cache, node: str) -> int:
    ni = cache.get_node(node)
    assert ni is not None
    return ni.requested.milli_cpu


def snapshot_view(snap: Snapshot) -> dict[str, tuple[object, ...]]:
    """What a cycle can see: per node, its record, pods and sums."""
    return {
        name: (ni.node, dict(ni.pods), ni.requested, ni.non_zero_cpu, ni.used_ports)
        for name, ni in snap.node_info_map.items()
    }


def fresh_snapshot(cache: Cache) -> Snapshot:
    snap = Snapshot()
    cache.update_snapshot(snap)
    return snap


# --------------------------------------------------------------------------- pod states


def test_assume_counts_the_pod_at_once(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    assumed = cache.assume_pod(pod("p"), "n1")
    assert assumed.node_name == "n1"
    assert cache.is_assumed("default/p")
    assert requested(cache, "n1") == 1000
    assert cache.get_pod("default/p") == assumed
    with pytest.raises(CacheError, match="already in the cache"):
        cache.assume_pod(pod("p"), "n1")


def test_forget_undoes_an_assume(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.assume_pod(pod("p"), "n1")
    cache.forget_pod("default/p")
    assert cache.get_pod("default/p") is None and requested(cache, "n1") == 0
    cache.forget_pod("default/p")  # a second forget is a no-op


def test_forget_leaves_a_confirmed_pod_alone(cache: Cache) -> None:
    cache.add_pod(pod("p", "n1"))
    cache.forget_pod("default/p")
    assert cache.get_pod("default/p") is not None


def test_an_assumed_pod_never_expires_only_the_watch_or_a_failed_binding_ends_it(
    cache: Cache,
) -> None:
    """Upstream's durationToExpireAssumedPod = 0: a lagging watch must not free the room."""
    clock = FakeClock()
    cache.add_node(make_node("n1").record())
    cache.assume_pod(pod("p"), "n1")
    cache.finish_binding("default/p")
    clock.step(24 * 3600)
    assert cache.is_assumed("default/p") and requested(cache, "n1") == 1000
    cache.check_invariants()
    cache.forget_pod("default/p")  # the binding failed
    assert cache.get_pod("default/p") is None and requested(cache, "n1") == 0


def test_add_confirms_an_assumed_pod(cache: Cache) -> None:
    clock = FakeClock()
    cache.add_node(make_node("n1").record())
    cache.assume_pod(pod("p"), "n1")
    cache.finish_binding("default/p")
    cache.add_pod(pod("p", "n1"))
    assert not cache.is_assumed("default/p")
    clock.step(3600)
    cache.forget_pod("default/p")  # a late Forget leaves a confirmed pod alone
    assert requested(cache, "n1") == 1000


def test_add_confirms_an_assumed_pod_on_a_different_node(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.add_node(make_node("n2").record())
    cache.assume_pod(pod("p"), "n1")
    cache.add_pod(pod("p", "n2"))
    assert cache.get_pod("default/p").node_name == "n2"  # type: ignore[union-attr]
    assert (requested(cache, "n1"), requested(cache, "n2")) == (0, 1000)


def test_add_after_a_forget_adds_the_pod_again(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.assume_pod(pod("p"), "n1")
    cache.finish_binding("default/p")
    cache.forget_pod("default/p")
    cache.add_pod(pod("p", "n1"))
    assert requested(cache, "n1") == 1000 and not cache.is_assumed("default/p")


def test_update_replaces_the_record(cache: Cache) -> None:
    cache.add_pod(pod("p", "n1", cpu="1"))
    cache.update_pod(pod("p", "n1", cpu="3"))
    assert requested(cache, "n1") == 3000 and cache.pod_count() == 1


def test_update_of_an_assumed_pod_confirms_it(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.assume_pod(pod("p"), "n1")
    cache.update_pod(pod("p", "n1", cpu="2"))
    assert not cache.is_assumed("default/p") and requested(cache, "n1") == 2000


def test_update_of_an_unknown_pod_adds_it(cache: Cache) -> None:
    cache.update_pod(pod("p", "n1"))
    assert cache.get_pod("default/p") is not None


def test_remove(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    p = pod("p", "n1")
    cache.add_pod(p)
    assert cache.remove_pod("default/p") == p
    assert cache.remove_pod("default/p") is None
    assert requested(cache, "n1") == 0 and cache.pod_count() == 0


def test_only_bound_pods_are_added(cache: Cache) -> None:
    with pytest.raises(CacheError, match="no node"):
        cache.add_pod(pod("p"))


def test_finish_binding_of_unknown_or_confirmed_pod_is_a_no_op(cache: Cache) -> None:
    cache.finish_binding("default/nope")
    cache.add_pod(pod("p", "n1"))
    cache.finish_binding("default/p")
    assert cache.get_pod("default/nope") is None and not cache.is_assumed("default/p")


# --------------------------------------------------------------------------- nodes


def test_pods_arriving_before_their_node_make_a_placeholder(cache: Cache) -> None:
    cache.add_pod(pod("p", "n1"))
    ni = cache.get_node("n1")
    assert ni is not None and ni.node is None and requested(cache, "n1") == 1000
    assert cache.node_names() == []
    snap = fresh_snapshot(cache)
    assert snap.num_nodes() == 0 and snap.get("n1") is None  # not schedulable

    cache.add_node(make_node("n1").record())
    assert cache.node_names() == ["n1"]
    cache.update_snapshot(snap)
    got = snap.get("n1")
    assert got is not None and set(got.pods) == {"default/p"}
    assert [ni.name for ni in snap.node_info_list] == ["n1"]


def test_placeholder_goes_with_its_last_pod(cache: Cache) -> None:
    cache.add_pod(pod("p", "n1"))
    cache.remove_pod("default/p")
    assert cache.get_node("n1") is None


def test_node_removal_with_pods_keeps_a_placeholder(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.add_pod(pod("p", "n1"))
    snap = fresh_snapshot(cache)
    assert snap.num_nodes() == 1
    cache.remove_node("n1")
    ni = cache.get_node("n1")
    assert ni is not None and ni.node is None and set(ni.pods) == {"default/p"}
    cache.update_snapshot(snap)
    assert snap.num_nodes() == 0 and snap.get("n1") is None
    cache.remove_pod("default/p")
    assert cache.get_node("n1") is None
    cache.remove_node("n1")  # unknown node: a no-op


def test_node_removal_without_pods(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.remove_node("n1")
    assert cache.get_node("n1") is None and cache.node_names() == []


def test_update_node(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.add_pod(pod("p", "n1"))
    cache.update_node(make_node("n1").alloc(cpu="8", memory="8Gi", pods=10).record())
    ni = cache.get_node("n1")
    assert ni is not None and ni.allocatable.milli_cpu == 8000 and len(ni.pods) == 1


def test_an_update_that_changes_nothing_read_leaves_the_snapshot_alone(cache: Cache) -> None:
    # A status heartbeat decodes to a record equal to the one held: no new generation, so
    # the snapshot keeps its copy; a real change is taken as before.
    cache.add_node(make_node("n1").label("zone", "a").record())
    snap = fresh_snapshot(cache)
    held = snap.node_info_map["n1"]
    cache.update_node(make_node("n1").label("zone", "a").record())
    cache.update_snapshot(snap)
    assert snap.node_info_map["n1"] is held
    cache.update_node(make_node("n1").label("zone", "b").record())
    cache.update_snapshot(snap)
    copy = snap.node_info_map["n1"]
    assert copy is not held and copy.node is not None and copy.node.labels["zone"] == "b"
    assert snapshot_view(snap) == snapshot_view(fresh_snapshot(cache))


# --------------------------------------------------------------------------- snapshots


def test_update_snapshot_re_clones_only_changed_nodes(cache: Cache) -> None:
    for n in ("n1", "n2", "n3"):
        cache.add_node(make_node(n).record())
    snap = fresh_snapshot(cache)
    before = dict(snap.node_info_map)
    live = cache.get_node("n2")
    assert live is not None and before["n2"] is not live  # a clone, never the live NodeInfo

    cache.add_pod(pod("p", "n2"))
    cache.update_snapshot(snap)
    assert snap.node_info_map["n1"] is before["n1"]
    assert snap.node_info_map["n3"] is before["n3"]
    assert snap.node_info_map["n2"] is not before["n2"]
    assert set(snap.node_info_map["n2"].pods) == {"default/p"}
    assert set(before["n2"].pods) == set()  # the old clone was not touched
    # The ordered list holds the same objects as the map.
    assert all(ni is snap.node_info_map[ni.name] for ni in snap.node_info_list)

    unchanged = dict(snap.node_info_map)
    cache.update_snapshot(snap)  # nothing changed: nothing re-cloned
    assert all(snap.node_info_map[n] is unchanged[n] for n in unchanged)


def test_the_node_columns_are_rewritten_only_when_a_row_can_change(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound pod's next version with the same requests (its status written, or the
    watch confirming its binding) swaps in a new NodeInfo but leaves the node's row of
    columns as it is; a resized pod or a new one rewrites it. Rows equal a recount."""
    from scheduler.backend.cache.snapshot import NodeArrays

    cache.add_node(make_node("n1").alloc(cpu="4", memory="8Gi", pods=110).record())
    cache.add_node(make_node("n2").record())
    cache.add_pod(pod("p", "n1"))
    snap = fresh_snapshot(cache)
    arrays = snap.arrays()
    written: list[int] = []
    real = NodeArrays.set_row

    def counted(self: NodeArrays, i: int, ni: NodeInfo) -> None:
        written.append(i)
        real(self, i, ni)

    monkeypatch.setattr(NodeArrays, "set_row", counted)
    held = snap.node_info_map["n1"]
    cache.update_pod(pod("p", "n1"))  # an equal pod, another object
    cache.update_snapshot(snap)
    assert snap.node_info_map["n1"] is not held
    assert written == []
    snap.check_invariants()
    cache.update_pod(pod("p", "n1", cpu="2"))
    cache.add_pod(pod("q", "n2"))
    cache.update_snapshot(snap)
    assert sorted(written) == [0, 1]
    assert snap.arrays() is arrays and arrays.req_cpu.tolist() == [2000, 1000]
    snap.check_invariants()


def test_update_snapshot_tracks_pods_with_affinity(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.add_node(make_node("n2").record())
    snap = fresh_snapshot(cache)
    assert snap.have_pods_with_affinity == []
    anti = (
        make_pod("a")
        .node("n2")
        .affinity(
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "zone"}
                    ]
                }
            }
        )
        .info()
    )
    cache.add_pod(anti)
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.have_pods_with_affinity] == ["n2"]
    assert [ni.name for ni in snap.have_pods_with_required_anti_affinity] == ["n2"]
    assert snap.have_pods_with_affinity[0] is snap.node_info_map["n2"]
    cache.add_pod(pod("b", "n2"))  # same affinity flags: swapped in place
    cache.update_snapshot(snap)
    assert snap.have_pods_with_affinity[0] is snap.node_info_map["n2"]
    assert set(snap.have_pods_with_affinity[0].pods) == {"default/a", "default/b"}
    cache.remove_pod("default/a")
    cache.update_snapshot(snap)
    assert snap.have_pods_with_affinity == [] and snap.have_pods_with_required_anti_affinity == []


def test_incremental_snapshot_equals_a_fresh_one_after_mixed_operations(cache: Cache) -> None:
    snap = fresh_snapshot(cache)
    steps = [
        lambda: cache.add_node(make_node("n1").record()),
        lambda: cache.add_pod(pod("a", "n2")),  # before its node
        lambda: cache.add_node(make_node("n2").record()),
        lambda: cache.assume_pod(pod("b"), "n1"),
        lambda: cache.finish_binding("default/b"),
        lambda: cache.add_node(make_node("n3").record()),
        lambda: cache.remove_node("n2"),  # with a pod: placeholder
        lambda: cache.update_pod(pod("a", "n2", cpu="2")),
        lambda: cache.forget_pod("default/b"),
        lambda: cache.add_node(make_node("n2").label("zone", "b").record()),
        lambda: cache.remove_pod("default/a"),
        lambda: cache.remove_node("n3"),
        lambda: cache.update_node(make_node("n1").alloc(cpu="1", memory="1Gi", pods=5).record()),
        lambda: cache.update_node(make_node("n1").alloc(cpu="1", memory="1Gi", pods=5).record()),
    ]
    for step in steps:
        step()
        cache.update_snapshot(snap)
        fresh = fresh_snapshot(cache)
        assert snapshot_view(snap) == snapshot_view(fresh)
        assert sorted(ni.name for ni in snap.node_info_list) == sorted(cache.node_names())
        assert all(ni is snap.node_info_map[ni.name] for ni in snap.node_info_list)
        assert snap.generation == fresh.generation


def test_two_snapshots_from_one_cache(cache: Cache) -> None:
    """Each snapshot decides for itself whether its lists need a rebuild."""
    a, b = Snapshot(), Snapshot()
    cache.add_node(make_node("n1").record())
    cache.update_snapshot(a)
    cache.update_snapshot(b)
    cache.add_node(make_node("n2").record())
    cache.add_pod(pod("p", "n3"))
    cache.update_snapshot(a)
    cache.update_snapshot(b)
    cache.remove_node("n1")
    cache.add_node(make_node("n3").record())
    cache.update_snapshot(a)
    cache.update_snapshot(b)
    for snap in (a, b):
        assert sorted(ni.name for ni in snap.node_info_list) == ["n2", "n3"]
        assert all(ni.node is not None for ni in snap.node_info_list)


def test_snapshot_from_node_infos_leaves_out_placeholders() -> None:
    real = make_node("n1").info()
    snap = Snapshot.from_node_infos([real, NodeInfo()])
    assert snap.node_info_list == [real] and snap.num_nodes() == 1
    assert snap.get("n1") is real and snap.get("") is None


def test_check_invariants_catches_a_drifting_node_sum(cache: Cache) -> None:
    cache.add_pod(pod("p", "n1"))
    ni = cache.cache.get_node("n1")  # type: ignore[attr-defined]
    assert ni is not None
    ni.requested = Resource(milli_cpu=1)
    with pytest.raises(AssertionError):
        cache.cache.check_invariants()  # type: ignore[attr-defined]


def _by_label(snap: Snapshot, key: str, value: str) -> dict[int, list[str]]:
    """What pods_with_label must say, from the snapshot's rows."""
    out: dict[int, list[str]] = {}
    for i, ni in enumerate(snap.node_info_list):
        keys = sorted(k for k, p in ni.pods.items() if p.labels.get(key) == value)
        if keys:
            out[i] = keys
    return out


def test_pods_by_label_and_count_columns_follow_the_snapshot(cache: Cache) -> None:
    """The snapshot's pod-by-label index and a count column built from it stay equal to a
    recount as pods come and go on existing nodes (swap_in) and as nodes are added
    (a rebuild)."""

    def web(name: str, node: str, app: str = "web") -> PodInfo:
        tier = "front" if name in "ace" else "back"
        return (
            make_pod(name).req(cpu="100m").label("app", app).label("tier", tier).node(node).info()
        )

    for n in ("n1", "n2", "n3"):
        cache.add_node(make_node(n).record())
    cache.add_pod(web("a", "n1"))
    cache.add_pod(web("b", "n1", app="db"))
    snap = fresh_snapshot(cache)

    def seen(key: str, value: str) -> dict[int, list[str]]:
        return {r: sorted(p.key for p in ps) for r, ps in snap.pods_with_label(key, value).items()}

    def count(ni: NodeInfo) -> int:
        return sum(1 for p in ni.pods.values() if p.labels.get("app") == "web")

    def first() -> dict[int, int]:
        return {r: len(ps) for r, ps in snap.pods_with_label("app", "web").items()}

    def check() -> None:
        for app in ("web", "db", "none"):
            assert seen("app", app) == _by_label(snap, "app", app), app
        for tier in ("front", "back"):  # a second key: its own index, kept current too
            assert seen("tier", tier) == _by_label(snap, "tier", tier), tier
        assert seen("missing-key", "x") == {}
        col = snap.count_column(424242, count, first)
        assert col.tolist() == [count(ni) for ni in snap.node_info_list]
        # The same count kept current pod by pod (per_pod) instead of node by node.
        by_pod = snap.count_column(
            424243, count, per_pod=lambda p: int(p.labels.get("app") == "web")
        )
        assert by_pod.tolist() == [count(ni) for ni in snap.node_info_list]
        snap.check_invariants()  # every column and label index against a recount

    check()
    cache.add_pod(web("c", "n2"))
    cache.add_pod(web("d", "n2"))
    cache.update_snapshot(snap)  # n2 swapped in
    check()
    cache.remove_pod("default/a")
    cache.remove_pod("default/d")
    cache.update_snapshot(snap)
    check()
    cache.update_pod(web("c", "n2", app="db"))  # a new version: one pod out, one in
    cache.add_pod(web("f", "n2"))
    cache.update_snapshot(snap)
    check()
    cache.update_pod(web("c", "n2"))  # and back, with a second change to the node
    cache.remove_pod("default/f")
    cache.update_snapshot(snap)
    check()
    cache.add_node(make_node("n4").record())  # a new row: rebuilt lists
    cache.add_pod(web("e", "n4"))
    cache.update_snapshot(snap)
    check()


def test_check_invariants_catches_a_drifting_count_column_and_label_index(cache: Cache) -> None:
    cache.add_node(make_node("n1").record())
    cache.add_pod(make_pod("a").label("app", "web").node("n1").info())
    snap = fresh_snapshot(cache)
    col = snap.count_column(7, lambda ni: len(ni.pods), per_pod=lambda p: 1)
    snap.pods_with_label("app", "web")
    snap.check_invariants()
    col[0] += 1
    with pytest.raises(AssertionError, match="count 7 drifts"):
        snap.check_invariants()
    col[0] -= 1
    rows = snap.pods_with_label("app", "web")
    rows[0].append(make_pod("b").label("app", "web").info())  # a pod no node holds
    with pytest.raises(AssertionError, match="pods by label app drift"):
        snap.check_invariants()


def test_sizes_count_nodes_with_placeholders_pods_and_assumed_pods() -> None:
    """What scheduler_cache_size{type} reports, as upstream's cache: a pod on a node the
    cache does not know yet makes a placeholder node, which counts."""
    c = Cache()
    c.add_node(make_node("n1").record())
    c.assume_pod(make_pod("a").info(), "n1")
    c.add_pod(make_pod("b").node("ghost").info())
    assert (c.node_count(), c.pod_count(), c.assumed_count()) == (2, 2, 1)
    c.add_pod(make_pod("a").node("n1").info())  # the watch confirms the assume
    assert c.assumed_count() == 0
    c.assume_pod(make_pod("x").info(), "n1")
    c.forget_pod("default/x")
    c.assume_pod(make_pod("y").info(), "n1")
    c.remove_pod("default/y")
    c.remove_pod("default/b")
    assert (c.node_count(), c.pod_count(), c.assumed_count()) == (1, 1, 0)
    c.check_invariants()
