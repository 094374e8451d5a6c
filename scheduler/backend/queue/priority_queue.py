"""PriorityQueue: the pods waiting to be scheduled, in three sub-queues as upstream's.

- activeQ: pods ready for a scheduling attempt, highest priority first, then earliest
  enqueue time (then insertion order), a SortedList of frozen keys (upstream's
  PrioritySort); or in the order of a QueueSort plugin's ``less`` (``set_less``), with
  insertion order between pods it does not tell apart.
- backoffQ: pods that failed recently and wait out their backoff, ordered by backoff
  expiry. As upstream's: the backoff doubles from 1s to at most 10s (by default) with the
  count of the pod's rejections, or of its consecutive errors when its last attempt ended
  in one (a rejection resets that count), and its expiry is cut to the whole second (the
  1-second ordering window of upstream's SchedulerPopFromBackoffQ, on by default since
  1.33), so a window's pods leave together. When activeQ is empty ``pop`` takes the next
  pod a plugin rejected from backoffQ at once (by window, then as activeQ orders); a pod
  whose attempt ended in an error always waits out its backoff.
- unschedulable pods: pods that failed and wait for a cluster event that could help them.
  Each remembers the plugins that rejected it; a cluster event moves it back only if one of
  those plugins' queueing hints says the event may make it schedulable (precise moves, not
  "move everything"). Pods left there longer than ``max_unschedulable_duration`` (5 min) are
  flushed back anyway. Every cluster event reaches the queue (nodes, assigned pods, PDBs,
  PriorityClasses, namespaces); whether it moves a pod is the rejecting plugins' call. As
  upstream, no in-tree plugin requeues for a PDB or PriorityClass change: a pod's priority
  is fixed at admission and a PDB only changes which victims preemption picks, never
  whether a pod can fit; a pod whose last attempt ended in an error has no rejecting
  plugin and moves on any event.

Gated pods (upstream's PreEnqueue, e.g. SchedulingGates: ``spec.schedulingGates``) wait in
a fourth set, ``gated``: they never reach activeQ, so they never run Filter, Score or
preemption, and are not counted as nominated. As upstream's moveToActiveQ, the PreEnqueue
checks run whenever a pod would enter activeQ (added, flushed from backoff, moved by an
event, activated), so a plugin may also gate a pod that failed before. Each gated pod
remembers the plugin that keeps it out; an update of the pod, or a cluster event that
plugin's queueing hints accept, runs the checks again, and so does the left-over flush
for pods gated longer than ``max_unschedulable_duration``; when every one passes (e.g. the
last gate removed) the pod moves to activeQ.

A pod popped for a cycle is "in flight". Events that arrive while pods are in flight are
remembered, and so is a scheduling-relevant update of the pod itself, so that a pod that
fails after such an event goes to backoffQ instead of sleeping in the unschedulable map
(the event may already have helped it).

Every pod the queue holds is in exactly one of activeQ, backoffQ, unschedulable, gated,
in-flight (``check_invariants``). The queue does no waiting itself: ``pop`` returns None
when nothing is ready, and ``on_ready`` (a callback) tells the owner when a pod became
ready (entered activeQ, or entered backoffQ where ``pop`` may take it), so an asyncio owner
can await it. Time comes from an injected Clock.

Runtime complexity: add/update/delete/pop O(log n); flush_backoff_completed O(k log n) for
k moved pods; move_all_to_active_or_backoff O(u) for u unschedulable pods.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sortedcontainers import SortedList

from scheduler.backend.queue.events import ANY, ClusterEvent, EventRegistration, QueueingHint
from scheduler.backend.queue.nominator import Nominator
from scheduler.clock import Clock
from scheduler.types import PodInfo

__all__ = [
    "ACTIVE_Q",
    "BACKOFF_Q",
    "GATED_Q",
    "UNSCHEDULABLE_Q",
    "PriorityQueue",
    "QueuedPodInfo",
]

ACTIVE_Q = "active"
BACKOFF_Q = "backoff"
UNSCHEDULABLE_Q = "unschedulable"
GATED_Q = "gated"
IN_FLIGHT = "in_flight"

# Event names for the scheduler_queue_incoming_pods_total metric.
EVENT_POD_ADD = "PodAdd"
EVENT_BACKOFF_COMPLETE = "BackoffComplete"
EVENT_UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
EVENT_SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
EVENT_POD_UPDATE = "PodUpdate"
EVENT_FORCE_ACTIVATE = "ForceActivate"
EVENT_POP_FROM_BACKOFF = "PopFromBackoffQ"

# Upstream's backoffQ orders the pods whose backoff ends within the same second as activeQ
# would (backoffQOrderingWindowDuration), for popping from it when activeQ is empty.
BACKOFF_ORDERING_WINDOW = 1.0


@dataclass(slots=True)
class QueuedPodInfo:
    pod: PodInfo
    timestamp: float  # enqueue time (activeQ order); the failure time once it failed
    initial_attempt_timestamp: float | None = None
    enqueued_at: float = 0.0  # when the queue first saw the pod (the scheduling SLI's start)
    attempts: int = 0
    unschedulable_count: int = 0  # attempts that plugins rejected (the backoff's count)
    consecutive_errors: int = 0  # attempts in a row that ended in an error (its count then)
    unschedulable_plugins: set[str] = field(default_factory=set)
    # The last attempt failed with an error (not a rejection): retry after backoff.
    errored: bool = False
    seq: int = 0
    _active_key: tuple[Any, ...] | None = None
    _backoff_key: tuple[float, int, str] | None = None
    _poppable_key: tuple[Any, ...] | None = None
    _in_flight_since: int = 0
    _updated_in_flight: bool = False
    _deleted_in_flight: bool = False  # deleted during its cycle: its failure is dropped
    _activated_in_flight: bool = False  # activate() named it during its cycle: if it fails,
    # it is retried after backoff (upstream's EventForceActivate aimed at an in-flight pod)
    _gated_at: float = 0.0  # when PreEnqueue last kept it out (the left-over flush's clock)
    # Its way back from the unschedulable pods was the left-over flush (a metric counts
    # the pods bound after it); cleared by its next failure, or if PreEnqueue gates it.
    was_flushed: bool = False

    @property
    def deleted_in_flight(self) -> bool:
        """The pod was deleted while its cycle ran (a cycle that awaits extenders)."""
        return self._deleted_in_flight


IncomingHook = Callable[[str, str], None]  # (queue, event) for metrics
# Each queueing hint call's seconds by (plugin, event, "Queue" / "QueueSkip" / "Error")
HintTimes = dict[tuple[str, str, str], list[float]]

# A QueueSort plugin's order: whether the first pod goes before the second.
Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]


class _Ordered:
    """A pod's place in activeQ (and within a window of backoffQ) under a QueueSort
    plugin's ``less``: before another pod if ``less`` says so, after it if ``less`` says
    the opposite, else by insertion order (a total order, which a sorted list needs).
    Equal only to itself."""

    __slots__ = ("less", "qpi")

    def __init__(self, qpi: QueuedPodInfo, less: Less) -> None:
        self.qpi = qpi
        self.less = less

    def __lt__(self, other: _Ordered) -> bool:
        a, b = self.qpi, other.qpi
        if self.less(a, b):
            return True
        if self.less(b, a):
            return False
        return a.seq < b.seq

    def __gt__(self, other: _Ordered) -> bool:
        return other.__lt__(self)


class Rejection(Protocol):
    """What a PreEnqueue check answers when it keeps a pod out (the framework's Status)."""

    @property
    def plugin(self) -> str: ...

    def message(self) -> str: ...


class PriorityQueue:
    def __init__(
        self,
        clock: Clock,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_duration: float = 300.0,
        hints: Mapping[str, Sequence[EventRegistration]] | None = None,
        on_ready: Callable[[], None] | None = None,
        on_incoming: IncomingHook | None = None,
        pop_from_backoff: bool = True,
        time_hints: bool = False,
    ) -> None:
        if initial_backoff <= 0 or max_backoff < initial_backoff:
            raise ValueError(
                f"backoff must satisfy 0 < initial ({initial_backoff}) <= max ({max_backoff})"
            )
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_duration = max_unschedulable_duration
        self.hints: dict[str, list[EventRegistration]] = {
            k: list(v) for k, v in (hints or {}).items()
        }
        # With several profiles, each profile's hints by its scheduler name (a pod's own
        # profile's decide its moves, as upstream's queueingHintMap per profile); empty:
        # ``hints`` for every pod.
        self.profile_hints: dict[str, dict[str, list[EventRegistration]]] = {}
        self.on_ready = on_ready
        self.on_incoming = on_incoming
        # With ``time_hints``: each hint call's duration, kept here until the metrics take
        # them (``take_hint_times``; a list append per call, the histogram built in bulk).
        self.hint_times: HintTimes | None = {} if time_hints else None
        # PreEnqueue-style gate: a pod for which it returns False waits in the unschedulable
        # map instead of activeQ (used to hold a preemptor while its victims are deleted).
        self.gate: Callable[[PodInfo], bool] | None = None
        # PreEnqueue plugins (SchedulingGates, Python plugins): the status of the first that
        # rejects the pod (naming it), or None. A rejected pod waits in the gated set until
        # an update, or an event that plugin's hints accept, lets it pass.
        self.pre_enqueue: Callable[[PodInfo], Rejection | None] | None = None
        # The same checks with the plugin that gated the pod last run first (upstream's
        # runPreEnqueuePluginsForPod), for a gated pod checked again; None: ``pre_enqueue``.
        self.pre_enqueue_gated: Callable[[PodInfo, str], Rejection | None] | None = None
        self.nominator = Nominator()
        # A QueueSort plugin's order (``set_less``); None: PrioritySort's, by plain keys.
        self.less: Less | None = None
        # Upstream's SchedulerPopFromBackoffQ (beta, on by default since 1.33): when activeQ
        # is empty, pop takes the next pod of backoffQ without waiting for its backoff to
        # end. Only pods that a plugin rejected qualify (upstream keeps pods whose attempt
        # ended in an error in a backoff heap of their own, which is never popped early).
        self.pop_from_backoff = pop_from_backoff
        self._active: SortedList = SortedList()
        self._backoff: SortedList = SortedList()
        # The rejected pods of backoffQ, by (expiry's 1-s window, -priority, timestamp, seq).
        self._backoff_poppable: SortedList = SortedList()
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, QueuedPodInfo] = {}
        self._where: dict[str, str] = {}
        self._infos: dict[str, QueuedPodInfo] = {}
        self._seq = itertools.count()
        self._event_seq = itertools.count(1)
        self._in_flight_events: list[tuple[int, ClusterEvent, Any, Any]] = []
        self.closed = False

    # ------------------------------------------------------------------ internals
    def _incoming(self, queue: str, event: str) -> None:
        if self.on_incoming is not None:
            self.on_incoming(queue, event)

    def set_less(self, less: Less | None) -> None:
        """Order activeQ (and each window of backoffQ) by a QueueSort plugin's ``less``
        instead of PrioritySort's (None). Only while the queue is empty."""
        if self._where:
            raise RuntimeError("the queue's order can only be set while it is empty")
        self.less = less

    def _active_key_of(self, qpi: QueuedPodInfo) -> tuple[Any, ...]:
        if self.less is None:
            return (-qpi.pod.priority, qpi.timestamp, qpi.seq, qpi.pod.key)
        return (_Ordered(qpi, self.less), 0, 0, qpi.pod.key)

    @staticmethod
    def _remove(keys: SortedList, key: Any) -> None:
        """Remove ``key`` from a sorted list. A QueueSort plugin whose ``less`` changed its
        mind about pods already queued (it must not) can leave the list out of order,
        where a bisection would miss the key: then it is found by a scan."""
        try:
            keys.remove(key)
        except (ValueError, IndexError):
            for i, k in enumerate(keys):
                if k is key:
                    del keys[i]
                    return
            raise

    def _push_active(self, qpi: QueuedPodInfo, event: str) -> None:
        if self.gate is not None and not self.gate(qpi.pod):
            self._push_unschedulable(qpi, event)
            return
        qpi._active_key = self._active_key_of(qpi)
        self._active.add(qpi._active_key)
        self._where[qpi.pod.key] = ACTIVE_Q
        self._infos[qpi.pod.key] = qpi
        self._incoming(ACTIVE_Q, event)
        if self.on_ready is not None:
            self.on_ready()

    def _push_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        expiry = self.backoff_expiry(qpi)
        qpi._backoff_key = (expiry, qpi.seq, qpi.pod.key)
        self._backoff.add(qpi._backoff_key)
        if _rejected(qpi):
            qpi._poppable_key = (expiry, *self._active_key_of(qpi))
            self._backoff_poppable.add(qpi._poppable_key)
        self._where[qpi.pod.key] = BACKOFF_Q
        self._infos[qpi.pod.key] = qpi
        self._incoming(BACKOFF_Q, event)
        if self.pop_from_backoff and qpi._poppable_key is not None and self.on_ready is not None:
            self.on_ready()  # pop may take it now if activeQ is empty

    def _push_unschedulable(self, qpi: QueuedPodInfo, event: str) -> None:
        self._unschedulable[qpi.pod.key] = qpi
        self._where[qpi.pod.key] = UNSCHEDULABLE_Q
        self._infos[qpi.pod.key] = qpi
        self._incoming(UNSCHEDULABLE_Q, event)

    def _remember_gate(self, qpi: QueuedPodInfo, st: Rejection) -> None:
        """A PreEnqueue check kept the pod out: its gating plugin (whose hints may release
        it) and when (the left-over flush's clock)."""
        qpi.unschedulable_plugins = {st.plugin} if st.plugin else set()
        qpi._gated_at = self.clock.now()

    def _push_gated(self, qpi: QueuedPodInfo, st: Rejection, event: str) -> None:
        self._remember_gate(qpi, st)
        self._gated[qpi.pod.key] = qpi
        self._where[qpi.pod.key] = GATED_Q
        self._infos[qpi.pod.key] = qpi
        self._incoming(GATED_Q, event)

    def gated_by(self, pod: PodInfo) -> Rejection | None:
        """The status of the PreEnqueue plugin that keeps ``pod`` out of the queue, or None."""
        return None if self.pre_enqueue is None else self.pre_enqueue(pod)

    def _release_if_ungated(self, qpi: QueuedPodInfo, event: str) -> bool:
        """Run PreEnqueue again for a gated pod: if every plugin lets it in (True), to
        backoffQ while its last failure's backoff runs (a pod gated on its way there), else
        activeQ; otherwise it stays gated, remembering the plugin that keeps it out now
        (the one that gated it before is asked first)."""
        gating = next(iter(qpi.unschedulable_plugins), "")
        if gating and self.pre_enqueue_gated is not None:
            st = self.pre_enqueue_gated(qpi.pod, gating)
        else:
            st = self.gated_by(qpi.pod)
        if st is not None:
            self._remember_gate(qpi, st)
            return False
        self._detach(qpi.pod.key)
        if self.pop_from_backoff and self.is_backing_off(qpi):
            # PreEnqueue has just passed: not run again. The gating plugin counts as the
            # pod's rejector (upstream keeps it among the UnschedulablePlugins), so even
            # after an error the pod may be popped early, as a rejected one.
            qpi.errored = False
            self._push_backoff(qpi, event)
        else:
            qpi.unschedulable_plugins = set()
            self._push_active(qpi, event)
        if qpi.pod.nominated_node_name:
            self.nominator.add_nominated_pod(qpi.pod, qpi.pod.nominated_node_name)
        return True

    def _detach(self, key: str) -> QueuedPodInfo | None:
        where = self._where.pop(key, None)
        qpi = self._infos.pop(key, None)
        if where is None or qpi is None:
            return None
        if where == ACTIVE_Q:
            self._remove(self._active, qpi._active_key)
            qpi._active_key = None
        elif where == BACKOFF_Q:
            self._backoff.remove(qpi._backoff_key)
            qpi._backoff_key = None
            if qpi._poppable_key is not None:
                self._remove(self._backoff_poppable, qpi._poppable_key)
                qpi._poppable_key = None
        elif where == UNSCHEDULABLE_Q:
            del self._unschedulable[key]
        elif where == GATED_Q:
            del self._gated[key]
        else:
            del self._in_flight[key]
        return qpi

    def _gate_out(self, qpi: QueuedPodInfo, st: Rejection, event: str) -> None:
        """A PreEnqueue check kept the pod out: to the gated set, without its nomination."""
        self.nominator.delete_nominated_pod_if_exists(qpi.pod.key)
        qpi.was_flushed = False
        self._push_gated(qpi, st, event)

    def _enter_active(self, qpi: QueuedPodInfo, event: str) -> None:
        """Upstream's moveToActiveQ: the PreEnqueue checks run each time a pod would enter
        activeQ (except from backoffQ when ``pop_from_backoff``: they ran when it went
        there); one that keeps it out sends it to the gated set."""
        st = self.gated_by(qpi.pod)
        if st is None:
            self._push_active(qpi, event)
        else:
            self._gate_out(qpi, st, event)

    def _leave_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        """A pod out of backoffQ (backoff over, popped early, activated) to activeQ. With
        ``pop_from_backoff`` (upstream's SchedulerPopFromBackoffQ) PreEnqueue ran when it
        entered backoffQ and is not run again; without, it runs now."""
        if self.pop_from_backoff:
            self._push_active(qpi, event)
        else:
            self._enter_active(qpi, event)

    def _enter_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        """Upstream's moveToBackoffQ: with ``pop_from_backoff`` the PreEnqueue checks run as
        the pod enters backoffQ (pop may take it from there at once); one that keeps it out
        sends it to the gated set."""
        st = self.gated_by(qpi.pod) if self.pop_from_backoff else None
        if st is None:
            self._push_backoff(qpi, event)
        else:
            self._gate_out(qpi, st, event)

    def _requeue(self, qpi: QueuedPodInfo, event: str) -> None:
        """To backoffQ if still backing off, else activeQ (through PreEnqueue)."""
        if self.is_backing_off(qpi):
            self._enter_backoff(qpi, event)
        else:
            self._enter_active(qpi, event)

    # ------------------------------------------------------------------ backoff
    def backoff_duration(self, attempts: int) -> float:
        d = self.initial_backoff
        for _ in range(1, attempts):
            if d >= self.max_backoff / 2:
                return self.max_backoff
            d += d
        return min(d, self.max_backoff)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """When the pod's backoff ends: its last failure's time plus the backoff for its
        count (consecutive errors if its last attempt ended in one, else rejections), cut
        to the window (upstream's getBackoffTime); its failure time if it never failed."""
        count = qpi.consecutive_errors or qpi.unschedulable_count
        if count == 0:
            return qpi.timestamp
        expiry = qpi.timestamp + self.backoff_duration(count)
        return expiry - expiry % BACKOFF_ORDERING_WINDOW

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_expiry(qpi) > self.clock.now()

    # ------------------------------------------------------------------ pod events
    def add(self, pod: PodInfo, *, timestamp: float | None = None) -> None:
        """A new pending pod. Goes to activeQ, or to the gated set if a PreEnqueue plugin
        rejects it. O(log n)."""
        if pod.key in self._where:
            self.update(pod)
            return
        qpi = QueuedPodInfo(
            pod,
            self.clock.now() if timestamp is None else timestamp,
            seq=next(self._seq),
            enqueued_at=self.clock.now(),
        )
        st = self.gated_by(pod)
        if st is not None:
            self._push_gated(qpi, st, EVENT_POD_ADD)
            return
        self._push_active(qpi, EVENT_POD_ADD)
        if pod.nominated_node_name:
            self.nominator.add_nominated_pod(pod, pod.nominated_node_name)

    def update(self, pod: PodInfo) -> None:
        """A queued pod changed: re-key it; an unschedulable pod whose spec changed is retried."""
        key = pod.key
        where = self._where.get(key)
        if where is None:
            self.add(pod)
            return
        qpi = self._infos[key]
        old = qpi.pod
        if where == GATED_Q:
            qpi.pod = pod
            self._release_if_ungated(qpi, EVENT_POD_UPDATE)  # e.g. the last gate is gone
            return
        self.nominator.update_nominated_pod(old, pod)
        spec_changed = _scheduling_relevant(old) != _scheduling_relevant(pod)
        if where == IN_FLIGHT:
            # Remembered: if this attempt fails, the update may already have helped.
            qpi._updated_in_flight = qpi._updated_in_flight or spec_changed
            qpi.pod = pod
            return
        self._detach(key)
        qpi.pod = pod
        if where == ACTIVE_Q:
            self._push_active(qpi, EVENT_POD_UPDATE)
        elif where == BACKOFF_Q:
            self._push_backoff(qpi, EVENT_POD_UPDATE)
        elif spec_changed:
            self._requeue(qpi, EVENT_POD_UPDATE)
        else:
            self._push_unschedulable(qpi, EVENT_POD_UPDATE)

    def delete(self, key: str) -> bool:
        """Remove a pod from every structure (queue, nominator). O(log n)."""
        self.nominator.delete_nominated_pod_if_exists(key)
        where = self._where.get(key)
        if where == IN_FLIGHT:
            self._infos[key]._deleted_in_flight = True
        return self._detach(key) is not None

    def contains(self, key: str) -> bool:
        return key in self._where

    def where(self, key: str) -> str | None:
        return self._where.get(key)

    def get(self, key: str) -> QueuedPodInfo | None:
        return self._infos.get(key)

    # ------------------------------------------------------------------ scheduling cycle
    def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, or None when nothing is ready: the head of activeQ, else
        (``pop_from_backoff``) the next rejected pod of backoffQ, through the same checks as
        a pod that enters activeQ (PreEnqueue, the preemption hold). O(log n)."""
        if self.closed:
            return None
        if not self._active and self.pop_from_backoff:
            while self._backoff_poppable and not self._active:
                early = self._detach(self._backoff_poppable[0][4])
                assert early is not None
                self._leave_backoff(early, EVENT_POP_FROM_BACKOFF)
        if not self._active:
            return None
        key = self._active[0][3]
        qpi = self._detach(key)
        assert qpi is not None
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self.clock.now()
        qpi.unschedulable_plugins = set()
        qpi.errored = False
        qpi._in_flight_since = next(self._event_seq)
        qpi._updated_in_flight = False
        qpi._activated_in_flight = False
        self._in_flight[key] = qpi
        self._where[key] = IN_FLIGHT
        self._infos[key] = qpi
        return qpi

    def done(self, key: str) -> None:
        """The cycle of an in-flight pod ended with the pod bound (or assumed). O(1)."""
        if self._where.get(key) == IN_FLIGHT:
            self._detach(key)
        self._prune_in_flight_events()

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo) -> None:
        """Return a pod whose attempt failed. Rejected pods wait in the unschedulable map
        unless an event that may help them came while they were in flight; errored pods and
        such lucky ones go to backoffQ."""
        key = qpi.pod.key
        if qpi._deleted_in_flight:
            self._prune_in_flight_events()
            return
        if key in self._where:
            if self._infos[key] is not qpi or self._where[key] != IN_FLIGHT:
                return  # already back in a queue (e.g. deleted and re-created meanwhile)
            self._detach(key)
        qpi.timestamp = self.clock.now()
        qpi.was_flushed = False
        if _rejected(qpi):
            qpi.unschedulable_count += 1
            qpi.consecutive_errors = 0  # the error is gone
        else:
            qpi.consecutive_errors += 1
        helped = (
            qpi.errored
            or not qpi.unschedulable_plugins
            or qpi._updated_in_flight
            or qpi._activated_in_flight
        )
        if not helped:
            for seq, ev, old, new in self._in_flight_events:
                if seq > qpi._in_flight_since and self._hint_says_queue(qpi, ev, old, new):
                    helped = True
                    break
        if helped:
            self._enter_backoff(qpi, EVENT_SCHEDULE_ATTEMPT_FAILURE)
        else:
            self._push_unschedulable(qpi, EVENT_SCHEDULE_ATTEMPT_FAILURE)
        self._prune_in_flight_events()

    def _prune_in_flight_events(self) -> None:
        if not self._in_flight:
            self._in_flight_events.clear()
            return
        oldest = min(q._in_flight_since for q in self._in_flight.values())
        if self._in_flight_events and self._in_flight_events[0][0] <= oldest:
            self._in_flight_events = [e for e in self._in_flight_events if e[0] > oldest]

    # ------------------------------------------------------------------ periodic flushes
    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff expired to activeQ (upstream runs this every 1s)."""
        now = self.clock.now()
        moved = 0
        while self._backoff and self._backoff[0][0] <= now:
            key = self._backoff[0][2]
            qpi = self._detach(key)
            assert qpi is not None
            self._leave_backoff(qpi, EVENT_BACKOFF_COMPLETE)
            moved += 1
        return moved

    def flush_unschedulable_left_over(self) -> int:
        """Retry pods that sat in the unschedulable map longer than the limit (5 min), and
        run PreEnqueue again for pods gated that long (upstream's flush is a wildcard event,
        which re-evaluates gated pods too: a plugin whose hints miss the change that lets a
        pod in, or that has none, does not strand it). Returns the pods moved."""
        now = self.clock.now()
        limit = self.max_unschedulable_duration
        stale = [q for q in self._unschedulable.values() if now - q.timestamp >= limit]
        for q in stale:
            self._detach(q.pod.key)
            q.was_flushed = True
            self._requeue(q, EVENT_UNSCHEDULABLE_TIMEOUT)
        moved = len(stale)
        for q in [q for q in self._gated.values() if now - q._gated_at >= limit]:
            moved += int(self._release_if_ungated(q, EVENT_UNSCHEDULABLE_TIMEOUT))
        return moved

    def next_backoff_expiry(self) -> float | None:
        return self._backoff[0][0] if self._backoff else None

    # ------------------------------------------------------------------ cluster events
    def _hint_says_queue(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        hints = self.hints
        if self.profile_hints:
            hints = self.profile_hints.get(qpi.pod.scheduler_name, hints)
        timed = self.hint_times
        for plugin in qpi.unschedulable_plugins:
            for reg in hints.get(plugin, ()):
                if reg.event.resource not in (ANY, event.resource):
                    continue
                if reg.event.action not in (ANY, event.action):
                    continue
                t0 = time.perf_counter() if timed is not None else 0.0
                label = "Queue"
                try:
                    queue = reg.hint is None or reg.hint(qpi.pod, old, new) is QueueingHint.QUEUE
                except Exception as e:
                    # As upstream: a hint that fails queues the pod (better tried again
                    # than stranded), and says so.
                    _hint_failed(plugin, event, qpi.pod, e)
                    queue, label = True, "Error"
                if timed is not None:
                    # Upstream times every hint call, its default (no hint: Queue) too.
                    seconds = time.perf_counter() - t0
                    key = (plugin, event.name, label if queue else "QueueSkip")
                    kept = timed.get(key)
                    if kept is None:
                        timed[key] = [seconds]
                    else:
                        kept.append(seconds)
                if queue:
                    return True
        return False

    def take_hint_times(self) -> HintTimes:
        """The hint calls timed since the last take (none unless ``time_hints``)."""
        times = self.hint_times
        if not times:
            return {}
        self.hint_times = {}
        return times

    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old: Any = None, new: Any = None, *, skip: str = ""
    ) -> int:
        """A cluster event: move the unschedulable pods it may help, except the pod keyed
        ``skip`` (upstream's preCheck). O(u · hints)."""
        if self._in_flight:
            self._in_flight_events.append((next(self._event_seq), event, old, new))
        moved = 0
        for qpi in list(self._unschedulable.values()):
            if qpi.pod.key == skip:
                continue
            if (
                qpi.errored
                or not qpi.unschedulable_plugins
                or self._hint_says_queue(qpi, event, old, new)
            ):
                self._detach(qpi.pod.key)
                self._requeue(qpi, event.name)
                moved += 1
        if self._gated:
            # Only the gating plugin's own hints re-run PreEnqueue (upstream's gated pods).
            for qpi in list(self._gated.values()):
                if (
                    qpi.pod.key != skip
                    and qpi.unschedulable_plugins
                    and self._hint_says_queue(qpi, event, old, new)
                    and self._release_if_ungated(qpi, event.name)
                ):
                    moved += 1
        return moved

    def activate(self, keys: Iterable[str]) -> None:
        """Move the named pods from backoff/unschedulable straight to activeQ; a named pod
        in flight is remembered, so that if its attempt fails it goes to backoffQ rather
        than to the unschedulable pods (upstream registers a ForceActivate event for it)."""
        for key in keys:
            where = self._where.get(key)
            if where == BACKOFF_Q:
                qpi = self._detach(key)
                assert qpi is not None
                self._leave_backoff(qpi, EVENT_FORCE_ACTIVATE)
            elif where == UNSCHEDULABLE_Q:
                qpi = self._detach(key)
                assert qpi is not None
                self._enter_active(qpi, EVENT_FORCE_ACTIVATE)
            elif where == IN_FLIGHT:
                self._in_flight[key]._activated_in_flight = True

    # ------------------------------------------------------------------ introspection
    def pending_pods(self) -> dict[str, list[PodInfo]]:
        return {
            ACTIVE_Q: [self._infos[k[3]].pod for k in self._active],
            BACKOFF_Q: [self._infos[k[2]].pod for k in self._backoff],
            UNSCHEDULABLE_Q: [q.pod for q in self._unschedulable.values()],
            GATED_Q: [q.pod for q in self._gated.values()],
        }

    def in_flight_events(self) -> dict[str, int]:
        """The cluster events kept for pods in flight (their failure may need them), by
        event name, and ``PodPopped``: the pods in flight (upstream's
        scheduler_inflight_events)."""
        counts: dict[str, int] = {"PodPopped": len(self._in_flight)}
        for _, event, _, _ in self._in_flight_events:
            counts[event.name] = counts.get(event.name, 0) + 1
        return counts

    def unschedulable_by_plugin(self) -> dict[str, int]:
        """Pods of the unschedulable map per rejecting plugin (a pod counts for each). O(u)."""
        out: dict[str, int] = {}
        for (plugin, _), n in self.unschedulable_by_plugin_and_profile().items():
            out[plugin] = out.get(plugin, 0) + n
        return out

    def unschedulable_by_plugin_and_profile(self) -> dict[tuple[str, str], int]:
        """``unschedulable_by_plugin`` by (plugin, the pod's scheduler name). O(u)."""
        out: dict[tuple[str, str], int] = {}
        for q in self._unschedulable.values():
            for plugin in q.unschedulable_plugins:
                k = (plugin, q.pod.scheduler_name)
                out[k] = out.get(k, 0) + 1
        return out

    def counts(self) -> dict[str, int]:
        return {
            ACTIVE_Q: len(self._active),
            BACKOFF_Q: len(self._backoff),
            UNSCHEDULABLE_Q: len(self._unschedulable),
            GATED_Q: len(self._gated),
            IN_FLIGHT: len(self._in_flight),
        }

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        self.closed = True
        if self.on_ready is not None:
            self.on_ready()

    def check_invariants(self) -> None:
        seen: dict[str, str] = {}
        for k in self._active:
            seen[k[3]] = ACTIVE_Q
        for k in self._backoff:
            assert k[2] not in seen, f"{k[2]} in two sub-queues"
            seen[k[2]] = BACKOFF_Q
        poppable = {k[4] for k in self._backoff_poppable}
        assert len(poppable) == len(self._backoff_poppable), "a pod poppable twice"
        assert poppable <= {k[2] for k in self._backoff}, "poppable but not in backoffQ"
        for k in self._backoff:
            q = self._infos[k[2]]
            assert (k[2] in poppable) == _rejected(q), f"{k[2]}: poppable iff rejected"
            assert q._poppable_key is None or q._poppable_key[4] == k[2]
        for key in self._unschedulable:
            assert key not in seen, f"{key} in two sub-queues"
            seen[key] = UNSCHEDULABLE_Q
        for key, q in self._gated.items():
            assert key not in seen, f"{key} in two sub-queues"
            # Not "PreEnqueue still rejects it": a plugin's verdict may depend on the world,
            # which may change before the event its hints wait for (as upstream).
            assert len(q.unschedulable_plugins) <= 1, f"gated {key}: one gating plugin at most"
            assert self.nominator.nominated_node(key) is None, f"gated {key} is nominated"
            seen[key] = GATED_Q
        for key in self._in_flight:
            assert key not in seen, f"{key} in flight and queued"
            seen[key] = IN_FLIGHT
        assert seen == self._where, "sub-queues disagree with the index"
        assert set(self._infos) == set(self._where)
        for key, q in self._infos.items():
            assert q.pod.key == key
            if seen[key] == ACTIVE_Q and self.less is None:
                assert q._active_key == (-q.pod.priority, q.timestamp, q.seq, key), "stale key"
            elif seen[key] == ACTIVE_Q:
                assert q._active_key is not None and q._active_key[0].qpi is q, "stale key"
        self.nominator.check_invariants()


def _rejected(qpi: QueuedPodInfo) -> bool:
    """The pod's last attempt ended in a rejection by plugins, not in an error."""
    return not qpi.errored and bool(qpi.unschedulable_plugins)


def _hint_failed(plugin: str, event: ClusterEvent, pod: PodInfo, e: Exception) -> None:
    import structlog  # here: only a failing hint needs it

    structlog.get_logger("scheduler.queue").warning(
        "queueing_hint_failed",
        plugin=plugin,
        cluster_event=event.name,
        pod=pod.key,
        error=f"{type(e).__name__}: {e}",
        note="the pod is queued, as if the hint said Queue",
    )


def _scheduling_relevant(p: PodInfo) -> tuple[Any, ...]:
    """The parts of a pod whose change may make it schedulable (not status or version)."""
    return (
        p.requests,
        p.node_selector,
        p.required_node_affinity,
        p.tolerations,
        p.host_ports,
        p.required_affinity,
        p.required_anti_affinity,
        p.topology_spread_constraints,
        p.labels,
        p.priority,
        p.required_features,
        p.resource_claims,  # with the generated ResourceClaims' names (DynamicResources)
    )
