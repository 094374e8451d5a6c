"""PriorityQueue and Nominator: ordering, exact backoff on a FakeClock, flushes, precise moves
through the real plugins' queueing hints, in-flight events, updates, deletes.
``check_invariants`` runs after every mutation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from scheduler.backend.queue import (
    ACTIVE_Q,
    BACKOFF_Q,
    GATED_Q,
    UNSCHEDULABLE_Q,
    Nominator,
    PriorityQueue,
    QueuedPodInfo,
)
from scheduler.clock import FakeClock
from scheduler.framework.interface import (
    ClusterEvent,
    EventRegistration,
    QueueingHint,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.plugins.nodeaffinity import NodeAffinity
from scheduler.framework.plugins.nodename import NodeName
from scheduler.framework.plugins.nodeports import NodePorts
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.framework.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.framework.plugins.schedulinggates import SchedulingGates
from scheduler.framework.plugins.tainttoleration import TaintToleration
from scheduler.types import PodInfo
from tests.builders import make_node, make_pod

IN_FLIGHT = "in_flight"
PLUGINS: list[Any] = [
    NodeResourcesFit(),
    NodeAffinity(),
    TaintToleration(),
    NodeUnschedulable(),
    NodePorts(),
    NodeName(),
]
HINTS: dict[str, list[EventRegistration]] = {p.name: list(p.events_to_register()) for p in PLUGINS}

NODE_ADD = ClusterEvent("Node", "Add")
NODE_UPDATE = ClusterEvent("Node", "Update")
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPod", "Delete")


class Checked:
    """A PriorityQueue whose every call is followed by ``check_invariants``."""

    def __init__(self, q: PriorityQueue) -> None:
        self.q = q

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.q, name)
        if not callable(attr):
            return attr

        def checked(*args: Any, **kw: Any) -> Any:
            out = attr(*args, **kw)
            self.q.check_invariants()
            return out

        return checked

    def __len__(self) -> int:
        return len(self.q)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> PriorityQueue:
    return Checked(PriorityQueue(clock, hints=HINTS))  # type: ignore[return-value]


def pod(name: str, prio: int = 0, **req: str) -> PodInfo:
    return make_pod(name).req(**(req or {"cpu": "1"})).priority(prio).info()


def keys(pods: Iterable[PodInfo]) -> list[str]:
    return [p.key for p in pods]


def fail(q: PriorityQueue, qpi: QueuedPodInfo, *plugins: str) -> None:
    """The cycle of ``qpi`` ended: rejected by ``plugins``, or an error when none."""
    qpi.unschedulable_plugins = set(plugins)
    qpi.errored = not plugins
    q.add_unschedulable_if_not_present(qpi)


def pop(q: PriorityQueue, key: str) -> QueuedPodInfo:
    qpi = q.pop()
    assert qpi is not None and qpi.pod.key == key
    return qpi


def park(q: PriorityQueue, p: PodInfo, *plugins: str) -> QueuedPodInfo:
    """Add ``p``, pop it and reject it by ``plugins``: it waits in the unschedulable map."""
    q.add(p)
    qpi = pop(q, p.key)
    fail(q, qpi, *plugins)
    assert q.where(p.key) == UNSCHEDULABLE_Q
    return qpi


# --------------------------------------------------------------------------- activeQ order


def test_active_order_priority_then_timestamp_then_insertion(
    q: PriorityQueue, clock: FakeClock
) -> None:
    q.add(pod("low", 1))
    clock.step(1)
    q.add(pod("high-late", 10))
    q.add(pod("mid-a", 5), timestamp=clock.now())
    q.add(pod("mid-b", 5), timestamp=clock.now())
    q.add(pod("mid-early", 5), timestamp=clock.now() - 5)
    q.add(pod("high-early", 10), timestamp=0.0)
    assert keys(q.pending_pods()[ACTIVE_Q]) == [
        "default/high-early",
        "default/high-late",
        "default/mid-early",
        "default/mid-a",
        "default/mid-b",
        "default/low",
    ]
    popped = [q.pop() for _ in range(6)]
    assert [p.pod.name for p in popped if p] == [
        "high-early",
        "high-late",
        "mid-early",
        "mid-a",
        "mid-b",
        "low",
    ]


def test_pop_empty_returns_none(q: PriorityQueue) -> None:
    assert q.pop() is None
    q.add(pod("p"))
    q.close()
    assert q.pop() is None  # a closed queue hands out nothing


def test_pop_marks_the_pod_in_flight(q: PriorityQueue, clock: FakeClock) -> None:
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    assert (q.where("default/p"), qpi.attempts, qpi.initial_attempt_timestamp) == (
        IN_FLIGHT,
        1,
        clock.now(),
    )
    assert q.counts() == {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0, GATED_Q: 0, IN_FLIGHT: 1}
    q.done("default/p")
    assert not q.contains("default/p") and len(q) == 0


def test_add_of_a_known_pod_is_an_update(q: PriorityQueue) -> None:
    q.add(pod("p", 1))
    q.add(pod("p", 2))
    assert len(q) == 1 and q.get("default/p").pod.priority == 2  # type: ignore[union-attr]


# --------------------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        pytest.param(1, 1.0, id="first failure 1s"),
        pytest.param(2, 2.0, id="second 2s"),
        pytest.param(3, 4.0, id="third 4s"),
        pytest.param(4, 8.0, id="fourth 8s"),
        pytest.param(5, 10.0, id="fifth capped at 10s"),
        pytest.param(6, 10.0, id="sixth stays at 10s"),
        pytest.param(60, 10.0, id="many stay at 10s"),
    ],
)
def test_backoff_duration(q: PriorityQueue, attempts: int, seconds: float) -> None:
    assert q.backoff_duration(attempts) == seconds


def test_backoff_is_exact_on_a_fake_clock(q: PriorityQueue, clock: FakeClock) -> None:
    q.add(pod("p"))
    waited = []
    for _ in range(6):
        qpi = pop(q, "default/p")
        fail(q, qpi)  # an error: straight to backoffQ
        assert q.where("default/p") == BACKOFF_Q
        expiry = q.next_backoff_expiry()
        assert expiry is not None
        waited.append(expiry - clock.now())
        clock.step(expiry - clock.now() - 0.001)
        assert q.flush_backoff_completed() == 0 and q.where("default/p") == BACKOFF_Q
        clock.step(0.001)
        assert q.flush_backoff_completed() == 1 and q.where("default/p") == ACTIVE_Q
    assert waited == pytest.approx([1, 2, 4, 8, 10, 10])


def test_configured_backoff(clock: FakeClock) -> None:
    q = PriorityQueue(clock, initial_backoff=3, max_backoff=20)
    assert [q.backoff_duration(a) for a in range(1, 6)] == [3, 6, 12, 20, 20]
    with pytest.raises(ValueError, match="backoff"):
        PriorityQueue(clock, initial_backoff=5, max_backoff=2)


def test_errored_pods_go_to_backoff(q: PriorityQueue) -> None:
    q.add(pod("p"))
    fail(q, pop(q, "default/p"))
    assert q.where("default/p") == BACKOFF_Q


def test_backoff_flush_order_and_count(q: PriorityQueue, clock: FakeClock) -> None:
    """Expiries are cut to the whole second (upstream's 1-s window): a (failed at t0) and b
    (t0 + 0.5) both leave at t0 + 1; c (t0 + 1.2) at t0 + 2."""
    t0 = clock.now()
    assert t0 == int(t0)
    for name in ("a", "b", "c"):
        q.add(pod(name))
    fail(q, pop(q, "default/a"))
    clock.step(0.5)
    fail(q, pop(q, "default/b"))
    clock.step(0.7)
    fail(q, pop(q, "default/c"))
    assert q.flush_backoff_completed() == 2  # the window [t0 + 1, t0 + 2) has begun
    assert keys(q.pending_pods()[ACTIVE_Q]) == ["default/a", "default/b"]
    assert q.next_backoff_expiry() == t0 + 2
    clock.step(0.79)
    assert q.flush_backoff_completed() == 0
    clock.step(0.01)
    assert q.flush_backoff_completed() == 1 and q.next_backoff_expiry() is None


def test_backoff_counts_rejections_and_consecutive_errors_apart(
    q: PriorityQueue, clock: FakeClock
) -> None:
    """Upstream's getBackoffTime: rejections double the backoff; an error counts on its own
    (1 s after three rejections), and the next rejection resets the error count and goes on
    from the rejections (8 s for the fourth)."""
    q.add(pod("p"))
    waited = []
    for plugins in ((names.NODE_RESOURCES_FIT,),) * 3 + ((), (), (names.NODE_RESOURCES_FIT,)):
        qpi = pop(q, "default/p")
        fail(q, qpi, *plugins)
        expiry = q.backoff_expiry(q.get("default/p"))
        waited.append(expiry - clock.now())
        clock.set(expiry)
        q.flush_backoff_completed()
        if q.where("default/p") == UNSCHEDULABLE_Q:  # a rejection waits for an event
            q.activate(["default/p"])
        assert q.where("default/p") == ACTIVE_Q
    assert waited == [1, 2, 4, 1, 2, 8]


def test_a_backoff_is_cut_to_its_window(q: PriorityQueue, clock: FakeClock) -> None:
    clock.step(0.7)
    q.add(pod("p"))
    fail(q, pop(q, "default/p"))
    assert q.next_backoff_expiry() == pytest.approx(clock.now() + 0.3)


# --------------------------------------------------------------------------- unschedulable


def test_rejected_pod_waits_in_unschedulable(q: PriorityQueue) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    assert keys(q.pending_pods()[UNSCHEDULABLE_Q]) == ["default/p"]


def test_flush_unschedulable_left_over_after_300s(q: PriorityQueue, clock: FakeClock) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    clock.step(299.999)
    assert q.flush_unschedulable_left_over() == 0
    clock.step(0.001)
    assert q.flush_unschedulable_left_over() == 1
    assert q.where("default/p") == ACTIVE_Q  # its 1s backoff is long over


def test_flush_left_over_respects_backoff(clock: FakeClock) -> None:
    q = PriorityQueue(clock, max_unschedulable_duration=0.5, hints=HINTS)
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    clock.step(0.5)
    assert q.flush_unschedulable_left_over() == 1
    assert q.where("default/p") == BACKOFF_Q  # still inside its 1s backoff
    clock.step(0.5)
    assert q.flush_backoff_completed() == 1


# --------------------------------------------------------------------------- precise moves


def test_fit_rejected_pod_moves_on_assigned_pod_delete(q: PriorityQueue, clock: FakeClock) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    clock.step(5)
    gone = make_pod("other").req(cpu="2").node("n1").info()
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, gone, None) == 1
    assert q.where("default/p") == ACTIVE_Q


def test_fit_rejected_pod_ignores_node_update_with_same_allocatable(q: PriorityQueue) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    old = make_node("n1").record()
    new = make_node("n1").label("team", "a").record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, old, new) == 0
    assert q.where("default/p") == UNSCHEDULABLE_Q
    bigger = make_node("n1").alloc(cpu="64", memory="32Gi", pods=110).record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, old, bigger) == 1


def test_fit_rejected_pod_ignores_a_node_too_small_for_it(q: PriorityQueue) -> None:
    park(q, pod("p", cpu="8"), names.NODE_RESOURCES_FIT)
    small = make_node("n9").alloc(cpu="4", memory="8Gi", pods=110).record()
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, small) == 0
    big = make_node("n9").alloc(cpu="16", memory="8Gi", pods=110).record()
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, big) == 1


def test_node_affinity_rejected_pod_moves_only_for_a_matching_node(q: PriorityQueue) -> None:
    p = make_pod("p").node_selector(disk="ssd").info()
    park(q, p, names.NODE_AFFINITY)
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n1").record()) == 0
    hdd = make_node("n2").label("disk", "hdd").record()
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, hdd) == 0
    assert q.where("default/p") == UNSCHEDULABLE_Q
    ssd = make_node("n3").label("disk", "ssd").record()
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, ssd) == 1
    assert q.where("default/p") == BACKOFF_Q  # moved within its backoff window


def test_node_affinity_update_that_keeps_matching_does_not_move(q: PriorityQueue) -> None:
    p = make_pod("p").node_selector(disk="ssd").info()
    park(q, p, names.NODE_AFFINITY)
    ssd = make_node("n1").label("disk", "ssd").record()
    ssd2 = make_node("n1").label("disk", "ssd").label("x", "y").record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, ssd, ssd2) == 0
    hdd = make_node("n1").label("disk", "hdd").record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, hdd, ssd) == 1


def test_taint_rejected_pod_moves_when_the_taint_goes(q: PriorityQueue) -> None:
    park(q, pod("p"), names.TAINT_TOLERATION)
    tainted = make_node("n1").taint("dedicated", "gpu").record()
    clean = make_node("n1").record()
    clean_relabeled = make_node("n1").label("x", "y").record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, clean, clean_relabeled) == 0
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, tainted) == 0
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, tainted, clean) == 1


def test_unschedulable_node_rejected_pod_moves_when_cordon_lifts(q: PriorityQueue) -> None:
    park(q, pod("p"), names.NODE_UNSCHEDULABLE)
    cordoned = make_node("n1").unschedulable().record()
    open_ = make_node("n1").record()
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, open_, open_) == 0
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, cordoned) == 0
    assert q.move_all_to_active_or_backoff(NODE_UPDATE, cordoned, open_) == 1


def test_ports_rejected_pod_moves_when_a_pod_with_its_port_goes(q: PriorityQueue) -> None:
    park(q, make_pod("p").host_port(8080).info(), names.NODE_PORTS)
    other = make_pod("o").host_port(9090).node("n1").info()
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, other, None) == 0
    same = make_pod("s").host_port(8080).node("n1").info()
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, same, None) == 1


def test_events_without_a_hint_for_the_rejecting_plugin_do_not_move(q: PriorityQueue) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    pdb_event = ClusterEvent("PodDisruptionBudget", "Add")
    assert q.move_all_to_active_or_backoff(pdb_event) == 0


def test_a_hint_that_raises_queues_the_pod_and_is_timed_as_an_error(clock: FakeClock) -> None:
    """As upstream: a queueing hint that fails counts as Queue (the pod is not stranded)
    and its call is observed with the hint label "Error"; the others as they answered."""

    def broken(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        raise KeyError("zone")

    def never(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.SKIP

    hints = {
        "Calm": [EventRegistration(NODE_ADD, never)],
        "Broken": [EventRegistration(NODE_ADD, broken)],
    }
    q = PriorityQueue(clock, hints=hints, time_hints=True)
    park(q, pod("calm"), "Calm")
    park(q, pod("broken"), "Broken")
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n1").record()) == 1
    assert q.where("default/broken") in (ACTIVE_Q, BACKOFF_Q)
    assert q.where("default/calm") == UNSCHEDULABLE_Q
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n2").record()) == 0
    times = q.take_hint_times()
    assert {k: len(v) for k, v in times.items()} == {
        ("Broken", "NodeAdd", "Error"): 1,
        ("Calm", "NodeAdd", "QueueSkip"): 2,
    }
    assert all(s >= 0 for v in times.values() for s in v)
    assert q.take_hint_times() == {}  # taken: the next take has only what came after
    # Without time_hints nothing is kept.
    plain = PriorityQueue(clock, hints=hints)
    park(plain, pod("calm"), "Calm")
    plain.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n1").record())
    assert plain.take_hint_times() == {}


def test_pod_with_no_rejecting_plugin_moves_on_any_event(
    q: PriorityQueue, clock: FakeClock
) -> None:
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    qpi.unschedulable_plugins = {names.NODE_RESOURCES_FIT}
    q.add_unschedulable_if_not_present(qpi)
    qpi.unschedulable_plugins = set()  # e.g. plugins cleared by an older scheduler version
    clock.step(2)
    assert q.move_all_to_active_or_backoff(ClusterEvent("PriorityClass", "Add")) == 1


# --------------------------------------------------------------------------- in flight


def test_event_while_in_flight_sends_the_failed_pod_to_backoff(q: PriorityQueue) -> None:
    p = make_pod("p").node_selector(disk="ssd").info()
    q.add(p)
    qpi = pop(q, "default/p")
    ssd = make_node("n3").label("disk", "ssd").record()
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, ssd) == 0
    fail(q, qpi, names.NODE_AFFINITY)
    assert q.where("default/p") == BACKOFF_Q


def test_unrelated_event_while_in_flight_does_not_help(q: PriorityQueue) -> None:
    p = make_pod("p").node_selector(disk="ssd").info()
    q.add(p)
    qpi = pop(q, "default/p")
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n1").record())
    fail(q, qpi, names.NODE_AFFINITY)
    assert q.where("default/p") == UNSCHEDULABLE_Q


def test_event_before_the_pop_does_not_count(q: PriorityQueue) -> None:
    q.add(pod("other"))
    other = pop(q, "default/other")  # keeps events recorded
    p = make_pod("p").node_selector(disk="ssd").info()
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n3").label("disk", "ssd").record())
    q.add(p)
    qpi = pop(q, "default/p")
    fail(q, qpi, names.NODE_AFFINITY)
    assert q.where("default/p") == UNSCHEDULABLE_Q
    q.done(other.pod.key)


def test_update_of_the_pod_while_in_flight_sends_it_to_backoff(q: PriorityQueue) -> None:
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    q.update(make_pod("p").req(cpu="1").toleration("dedicated", "gpu", "NoSchedule").info())
    assert q.where("default/p") == IN_FLIGHT
    fail(q, qpi, names.TAINT_TOLERATION)
    assert q.where("default/p") == BACKOFF_Q
    assert q.get("default/p").pod.tolerations  # type: ignore[union-attr]


def test_status_only_update_while_in_flight_does_not_help(q: PriorityQueue) -> None:
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    q.update(make_pod("p").req(cpu="1").phase("Pending").info())
    fail(q, qpi, names.TAINT_TOLERATION)
    assert q.where("default/p") == UNSCHEDULABLE_Q


def test_delete_while_in_flight_drops_the_pod_for_good(q: PriorityQueue) -> None:
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    assert q.delete("default/p")
    fail(q, qpi, names.NODE_RESOURCES_FIT)
    assert not q.contains("default/p") and len(q) == 0


def test_failure_of_a_deleted_incarnation_leaves_the_recreated_pod_alone(
    q: PriorityQueue,
) -> None:
    q.add(pod("p"))
    old = pop(q, "default/p")
    q.delete("default/p")
    q.add(pod("p", 3))  # re-created under the same name while the old cycle runs
    new = pop(q, "default/p")
    fail(q, old, names.NODE_RESOURCES_FIT)  # the deleted incarnation's failure is dropped
    assert q.where("default/p") == IN_FLIGHT and q.get("default/p") is new
    fail(q, new, names.NODE_RESOURCES_FIT)
    assert q.where("default/p") == UNSCHEDULABLE_Q


# --------------------------------------------------------------------------- updates


def test_priority_update_reorders_active(q: PriorityQueue) -> None:
    q.add(pod("a", 5))
    q.add(pod("b", 1))
    q.update(pod("b", 9))
    assert keys(q.pending_pods()[ACTIVE_Q]) == ["default/b", "default/a"]
    assert q.pop().pod.priority == 9  # type: ignore[union-attr]


def test_update_in_backoff_stays_in_backoff(q: PriorityQueue) -> None:
    q.add(pod("p"))
    fail(q, pop(q, "default/p"))
    q.update(pod("p", 3))
    assert q.where("default/p") == BACKOFF_Q and q.get("default/p").pod.priority == 3  # type: ignore[union-attr]


def test_spec_update_retries_an_unschedulable_pod(q: PriorityQueue, clock: FakeClock) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    q.update(make_pod("p").req(cpu="1").label("new", "label").info())
    assert q.where("default/p") == BACKOFF_Q
    park(q, pod("r"), names.NODE_RESOURCES_FIT)
    clock.step(5)
    q.update(make_pod("r").req(cpu="500m").info())
    assert q.where("default/r") == ACTIVE_Q


def test_status_update_leaves_an_unschedulable_pod_alone(q: PriorityQueue) -> None:
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    q.update(make_pod("p").req(cpu="1").created(50).info())
    assert q.where("default/p") == UNSCHEDULABLE_Q


def test_update_of_an_unknown_pod_adds_it(q: PriorityQueue) -> None:
    q.update(pod("p"))
    assert q.where("default/p") == ACTIVE_Q


# --------------------------------------------------------------------------- deletes


@pytest.mark.parametrize("where", [ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q, IN_FLIGHT])
def test_delete_from_every_structure(q: PriorityQueue, where: str) -> None:
    q.add(make_pod("p").req(cpu="1").nominated("n1").info())
    if where != ACTIVE_Q:
        qpi = pop(q, "default/p")
        if where == BACKOFF_Q:
            fail(q, qpi)
        elif where == UNSCHEDULABLE_Q:
            fail(q, qpi, names.NODE_RESOURCES_FIT)
    assert q.where("default/p") == where
    assert q.nominator.nominated_node("default/p") == "n1"
    assert q.delete("default/p")
    assert not q.contains("default/p") and q.get("default/p") is None
    assert q.nominator.nominated_node("default/p") is None
    assert q.nominator.nominated_pods_for_node("n1") == []
    assert not q.delete("default/p")


# --------------------------------------------------------------------------- callbacks


def test_on_ready_fires_when_a_pod_becomes_ready(clock: FakeClock) -> None:
    calls: list[int] = []
    q = PriorityQueue(clock, hints=HINTS, on_ready=lambda: calls.append(1))
    q.add(pod("p"))
    assert len(calls) == 1
    qpi = q.pop()
    assert qpi is not None
    fail(q, qpi)  # to backoffQ: not ready yet
    assert len(calls) == 1
    clock.step(1)
    q.flush_backoff_completed()
    assert len(calls) == 2
    q.close()
    assert len(calls) == 3


def test_on_incoming_reports_queue_and_event(clock: FakeClock) -> None:
    seen: list[tuple[str, str]] = []
    q = PriorityQueue(clock, hints=HINTS, on_incoming=lambda queue, ev: seen.append((queue, ev)))
    park(q, pod("p"), names.NODE_RESOURCES_FIT)
    clock.step(5)
    q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod("x"), None)
    assert seen == [
        (ACTIVE_Q, "PodAdd"),
        (UNSCHEDULABLE_Q, "ScheduleAttemptFailure"),
        (ACTIVE_Q, "AssignedPodDelete"),
    ]


def test_activate_moves_waiting_pods_to_active(q: PriorityQueue) -> None:
    park(q, pod("u"), names.NODE_RESOURCES_FIT)
    q.add(pod("b"))
    fail(q, pop(q, "default/b"))
    q.activate(["default/u", "default/b", "default/unknown"])
    assert {q.where("default/u"), q.where("default/b")} == {ACTIVE_Q}


def test_activating_a_pod_in_flight_sends_it_to_backoff_if_its_attempt_fails(
    q: PriorityQueue,
) -> None:
    """Upstream's Activate registers a ForceActivate event for an in-flight pod: rejected
    afterwards, it is retried after backoff instead of waiting in the unschedulable pods.
    The mark lasts one attempt."""
    q.add(pod("p"))
    qpi = pop(q, "default/p")
    q.activate(["default/p"])
    assert q.where("default/p") == "in_flight"
    fail(q, qpi, names.NODE_RESOURCES_FIT)
    assert q.where("default/p") == BACKOFF_Q
    again = pop(q, "default/p")  # popped from backoffQ: activeQ is empty
    fail(q, again, names.NODE_RESOURCES_FIT)
    assert q.where("default/p") == UNSCHEDULABLE_Q


# --------------------------------------------------------------------------- nominator


def test_nominator_keeps_a_pod_on_one_node() -> None:
    nom = Nominator()
    p = pod("p", 5)
    nom.add_nominated_pod(p, "n1")
    nom.add_nominated_pod(p, "n2")
    nom.check_invariants()
    assert nom.nominated_pods_for_node("n1") == []
    assert keys(nom.nominated_pods_for_node("n2")) == ["default/p"]
    assert nom.nominated_node("default/p") == "n2" and len(nom) == 1
    nom.add_nominated_pod(p, "")  # an empty node clears the nomination
    nom.check_invariants()
    assert len(nom) == 0 and nom.delete_nominated_pod_if_exists("default/p") is None


def test_nominator_update_follows_upstream() -> None:
    nom = Nominator()
    plain = make_pod("p").info()
    nom.add_nominated_pod(plain, "n1")  # in memory only (the API has no nomination yet)
    relabeled = make_pod("p").label("a", "b").info()
    nom.update_nominated_pod(plain, relabeled)
    nom.check_invariants()
    assert nom.nominated_pods_for_node("n1") == [relabeled]  # kept, with the fresh record

    on_n2 = make_pod("p").nominated("n2").info()
    nom.update_nominated_pod(relabeled, on_n2)  # the API names a node: it wins
    nom.check_invariants()
    assert nom.nominated_node("default/p") == "n2"

    cleared = make_pod("p").info()
    nom.update_nominated_pod(on_n2, cleared)  # the API cleared it
    nom.check_invariants()
    assert nom.nominated_node("default/p") is None

    bound = make_pod("p").nominated("n1").node("n1").info()
    nom.update_nominated_pod(cleared, bound)  # a bound pod is never nominated
    assert len(nom) == 0


def test_queue_follows_nominations(q: PriorityQueue) -> None:
    q.add(make_pod("p").nominated("n1").info())
    assert q.nominator.nominated_node("default/p") == "n1"
    q.update(make_pod("p").nominated("n2").info())
    assert q.nominator.nominated_node("default/p") == "n2"
    assert q.nominator.nominated_pods_for_node("n1") == []
    q.update(make_pod("p").info())
    assert q.nominator.nominated_node("default/p") is None


# --------------------------------------------------------------------------- PreEnqueue


def _gates(pod: PodInfo) -> Status | None:
    st = SchedulingGates().pre_enqueue(pod)
    return None if st.is_success() else st


def test_a_gated_pod_waits_in_the_gated_set_until_its_last_gate_goes(
    q: PriorityQueue,
) -> None:
    from dataclasses import replace

    getattr(q, "q", q).pre_enqueue = _gates  # past the Checked wrapper
    gated = replace(pod("g"), scheduling_gates=("a", "b"), nominated_node_name="n1")
    q.add(gated)
    assert q.where("default/g") == GATED_Q and q.counts()[GATED_Q] == 1
    assert q.pop() is None  # never reaches activeQ: no Filter, no preemption
    assert q.nominator.nominated_node("default/g") is None  # gated pods are not nominated
    q.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None)
    q.flush_unschedulable_left_over()
    q.activate(["default/g"])
    assert q.where("default/g") == GATED_Q  # no cluster event moves it
    q.check_invariants()
    q.update(replace(gated, scheduling_gates=("b",)))
    assert q.where("default/g") == GATED_Q
    q.update(replace(gated, scheduling_gates=()))
    assert q.where("default/g") == ACTIVE_Q and q.counts()[GATED_Q] == 0
    assert q.nominator.nominated_node("default/g") == "n1"
    q.check_invariants()
    assert pop(q, "default/g").pod.scheduling_gates == ()


def test_a_gated_pod_can_be_deleted(q: PriorityQueue) -> None:
    from dataclasses import replace

    getattr(q, "q", q).pre_enqueue = _gates  # past the Checked wrapper
    q.add(replace(pod("g"), scheduling_gates=("a",)))
    assert q.delete("default/g") and not q.contains("default/g")
    q.check_invariants()


def _quota(pod: PodInfo, allowed: set[str]) -> Status | None:
    """A PreEnqueue check in the manner of a Python plugin: a pod waits until its namespace
    is allowed (what the test's ``allowed`` set says), after the SchedulingGates check."""
    gated = _gates(pod)
    if gated is not None:
        return gated
    if pod.namespace in allowed:
        return None
    return Status.unresolvable(f"namespace {pod.namespace} over quota", plugin="Quota")


def test_a_plugin_gated_pod_is_released_by_an_event_its_plugin_queues_for(
    clock: FakeClock,
) -> None:
    """Upstream's gated pods: a cluster event re-runs PreEnqueue for the pods whose gating
    plugin's queueing hint says QUEUE, and only for those."""
    from dataclasses import replace

    allowed: set[str] = set()
    seen: list[tuple[Any, Any]] = []

    def quota_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        seen.append((pod.key, new))
        return QueueingHint.QUEUE if new == "quota-freed" else QueueingHint.SKIP

    hints = {**HINTS, "Quota": [EventRegistration(ClusterEvent("PDB", "Update"), quota_hint)]}
    q = Checked(PriorityQueue(clock, hints=hints))
    q.q.pre_enqueue = lambda pod: _quota(pod, allowed)
    q.add(pod("a"))
    q.add(replace(pod("b"), scheduling_gates=("x",)))
    assert q.where("default/a") == GATED_Q and q.where("default/b") == GATED_Q
    assert q.get("default/a").unschedulable_plugins == {"Quota"}
    assert q.get("default/b").unschedulable_plugins == {names.SCHEDULING_GATES}
    # An event the plugin does not register for never reaches its hint.
    q.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None)
    assert seen == [] and q.where("default/a") == GATED_Q
    # Its hint says SKIP: still gated, PreEnqueue not run again.
    allowed.add("default")
    q.move_all_to_active_or_backoff(ClusterEvent("PDB", "Update"), None, "other")
    assert seen == [("default/a", "other")] and q.where("default/a") == GATED_Q
    # QUEUE: PreEnqueue runs again and lets it in; the SchedulingGates pod stays.
    assert q.move_all_to_active_or_backoff(ClusterEvent("PDB", "Update"), None, "quota-freed") == 1
    assert q.where("default/a") == ACTIVE_Q and q.get("default/a").unschedulable_plugins == set()
    assert q.where("default/b") == GATED_Q
    q.check_invariants()


def test_a_plugin_gated_pod_stays_gated_when_the_rerun_still_rejects_it(
    clock: FakeClock,
) -> None:
    calls: list[str] = []

    def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.QUEUE

    def check(p: PodInfo) -> Status | None:
        calls.append(p.key)
        return Status.unresolvable("still no", plugin="Quota" if len(calls) < 2 else "Other")

    hints = {**HINTS, "Quota": [EventRegistration(ClusterEvent("Node", "Add"), hint)]}
    q = PriorityQueue(clock, hints=hints)  # not Checked: its invariant check runs PreEnqueue
    q.pre_enqueue = check
    q.add(pod("a"))
    assert q.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None) == 0
    assert calls == ["default/a", "default/a"]
    # The plugin that rejects it now is the one whose hints count from here on.
    assert q.where("default/a") == GATED_Q and q.get("default/a").unschedulable_plugins == {"Other"}
    q.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None)
    assert calls == ["default/a", "default/a"]
    q.check_invariants()
    assert q.where("default/a") == GATED_Q


