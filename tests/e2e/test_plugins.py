"""An out-of-tree Python plugin in the live scheduler, against the real API server: the
example LabelPolicy (examples/plugins/labelpolicy), loaded through ``pluginModules``, keeps
pods off nodes labelled for maintenance and prefers SSD nodes."""

from __future__ import annotations

import os
from typing import Any

from tests.e2e.conftest import REPO_ROOT
from tests.e2e.kit import Kit

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
