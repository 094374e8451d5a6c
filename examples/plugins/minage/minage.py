"""MinAge: an example preemption hook for py-scheduler (upstream Evaluator's IsEligiblePod).

Pods that started less than ``minAgeSeconds`` ago are never chosen as preemption victims:
a freshly started batch job is not thrown away for the next higher-priority pod, and a
Deployment rolling out is not preempted while it comes up. Configuration::

    - name: MinAge
      args: {minAgeSeconds: 600}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.plugins import PodInfo

# Where "now" comes from (tests replace it).
CLOCK: Callable[[], float] = time.time


class MinAge:
    name = "MinAge"

    def __init__(self, args: Mapping[str, Any]) -> None:
        unknown = sorted(set(args) - {"minAgeSeconds"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field (known: minAgeSeconds)")
        seconds = args.get("minAgeSeconds", 600)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(f"minAgeSeconds: expected a number >= 0, got {seconds!r}")
        self.min_age = float(seconds)

    def is_eligible_victim(self, victim: PodInfo, preemptor: PodInfo) -> bool:
        """May ``victim`` be preempted for ``preemptor``? Only once it is old enough."""
        return CLOCK() - victim.start_time >= self.min_age