def test_a_pod_a_plugin_rejects_on_its_way_back_is_gated_without_its_nomination(
    clock: FakeClock,
) -> None:
    """PreEnqueue runs whenever a pod would enter activeQ (upstream's moveToActiveQ) or, with
    SchedulerPopFromBackoffQ, backoffQ (its moveToBackoffQ), not only when it is added:
    after a failure, an event or an activation."""
    from dataclasses import replace

    allowed = {"default"}
    q = Checked(PriorityQueue(clock, hints=HINTS))
    q.q.pre_enqueue = lambda pod: _quota(pod, allowed)
    q.add(replace(pod("a"), nominated_node_name="n1"))
    q.add(pod("b"))
    qa, qb = pop(q, "default/a"), pop(q, "default/b")
    assert q.nominator.nominated_node("default/a") == "n1"
    allowed.clear()  # the plugin now keeps every pod of the namespace out
    qa.errored = True  # an error: back through backoffQ, checked on the way in
    q.add_unschedulable_if_not_present(qa)
    assert q.where("default/a") == GATED_Q and q.get("default/a").unschedulable_plugins == {"Quota"}
    assert q.nominator.nominated_node("default/a") is None
    qb.unschedulable_plugins = {names.NODE_RESOURCES_FIT}
    q.add_unschedulable_if_not_present(qb)
    assert q.where("default/b") == UNSCHEDULABLE_Q
    q.activate(["default/b"])
    assert q.where("default/b") == GATED_Q
    assert q.pop() is None


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_pre_enqueue_runs_as_a_pod_enters_backoff_not_as_it_leaves(
    clock: FakeClock, pop_from_backoff: bool
) -> None:
    """Upstream with SchedulerPopFromBackoffQ (on since 1.33) runs PreEnqueue when a pod
    enters backoffQ, since pop may take it from there at once, and not again when it leaves
    (backoff over, popped early, activated); without the gate, when it leaves."""
    allowed = {"default"}
    checks: list[str] = []

    def check(p: PodInfo) -> Status | None:
        checks.append(p.key)
        return _quota(p, allowed)

    q = Checked(PriorityQueue(clock, hints=HINTS, pop_from_backoff=pop_from_backoff))
    q.q.pre_enqueue = check
    for name in ("a", "b", "c"):
        q.add(pod(name))
    failed = [pop(q, f"default/{n}") for n in ("a", "b", "c")]
    for qpi in failed:
        qpi.errored = True  # each waits out its backoff (not poppable early)
        q.add_unschedulable_if_not_present(qpi)
    assert {q.where(f"default/{n}") for n in ("a", "b", "c")} == {BACKOFF_Q}
    entered = 6 if pop_from_backoff else 3
    assert len(checks) == entered
    allowed.clear()  # the verdict changes while they wait
    q.activate(["default/a"])
    clock.step(11)
    assert q.flush_backoff_completed() == 2
    if pop_from_backoff:
        assert len(checks) == entered  # not checked again: all three go to activeQ
        assert [q.where(f"default/{n}") for n in ("a", "b", "c")] == [ACTIVE_Q] * 3
    else:
        assert len(checks) == entered + 3
        assert [q.where(f"default/{n}") for n in ("a", "b", "c")] == [GATED_Q] * 3


