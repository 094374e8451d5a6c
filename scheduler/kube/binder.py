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

With PreBind plugins enabled, or a pod held at Permit, the core hands over a
``BindingCycle``: PreBindPreFlight, the nominatedNodeName update when a plugin has work to
do or the pod waits, the wait at Permit, PreBind, then the Binding above; a failed step
reports PERMIT (rejected at Permit), REJECTED or PRE_BIND without a Binding.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from scheduler.framework.interface import Code, Status
from scheduler.kube.client import KubeClient, ignore_reply
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
        on_result: Callable[[str, str, str, str], None],
        spawn: Callable[[Any], object],  # its result unused
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
        plugin = ""
        running = self.metrics.child(self.metrics.goroutines, "binding")
        running.inc()  # upstream's scheduler_goroutines{operation="binding"}
        try:
            if cycle is None:
                outcome, message = await self.bind_now(pod, node)
            else:
                outcome, message, plugin = await self._bind_with_plugins(pod, node, cycle)
        finally:
            running.dec()
        if outcome != BindOutcome.OK:
            self.metrics.binding_failures.labels(outcome).inc()
            log.warning("bind_failed", pod=pod.key, node=node, outcome=outcome, error=message)
        self.on_result(pod.key, outcome, message, plugin)

    async def _bind_with_plugins(
        self, pod: PodInfo, node: str, cycle: BindingCycle
    ) -> tuple[str, str, str]:
        """Upstream's binding cycle with plugins: PreBindPreFlight; when some PreBind plugin
        has work to do or the pod waits at Permit, the pod's nominatedNodeName is set to the
        node (so that other components, an autoscaler say, see where it is going; a failed
        update is logged and the binding goes on, as upstream); the wait at Permit; PreBind;
        the Binding. Returns (outcome, message, the plugin that rejected it at Permit)."""
        failed, nominate = cycle.begin()
        if failed is None and nominate and self.nominate is not None:
            await self.nominate(pod, node)  # a failure is logged; the binding goes on
        if failed is None and cycle.waiting is not None:
            failed = cycle.permitted(await self._wait_on_permit(cycle))
            if failed is not None:
                return binding_step_outcome(failed, at_permit=True), failed.message(), failed.plugin
        if failed is None:
            if cycle.enter_pre_bind is not None:
                failed = await self._pre_bind_cancellable(cycle)
            else:
                failed = cycle.finish()
        if failed is not None:
            return binding_step_outcome(failed), failed.message(), ""
        if cycle.bind is not None:
            st = await cycle.bind()  # the Bind plugins before DefaultBinder
            if st.is_success():
                log.info("bound_by_plugin", pod=pod.key, node=node, plugin=st.plugin)
                return BindOutcome.OK, "", ""
            if not st.is_skip():
                return binding_step_outcome(st), st.message(), ""
        outcome, message = await self.bind_now(pod, node)  # DefaultBinder
        return outcome, message, ""

    async def _pre_bind_cancellable(self, cycle: BindingCycle) -> Status | None:
        """Async PreBind in a task of its own, registered as in PreBind for as long as it
        runs: a preemption that picks the pod cancels it (upstream's CancelPod) and the
        binding fails with an error ("preempted by DefaultPreemption", retried after
        backoff) instead of the pod being deleted. Whichever comes first wins: the
        cancellation, or PreBind's end (``mark_prebound``)."""
        assert cycle.enter_pre_bind is not None
        task = asyncio.ensure_future(cycle.finish_async())
        entry = cycle.enter_pre_bind(lambda message: task.cancel(message))
        failed: Status | None = None
        try:
            failed = await task
        except asyncio.CancelledError:
            if entry.state != "cancelled":
                raise  # this binding task itself is being cancelled (shutdown)
        finally:
            cycle.leave_pre_bind()
        if not entry.mark_prebound():
            return Status(Code.ERROR, (entry.message,), "DefaultPreemption")
        return failed

    async def _wait_on_permit(self, cycle: BindingCycle) -> Status:
        """The outcome of the pod's wait at Permit: allowed, rejected or preempted by
        whatever the scheduler's loop runs meanwhile, or rejected once the earliest pending
        plugin's timeout passes (``cycle.expire``, by the core's clock)."""
        wp = cycle.waiting
        assert wp is not None
        done: asyncio.Future[Status] = asyncio.get_running_loop().create_future()
        wp.on_done(lambda st: None if done.done() else done.set_result(st))
        while not done.done():
            try:
                await asyncio.wait_for(asyncio.shield(done), cycle.permit_timeout())
            except TimeoutError:
                cycle.expire()
        return done.result()

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
                await self.client.request(
                    "POST", path, body=body, loads=ignore_reply, priority=pod.priority
                )
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
            now = await self.client.request(
                "GET", pod_path(pod.namespace, pod.name), priority=pod.priority
            )
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
