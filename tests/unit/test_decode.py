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
