"""OpportunisticBatching (upstream's, KEP-5598; beta and on by default since 1.35).

A profile keeps what its last full cycle learned and hands it to the next pod when that
pod is like the last one, so that pods of one template do not each filter and score every
node. What it keeps: the feasible nodes the cycle scored, other than the one it chose,
with each plugin's raw score, best first (``Candidates``). The next pod gets the best of
them as a *hint*, tried as a nominated node is (Filter on that node alone, with the pods
nominated to it): if it fits, it is the pod's node, with no further filtering or scoring;
if not, the pod has a full cycle, whose results replace the kept ones.

The hint is given only when all of these hold (else the kept scores are dropped, counted
by reason in ``scheduler_batch_cache_flushed_total``):

- the pod was signed (framework/signers.py: every PreFilter, Filter, PreScore and Score
  plugin of the profile signs it, and no extender is configured) and its signature equals
  the one the scores were kept for;
- its cycle comes right after the one that kept them or used the last hint (no other pod,
  of this profile or another, was popped in between; a pod that failed keeps nothing);
- it is not nominated to a node;
- the scores are less than 0.5 s old (the clock's seconds; ``simulate``'s clock moves only
  with its virtual time);
- the node chosen last is still in the cluster, and so is every kept node.

Before the hint is drawn, the node chosen last is filtered for the new pod: if the pod
still fits there (nodes with room for several), it is scored again (PreScore over the kept
nodes and it, its raw scores, then every plugin's normalisation over all of them, as
upstream) and competes with the kept nodes; if it does not (a node per pod, the case the
feature is for), the best kept node is the hint as it stands.

Ties among the kept nodes are broken by a random key drawn for each node when the scores
are kept (upstream's Randomizer); the node scored again has key 0, as upstream's.

This module owns the kept state of one profile (``OpportunisticBatch``); the cycle
(schedule_one.py) asks it for hints and tells it what each cycle chose.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scheduler.backend.cache.snapshot import Int64Array, IntpArray, Snapshot
from scheduler.framework.interface import CycleState, Status
from scheduler.types import NodeInfo, PodInfo

__all__ = [
    "MAX_BATCH_AGE",
    "BatchHandle",
    "BatchObserver",
    "Candidates",
    "OpportunisticBatch",
]

MAX_BATCH_AGE = 0.5  # seconds (upstream's maxBatchAge)

# Upstream's labels of scheduler_batch_attempts_total and _cache_flushed_total.
NO_HINT = "no_hint"
HINT_USED = "hint_used"
HINT_NOT_USED = "hint_not_used"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"
FLUSH_FILTER_ERROR = "filter_error"
FLUSH_PRESCORE_ERROR = "prescore_error"
FLUSH_NORMALIZE_ERROR = "normalize_error"


class BatchHandle(Protocol):
    """What the batch needs of its profile's framework (runtime.Framework)."""

    profile_name: str

    def run_filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status: ...

    def count_filter_run(self, state: CycleState, st: Status) -> None:
        """Count a run of the filter plugins that ended in ``st`` (plugin evaluations)."""
        ...

    def run_pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status: ...

    def raw_scores(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> dict[str, int]:
        """Each score plugin's raw score of the node (those PreScore did not skip)."""
        ...

    def normalized_totals(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, Int64Array], n: int
    ) -> Int64Array | None:
        """The weighted totals of ``n`` nodes from each plugin's raw scores, normalised
        over them (a plugin missing from ``raw`` scores 0); None if a normalised score is
        outside 0..100."""
        ...


class BatchObserver(Protocol):
    def batch_attempt(self, profile: str, result: str) -> None: ...

    def batch_flushed(self, profile: str, reason: str) -> None: ...

    def batch_rescored(self, profile: str) -> None: ...

    def batch_timed(self, step: str, profile: str, seconds: float, hinted: str = "") -> None:
        """How long a step took: ``hint`` (``hinted``: "hint" or "no_hint"), ``store`` or
        ``rescore`` (upstream's get_node_hint, store_schedule_results and batch_rescore
        duration histograms)."""
        ...


_NO_KEYS: Int64Array = np.zeros(0, dtype=np.int64)


