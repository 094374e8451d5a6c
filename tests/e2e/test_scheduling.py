"""The live scheduler against a real API server: binding, failures, other schedulers' pods,
metrics, and queue order (issue 'live scheduler' acceptance, e2e scenario 1)."""

from __future__ import annotations

import re

from kubernetes import client as k8s

from tests.e2e.conftest import wait_for
from tests.e2e.kit import Kit, pod_manifest, settle
from tests.e2e.procs import SchedulerProcess


def test_pending_pod_is_bound_to_a_fitting_node_with_scheduled_event(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    small, big = kit.nodes(1, cpu="1")[0], kit.nodes(1, cpu="8")[0]
    kit.create("web", cpu="2")
    node = kit.wait_bound("web")
    assert node == big, f"a 2-cpu pod must go to the 8-cpu node, not {small}"
    ev = kit.wait_event("web", "Scheduled")
    assert ev["message"] == f"Successfully assigned {kit.ns}/web to {big}"
    assert ev["type"] == "Normal"
    assert ev.get("reportingComponent") == "py-scheduler"
    # Written as kube-scheduler writes it: an events.k8s.io/v1 Event, the deprecated
    # core/v1 fields unset (the API server rejects them in this version).
    v1 = k8s.EventsV1Api(kit.cluster.api).read_namespaced_event(ev["metadata"]["name"], kit.ns)
    assert (v1.reporting_controller, v1.action, v1.note) == (
        "py-scheduler",
        "Binding",
        ev["message"],
    )
    assert v1.reporting_instance and v1.event_time is not None
    assert (v1.regarding.kind, v1.regarding.name) == ("Pod", "web")
    assert v1.regarding.uid == kit.pod("web")["metadata"]["uid"]
    assert v1.regarding.resource_version  # the pod as the scheduler saw it
    assert not v1.deprecated_count and not v1.deprecated_last_timestamp
    assert v1.deprecated_source is None or not v1.deprecated_source.component
    kit.wait_running("web")


def test_unfittable_pod_gets_pod_scheduled_false_and_failed_scheduling_event(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    kit.nodes(2, cpu="2")
    kit.create("huge", cpu="16")
    cond = kit.wait_condition(
        "huge", "PodScheduled", lambda c: c.get("status") == "False" and c.get("message")
    )
    assert cond["reason"] == "Unschedulable"
    # PodObservedGenerationTracking (GA in 1.35): the generation the scheduler judged.
    pod = kit.pod("huge")
    assert pod is not None
    assert cond.get("observedGeneration") == pod["metadata"]["generation"], cond
    msg = cond["message"]
    # Our two nodes are too small (and no preemption can fix that); every other node in the
    # shared cluster fails our nodeSelector.
    m = re.fullmatch(
        r"0/(\d+) nodes are available: (.*)\. preemption: 0/\1 nodes are available: "
        r"\1 Preemption is not helpful for scheduling\.",
        msg,
    )
    assert m, msg
    parts = m.group(2).split(", ")
    assert "2 Insufficient cpu" in parts, msg
    assert parts == sorted(parts), f"reasons must be sorted as upstream: {msg}"
    ev = kit.wait_event("huge", "FailedScheduling")
    assert ev["type"] == "Warning"
    assert ev["message"] == msg
    assert not kit.node_of("huge")


def test_repeated_failures_of_one_pod_version_are_one_event_series(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """client-go's event series against the real API server: the first failure is an Event
    about the pod at the version the scheduler saw; its status patch makes a new version,
    whose first failure is another Event; the next failure of that same version (nothing
    about the pod changed) joins its series: a strategic merge patch of events.k8s.io/v1
    ``series`` the API server accepts. Each retry is caused by freeing room that is still
    not enough (a filler pod deleted), so the message stays the same."""
    (node,) = kit.nodes(1, cpu="2")
    for i in range(2):
        kit.create(f"f-{i}", cpu="500m", node_name=node)
    kit.create("big", cpu="3")
    kit.wait_condition("big", "PodScheduled", lambda c: c.get("status") == "False")
    kit.wait_event("big", "FailedScheduling")

    def occurrences() -> int:
        evs = kit.events("big", "FailedScheduling")
        return sum(int((e.get("series") or {}).get("count") or 1) for e in evs)

    kit.delete("f-0", grace=0)
    wait_for(lambda: occurrences() >= 2, 30, "a second FailedScheduling occurrence")
    kit.delete("f-1", grace=0)
    api = k8s.EventsV1Api(kit.cluster.api)

    def series() -> list[k8s.EventsV1Event]:
        evs = api.list_namespaced_event(kit.ns).items
        return [e for e in evs if e.regarding.name == "big" and e.reason == "FailedScheduling"]

    wait_for(lambda: any(e.series and e.series.count >= 2 for e in series()), 30, "an event series")
    evs = series()
    assert len(evs) == 2, [(e.regarding.resource_version, e.series) for e in evs]
    (ser,) = [e for e in evs if e.series]
    assert ser.series.count == 2 and ser.series.last_observed_time is not None
    assert ser.note == kit.condition("big", "PodScheduled")["message"]  # type: ignore[index]
    # Two versions of the pod, an Event each: the first, then the one after our status patch.
    assert len({e.regarding.resource_version for e in evs}) == 2
    assert not kit.node_of("big")


def test_default_scheduler_pods_are_left_alone_but_counted(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    (node,) = kit.nodes(1, cpu="2")
    # A pod placed by "another scheduler" (bound directly) uses 1.5 of the 2 cpus.
    kit.create("theirs-bound", cpu="1500m", scheduler="default-scheduler", node_name=node)
    kit.wait_running("theirs-bound")
    # A pending pod of another scheduler: we must never touch it.
    kit.create("theirs-pending", cpu="100m", scheduler="default-scheduler")
    kit.create("ours", cpu="1")
    cond = kit.wait_condition("ours", "PodScheduled", lambda c: c.get("status") == "False")
    assert "Insufficient cpu" in cond["message"]
    settle(2)
    assert not kit.node_of("theirs-pending")
    assert kit.events("theirs-pending") == [], "py-scheduler must not act on others' pods"
    assert kit.condition("theirs-pending", "PodScheduled") is None


def test_metrics_count_attempts_and_bindings(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    before = py_scheduler.metric(
        "scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "py-scheduler"}
    )
    kit.nodes(1, cpu="4")
    for i in range(3):
        kit.create(f"m{i}", cpu="100m")
    for i in range(3):
        kit.wait_bound(f"m{i}")
    after = wait_for(
        lambda: (
            (
                v := py_scheduler.metric(
                    "scheduler_schedule_attempts_total",
                    {"result": "scheduled", "profile": "py-scheduler"},
                )
            )
            >= before + 3
            and v
        ),
        10,
        "scheduled attempts metric to grow by 3",
    )
    assert after >= before + 3
    status, text = py_scheduler.get("/metrics")
    assert status == 200
    for name in (
        "scheduler_pending_pods",
        "scheduler_queue_incoming_pods_total",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        'scheduler_cache_size{type="assumed_pods"}',
        "scheduler_pod_scheduled_after_flush_total",
        'scheduler_event_handling_duration_seconds_count{event="UnscheduledPodAdd"}',
        'scheduler_event_handling_duration_seconds_count{event="AssignedPodAdd"}',
        'scheduler_goroutines{operation="binding"}',
        'scheduler_inflight_events{event="PodPopped"}',
        'scheduler_queued_entities{queue="active",type="pod"}',
        "scheduler_queue_incoming_entities_total",
        # (the text format sorts labels by name)
        'informer_store_resource_version{group="",name="py-scheduler",resource="pods",'
        'version="v1"}',
        'informer_processing_latency_seconds_count{group="",name="py-scheduler",'
        'resource="pods",version="v1"}',
        "py_scheduler_leader",
    ):
        assert name in text, name
    # Upstream's count of plugin runs: our three pods were each filtered by
    # NodeResourcesFit on our node at least (the shared cluster has other nodes too).
    fit = {"plugin": "NodeResourcesFit", "profile": "py-scheduler"}
    for point in ("PreFilter", "Filter"):
        runs = py_scheduler.metric(
            "scheduler_plugin_evaluation_total", {**fit, "extension_point": point}
        )
        assert runs >= 3, (point, runs)
    assert py_scheduler.get("/healthz")[0] == 200
    assert py_scheduler.get("/readyz")[0] == 200


def test_queue_order_highest_priority_binds_first_then_creation_order(
    kit: Kit,
    spawn_scheduler,
) -> None:
    """Scenario 1. Pods queue while their own scheduler is down; when it starts with one
    slot free, the highest priority pod takes it; with equal priority, the oldest does."""
    name = f"order-{kit.ns}"
    (node,) = kit.nodes(1, cpu="1", pods=1)
    low = kit.priority_class(10)
    high = kit.priority_class(1000)
    kit.create("low", scheduler=name, priority_class=low)
    # Names sort against creation order, so list order cannot pass for creation order.
    kit.create("high-zz-first", scheduler=name, priority_class=high)
    settle(1.1)  # creationTimestamp has 1 s resolution
    kit.create("high-aa-second", scheduler=name, priority_class=high)
    sched = spawn_scheduler(
        name=name, config={"profiles": [{"plugins": {"postFilter": {"disabled": [{"name": "*"}]}}}]}
    )
    assert kit.wait_bound("high-zz-first") == node
    settle(2)
    assert not kit.node_of("high-aa-second")
    assert not kit.node_of("low")
    kit.delete("high-zz-first", grace=0)
    kit.wait_gone("high-zz-first")
    assert kit.wait_bound("high-aa-second", timeout=30) == node
    settle(2)
    assert not kit.node_of("low")
    assert sched.alive


def test_a_pod_needing_a_node_feature_waits_for_a_node_that_declares_it(
    kit: Kit,
    py_scheduler: SchedulerProcess,
) -> None:
    """NodeDeclaredFeatures (GA in v1.37): a container restart rule with action
    RestartAllContainers needs RestartAllContainersOnContainerExits in the node's
    status.declaredFeatures; kwok nodes declare nothing until we patch one."""
    plain, later = kit.nodes(2, cpu="2")
    body = pod_manifest("restarts-all", node_selector=kit.selector)
    body["spec"]["containers"][0]["restartPolicy"] = "Never"
    body["spec"]["containers"][0]["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ]
    kit.core.create_namespaced_pod(kit.ns, body)
    ev = kit.wait_event("restarts-all", "FailedScheduling")
    m = re.match(r"0/(\d+) nodes are available: (.*?)\. preemption:", ev["message"])
    assert m, ev["message"]
    assert "2 node(s) didn't match Pod's required features" in m.group(2).split(", "), ev
    assert not kit.node_of("restarts-all")
    kit.core.patch_node_status(
        later, {"status": {"declaredFeatures": ["RestartAllContainersOnContainerExits"]}}
    )
    assert kit.wait_bound("restarts-all") == later, f"{plain} declares nothing"


def test_with_api_call_order_priority_a_high_pod_s_binding_passes_lower_ones_waiting(
    kit: Kit,
    spawn_scheduler,
) -> None:
    """``apiCallOrder: Priority`` at one call a second: twelve low pods are assumed at once
    and their Bindings wait at the rate limit; a high-priority pod created once the first
    of them is bound is bound next, ahead of the lower pods' waiting Bindings (client-go's
    order, ``Arrival``, would bind it after all of them). Nothing is lost: every low pod is
    bound in the end."""
    name = f"callorder-{kit.ns}"
    (node,) = kit.nodes(1, cpu="8", pods=20)
    low = kit.priority_class(10)
    high = kit.priority_class(1000)
    sched = spawn_scheduler(
        name=name,
        config={"apiCallOrder": "Priority", "clientConnection": {"qps": 1, "burst": 1}},
    )
    lows = [f"low-{i:02d}" for i in range(12)]
    for pod in lows:
        kit.create(pod, scheduler=name, priority_class=low)

    def bound_lows() -> list[str]:
        return [p["metadata"]["name"] for p in kit.pods() if p["spec"].get("nodeName")]

    # The first Binding landed: the loop, which assumes a pod in milliseconds, has had a
    # second at least to assume all twelve, whose Bindings now wait for their tokens.
    wait_for(lambda: bound_lows(), 30, "a low pod bound")
    kit.create("high", scheduler=name, priority_class=high)
    assert kit.wait_bound("high", timeout=30) == node
    waiting = [p for p in lows if not kit.node_of(p)]
    assert len(waiting) >= 5, f"the high pod was bound after {12 - len(waiting)} low pods"
    for pod in lows:
        assert kit.wait_bound(pod, timeout=60) == node
    assert sched.alive
