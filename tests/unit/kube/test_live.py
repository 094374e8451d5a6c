"""The live scheduler's ports against a recording API (no network): binding retries and
outcomes (409 re-read), failure recording and de-duplication, async vs sync preemption, the
queue gate, leadership, and the event intake through the informers' stores."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.kube.live import LiveScheduler
from scheduler.kube.preemption import disruption_patch
from scheduler.types import PodInfo, pod_from_dict
from tests.builders import make_node, make_pod
from tests.unit.kube.fakekube import FakeKube


class Harness:
    def __init__(self, *, leader: bool = True, **config: Any) -> None:
        self.api = FakeKube()
        self.live = LiveScheduler(
            SchedulerConfig(**config),
            self.api,  # type: ignore[arg-type]
            identity="test",
            clock=FakeClock(1000.0),
        )
        self.s = self.live.scheduler
        self.core = self.s.core
        self.live.binder.retry_delay = 0.0
        self.live.event_writer.retry_delay = 0.0
        self.live.executor.retry_delay = 0.0
        if leader:
            self.s.set_leader(True)

    def event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """A watch event, through the kind's informer store (as the live path)."""
        inf = self.live.informers[kind]
        inf._deliver(inf.store.apply(event_type, obj))

    async def drain(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        while self.live._tasks or self.live.executor._tasks:
            await asyncio.gather(
                *self.live._tasks, *self.live.executor._tasks, return_exceptions=True
            )
            for _ in range(5):
                await asyncio.sleep(0)

    def binds(self) -> list[tuple[str, str]]:
        return [
            (f"{b['metadata']['namespace']}/{b['metadata']['name']}", b["target"]["name"])
            for _, b in self.api.of("POST", "/binding")
        ]

    def status_patches(self, pod: str) -> list[dict[str, Any]]:
        ns, name = pod.split("/")
        return [b for _, b in self.api.of("PATCH", f"/namespaces/{ns}/pods/{name}/status")]

    def deletes(self) -> list[str]:
        out = []
        for p, _ in self.api.of("DELETE"):
            parts = p.split("/")
            out.append(f"{parts[-3]}/{parts[-1]}")
        return out


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _plugin_config(monkeypatch: pytest.MonkeyPatch, plugin: type, point: str) -> dict[str, Any]:
    """The Harness's config with ``plugin`` (a class with a ``name``) enabled at ``point``,
    loaded through ``pluginModules`` from a module made for the test."""
    import dataclasses
    import sys
    import types

    from scheduler.config import parse_config

    name: str = plugin.name  # type: ignore[attr-defined]
    module = f"{name.lower()}_test_plugin"
    mod = types.ModuleType(module)
    setattr(mod, name, plugin)
    monkeypatch.setitem(sys.modules, module, mod)
    cfg = parse_config(
        {
            "pluginModules": {name: f"{module}:{name}"},
            "profiles": [{"plugins": {point: {"enabled": [{"name": name}]}}}],
        },
        "sched.yaml",
    )
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def test_a_pending_pod_is_bound_and_a_scheduled_event_posted() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("p").req(cpu="1").obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        await h.drain()
        assert h.binds() == [("default/p", "n1")]
        assert ("Scheduled", "p") in h.api.events()
        path, body = next(iter(h.api.of("POST", "/events")))
        assert path == "/apis/events.k8s.io/v1/namespaces/default/events"
        assert body["note"] == "Successfully assigned default/p to n1"
        assert body["reportingController"] == "py-scheduler"
        assert body["action"] == "Binding" and body["type"] == "Normal"
        assert body["regarding"]["kind"] == "Pod" and body["regarding"]["name"] == "p"
        assert body["eventTime"].endswith("Z") and "." in body["eventTime"]
        # The deprecated core/v1 fields must stay unset in events.k8s.io/v1.
        assert not {"count", "source", "firstTimestamp", "lastTimestamp", "message"} & set(body)

    _run(go())


@pytest.mark.parametrize(
    ("failures", "binds", "requeued"),
    [
        pytest.param([500, 429], 3, False, id="5xx and 429 retried"),
        pytest.param([404], 1, False, id="404 gone: forgotten, never retried"),
        pytest.param([400], 1, True, id="other errors: requeued with backoff"),
    ],
)
def test_binding_outcomes(failures: list[int], binds: int, requeued: bool) -> None:
    async def go() -> None:
        h = Harness()
        h.live.binder.retry_delay = 0.0
        h.api.fail("POST", "/binding", *failures)
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("p").req(cpu="1").obj())
        h.core.schedule_one()
        await h.drain()
        assert len(h.binds()) == binds
        if binds == 3:
            assert h.core.cache.is_assumed("default/p")  # bound, waiting for the watch
        else:
            assert h.core.cache.get_pod("default/p") is None  # forgotten
        assert (h.core.queue.where("default/p") == "backoff") is requeued

    _run(go())


@pytest.mark.parametrize(
    ("found", "outcome", "in_cache", "requeued"),
    [
        pytest.param(
            {"nodeName": "n1"}, "ok", True, False, id="bound to our node: an earlier try landed"
        ),
        pytest.param(
            {"nodeName": "n2"},
            "conflict",
            False,
            False,
            id="bound elsewhere: forgotten, the watch has it",
        ),
        pytest.param(
            {}, "error", False, True, id="still unbound (a gate, say): forgotten and requeued"
        ),
        pytest.param(None, "gone", False, False, id="re-created under the name: forgotten"),
    ],
)
def test_a_409_from_the_binding_rereads_the_pod(
    found: dict[str, Any] | None, outcome: str, in_cache: bool, requeued: bool
) -> None:
    async def go() -> None:
        h = Harness()
        h.api.fail("POST", "/binding", 409)
        h.event("nodes", "ADDED", make_node("n1").obj())
        pod = make_pod("p").req(cpu="1").obj()
        h.event("pods", "ADDED", pod)
        uid = pod["metadata"]["uid"] if found is not None else "another-uid"
        h.api.replies[("GET", "/namespaces/default/pods/p")] = {
            "metadata": {"name": "p", "namespace": "default", "uid": uid},
            "spec": found or {},
        }
        h.core.schedule_one()
        await h.drain()
        assert len(h.binds()) == 1  # a 409 is never retried blindly
        assert h.api.of("GET", "/namespaces/default/pods/p")
        assert (h.core.cache.get_pod("default/p") is not None) is in_cache
        assert (h.core.queue.where("default/p") == "backoff") is requeued
        failures = h.s.metrics.binding_failures
        counted = {s.labels["outcome"] for m in failures.collect() for s in m.samples if s.value}
        assert counted == (set() if outcome == "ok" else {outcome})

    _run(go())


