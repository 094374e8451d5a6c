"""Framework: runs a profile's plugins at each extension point.

It owns the order of plugins, their score weights, and the two-pass filter with nominated
pods (upstream's ``RunFilterPluginsWithNominatedPods``):

- pass 1: the node plus every pod nominated to it with priority >= the incoming pod's
  (other than the pod itself) — nobody may take space a preemption freed for a more
  important pod;
- pass 2: the node without them, run only if pass 1 added any pod and passed, so that a
  pod whose affinity needs those nominated pods is not admitted on their account.
The pod fits only if both passes pass.

Bulk paths (used by the cycle for speed, never changing an answer): ``filter_plan`` combines
the plugins' ``filter_batch`` masks into "surely passes" per node plus the plugins that must
still run per node; ``run_score_batch`` totals ``score_batch`` columns (plugins without one
are scored per node), normalised and weighted exactly as ``run_score``.

It does not own the cycle (schedule_one.py). The one state it keeps between cycles is
upstream's too: the pods held at Permit (``waiting_pods``, framework/waiting_pods.py).
"""

from __future__ import annotations

import inspect
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Int64Array, IntpArray, Snapshot
from scheduler.backend.queue.nominator import Nominator
from scheduler.framework import signers as signer_names
from scheduler.framework.interface import (
    CODE_NAMES,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    SUCCESS,
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    Code,
    CycleState,
    EnqueueExtensions,
    EventRegistration,
    FilterPlugin,
    NodeScore,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SignPlugin,
    Status,
)
from scheduler.framework.outoftree import PluginRaised
from scheduler.framework.plugins.names import DEFAULT_BINDER, PRIORITY_SORT
from scheduler.framework.waiting_pods import PodInPreBind, WaitingPods
from scheduler.types import NodeInfo, PodInfo

__all__ = ["Framework", "PluginScores", "ScoreOutOfRange", "int64_column"]

_P = TypeVar("_P")
# CycleState key: the PreBind plugins whose PreBindPreFlight said SKIP.
_PRE_BIND_SKIPPED = "framework/PreBindSkipped"
# count_filter's rejections of a run every plugin passed.
_NO_REJECTIONS: Mapping[str, int] = types.MappingProxyType({})


def _in_order(found: dict[str, _P], names: Sequence[str] | None) -> list[_P]:
    """The plugins of ``found`` in the order ``names`` lists them (None: as found)."""
    order = list(found) if names is None else [n for n in names if n in found]
    return [found[n] for n in order]


# A weighted score at or above this (in magnitude) makes run_score_batch give up: the sum of
# up to 2**7 of them stays exact in int64.
_SCORE_LIMIT = 2**55


@dataclass(frozen=True, slots=True)
class PluginScores:
    """One score plugin's normalised scores of a list of nodes, and its weight."""

    plugin: str
    weight: int
    scores: tuple[int, ...]


@dataclass(slots=True)
class _Weighted:
    plugin: ScorePlugin
    weight: int


