"""Out-of-tree Python plugins in the live scheduler, against the real API server: the
example LabelPolicy (examples/plugins/labelpolicy), loaded through ``pluginModules``, keeps
pods off nodes labelled for maintenance and prefers SSD nodes; the example Approval
(examples/plugins/approval), a PreEnqueue plugin, holds pods out of the queue until an
update approves them; Coscheduling (a Permit plugin) binds a group together; ZoneStamp (an
async Bind plugin) binds pods itself with their node's zone stamped on them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.e2e.conftest import REPO_ROOT, wait_for
from tests.e2e.kit import Kit, pod_manifest, settle

EXAMPLE = REPO_ROOT / "examples" / "plugins" / "labelpolicy"


def test_the_example_plugin_filters_and_scores_live(kit: Kit, spawn_scheduler: Any) -> None:
    name = f"plugins-{kit.ns}"
    spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"LabelPolicy": "labelpolicy:LabelPolicy"},
            "profiles": [
                {
                    "plugins": {"multiPoint": {"enabled": [{"name": "LabelPolicy", "weight": 5}]}},
                    "pluginConfig": [
                        {
                            "name": "LabelPolicy",
                            "args": {"avoid": "maintenance=true", "prefer": "disk=ssd"},
                        }
                    ],
                }
            ],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO_ROOT)])},
    )
    (busy,) = kit.nodes(1, cpu="8", labels={"maintenance": "true"})
    (plain,) = kit.nodes(1, cpu="8")
    (ssd,) = kit.nodes(1, cpu="8", labels={"disk": "ssd"})
    for i in range(3):
        kit.create(f"p-{i}", cpu="100m", scheduler=name)
    placed = {kit.wait_bound(f"p-{i}") for i in range(3)}
    assert placed == {ssd}, (placed, busy, plain, ssd)
    # Only the SSD node full: the plugin's filter still keeps the maintenance node out.
    kit.create("big", cpu="7900m", scheduler=name)
    assert kit.wait_bound("big") == plain


APPROVAL = REPO_ROOT / "examples" / "plugins" / "approval"


def test_the_example_pre_enqueue_plugin_holds_pods_until_they_are_approved(
    kit: Kit, spawn_scheduler: Any
) -> None:
    """The example Approval plugin (examples/plugins/approval, a PreEnqueue plugin loaded
    through ``pluginModules``) keeps this namespace's unapproved pods out of the queue
    although the node has room: they run no Filter (no FailedScheduling event) and are
    bound once an update adds the label."""
    name = f"approval-{kit.ns}"
    sched = spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"Approval": "approval:Approval"},
            "profiles": [
                {
                    "plugins": {"preEnqueue": {"enabled": [{"name": "Approval"}]}},
                    "pluginConfig": [{"name": "Approval", "args": {"namespaces": [kit.ns]}}],
                }
            ],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(APPROVAL), str(REPO_ROOT)])},
    )
    kit.nodes(1, cpu="2")
    kit.create("approved", cpu="1", scheduler=name, labels={"approved": "true"})
    kit.wait_bound("approved")
    kit.create("waiting", cpu="1", scheduler=name)
    wait_for(
        lambda: sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 1,
        15,
        "the unapproved pod in the gated set",
    )
    settle(3)
    assert not kit.node_of("waiting")
    assert not kit.events("waiting", reason="FailedScheduling")
    kit.core.patch_namespaced_pod("waiting", kit.ns, {"metadata": {"labels": {"approved": "true"}}})
    kit.wait_bound("waiting")
    # Read once: the gauges are set from the queue right before each scrape.
    assert sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 0


LEDGER = REPO_ROOT / "tests" / "e2e" / "plugins"


def test_reserve_pre_bind_and_post_bind_plugins_run_around_the_real_binding(
    kit: Kit, spawn_scheduler: Any, tmp_path: Path
) -> None:
    """A Reserve/PreBind/PostBind plugin (tests/e2e/plugins/ledger.py): the allowed pod is
    reserved, prepared (PreBind), bound, and PostBind hears of it; the pod denied at
    Reserve and the one PreBind rejects are unreserved, get a FailedScheduling event with
    the plugin's reason, are never bound and preempt nobody."""
    journal = tmp_path / "ledger.journal"
    name = f"ledger-{kit.ns}"
    sched = spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"Ledger": "ledger:Ledger"},
            "profiles": [
                {
                    "plugins": {"multiPoint": {"enabled": [{"name": "Ledger"}]}},
                    "pluginConfig": [{"name": "Ledger", "args": {"journal": str(journal)}}],
                }
            ],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(LEDGER), str(REPO_ROOT)])},
    )
    (node,) = kit.nodes(1, cpu="2")
    kit.create("allowed", cpu="1", scheduler=name)
    assert kit.wait_bound("allowed") == node
    allowed = f"{kit.ns}/allowed"
    wait_for(
        lambda: f"post_bind {allowed} {node}" in journal.read_text(),
        15,
        "PostBind of the bound pod",
    )
    kit.create("denied", cpu="1", scheduler=name, labels={"ledger": "deny"})
    event = kit.wait_event("denied", "FailedScheduling")
    assert event["message"] == "0/1 nodes are available: 1 the ledger denies this pod.", event
    denied = f"{kit.ns}/denied"
    lines = journal.read_text().splitlines()
    assert lines[:3] == [f"{p} {allowed} {node}" for p in ("reserve", "pre_bind", "post_bind")]
    assert lines[3:5] == [f"reserve {denied} {node}", f"unreserve {denied} {node}"], lines
    kit.create("unprepared", cpu="100m", scheduler=name, labels={"ledger": "unprepared"})
    event = kit.wait_event("unprepared", "FailedScheduling")
    assert event["message"] == "the ledger cannot prepare this pod", event
    unprepared = f"{kit.ns}/unprepared"
    mine = [line for line in journal.read_text().splitlines() if unprepared in line]
    assert mine[:3] == [f"{p} {unprepared} {node}" for p in ("reserve", "pre_bind", "unreserve")]
    settle(2)
    # Both are tried again (after backoff, or on any event: the plugin has no hints) and
    # turned down again; neither is ever bound.
    assert not kit.node_of("denied") and not kit.node_of("unprepared")
    assert sched.metric("scheduler_preemption_attempts_total") == 0
    assert sched.alive


