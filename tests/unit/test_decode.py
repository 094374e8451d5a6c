"""The shared decoder: the document loader (JSON Lists, multi-document YAML, directories,
standard input, errors that name file, document and field) and ObjectDecoder's errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.decode import InputError, ObjectDecoder, load_documents
from scheduler.types import ParseError
from tests.builders import make_node, make_pod


def _objs() -> list[dict[str, Any]]:
    return [make_node("n1").obj(), make_pod("a").node("n1").obj(), make_pod("b").obj()]


def test_a_json_list_and_multi_document_yaml_give_the_same_documents(tmp_path: Path) -> None:
    objs = _objs()
    (tmp_path / "dump.json").write_text(json.dumps({"kind": "List", "items": objs}))
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(objs))
    j = load_documents([str(tmp_path / "dump.json")])
    y = load_documents([str(tmp_path / "dump.yaml")])
    assert [d.obj for d in j] == [d.obj for d in y]
    assert [d.where for d in j][1].endswith("dump.json: document 1: items[1]")
    assert [d.where for d in y][1].endswith("dump.yaml: document 2")


def test_a_typed_list_lends_its_kind_to_items_without_one(tmp_path: Path) -> None:
    pods = [make_pod("a").obj(), make_pod("b").obj()]
    for p in pods:
        del p["kind"]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}))
    assert [d.kind for d in load_documents([str(tmp_path / "pods.json")])] == ["Pod", "Pod"]


def test_a_directory_means_its_yaml_and_json_files_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(make_pod("b").obj()))
    (tmp_path / "a.json").write_text(json.dumps(make_pod("a").obj()))
    (tmp_path / "notes.txt").write_text("not a dump")
    docs = load_documents([str(tmp_path)])
    assert [d.name for d in docs] == ["default/a", "default/b"]


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.dumps({"kind": "List", "items": _objs()}).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    docs = load_documents(["-"])
    assert len(docs) == 3 and docs[0].where == "-: document 1: items[0]"


def test_progress_is_reported_with_object_counts(tmp_path: Path) -> None:
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump_all(_objs()))
    seen: list[tuple[str, int]] = []
    load_documents([str(tmp_path / "dump.yaml")], progress=lambda src, n: seen.append((src, n)))
    assert seen[-1] == (str(tmp_path / "dump.yaml"), 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            '{"kind": "List", "items": {"a": 1}}',
            "document 1: items: expected a list",
            id="items not a list",
        ),
        pytest.param(
            '{"kind": "List", "items": [{"metadata": {}}]}',
            "document 1: items[0]: kind: missing",
            id="an item without kind",
        ),
        pytest.param(
            '{"kind": "List", "items": [{"kind": "Pod"}, {"kind": 3}]}',
            "document 1: items[1]: kind: expected a string",
            id="an item whose kind is not a string",
        ),
        pytest.param(
            '{"kind": "List", "items": [{"kind": "Pod", "spec": []}]}',
            "document 1: items[0]: spec: expected a mapping, got list",
            id="an item whose spec is a list",
        ),
        pytest.param(
            '{"kind": "PodList", "items": [{"status": "x"}]}',
            "document 1: items[0]: status: expected a mapping, got str",
            id="a typed List's item whose status is a string",
        ),
        pytest.param(
            '{"kind": "List", "items": [{"kind": "Pod"}, []]}',
            "document 1: items[1]: expected a mapping, got list",
            id="an item that is not a mapping",
        ),
        pytest.param(
            "kind: Pod\nmetadata: [1\n", "document 1: not valid YAML at line", id="broken YAML"
        ),
    ],
)
def test_bad_input_names_file_document_and_field(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_documents([str(f)])
    assert str(e.value).startswith(f"{f}: ") and expected in str(e.value)


def test_an_empty_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no \.yaml, \.yml or \.json file"):
        load_documents([str(tmp_path)])


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(
            lambda o: o["spec"].update(tolerations={"a": 1}),
            "spec.tolerations",
            id="a map where a list is due",
        ),
        pytest.param(
            lambda o: o["spec"]["containers"][0].update(resources=[1]),
            "spec.containers[0].resources",
            id="a list where a map is due",
        ),
        pytest.param(lambda o: o.update(status=[]), "status", id="status not a map"),
    ],
)
def test_object_decoder_errors_name_the_object_and_the_field(mutate: Any, field: str) -> None:
    obj = make_pod("p").obj()
    mutate(obj)
    with pytest.raises(ParseError) as e:
        ObjectDecoder().pod(obj)
    assert "Pod default/p" in str(e.value) and field in str(e.value)


def test_pods_take_their_priority_from_the_classes_the_decoder_has_seen() -> None:
    d = ObjectDecoder()
    d.priority_class({"kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 1000})
    d.priority_class(
        {"kind": "PriorityClass", "metadata": {"name": "dflt"}, "value": 7, "globalDefault": True}
    )
    assert d.pod(make_pod("a").priority_class("hi").obj()).priority == 1000
    assert d.pod(make_pod("b").obj()).priority == 7
    d.forget_priority_class("dflt")
    assert d.pod(make_pod("c").obj()).priority == 0


# --------------------------------------------------------------------------- the YAML loader

_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _both(text: str) -> tuple[list[Any], list[Any]]:
    from scheduler.decode import _YAML_LOADER

    return list(yaml.load_all(text, Loader=_SAFE)), list(yaml.load_all(text, Loader=_YAML_LOADER))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(yaml.safe_dump_all(_objs()), id="a kubectl-like dump"),
        pytest.param(
            "a: yes\nb: 0777\nc: 1_000\nd: 1:30\ne: ~\nf: .inf\ng: 0x1F\nh: 'on'\ni: -.5e3\n",
            id="YAML 1.1 implicit scalars",
        ),
        pytest.param("t: 2026-01-01T00:00:00Z\nd: 2026-01-01\ns: '2026-01-01'\n", id="timestamps"),
        pytest.param("base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  y: 3\n", id="merge keys"),
        pytest.param("a: &x [1, 2]\nb: *x\nc: &s str\nd: *s\n", id="aliases"),
        pytest.param("? [1, 2]\n: v\n", id="unhashable key"),
        pytest.param("s: !!set {a, b}\nb: !!binary aGVsbG8=\n", id="other safe tags"),
        pytest.param("o: !!omap [a: 1, b: 2]\np: !!pairs [a: 1]\n", id="ordered maps and pairs"),
        pytest.param("a: 1\na: 2\nb: 3\n", id="duplicate keys: the last wins"),
        pytest.param("1: int key\ntrue: bool key\n~: null key\n3.5: float key\n", id="scalar keys"),
        pytest.param("=: value key\n", id="a value key"),
        pytest.param("!custom x: 1\n", id="an unknown tag"),
        pytest.param("---\n---\na: 1\n...\n---\n[]\n", id="empty documents"),
        pytest.param("a:\n" + "  - b:\n" * 1, id="nested"),
    ],
)
def test_the_fast_yaml_loader_builds_what_the_safe_loader_builds(text: str) -> None:
    try:
        want = list(yaml.load_all(text, Loader=_SAFE))
    except yaml.YAMLError as e:
        with pytest.raises(type(e)) as got:
            _both(text)
        assert str(got.value) == str(e)
        return
    safe, fast = _both(text)
    assert fast == want == safe
    assert [type(d) for d in fast] == [type(d) for d in want]
    assert repr(fast) == repr(want), "same types all the way down (True is not 1)"


def test_the_fast_yaml_loader_keeps_an_alias_the_same_object() -> None:
    (_, fast) = _both("a: &x {k: v}\nb: *x\n")
    doc = fast[0]
    assert doc["a"] is doc["b"]


def test_the_fast_yaml_loader_leaves_recursive_aliases_to_the_safe_loader() -> None:
    (_, fast) = _both("&a [1, *a]\n")
    doc = fast[0]
    assert doc[0] == 1 and doc[1] is doc


def test_the_fast_yaml_loader_builds_deep_documents() -> None:
    """Deeper than the fast constructor's recursion reaches: SafeConstructor builds it."""
    depth = 990  # libyaml's own limit is 1000; with the test's frames, past Python's
    text = "[" * depth + "]" * depth
    (_, fast) = _both(text)
    node = fast[0]
    for _ in range(depth - 1):
        node = node[0]
    assert node == []