def test_an_assumed_pod_is_confirmed_by_the_watch_and_never_expires() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        pod = make_pod("p").req(cpu="1").obj()
        h.event("pods", "ADDED", pod)
        h.core.schedule_one()
        await h.drain()
        # The watch lags: a long time passes, the pod stays assumed and keeps its room.
        h.s.clock.step(3600)  # type: ignore[attr-defined]
        h.core.flush()
        assert h.core.cache.is_assumed("default/p")
        h.event("pods", "ADDED", make_pod("other").req(cpu="1").obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "unschedulable"
        # The watch confirms it.
        bound = {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}
        bound["metadata"] = {**pod["metadata"], "resourceVersion": "7"}
        h.event("pods", "MODIFIED", bound)
        assert h.core.cache.get_pod("default/p") is not None
        assert not h.core.cache.is_assumed("default/p")

    _run(go())


def test_failure_patches_status_once_per_message_and_counts_repeated_events() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        h.core.schedule_one()
        await h.drain()
        patches = h.status_patches("default/big")
        assert len(patches) == 1
        cond = patches[0]["status"]["conditions"][0]
        assert cond["type"] == "PodScheduled" and cond["status"] == "False"
        assert cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
        assert "lastTransitionTime" in cond and "observedGeneration" not in cond  # no generation
        # Same failure again: no second status patch; the event is counted, not re-created.
        h.core.queue.activate(["default/big"])
        h.core.schedule_one()
        await h.drain()
        assert len(h.status_patches("default/big")) == 1
        assert h.api.events() == [("FailedScheduling", "big")]
        name = h.api.of("POST", "/events")[0][1]["metadata"]["name"]
        assert name.startswith("big.")
        assert h.api.of("PATCH", f"/events/{name}")[0][1]["series"]["count"] == 2

    _run(go())


def test_a_failed_cycle_s_status_write_is_awaited_by_the_loop_outside_a_cycle_spawned() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        rec = h.live.recorder
        assert h.s.cycle_writes is rec
        rec.begin_cycle()
        h.core.schedule_one()
        written = rec.end_cycle()
        assert written is not None  # the condition's write is the loop's to await
        assert h.status_patches("default/big") == []
        await written
        assert len(h.status_patches("default/big")) == 1
        # A cycle that writes nothing hands the loop nothing to wait for.
        rec.begin_cycle()
        assert h.core.schedule_one() is None
        assert rec.end_cycle() is None
        # A failure reported outside a cycle (a binding's) is written in the background.
        h.event("pods", "ADDED", make_pod("other").req(cpu="3").obj())
        h.core.schedule_one()  # no begin_cycle: as a bind result's failure handling
        await h.drain()
        assert len(h.status_patches("default/other")) == 1

    _run(go())


def test_the_loop_starts_no_cycle_while_a_failure_s_status_write_is_under_way() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("a").priority(10).req(cpu="2").obj())
        h.event("pods", "ADDED", make_pod("b").priority(5).req(cpu="2").obj())
        gate = asyncio.Event()
        request = h.api.request

        async def held(method: str, path: str, **kw: Any) -> dict[str, Any]:
            if method == "PATCH" and path.endswith("/status"):
                await gate.wait()  # a client waiting for its rate limit, or a slow server
            return await request(method, path, **kw)

        h.api.request = held  # type: ignore[method-assign]
        h.s.mark_synced()
        loop = asyncio.get_running_loop().create_task(h.s.run())
        for _ in range(50):
            await asyncio.sleep(0)
        # "a" (the higher priority) failed and its status write is held: "b" waits.
        assert h.core.queue.get("default/b") is not None
        assert h.api.of("PATCH") == []
        attempts = h.s.metrics.child(h.s.metrics.schedule_attempts, "unschedulable", "py-scheduler")
        assert attempts.value == 1
        assert h.s.healthy(stall_seconds=0.0)  # waiting for the API is not a stalled loop
        gate.set()
        for _ in range(50):
            await asyncio.sleep(0)
        assert len(h.status_patches("default/a")) == 1
        assert len(h.status_patches("default/b")) == 1
        assert attempts.value == 2
        await h.s.stop()
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop

    _run(go())


def test_repeated_events_are_a_series_written_as_client_go_writes_one() -> None:
    """client-go tools/events: created on the first occurrence, written again (series count
    2) on the second, then only counted until the series ends (no occurrence for 6 minutes:
    its series is written and it is forgotten) or is refreshed (every 30 minutes). The
    isomorphic key is type, action, reason, regarding object (resourceVersion included)
    and related object: not the note, so another message about the same pod version counts
    into the series (the Event keeps its first note), and a newer version of the pod is
    another object: another event."""
    import dataclasses

    from scheduler.kube.eventwriter import SERIES_FINISH_SECONDS

    async def go() -> None:
        h = Harness()
        rec = h.live.recorder
        pod = dataclasses.replace(make_pod("p").info(), resource_version="10")

        async def fail(p: PodInfo, message: str) -> None:
            await rec.event(p, "Warning", "FailedScheduling", message, action="Scheduling")

        for _ in range(4):
            await fail(pod, "no room")
        await fail(pod, "another reason")  # the same pod version: the same series
        (post,) = h.api.of("POST", "/events")
        name = post[1]["metadata"]["name"]
        assert post[1]["regarding"]["resourceVersion"] == "10"
        patches = h.api.of("PATCH", f"/events/{name}")
        assert [b["series"]["count"] for _, b in patches] == [2]
        assert set(patches[0][1]) == {"series"}  # only the series, as client-go's patch
        assert set(patches[0][1]["series"]) == {"count", "lastObservedTime"}
        newer = dataclasses.replace(pod, resource_version="11")
        await fail(newer, "no room")  # the pod changed: another object, another event
        assert len(h.api.of("POST", "/events")) == 2
        assert h.api.of("POST", "/events")[1][1]["regarding"]["resourceVersion"] == "11"
        assert h.live.event_writer.refresh_series() == 1  # the series of version 10 only
        await h.drain()
        assert [b["series"]["count"] for _, b in h.api.of("PATCH", f"/events/{name}")] == [2, 5]
        await fail(pod, "no room")
        later = time.monotonic() + SERIES_FINISH_SECONDS + 1
        # both end; only the series had a count unwritten
        assert h.live.event_writer.finish_series(later) == 2
        await h.drain()
        assert [b["series"]["count"] for _, b in h.api.of("PATCH", f"/events/{name}")] == [
            2,
            5,
            6,
        ]
        assert len([path for path, _ in h.api.of("PATCH") if "/events/" in path]) == 3
        await fail(pod, "no room")  # forgotten: a new event
        assert len(h.api.of("POST", "/events")) == 3

    _run(go())


def test_a_series_whose_event_is_gone_is_created_again_under_its_name() -> None:
    """client-go's recordEvent: a series PATCH answered 404 (the Event expired or was
    deleted) creates the Event again, series and all; a 409 from that creation (another
    write made it meanwhile) patches again."""

    async def go() -> None:
        h = Harness()
        rec = h.live.recorder
        h.live.event_writer.retry_delay = 0.0
        pod = make_pod("p").info()
        await rec.event(pod, "Warning", "FailedScheduling", "no room", action="Scheduling")
        ((_, first),) = h.api.of("POST", "/events")
        name = first["metadata"]["name"]
        h.api.fail("PATCH", f"/events/{name}", 404)
        await rec.event(pod, "Warning", "FailedScheduling", "later", action="Scheduling")
        posts = h.api.of("POST", "/events")
        assert len(posts) == 2
        again = posts[1][1]
        assert again["metadata"]["name"] == name and again["note"] == "no room"
        assert again["series"]["count"] == 2 and again["eventTime"] == first["eventTime"]
        # Gone again, and re-made by another write before ours: 404, 409, then the patch.
        h.api.fail("PATCH", f"/events/{name}", 404)
        h.api.fail("POST", "/events", 409)
        assert h.live.event_writer.refresh_series() == 1
        await h.drain()
        patches = h.api.of("PATCH", f"/events/{name}")
        assert [b["series"]["count"] for _, b in patches] == [2, 2, 2]
        assert len(h.api.of("POST", "/events")) == 3

    _run(go())


def test_a_pod_re_created_under_its_name_gets_events_of_its_own() -> None:
    """The series is the object's (client-go's isomorphic key names the regarding object,
    uid included): a new pod of the same name does not count into the old pod's event."""

    async def go() -> None:
        h = Harness()
        for uid in ("uid-1", "uid-2"):
            raw = make_pod("web-0").obj()
            raw["metadata"]["uid"] = uid
            pod = pod_from_dict(raw)
            await h.live.recorder.event(
                pod, "Warning", "FailedScheduling", "no room", action="Scheduling"
            )
        posts = h.api.of("POST", "/events")
        assert [b["regarding"]["uid"] for _, b in posts] == ["uid-1", "uid-2"]
        assert h.api.of("PATCH") == []

    _run(go())


def test_a_repeat_while_its_event_is_created_is_written_once_the_event_exists() -> None:
    async def go() -> None:
        h = Harness()
        pod = make_pod("p").info()
        await asyncio.gather(
            *(
                h.live.recorder.event(pod, "Warning", "FailedScheduling", "m", action="Scheduling")
                for _ in range(3)
            )
        )
        ((_, body),) = h.api.of("POST", "/events")
        patches = h.api.of("PATCH", f"/events/{body['metadata']['name']}")
        assert [b["series"]["count"] for _, b in patches] == [3]

    _run(go())


def test_event_messages_are_truncated_to_1024_bytes() -> None:
    async def go() -> None:
        h = Harness()
        pod = make_pod("p").info()
        await h.live.recorder.event(
            pod, "Warning", "FailedScheduling", "é" * 2000, action="Scheduling"
        )
        msg = h.api.of("POST", "/events")[0][1]["note"]
        assert len(msg.encode()) <= 1024 and msg.endswith("...")

    _run(go())