def _gated_after_an_error_then_let_in(clock: FakeClock) -> Checked:
    """Pod "a" errs, a PreEnqueue plugin keeps it out on its way to backoffQ (gated), then
    an update of the pod finds the plugin letting it in."""
    allowed: set[str] = {"default"}
    q = Checked(PriorityQueue(clock, hints=HINTS))
    q.q.pre_enqueue = lambda p: _quota(p, allowed)
    q.add(pod("a"))
    qa = pop(q, "default/a")
    qa.errored = True
    allowed.clear()
    q.add_unschedulable_if_not_present(qa)
    assert q.where("default/a") == GATED_Q
    allowed.add("default")
    q.update(pod("a"))  # an update runs PreEnqueue again for a gated pod
    return q


def test_a_pod_gated_on_its_way_to_backoff_and_let_in_waits_out_its_backoff(
    clock: FakeClock,
) -> None:
    """Released while the backoff of its failure runs, a pod goes to backoffQ (upstream
    requeues it by its backoff, as any pod coming back), not straight to activeQ; the
    plugin that gated it counts as its rejector there, so pop may take it early."""
    q = _gated_after_an_error_then_let_in(clock)
    assert q.where("default/a") == BACKOFF_Q
    q.q.pop_from_backoff = False  # the backoff itself: waited out
    assert q.pop() is None
    clock.step(11)
    assert q.flush_backoff_completed() == 1 and q.where("default/a") == ACTIVE_Q