class Candidates:
    """Scored nodes handed out best first: by total, then by random key. ``raw`` holds
    each plugin's raw scores (in ``names``' order), to normalise again with a node
    rescored; ``rows``: the nodes' rows in the snapshot whose ``layout()`` was ``layout``.

    ``kept`` builds them from a cycle's scores without doing the work: the names, the tie
    keys and the order are made on first use (the next pod is often unlike the last, and
    then they never are). Runtime complexity: O(n log n) on first use, O(1) a ``pop``."""

    __slots__ = (
        "_made",
        "_n",
        "_next",
        "_order",
        "layout",
        "names",
        "rand",
        "raw",
        "rows",
        "totals",
    )

    def __init__(
        self,
        names: list[str],
        raw: dict[str, Int64Array],
        totals: Int64Array,
        rand: Int64Array,
        rows: IntpArray,
        layout: object,
    ) -> None:
        self.names = names
        self.raw = raw
        self.totals = totals
        self.rand = rand
        self.rows = rows
        self.layout = layout
        self._n = len(names)
        self._next = 0
        self._order: list[int] = []
        self._made: Callable[[], None] | None = None

    @classmethod
    def kept(
        cls,
        nodes: Sequence[NodeInfo],
        rows: IntpArray,
        chosen: int,
        raw: dict[str, Int64Array],
        totals: Int64Array,
        layout: object,
        tie_keys: Callable[[int], Int64Array],
    ) -> Candidates:
        """The scored ``nodes`` (at ``rows``) but the one at index ``chosen``; ``tie_keys(n)``
        draws n random keys when they are first needed."""
        c = cls([], raw, totals, _NO_KEYS, rows, layout)
        c._n = len(nodes) - 1

        def make() -> None:
            keep = np.delete(np.arange(len(nodes)), chosen)
            c.names = [ni.name for ni in nodes]
            del c.names[chosen]
            c.raw = {k: v[keep] for k, v in raw.items()}
            c.totals = totals[keep]
            c.rows = rows[keep]
            c.rand = tie_keys(c._n)

        c._made = make
        return c

    def _make(self) -> None:
        if self._made is not None:
            self._made()
            self._made = None
        if not self._order and self._n:
            # Best first: the highest total, ties by the highest random key.
            self._order = np.lexsort((-self.rand, -self.totals)).tolist()

    def __len__(self) -> int:
        return self._n - self._next

    def pop(self) -> str:
        self._make()
        i = self._order[self._next]
        self._next += 1
        return self.names[i]

    def left(self) -> IntpArray:
        """The indices of the nodes not handed out yet, best first."""
        self._make()
        return np.array(self._order[self._next :], dtype=np.intp)


@dataclass(slots=True)
class _Kept:
    signature: object
    candidates: Candidates
    created: float


