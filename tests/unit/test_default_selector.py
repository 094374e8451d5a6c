"""System default spreading selector (upstream helper.DefaultSelector; its table tests as
guidance) and the parsers of the Service / workload controller records it reads."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from scheduler.clock import FakeClock
from scheduler.config import SchedulerConfig
from scheduler.framework.plugins.helper import default_selector
from scheduler.framework.plugins.podtopologyspread import PodTopologySpread
from scheduler.schedule_one import SchedulerCore
from scheduler.types import (
    LabelSelector,
    LabelSelectorRequirement,
    ParseError,
    SelectorObject,
    ServiceInfo,
    selector_object_from_dict,
    service_from_dict,
)
from tests.builders import make_pod
from tests.unit.fakes import RecordingBinder, RecordingRecorder


def svc(name: str, selector: dict[str, str] | None, ns: str = "ns") -> ServiceInfo:
    return ServiceInfo(ns, name, tuple(sorted(selector.items())) if selector else None)


def rs(
    name: str, labels: dict[str, str], kind: str = "ReplicaSet", ns: str = "ns"
) -> SelectorObject:
    sel = LabelSelector(tuple(sorted(labels.items())))
    return SelectorObject(kind, ns, name, selector=sel)


def rc(name: str, labels: dict[str, str], ns: str = "ns") -> SelectorObject:
    return SelectorObject(
        "ReplicationController", ns, name, set_selector=tuple(sorted(labels.items()))
    )


def In(key: str, value: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key, "In", frozenset((value,)))


POD_LABELS = {"app": "web", "tier": "front", "pod-template-hash": "abc"}


@pytest.mark.parametrize(
    ("services", "controllers", "controller", "want"),
    [
        pytest.param([], [], None, None, id="nothing selects the pod: no default constraint"),
        pytest.param(
            [svc("s", {"app": "web"})], [], None, LabelSelector((("app", "web"),)), id="one service"
        ),
        pytest.param(
            [svc("s", {"app": "db"})], [], None, None, id="a service that does not match is ignored"
        ),
        pytest.param(
            [svc("s", {"app": "web"}, ns="other")],
            [],
            None,
            None,
            id="services of other namespaces",
        ),
        pytest.param(
            [svc("s", None)], [], None, None, id="a selector-less service selects nothing"
        ),
        pytest.param(
            [svc("a", {"app": "web"}), svc("b", {"tier": "front"})],
            [],
            None,
            LabelSelector((("app", "web"), ("tier", "front"))),
            id="two services merge",
        ),
        pytest.param(
            [],
            [rs("r", {"app": "web", "pod-template-hash": "abc"})],
            ("ReplicaSet", "r"),
            LabelSelector((), (In("app", "web"), In("pod-template-hash", "abc"))),
            id="replicaset requirements",
        ),
        pytest.param(
            [],
            [rs("s", {"app": "web"}, kind="StatefulSet")],
            ("StatefulSet", "s"),
            LabelSelector((), (In("app", "web"),)),
            id="statefulset requirements",
        ),
        pytest.param(
            [svc("s", {"tier": "front"})],
            [rc("c", {"app": "web"})],
            ("ReplicationController", "c"),
            LabelSelector((("app", "web"), ("tier", "front"))),
            id="replication controller merges into the services' set",
        ),
        pytest.param(
            [svc("s", {"tier": "front"})],
            [rs("r", {"app": "web"})],
            ("ReplicaSet", "r"),
            LabelSelector((("tier", "front"),), (In("app", "web"),)),
            id="service and replicaset",
        ),
        pytest.param([], [], ("ReplicaSet", "gone"), None, id="an unknown controller adds nothing"),
        pytest.param(
            [],
            [rs("r", {"app": "web"})],
            ("StatefulSet", "r"),
            None,
            id="the controller is looked up by kind and name",
        ),
        pytest.param(
            [],
            [SelectorObject("ReplicaSet", "ns", "r", selector=None)],
            ("ReplicaSet", "r"),
            None,
            id="a selector-less replicaset adds nothing",
        ),
        pytest.param(
            [],
            [rs("r", {"app": "web"})],
            ("Job", "r"),
            None,
            id="other controller kinds add nothing",
        ),
    ],
)
def test_default_selector(
    services: list[ServiceInfo],
    controllers: list[SelectorObject],
    controller: tuple[str, str] | None,
    want: LabelSelector | None,
) -> None:
    index = {(c.kind, c.namespace, c.name): c for c in controllers}
    got = default_selector(
        "ns", POD_LABELS, controller, services, lambda k, ns, n: index.get((k, ns, n))
    )
    assert got == want
    if got is not None:
        assert got.matches(POD_LABELS)  # the pod's own selectors always select it


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            {"metadata": {"name": "s", "namespace": "a"}, "spec": {"selector": {"app": "x"}}},
            ServiceInfo("a", "s", (("app", "x"),)),
            id="service",
        ),
        pytest.param(
            {"metadata": {"name": "s"}, "spec": {"selector": {}}},
            ServiceInfo("default", "s", None),
            id="empty service selector is none",
        ),
        pytest.param(
            {"metadata": {"name": "s"}, "spec": {"type": "ExternalName"}},
            ServiceInfo("default", "s", None),
            id="service without selector",
        ),
    ],
)
def test_service_from_dict(obj: dict[str, Any], want: ServiceInfo) -> None:
    assert service_from_dict(obj) == want


def test_selector_objects_from_dict() -> None:
    got = selector_object_from_dict(
        {
            "kind": "ReplicaSet",
            "metadata": {"name": "r", "namespace": "a"},
            "spec": {
                "selector": {
                    "matchLabels": {"app": "x"},
                    "matchExpressions": [{"key": "t", "operator": "Exists"}],
                }
            },
        }
    )
    assert got == SelectorObject(
        "ReplicaSet",
        "a",
        "r",
        selector=LabelSelector(
            (("app", "x"),), (LabelSelectorRequirement("t", "Exists", frozenset()),)
        ),
    )
    rc_obj = {
        "kind": "ReplicationController",
        "metadata": {"name": "c"},
        "spec": {"selector": {"a": "b"}},
    }
    assert selector_object_from_dict(rc_obj) == SelectorObject(
        "ReplicationController", "default", "c", set_selector=(("a", "b"),)
    )
    ss = {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {}}
    assert selector_object_from_dict(ss) == SelectorObject("StatefulSet", "default", "s")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param({"kind": "Deployment", "metadata": {"name": "d"}}, "kind", id="wrong kind"),
        pytest.param(
            {"kind": "ReplicaSet", "metadata": {}},
            "ReplicaSet default/<unnamed>: metadata.name",
            id="no name",
        ),
        pytest.param(
            {
                "kind": "ReplicationController",
                "metadata": {"name": "c"},
                "spec": {"selector": {"a": 1}},
            },
            "ReplicationController default/c: spec.selector.a",
            id="rc selector value not a string",
        ),
        pytest.param(
            {
                "kind": "StatefulSet",
                "metadata": {"name": "s"},
                "spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Bad"}]}},
            },
            "StatefulSet default/s: spec.selector.matchExpressions[0].operator",
            id="bad operator",
        ),
    ],
)
def test_selector_object_errors_name_object_and_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        selector_object_from_dict(obj)


def test_service_errors_name_object_and_field() -> None:
    with pytest.raises(ParseError, match=re.escape("Service ns/s: spec.selector")):
        service_from_dict(
            {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": ["a"]}}
        )


def _core(upstream: bool) -> SchedulerCore:
    return SchedulerCore(
        SchedulerConfig(),
        FakeClock(),
        RecordingBinder(),
        RecordingRecorder(),
        upstream_default_selector=upstream,
    )


def _spread(core: SchedulerCore) -> PodTopologySpread:
    (pts,) = [p for p in core.framework.pre_score_plugins if isinstance(p, PodTopologySpread)]
    return pts


OWNED = replace(make_pod("p").label("app", "web").info(), owner_kind_uid=("ReplicaSet", "uid-r"))


def test_core_entry_points_feed_the_default_selector_and_requeue_nothing() -> None:
    core = _core(upstream=True)
    pts = _spread(core)
    parked = make_pod("parked").info()
    core.queue.add(parked)
    before = core.queue.counts()
    assert pts._constraints(OWNED, "ScheduleAnyway") == ()  # the ReplicaSet is not known yet
    rs_obj = SelectorObject(
        "ReplicaSet", "default", "r", LabelSelector((("app", "web"),)), uid="uid-r"
    )
    core.on_selector_object_set("ReplicaSet", rs_obj)
    got = pts._constraints(OWNED, "ScheduleAnyway")
    assert [(c.topology_key, c.max_skew) for c in got] == [
        ("kubernetes.io/hostname", 3),
        ("topology.kubernetes.io/zone", 5),
    ]
    assert {c.selector for c in got} == {
        LabelSelector((), (LabelSelectorRequirement("app", "In", frozenset({"web"})),))
    }
    core.on_selector_object_set("Service", ServiceInfo("default", "s", (("app", "web"),)))
    assert pts._constraints(OWNED, "ScheduleAnyway")[0].selector == LabelSelector(
        (("app", "web"),), (LabelSelectorRequirement("app", "In", frozenset({"web"})),)
    )
    core.on_selector_object_delete("ReplicaSet", "default/r")
    core.on_selector_object_delete("Service", "default/s")
    assert pts._constraints(OWNED, "ScheduleAnyway") == ()
    assert core.queue.counts() == before  # PodTopologySpread registers pod/node events only


def test_the_core_keeps_the_owner_approximation_unless_asked() -> None:
    pts = _spread(_core(upstream=False))
    got = pts._constraints(OWNED, "ScheduleAnyway")
    assert {c.owner for c in got} == {("ReplicaSet", "uid-r")}


def test_the_core_rejects_a_record_of_another_kind() -> None:
    with pytest.raises(TypeError, match="ReplicaSet"):
        _core(upstream=True).on_selector_object_set("ReplicaSet", ServiceInfo("d", "s", None))