def test_a_pod_gated_after_an_error_and_let_in_may_be_popped_early(clock: FakeClock) -> None:
    q = _gated_after_an_error_then_let_in(clock)
    assert q.where("default/a") == BACKOFF_Q
    assert pop(q, "default/a").attempts == 2  # activeQ is empty: taken from backoffQ


def test_the_left_over_flush_runs_pre_enqueue_again_for_pods_gated_that_long(
    clock: FakeClock,
) -> None:
    """Upstream's flush is a wildcard event: it re-evaluates gated pods too, so a plugin with
    no hint for what changed does not strand its pods. Checked once per period, not per
    flush."""
    allowed: set[str] = set()
    checks: list[str] = []

    def check(p: PodInfo) -> Status | None:
        checks.append(p.key)
        return _quota(p, allowed)

    q = PriorityQueue(clock, hints=HINTS, max_unschedulable_duration=300)
    q.pre_enqueue = check
    q.add(pod("a"))
    q.add(pod("b"))
    assert checks == ["default/a", "default/b"]
    clock.step(299)
    assert q.flush_unschedulable_left_over() == 0 and len(checks) == 2
    clock.step(1)
    assert q.flush_unschedulable_left_over() == 0  # checked again, still over quota
    assert checks[2:] == ["default/a", "default/b"]
    clock.step(1)
    q.flush_unschedulable_left_over()
    assert len(checks) == 4  # not again until another period has passed
    allowed.add("default")
    clock.step(299)
    assert q.flush_unschedulable_left_over() == 2
    assert q.where("default/a") == ACTIVE_Q and q.where("default/b") == ACTIVE_Q
    q.check_invariants()


