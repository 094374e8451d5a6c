"""Lease-based leader election (coordination.k8s.io/v1), a small loop of our own.

Why not the client's leaderelection module: it is synchronous, thread-based and cannot
release the lease on shutdown. This loop follows client-go's rules: acquire when the lease
is free, ours, or expired (renewTime + leaseDurationSeconds in the past); renew every
``retry_period``; if a renewal has not succeeded for ``renew_deadline``, leadership is lost
(``on_stopped``) at once. Updates carry the resourceVersion, so two candidates cannot both
win. On shutdown the holder releases (empty holder, 1s duration) so a standby takes over
without waiting for expiry.
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


def _parse(ts: str | None) -> float:
    if not ts:
        return 0.0
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


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
        self._stop = asyncio.Event()

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
        expired = _parse(spec.get("renewTime")) + duration < time.time()
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
        return True

    async def run(self) -> None:
        last_renew = 0.0
        while not self._stop.is_set():
            try:
                ok = await asyncio.wait_for(self._try_acquire_or_renew(), self.retry_period * 2)
            except (ApiError, TimeoutError) as e:
                ok = False
                log.warning("lease_error", lease=f"{self.namespace}/{self.name}", error=str(e))
            now = time.monotonic()
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