def test_an_event_whose_reply_was_lost_is_retried_under_its_name_and_made_once() -> None:
    from structlog.testing import capture_logs

    async def go() -> None:
        h = Harness()
        h.live.event_writer.retry_delay = 0.0
        # The first try reached the API server but its reply was lost (503 here); the retry
        # finds the event there already (409) and that is success.
        h.api.fail("POST", "/events", 503, 409)
        with capture_logs() as logs:
            await h.live.recorder.event(
                make_pod("p").info(), "Normal", "Scheduled", "ok", action="Binding"
            )
        tries = h.api.of("POST", "/events")
        assert len(tries) == 2
        assert tries[0][1]["metadata"]["name"] == tries[1][1]["metadata"]["name"]
        assert not [e for e in logs if e["event"] == "event_failed"]

    _run(go())


def _preemption_cluster(h: Harness) -> dict[str, dict[str, Any]]:
    objs = {
        "n1": make_node("n1").alloc(cpu="2", memory="4Gi", pods=10).obj(),
        "low-0": make_pod("low-0").req(cpu="1").node("n1").started(1).obj(),
        "low-1": make_pod("low-1").req(cpu="1").node("n1").started(2).obj(),
        "high": make_pod("high").req(cpu="1").priority(1000).obj(),
    }
    objs["low-1"]["metadata"]["generation"] = 2
    h.event("nodes", "ADDED", objs["n1"])
    for name in ("low-0", "low-1", "high"):
        h.event("pods", "ADDED", objs[name])
    return objs


def test_async_preemption_marks_deletes_and_reports_victims_then_releases_the_preemptor() -> None:
    async def go() -> None:
        h = Harness()
        objs = _preemption_cluster(h)
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        assert [v.key for v in r.victims] == ["default/low-1"]
        # While the API calls run, the preemptor is held out of activeQ.
        high = h.core.queue.get("default/high")
        assert high is not None and h.live.executor.gate(high.pod) is False
        await h.drain()
        cond = h.status_patches("default/low-1")[0]["status"]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "DisruptionTarget",
            "True",
            "PreemptionByScheduler",
        )
        assert cond["message"] == "py-scheduler: preempting to accommodate a higher priority pod"
        assert cond["observedGeneration"] == 2
        assert h.deletes() == ["default/low-1"]
        reg = h.s.metrics.registry
        done = {"result": "success"}
        assert reg.get_sample_value("scheduler_preemption_goroutines_execution_total", done) == 1
        assert reg.get_sample_value("scheduler_preemption_goroutines_duration_seconds_count", done)
        delete_body = h.api.of("DELETE")[0][1]
        assert delete_body["preconditions"] == {"uid": objs["low-1"]["metadata"]["uid"]}
        assert ("Preempted", "low-1") in h.api.events()
        ev = next(b for _, b in h.api.of("POST", "/events") if b["reason"] == "Preempted")
        assert ev["action"] == "Preempting" and ev["type"] == "Normal"
        # The preemptor is the related object, as upstream's Eventf(victim, preemptor, ...).
        assert (ev["related"]["kind"], ev["related"]["name"]) == ("Pod", "high")
        assert ev["related"]["uid"] == objs["high"]["metadata"]["uid"]
        assert ev["note"] == f"Preempted by pod {objs['high']['metadata']['uid']} on node n1"
        # The preemptor's status carries the nomination with PodScheduled=False, in one patch.
        mine = [b["status"] for b in h.status_patches("default/high")]
        assert mine and mine[0]["nominatedNodeName"] == "n1"
        assert mine[0]["conditions"][0]["type"] == "PodScheduled"
        assert h.live.executor.gate(high.pod) is True
        # As upstream, success leaves the preemptor to the victims' deletion events.
        assert h.core.queue.where("default/high") == "unschedulable"
        # Even if it ran again before the watch reported the victim terminating, it would
        # wait for its victims instead of preempting a second time.
        h.core.queue.activate(["default/high"])
        again = h.core.schedule_one()
        assert again is not None and again.outcome == "unschedulable"
        assert again.message.endswith(
            "preemption: not eligible due to a terminating pod on the nominated node."
        )
        await h.drain()
        assert h.deletes() == ["default/low-1"]
        # The victim is gone: the preemptor moves, and binds to its nominated node.
        h.event("pods", "DELETED", objs["low-1"])
        assert h.core.queue.where("default/high") in ("active", "backoff")
        h.s.clock.step(30)  # type: ignore[attr-defined]
        h.core.flush()
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "assumed" and r.node == "n1"
        await h.drain()

    _run(go())


def test_each_call_carries_the_priority_of_its_pod_and_a_victim_s_calls_the_preemptor_s() -> None:
    """What ``apiCallOrder: Priority`` orders by (the main client's ``request(priority=)``)."""

    async def go() -> None:
        h = Harness()
        objs = _preemption_cluster(h)
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        await h.drain()
        h.event("pods", "DELETED", objs["low-1"])
        h.s.clock.step(30)  # type: ignore[attr-defined]
        h.core.flush()
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        await h.drain()
        pods = "/api/v1/namespaces/default/pods"
        made = {(m, p): prio for m, p, prio in h.api.priorities if p.startswith(pods)}
        assert made == {
            # the victim's DisruptionTarget and its deletion wait as the preemptor's calls
            ("PATCH", f"{pods}/low-1/status"): 1000,
            ("DELETE", f"{pods}/low-1"): 1000,
            ("PATCH", f"{pods}/high/status"): 1000,  # its nomination
            ("POST", f"{pods}/high/binding"): 1000,
        }

        h2 = Harness()
        h2.event("nodes", "ADDED", make_node("n1").obj())
        h2.event("pods", "ADDED", make_pod("p").req(cpu="1").priority(7).obj())
        r = h2.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        await h2.drain()
        assert ("POST", f"{pods}/p/binding", 7) in h2.api.priorities

    _run(go())


def test_sync_preemption_makes_the_loop_wait_for_the_calls() -> None:
    async def go() -> None:
        h = Harness(async_preemption=False)
        _preemption_cluster(h)
        assert h.s.settle_preemption is not None
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        high = h.core.queue.get("default/high")
        assert high is not None and h.live.executor.gate(high.pod) is True  # no gate
        await h.s.settle_preemption()  # what the loop awaits before its next cycle
        assert not h.live.executor.busy
        assert h.deletes() == ["default/low-1"]
        assert ("Preempted", "low-1") in h.api.events()

    _run(go())


def test_a_failed_victim_deletion_is_counted_and_the_preemptor_requeued() -> None:
    async def go() -> None:
        h = Harness()
        h.api.fail("DELETE", "/pods/low-1", 403)
        _preemption_cluster(h)
        h.core.schedule_one()
        await h.drain()
        assert h.s.metrics.preemption_failures.value == 1
        assert ("Preempted", "low-1") not in h.api.events()
        assert h.core.queue.where("default/high") == "active"  # a fresh decision is due
        # ... and the Evaluator no longer waits for the victim it had handed out.
        assert "default/high" not in h.core.evaluator.pending_victims

    _run(go())


def test_victim_calls_are_retried_while_the_api_server_is_away() -> None:
    async def go() -> None:
        h = Harness()
        h.live.executor.retry_delay = 0.0
        h.api.fail("PATCH", "/pods/low-1/status", 503)
        h.api.fail("DELETE", "/pods/low-1", 500, 429)
        _preemption_cluster(h)
        h.core.schedule_one()
        await h.drain()
        assert h.deletes() == ["default/low-1"] * 3
        assert h.s.metrics.preemption_failures.value == 0
        assert ("Preempted", "low-1") in h.api.events()
        assert h.core.queue.where("default/high") == "unschedulable"  # waits for the deletion

    _run(go())


