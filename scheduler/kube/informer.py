"""Informers: client-go's list-watch semantics for every kind the scheduler reads.

What it owns: for one resource, a reflector (the initial state, then WATCH from its
resourceVersion with bookmarks, re-watching from the last seen version when a stream ends or
breaks, and fetching the whole state again only when the version expired: 410 Gone) and a
store (key -> decoded record plus its uid and resourceVersion). What it does not own: what
the records mean. The store hands typed deltas to one handler (``scheduler.eventhandlers``),
which routes them to the cache and the queue; handlers never see the wire format.

The initial state comes as client-go's reflector gets it in v1.37 (its WatchListClient
feature, on by default since 1.35): a streaming watch list, ``WATCH ?sendInitialEvents=true
&resourceVersionMatch=NotOlderThan``, served from the API server's watch cache: an ADDED event
per object, then a BOOKMARK annotated ``k8s.io/initial-events-end`` carrying the version the
state is consistent at; the same stream then goes on as an ordinary watch. With
``watch_list=False``, or when the API server refuses it (its WatchList feature off: 422), it
is a paged, consistent LIST instead (``resourceVersion`` unset, 500 per page), then a WATCH.

Data flow (as client-go's Reflector -> DeltaFIFO -> Indexer -> handler, without the FIFO:
everything runs on one event loop, so a delta is handled before the next line is read)::

      WATCH ?sendInitialEvents (ADDED...,     WATCH ?resourceVersion=R&allowWatchBookmarks
        BOOKMARK initial-events-end)                 |  ADDED / MODIFIED / DELETED / BOOKMARK
        or LIST (paged, consistent)                  |
             |                                       v
             v                                Store.apply(type, object)
      Store.listing(): object by object,        - never goes back: an object older than
        then commit():                            the stored one (resourceVersion) is
        - Added for new keys                      dropped
        - Updated(old, new) for changed         - uid change = Deleted(old) + Added(new)
        - Deleted for keys that vanished
          while we were not watching
             \\_______________ typed deltas ________________/
                                 v
                           handler(delta)

Failure handling follows client-go's reflector: a stream that ends (server timeout) is
re-opened from the last resourceVersion (bookmarks keep it fresh); a refused or broken
connection is retried with backoff from the same version, without fetching the state again
(the API server is most likely restarting and the watch cache will serve the version
again); "410 Gone" or an expired version fetches the whole state again (a watch list from
the most recent version, or a LIST) and replaces the store, so every deletion made during
the gap is delivered as a Deleted delta. An initial stream that breaks before its end
bookmark is started over. There is no periodic resync: correctness never depends on one.

Decoding happens here, once per object version (``decode``); a record that cannot be decoded
is reported through ``on_error`` and the previous good version stays in the store. A listing
decodes each object as it arrives (a LIST: page by page) and lets its raw form go, so it
holds one page of raw objects at most, not the whole collection; the store itself changes
only when the listing is complete (a listing abandoned half way changes nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog

from scheduler.deltas import Added, Deleted, Delta, Updated
from scheduler.kube.errors import ApiError, Unreachable

__all__ = [
    "Added",
    "Deleted",
    "Delta",
    "Informer",
    "ListWatcher",
    "Listing",
    "Resource",
    "Store",
    "Updated",
]

log = structlog.get_logger("py-scheduler.informer")

T = TypeVar("T")
Raw = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """An API collection: ``path`` lists it cluster-wide; ``kind`` names it in logs."""

    kind: str
    path: str
    namespaced: bool

    @property
    def group(self) -> str:
        """The API group ("" for the core group), from the path."""
        parts = self.path.strip("/").split("/")
        return "" if parts[0] == "api" else parts[1]

    @property
    def version(self) -> str:
        """The API version ("v1"), from the path."""
        parts = self.path.strip("/").split("/")
        return parts[1] if parts[0] == "api" else parts[2]

    @property
    def plural(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


def object_key(raw: Raw, namespaced: bool) -> str:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or 'default'}/{name}" if namespaced else name


def _rv(text: str) -> int | None:
    """etcd-backed resourceVersions are integers; the API contract calls them opaque, so a
    version that is not a number is never compared."""
    return int(text) if text.isdigit() else None


@dataclass(slots=True)
class _Entry(Generic[T]):
    uid: str
    rv: str
    obj: T | None  # None: never decoded successfully (reported through on_error)


class Store(Generic[T]):
    """Decoded records by key, with the uid and resourceVersion each was decoded from.

    ``apply`` takes one watch event, a ``listing()`` a full listing; both give the typed
    deltas to hand on. Runtime complexity: ``apply`` O(1) plus one decode; a listing O(n)
    plus one decode per new or changed object (unchanged versions are not decoded again).
    """

    def __init__(
        self,
        *,
        namespaced: bool,
        decode: Callable[[Raw], T],
        on_error: Callable[[Raw, Exception], None],
        errors: tuple[type[Exception], ...] = (ValueError,),
        keep_raw: Callable[[Raw], bool] | None = None,
    ) -> None:
        self.namespaced = namespaced
        self.decode = decode
        self.on_error = on_error
        self.errors = errors
        self._items: dict[str, _Entry[T]] = {}
        # The raw form of the objects ``keep_raw`` accepts (scheduler extenders are sent
        # whole objects); None: only records are kept, as for every kind by default.
        self.keep_raw = keep_raw
        self._raw: dict[str, Raw] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> T | None:
        e = self._items.get(key)
        return None if e is None else e.obj

    def keys(self) -> list[str]:
        return list(self._items)

    def values(self) -> Iterator[T]:
        return (e.obj for e in self._items.values() if e.obj is not None)

    def raw(self, key: str) -> Raw | None:
        """The object as received in the version its record was decoded from, when
        ``keep_raw`` accepted it (else None)."""
        return self._raw.get(key)

    def _remember(self, key: str, raw: Raw | None, decoded: bool) -> None:
        if self.keep_raw is None:
            return
        if raw is not None and decoded and self.keep_raw(raw):
            self._raw[key] = raw
        else:
            self._raw.pop(key, None)

    def _decode(self, raw: Raw) -> T | None:
        try:
            return self.decode(raw)
        except self.errors as e:
            self.on_error(raw, e)
            return None

    def apply(self, event_type: str, raw: Raw) -> list[Delta[T]]:
        meta = raw.get("metadata") or {}
        key = object_key(raw, self.namespaced)
        uid = str(meta.get("uid") or "")
        rv = str(meta.get("resourceVersion") or "")
        old = self._items.get(key)
        if event_type == "DELETED":
            if old is None or (old.uid and uid and old.uid != uid):
                return []  # never knew it, or a deletion of an older incarnation
            del self._items[key]
            self._remember(key, None, False)
            return [] if old.obj is None else [Deleted(old.obj)]
        return self._upsert(key, uid, rv, raw, old)

    def _unchanged(self, key: str, uid: str, rv: str, old: _Entry[T] | None) -> bool:
        """The version held already, or an older one than held (dropped, never gone back to)."""
        if old is None or old.uid != uid:
            return False
        if rv and old.rv == rv:
            return True  # the same version again (a relist of an unchanged object)
        new_v, old_v = _rv(rv), _rv(old.rv)
        if new_v is not None and old_v is not None and new_v < old_v:
            log.debug("stale_object_dropped", key=key, stored=old.rv, received=rv)
            return True
        return False

    def _upsert(
        self, key: str, uid: str, rv: str, raw: Raw, old: _Entry[T] | None
    ) -> list[Delta[T]]:
        if self._unchanged(key, uid, rv, old):
            return []
        obj = self._decode(raw)
        if obj is not None or old is None or old.uid != uid:
            self._remember(key, raw, obj is not None)  # (else the kept version's stays)
        return self._put(key, uid, rv, obj, old)

    def _put(
        self, key: str, uid: str, rv: str, obj: T | None, old: _Entry[T] | None
    ) -> list[Delta[T]]:
        if obj is None:
            if old is None or old.uid != uid:
                # A new incarnation we cannot read: the old one is gone all the same.
                self._items[key] = _Entry(uid, rv, None)
                return [] if old is None or old.obj is None else [Deleted(old.obj)]
            old.rv = rv  # keep the last good version; do not go back to this one
            return []
        self._items[key] = _Entry(uid, rv, obj)
        if old is None or old.obj is None:
            return [Added(obj)]
        if old.uid != uid:
            return [Deleted(old.obj), Added(obj)]  # deleted and re-created under the name
        return [Updated(old.obj, obj)]

    def listing(self) -> Listing[T]:
        """A listing to fill object by object and commit once complete (client-go's
        Replace), from a LIST's pages or a watch list's initial events.

        Each object is decoded as it arrives, so a listing holds one page of raw objects
        at most, not all of them: the store changes only at ``commit``, and no other change
        may come in between (until a watch list's end bookmark its stream feeds only the
        listing)."""
        return Listing(self)

    def _commit(self, staged: Iterable[_Staged[T]], seen: set[str]) -> list[Delta[T]]:
        deltas: list[Delta[T]] = []
        for st in staged:
            old = self._items.get(st.key)
            if st.error is not None:
                self.on_error(*st.error)
            if st.obj is not None or old is None or old.uid != st.uid:
                self._remember(st.key, st.raw, st.obj is not None)
            deltas.extend(self._put(st.key, st.uid, st.rv, st.obj, old))
        for key in [k for k in self._items if k not in seen]:
            gone = self._items.pop(key)
            self._remember(key, None, False)
            if gone.obj is not None:
                deltas.append(Deleted(gone.obj, final_state_unknown=True))
        return deltas


@dataclass(slots=True)
class _Staged(Generic[T]):
    """A listed object that is new or changed: its record, or why it has none."""

    key: str
    uid: str
    rv: str
    obj: T | None
    error: tuple[Raw, Exception] | None  # reported through on_error at commit
    raw: Raw | None = None  # kept when the store keeps this object's raw form


class Listing(Generic[T]):
    """A full listing in progress (``Store.listing``): ``add`` each object, then ``commit``
    for the deltas. Objects the store holds at the same version are only noted as seen;
    new and changed ones are decoded now and kept as records, their raw form let go (kept
    when the store's ``keep_raw`` accepts it).
    Undecodable ones keep their raw form until ``commit`` reports them, so a listing that
    is abandoned and started over (an expired continue token) reports nothing twice."""

    __slots__ = ("_committed", "_seen", "_staged", "_store")

    def __init__(self, store: Store[T]) -> None:
        self._store = store
        self._seen: set[str] = set()
        self._staged: dict[str, _Staged[T]] = {}
        self._committed = False

    def add(self, raw: Raw) -> None:
        store = self._store
        meta = raw.get("metadata") or {}
        key = object_key(raw, store.namespaced)
        if key in self._seen:  # never in a consistent listing; the later one wins
            self._staged.pop(key, None)
        self._seen.add(key)
        uid = str(meta.get("uid") or "")
        rv = str(meta.get("resourceVersion") or "")
        if store._unchanged(key, uid, rv, store._items.get(key)):
            return
        try:
            obj: T | None = store.decode(raw)
            error = None
        except store.errors as e:
            # Kept to report at commit; without its traceback, which holds this frame.
            obj, error = None, (raw, e.with_traceback(None))
        keep = store.keep_raw is not None and obj is not None and store.keep_raw(raw)
        self._staged[key] = _Staged(key, uid, rv, obj, error, raw if keep else None)

    def discard(self, raw: Raw) -> None:
        """The object is gone after all (a DELETED event before a watch list's end): the
        listing forgets it, so that commit reports it deleted if the store held it."""
        key = object_key(raw, self._store.namespaced)
        self._seen.discard(key)
        self._staged.pop(key, None)

    def commit(self) -> list[Delta[T]]:
        """Apply the listing to the store: the deltas to hand on, in listing order, then a
        Deleted (final state unknown) for every key the listing lacks."""
        if self._committed:
            raise RuntimeError("listing: committed twice")
        self._committed = True
        staged, seen, self._staged, self._seen = self._staged, self._seen, {}, set()
        return self._store._commit(staged.values(), seen)


class ListWatcher(Protocol):
    """What an informer needs from the API (``KubeClient`` implements it)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        loads: Callable[[bytes], Any] = ...,
    ) -> dict[str, Any]: ...

    def stream(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]: ...


class _Relist(Exception):
    """The watch cannot resume from our resourceVersion (410 Gone / expired)."""


class _WatchListRefused(Exception):
    """The API server refused a watch list (``sendInitialEvents``): its WatchList feature
    is off. (One older than 1.27, outside kube-scheduler's version skew, would ignore the
    parameter and never send the end bookmark: the informer would not sync.)"""


# The annotation on the bookmark that ends a watch list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Refusals of a watch list's parameters, after which the informer lists instead.
_WATCH_LIST_REFUSALS = (400, 422)


class Informer(Generic[T]):
    """One resource's reflector + store; ``run()`` until cancelled.

    ``handler`` gets every delta, in order, on the event loop; an exception in it is logged
    and does not stop the informer. ``synced`` is set after the first listing was handed on.
    ``watch_list``: the initial state (and the state after 410 Gone) by a streaming watch
    list, as client-go's default; otherwise by a paged LIST. A server that refuses the watch
    list turns it off for this informer.
    """

    def __init__(
        self,
        lw: ListWatcher,
        resource: Resource,
        *,
        decode: Callable[[Raw], T],
        handler: Callable[[Delta[T]], None],
        on_error: Callable[[Raw, Exception], None],
        decode_errors: tuple[type[Exception], ...] = (ValueError,),
        loads: Callable[[bytes], Any],
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        backoff: tuple[float, float] = (0.5, 8.0),
        watch_list: bool = True,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self.lw = lw
        # Each delta's handling time in seconds (client-go's informer processing latency).
        self.observe = observe
        self.watch_list = watch_list
        self.resource = resource
        self.handler = handler
        self.loads = loads
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.backoff_initial, self.backoff_max = backoff
        self.store: Store[T] = Store(
            namespaced=resource.namespaced, decode=decode, on_error=on_error, errors=decode_errors
        )
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0  # listings after the first (for tests and logs)
        # The watch list in progress: its objects until the initial-events-end bookmark.
        self._initial: Listing[T] | None = None

    # ------------------------------------------------------------------ public
    async def run(self) -> None:
        delay = self.backoff_initial
        while True:
            try:
                # With a watch list, the first stream of _watch_until_expired asks for the
                # initial events; else a LIST first.
                self._initial = self.store.listing() if self.watch_list else None
                if self._initial is None:
                    await self._list()
                delay = self.backoff_initial
                await self._watch_until_expired()
            except _Relist:
                log.info("watch_expired_relisting", kind=self.resource.kind)
                continue
            except _WatchListRefused as e:
                log.info("watch_list_refused_listing", kind=self.resource.kind, error=str(e))
                self.watch_list = False
                continue
            except ApiError as e:
                log.warning("list_failed", kind=self.resource.kind, error=str(e), retry_in=delay)
                await asyncio.sleep(delay * (1 + random.random() * 0.2))
                delay = min(delay * 2, self.backoff_max)
            except Exception:  # a bug must not stop the watch for good: start over
                log.exception("informer_failed", kind=self.resource.kind, retry_in=delay)
                await asyncio.sleep(delay * (1 + random.random() * 0.2))
                delay = min(delay * 2, self.backoff_max)

    # ------------------------------------------------------------------ list
    async def _list(self) -> None:
        listing = self.store.listing()
        cont = ""
        rv = ""
        limit: int | None = self.page_size
        while True:
            q: dict[str, Any] = {}
            if limit:
                q["limit"] = limit
            if cont:
                q["continue"] = cont
            try:
                page = await self.lw.request("GET", self.resource.path, query=q, loads=self.loads)
            except ApiError as e:
                if e.status == 410 and cont:
                    # The continue token expired mid-listing: start over in one page.
                    listing, cont, rv, limit = self.store.listing(), "", "", None
                    continue
                raise
            meta = page.get("metadata") or {}
            if not rv:
                rv = str(meta.get("resourceVersion") or "")
            for raw in page.get("items") or ():
                listing.add(raw)
            cont = str(meta.get("continue") or "")
            del page, meta  # let the page's raw objects go before the next one arrives
            if not cont:
                break
        self._commit(listing, rv)

    def _commit(self, listing: Listing[T], rv: str) -> None:
        """A complete listing at version ``rv``: replace the store, hand on the deltas."""
        if self.synced.is_set():
            self.relists += 1
        self.resource_version = rv
        self._deliver(listing.commit())
        if not self.synced.is_set():
            log.debug("informer_synced", kind=self.resource.kind, objects=len(self.store))
        self.synced.set()

    # ------------------------------------------------------------------ watch
    async def _watch_until_expired(self) -> None:
        """Watch from the current resourceVersion, over and over; returns never, raises
        _Relist when the version expired and ApiError for anything a relist should fix.
        While a watch list is in progress (``_initial``) each stream asks for the initial
        events from the most recent version, and one that ends or breaks before their end
        bookmark is started over with an empty listing."""
        delay = self.backoff_initial
        while True:
            timeout = int(self.min_watch_timeout * (1 + random.random()))
            q: dict[str, Any] = {"watch": "1"}
            if self._initial is not None:
                # client-go's watch list from the most recent version (KEP-3157 case 1).
                q["sendInitialEvents"] = "true"
                q["resourceVersionMatch"] = "NotOlderThan"
            else:
                q["resourceVersion"] = self.resource_version
            q["allowWatchBookmarks"] = "true"
            q["timeoutSeconds"] = timeout
            try:
                async for line in self.lw.stream(
                    self.resource.path, query=q, read_timeout=timeout + 60
                ):
                    self._on_line(line)
                    delay = self.backoff_initial
                if self._initial is not None:
                    raise Unreachable(
                        f"watch {self.resource.path}: the stream ended before its initial events"
                    )
            except Unreachable as e:
                # The API server is most likely restarting: resume from the same version.
                # Without the state yet (a watch list), it is the listing that failed.
                self._stream_failed(e, delay)
                await asyncio.sleep(delay * (1 + random.random() * 0.2))
                delay = min(delay * 2, self.backoff_max)
            except ApiError as e:
                if e.status == 410:
                    raise _Relist from e
                if self._initial is not None and e.status in _WATCH_LIST_REFUSALS:
                    raise _WatchListRefused(str(e)) from e
                if e.status in (429, 500, 503, 504):
                    self._stream_failed(e, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                    continue
                raise

    def _stream_failed(self, e: ApiError, delay: float) -> None:
        """A stream broken or refused, to be retried after ``delay``. While a watch list is
        getting the state: ``list_failed`` (a warning, as a failed LIST), and the next stream
        starts it over from nothing (what this one staged changed nothing and was reported
        to no one). Else ``watch_broken`` / ``watch_refused``."""
        kind = self.resource.kind
        if self._initial is not None:
            log.warning("list_failed", kind=kind, error=str(e), retry_in=delay, watch_list=True)
            self._initial = self.store.listing()
        elif isinstance(e, Unreachable):
            log.info("watch_broken", kind=kind, error=str(e), retry_in=delay)
        else:
            log.info("watch_refused", kind=kind, error=str(e))

    def _on_line(self, line: bytes) -> None:
        try:
            event = self.loads(line)
            etype = str(event["type"])
            obj = event["object"]
        except (ValueError, KeyError, TypeError) as e:
            raise Unreachable(f"watch {self.resource.path}: undecodable event: {e}") from e
        if etype == "ERROR":
            code = int(obj.get("code") or 0) if isinstance(obj, Mapping) else 0
            message = obj.get("message", "") if isinstance(obj, Mapping) else str(obj)
            if code == 410:
                raise _Relist(message)
            raise ApiError(f"watch {self.resource.path}: {message}", status=code)
        meta = obj.get("metadata") or {}
        if self._initial is not None:
            self._on_initial_event(etype, obj, meta)
            return
        rv = str(meta.get("resourceVersion") or "")
        if etype != "BOOKMARK":
            self._deliver(self.store.apply(etype, obj))
        if rv:
            self.resource_version = rv

    def _on_initial_event(self, etype: str, obj: Raw, meta: Raw) -> None:
        """An event of a watch list before its end: into the listing; the end bookmark
        commits it at the bookmark's version, and the stream goes on as a watch."""
        listing = self._initial
        assert listing is not None
        if etype == "BOOKMARK":
            annotations = meta.get("annotations") or {}
            if annotations.get(INITIAL_EVENTS_END) == "true":
                self._initial = None
                self._commit(listing, str(meta.get("resourceVersion") or ""))
            # Any other bookmark: the state is not complete yet; its version is not ours.
        elif etype == "DELETED":
            listing.discard(obj)
        else:  # ADDED (MODIFIED too, should a server send one before the end)
            listing.add(obj)

    def _deliver(self, deltas: list[Delta[T]]) -> None:
        observe = self.observe
        for d in deltas:
            t0 = time.perf_counter() if observe is not None else 0.0
            try:
                self.handler(d)
            except Exception:  # a bug in a handler must not stop the watch
                log.exception("handler_failed", kind=self.resource.kind)
            if observe is not None:
                observe(time.perf_counter() - t0)

    def store_version(self) -> int | None:
        """The store's resourceVersion as client-go's informer_store_resource_version shows
        it: its last 15 digits as a number (None: none yet, or not a number)."""
        rv = self.resource_version[-15:]
        return int(rv) if rv.isdigit() else None


@contextlib.asynccontextmanager
async def running(*informers: Informer[Any]) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Run informers as tasks for the duration of a ``with`` block."""
    tasks = [asyncio.create_task(i.run(), name=f"informer-{i.resource.kind}") for i in informers]
    try:
        yield tasks
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