COSCHEDULING = REPO_ROOT / "examples" / "plugins" / "coscheduling"
GROUP = "pod-group.example.com/name"
MIN_MEMBER = "pod-group.example.com/min-member"


def test_the_example_permit_plugin_binds_a_pod_group_all_together_or_not_at_all(
    kit: Kit, spawn_scheduler: Any
) -> None:
    """The example Coscheduling plugin (examples/plugins/coscheduling, a Permit plugin and
    the profile's QueueSort plugin): members of a group of three wait at Permit, nominated
    to their node and unbound, with a WaitingForPodGroup event each, until the third
    arrives; then all three are bound. A group
    that never completes is rejected when its timeout passes: a FailedScheduling event
    names the plugin, the pod stays unbound and its nomination is cleared."""
    name = f"cosched-{kit.ns}"
    sched = spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"Coscheduling": "coscheduling:Coscheduling"},
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "PrioritySort"}],  # it sorts the queue too
                        }
                    },
                    "pluginConfig": [{"name": "Coscheduling", "args": {"timeoutSeconds": 4}}],
                }
            ],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(COSCHEDULING), str(REPO_ROOT)])},
    )
    (node,) = kit.nodes(1, cpu="4")

    def nominated(pod: str) -> str:
        return str(kit.core.read_namespaced_pod(pod, kit.ns).status.nominated_node_name or "")

    group = {GROUP: "g", MIN_MEMBER: "3"}
    for pod in ("g-0", "g-1"):
        kit.create(pod, cpu="1", scheduler=name, labels=group)
    for pod in ("g-0", "g-1"):
        wait_for(lambda p=pod: nominated(p) == node, 15, f"{pod} nominated while it waits")
    assert not kit.node_of("g-0") and not kit.node_of("g-1")
    # Each waiting member has the plugin's event (FrameworkHandle.event_recorder), reported
    # by this scheduler (reportingController: its name).
    waiting = [kit.wait_event(p, "WaitingForPodGroup") for p in ("g-0", "g-1")]
    assert {e["message"] for e in waiting} == {
        "waiting for 2 more member(s) of pod group g",
        "waiting for 1 more member(s) of pod group g",
    }, waiting
    assert {(e["type"], e.get("reportingComponent")) for e in waiting} == {("Normal", name)}
    kit.create("g-2", cpu="1", scheduler=name, labels=group)
    for pod in ("g-0", "g-1", "g-2"):
        assert kit.wait_bound(pod) == node
    assert not kit.events("g-0", reason="FailedScheduling")

    kit.create("h-0", cpu="1", scheduler=name, labels={GROUP: "h", MIN_MEMBER: "3"})
    event = kit.wait_event("h-0", "FailedScheduling")
    assert event["message"] == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 4s at plugin "
        "Coscheduling."
    ), event
    assert not kit.node_of("h-0")
    wait_for(lambda: nominated("h-0") == "", 15, "h-0's nomination cleared")
    wait_for(
        lambda: (
            sched.metric(
                "scheduler_permit_wait_duration_seconds_count", {"result": "Unschedulable"}
            )
            == 1
        ),
        15,
        "the rejected wait in the metrics",
    )
    assert sched.metric("scheduler_permit_wait_duration_seconds_count", {"result": "Success"}) == 2
    assert sched.alive