def test_victims_already_terminating_are_not_deleted_again() -> None:
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="4Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("low").req(cpu="1").node("n1").terminating().obj())
        h.event("pods", "ADDED", make_pod("high").req(cpu="1").priority(1000).obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "preempting"
        await h.drain()
        assert h.deletes() == []

    _run(go())


def test_a_pending_pod_being_deleted_is_told_so_when_popped() -> None:
    # upstream's skipPodSchedule: queued until popped, then a FailedScheduling warning
    # "skip schedule deleting pod: <ns>/<name>", and no status written, no Binding.
    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("gone").terminating().obj())
        assert h.core.queue.where("default/gone") == "active"
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "skipped"
        await h.drain()
        assert h.api.events() == [("FailedScheduling", "gone")]
        event = h.api.of("POST", "/events")[0][1]
        assert (event["type"], event["action"]) == ("Warning", "Scheduling")
        assert event["note"] == "skip schedule deleting pod: default/gone"
        assert h.status_patches("default/gone") == [] and h.api.of("POST", "/binding") == []

    _run(go())


def test_a_standby_does_not_schedule_but_keeps_its_cache_warm() -> None:
    async def go() -> None:
        h = Harness(leader=False)
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("p").obj())
        h.event("pods", "ADDED", make_pod("bound").node("n1").obj())
        assert not h.s.is_leader
        assert h.core.cache.get_pod("default/bound") is not None
        assert h.core.queue.where("default/p") == "active"
        assert h.s.metrics.leader.value == 0
        h.s.set_leader(True)
        assert h.s.metrics.leader.value == 1

    _run(go())


def test_leader_acquired_is_not_logged_without_leader_election() -> None:
    from structlog.testing import capture_logs

    h = Harness(leader=False)
    with capture_logs() as logs:
        h.s.set_leader(True, elected=False)
    assert h.s.is_leader
    assert [e["event"] for e in logs] == []


def test_a_malformed_pod_of_ours_gets_a_warning_event_naming_the_field() -> None:
    async def go() -> None:
        h = Harness()
        h.event("pods", "ADDED", make_pod("bad").req(cpu="lots").obj())
        await h.drain()
        assert ("FailedScheduling", "bad") in h.api.events()
        msg = h.api.of("POST", "/events")[0][1]["note"]
        assert "spec.containers[0].resources.requests.cpu" in msg and "lots" in msg
        assert not h.core.queue.contains("default/bad")

    _run(go())


def test_per_node_verdicts_are_logged_at_debug_and_a_bound_pod_logs_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from structlog.testing import capture_logs

    monkeypatch.setattr("scheduler.logging._verbosity", 2)  # pod_unschedulable is V(2)

    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=9).obj())
        h.event("nodes", "ADDED", make_node("n2").taint("dedicated", "x").obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        r = h.core.schedule_one()
        assert r is not None
        with capture_logs() as logs:
            h.s._observe(r, 0.001)
        events = {(e["event"], e.get("node")) for e in logs}
        assert ("pod_unschedulable", None) in events
        per_node = {e["node"]: e for e in logs if e["event"] == "node_filtered"}
        assert per_node["n1"]["plugin"] == "NodeResourcesFit"
        assert per_node["n1"]["reasons"] == ["Insufficient cpu"]
        assert per_node["n1"]["log_level"] == "debug"
        assert per_node["n2"]["plugin"] == "TaintToleration"
        # A pod that fits logs no scheduling_error (the old else paired with the wrong if).
        h.event("pods", "ADDED", make_pod("small").req(cpu="100m").obj())
        ok = h.core.schedule_one()
        assert ok is not None and ok.outcome == "assumed"
        with capture_logs() as logs:
            h.s._observe(ok, 0.001)
        assert [e["event"] for e in logs] == ["pod_assumed"]
        await h.drain()

    _run(go())


@pytest.mark.parametrize(
    ("verbosity", "logged"),
    [
        pytest.param(0, [], id="-v 0: kube-scheduler's V(2) bind and no-fit lines are not written"),
        pytest.param(2, ["pod_bound", "pod_unschedulable"], id="-v 2: both written"),
    ],
)
def test_the_per_attempt_lines_are_v2_as_kube_scheduler_s(
    monkeypatch: pytest.MonkeyPatch, verbosity: int, logged: list[str]
) -> None:
    from structlog.testing import capture_logs

    monkeypatch.setattr("scheduler.logging._verbosity", verbosity)

    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=9).obj())
        h.event("pods", "ADDED", make_pod("fits").req(cpu="100m").obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        with capture_logs() as logs:
            for _ in range(2):
                r = h.core.schedule_one()
                assert r is not None
                h.s._observe(r, 0.001)
            await h.drain()
        assert h.binds() == [("default/fits", "n1")]
        names = [e["event"] for e in logs if e["log_level"] == "info"]
        assert sorted(names) == logged

    _run(go())


def test_a_binding_outlasts_an_api_server_restart_and_gives_up_only_after_its_budget() -> None:
    async def go() -> None:
        h = Harness()
        h.api.fail("POST", "/binding", *([503] * 8))  # eight refusals, then it answers
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("p").req(cpu="1").obj())
        h.core.schedule_one()
        await h.drain()
        assert len(h.binds()) == 9 and h.core.cache.is_assumed("default/p")
        assert h.core.queue.nominator.nominated_node("default/p") is None

        h2 = Harness()
        h2.live.binder.retry_seconds = 0.0  # no budget: the first refusal is final
        h2.api.fail("POST", "/binding", 503)
        h2.event("nodes", "ADDED", make_node("n1").obj())
        h2.event("pods", "ADDED", make_pod("q").req(cpu="1").obj())
        h2.core.schedule_one()
        await h2.drain()
        assert len(h2.binds()) == 1 and h2.core.cache.get_pod("default/q") is None

    _run(go())