# --------------------------------------------------------------------------- PopFromBackoffQ


def _helped(q: PriorityQueue, p: PodInfo) -> QueuedPodInfo:
    """Add ``p``, pop it, and let a node that could help it arrive while it is in flight:
    its NodeAffinity rejection sends it to backoffQ (a rejected pod, not an errored one)."""
    q.add(p)
    qpi = pop(q, p.key)
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n9").label("disk", "ssd").record())
    fail(q, qpi, names.NODE_AFFINITY)
    assert q.where(p.key) == BACKOFF_Q
    return qpi


def _picky(name: str, prio: int = 0) -> PodInfo:
    return make_pod(name).priority(prio).node_selector(disk="ssd").info()


def test_an_empty_active_queue_pops_a_rejected_pod_before_its_backoff_ends(
    q: PriorityQueue, clock: FakeClock
) -> None:
    """Upstream's SchedulerPopFromBackoffQ (on by default since 1.33): nothing else to do,
    so the pod goes again now instead of after its second of backoff."""
    incoming: list[tuple[str, str]] = []
    q.q.on_incoming = lambda queue, event: incoming.append((queue, event))  # type: ignore[attr-defined]
    _helped(q, _picky("p"))
    assert q.next_backoff_expiry() == clock.now() + 1
    again = pop(q, "default/p")
    assert again.attempts == 2 and q.where("default/p") is not None
    assert ("active", "PopFromBackoffQ") in incoming


