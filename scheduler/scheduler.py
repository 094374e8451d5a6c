"""Scheduler: the live scheduler around SchedulerCore, on one asyncio event loop.

What it owns: turning watch events (raw dicts from ``operator.py``) into typed records for
the core; the scheduling loop (one cycle at a time, yielding to the loop between cycles so
watch events interleave); the periodic flushes; and the three core ports implemented
against the cluster API port (``ClusterApi``, implemented by ``scheduler.kube``):

- binding: a task per pod POSTs the Binding (429/5xx retried with backoff; 409/404 never
  retried blindly) and reports the outcome to ``SchedulerCore.on_bind_result``;
- recording: ``Scheduled`` events, and on failure a PodScheduled=False status patch (with
  nominatedNodeName when it changes) plus a ``FailedScheduling`` event, deduplicated;
- preemption: victims get DisruptionTarget, then a graceful DELETE and a ``Preempted``
  event; lower-priority nominations on the node are cleared. With ``asyncPreemption`` (the
  default) the calls run in a task and the preemptor is held out of activeQ (a queue gate)
  until they are done; otherwise they run before the cycle returns.

Only the leader schedules; a standby keeps its cache warm from the same watches. Losing the
lease stops scheduling at once (``set_leader(False)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from scheduler.clock import Clock, RealClock
from scheduler.config import SchedulerConfig
from scheduler.errors import ApiCallError
from scheduler.framework.interface import ClusterEvent, Code, Status
from scheduler.framework.preemption import Candidate
from scheduler.metrics import Metrics
from scheduler.schedule_one import BindOutcome, SchedulerCore
from scheduler.types import (
    NodeRecord,
    ParseError,
    PodInfo,
    UnknownPriorityClassError,
    global_default_class,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
)

__all__ = ["ClusterApi", "Scheduler"]

log = structlog.get_logger("py-scheduler")

COMPONENT = "py-scheduler"
EVENT_MESSAGE_LIMIT = 1024  # upstream truncates event notes to 1 KiB
PREEMPTION_MESSAGE = "py-scheduler: preempting to accommodate a higher priority pod"
BIND_ATTEMPTS = 5


class ClusterApi(Protocol):
    """What the live scheduler needs from the API server (``scheduler.kube`` implements it).
    Failures raise ``ApiCallError`` subclasses with ``status``."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None: ...

    async def patch_pod_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> None: ...

    def patch_pod_status_sync(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> None: ...

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None: ...

    def delete_pod_sync(self, namespace: str, name: str, uid: str) -> None: ...

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> str: ...

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None: ...

    async def list_objects(self, kind: str) -> list[dict[str, Any]]: ...


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _truncate(msg: str, limit: int = EVENT_MESSAGE_LIMIT) -> str:
    raw = msg.encode()
    if len(raw) <= limit:
        return msg
    return raw[: limit - 3].decode(errors="ignore") + "..."


@dataclass
class _EventMemo:
    name: str
    message: str
    count: int


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        api: ClusterApi,
        *,
        identity: str,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        resync_seconds: float = 120.0,
    ) -> None:
        self.config = config
        self.api = api
        self.identity = identity
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics(config.scheduler_name)
        self.resync_seconds = resync_seconds
        self._wake = asyncio.Event()
        self._leader = asyncio.Event()
        self._stopping = False
        self.synced = False
        self.last_loop_tick = time.monotonic()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._pods: dict[str, PodInfo] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._preempting: set[str] = set()
        self._namespace_labels: dict[str, dict[str, str]] = {}
        self._status_memo: dict[str, tuple[str, str | None]] = {}
        self._event_memo: dict[tuple[str, str], _EventMemo] = {}
        self._bind_started: dict[str, tuple[float, int]] = {}
        self.core = SchedulerCore(
            config,
            self.clock,
            binder=self,
            recorder=self,
            actions=self,
            on_ready=self._wake.set,
            on_incoming=lambda q, ev: self.metrics.queue_incoming.labels(q, ev).inc(),
            namespace_labels=lambda ns: self._namespace_labels.get(ns, {}),
        )
        self.core.queue.gate = self._gate

    # ================================================================== leadership
    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    def set_leader(self, leader: bool) -> None:
        if leader:
            log.info("leader_acquired", identity=self.identity)
            self._leader.set()
        else:
            if self._leader.is_set():
                log.warning("leader_lost", identity=self.identity)
            self._leader.clear()
        self.metrics.leader.set(1 if leader else 0)
        self._wake.set()

    # ================================================================== event intake
    def handle_event(self, kind: str, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """A watch event (kopf: type None for the initial listing, then ADDED/MODIFIED/
        DELETED). Never raises for bad objects: it logs them, naming object and field."""
        try:
            if kind == "pods":
                self._on_pod(event_type, obj)
            elif kind == "nodes":
                self._on_node(event_type, obj)
            elif kind == "poddisruptionbudgets":
                self._on_pdb(event_type, obj)
            elif kind == "priorityclasses":
                self._on_priority_class(event_type, obj)
            elif kind == "namespaces":
                self._on_namespace(event_type, obj)
        except ParseError as e:
            log.warning("object_rejected", kind=kind, error=str(e))

    def _on_pod(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        if event_type == "DELETED":
            old = self._pods.pop(key, None)
            self._status_memo.pop(key, None)
            if old is not None:
                self.core.on_pod_delete(old)
            return
        try:
            pod = pod_from_dict(
                obj,
                classes=self.core.priority_classes,
                global_default=global_default_class(self.core.priority_classes.values()),
            )
        except (ParseError, UnknownPriorityClassError) as e:
            spec = obj.get("spec") or {}
            if spec.get("schedulerName") == self.config.scheduler_name and not spec.get("nodeName"):
                log.warning("pod_rejected", pod=key, error=str(e))
                self._spawn(self._post_raw_event(meta, "Warning", "FailedScheduling", str(e)))
            return
        old = self._pods.get(key)
        if old is not None and old.uid != pod.uid:
            self.core.on_pod_delete(old)  # deleted and re-created under the same name
            old = None
        self._pods[key] = pod
        if old is None:
            self.core.on_pod_add(pod)
        else:
            self.core.on_pod_update(old, pod)

    def _on_node(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            self._nodes.pop(name, None)
            self.core.on_node_delete(name)
            return
        node = node_from_dict(obj)
        old = self._nodes.get(name)
        self._nodes[name] = node
        if old is None:
            self.core.on_node_add(node)
        else:
            self.core.on_node_update(old, node)

    def _on_pdb(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        pdb = pdb_from_dict(obj)
        if event_type == "DELETED":
            self.core.on_pdb_delete(pdb.key)
        else:
            self.core.on_pdb_set(pdb)

    def _on_namespace(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if event_type == "DELETED":
            self._namespace_labels.pop(name, None)
            return
        labels = meta.get("labels") or {}
        new = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        if self._namespace_labels.get(name) != new:
            self._namespace_labels[name] = new
            # A namespaceSelector may match now: let affinity-rejected pods look again.
            self.core.queue.move_all_to_active_or_backoff(
                ClusterEvent("Namespace", "Update"), None, None
            )

    def _on_priority_class(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        pc = priority_class_from_dict(obj)
        if event_type == "DELETED":
            self.core.on_priority_class_delete(pc.name)
        else:
            self.core.on_priority_class_set(pc)

    KINDS = ("namespaces", "priorityclasses", "nodes", "poddisruptionbudgets", "pods")

    async def sync_all(self) -> None:
        """LIST every kind and reconcile: upsert what exists, delete what is gone. Run at
        start-up (the first cycle waits for it) and periodically, so that the cache
        converges even if a watch missed a deletion."""
        for kind in self.KINDS:
            items = await self.api.list_objects(kind)
            seen: set[str] = set()
            for obj in items:
                meta = obj.get("metadata") or {}
                seen.add(
                    f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                    if kind in ("pods", "poddisruptionbudgets")
                    else str(meta.get("name"))
                )
                self.handle_event(kind, None, obj)
            if kind == "pods":
                for key in [k for k in self._pods if k not in seen]:
                    ns, name = key.split("/", 1)
                    self.handle_event(
                        "pods", "DELETED", {"metadata": {"namespace": ns, "name": name}}
                    )
            elif kind == "nodes":
                for name in [n for n in self._nodes if n not in seen]:
                    self.handle_event("nodes", "DELETED", {"metadata": {"name": name}})
            elif kind == "namespaces":
                for name in [n for n in self._namespace_labels if n not in seen]:
                    self._namespace_labels.pop(name, None)
            elif kind == "poddisruptionbudgets":
                for key in [k for k in self.core.pdbs if k not in seen]:
                    self.core.on_pdb_delete(key)
            else:
                for name in [n for n in self.core.priority_classes if n not in seen]:
                    self.core.on_priority_class_delete(name)
        if not self.synced:
            log.info(
                "caches_synced",
                nodes=len(self._nodes),
                pods=len(self._pods),
                pending=len(self.core.queue),
                nominated=len(self.core.queue.nominator),
            )
        self.synced = True
        self._wake.set()

    # ================================================================== loops
    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self) -> None:
        """Until ``stop()``: the initial sync, then the loops."""
        await self._initial_sync()
        loops = [
            asyncio.create_task(self._schedule_loop(), name="schedule"),
            asyncio.create_task(self._flush_loop(), name="flush"),
            asyncio.create_task(self._resync_loop(), name="resync"),
        ]
        try:
            await asyncio.gather(*loops)
        finally:
            for t in loops:
                t.cancel()

    async def _initial_sync(self) -> None:
        delay = 1.0
        while not self._stopping:
            try:
                await self.sync_all()
                return
            except ApiCallError as e:
                log.warning("initial_sync_failed", error=str(e), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _schedule_loop(self) -> None:
        while not self._stopping:
            self.last_loop_tick = time.monotonic()
            if not self.is_leader:
                self._wake.clear()
                await self._wait_wake(1.0)
                continue
            start = time.perf_counter()
            result = self.core.schedule_one()
            if result is None:
                self._wake.clear()
                await self._wait_wake(1.0)
                continue
            self._observe(result, time.perf_counter() - start)
            await asyncio.sleep(0)  # let watch events in between cycles

    async def _wait_wake(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)

    async def _flush_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(1.0)
            self.last_loop_tick = max(self.last_loop_tick, 0.0)
            self.core.flush()
            for q, n in self.core.queue.counts().items():
                if q != "in_flight":
                    self.metrics.pending_pods.labels(q).set(n)
            self.metrics.cache_pods.set(self.core.cache.pod_count())

    async def _resync_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.resync_seconds)
            try:
                await self.sync_all()
            except ApiCallError as e:
                log.warning("resync_failed", error=str(e))

    def _observe(self, result: Any, seconds: float) -> None:
        outcome = result.outcome
        label = {
            "assumed": "scheduled",
            "unschedulable": "unschedulable",
            "preempting": "unschedulable",
            "error": "error",
        }.get(outcome)
        if label is None:
            return
        self.metrics.schedule_attempts.labels(label, self.config.scheduler_name).inc()
        self.metrics.attempt_duration.labels(label, self.config.scheduler_name).observe(seconds)
        if outcome == "assumed":
            self._bind_started[result.pod.key] = (time.perf_counter(), result.attempts)
            log.debug(
                "pod_assumed",
                pod=result.pod.key,
                node=result.node,
                evaluated=result.evaluated_nodes,
                feasible=result.feasible_nodes,
            )
        elif outcome == "preempting":
            log.info(
                "preemption_victims_selected",
                pod=result.pod.key,
                node=result.node,
                victims=[v.key for v in result.victims],
            )
        elif outcome == "unschedulable":
            log.info("pod_unschedulable", pod=result.pod.key, message=result.message)
        if outcome in ("unschedulable", "preempting"):
            for node, st in result.node_statuses.items():
                log.debug(
                    "node_filtered",
                    pod=result.pod.key,
                    node=node,
                    plugin=st.plugin,
                    code=st.code.name,
                    reasons=list(st.reasons),
                )
        else:
            log.warning("scheduling_error", pod=result.pod.key, message=result.message)

    async def stop(self, *, drain_seconds: float = 10.0) -> None:
        """Stop taking pods, then wait (bounded) for in-flight bindings and API calls."""
        self._stopping = True
        self.core.queue.close()
        self._wake.set()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=drain_seconds)

    def healthy(self, stall_seconds: float = 30.0) -> bool:
        return time.monotonic() - self.last_loop_tick < stall_seconds

    # ================================================================== port: binder
    def bind(self, pod: PodInfo, node_name: str) -> None:
        self._spawn(self._bind(pod, node_name))

    async def _bind(self, pod: PodInfo, node: str) -> None:
        delay = 0.2
        outcome, message = BindOutcome.ERROR, ""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                await self.api.bind(pod.namespace, pod.name, pod.uid, node)
                outcome = BindOutcome.OK
                break
            except ApiCallError as e:
                message = str(e)
                if e.status == 409:
                    outcome = BindOutcome.CONFLICT
                    break
                if e.status == 404:
                    outcome = BindOutcome.GONE
                    break
                if e.retryable and attempt < BIND_ATTEMPTS:
                    log.warning(
                        "bind_retry", pod=pod.key, node=node, attempt=attempt, error=message
                    )
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                outcome = BindOutcome.ERROR
                break
        if outcome != BindOutcome.OK:
            self.metrics.binding_failures.labels(outcome).inc()
            log.warning("bind_failed", pod=pod.key, node=node, outcome=outcome, error=message)
        self.core.on_bind_result(pod.key, outcome, message)

    # ================================================================== port: recorder
    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        started, attempts = self._bind_started.pop(pod.key, (0.0, 1))
        log.info(
            "pod_bound",
            pod=pod.key,
            node=node_name,
            attempts=attempts,
            bind_seconds=round(time.perf_counter() - started, 4) if started else None,
        )
        self.metrics.pod_scheduling_attempts.observe(attempts)
        self._status_memo.pop(pod.key, None)
        self._spawn(
            self._event(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {pod.key} to {node_name}",
                action="Binding",
            )
        )

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        memo = self._status_memo.get(pod.key)
        want = (message, nominated_node)
        if memo != want:
            self._status_memo[pod.key] = want
            status: dict[str, Any] = {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": _now_rfc3339(),
                    }
                ]
            }
            if nominated_node is not None:
                status["nominatedNodeName"] = nominated_node or None
            self._spawn(self._patch_status(pod, {"status": status}))
        self._spawn(self._event(pod, "Warning", "FailedScheduling", message, action="Scheduling"))

    async def _patch_status(self, pod: PodInfo, patch: Mapping[str, Any]) -> None:
        try:
            await self.api.patch_pod_status(pod.namespace, pod.name, patch)
        except ApiCallError as e:
            if e.status != 404:
                log.warning("status_patch_failed", pod=pod.key, error=str(e))

    async def _event(
        self, pod: PodInfo, event_type: str, reason: str, message: str, *, action: str
    ) -> None:
        meta = {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
        await self._post_raw_event(meta, event_type, reason, message, action=action)

    async def _post_raw_event(
        self,
        meta: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        action: str = "Scheduling",
    ) -> None:
        ns = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        note = _truncate(message)
        now = _now_rfc3339()
        memo_key = (f"{ns}/{name}", reason)
        memo = self._event_memo.get(memo_key)
        try:
            if memo is not None and memo.message == note:
                memo.count += 1
                await self.api.patch_event(
                    ns, memo.name, {"count": memo.count, "lastTimestamp": now}
                )
                return
            body = {
                "metadata": {"generateName": f"{name}.", "namespace": ns},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": ns,
                    "name": name,
                    "uid": str(meta.get("uid") or ""),
                },
                "reason": reason,
                "message": note,
                "type": event_type,
                "action": action,
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": self.identity,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            ev_name = await self.api.create_event(ns, body)
            self._event_memo[memo_key] = _EventMemo(ev_name, note, 1)
            if len(self._event_memo) > 10000:
                self._event_memo.clear()
        except ApiCallError as e:
            if memo is not None and e.status == 404:
                self._event_memo.pop(memo_key, None)
            log.warning("event_failed", pod=f"{ns}/{name}", reason=reason, error=str(e))

    # ================================================================== port: preemption
    def _gate(self, pod: PodInfo) -> bool:
        """Hold a preemptor out of activeQ while its preemption's API calls run."""
        return pod.uid not in self._preempting

    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Sequence[PodInfo]
    ) -> Status:
        self.metrics.preemption_attempts.inc()
        self.metrics.preemption_victims.observe(len(candidate.victims))
        for p in lower_nominated:
            # Their space goes to the preemptor: let them look elsewhere at once.
            self.core.queue.nominator.delete_nominated_pod_if_exists(p.key)
            self._status_memo.pop(p.key, None)
            self._spawn(self._patch_status(p, {"status": {"nominatedNodeName": None}}))
        self.core.queue.activate(p.key for p in lower_nominated)
        victims = [v for v in candidate.victims if not v.terminating]
        if not self.config.async_preemption:
            try:
                for v in victims:
                    self._preempt_victim_sync(v)
            except ApiCallError as e:
                self.metrics.preemption_failures.inc()
                log.warning("preemption_failed", pod=preemptor.key, error=str(e))
                return Status(Code.ERROR, (f"preempting victims: {e}",))
            for v in victims:
                self._spawn(self._preempted_event(v, preemptor, candidate.node_name))
            return Status()
        self._preempting.add(preemptor.uid)
        self._spawn(self._preempt_async(preemptor, candidate, victims))
        return Status()

    async def _preempt_async(
        self, preemptor: PodInfo, candidate: Candidate, victims: list[PodInfo]
    ) -> None:
        ok = True
        try:
            results = await asyncio.gather(
                *(self._preempt_victim(v, preemptor, candidate.node_name) for v in victims),
                return_exceptions=True,
            )
            for v, r in zip(victims, results, strict=True):
                if isinstance(r, BaseException):
                    ok = False
                    self.metrics.preemption_failures.inc()
                    log.warning(
                        "preemption_victim_failed", pod=preemptor.key, victim=v.key, error=str(r)
                    )
        finally:
            self._preempting.discard(preemptor.uid)
            # As upstream, a successful preemption leaves the preemptor to the victims'
            # deletion events (NodeResourcesFit's hint moves it). It is activated at once
            # only if a call failed (a fresh decision is due) or a victim is already gone
            # (its deletion event arrived while the gate held the preemptor back).
            gone = any(self.core.cache.get_pod(v.key) is None for v in victims)
            if not ok or gone or not victims:
                self.core.queue.activate([preemptor.key])
                self._wake.set()
        log.info("preemption_finished", pod=preemptor.key, node=candidate.node_name, ok=ok)

    async def _preempt_victim(self, victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        try:
            await self.api.patch_pod_status(victim.namespace, victim.name, _disruption_patch())
            await self.api.delete_pod(victim.namespace, victim.name, victim.uid)
        except ApiCallError as e:
            if e.status != 404:
                raise
            return
        await self._preempted_event(victim, preemptor, node)

    def _preempt_victim_sync(self, victim: PodInfo) -> None:
        try:
            self.api.patch_pod_status_sync(victim.namespace, victim.name, _disruption_patch())
            self.api.delete_pod_sync(victim.namespace, victim.name, victim.uid)
        except ApiCallError as e:
            if e.status != 404:
                raise

    async def _preempted_event(self, victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        await self._event(
            victim,
            "Normal",
            "Preempted",
            f"Preempted by pod {preemptor.uid} on node {node}",
            action="Preempting",
        )


def _disruption_patch() -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": PREEMPTION_MESSAGE,
                    "lastTransitionTime": _now_rfc3339(),
                }
            ]
        }
    }


ReadyCheck = Callable[[], bool]