def test_the_pod_scheduled_condition_observes_the_generation_and_keeps_its_transition() -> None:
    """PodObservedGenerationTracking (GA in 1.35): observedGeneration is the generation the
    scheduler judged. As upstream's UpdatePodCondition, writing a condition that is already
    False leaves lastTransitionTime to the server (out of the merge patch)."""

    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        big = make_pod("big").req(cpu="2").obj()
        big["metadata"]["generation"] = 3
        h.event("pods", "ADDED", big)
        h.core.schedule_one()
        await h.drain()
        (first,) = h.status_patches("default/big")
        cond = first["status"]["conditions"][0]
        assert cond["observedGeneration"] == 3 and "lastTransitionTime" in cond
        # The watch brings our condition back; the pod is changed (generation 4) and fails
        # again, judged by a scheduler that remembers nothing of its first write.
        big["metadata"]["generation"] = 4
        big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        big["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
        h.core.recorder.forget("default/big")  # a restarted scheduler remembers nothing
        h.event("pods", "MODIFIED", big)
        h.core.queue.activate(["default/big"])
        h.core.schedule_one()
        await h.drain()
        second = h.status_patches("default/big")[-1]["status"]["conditions"][0]
        assert second["observedGeneration"] == 4
        assert "lastTransitionTime" not in second, second

    _run(go())


def test_a_victim_already_marked_keeps_its_disruption_transition_time() -> None:
    """As upstream's UpdatePodCondition: a DisruptionTarget that is already True (an
    earlier preemption whose DELETE did not go through, or another disruption) keeps its
    lastTransitionTime: the merge patch leaves it out; a fresh one carries it."""
    fresh = make_pod("v").node("n1").info()
    by = make_pod("high").scheduler("second").info()
    cond = disruption_patch(fresh, by)["status"]["conditions"][0]
    assert (cond["type"], cond["status"]) == ("DisruptionTarget", "True")
    assert "lastTransitionTime" in cond
    marked = make_pod("v").node("n1").condition("DisruptionTarget", "True", "PreemptionByScheduler")
    again = disruption_patch(marked.info(), by)["status"]["conditions"][0]
    assert "lastTransitionTime" not in again
    assert again["reason"] == "PreemptionByScheduler" and again["message"] == cond["message"]
    # The message names the preemptor's scheduler (profile), as upstream's.
    assert cond["message"] == "second: preempting to accommodate a higher priority pod"


def test_upstream_cycle_metrics_are_recorded() -> None:
    async def go() -> None:
        h = Harness()
        h.core._sampler.seed(0)
        reg = h.s.metrics.registry
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("nodes", "ADDED", make_node("n2").obj())
        for i in range(12):  # enough cycles for a sampled one (10%)
            h.event("pods", "ADDED", make_pod(f"p{i}").req(cpu="100m").obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="64").obj())
        while h.core.schedule_one() is not None:
            pass
        await asyncio.sleep(0)  # the binding tasks start and wait on their API call
        assert reg.get_sample_value("scheduler_goroutines", {"operation": "binding"}) == 12
        await h.drain()
        h.s.refresh_gauges()  # what the metrics server does before each scrape

        def sample(name: str, **labels: str) -> float:
            return reg.get_sample_value(name, labels) or 0.0

        assert sample("scheduler_scheduling_algorithm_duration_seconds_count") == 13
        prof = {"profile": "py-scheduler"}
        assert (
            sample(
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point="Score",
                status="Success",
                **prof,
            )
            == 12
        )
        # As upstream: PreEnqueue as each pod enters the queue, PreFilter on its own, and
        # Filter over the nodes checked, "Success" whether or not a node fits.
        for point in ("PreEnqueue", "PreFilter", "Filter"):
            count = sample(
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point=point,
                status="Success",
                **prof,
            )
            assert count == 13, point
        assert not sample(
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="Filter",
            status="Unschedulable",
            **prof,
        )
        assert sample("scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 12
        assert sample("scheduler_unschedulable_pods", plugin="NodeResourcesFit", **prof) == 1
        assert sample("scheduler_pending_pods", queue="unschedulable") == 1
        assert sample("scheduler_pending_pods", queue="active") == 0
        # The 12 bindings went through, but no watch has confirmed them: still assumed.
        assert sample("scheduler_cache_size", type="nodes") == 2
        assert sample("scheduler_cache_size", type="pods") == 12
        assert sample("scheduler_cache_size", type="assumed_pods") == 12
        h.event("pods", "MODIFIED", make_pod("p0").req(cpu="100m").node("n1").obj())
        h.s.refresh_gauges()
        assert sample("scheduler_cache_size", type="assumed_pods") == 11
        assert sample("scheduler_pod_scheduled_after_flush_total") == 0
        # Every event handled is timed, labelled as upstream's ClusterEvents.
        handled = "scheduler_event_handling_duration_seconds_count"
        assert sample(handled, event="NodeAdd") == 2
        assert sample(handled, event="UnscheduledPodAdd") == 13
        assert sample(handled, event="AssignedPodAdd") == 1  # p0's binding seen by the watch
        assert sample("scheduler_goroutines", operation="binding") == 0  # all 12 done
        popped = reg.get_sample_value("scheduler_inflight_events", {"event": "PodPopped"})
        assert popped == 0.0  # set (None if not), and nobody in flight
        sampled = [
            s
            for m in reg.collect()
            if m.name == "scheduler_plugin_execution_duration_seconds"
            for s in m.samples
            if s.name.endswith("_count") and s.value
        ]
        assert sampled, "no sampled plugin durations in 13 cycles"
        filters = {s.labels["plugin"] for s in sampled if s.labels["extension_point"] == "Filter"}
        assert "NodeResourcesFit" in filters, sampled  # Filter plugins are timed one by one

        h.event("pods", "ADDED", make_pod("gated").gates("example.com/wait").obj())
        gated = sample(
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="PreEnqueue",
            status="UnschedulableAndUnresolvable",  # SchedulingGates' answer
            **prof,
        )
        assert gated == 1

    _run(go())


def test_entity_evaluation_and_hint_metrics_are_upstreams() -> None:
    """scheduler_queued_entities and _queue_incoming_entities_total (every entity a pod:
    no pod groups here), scheduler_plugin_evaluation_total and the queueing hints'
    durations."""

    async def go() -> None:
        h = Harness()
        reg = h.s.metrics.registry

        def sample(name: str, **labels: str) -> float:
            return reg.get_sample_value(name, labels) or 0.0

        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "unschedulable"
        h.s.refresh_gauges()
        assert sample("scheduler_queued_entities", queue="unschedulable", type="pod") == 1
        assert sample("scheduler_queued_entities", queue="active", type="pod") == 0
        incoming = "scheduler_queue_incoming_entities_total"
        assert sample(incoming, queue="active", event="PodAdd", type="pod") == 1
        assert (
            sample(incoming, queue="unschedulable", event="ScheduleAttemptFailure", type="pod") == 1
        )
        evaluated = "scheduler_plugin_evaluation_total"
        fit = {"plugin": "NodeResourcesFit", "profile": "py-scheduler"}
        assert sample(evaluated, extension_point="PreFilter", **fit) == 1
        assert sample(evaluated, extension_point="Filter", **fit) == 1  # one node, rejected
        assert sample(evaluated, extension_point="Score", **fit) == 0  # nothing to score
        # A node added: NodeResourcesFit's hint for "big" runs, says Queue, and is timed
        # (the timings reach the histogram before a scrape).
        h.event("nodes", "ADDED", make_node("n2").alloc(cpu="4", memory="8Gi", pods=10).obj())
        h.s.refresh_gauges()
        hinted = sample(
            "scheduler_queueing_hint_execution_duration_seconds_count",
            plugin="NodeResourcesFit",
            event="NodeAdd",
            hint="Queue",
        )
        assert hinted == 1
        assert h.core.queue.where("default/big") in ("active", "backoff")

        # client-go's informer metrics, as kube-scheduler serves them (named after us).
        def informer(metric: str, **labels: str) -> float | None:
            return reg.get_sample_value(metric, labels)

        latency = "informer_processing_latency_seconds_count"
        pods = {"name": "py-scheduler", "group": "", "version": "v1", "resource": "pods"}
        nodes = {**pods, "resource": "nodes"}
        assert (informer(latency, **pods), informer(latency, **nodes)) == (1, 2)
        slices = {**pods, "group": "resource.k8s.io", "resource": "resourceslices"}
        assert informer(latency, **slices) == 0  # served, no event yet
        h.live.informers["pods"].resource_version = "98765432109876543210"
        h.live.informers["nodes"].resource_version = "not-a-number"
        h.s.refresh_gauges()
        assert informer("informer_store_resource_version", **pods) == 432109876543210
        assert informer("informer_store_resource_version", **nodes) is None

    _run(go())


def test_a_pod_bound_after_the_left_over_flush_is_counted() -> None:
    """scheduler_pod_scheduled_after_flush_total: the pod waited out the 5 minutes in the
    unschedulable pods (no hint moved it), was flushed, and then bound."""

    async def go() -> None:
        h = Harness()
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="1Gi", pods=10).obj())
        h.event("pods", "ADDED", make_pod("big").req(cpu="2").obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome != "assumed"
        h.core.clock.step(301)  # type: ignore[attr-defined]
        h.core.flush()
        assert h.core.queue.get("default/big").was_flushed  # type: ignore[union-attr]
        h.event("nodes", "ADDED", make_node("n2").alloc(cpu="4", memory="8Gi", pods=10).obj())
        while h.core.schedule_one() is not None:
            pass
        await h.drain()
        reg = h.s.metrics.registry
        assert reg.get_sample_value("scheduler_pod_scheduled_after_flush_total") == 1

    _run(go())


def test_selector_objects_reach_system_default_spreading_through_their_informers() -> None:
    """Services and workload controllers are watched (their LIST items carry no kind), fed
    to the core's default-selector store, and forgotten when deleted."""

    async def go() -> None:
        h = Harness()
        rs = {
            "metadata": {"name": "web-5d9c", "namespace": "default", "uid": "rs-uid"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }
        svc = {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"tier": "front"}},
        }
        h.event("replicasets", "ADDED", rs)
        h.event("services", "ADDED", svc)
        store = h.core.selector_objects
        assert store.controllers[("ReplicaSet", "default", "web-5d9c")].uid == "rs-uid"
        assert store.services["default"]["web"].selector == (("tier", "front"),)
        selector = store.default_selector(
            "default", {"app": "web", "tier": "front"}, ("ReplicaSet", "rs-uid")
        )
        assert selector is not None
        assert dict(selector.match_labels) == {"tier": "front"}  # the Service's map
        assert [(r.key, r.operator, set(r.values)) for r in selector.match_expressions] == [
            ("app", "In", {"web"})  # the ReplicaSet's matchLabels, as requirements
        ]
        h.event("replicasets", "DELETED", rs)
        h.event("services", "DELETED", svc)
        assert not store.controllers and not store.services
        for kind in ("replicationcontrollers", "statefulsets"):
            assert kind in h.live.informers

    _run(go())