@dataclass
class Framework:
    profile_name: str
    pre_enqueue_plugins: list[PreEnqueuePlugin] = field(default_factory=list)
    pre_filter_plugins: list[PreFilterPlugin] = field(default_factory=list)
    filter_plugins: list[FilterPlugin] = field(default_factory=list)
    post_filter_plugins: list[PostFilterPlugin] = field(default_factory=list)
    pre_score_plugins: list[PreScorePlugin] = field(default_factory=list)
    score_plugins: list[_Weighted] = field(default_factory=list)
    reserve_plugins: list[ReservePlugin] = field(default_factory=list)
    permit_plugins: list[PermitPlugin] = field(default_factory=list)
    pre_bind_plugins: list[PreBindPlugin] = field(default_factory=list)
    # Whether a PreBind plugin's ``pre_bind`` is a coroutine function (set by ``build``).
    async_pre_bind: bool = False
    # The Bind plugins that run before DefaultBinder (the Binding API call, the binder's
    # own), in order; ``default_binder``: whether DefaultBinder is enabled (after them).
    bind_plugins: list[BindPlugin] = field(default_factory=list)
    default_binder: bool = True
    post_bind_plugins: list[PostBindPlugin] = field(default_factory=list)
    # The QueueSort plugin's order for the scheduling queue; None: PrioritySort's, which
    # the queue implements itself.
    queue_sort: QueueSortPlugin | None = None
    nominator: Nominator | None = None
    hints: dict[str, list[EventRegistration]] = field(default_factory=dict)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    # Pods whose async PreBind is under way, by uid (upstream's podsInPreBind).
    pods_in_pre_bind: dict[str, PodInPreBind] = field(default_factory=dict)
    # Plugin name -> (the plugin, itself if it offers the bulk method), looked up once.
    _batch_filters: dict[str, tuple[object, BatchFilterPlugin | None]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _batch_scorers: dict[str, tuple[object, BatchScorePlugin | None]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # The plugins that sign pods (upstream's batchablePlugins), in the order they are
    # asked; None: some PreFilter, Filter, PreScore or Score plugin does not sign, so no
    # pod of the profile is signed. ``signs_no_pod``: one of them never signs a pod
    # (PodTopologySpread with default constraints), so asking them is skipped.
    signers: list[SignPlugin] | None = None
    signs_no_pod: bool = False
    # Upstream's scheduler_plugin_evaluation_total: how many times each PreFilter, Filter,
    # PreScore and Score plugin was run, by (plugin, extension point), read at scrapes.
    # PreFilter and PreScore count a call unless it skipped; Filter counts each run of the
    # plugins on a node, up to the plugin that turned it down (``count_filter`` for a walk's
    # nodes, ``count_filter_run`` for one run: the nominated pods' first pass, preemption's
    # dry runs, batching's check of a hint), as upstream's instrumented plugins count
    # every call; Score each node scored.
    evaluations: dict[tuple[str, str], int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls,
        profile_name: str,
        plugins: Sequence[object],
        *,
        score_weights: dict[str, int],
        filters: Sequence[str] | None = None,
        scores: Sequence[str] | None = None,
        post_filters: Sequence[str] | None = None,
        pre_enqueue: Sequence[str] | None = None,
        reserve: Sequence[str] | None = None,
        permit: Sequence[str] | None = None,
        pre_bind: Sequence[str] | None = None,
        bind: Sequence[str] | None = None,
        post_bind: Sequence[str] | None = None,
        queue_sort: str = PRIORITY_SORT,
        nominator: Nominator | None = None,
        waiting_pods: WaitingPods | None = None,
    ) -> Framework:
        """Wire plugin instances by the Protocols they implement. ``filters``/``scores``/
        ``post_filters``/``pre_enqueue``/``reserve``/``permit``/``pre_bind``/``post_bind``
        restrict each extension point to the named plugins (None: all); PreEnqueue, Reserve,
        Permit, PreBind and PostBind plugins run in the order their list names them.
        ``bind`` names the Bind plugins in order, ``DefaultBinder`` among them (None: every
        Bind plugin, then DefaultBinder); those after DefaultBinder never run (it binds
        every pod that reaches it), as upstream. ``queue_sort`` names the QueueSort plugin
        (PrioritySort: the queue's own order).
        ``waiting_pods``: the map the plugins' FrameworkHandle reads (a new one if None)."""
        fw = cls(profile_name, nominator=nominator)
        if waiting_pods is not None:
            fw.waiting_pods = waiting_pods
        enqueue: dict[str, PreEnqueuePlugin] = {}
        reserving: dict[str, ReservePlugin] = {}
        permitting: dict[str, PermitPlugin] = {}
        pre_binding: dict[str, PreBindPlugin] = {}
        binding: dict[str, BindPlugin] = {}
        post_binding: dict[str, PostBindPlugin] = {}
        for p in plugins:
            name = str(getattr(p, "name", type(p).__name__))
            if isinstance(p, PreEnqueuePlugin) and (pre_enqueue is None or name in pre_enqueue):
                enqueue[name] = p
            if isinstance(p, ReservePlugin) and (reserve is None or name in reserve):
                reserving[name] = p
            if isinstance(p, PermitPlugin) and (permit is None or name in permit):
                permitting[name] = p
            if isinstance(p, PreBindPlugin) and (pre_bind is None or name in pre_bind):
                pre_binding[name] = p
            if isinstance(p, BindPlugin) and (bind is None or name in bind):
                binding[name] = p
            if isinstance(p, PostBindPlugin) and (post_bind is None or name in post_bind):
                post_binding[name] = p
            if isinstance(p, QueueSortPlugin) and name == queue_sort != PRIORITY_SORT:
                fw.queue_sort = p
            if isinstance(p, PreFilterPlugin) and (filters is None or name in filters):
                fw.pre_filter_plugins.append(p)
            if isinstance(p, FilterPlugin) and (filters is None or name in filters):
                fw.filter_plugins.append(p)
            if isinstance(p, PostFilterPlugin) and (post_filters is None or name in post_filters):
                fw.post_filter_plugins.append(p)
            scored = isinstance(p, ScorePlugin) and (scores is None or name in scores)
            if scored and isinstance(p, PreScorePlugin):
                fw.pre_score_plugins.append(p)
            if scored:
                assert isinstance(p, ScorePlugin)
                weight = score_weights.get(name, 1)
                if weight > 0:
                    fw.score_plugins.append(_Weighted(p, weight))
            if isinstance(p, EnqueueExtensions):
                fw.hints[name] = list(p.events_to_register())
        if queue_sort != PRIORITY_SORT and fw.queue_sort is None:
            raise ValueError(
                f"no plugin {queue_sort!r} with a QueueSort ``less`` to order the queue"
            )
        fw.pre_enqueue_plugins = _in_order(enqueue, pre_enqueue)
        fw.reserve_plugins = _in_order(reserving, reserve)
        fw.permit_plugins = _in_order(permitting, permit)
        fw.pre_bind_plugins = _in_order(pre_binding, pre_bind)
        fw.async_pre_bind = any(
            inspect.iscoroutinefunction(p.pre_bind) for p in fw.pre_bind_plugins
        )
        fw.post_bind_plugins = _in_order(post_binding, post_bind)
        fw._find_signers()
        if bind is None:
            fw.bind_plugins = list(binding.values())
        else:
            first = list(bind).index(DEFAULT_BINDER) if DEFAULT_BINDER in bind else len(bind)
            fw.bind_plugins = _in_order(binding, list(bind)[:first])
            fw.default_binder = DEFAULT_BINDER in bind
        return fw

    def _find_signers(self) -> None:
        """Upstream's computeBatchablePlugins: every plugin of the points that decide
        where a pod goes must sign, each asked once."""
        found: dict[str, SignPlugin] = {}
        points: list[Sequence[object]] = [
            self.pre_filter_plugins,
            self.filter_plugins,
            self.pre_score_plugins,
            [w.plugin for w in self.score_plugins],
        ]
        for plugins in points:
            for p in plugins:
                name = str(getattr(p, "name", type(p).__name__))
                if name in found:
                    continue
                if not isinstance(p, SignPlugin):
                    self.signers = None
                    return
                found[name] = p
        self.signers = list(found.values())
        self.signs_no_pod = any(getattr(p, "signs_no_pod", False) for p in self.signers)

    def sign_pod(self, pod: PodInfo) -> tuple[tuple[str, object], ...] | None:
        """Upstream's SignPod: the pod's signature (each plugin's fragments with the
        scheduler name, by key), or None when it cannot be signed. Pods with equal
        signatures are alike to every plugin of the profile."""
        if self.signers is None or self.signs_no_pod:
            return None
        parts: dict[str, object] = {signer_names.SCHEDULER_NAME: pod.scheduler_name}
        for p in self.signers:
            fragments, st = p.sign_pod(pod)
            if st is not SUCCESS and not st.is_success():
                return None
            for key, value in fragments:
                parts[key] = value
        return tuple(sorted(parts.items()))

    # ------------------------------------------------------------------ reserve / postbind
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's ``RunReservePluginsReserve``: SUCCESS, or the first status that is not
        (naming its plugin). The caller runs ``run_unreserve`` on a failure."""
        for p in self.reserve_plugins:
            st = p.reserve(state, pod, node_name)
            if not st.is_success():
                return st.with_plugin(p.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Upstream's ``RunReservePluginsUnreserve``: every Reserve plugin, in reverse order
        (also those whose Reserve never ran: Unreserve must be idempotent, as upstream's)."""
        for p in reversed(self.reserve_plugins):
            p.unreserve(state, pod, node_name)

    def run_permit(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[Status, dict[str, float]]:
        """Upstream's ``RunPermitPlugins``: (SUCCESS, {}) when every plugin allows the pod;
        (WAIT, plugin -> timeout seconds) when none rejects and some ask to wait; the first
        rejection (naming its plugin) or an ERROR "running Permit plugin ..." otherwise,
        which stops the remaining plugins. The caller holds a waiting pod."""
        waits: dict[str, float] = {}
        for p in self.permit_plugins:
            st, timeout = p.permit(state, pod, node_name)
            if st.is_success():
                continue
            if st.is_rejected():
                return st.with_plugin(p.name), {}
            if st.code is Code.WAIT:
                if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                    message = f"Permit plugin {p.name} asked to wait {timeout!r}: expected seconds"
                    return Status(Code.ERROR, (message,), p.name), {}
                waits[p.name] = float(timeout) if timeout == timeout else 0.0  # NaN: no wait
                continue
            message = f"running Permit plugin {p.name}: {st.message()}"
            return Status(Code.ERROR, (message,), p.name), {}
        if waits:
            return Status(
                Code.WAIT, ("one or more plugins asked to wait and no plugin rejected pod",)
            ), waits
        return SUCCESS, {}

    def pre_bind_wanted(self, state: CycleState) -> bool:
        """Whether some PreBind plugin may have work for this pod: one that cannot say
        beforehand (any plugin without ``pre_bind_needed``, out-of-tree ones among them),
        or one whose ``pre_bind_needed(state)`` says so. When none has, the core sends the
        Binding without a binding cycle, which is what the cycle would come to (every
        PreBindPreFlight SKIP, nothing to run)."""
        for p in self.pre_bind_plugins:
            needed = getattr(p, "pre_bind_needed", None)
            if needed is None or needed(state):
                return True
        return False

    def run_pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's ``RunPreBindPreFlights``: SUCCESS when some PreBind plugin has work to
        do (the binding cycle then sets the pod's nominatedNodeName first), SKIP when none
        has, ERROR for an error or any other code. The plugins that said SKIP are noted in
        ``state`` and ``run_pre_bind`` leaves them out."""
        skipped: set[str] = set()
        result = Status(Code.SKIP)
        for p in self.pre_bind_plugins:
            check = getattr(p, "pre_bind_pre_flight", None)
            st = SUCCESS if check is None else check(state, pod, node_name)
            if st.is_success():
                result = SUCCESS
            elif st.is_skip():
                skipped.add(p.name)
            elif st.code is Code.ERROR:
                return Status(
                    Code.ERROR, (f"running PreBindPreFlight {p.name}: {st.message()}",), p.name
                )
            else:
                return Status(
                    Code.ERROR,
                    (
                        f"PreBindPreFlight {p.name} returned {CODE_NAMES[st.code]}, which is "
                        "unsupported: it may return Success, Skip or Error",
                    ),
                    p.name,
                )
        state.write(_PRE_BIND_SKIPPED, frozenset(skipped))
        return result

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's ``RunPreBindPlugins`` (one at a time): SUCCESS, a rejection as the
        plugin returned it (naming the plugin), or an ERROR "running PreBind plugin ...".
        With an async PreBind plugin (``async_pre_bind``) use ``run_pre_bind_async``."""
        skipped: frozenset[str] = state.read(_PRE_BIND_SKIPPED) or frozenset()
        for p in self.pre_bind_plugins:
            if p.name in skipped:
                continue
            result: Any = p.pre_bind(state, pod, node_name)
            if inspect.isawaitable(result):  # a caller that cannot wait: never the core's
                getattr(result, "close", lambda: None)()
                message = f"PreBind plugin {p.name} is async: run_pre_bind_async awaits it"
                return Status(Code.ERROR, (message,), p.name)
            failed = _pre_bind_failure(p.name, result)
            if failed is not None:
                return failed
        return SUCCESS

    async def run_pre_bind_async(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """``run_pre_bind`` awaiting the plugins whose ``pre_bind`` is a coroutine function
        (the live binder awaits this in the pod's binding task: other pods are scheduled
        meanwhile, as upstream's binding goroutines allow)."""
        skipped: frozenset[str] = state.read(_PRE_BIND_SKIPPED) or frozenset()
        for p in self.pre_bind_plugins:
            if p.name in skipped:
                continue
            result: Any = p.pre_bind(state, pod, node_name)
            if inspect.isawaitable(result):
                result = await result
            failed = _pre_bind_failure(p.name, result)
            if failed is not None:
                return failed
        return SUCCESS

    async def run_bind_async(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's ``RunBindPlugins`` up to DefaultBinder: the first Bind plugin that does
        not return SKIP decides: SUCCESS (it bound the pod; the status names it), a
        rejection as it returned it, or an ERROR "running Bind plugin ...". SKIP when every
        one skipped and DefaultBinder is enabled (the caller sends the Binding); an ERROR
        when it is not. Awaits plugins whose ``bind`` is a coroutine function."""
        for p in self.bind_plugins:
            result: Any = p.bind(state, pod, node_name)
            if inspect.isawaitable(result):
                result = await result
            st: Status = result
            if st.is_skip():
                continue
            if st.is_success() or st.is_rejected():
                return st.with_plugin(p.name)
            return Status(Code.ERROR, (f"running Bind plugin {p.name}: {st.message()}",), p.name)
        if self.default_binder:
            return Status(Code.SKIP)
        names = ", ".join(p.name for p in self.bind_plugins)
        message = f"no Bind plugin bound the pod: {names} returned Skip and DefaultBinder is off"
        return Status(Code.ERROR, (message,))

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Upstream's ``RunPostBindPlugins``: informational, after a successful bind."""
        for p in self.post_bind_plugins:
            p.post_bind(state, pod, node_name)

    # ------------------------------------------------------------------ preenqueue
    def run_pre_enqueue(self, pod: PodInfo, gating: str = "") -> Status | None:
        """Upstream's ``runPreEnqueuePlugins``: None when every PreEnqueue plugin lets the
        pod in, else the first one's status (naming that plugin) that keeps it out.
        ``gating``: the plugin that kept the pod out last time, run first (as upstream's
        runPreEnqueuePluginsForPod): while it still says no, it stays the gating plugin,
        whose hints may let the pod in, even if a plugin before it now says no too."""
        if gating:
            for p in self.pre_enqueue_plugins:
                if p.name == gating:
                    st = p.pre_enqueue(pod)
                    if not st.is_success():
                        return st.with_plugin(p.name)
                    break
            else:
                gating = ""  # not a PreEnqueue plugin of this profile (any more)
        for p in self.pre_enqueue_plugins:
            if p.name == gating:
                continue
            st = p.pre_enqueue(pod)
            if not st.is_success():
                return st.with_plugin(p.name)
        return None

    @property
    def plugin_names(self) -> list[str]:
        names: list[str] = []
        for group in (self.pre_filter_plugins, self.filter_plugins, self.post_filter_plugins):
            names.extend(p.name for p in group if p.name not in names)
        names.extend(w.plugin.name for w in self.score_plugins if w.plugin.name not in names)
        return names

    # ------------------------------------------------------------------ prefilter
    def run_pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Upstream's ``RunPreFilterPlugins``: SKIP marks the plugin's filter skipped;
        UNSCHEDULABLE_AND_UNRESOLVABLE or ERROR stop at once; UNSCHEDULABLE is returned only
        after every plugin ran, so that preemption finds every plugin's state; node-name
        results intersect, and an empty intersection is unresolvable."""
        result: PreFilterResult | None = None
        with_nodes: list[str] = []
        rejected: Status | None = None
        timer = state.plugin_timer
        counts = self.evaluations
        for p in self.pre_filter_plugins:
            if timer is None:
                r, st = p.pre_filter(state, pod, snapshot)
            else:
                t0 = time.perf_counter()
                r, st = p.pre_filter(state, pod, snapshot)
                timer(p.name, "PreFilter", _code_name(st), time.perf_counter() - t0)
            if st.is_skip():
                state.skip_filter_plugins.add(p.name)
                continue
            key = (p.name, "PreFilter")
            counts[key] = counts.get(key, 0) + 1
            if st.code == Code.UNSCHEDULABLE:
                rejected = st.with_plugin(p.name)
                continue
            if not st.is_success():
                return None, st.with_plugin(p.name)
            if r is not None and r.node_names is not None:
                with_nodes.append(p.name)
                names = (
                    r.node_names
                    if result is None or result.node_names is None
                    else (result.node_names & r.node_names)
                )
                result = PreFilterResult(names, frozenset(with_nodes))
                if not names:
                    if len(with_nodes) == 1:
                        msg = f"node(s) didn't satisfy plugin {with_nodes[0]}"
                    else:
                        msg = f"node(s) didn't satisfy plugin(s) [{' '.join(with_nodes)}]"
                        msg += " simultaneously"
                    return result, Status.unresolvable(msg, plugin=p.name)
        return result, rejected if rejected is not None else SUCCESS

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        for p in self.pre_filter_plugins:
            if p.name in state.skip_filter_plugins:
                continue
            ext = p.pre_filter_extensions()
            if isinstance(ext, PreFilterExtensions):
                st = ext.add_pod(state, pod, to_add, node_info)
                if not st.is_success():
                    # Any failure here is an error, as upstream: the dry run cannot go on.
                    return Status.error(
                        f'running AddPod on PreFilter plugin "{p.name}": {st.message()}', p.name
                    )
        return SUCCESS

    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        for p in self.pre_filter_plugins:
            if p.name in state.skip_filter_plugins:
                continue
            ext = p.pre_filter_extensions()
            if isinstance(ext, PreFilterExtensions):
                st = ext.remove_pod(state, pod, to_remove, node_info)
                if not st.is_success():
                    return Status.error(
                        f'running RemovePod on PreFilter plugin "{p.name}": {st.message()}', p.name
                    )
        return SUCCESS

    # ------------------------------------------------------------------ filter
    def run_filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        """All filter plugins in order; the first rejection wins (as upstream)."""
        skip = state.skip_filter_plugins
        if state.plugin_timer is not None:
            plugins = [p for p in self.filter_plugins if not (skip and p.name in skip)]
            return self._run_filter_timed(state, pod, node_info, plugins)
        for p in self.filter_plugins:
            if skip and p.name in skip:
                continue
            st = p.filter(state, pod, node_info)
            if st is not SUCCESS and not st.is_success():
                return st.with_plugin(p.name)
        return SUCCESS

    @staticmethod
    def _run_filter_timed(
        state: CycleState, pod: PodInfo, node_info: NodeInfo, plugins: Sequence[FilterPlugin]
    ) -> Status:
        """``run_filter_plugins`` in a sampled cycle: each plugin's call on this node is
        observed (upstream's runFilterPlugin under ShouldRecordPluginMetrics)."""
        timer = state.plugin_timer
        assert timer is not None
        for p in plugins:
            t0 = time.perf_counter()
            st = p.filter(state, pod, node_info)
            timer(p.name, "Filter", _code_name(st), time.perf_counter() - t0)
            if st is not SUCCESS and not st.is_success():
                return st.with_plugin(p.name)
        return SUCCESS

    def count_filter(self, state: CycleState, passed: int, rejected_by: Mapping[str, int]) -> None:
        """Count the Filter evaluations of a walk over nodes: ``passed`` nodes passed every
        plugin, ``rejected_by[name]`` nodes were turned down by that plugin; a node reached
        each active plugin up to the one that rejected it (as upstream's plugins, called in
        order until the first rejection). O(filter plugins)."""
        skip = state.skip_filter_plugins
        counts = self.evaluations
        reached = passed
        for p in reversed(self.filter_plugins):
            if skip and p.name in skip:
                continue
            reached += rejected_by.get(p.name, 0)
            if reached:
                key = (p.name, "Filter")
                counts[key] = counts.get(key, 0) + reached

    def count_filter_run(self, state: CycleState, st: Status) -> None:
        """Count one run of the filter plugins on a node that ended in ``st``: every
        active plugin when it passed, those up to the rejecting plugin otherwise."""
        if st is SUCCESS or st.is_success():
            self.count_filter(state, 1, _NO_REJECTIONS)
        elif st.plugin:
            self.count_filter(state, 0, {st.plugin: 1})

    def filter_plan(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[BoolArray, list[FilterPlugin]] | None:
        """For deciding many nodes at once: ``(sure, residual)``. ``sure[i]``: every active
        (not PreFilter-skipped) filter plugin with a bulk answer surely passes row ``i`` of
        ``snapshot.node_info_list``; ``residual``: the active plugins without one, in order.
        On a sure node without nominated pods, ``run_filter`` equals ``run_filter_plugins``
        over ``residual`` alone; elsewhere only ``run_filter_with_nominated_pods`` is exact.
        None when no plugin answers in bulk (filter node by node)."""
        skip = state.skip_filter_plugins
        sure: BoolArray | None = None
        residual: list[FilterPlugin] = []
        active = 0
        for p in self.filter_plugins:
            if skip and p.name in skip:
                continue
            active += 1
            cached = self._batch_filters.get(p.name)
            if cached is None or cached[0] is not p:
                cached = (p, p if isinstance(p, BatchFilterPlugin) else None)
                self._batch_filters[p.name] = cached
            bp = cached[1]
            if bp is None:
                mask = None
            elif state.plugin_timer is None:
                mask = bp.filter_batch(state, pod, snapshot)
            else:  # a sampled cycle: one observation for the plugin's answer on every node
                t0 = time.perf_counter()
                mask = bp.filter_batch(state, pod, snapshot)
                if mask is not None:
                    state.plugin_timer(p.name, "Filter", "Success", time.perf_counter() - t0)
            if mask is None:
                residual.append(p)
            else:
                sure = mask if sure is None else (sure & mask)
        if sure is None:
            if active:
                return None
            sure = np.ones(snapshot.num_nodes(), dtype=np.bool_)
        return sure, residual

    def run_filter_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        node_info: NodeInfo,
        plugins: Sequence[FilterPlugin],
    ) -> Status:
        """``run_filter`` restricted to ``plugins`` (already free of skipped ones)."""
        if state.plugin_timer is not None:
            return self._run_filter_timed(state, pod, node_info, plugins)
        for p in plugins:
            st = p.filter(state, pod, node_info)
            if st is not SUCCESS and not st.is_success():
                return st.with_plugin(p.name)
        return SUCCESS

    def run_filter_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo
    ) -> Status:
        """The two-pass filter described in the module docstring."""
        nominated = (
            self.nominator.nominated_pods_for_node(node_info.name)
            if self.nominator is not None
            else []
        )
        if not nominated:
            return self.run_filter(state, pod, node_info)
        added = False
        st = SUCCESS
        for i in range(2):
            state_to_use = state
            info_to_use = node_info
            if i == 0:
                added, state_to_use, info_to_use, st = self._add_nominated_pods(
                    state, pod, node_info, nominated
                )
                if not st.is_success():
                    return st
            elif not added or not st.is_success():
                break
            else:
                # Upstream's instrumented plugins count both passes; the caller counts the
                # run's outcome, so the first pass, which every active plugin passed, here.
                self.count_filter(state, 1, _NO_REJECTIONS)
            st = self.run_filter(state_to_use, pod, info_to_use)
            if not st.is_success():
                return st
        return st

    def _add_nominated_pods(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, nominated: list[PodInfo]
    ) -> tuple[bool, CycleState, NodeInfo, Status]:
        out_state = state
        out_info = node_info
        added = False
        for nominated_pod in nominated:
            if (
                nominated_pod.priority < pod.priority
                or nominated_pod.key == pod.key
                or nominated_pod.key in node_info.pods
            ):
                continue
            if not added:
                out_state = state.clone()
                out_info = node_info.clone()
                added = True
            out_info.add_pod(nominated_pod)
            st = self.run_pre_filter_add_pod(out_state, pod, nominated_pod, out_info)
            if not st.is_success():
                return added, out_state, out_info, st
        return added, out_state, out_info, SUCCESS

    # ------------------------------------------------------------------ postfilter
    def run_post_filter(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Until the first SUCCESS, ERROR or UNSCHEDULABLE_AND_UNRESOLVABLE; otherwise all of
        them, keeping the last non-None result (it may carry "" to clear a nomination) and
        naming the first rejecting plugin, as upstream's ``RunPostFilterPlugins``."""
        acc = _PostFilterRun()
        for p in self.post_filter_plugins:
            r, st = p.post_filter(state, pod, statuses)
            if acc.add(p.name, r, st):
                break
        return acc.outcome()

    async def run_post_filter_async(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """``run_post_filter``, awaiting a plugin's ``post_filter_async`` where it has one
        (DefaultPreemption's, which asks the scheduler extenders)."""
        acc = _PostFilterRun()
        for p in self.post_filter_plugins:
            run_async = getattr(p, "post_filter_async", None)
            if run_async is not None:
                r, st = await run_async(state, pod, statuses)
            else:
                r, st = p.post_filter(state, pod, statuses)
            if acc.add(p.name, r, st):
                break
        return acc.outcome()

    # ------------------------------------------------------------------ score
    def run_pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        timer = state.plugin_timer
        counts = self.evaluations
        for p in self.pre_score_plugins:
            if timer is None:
                st = p.pre_score(state, pod, nodes, snapshot)
            else:
                t0 = time.perf_counter()
                st = p.pre_score(state, pod, nodes, snapshot)
                timer(p.name, "PreScore", _code_name(st), time.perf_counter() - t0)
            if st.is_skip():
                state.skip_score_plugins.add(p.name)
                continue
            key = (p.name, "PreScore")
            counts[key] = counts.get(key, 0) + 1
            if not st.is_success():
                return st.with_plugin(p.name)
        return SUCCESS

    def _count_scored(self, name: str, nodes: int) -> None:
        key = (name, "Score")
        counts = self.evaluations
        counts[key] = counts.get(key, 0) + nodes

    def run_score_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        raw: dict[str, list[int]] | None = None,
    ) -> list[PluginScores]:
        """Each score plugin's normalised 0..100 scores of ``nodes`` (in their order), with
        its weight; plugins that PreScore skipped are left out. ``raw``, when given, gets
        each plugin's scores before normalisation."""
        out: list[PluginScores] = []
        for w in self.score_plugins:
            p = w.plugin
            if p.name in state.skip_score_plugins:
                continue
            t0 = time.perf_counter()
            scores = [p.score(state, pod, ni) for ni in nodes]
            self._count_scored(p.name, len(nodes))
            if raw is not None:
                raw[p.name] = list(scores)
            p.normalize_scores(state, pod, scores)
            for ni, score in zip(nodes, scores, strict=True):
                if not isinstance(score, int | float) or not (
                    MIN_NODE_SCORE <= score <= MAX_NODE_SCORE
                ):
                    raise ScoreOutOfRange(p.name, ni.name, score)
            if state.plugin_timer is not None:
                state.plugin_timer(p.name, "Score", "Success", time.perf_counter() - t0)
            out.append(PluginScores(p.name, w.weight, tuple(scores)))
        return out

    def run_score_batch(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntpArray,
        raw: dict[str, Int64Array | None] | None = None,
    ) -> Int64Array | None:
        """``run_score``'s totals for the nodes ``snapshot.node_info_list[rows]``, in that
        order: plugins with ``score_batch`` score them in bulk, the others one by one.
        None if a score is not an int in the range where int64 sums are exact (then use
        ``run_score``). ``raw``, when given, gets each plugin's scores before
        normalisation."""
        totals = np.zeros(len(rows), dtype=np.int64)
        nodes: list[NodeInfo] | None = None
        scored: list[str] = []  # counted once the totals stand (None: run_score counts)
        for w in self.score_plugins:
            p = w.plugin
            if p.name in state.skip_score_plugins:
                continue
            bp = self._bulk_scorer(p)
            scored.append(p.name)
            t0 = time.perf_counter()
            col = bp.score_batch(state, pod, snapshot, rows) if bp is not None else None
            if bp is not None and col is not None:
                if raw is not None:
                    raw[p.name] = col.copy()
                col = bp.normalize_scores_batch(state, pod, col)
            else:
                if nodes is None:
                    nodes = [snapshot.node_info_list[i] for i in rows.tolist()]
                scores = [p.score(state, pod, ni) for ni in nodes]
                if raw is not None:
                    raw[p.name] = int64_column(scores)
                p.normalize_scores(state, pod, scores)
                if any(
                    not isinstance(s, int) or not -_SCORE_LIMIT < s < _SCORE_LIMIT for s in scores
                ):
                    return None
                col = np.array(scores, dtype=np.int64)
            if state.plugin_timer is not None:
                state.plugin_timer(p.name, "Score", "Success", time.perf_counter() - t0)
            if len(col):
                lo, hi = int(col.min()), int(col.max())
                if lo < MIN_NODE_SCORE or hi > MAX_NODE_SCORE:
                    at = int(np.flatnonzero((col < MIN_NODE_SCORE) | (col > MAX_NODE_SCORE))[0])
                    name = snapshot.node_info_list[int(rows[at])].name
                    raise ScoreOutOfRange(p.name, name, int(col[at]))
                if hi * abs(w.weight) >= _SCORE_LIMIT:
                    return None
            totals += col * w.weight
        for name in scored:
            self._count_scored(name, len(rows))
        return totals

    def _bulk_scorer(self, p: ScorePlugin) -> BatchScorePlugin | None:
        """``p`` if it scores in bulk (the Protocol check, slow, made once per plugin)."""
        cached = self._batch_scorers.get(p.name)
        if cached is None or cached[0] is not p:
            cached = (p, p if isinstance(p, BatchScorePlugin) else None)
            self._batch_scorers[p.name] = cached
        return cached[1]

    def run_score(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        raw: dict[str, list[int]] | None = None,
    ) -> list[NodeScore]:
        """Weighted sum of each plugin's normalised 0..100 scores, per node (``raw``: as
        ``run_score_plugins``)."""
        totals = [0] * len(nodes)
        for ps in self.run_score_plugins(state, pod, nodes, raw):
            for i, s in enumerate(ps.scores):
                totals[i] += s * ps.weight
        return [NodeScore(ni.name, totals[i]) for i, ni in enumerate(nodes)]

    # ------------------------------------------------------------------ batching's rescore
    def raw_scores(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> dict[str, int]:
        """Each score plugin's score of one node before normalisation (upstream's
        RunRawScorePlugins; plugins PreScore skipped are left out)."""
        out: dict[str, int] = {}
        for w in self.score_plugins:
            name = w.plugin.name
            if name not in state.skip_score_plugins:
                out[name] = w.plugin.score(state, pod, node_info)
                self._count_scored(name, 1)
        return out

    def normalized_totals(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, Int64Array], n: int
    ) -> Int64Array | None:
        """Upstream's NormalizeScores: every score plugin's raw scores of ``n`` nodes
        normalised over them and weighted, summed per node (a plugin ``raw`` lacks scores
        0). None if a normalised score falls outside 0..100 (upstream's error)."""
        totals = np.zeros(n, dtype=np.int64)
        for w in self.score_plugins:
            p = w.plugin
            if p.name in state.skip_score_plugins:
                continue
            got = raw.get(p.name)
            col = got.copy() if got is not None else np.zeros(n, dtype=np.int64)
            bp = self._bulk_scorer(p)
            if bp is not None:
                col = bp.normalize_scores_batch(state, pod, col)
            else:
                scores = col.tolist()
                p.normalize_scores(state, pod, scores)
                col = np.array(scores, dtype=np.int64)
            if n and (int(col.min()) < MIN_NODE_SCORE or int(col.max()) > MAX_NODE_SCORE):
                return None
            totals += col * w.weight
        return totals


class ScoreOutOfRange(PluginRaised):
    """A Score plugin's score of a node, once normalised, is outside 0..MAX_NODE_SCORE:
    upstream fails the pod's cycle with an error, and so do we (it would otherwise
    outweigh every other plugin)."""

    def __init__(self, plugin: str, node: str, score: object) -> None:
        Exception.__init__(
            self,
            f"Score plugin {plugin} gave node {node} the score {score!r} after normalizing: "
            f"scores must be within [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}]",
        )
        self.plugin = plugin
        self.point = "NormalizeScore"


def int64_column(scores: list[int]) -> Int64Array | None:
    """Raw scores as an int64 column, None when one is not an int that fits."""
    if any(not isinstance(x, int) or not -_SCORE_LIMIT < x < _SCORE_LIMIT for x in scores):
        return None
    return np.array(scores, dtype=np.int64)


class _PostFilterRun:
    """The PostFilter plugins' outcomes folded as upstream's RunPostFilterPlugins."""

    __slots__ = ("final", "reasons", "rejector", "result")

    def __init__(self) -> None:
        self.result: PostFilterResult | None = None
        self.reasons: list[str] = []
        self.rejector = ""
        self.final: tuple[PostFilterResult | None, Status] | None = None

    def add(self, name: str, r: PostFilterResult | None, st: Status) -> bool:
        """One plugin's answer; True when it ends the run."""
        if st.is_success() or st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            self.final = (r, st.with_plugin(name))
            return True
        if st.code != Code.UNSCHEDULABLE:
            self.final = (None, Status(Code.ERROR, st.reasons, name))
            return True
        if r is not None:
            self.result = r
        self.reasons.extend(st.reasons)
        self.rejector = self.rejector or name
        return False

    def outcome(self) -> tuple[PostFilterResult | None, Status]:
        if self.final is not None:
            return self.final
        return self.result, Status(Code.UNSCHEDULABLE, tuple(self.reasons), self.rejector)


def _pre_bind_failure(name: str, st: Status) -> Status | None:
    if st.is_success():
        return None
    if st.is_rejected():
        return st.with_plugin(name)
    return Status(Code.ERROR, (f"running PreBind plugin {name}: {st.message()}",), name)


def _code_name(st: Status) -> str:
    """A Status code as upstream's metrics label it."""
    return CODE_NAMES.get(st.code, str(st.code))
