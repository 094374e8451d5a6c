"""The live Scheduler's ports against a recording ClusterApi (no network): binding retries
and outcomes, failure recording and de-duplication, async vs sync preemption, the queue
gate, leadership, and the event intake."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.errors import ApiCallError
from scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod


class _Err(ApiCallError):
    def __init__(self, status: int, retryable: bool = False) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self._retryable = retryable

    @property
    def retryable(self) -> bool:
        return self._retryable


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.bind_failures: list[ApiCallError] = []
        self.delete_failures: dict[str, ApiCallError] = {}
        self.objects: dict[str, list[dict[str, Any]]] = {}
        self.events: dict[str, dict[str, Any]] = {}

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append(("bind", (f"{namespace}/{name}", node)))
        if self.bind_failures:
            raise self.bind_failures.pop(0)

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.calls.append(("patch_status", (f"{namespace}/{name}", patch)))

    def patch_pod_status_sync(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.calls.append(("patch_status_sync", (f"{namespace}/{name}", patch)))

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        self.calls.append(("delete", f"{namespace}/{name}"))
        err = self.delete_failures.get(f"{namespace}/{name}")
        if err is not None:
            raise err

    def delete_pod_sync(self, namespace: str, name: str, uid: str) -> None:
        self.calls.append(("delete_sync", f"{namespace}/{name}"))

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> str:
        name = f"ev{len(self.events)}"
        self.events[name] = dict(body)
        self.calls.append(("event", (body["reason"], body["involvedObject"]["name"])))
        return name

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.calls.append(("patch_event", (name, dict(patch))))
        self.events[name].update(patch)

    async def list_objects(self, kind: str) -> list[dict[str, Any]]:
        return list(self.objects.get(kind, []))

    def of(self, kind: str) -> list[Any]:
        return [c[1] for c in self.calls if c[0] == kind]


def _sched(api: FakeApi, **config: Any) -> Scheduler:
    s = Scheduler(SchedulerConfig(**config), api, identity="test", clock=FakeClock(1000.0))
    s.set_leader(True)
    return s


async def _drain(s: Scheduler) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    while s._tasks:
        await asyncio.gather(*list(s._tasks), return_exceptions=True)
        for _ in range(5):
            await asyncio.sleep(0)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_pending_pod_is_bound_and_a_scheduled_event_posted() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        s.handle_event("nodes", "ADDED", make_node("n1").obj())
        s.handle_event("pods", "ADDED", make_pod("p").req(cpu="1").obj())
        r = s.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        await _drain(s)
        assert api.of("bind") == [("default/p", "n1")]
        assert ("Scheduled", "p") in api.of("event")
        body = next(iter(api.events.values()))
        assert body["message"] == "Successfully assigned default/p to n1"
        assert body["reportingComponent"] == "py-scheduler"

    _run(go())


@pytest.mark.parametrize(
    ("failures", "binds", "requeued"),
    [
        pytest.param([_Err(500, True), _Err(429, True)], 3, False, id="5xx and 429 retried"),
        pytest.param([_Err(409)], 1, False, id="409 conflict: forgotten, never retried"),
        pytest.param([_Err(404)], 1, False, id="404 gone: forgotten, never retried"),
        pytest.param([_Err(400)], 1, True, id="other errors: requeued with backoff"),
    ],
)
def test_binding_outcomes(failures: list[ApiCallError], binds: int, requeued: bool) -> None:
    async def go() -> None:
        api = FakeApi()
        api.bind_failures = list(failures)
        s = _sched(api)
        s.handle_event("nodes", "ADDED", make_node("n1").obj())
        s.handle_event("pods", "ADDED", make_pod("p").req(cpu="1").obj())
        s.core.schedule_one()
        await _drain(s)
        assert len(api.of("bind")) == binds
        if binds == 3:
            assert s.core.cache.get_pod("default/p") is not None  # assumed, bound
        else:
            assert s.core.cache.get_pod("default/p") is None  # forgotten
        assert (s.core.queue.where("default/p") == "backoff") is requeued

    _run(go())


def test_failure_patches_status_once_per_message_and_counts_repeated_events() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        s.handle_event(
            "nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj()
        )
        s.handle_event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        s.core.schedule_one()
        await _drain(s)
        patches = api.of("patch_status")
        assert len(patches) == 1
        cond = patches[0][1]["status"]["conditions"][0]
        assert cond["type"] == "PodScheduled" and cond["status"] == "False"
        assert cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
        # Same failure again: no second status patch; the event is counted, not re-created.
        s.core.queue.activate(["default/big"])
        s.core.schedule_one()
        await _drain(s)
        assert len(api.of("patch_status")) == 1
        assert [c for c in api.calls if c[0] == "event"] == [("event", ("FailedScheduling", "big"))]
        assert api.of("patch_event")[0][1]["count"] == 2

    _run(go())


def test_event_messages_are_truncated_to_1024_bytes() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        pod = make_pod("p").info()
        await s._event(pod, "Warning", "FailedScheduling", "é" * 2000, action="Scheduling")
        msg = next(iter(api.events.values()))["message"]
        assert len(msg.encode()) <= 1024 and msg.endswith("...")

    _run(go())


def _preemption_cluster(s: Scheduler) -> None:
    s.handle_event("nodes", "ADDED", make_node("n1").alloc(cpu="2", memory="4Gi", pods=10).obj())
    s.handle_event("pods", "ADDED", make_pod("low-0").req(cpu="1").node("n1").started(1).obj())
    s.handle_event("pods", "ADDED", make_pod("low-1").req(cpu="1").node("n1").started(2).obj())
    s.handle_event("pods", "ADDED", make_pod("high").req(cpu="1").priority(1000).obj())


def test_async_preemption_marks_deletes_and_reports_victims_then_releases_the_preemptor() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        _preemption_cluster(s)
        r = s.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        assert [v.key for v in r.victims] == ["default/low-1"]
        # While the API calls run, the preemptor is held out of activeQ.
        high = s.core.queue.get("default/high")
        assert high is not None and s._gate(high.pod) is False
        await _drain(s)
        patches = [p for p in api.of("patch_status") if p[0] == "default/low-1"]
        cond = patches[0][1]["status"]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "DisruptionTarget",
            "True",
            "PreemptionByScheduler",
        )
        assert cond["message"] == "py-scheduler: preempting to accommodate a higher priority pod"
        assert api.of("delete") == ["default/low-1"]
        assert ("Preempted", "low-1") in api.of("event")
        # The preemptor's status carries the nomination with PodScheduled=False, in one patch.
        mine = [p[1]["status"] for p in api.of("patch_status") if p[0] == "default/high"]
        assert mine and mine[0]["nominatedNodeName"] == "n1"
        assert mine[0]["conditions"][0]["type"] == "PodScheduled"
        assert s._gate(high.pod) is True
        # As upstream, success leaves the preemptor to the victims' deletion events.
        assert s.core.queue.where("default/high") == "unschedulable"
        # Even if it ran again before the watch reported the victim terminating, it would
        # wait for its victims instead of preempting a second time.
        s.core.queue.activate(["default/high"])
        again = s.core.schedule_one()
        assert again is not None and again.outcome == "unschedulable"
        assert again.message.endswith(
            "preemption: not eligible due to a terminating pod on the nominated node."
        )
        await _drain(s)
        assert api.of("delete") == ["default/low-1"]
        # The victim is gone: the preemptor moves, and binds to its nominated node.
        s.handle_event("pods", "DELETED", make_pod("low-1").node("n1").obj())
        assert s.core.queue.where("default/high") in ("active", "backoff")
        s.clock.step(30)  # type: ignore[attr-defined]
        s.core.flush()
        r = s.core.schedule_one()
        assert r is not None and r.outcome == "assumed" and r.node == "n1"
        await _drain(s)

    _run(go())


def test_sync_preemption_runs_the_calls_before_the_cycle_returns() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api, async_preemption=False)
        _preemption_cluster(s)
        r = s.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        assert api.of("delete_sync") == ["default/low-1"]
        assert [p[0] for p in api.of("patch_status_sync")] == ["default/low-1"]
        await _drain(s)
        assert ("Preempted", "low-1") in api.of("event")

    _run(go())


def test_a_failed_victim_deletion_is_counted_and_the_preemptor_requeued() -> None:
    async def go() -> None:
        api = FakeApi()
        api.delete_failures["default/low-1"] = _Err(500, True)
        s = _sched(api)
        _preemption_cluster(s)
        s.core.schedule_one()
        await _drain(s)
        assert s.metrics.preemption_failures._value.get() == 1
        assert ("Preempted", "low-1") not in api.of("event")
        assert s.core.queue.where("default/high") == "active"  # a fresh decision is due

    _run(go())


def test_victims_already_terminating_are_not_deleted_again() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        s.handle_event(
            "nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="4Gi", pods=10).obj()
        )
        s.handle_event("pods", "ADDED", make_pod("low").req(cpu="1").node("n1").terminating().obj())
        s.handle_event("pods", "ADDED", make_pod("high").req(cpu="1").priority(1000).obj())
        r = s.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        await _drain(s)
        assert api.of("delete") == []

    _run(go())


def test_a_standby_does_not_schedule_but_keeps_its_cache_warm() -> None:
    async def go() -> None:
        api = FakeApi()
        s = Scheduler(SchedulerConfig(), api, identity="standby", clock=FakeClock(1000.0))
        s.handle_event("nodes", "ADDED", make_node("n1").obj())
        s.handle_event("pods", "ADDED", make_pod("p").obj())
        s.handle_event("pods", "ADDED", make_pod("bound").node("n1").obj())
        assert not s.is_leader
        assert s.core.cache.get_pod("default/bound") is not None
        assert s.core.queue.where("default/p") == "active"
        assert s.metrics.leader._value.get() == 0
        s.set_leader(True)
        assert s.metrics.leader._value.get() == 1

    _run(go())


def test_initial_sync_restores_nominations_and_reconciles_deletions() -> None:
    async def go() -> None:
        api = FakeApi()
        api.objects = {
            "nodes": [make_node("n1").obj()],
            "pods": [
                make_pod("nominated").priority(10).nominated("n1").obj(),
                make_pod("gone").node("n1").obj(),
            ],
        }
        s = _sched(api)
        await s.sync_all()
        assert s.synced
        assert s.core.queue.nominator.nominated_node("default/nominated") == "n1"
        assert s.core.cache.get_pod("default/gone") is not None
        api.objects["pods"] = [make_pod("nominated").priority(10).nominated("n1").obj()]
        await s.sync_all()  # the watch missed a deletion: the resync removes it
        assert s.core.cache.get_pod("default/gone") is None

    _run(go())


def test_a_malformed_pod_of_ours_gets_a_warning_event_naming_the_field() -> None:
    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        bad = make_pod("bad").req(cpu="lots").obj()
        s.handle_event("pods", "ADDED", bad)
        await _drain(s)
        assert ("FailedScheduling", "bad") in api.of("event")
        msg = next(iter(api.events.values()))["message"]
        assert "spec.containers[0].resources.requests.cpu" in msg and "lots" in msg
        assert not s.core.queue.contains("default/bad")

    _run(go())


def test_per_node_verdicts_are_logged_at_debug_with_stable_event_names() -> None:
    from structlog.testing import capture_logs

    async def go() -> None:
        api = FakeApi()
        s = _sched(api)
        s.handle_event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=9).obj())
        s.handle_event("nodes", "ADDED", make_node("n2").taint("dedicated", "x").obj())
        s.handle_event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        r = s.core.schedule_one()
        assert r is not None
        with capture_logs() as logs:
            s._observe(r, 0.001)
        events = {(e["event"], e.get("node")) for e in logs}
        assert ("pod_unschedulable", None) in events
        per_node = {e["node"]: e for e in logs if e["event"] == "node_filtered"}
        assert per_node["n1"]["plugin"] == "NodeResourcesFit"
        assert per_node["n1"]["reasons"] == ["Insufficient cpu"]
        assert per_node["n1"]["log_level"] == "debug"
        assert per_node["n2"]["plugin"] == "TaintToleration"
        await _drain(s)

    _run(go())