class OpportunisticBatch:
    """One profile's kept scores and the cycle that last chose a node."""

    def __init__(
        self,
        handle: BatchHandle,
        now: Callable[[], float],
        observer: BatchObserver | None = None,
    ) -> None:
        self.handle = handle
        self.now = now
        self.observer = observer
        self.kept: _Kept | None = None
        self.last_cycle = -1  # the cycle that last chose a node (none yet)
        self.last_chosen = ""
        self.hinted = ""  # the hint given in the current cycle
        self.batched_pods = 0  # pods placed on their hint (tests read it)

    # ------------------------------------------------------------------ the hint
    def node_hint(
        self,
        state: CycleState,
        pod: PodInfo,
        signature: object,
        cycle: int,
        snapshot: Snapshot,
        *,
        nominated: bool,
    ) -> str:
        """The node to try first for ``pod`` ("" for none), in its ``cycle`` (after
        PreFilter). O(1) when the node chosen last no longer fits the pod, once the kept
        nodes are ordered (O(n log n), at the first hint); O(n log n) in the kept nodes
        when it does fit (it is scored again among them)."""
        self.hinted = ""
        observer = self.observer
        t0 = time.perf_counter() if observer is not None else 0.0
        if self._usable(signature, cycle, nominated=nominated) and self._refresh(
            state, pod, snapshot
        ):
            assert self.kept is not None
            self.hinted = self.kept.candidates.pop()
        elif observer is not None:
            observer.batch_attempt(self.handle.profile_name, NO_HINT)
        if observer is not None:
            hinted = "hint" if self.hinted else "no_hint"
            seconds = time.perf_counter() - t0
            observer.batch_timed("hint", self.handle.profile_name, seconds, hinted)
        return self.hinted

    def _usable(self, signature: object, cycle: int, *, nominated: bool) -> bool:
        kept = self.kept
        if kept is None or not kept.candidates:
            return False
        if cycle != self.last_cycle + 1:
            return self._flush(FLUSH_POD_SKIPPED)
        if nominated:
            return self._flush(FLUSH_POD_NOMINATED)
        if signature is None or signature != kept.signature:
            return self._flush(FLUSH_POD_INCOMPATIBLE)
        if self.now() > kept.created + MAX_BATCH_AGE:
            return self._flush(FLUSH_EXPIRED)
        return True

    def _refresh(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> bool:
        """Filter the node chosen last for this pod; rescore it among the kept nodes if
        the pod fits there too. False: the kept scores were dropped."""
        last = snapshot.get(self.last_chosen)
        if last is None or last.node is None:
            return self._flush(FLUSH_NODE_MISSING)
        st = self.handle.run_filter(state, pod, last)
        self.handle.count_filter_run(state, st)
        if st.is_success():
            return self._rescore(state, pod, snapshot, last)
        if not st.is_rejected():
            return self._flush(FLUSH_FILTER_ERROR)
        return True

    def _rescore(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, last: NodeInfo) -> bool:
        observer = self.observer
        if observer is None:
            return self._rescore_untimed(state, pod, snapshot, last)
        profile = self.handle.profile_name
        observer.batch_rescored(profile)
        t0 = time.perf_counter()
        try:
            return self._rescore_untimed(state, pod, snapshot, last)
        finally:
            observer.batch_timed("rescore", profile, time.perf_counter() - t0)

    def _rescore_untimed(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, last: NodeInfo
    ) -> bool:
        handle = self.handle
        assert self.kept is not None
        kept = self.kept.candidates
        left = kept.left()
        last_row = snapshot.position(last.name)
        assert last_row is not None  # a node of the snapshot is listed
        layout = snapshot.layout()
        if layout is kept.layout:  # no node came or went: the rows still hold
            rows = np.append(kept.rows[left], last_row)
        else:
            found = [snapshot.position(kept.names[i]) for i in left.tolist()]
            if None in found:
                return self._flush(FLUSH_NODE_MISSING)
            rows = np.array([*found, last_row], dtype=np.intp)
        listed = snapshot.node_info_list
        nodes = [listed[i] for i in rows.tolist()]
        # PreScore over every candidate, on a copy of the cycle's state: nothing the
        # rescoring writes reaches the cycle.
        rescore = state.clone()
        rescore.feasible_rows = rows
        if not handle.run_pre_score(rescore, pod, nodes, snapshot).is_success():
            return self._flush(FLUSH_PRESCORE_ERROR)
        fresh = handle.raw_scores(rescore, pod, last)
        raw: dict[str, Int64Array] = {}
        for name in kept.raw.keys() | fresh.keys():
            col = kept.raw.get(name)
            before = col[left] if col is not None else np.zeros(len(left), dtype=np.int64)
            raw[name] = np.append(before, np.int64(fresh.get(name, 0)))
        totals = handle.normalized_totals(rescore, pod, raw, len(nodes))
        if totals is None:
            return self._flush(FLUSH_NORMALIZE_ERROR)
        names = [kept.names[i] for i in left.tolist()]
        names.append(last.name)
        rand = np.append(kept.rand[left], np.int64(0))
        self.kept.candidates = Candidates(names, raw, totals, rand, rows, layout)
        return True

    # ------------------------------------------------------------------ the outcome
    def store(
        self,
        signature: object,
        chosen: str,
        candidates: Candidates | None,
        cycle: int,
        *,
        others: int,
    ) -> None:
        """The cycle ``cycle`` chose ``chosen`` for a pod with ``signature``, among
        ``others`` other feasible nodes; ``candidates``: those nodes with their scores
        (None when they were not kept). Keeps them unless the pod took its hint."""
        observer = self.observer
        t0 = time.perf_counter() if observer is not None else 0.0
        hinted, self.hinted = self.hinted, ""
        self.last_cycle = cycle
        self.last_chosen = chosen
        profile = self.handle.profile_name
        if hinted and hinted == chosen:
            self.batched_pods += 1
            if observer is not None:
                observer.batch_attempt(profile, HINT_USED)
        else:
            if hinted and observer is not None:
                observer.batch_attempt(profile, HINT_NOT_USED)
            if signature is not None and candidates is not None and len(candidates) > 0:
                self.kept = _Kept(signature, candidates, self.now())
            else:
                self._flush(FLUSH_EMPTY_LIST if others == 0 else FLUSH_POD_NOT_BATCHABLE)
        if observer is not None:
            observer.batch_timed("store", profile, time.perf_counter() - t0)

    def _flush(self, reason: str) -> bool:
        self.kept = None
        if self.observer is not None:
            self.observer.batch_flushed(self.handle.profile_name, reason)
        return False