def test_active_pods_go_first_and_the_backoff_pod_waits(q: PriorityQueue) -> None:
    _helped(q, _picky("p", prio=1000))
    q.add(pod("a"))
    pop(q, "default/a")  # activeQ first, whatever the priorities
    assert q.where("default/p") == BACKOFF_Q
    pop(q, "default/p")


def test_an_errored_pod_is_never_popped_before_its_backoff_ends(
    q: PriorityQueue, clock: FakeClock
) -> None:
    q.add(pod("e"))
    fail(q, pop(q, "default/e"))  # an error: upstream's error backoff heap
    assert q.where("default/e") == BACKOFF_Q
    assert q.pop() is None
    clock.step(1)
    q.flush_backoff_completed()
    pop(q, "default/e")


def test_backoff_pods_pop_by_window_then_priority(q: PriorityQueue, clock: FakeClock) -> None:
    """Within one second of backoff expiry the higher priority goes first (upstream orders a
    window as activeQ would); an earlier window goes first whatever the priorities."""
    clock.set(float(int(clock.now())) + 100.0)  # a whole second: the windows below are exact
    start = clock.now()
    low, high, later = _picky("low", 1), _picky("high", 5), _picky("later", 9)
    for p in (low, high, later):
        q.add(p)
    q.move_all_to_active_or_backoff(NODE_ADD, None, None)  # before the pops: helps nobody
    qpis = {}
    for key in ("default/later", "default/high", "default/low"):
        qpis[key] = pop(q, key)
    ssd = make_node("n9").label("disk", "ssd").record()
    q.move_all_to_active_or_backoff(NODE_ADD, None, ssd)
    fail(q, qpis["default/low"], names.NODE_AFFINITY)  # expires at start + 1.0
    clock.step(0.5)
    fail(q, qpis["default/high"], names.NODE_AFFINITY)  # start + 1.5: the same window
    clock.step(0.6)
    fail(q, qpis["default/later"], names.NODE_AFFINITY)  # start + 2.1: the next window
    assert q.next_backoff_expiry() == start + 1.0
    for key in ("default/high", "default/low", "default/later"):
        pop(q, key)