ZONESTAMP = REPO_ROOT / "examples" / "plugins" / "zonestamp"


def test_the_example_bind_plugin_binds_with_the_zone_stamped_in_the_binding(
    kit: Kit, spawn_scheduler: Any
) -> None:
    """The example ZoneStamp (examples/plugins/zonestamp, an async Bind plugin before
    DefaultBinder, calling the API through the FrameworkHandle's client) binds this
    namespace's pods itself, with the node's zone in an annotation the API server copies
    from the Binding; a pod of another namespace is bound by DefaultBinder, unstamped."""
    name = f"zonestamp-{kit.ns}"
    sched = spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"ZoneStamp": "zonestamp:ZoneStamp"},
            "profiles": [
                {
                    "plugins": {
                        "bind": {
                            "disabled": [{"name": "DefaultBinder"}],
                            "enabled": [{"name": "ZoneStamp"}, {"name": "DefaultBinder"}],
                        }
                    },
                    "pluginConfig": [
                        {
                            "name": "ZoneStamp",
                            "args": {"namespaces": [kit.ns], "annotation": "example.com/zone"},
                        }
                    ],
                }
            ],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(ZONESTAMP), str(REPO_ROOT)])},
    )
    (node,) = kit.nodes(1, cpu="4", labels={"topology.kubernetes.io/zone": "zone-e2e"})
    kit.create("stamped", cpu="100m", scheduler=name)
    assert kit.wait_bound("stamped") == node
    pod = kit.pod("stamped")
    assert pod is not None
    assert pod["metadata"]["annotations"] == {"example.com/zone": "zone-e2e"}, pod["metadata"]
    assert kit.wait_event("stamped", "Scheduled")["message"].endswith(f"to {node}")
    wait_for(
        lambda: (
            sched.metric(
                "scheduler_framework_extension_point_duration_seconds_count",
                {"extension_point": "Bind", "status": "Success"},
            )
            == 1
        ),
        15,
        "the plugin's binding in the metrics",
    )
    # Another namespace: ZoneStamp skips the pod, DefaultBinder binds it, unstamped.
    other = f"{kit.ns}-other"
    kit.core.create_namespace({"metadata": {"name": other}})
    try:
        body = pod_manifest("plain", scheduler=name, node_selector=kit.selector)
        kit.core.create_namespaced_pod(other, body)

        def bound() -> Any:
            return kit.core.read_namespaced_pod("plain", other).spec.node_name

        wait_for(bound, 30, "the other namespace's pod bound by DefaultBinder")
        plain = kit.core.read_namespaced_pod("plain", other)
        assert plain.spec.node_name == node and not plain.metadata.annotations
    finally:
        kit.core.delete_namespace(other)
