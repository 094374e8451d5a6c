"""Out-of-tree Python plugins in the live scheduler, against the real API server: the
example LabelPolicy (examples/plugins/labelpolicy), loaded through ``pluginModules``, keeps
pods off nodes labelled for maintenance and prefers SSD nodes; a PreEnqueue plugin holds
pods out of the queue until an update lets them in."""

from __future__ import annotations

import os
from typing import Any

from tests.e2e.conftest import REPO_ROOT, wait_for
from tests.e2e.kit import Kit, settle

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


PLUGINS = REPO_ROOT / "tests" / "e2e" / "plugins"


def test_a_python_pre_enqueue_plugin_holds_pods_until_an_update_lets_them_in(
    kit: Kit, spawn_scheduler: Any
) -> None:
    """HoldLabel (tests/e2e/plugins, loaded through ``pluginModules``) keeps pods labelled
    hold=true out of the queue although the node has room: they never run Filter (no
    FailedScheduling event), and are bound once an update removes the label."""
    name = f"hold-{kit.ns}"
    sched = spawn_scheduler(
        name=name,
        config={
            "pluginModules": {"HoldLabel": "holdlabel:HoldLabel"},
            "profiles": [{"plugins": {"preEnqueue": {"enabled": [{"name": "HoldLabel"}]}}}],
        },
        extra_env={"PYTHONPATH": os.pathsep.join([str(PLUGINS), str(REPO_ROOT)])},
    )
    kit.nodes(1, cpu="2")
    kit.create("free", cpu="1", scheduler=name)
    kit.wait_bound("free")
    kit.create("held", cpu="1", scheduler=name, labels={"hold": "true"})
    wait_for(
        lambda: sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 1,
        15,
        "the held pod in the gated set",
    )
    settle(3)
    assert not kit.node_of("held")
    assert not kit.events("held", reason="FailedScheduling")
    kit.core.patch_namespaced_pod("held", kit.ns, {"metadata": {"labels": {"hold": None}}})
    kit.wait_bound("held")
    assert sched.metric("scheduler_pending_pods", {"queue": "gated"}) == 0