def test_without_pop_from_backoff_the_pod_waits_out_its_backoff(clock: FakeClock) -> None:
    q = Checked(PriorityQueue(clock, hints=HINTS, pop_from_backoff=False))
    _helped(q, _picky("p"))  # type: ignore[arg-type]
    assert q.pop() is None
    clock.step(1)
    q.flush_backoff_completed()
    pop(q, "default/p")  # type: ignore[arg-type]


def test_a_pod_popped_from_backoff_passes_the_checks_of_active(
    q: PriorityQueue, clock: FakeClock
) -> None:
    """On its way to the cycle a pod from backoffQ meets the preemption hold, which sends it
    to the unschedulable map, and the next one in backoffQ is popped instead; a PreEnqueue
    rejection has already sent its pod to the gated set as it entered backoffQ."""
    held, gated, ok = _picky("held", 9), _picky("gated", 5), _picky("ok", 1)
    for p in (held, gated, ok):
        q.add(p)
    qpis = {k: pop(q, k) for k in ("default/held", "default/gated", "default/ok")}
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n9").label("disk", "ssd").record())
    q.q.pre_enqueue = lambda p: (  # type: ignore[attr-defined]
        Status.unresolvable("not yet", plugin="Quota") if p.key == "default/gated" else None
    )
    for qpi in qpis.values():
        fail(q, qpi, names.NODE_AFFINITY)
    assert q.where("default/gated") == GATED_Q
    q.q.gate = lambda p: p.key != "default/held"  # type: ignore[attr-defined]
    pop(q, "default/ok")
    assert q.where("default/held") == UNSCHEDULABLE_Q