def test_settle_heap_freezes_what_the_first_listing_left() -> None:
    """After the first listing the cache's records move to the collector's permanent
    generation; a record dropped later is still freed by reference counting."""
    import gc
    import weakref

    from scheduler.kube.live import settle_heap

    class Record:  # stands for a cached record (those have slots, hence no weakref)
        pass

    rec = Record()
    gone = weakref.ref(rec)
    gc.disable()  # as `py-scheduler run` starts: settle_heap turns the collector back on
    try:
        settle_heap()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        del rec
        assert gone() is None
    finally:
        gc.enable()
        gc.unfreeze()


def test_run_starts_with_the_collector_off_and_turns_it_on_whatever_the_outcome(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`py-scheduler run` switches the collector off for the start-up (the imports, the
    first listing); a run that ends, here at once on a bad configuration, switches it on."""
    import gc

    from scheduler import cli

    seen: list[bool] = []
    real = cli.load_config

    def load(path: str | None) -> object:
        seen.append(gc.isenabled())
        return real(path)

    monkeypatch.setattr(cli, "load_config", load)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n")
    assert gc.isenabled()
    assert cli.main(["run", "--config", str(bad)]) == 2
    assert seen == [False]
    assert gc.isenabled()


class _Prepare:
    """A PreBind plugin: pods labelled prep=skip need nothing (pre-flight SKIP), prep=deny
    are rejected; the others are prepared (noted in ``done``)."""

    name = "Prepare"
    done: ClassVar[list[str]] = []

    def __init__(self, args: dict[str, Any]) -> None:
        pass

    def pre_bind_pre_flight(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS, Code, Status

        return Status(Code.SKIP) if pod.labels.get("prep") == "skip" else SUCCESS

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS, Status

        if pod.labels.get("prep") == "deny":
            return Status.unschedulable("cannot prepare")
        _Prepare.done.append(pod.name)
        return SUCCESS


def test_pre_bind_sets_the_nomination_first_then_binds_and_a_rejection_sends_no_binding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _Prepare.done = []
    config = _plugin_config(monkeypatch, _Prepare, "preBind")

    async def go() -> None:
        h = Harness(**config)
        h.event("nodes", "ADDED", make_node("n1").obj())
        for name, how in (("a", ""), ("b", "skip"), ("c", "deny")):
            pod = make_pod(name).req(cpu="100m")
            h.event("pods", "ADDED", (pod.label("prep", how) if how else pod).obj())
        while h.core.schedule_one() is not None:
            pass
        await h.drain()
        assert sorted(h.binds()) == [("default/a", "n1"), ("default/b", "n1")]
        assert _Prepare.done == ["a"]
        # "a": the nomination is written before its Binding; "b" had nothing to prepare.
        order = [
            (m, p.rsplit("/", 1)[-1])
            for m, p, _ in h.api.calls
            if "/pods/a/" in p and m in ("PATCH", "POST")
        ]
        assert order == [("PATCH", "status"), ("POST", "binding")], order
        assert h.status_patches("default/a")[0] == {"status": {"nominatedNodeName": "n1"}}
        assert h.status_patches("default/b") == []
        # "c": nominated, rejected at PreBind: no Binding, forgotten, PodScheduled=False.
        assert h.core.cache.get_pod("default/c") is None
        last = h.status_patches("default/c")[-1]["status"]
        assert last["conditions"][0]["reason"] == "Unschedulable"
        assert last["conditions"][0]["message"] == "cannot prepare"
        assert last["nominatedNodeName"] is None
        # Tried again and turned down with the same message: the nomination written before
        # PreBind is cleared again (the recorder forgot what it wrote last).
        before = len(h.status_patches("default/c"))
        h.core.queue.activate(["default/c"])
        result = h.core.schedule_one()
        assert result is not None and result.outcome == "assumed"
        await h.drain()
        again = h.status_patches("default/c")[before:]
        assert [p["status"].get("nominatedNodeName", "-") for p in again] == ["n1", None]
        # Upstream's extension point durations, by status.
        reg = h.s.metrics.registry

        def count(point: str, status: str) -> float:
            labels = {"extension_point": point, "status": status, "profile": "py-scheduler"}
            name = "scheduler_framework_extension_point_duration_seconds_count"
            return reg.get_sample_value(name, labels) or 0.0

        assert count("PreBindPreFlight", "Success") == 3  # a, c, c again
        assert count("PreBindPreFlight", "Skip") == 1  # b
        assert count("PreBind", "Success") == 2  # a; b (its plugin skipped)
        assert count("PreBind", "Unschedulable") == 2  # c twice

    _run(go())


class _Gate:
    """A Permit plugin: pods labelled gate=wait wait 10 s; the others pass."""

    name = "Gate"

    def __init__(self, args: dict[str, Any], handle: Any) -> None:
        self.handle = handle

    def permit(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS, Code, Status

        if pod.labels.get("gate") == "wait":
            return Status(Code.WAIT, ("hold on",)), 10
        return SUCCESS, 0


def test_a_pod_waiting_at_permit_is_nominated_then_bound_once_allowed_or_left_unbound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _plugin_config(monkeypatch, _Gate, "permit")

    async def go() -> None:
        h = Harness(**config)
        h.event("nodes", "ADDED", make_node("n1").obj())
        for name, how in (("a", "wait"), ("b", ""), ("c", "wait")):
            pod = make_pod(name).req(cpu="100m")
            h.event("pods", "ADDED", (pod.label("gate", how) if how else pod).obj())
        while h.core.schedule_one() is not None:
            pass
        for _ in range(50):  # the bindings run up to their waits (no drain: a and c wait)
            await asyncio.sleep(0)
        assert h.binds() == [("default/b", "n1")]
        # Both waiting pods are nominated to their node while they wait (WillWaitOnPermit).
        for key in ("default/a", "default/c"):
            assert h.status_patches(key) == [{"status": {"nominatedNodeName": "n1"}}]
        waiting = {wp.pod.name: wp for wp in h.core.framework.waiting_pods}
        assert sorted(waiting) == ["a", "c"]
        dump = h.live.dump()  # the SIGUSR2 cache dump lists them
        assert dump["waiting"] == {"default/a": ["Gate"], "default/c": ["Gate"]}
        assert {"default/a", "default/c"} <= set(dump["assumed"])  # b: bound, unconfirmed
        waiting["a"].allow("Gate")
        h.s.clock.step(10)  # type: ignore[attr-defined]
        h.core.flush()  # c's 10 s are up
        await h.drain()
        assert sorted(h.binds()) == [("default/a", "n1"), ("default/b", "n1")]
        assert h.core.cache.get_pod("default/c") is None
        last = h.status_patches("default/c")[-1]["status"]
        assert last["nominatedNodeName"] is None
        assert last["conditions"][0]["reason"] == "Unschedulable"
        assert last["conditions"][0]["message"] == (
            "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin Gate."
        )
        reg = h.s.metrics.registry
        name = "scheduler_permit_wait_duration_seconds_count"
        assert reg.get_sample_value(name, {"result": "Success"}) == 1
        assert reg.get_sample_value(name, {"result": "Unschedulable"}) == 1

    _run(go())


def test_the_binder_expires_a_wait_on_time() -> None:
    """The binder's own timer: once ``permit_timeout()`` seconds pass it calls ``expire``
    (the core rejects what timed out by its clock) and reports the rejection."""
    from scheduler.framework.waiting_pods import WaitingPods
    from scheduler.kube.binder import Binder
    from scheduler.plugins import SUCCESS
    from scheduler.schedule_one import BindingCycle

    waiting = WaitingPods()
    wp = waiting.add(make_pod("p").info(), {"Gate": 0.05}, now=0.0)
    expired: list[int] = []

    def expire() -> None:
        expired.append(waiting.expire(10.0))

    cycle = BindingCycle(
        pre_flight=lambda: SUCCESS,
        pre_bind=lambda: SUCCESS,
        waiting=wp,
        permit_timeout=lambda: 0.01,
        expire=expire,
    )
    binder = Binder(None, on_result=lambda *a: None, spawn=lambda c: None, metrics=None)  # type: ignore[arg-type]
    outcome = _run(binder._wait_on_permit(cycle))
    assert expired == [1]
    assert outcome.message() == "rejected due to timeout after waiting 0.05s at plugin Gate"


class _SlowPrep:
    """An async PreBind plugin: it awaits ``release`` for pods labelled slow=yes, and
    rejects pods labelled slow=deny once released."""

    name = "SlowPrep"
    release: ClassVar[asyncio.Event | None] = None

    def __init__(self, args: dict[str, Any]) -> None:
        pass

    async def pre_bind(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS, Status

        how = pod.labels.get("slow")
        if how and _SlowPrep.release is not None:
            await _SlowPrep.release.wait()
        if how == "deny":
            return Status.unschedulable("storage refused")
        if how == "boom":
            raise RuntimeError("storage API down")
        return SUCCESS


def test_an_async_pre_bind_waits_in_its_binding_task_while_other_pods_are_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _plugin_config(monkeypatch, _SlowPrep, "preBind")

    async def go() -> None:
        _SlowPrep.release = asyncio.Event()
        h = Harness(**config)
        assert h.core.framework.async_pre_bind
        h.event("nodes", "ADDED", make_node("n1").obj())
        for name, how in (("a", "yes"), ("d", "deny"), ("e", "boom")):
            h.event("pods", "ADDED", make_pod(name).req(cpu="100m").label("slow", how).obj())
        while h.core.schedule_one() is not None:
            pass
        for _ in range(20):
            await asyncio.sleep(0)
        # a, d and e wait in their PreBind; the loop goes on: a new pod is scheduled and bound.
        h.event("pods", "ADDED", make_pod("b").req(cpu="100m").obj())
        result = h.core.schedule_one()
        assert result is not None and result.outcome == "assumed"
        for _ in range(20):
            await asyncio.sleep(0)
        assert h.binds() == [("default/b", "n1")]
        _SlowPrep.release.set()
        await h.drain()
        assert sorted(h.binds()) == [("default/a", "n1"), ("default/b", "n1")]
        conditions = {
            key: h.status_patches(key)[-1]["status"]["conditions"][0]
            for key in ("default/d", "default/e")
        }
        assert (conditions["default/d"]["reason"], conditions["default/d"]["message"]) == (
            "Unschedulable",
            "storage refused",
        )
        assert conditions["default/e"]["reason"] == "SchedulerError"
        assert conditions["default/e"]["message"] == (
            "running PreBind plugin SlowPrep: PreBind plugin SlowPrep raised RuntimeError: "
            "storage API down"
        )
        reg = h.s.metrics.registry
        labels = {"extension_point": "PreBind", "status": "Success", "profile": "py-scheduler"}
        name = "scheduler_framework_extension_point_duration_seconds_count"
        assert reg.get_sample_value(name, labels) == 2  # a and b

    _run(go())


def test_a_preemption_cancels_an_async_pre_bind_instead_of_deleting_its_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upstream's PodInPreBind: the victim is still in its (async) PreBind, so it is not
    bound yet; the preemption cancels that PreBind, sends no DELETE and no DisruptionTarget,
    and the victim goes back to the queue after backoff while the preemptor takes its room."""
    config = _plugin_config(monkeypatch, _SlowPrep, "preBind")

    async def go() -> None:
        _SlowPrep.release = asyncio.Event()  # never set: "low" would wait for ever
        h = Harness(**config)
        h.event("nodes", "ADDED", make_node("n1").alloc(cpu="1", memory="8Gi", pods="10").obj())
        low = make_pod("low").req(cpu="1").priority(1).label("slow", "yes")
        h.event("pods", "ADDED", low.obj())
        result = h.core.schedule_one()
        assert result is not None and result.outcome == "assumed"
        for _ in range(20):
            await asyncio.sleep(0)
        assert list(h.core.framework.pods_in_pre_bind) == [result.pod.uid]
        h.event("pods", "ADDED", make_pod("high").req(cpu="1").priority(100).obj())
        pre = h.core.schedule_one()
        assert pre is not None and pre.outcome == "preempting"
        assert [v.name for v in pre.victims] == ["low"]
        await h.drain()
        assert h.deletes() == [] and h.binds() == []
        assert h.core.framework.pods_in_pre_bind == {}
        assert h.core.cache.get_pod("default/low") is None
        last = h.status_patches("default/low")[-1]["status"]["conditions"][0]
        assert (last["reason"], last["message"]) == (
            "SchedulerError",
            "preempted by DefaultPreemption",
        )
        assert [p.name for p in h.core.queue.pending_pods()["backoff"]] == ["low"]
        again = h.core.schedule_one()  # the preemptor, now that the room is free
        assert again is not None and again.pod.name == "high" and again.outcome == "assumed"
        await h.drain()
        assert h.binds() == [("default/high", "n1")]

    _run(go())


class _OwnBinder:
    """A Bind plugin that binds pods labelled own=yes itself, through the FrameworkHandle's
    client (the scheduler's API client), with an annotation in the Binding; own=deny is
    rejected; other pods go on to DefaultBinder."""

    name = "OwnBinder"

    def __init__(self, args: dict[str, Any], handle: Any) -> None:
        self.handle = handle

    async def bind(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler.plugins import SKIP, SUCCESS, ApiCallError, Status

        how = pod.labels.get("own")
        if how == "deny":
            return Status.unschedulable(f"{node_name} is not for {pod.name}")
        if how != "yes":
            return SKIP
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "annotations": {"bound-by": "OwnBinder"},
            },
            "target": {"kind": "Node", "name": node_name},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            await self.handle.client.request("POST", path, body=body)
        except ApiCallError as e:
            return Status.error(f"status {e.status}")
        return SUCCESS


def test_a_bind_plugin_binds_through_the_handle_client_before_default_binder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dataclasses
    import sys
    import types

    from scheduler.config import parse_config

    mod = types.ModuleType("ownbinder_test_plugin")
    mod.OwnBinder = _OwnBinder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ownbinder_test_plugin", mod)
    bind = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "OwnBinder"}, {"name": "DefaultBinder"}],
    }
    cfg = parse_config(
        {
            "pluginModules": {"OwnBinder": "ownbinder_test_plugin:OwnBinder"},
            "profiles": [{"plugins": {"bind": bind}}],
        },
        "sched.yaml",
    )
    config = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}

    async def go() -> None:
        h = Harness(**config)
        h.api.fail("POST", "/pods/broken/binding", 403)
        h.event("nodes", "ADDED", make_node("n1").obj())
        for name, how in (("mine", "yes"), ("plain", "no"), ("denied", "deny"), ("broken", "yes")):
            h.event("pods", "ADDED", make_pod(name).req(cpu="100m").label("own", how).obj())
        while h.core.schedule_one() is not None:
            pass
        await h.drain()
        bodies = {b["metadata"]["name"]: b for _, b in h.api.of("POST", "/binding")}
        # One Binding per pod at most: the plugin's (with its annotation) or DefaultBinder's.
        assert sorted(h.binds()) == [
            ("default/broken", "n1"),
            ("default/mine", "n1"),
            ("default/plain", "n1"),
        ]
        assert bodies["mine"]["metadata"]["annotations"] == {"bound-by": "OwnBinder"}
        assert "annotations" not in bodies["plain"]["metadata"]
        assert ("Scheduled", "mine") in h.api.events() and ("Scheduled", "plain") in h.api.events()
        # Both bound pods stay assumed until the watch confirms them.
        assert h.core.cache.get_pod("default/mine") is not None
        failed = {
            key: h.status_patches(key)[-1]["status"]["conditions"][0]
            for key in ("default/denied", "default/broken")
        }
        assert (failed["default/denied"]["reason"], failed["default/denied"]["message"]) == (
            "Unschedulable",
            "n1 is not for denied",
        )
        assert (failed["default/broken"]["reason"], failed["default/broken"]["message"]) == (
            "SchedulerError",
            "running Bind plugin OwnBinder: status 403",
        )
        for key in ("default/denied", "default/broken"):
            assert h.core.cache.get_pod(key) is None  # unreserved, retried after backoff
            assert h.core.queue.where(key) == "backoff"
        reg = h.s.metrics.registry
        labels = {"extension_point": "Bind", "status": "Success", "profile": "py-scheduler"}
        name = "scheduler_framework_extension_point_duration_seconds_count"
        assert reg.get_sample_value(name, labels) == 1  # mine (plain: Skip)

    _run(go())


