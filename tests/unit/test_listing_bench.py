"""benchmarks/listing_bench.py still measures what it says: its pages are pods the real
decoder reads (managedFields cut, every pod bound), chained by continue tokens, and a
measured listing holds every pod. No time or size is asserted."""

from __future__ import annotations

import orjson

from scheduler.decode import ObjectDecoder, loads_without_managed_fields
from tests.scripts import load_script

B = load_script("benchmarks/listing_bench.py")


def test_pages_are_bound_pods_in_the_api_servers_order_chained_by_continue_tokens() -> None:
    pages = B.pages(5, 2)
    assert len(pages) == 3
    conts = [orjson.loads(p)["metadata"].get("continue") for p in pages]
    assert conts == ["page-2", "page-4", None]
    raw = orjson.loads(pages[0])["items"][0]
    assert list(raw["metadata"])[-1] == "managedFields"  # the cut's precondition
    cut = loads_without_managed_fields(pages[0])["items"][0]
    assert "managedFields" not in cut["metadata"]
    pod = ObjectDecoder().pod(cut)
    assert pod.node_name == "n0000" and pod.scheduler_name == "py-scheduler"


def test_a_measured_listing_holds_every_pod() -> None:
    row = B.measure(300, 100)
    assert row["pods"] == 300 and row["page_size"] == 100
    assert 0 < row["kept_mib"] <= row["peak_mib"]
