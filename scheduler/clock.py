"""Injected time: the live scheduler uses RealClock, tests and ``simulate`` a FakeClock."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (a monotonic-enough float)."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when told to: tests assert exact virtual durations."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def step(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a FakeClock never goes backwards")
        self._now += seconds

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError("a FakeClock never goes backwards")
        self._now = t