class _Announce:
    """A Reserve plugin that records an event through its FrameworkHandle: Normal for pods
    labelled ``say=ok``, an invalid type for ``say=bad``."""

    name = "Announce"

    def __init__(self, args: dict[str, Any], handle: Any) -> None:
        self.handle = handle

    def reserve(self, state: Any, pod: PodInfo, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS

        kind = "Normal" if pod.labels.get("say") == "ok" else "Loud"
        self.handle.event_recorder.eventf(
            pod, None, kind, "Announced", "Scheduling", f"{pod.name} goes to {node_name}"
        )
        return SUCCESS

    def unreserve(self, state: Any, pod: PodInfo, node_name: str) -> None:
        return None


def test_a_plugin_records_events_through_its_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """``FrameworkHandle.event_recorder`` (upstream's ``EventRecorder()``): the scheduler's
    own recorder, so a plugin's event is an events.k8s.io/v1 Event reported by the
    scheduler; an invalid one is a ValueError naming the field, which the plugin guard turns
    into an error for that pod."""
    config = _plugin_config(monkeypatch, _Announce, "reserve")

    async def go() -> None:
        h = Harness(**config)
        h.event("nodes", "ADDED", make_node("n1").obj())
        h.event("pods", "ADDED", make_pod("good").label("say", "ok").obj())
        h.event("pods", "ADDED", make_pod("bad").label("say", "no").obj())
        while h.core.schedule_one() is not None:
            pass
        await h.drain()
        assert h.binds() == [("default/good", "n1")]
        (ev,) = [b for _, b in h.api.of("POST", "/events") if b["reason"] == "Announced"]
        assert (ev["type"], ev["action"], ev["note"]) == ("Normal", "Scheduling", "good goes to n1")
        assert ev["reportingController"] == "py-scheduler"
        assert (ev["regarding"]["name"], "related" in ev) == ("good", False)
        cond = h.status_patches("default/bad")[-1]["status"]["conditions"][0]
        assert cond["reason"] == "SchedulerError"
        assert "event_type: expected Normal or Warning, got 'Loud'" in cond["message"]

    _run(go())


def test_simulate_and_explain_handles_check_plugin_events_and_drop_them() -> None:
    from scheduler.framework.waiting_pods import FrameworkHandle, WaitingPods

    handle = FrameworkHandle(WaitingPods())
    pod = make_pod("p").info()
    handle.event_recorder.eventf(pod, None, "Warning", "Why", "Scheduling", "note")
    with pytest.raises(ValueError, match="reason: expected a non-empty string"):
        handle.event_recorder.eventf(pod, None, "Warning", "", "Scheduling", "note")
    with pytest.raises(ValueError, match="action: expected a non-empty string"):
        handle.event_recorder.eventf(pod, None, "Normal", "Why", "", "note")


def test_each_profile_tells_its_own_pods_events_and_counts_its_own_attempts() -> None:
    """Two profiles: an Event names the profile of the pod it is about as its
    reportingController (a victim's, its preemptor's profile), as upstream's recorder per
    profile; attempts are counted under the pod's profile; a malformed pod of the second
    profile is reported too."""

    async def go() -> None:
        h = Harness(
            scheduler_name="first",
            more_profiles=(SchedulerConfig(scheduler_name="second"),),
        )
        objs = {
            "n1": make_node("n1").alloc(cpu="2", memory="4Gi", pods=10).obj(),
            "low": make_pod("low").req(cpu="2").scheduler("first").obj(),
            "high": make_pod("high").req(cpu="2").priority(1000).scheduler("second").obj(),
            "bad": make_pod("bad").req(cpu="lots").scheduler("second").obj(),
            "theirs": make_pod("theirs").req(cpu="lots").scheduler("other").obj(),
        }
        h.event("nodes", "ADDED", objs["n1"])
        h.event("pods", "ADDED", objs["low"])
        first = h.core.schedule_one()
        assert first is not None and first.outcome == "assumed"
        await h.drain()
        h.event(
            "pods", "MODIFIED", {**objs["low"], "spec": {**objs["low"]["spec"], "nodeName": "n1"}}
        )
        for name in ("high", "bad", "theirs"):
            h.event("pods", "ADDED", objs[name])
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "preempting" and r.pod.name == "high"
        await h.drain()
        told = {
            (b["reason"], b["regarding"]["name"]): b["reportingController"]
            for _, b in h.api.of("POST", "/events")
        }
        assert told == {
            ("Scheduled", "low"): "first",
            ("FailedScheduling", "bad"): "second",
            ("Preempted", "low"): "second",
            ("FailedScheduling", "high"): "second",
        }
        # The loop counts each attempt (Scheduler._observe) under its pod's profile.
        h.s._observe(first, 0.01)
        h.s._observe(r, 0.01)
        reg = h.s.metrics.registry
        for profile, result in (("first", "scheduled"), ("second", "unschedulable")):
            labels = {"result": result, "profile": profile}
            assert reg.get_sample_value("scheduler_schedule_attempts_total", labels) == 1.0

    _run(go())


class _Neighbour:
    """A Reserve plugin that records an event about the pod with each pod already on its
    node as the related object."""

    name = "Neighbour"

    def __init__(self, args: dict[str, Any], handle: Any) -> None:
        self.handle = handle

    def reserve(self, state: Any, pod: PodInfo, node_name: str) -> Any:
        from scheduler.plugins import SUCCESS

        for ni in self.handle.node_infos():
            for other in ni.pods.values():
                if ni.name == node_name and other.key != pod.key:
                    self.handle.event_recorder.eventf(
                        pod, other, "Normal", "Neighbour", "Scheduling", f"next to {other.name}"
                    )
        return SUCCESS

    def unreserve(self, state: Any, pod: PodInfo, node_name: str) -> None:
        return None


def test_a_plugin_s_events_name_its_own_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """With several profiles, a plugin's FrameworkHandle records for the plugin's profile
    (upstream's recorder per profile), whichever profile the pods it names belong to."""
    import dataclasses

    one = _plugin_config(monkeypatch, _Neighbour, "reserve")
    second = dataclasses.replace(SchedulerConfig(**one), scheduler_name="second")
    config = {**one, "scheduler_name": "first", "more_profiles": (second,)}

    async def go() -> None:
        h = Harness(**config)
        h.event("nodes", "ADDED", make_node("n1").obj())
        low = make_pod("low").node("n1").scheduler("first").obj()
        h.event("pods", "ADDED", low)
        h.event("pods", "ADDED", make_pod("new").scheduler("second").obj())
        r = h.core.schedule_one()
        assert r is not None and r.outcome == "assumed"
        await h.drain()
        (ev,) = [b for _, b in h.api.of("POST", "/events") if b["reason"] == "Neighbour"]
        assert (ev["regarding"]["name"], ev["related"]["name"]) == ("new", "low")
        assert ev["reportingController"] == "second"

    _run(go())


DRA_INFORMERS = {"resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules"}


def test_an_api_server_without_resource_k8s_io_v1_drops_the_dra_informers() -> None:
    """resource.k8s.io/v1 not served (404): the informers would never sync."""
    h = Harness()
    h.api.fail("GET", "/apis/resource.k8s.io/v1", 404)
    _run(h.live._drop_unserved_dra())
    assert not DRA_INFORMERS & set(h.live.informers)
    assert "pods" in h.live.informers


def test_a_kind_the_group_does_not_list_is_not_watched() -> None:
    """A 1.34-1.36 API server serves resource.k8s.io/v1 without DeviceTaintRules."""
    h = Harness()
    h.api.replies[("GET", "/apis/resource.k8s.io/v1")] = {
        "resources": [{"name": n} for n in ("deviceclasses", "resourceclaims", "resourceslices")]
    }
    _run(h.live._drop_unserved_dra())
    assert DRA_INFORMERS - set(h.live.informers) == {"devicetaintrules"}


@pytest.mark.parametrize("status", [None, 500])
def test_a_served_or_unanswered_dra_group_keeps_the_informers(status: int | None) -> None:
    h = Harness()
    if status:
        h.api.fail("GET", "/apis/resource.k8s.io/v1", status)
    _run(h.live._drop_unserved_dra())
    assert set(h.live.informers) >= DRA_INFORMERS
