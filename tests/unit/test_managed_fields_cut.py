"""``loads_without_managed_fields``: a watch line or a LIST page decoded without each
object's managedFields, or with that object whole; never anything else."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decode import loads_json, loads_without_managed_fields

MANAGED = [
    {
        "manager": "kwok",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-27T01:38:45Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:status": {
                "f:conditions": {
                    'k:{"type":"Ready"}': {".": {}, "f:status": {}, "f:type": {}},
                },
                "f:containerStatuses": {},
                "f:phase": {},
            }
        },
        "subresource": "status",
    },
    {
        "manager": "bench",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-27T01:38:45Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:group": {}}},
            "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}},
        },
    },
]


def pod_event(managed: Any = MANAGED, *, after: dict[str, Any] | None = None) -> dict[str, Any]:
    """A MODIFIED event with the API server's field order (ObjectMeta's managedFields last)."""
    meta: dict[str, Any] = {
        "name": "tp-00000",
        "namespace": "bench",
        "uid": "75d21992-8661-4aad-8c8f-99630318ce5a",
        "resourceVersion": "225250",
        "creationTimestamp": "2026-11-27T01:38:45Z",
        "labels": {"group": "tp"},
        "annotations": {"note": '"managedFields":[ ]},"spec":'},
    }
    if managed is not None:
        meta["managedFields"] = managed
    meta.update(after or {})
    return {
        "type": "MODIFIED",
        "object": {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": meta,
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "c", "image": "x", "resources": {}}],
                "tolerations": [{"key": "a", "operator": "Exists"}],
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    }


def without_managed(event: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(event)
    out["object"]["metadata"].pop("managedFields", None)
    return out


def test_managed_fields_are_left_out_and_everything_else_kept() -> None:
    event = pod_event()
    line = orjson.dumps(event)
    got = loads_without_managed_fields(line)
    assert got == without_managed(event)
    assert "managedFields" not in got["object"]["metadata"]
    assert got["object"]["metadata"]["annotations"] == event["object"]["metadata"]["annotations"]


def test_a_node_event_too() -> None:
    event = {
        "type": "ADDED",
        "object": {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": "n1", "labels": {"a": "b"}, "managedFields": MANAGED},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4"}},
        },
    }
    assert loads_without_managed_fields(orjson.dumps(event)) == without_managed(event)


def test_an_empty_list_and_no_list_at_all() -> None:
    event = pod_event([])
    assert loads_without_managed_fields(orjson.dumps(event)) == without_managed(event)
    event = pod_event(None)
    assert loads_without_managed_fields(orjson.dumps(event)) == event


def test_a_field_after_the_list_means_a_whole_decode() -> None:
    # If ObjectMeta ever grows a field after managedFields, the cut could take it along:
    # such a line is decoded whole.
    for after in ({"finalizers": ["x"]}, {"extra": {"k": "v"}}, {"extra": "s"}):
        event = pod_event(after=after)
        assert loads_without_managed_fields(orjson.dumps(event)) == event


def test_a_bracket_in_the_list_means_a_whole_decode() -> None:
    managed = copy.deepcopy(MANAGED)
    managed[0]["fieldsV1"]["f:spec"] = {'k:{"name":"a]"}': {}}
    event = pod_event(managed)
    assert loads_without_managed_fields(orjson.dumps(event)) == event


def test_every_item_of_a_list_page_loses_its_list_and_only_it() -> None:
    bracketed = copy.deepcopy(MANAGED)
    bracketed[0]["fieldsV1"]["f:spec"] = {'k:{"name":"a]"}': {}}
    items = [
        pod_event()["object"],
        pod_event(None)["object"],  # none to cut
        pod_event(bracketed)["object"],  # kept whole
        pod_event([])["object"],
        pod_event(after={"extra": ["x"]})["object"],  # kept whole
        pod_event()["object"],
    ]
    page = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}
    page["items"] = items
    want = copy.deepcopy(page)
    for i in (0, 3, 5):
        del want["items"][i]["metadata"]["managedFields"]
    assert loads_without_managed_fields(orjson.dumps(page)) == want


def test_bookmarks_and_errors_are_decoded_as_they_are() -> None:
    for event in (
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}},
    ):
        line = orjson.dumps(event)
        assert loads_without_managed_fields(line) == loads_json(line)


_text = st.text(alphabet='ab[]{}",:\\ ', max_size=12) | st.sampled_from(
    ['"managedFields":[', ']},"spec":', ',"managedFields":[', "]", "["]
)
_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)


_meta_parts = st.tuples(
    st.dictionaries(_text, _json, max_size=3),
    st.none() | st.lists(st.dictionaries(_text, _json, max_size=3), max_size=3),
    st.dictionaries(_text, _json, max_size=2),
    _json,
)


def _object(parts: tuple[Any, Any, Any, Any]) -> tuple[dict[str, Any], bool]:
    """A Pod-like object from generated parts, and whether its list must be cut (the common
    layout: the list last in metadata but not first, no bracket inside it)."""
    before, managed, after, spec = parts
    meta = {k: v for k, v in before.items() if k != "managedFields"}
    if managed is not None:
        meta["managedFields"] = managed
    for k, v in after.items():
        if k != "managedFields":
            meta[k] = v
    text = orjson.dumps(managed)[1:-1] if managed is not None else b""
    plain = (  # (the API server writes name or generateName before it: never first)
        managed is not None
        and any(k != "managedFields" for k in before)
        and not any(k != "managedFields" for k in after)
        and b"[" not in text
        and b"]" not in text
    )
    return {"kind": "Pod", "metadata": meta, "spec": spec}, plain


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_meta_parts, min_size=1, max_size=3))
def test_each_object_comes_back_whole_or_without_managed_fields(
    parts: list[tuple[Any, Any, Any, Any]],
) -> None:
    made = [_object(p) for p in parts]
    if len(made) == 1:
        event: dict[str, Any] = {"type": "MODIFIED", "object": made[0][0]}
        got = [loads_without_managed_fields(orjson.dumps(event))["object"]]
    else:
        page = {"kind": "PodList", "items": [o for o, _ in made]}
        got = loads_without_managed_fields(orjson.dumps(page))["items"]
    assert len(got) == len(made)
    for item, (obj, plain) in zip(got, made, strict=True):
        cut = copy.deepcopy(obj)
        cut["metadata"].pop("managedFields", None)
        assert item in (obj, cut)
        if plain:
            assert item == cut  # the common layout is cut, not decoded whole
