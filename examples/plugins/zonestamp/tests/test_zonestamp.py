"""ZoneStamp through the configuration and the scheduler core, the binder's side played by
hand with a client that records its calls."""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from scheduler.clock import FakeClock  # noqa: E402
from scheduler.config import ConfigError, parse_config  # noqa: E402
from scheduler.plugins import ApiCallError, Code  # noqa: E402
from scheduler.schedule_one import BindingCycle, BindOutcome, SchedulerCore  # noqa: E402
from scheduler.types import node_from_dict, pod_from_dict  # noqa: E402


def config(args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    profile: dict[str, Any] = {
        "plugins": {
            "bind": {
                "disabled": [{"name": "DefaultBinder"}],
                "enabled": [{"name": "ZoneStamp"}, {"name": "DefaultBinder"}],
            }
        }
    }
    if args is not None:
        profile["pluginConfig"] = [{"name": "ZoneStamp", "args": dict(args)}]
    return {"pluginModules": {"ZoneStamp": "zonestamp:ZoneStamp"}, "profiles": [profile]}


def api_pod(name: str, namespace: str = "prod") -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"schedulerName": "py-scheduler", "containers": [container]},
    }


def api_node(name: str, zone: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


class Client:
    """The FrameworkHandle's client as the plugin sees it: records calls, fails on demand."""

    def __init__(self, fail: int = 0) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail = fail

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path, body))
        if self.fail:
            error = ApiCallError("the server is currently unable to handle the request")
            error.status = self.fail
            raise error
        return {}


class Ports:
    def __init__(self) -> None:
        self.cycles: dict[str, BindingCycle | None] = {}
        self.failures: list[tuple[str, str]] = []

    def bind(self, pod: Any, node_name: str, cycle: BindingCycle | None = None) -> None:
        self.cycles[pod.key] = cycle

    def scheduled(self, pod: Any, node_name: str) -> None: ...

    def failed(self, pod: Any, **kw: Any) -> None:
        self.failures.append((pod.key, kw["message"]))


def run(
    args: Mapping[str, Any] | None, pod: dict[str, Any], zone: str | None, client: Client
) -> tuple[SchedulerCore, Ports, Any]:
    cfg = parse_config(config(args), "sched.yaml")
    assert cfg.bind == ("ZoneStamp", "DefaultBinder")
    ports = Ports()
    core = SchedulerCore(cfg, FakeClock(), ports, ports, rng=random.Random(0), api_client=client)
    core.on_node_add(node_from_dict(api_node("n1", zone)))
    core.on_pod_add(pod_from_dict(pod))
    result = core.schedule_one()
    assert result is not None and result.outcome == "assumed"
    cycle = ports.cycles[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"]
    assert cycle is not None and cycle.bind is not None
    return core, ports, asyncio.run(cycle.bind())


@pytest.mark.parametrize(("zone", "stamp"), [("zone-a", "zone-a"), (None, "unknown")])
def test_a_pod_of_a_stamped_namespace_is_bound_with_its_zone_in_one_call(
    zone: str | None, stamp: str
) -> None:
    client = Client()
    _, _, st = run({"namespaces": ["prod"]}, api_pod("web"), zone, client)
    assert st.is_success() and st.plugin == "ZoneStamp"
    ((method, path, body),) = client.calls
    assert (method, path) == ("POST", "/api/v1/namespaces/prod/pods/web/binding")
    assert body["metadata"] == {
        "name": "web",
        "namespace": "prod",
        "uid": "uid-web",
        "annotations": {"example.com/zone": stamp},
    }
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_other_namespaces_are_left_to_default_binder() -> None:
    client = Client()
    _, _, st = run({"namespaces": ["prod"]}, api_pod("tool", "dev"), "zone-a", client)
    assert st.code is Code.SKIP and client.calls == []


def test_a_failed_call_fails_the_binding_and_the_pod_is_retried() -> None:
    client = Client(fail=503)
    core, ports, st = run({"annotation": "x.io/zone"}, api_pod("web"), "zone-a", client)
    assert st.code is Code.ERROR
    assert st.message().startswith("running Bind plugin ZoneStamp: Binding with x.io/zone: ")
    core.on_bind_result("prod/web", BindOutcome.PRE_BIND, st.message())
    assert core.cache.get_pod("prod/web") is None  # unreserved
    assert [p.name for p in core.queue.pending_pods()["backoff"]] == ["web"]
    assert ports.failures == [("prod/web", st.message())]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"namespaces": "prod"}, "namespaces: expected a list of names, got 'prod'"),
        ({"annotation": ""}, "annotation: expected an annotation key, got ''"),
        ({"zone": "a"}, "zone: unknown field (known: namespaces, annotation)"),
    ],
)
def test_bad_arguments_are_named(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(config(args), "sched.yaml")
    assert str(e.value) == (
        f"sched.yaml: profiles[0].pluginConfig[0].args: plugin ZoneStamp: {message}"
    )
