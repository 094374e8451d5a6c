"""The informer's store and reflector against a scripted API (no network): client-go's
semantics of Replace (deletions during a gap), resourceVersion ordering, bookmarks, and
when a watch resumes versus when it relists."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.deltas import Added, Deleted, Delta, Updated
from scheduler.kube.errors import Unreachable, error_for_status
from scheduler.kube.informer import INITIAL_EVENTS_END, Informer, Resource, Store
from tests.unit.kube.fakekube import FakeKube

PODS = Resource("Pod", "/api/v1/pods", namespaced=True)


def obj(
    name: str, rv: str, *, uid: str = "", value: int = 0, ns: str = "default"
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid or f"uid-{name}",
            "resourceVersion": rv,
        },
        "value": value,
    }


def decode(raw: Mapping[str, Any]) -> tuple[str, int]:
    if raw.get("value") == -1:
        raise ValueError(f"pod {raw['metadata']['name']}: value: must not be -1")
    return raw["metadata"]["name"], int(raw["value"])


def store(errors: list[str] | None = None) -> Store[tuple[str, int]]:
    sink = [] if errors is None else errors
    return Store(
        namespaced=True,
        decode=decode,
        on_error=lambda raw, e: sink.append(str(e)),
        errors=(ValueError,),
    )


# ---------------------------------------------------------------------------- the store


def replace(s: Store[tuple[str, int]], items: list[dict[str, Any]]) -> list[Delta[Any]]:
    """A full listing in one piece."""
    listing = s.listing()
    for raw in items:
        listing.add(raw)
    return listing.commit()


def test_replace_emits_adds_updates_and_deletes_for_what_vanished_during_a_gap() -> None:
    s = store()
    replace(s, [obj("a", "1"), obj("b", "2"), obj("c", "3")])
    deltas = replace(s, [obj("a", "1"), obj("b", "9", value=5), obj("d", "10")])
    assert deltas == [
        Updated(("b", 0), ("b", 5)),
        Added(("d", 0)),
        Deleted(("c", 0), final_state_unknown=True),
    ]
    assert sorted(s.keys()) == ["default/a", "default/b", "default/d"]


def test_a_relisted_object_under_a_new_uid_is_a_delete_then_an_add() -> None:
    s = store()
    replace(s, [obj("a", "1")])
    assert replace(s, [obj("a", "5", uid="second", value=2)]) == [
        Deleted(("a", 0)),
        Added(("a", 2)),
    ]


@pytest.mark.parametrize(
    ("events", "expected", "final"),
    [
        pytest.param(
            [("ADDED", obj("a", "5")), ("MODIFIED", obj("a", "4", value=9))],
            [Added(("a", 0))],
            ("a", 0),
            id="an older resourceVersion never replaces a newer one",
        ),
        pytest.param(
            [("ADDED", obj("a", "5")), ("MODIFIED", obj("a", "5", value=9))],
            [Added(("a", 0))],
            ("a", 0),
            id="the same version again is not a change",
        ),
        pytest.param(
            [("ADDED", obj("a", "5")), ("MODIFIED", obj("a", "12", value=9))],
            [Added(("a", 0)), Updated(("a", 0), ("a", 9))],
            ("a", 9),
            id="a newer version is an update with old and new (numeric, not text, order)",
        ),
        pytest.param(
            [("ADDED", obj("a", "5")), ("DELETED", obj("a", "6", uid="older"))],
            [Added(("a", 0))],
            ("a", 0),
            id="the deletion of an older incarnation does not delete the current one",
        ),
        pytest.param(
            [("ADDED", obj("a", "5")), ("DELETED", obj("a", "6"))],
            [Added(("a", 0)), Deleted(("a", 0))],
            None,
            id="a deletion hands on the last known state",
        ),
        pytest.param(
            [("DELETED", obj("a", "6"))],
            [],
            None,
            id="the deletion of an unknown object is nothing",
        ),
    ],
)
def test_watch_events(
    events: list[tuple[str, dict[str, Any]]],
    expected: list[Delta[tuple[str, int]]],
    final: tuple[str, int] | None,
) -> None:
    s = store()
    out: list[Delta[tuple[str, int]]] = []
    for etype, raw in events:
        out.extend(s.apply(etype, raw))
    assert out == expected
    assert s.get("default/a") == final


def test_an_undecodable_version_is_reported_and_the_last_good_one_kept() -> None:
    errors: list[str] = []
    s = store(errors)
    s.apply("ADDED", obj("a", "1", value=3))
    assert s.apply("MODIFIED", obj("a", "2", value=-1)) == []
    assert errors == ["pod a: value: must not be -1"]
    assert s.get("default/a") == ("a", 3)
    # Later versions are compared with the bad one's version, never go back before it.
    assert s.apply("MODIFIED", obj("a", "1", value=4)) == []
    assert s.apply("MODIFIED", obj("a", "3", value=4)) == [Updated(("a", 3), ("a", 4))]


def test_an_object_never_decoded_is_tracked_but_hands_on_nothing() -> None:
    s = store([])
    assert s.apply("ADDED", obj("a", "1", value=-1)) == []
    assert "default/a" in s and s.get("default/a") is None
    assert replace(s, []) == []  # vanished, but nothing was ever handed on
    assert s.apply("MODIFIED", obj("b", "1", value=-1)) == []
    assert s.apply("MODIFIED", obj("b", "2", value=1)) == [Added(("b", 1))]


class _Obj(dict[str, Any]):
    """A raw object that can be watched for being let go (plain dicts take no weakref)."""


def test_a_listing_lets_each_raw_object_go_once_added_and_changes_the_store_only_at_commit() -> (
    None
):
    errors: list[str] = []
    s = store(errors)
    replace(s, [obj("a", "1"), obj("gone", "2")])
    page = [_Obj(obj("a", "1")), _Obj(obj("b", "3", value=4)), _Obj(obj("bad", "4", value=-1))]
    refs = [weakref.ref(raw) for raw in page]
    listing = s.listing()
    for raw in page:
        listing.add(raw)
    del page, raw
    gc.collect()
    # Unchanged and decoded objects are let go; an undecodable one is kept to be reported.
    assert [r() is None for r in refs] == [True, True, False]
    assert errors == [] and sorted(s.keys()) == ["default/a", "default/gone"]
    assert listing.commit() == [Added(("b", 4)), Deleted(("gone", 0), final_state_unknown=True)]
    assert errors == ["pod bad: value: must not be -1"]
    assert sorted(s.keys()) == ["default/a", "default/b", "default/bad"]
    gc.collect()
    assert refs[2]() is None
    with pytest.raises(RuntimeError, match="committed twice"):
        listing.commit()


def test_a_listing_that_names_an_object_twice_keeps_the_later_one() -> None:
    s = store()
    replace(s, [obj("a", "1")])
    listing = s.listing()
    listing.add(obj("a", "5", value=2))
    listing.add(obj("a", "1"))  # the held version: nothing to hand on
    assert listing.commit() == [] and s.get("default/a") == ("a", 0)
    listing = s.listing()
    listing.add(obj("a", "1"))
    listing.add(obj("a", "6", value=3))
    assert listing.commit() == [Updated(("a", 0), ("a", 3))]


# ---------------------------------------------------------------------------- the reflector


class Run:
    """An informer over FakeKube, with its deltas and decoding errors recorded. ``async
    with`` runs it until its first listing is handed on; ``start``/``stop`` without that."""

    def __init__(self, api: FakeKube, *, page_size: int = 500, watch_list: bool = False) -> None:
        self.api = api
        self.deltas: list[Delta[tuple[str, int]]] = []
        self.errors: list[str] = []
        self.informer: Informer[tuple[str, int]] = Informer(
            api,
            PODS,
            decode=decode,
            handler=self.deltas.append,
            on_error=lambda raw, e: self.errors.append(str(e)),
            loads=json.loads,
            page_size=page_size,
            backoff=(0.0, 0.0),
            watch_list=watch_list,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.informer.run())

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def __aenter__(self) -> Run:
        self.start()
        await asyncio.wait_for(self.informer.synced.wait(), 5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def until(self, cond: Any) -> None:
        for _ in range(1000):
            if cond():
                return
            await asyncio.sleep(0)
        raise AssertionError("condition not reached")


def listing(rv: str, *items: dict[str, Any], cont: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"metadata": meta, "items": list(items)}


def test_list_then_watch_from_the_lists_version_with_bookmarks() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [listing("100", obj("a", "90"))]
        async with Run(api) as r:
            assert r.deltas == [Added(("a", 0))]
            await r.until(lambda: api.watch_queries)
            q = api.watch_queries[0]
            assert q["resourceVersion"] == "100" and q["allowWatchBookmarks"] == "true"
            assert 300 <= q["timeoutSeconds"] <= 600
            api.push(PODS.path, "MODIFIED", obj("a", "101", value=1))
            api.push(PODS.path, "BOOKMARK", {"metadata": {"resourceVersion": "150"}})
            await r.until(lambda: r.informer.resource_version == "150")
            assert r.deltas[-1] == Updated(("a", 0), ("a", 1))
            # The server ends the stream (its timeout): resume from the bookmark, no relist.
            api.end_stream(PODS.path)
            await r.until(lambda: len(api.watch_queries) == 2)
            assert api.watch_queries[1]["resourceVersion"] == "150"
            assert len(api.list_queries) == 1 and r.informer.relists == 0

    asyncio.run(go())


def test_a_broken_connection_resumes_from_the_same_version_without_a_relist() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [listing("100", obj("a", "90"))]
        async with Run(api) as r:
            await r.until(lambda: api.watch_queries)
            api.push(PODS.path, "ADDED", obj("b", "105"))
            api.end_stream(PODS.path, Unreachable("connection reset"))
            await r.until(lambda: len(api.watch_queries) == 2)
            assert api.watch_queries[1]["resourceVersion"] == "105"
            assert r.informer.relists == 0

    asyncio.run(go())


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("event", id="410 as an ERROR event in the stream"),
        pytest.param("status", id="410 as the watch request's status"),
    ],
)
def test_an_expired_version_relists_and_delivers_deletions_made_during_the_gap(how: str) -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [
            listing("100", obj("a", "90"), obj("b", "91")),
            listing("300", obj("b", "91"), obj("c", "250")),
        ]
        async with Run(api) as r:
            await r.until(lambda: api.watch_queries)
            if how == "event":
                api.push(PODS.path, "ERROR", {"kind": "Status", "code": 410, "message": "too old"})
            else:
                api.end_stream(PODS.path, Unreachable("apiserver restarting"))
                api.fail("WATCH", PODS.path, 410)
            await r.until(lambda: r.informer.relists == 1)
            assert r.deltas[2:] == [Added(("c", 0)), Deleted(("a", 0), final_state_unknown=True)]
            await r.until(lambda: api.watch_queries[-1]["resourceVersion"] == "300")
            assert sorted(r.informer.store.keys()) == ["default/b", "default/c"]

    asyncio.run(go())


def test_paged_lists_follow_continue_tokens_and_restart_whole_when_one_expires() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [
            listing("100", obj("a", "1"), cont="t1"),
            listing("999", obj("b", "2")),  # later pages' versions do not count
        ]
        async with Run(api, page_size=1) as r:
            assert [q.get("continue") for q in api.list_queries] == [None, "t1"]
            assert api.list_loads == [json.loads, json.loads]  # pages decoded as watch lines
            assert r.informer.resource_version == "100"
            assert {d.new for d in r.deltas if isinstance(d, Added)} == {("a", 0), ("b", 0)}

        api = FakeKube()
        api.lists[PODS.path] = [
            listing("100", obj("a", "1"), cont="t1"),
            listing("200", obj("a", "1"), obj("b", "2")),
        ]
        api.failures[("GET", PODS.path)] = []
        original = api.request

        async def expiring(method: str, path: str, **kw: Any) -> dict[str, Any]:
            if (kw.get("query") or {}).get("continue"):
                raise error_for_status(410, "continue token expired")
            return await original(method, path, **kw)

        api.request = expiring  # type: ignore[method-assign]
        async with Run(api, page_size=1) as r:
            assert "limit" not in api.list_queries[-1]  # restarted in one page
            assert r.informer.resource_version == "200"
            assert sorted(r.informer.store.keys()) == ["default/a", "default/b"]

    asyncio.run(go())


def test_a_failing_handler_does_not_stop_the_informer() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [listing("100")]
        seen: list[Any] = []

        def handler(d: Any) -> None:
            seen.append(d)
            raise RuntimeError("bug")

        inf: Informer[tuple[str, int]] = Informer(
            api,
            PODS,
            decode=decode,
            handler=handler,
            on_error=lambda r, e: None,
            loads=json.loads,
            backoff=(0.0, 0.0),
            watch_list=False,
        )
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(inf.synced.wait(), 5)
        for _ in range(50):
            await asyncio.sleep(0)
        api.push(PODS.path, "ADDED", obj("a", "101"))
        api.push(PODS.path, "ADDED", obj("b", "102"))
        for _ in range(200):
            if len(seen) == 2:
                break
            await asyncio.sleep(0)
        assert len(seen) == 2 and not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())


def test_an_unexpected_error_in_the_stream_relists_instead_of_stopping() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [listing("100", obj("a", "90")), listing("200", obj("b", "150"))]
        async with Run(api) as r:
            await r.until(lambda: api.watch_queries)
            api.end_stream(PODS.path, RuntimeError("a bug"))
            await r.until(lambda: r.informer.relists == 1)
            assert r.task is not None and not r.task.done()
            assert sorted(r.informer.store.keys()) == ["default/b"]

    asyncio.run(go())


def test_a_listing_abandoned_half_way_changes_nothing_and_reports_nothing_twice() -> None:
    async def go() -> None:
        api = FakeKube()
        api.lists[PODS.path] = [
            listing("100", obj("a", "1"), obj("bad", "2", value=-1), cont="t1"),
            listing("100", obj("b", "3")),
        ]
        errors: list[str] = []
        deltas: list[Delta[tuple[str, int]]] = []
        inf: Informer[tuple[str, int]] = Informer(
            api,
            PODS,
            decode=decode,
            handler=deltas.append,
            on_error=lambda raw, e: errors.append(str(e)),
            loads=json.loads,
            page_size=2,
            backoff=(0.0, 0.0),
            watch_list=False,
        )
        original = api.request
        failed: list[str] = []

        async def failing_once(method: str, path: str, **kw: Any) -> dict[str, Any]:
            if (kw.get("query") or {}).get("continue") and not failed:
                failed.append("page 2")
                # The first page was read and decoded; the second fails (not a 410):
                # the informer starts the whole listing over after its backoff.
                assert len(inf.store) == 0 and deltas == [] and errors == []
                raise error_for_status(500, "etcd leader changed")
            return await original(method, path, **kw)

        api.request = failing_once  # type: ignore[method-assign]
        api.lists[PODS.path].insert(0, api.lists[PODS.path][0])  # the first page twice
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert failed == ["page 2"] and len(api.list_queries) == 3
        assert errors == ["pod bad: value: must not be -1"]  # once, from the whole listing
        assert deltas == [Added(("a", 0)), Added(("b", 0))]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())


# ---------------------------------------------------------------------------- watch lists


def end_of_initial_events(rv: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv, "annotations": {INITIAL_EVENTS_END: "true"}}}


async def turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_watch_list_streams_the_state_until_its_end_bookmark_then_goes_on_as_a_watch() -> None:
    async def go() -> None:
        api = FakeKube()
        default: Informer[Any] = Informer(
            api, PODS, decode=decode, handler=print, on_error=print, loads=json.loads
        )
        assert default.watch_list  # client-go's default in v1.37
        r = Run(api, watch_list=True)
        inf, deltas = r.informer, r.deltas
        r.start()
        api.push(PODS.path, "ADDED", obj("a", "90"))
        api.push(PODS.path, "ADDED", obj("b", "95"))
        # A bookmark without the annotation: the state is not complete yet.
        api.push(PODS.path, "BOOKMARK", {"metadata": {"resourceVersion": "99"}})
        await turns()
        assert not inf.synced.is_set() and len(inf.store) == 0 and deltas == []
        assert inf.resource_version == ""
        api.push(PODS.path, "BOOKMARK", end_of_initial_events("120"))
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert deltas == [Added(("a", 0)), Added(("b", 0))]
        assert inf.resource_version == "120" and api.list_queries == []
        (q,) = api.watch_queries
        assert q["sendInitialEvents"] == "true" and q["resourceVersionMatch"] == "NotOlderThan"
        assert q["allowWatchBookmarks"] == "true" and "resourceVersion" not in q
        # The same stream goes on as an ordinary watch.
        api.push(PODS.path, "MODIFIED", obj("a", "121", value=1))
        api.push(PODS.path, "DELETED", obj("b", "122"))
        await turns()
        assert deltas[2:] == [Updated(("a", 0), ("a", 1)), Deleted(("b", 0))]
        assert inf.resource_version == "122" and len(api.watch_queries) == 1
        # The server ends it (its timeout): an ordinary watch resumes from the last version.
        api.end_stream(PODS.path)
        await turns()
        assert len(api.watch_queries) == 2
        assert api.watch_queries[1]["resourceVersion"] == "122"
        assert "sendInitialEvents" not in api.watch_queries[1] and inf.relists == 0
        await r.stop()

    asyncio.run(go())


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("broken", id="the connection breaks"),
        pytest.param("ended", id="the server ends the stream"),
    ],
)
def test_a_watch_list_cut_before_its_end_starts_over_and_reports_nothing_twice(how: str) -> None:
    async def go() -> None:
        api = FakeKube()
        r = Run(api, watch_list=True)
        inf, deltas, errors = r.informer, r.deltas, r.errors
        r.start()
        api.push(PODS.path, "ADDED", obj("a", "90"))
        api.push(PODS.path, "ADDED", obj("bad", "91", value=-1))
        api.end_stream(PODS.path, Unreachable("connection reset") if how == "broken" else None)
        with capture_logs() as logs:
            await turns()
        # A warning, as a failed LIST: the state could not be got.
        assert [(e["event"], e["log_level"]) for e in logs] == [("list_failed", "warning")]
        assert not inf.synced.is_set() and deltas == [] and errors == []
        assert len(api.watch_queries) == 2  # started over at once...
        assert all(q["sendInitialEvents"] == "true" for q in api.watch_queries)
        for raw in (obj("a", "90"), obj("bad", "91", value=-1), obj("c", "97")):
            api.push(PODS.path, "ADDED", raw)  # ...from nothing
        api.push(PODS.path, "BOOKMARK", end_of_initial_events("100"))
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert deltas == [Added(("a", 0)), Added(("c", 0))]
        assert errors == ["pod bad: value: must not be -1"]  # once, from the whole state
        assert inf.relists == 0 and inf.resource_version == "100"
        await r.stop()

    asyncio.run(go())


def test_after_410_a_watch_list_replaces_the_store_with_the_deletions_of_the_gap() -> None:
    async def go() -> None:
        api = FakeKube()
        api.push(PODS.path, "ADDED", obj("a", "90"))
        api.push(PODS.path, "ADDED", obj("b", "91"))
        api.push(PODS.path, "BOOKMARK", end_of_initial_events("100"))
        async with Run(api, watch_list=True) as r:
            api.push(PODS.path, "ERROR", {"kind": "Status", "code": 410, "message": "too old"})
            # The state again, from the most recent version. A DELETED before the end (a
            # server may send one) takes the object out of the state being built.
            api.push(PODS.path, "ADDED", obj("b", "91"))
            api.push(PODS.path, "ADDED", obj("c", "250"))
            api.push(PODS.path, "ADDED", obj("d", "260"))
            api.push(PODS.path, "DELETED", obj("d", "270"))
            api.push(PODS.path, "BOOKMARK", end_of_initial_events("300"))
            await r.until(lambda: r.informer.relists == 1)
            assert r.deltas[2:] == [Added(("c", 0)), Deleted(("a", 0), final_state_unknown=True)]
            assert sorted(r.informer.store.keys()) == ["default/b", "default/c"]
            assert r.informer.resource_version == "300"
            assert [q.get("sendInitialEvents") for q in api.watch_queries] == ["true", "true"]
            assert api.list_queries == []

    asyncio.run(go())


@pytest.mark.parametrize("status", [422, 400])
def test_a_refused_watch_list_falls_back_to_a_paged_list_for_good(status: int) -> None:
    async def go() -> None:
        api = FakeKube()
        # What an API server with its WatchList feature off answers sendInitialEvents.
        api.fail("WATCH", PODS.path, status)
        api.lists[PODS.path] = [listing("100", obj("a", "90")), listing("200", obj("b", "150"))]
        async with Run(api, watch_list=True) as r:
            assert r.deltas == [Added(("a", 0))] and not r.informer.watch_list
            await r.until(lambda: len(api.watch_queries) == 2)
            assert api.watch_queries[0]["sendInitialEvents"] == "true"
            assert api.watch_queries[1]["resourceVersion"] == "100"
            # A later 410 lists again; it does not try the watch list again.
            api.push(PODS.path, "ERROR", {"kind": "Status", "code": 410, "message": "too old"})
            await r.until(lambda: r.informer.relists == 1)
            assert len(api.list_queries) == 2
            assert all("sendInitialEvents" not in q for q in api.watch_queries[1:])

    asyncio.run(go())
