"""Leader election's expiry rule (client-go's observedTime): a lease is judged expired by
the local time at which we last saw it change, never by the holder's renewTime against our
clock, so clock skew between replicas cannot make a standby take a live lease."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from scheduler.kube.leader import LeaderElector
from tests.unit.kube.fakekube import FakeKube

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/py-scheduler"


class LeaseServer(FakeKube):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.lease: dict[str, Any] = {"metadata": {"name": "py-scheduler"}, "spec": spec}

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.calls.append((method, path, kw.get("body")))
        if method == "GET" and path == LEASE:
            return copy.deepcopy(self.lease)
        if method == "PUT" and path == LEASE:
            self.lease = copy.deepcopy(kw["body"])
            return self.lease
        raise AssertionError(f"unexpected {method} {path}")


def _elector(api: LeaseServer, now: list[float]) -> LeaderElector:
    return LeaderElector(
        api,  # type: ignore[arg-type]
        identity="me",
        name="py-scheduler",
        namespace="kube-system",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        on_started=lambda: None,
        on_stopped=lambda: None,
        monotonic=lambda: now[0],
    )


def test_a_lease_renewed_long_ago_by_the_holders_clock_is_not_taken_until_observed_stale() -> None:
    async def go() -> None:
        # The holder's clock is an hour behind ours: by renewTime it looks long expired.
        spec = {
            "holderIdentity": "other",
            "leaseDurationSeconds": 15,
            "renewTime": "2000-01-01T00:00:00.000000Z",
        }
        api = LeaseServer(spec)
        now = [100.0]
        e = _elector(api, now)
        assert await e._try_acquire_or_renew() is False  # first seen now: valid for 15 s
        now[0] += 10
        assert await e._try_acquire_or_renew() is False
        # The holder renews (the record changes): the 15 s start again from now.
        api.lease["spec"]["renewTime"] = "2000-01-01T00:00:12.000000Z"
        now[0] += 6
        assert await e._try_acquire_or_renew() is False
        now[0] += 14
        assert await e._try_acquire_or_renew() is False
        now[0] += 2  # 16 s without a change: expired by our observation
        assert await e._try_acquire_or_renew() is True
        assert api.lease["spec"]["holderIdentity"] == "me"
        assert api.lease["spec"]["leaseTransitions"] == 1

    asyncio.run(go())


def test_the_holder_renews_its_own_lease_whatever_the_times_say() -> None:
    async def go() -> None:
        api = LeaseServer(
            {
                "holderIdentity": "me",
                "leaseDurationSeconds": 15,
                "renewTime": "2999-01-01T00:00:00Z",
            }
        )
        e = _elector(api, [0.0])
        assert await e._try_acquire_or_renew() is True
        assert api.lease["spec"]["renewTime"] != "2999-01-01T00:00:00Z"
        assert "leaseTransitions" not in api.lease["spec"]  # no transition for a renewal

    asyncio.run(go())
