"""benchmarks/extender_server.py: the benchmark's extender answers both forms of node list
alike, keeps the same nodes for every pod, and scores within extender/v1's 0..10."""

from __future__ import annotations

import zlib

import pytest

from tests.scripts import load_script

E = load_script("benchmarks/extender_server.py")
NAMES = [f"node-{i}" for i in range(40)]


def test_filter_by_names_and_by_objects_agree() -> None:
    by_names = E.answer("filter", {"Pod": {}, "NodeNames": NAMES}, 10)
    objects = {"items": [{"metadata": {"name": n}} for n in NAMES]}
    by_objects = E.answer("filter", {"Pod": {}, "Nodes": objects}, 10)
    kept = [n["metadata"]["name"] for n in by_objects["Nodes"]["items"]]
    assert by_names["NodeNames"] == kept
    assert by_names["FailedNodes"] == by_objects["FailedNodes"]
    rejected = [n for n in NAMES if zlib.crc32(n.encode()) % 10 == 0]
    assert rejected and sorted(by_names["FailedNodes"]) == sorted(rejected)
    assert set(kept) | set(rejected) == set(NAMES)
    assert E.answer("filter", {"NodeNames": NAMES}, 0)["NodeNames"] == NAMES


def test_prioritize_scores_every_node_within_range() -> None:
    scores = E.answer("prioritize", {"Pod": {"metadata": {"name": "p"}}, "NodeNames": NAMES}, 10)
    assert [s["Host"] for s in scores] == NAMES
    assert all(0 <= s["Score"] <= 10 for s in scores)
    assert len({s["Score"] for s in scores}) > 1


def test_an_unknown_verb() -> None:
    with pytest.raises(ValueError, match="unknown verb 'bind'"):
        E.answer("bind", {"NodeNames": []}, 10)
