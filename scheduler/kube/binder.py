"""The Binder port: POST the Binding of an assumed pod and report the outcome to the core.

One task per pod (bindings of different pods overlap, as upstream's binding cycles run in
goroutines). Retries only what cannot have taken effect or is safe to repeat: 429, 5xx and
lost connections, with backoff (0.2 s doubling to 5 s) for up to a minute, so that an API
server restart does not fail the binding: a failed binding forgets the pod and clears its
nomination, and another pod could take the room a preemption made for it, which would then
cost a second preemption (the retried POST is safe: a Binding that did land answers 409,
and the 409 path below finds the pod bound to our node).

A 409 is never read blindly: it means the pod is bound already, or was re-created, or the
API server refused it (a scheduling gate, say). The binder re-reads the pod and reports
what it finds:

  409 -> GET pod  | gone, or another uid (re-created)  -> GONE   (forget; the watch has it)
                  | bound to our node                  -> OK     (an earlier try landed)
                  | bound to another node              -> CONFLICT (forget; the watch has it)
                  | still unbound                      -> ERROR  (forget, requeue with backoff)
  404             -> GONE

With PreBind plugins enabled the core hands over a ``BindingCycle``: PreBindPreFlight, the
nominatedNodeName update when a plugin has work to do, PreBind, then the Binding above; a
failed step reports REJECTED or PRE_BIND without a Binding.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from scheduler.kube.client import KubeClient
from scheduler.kube.errors import ApiError, NotFound
from scheduler.metrics import Metrics
from scheduler.schedule_one import BindingCycle, BindOutcome, binding_step_outcome
from scheduler.types import PodInfo

__all__ = ["BIND_RETRY_SECONDS", "Binder", "pod_path"]

log = structlog.get_logger("py-scheduler")

BIND_RETRY_SECONDS = 60.0


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


class Binder:
    def __init__(
        self,
        client: KubeClient,
        *,
        on_result: Callable[[str, str, str], None],
        spawn: Callable[[Any], None],
        metrics: Metrics,
        retry_delay: float = 0.2,
        retry_seconds: float = BIND_RETRY_SECONDS,
        nominate: Callable[[PodInfo, str], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.nominate = nominate  # writes status.nominatedNodeName (the Recorder's)
        self.on_result = on_result
        self.spawn = spawn
        self.metrics = metrics
        self.retry_delay = retry_delay
        self.retry_seconds = retry_seconds

    def bind(self, pod: PodInfo, node_name: str, cycle: BindingCycle | None = None) -> None:
        """The core's Binder port: never blocks; the outcome arrives via ``on_result``."""
        self.spawn(self._bind(pod, node_name, cycle))

    async def _bind(self, pod: PodInfo, node: str, cycle: BindingCycle | None = None) -> None:
        if cycle is None:
            outcome, message = await self.bind_now(pod, node)
        else:
            outcome, message = await self._bind_with_plugins(pod, node, cycle)
        if outcome != BindOutcome.OK:
            self.metrics.binding_failures.labels(outcome).inc()
            log.warning("bind_failed", pod=pod.key, node=node, outcome=outcome, error=message)
        self.on_result(pod.key, outcome, message)

    async def _bind_with_plugins(
        self, pod: PodInfo, node: str, cycle: BindingCycle
    ) -> tuple[str, str]:
        """Upstream's binding cycle with PreBind plugins: PreBindPreFlight; when some plugin
        has work to do, the pod's nominatedNodeName is set to the node (so that other
        components, an autoscaler say, see where it is going while PreBind works; a failed
        update is logged and the binding goes on, as upstream); PreBind; the Binding."""
        failed, nominate = cycle.begin()
        if failed is None and nominate and self.nominate is not None:
            await self.nominate(pod, node)  # a failure is logged; the binding goes on
        if failed is None:
            failed = cycle.finish()
        if failed is not None:
            return binding_step_outcome(failed), failed.message()
        return await self.bind_now(pod, node)

    async def bind_now(self, pod: PodInfo, node: str) -> tuple[str, str]:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = pod_path(pod.namespace, pod.name) + "/binding"
        delay = self.retry_delay
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.client.request("POST", path, body=body)
                return BindOutcome.OK, ""
            except ApiError as e:
                if e.status == 404:
                    return BindOutcome.GONE, str(e)
                if e.status == 409:
                    return await self._after_conflict(pod, node, str(e))
                if not e.retryable or time.monotonic() + delay > deadline:
                    return BindOutcome.ERROR, str(e)
                log.warning("bind_retry", pod=pod.key, node=node, attempt=attempt, error=str(e))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _after_conflict(self, pod: PodInfo, node: str, message: str) -> tuple[str, str]:
        try:
            now = await self.client.request("GET", pod_path(pod.namespace, pod.name))
        except NotFound:
            return BindOutcome.GONE, message
        except ApiError as e:
            return BindOutcome.ERROR, f"{message}; re-reading the pod failed: {e}"
        meta = now.get("metadata") or {}
        spec = now.get("spec") or {}
        if pod.uid and meta.get("uid") != pod.uid:
            return BindOutcome.GONE, f"{message}; the pod was re-created"
        bound_to = str(spec.get("nodeName") or "")
        if bound_to == node:
            log.info("bind_already_done", pod=pod.key, node=node)
            return BindOutcome.OK, ""
        if bound_to:
            return BindOutcome.CONFLICT, f"{message}; the pod is bound to {bound_to}"
        return BindOutcome.ERROR, message