def test_on_ready_fires_when_a_rejected_pod_enters_backoff(clock: FakeClock) -> None:
    woken: list[int] = []
    q = Checked(PriorityQueue(clock, hints=HINTS, on_ready=lambda: woken.append(1)))
    q.add(_picky("p"))
    qpi = pop(q, "default/p")  # type: ignore[arg-type]
    woken.clear()
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n9").label("disk", "ssd").record())
    fail(q, qpi, names.NODE_AFFINITY)  # type: ignore[arg-type]
    assert woken, "the scheduling loop must wake to pop it"


def test_a_gated_pod_is_checked_by_its_gating_plugin_first(clock: FakeClock) -> None:
    """The queue hands the plugin that gated the pod to the checks (upstream runs it first):
    on its hint's event the pod stays gated by it while it says no."""
    seen: list[str] = []

    def first(p: PodInfo, gating: str) -> Status | None:
        seen.append(gating)
        return Status.unresolvable("still no", plugin=gating)

    hints = {**HINTS, "Quota": [EventRegistration(ClusterEvent("Node", "Add"))]}
    q = Checked(PriorityQueue(clock, hints=hints))
    q.q.pre_enqueue = lambda p: Status.unresolvable("no", plugin="Quota")
    q.q.pre_enqueue_gated = first
    q.add(pod("a"))
    assert seen == [] and q.get("default/a").unschedulable_plugins == {"Quota"}
    q.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"), None, None)
    assert seen == ["Quota"] and q.where("default/a") == GATED_Q


def test_in_flight_events_are_counted_by_event_until_their_pods_land(clock: FakeClock) -> None:
    """Upstream's scheduler_inflight_events: the events kept for pods in flight (a failure
    checks them against its hints), by event, and PodPopped, the pods in flight."""
    q = Checked(PriorityQueue(clock, hints=HINTS))
    assert q.in_flight_events() == {"PodPopped": 0}
    q.move_all_to_active_or_backoff(NODE_ADD, None, None)  # nobody in flight: not kept
    q.add(pod("a"))
    q.add(pod("b"))
    qa = pop(q, "default/a")
    q.move_all_to_active_or_backoff(NODE_ADD, None, None)
    q.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Delete"), None, None)
    qb = pop(q, "default/b")
    q.move_all_to_active_or_backoff(NODE_ADD, None, None)
    assert q.in_flight_events() == {"PodPopped": 2, "NodeAdd": 2, "AssignedPodDelete": 1}
    q.done(qa.pod.key)  # b popped later: only the event after its pop is kept for it
    assert q.in_flight_events() == {"PodPopped": 1, "NodeAdd": 1}
    q.done(qb.pod.key)
    assert q.in_flight_events() == {"PodPopped": 0}


# --------------------------------------------------------------------------- QueueSort


def _by_rank(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """A QueueSort order: the pod's ``rank`` label, lowest first, whatever the priorities;
    pods without a rank (or of equal rank) are not told apart."""
    return int(a.pod.labels.get("rank", 99)) < int(b.pod.labels.get("rank", 99))


def ranked(name: str, rank: int | None, prio: int = 0) -> PodInfo:
    b = make_pod(name).req(cpu="1").priority(prio)
    if rank is not None:
        b = b.label("rank", str(rank))
    return b.info()


def test_a_queue_sort_less_orders_active_q_and_ties_go_by_insertion(q: PriorityQueue) -> None:
    """Upstream's QueueSortFunc: the plugin's less replaces PrioritySort (priority plays no
    part unless less reads it); pods it does not tell apart keep their insertion order."""
    q.set_less(_by_rank)
    for p in (
        ranked("high-prio", 5, prio=100),
        ranked("none-a", None),
        ranked("first", 1),
        ranked("none-b", None),
        ranked("second", 2),
    ):
        q.add(p)
    order = ["first", "second", "high-prio", "none-a", "none-b"]
    assert [p.name for p in q.pending_pods()[ACTIVE_Q]] == order
    # An update re-sorts the pod; a deletion finds it in the plugin's order.
    q.update(ranked("none-b", 0))
    q.delete("default/second")
    assert [pop(q, f"default/{n}").pod.name for n in ("none-b", "first", "high-prio", "none-a")]
    assert q.pop() is None


def test_a_queue_sort_less_orders_a_window_of_backoff_q(q: PriorityQueue, clock: FakeClock) -> None:
    """Within one second of backoff expiry the plugin's order decides (upstream's backoffQ
    orders a window with activeQ's less), here against priority."""
    q.set_less(_by_rank)
    clock.set(float(int(clock.now())) + 100.0)
    late = ranked("late", 1, prio=1)
    early = ranked("early", 2, prio=9)
    for p in (early, late):
        q.add(p)
    qpis = {p.name: pop(q, p.key) for p in (late, early)}
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n9").record())  # helps both
    fail(q, qpis["late"], names.NODE_AFFINITY)
    clock.step(0.5)
    fail(q, qpis["early"], names.NODE_AFFINITY)  # the same window
    pop(q, "default/late")
    pop(q, "default/early")


def test_a_queue_sort_that_changes_its_mind_cannot_lose_a_pod(q: PriorityQueue) -> None:
    """A less must stay the same while pods wait; one that does not leaves activeQ out of
    order, but every pod can still be removed and popped (none lost, none twice)."""
    flip = {"on": False}

    def fickle(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return (a.pod.name > b.pod.name) if flip["on"] else (a.pod.name < b.pod.name)

    q.set_less(fickle)
    for i in range(40):
        q.add(ranked(f"p{i:02d}", None))
    flip["on"] = True
    for i in range(0, 40, 3):
        assert q.delete(f"default/p{i:02d}")
    seen = []
    while (qpi := q.pop()) is not None:
        seen.append(qpi.pod.name)
        q.done(qpi.pod.key)
    assert sorted(seen) == [f"p{i:02d}" for i in range(40) if i % 3]


def test_the_queue_order_is_set_only_while_empty(q: PriorityQueue) -> None:
    q.add(ranked("a", 1))
    with pytest.raises(RuntimeError, match="only be set while it is empty"):
        q.set_less(_by_rank)
