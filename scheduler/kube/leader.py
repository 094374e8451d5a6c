"""Lease-based leader election (coordination.k8s.io/v1), a small loop of our own.

Why not the official client's ``kubernetes.aio.leaderelection``: it cannot release the lease
on shutdown (a standby would wait a whole lease duration), it bounds no single call (a hung
renewal can outlive the renew deadline) and it writes times without a zone. This loop
follows client-go's rules:

- acquire when the lease is free, ours, or expired; "expired" is judged by the LOCAL time at
  which we last saw the record change plus leaseDurationSeconds (client-go's observedTime),
  never by comparing the holder's renewTime with our clock, so clock skew between replicas
  cannot make a standby steal a live lease;
- renew every ``retry_period``; if no renewal succeeded for ``renew_deadline``, leadership is
  lost (``on_stopped``) at once;
- updates carry the resourceVersion, so two candidates cannot both win;
- the lock has a client of its own (its own connection pool and rate budget, as
  kube-scheduler's leader-election client): a burst of Bindings cannot delay a renewal;
- on shutdown the holder releases (empty holder, 1s duration) so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.kube.client import KubeClient
from scheduler.kube.errors import ApiError, Conflict, NotFound

__all__ = ["LeaderElector"]

log = structlog.get_logger("py-scheduler.leader")


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        identity: str,
        name: str,
        namespace: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.leading = False
        self.monotonic = monotonic
        self._stop = asyncio.Event()
        # client-go's observedRecord/observedTime: the last lease spec we saw and the local
        # monotonic time at which we saw it change.
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_now()
        try:
            lease = await self.client.call("GET", f"{self.path}/{self.name}")
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                await self.client.call("POST", self.path, body=body)
                return True
            except Conflict:
                return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if spec != self._observed:
            self._observed = dict(spec)
            self._observed_at = self.monotonic()
        expired = self._observed_at + duration < self.monotonic()
        if holder and holder != self.identity and not expired:
            return False
        new_spec: dict[str, Any] = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.lease_duration),
            renewTime=now,
        )
        lease["spec"] = new_spec
        try:
            await self.client.call("PUT", f"{self.path}/{self.name}", body=lease)
        except Conflict:
            return False
        self._observed = new_spec
        self._observed_at = self.monotonic()
        return True

    async def run(self) -> None:
        last_renew = 0.0
        while not self._stop.is_set():
            try:
                ok = await asyncio.wait_for(self._try_acquire_or_renew(), self.retry_period * 2)
            except (ApiError, TimeoutError) as e:
                ok = False
                log.warning("lease_error", lease=f"{self.namespace}/{self.name}", error=str(e))
            now = self.monotonic()
            if ok:
                last_renew = now
                if not self.leading:
                    self.leading = True
                    self.on_started()
            elif self.leading and now - last_renew >= self.renew_deadline:
                self.leading = False
                self.on_stopped()
            elif self.leading and not ok:
                # Someone else holds it now (our update conflicted and they are valid).
                try:
                    lease = await self.client.call("GET", f"{self.path}/{self.name}")
                    if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                        self.leading = False
                        self.on_stopped()
                except ApiError:
                    pass
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.retry_period)

    async def release(self) -> None:
        self._stop.set()
        if not self.leading:
            return
        self.leading = False
        try:
            lease = await self.client.call("GET", f"{self.path}/{self.name}")
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_now())
            lease["spec"] = spec
            await self.client.call("PUT", f"{self.path}/{self.name}", body=lease)
            log.info("lease_released", lease=f"{self.namespace}/{self.name}")
        except ApiError as e:
            log.warning("lease_release_failed", error=str(e))
