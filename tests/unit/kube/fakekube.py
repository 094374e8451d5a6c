"""A recording stand-in for ``KubeClient`` (no network) for the live layer's unit tests.

Every call is recorded as ``(method, path, body)``, and in ``priorities`` with the priority
it was made with. Failures are scripted per ``(method, path suffix)``; LIST answers come from
``lists``; a watch stream yields the lines queued with ``push`` until ``end_stream`` (or a
scripted error). ``derive`` returns the same
object, so events, leases and bindings land in one log.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from typing import Any

from scheduler.kube.errors import ApiError, error_for_status

_END = object()


class FakeKube:
    host = "https://fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        # (method, path, priority): the priority each call was made with (apiCallOrder)
        self.priorities: list[tuple[str, str, int | None]] = []
        self.failures: dict[tuple[str, str], list[ApiError]] = defaultdict(list)
        self.replies: dict[tuple[str, str], dict[str, Any]] = {
            # Discovery of resource.k8s.io/v1, as a v1.37 API server answers it.
            ("GET", "/apis/resource.k8s.io/v1"): {
                "kind": "APIResourceList",
                "resources": [
                    {"name": n}
                    for n in (
                        "deviceclasses",
                        "devicetaintrules",
                        "resourceclaims",
                        "resourceclaims/status",
                        "resourceclaimtemplates",
                        "resourceslices",
                    )
                ],
            }
        }
        self.lists: dict[str, list[dict[str, Any]]] = {}  # path -> pages
        self.list_queries: list[Mapping[str, Any]] = []
        self.list_loads: list[Any] = []  # the decoder each LIST asked for
        self.watch_queries: list[Mapping[str, Any]] = []
        self._streams: dict[str, asyncio.Queue[Any]] = defaultdict(asyncio.Queue)
        self._events = 0

    def derive(self, **_: Any) -> FakeKube:
        return self

    def fail(self, method: str, suffix: str, *statuses: int) -> None:
        for st in statuses:
            self.failures[(method, suffix)].append(error_for_status(st, f"{method} {suffix}: {st}"))

    def _failure(self, method: str, path: str) -> ApiError | None:
        for (m, suffix), errs in self.failures.items():
            if m == method and path.endswith(suffix) and errs:
                return errs.pop(0)
        return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        loads: Any = None,  # replies here are objects already
        priority: int | None = None,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.calls.append((method, path, body))
        self.priorities.append((method, path, priority))
        err = self._failure(method, path)
        if err is not None:
            raise err
        if method == "GET" and path in self.lists:
            self.list_queries.append(dict(query or {}))
            self.list_loads.append(loads)
            pages = self.lists[path]
            return pages.pop(0) if len(pages) > 1 else pages[0]
        for (m, suffix), reply in self.replies.items():
            if m == method and path.endswith(suffix):
                return reply
        if method == "POST" and path.endswith("/events"):
            self._events += 1
            return {"metadata": {"name": f"ev{self._events}"}}
        return {}

    async def call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return await self.request(method, path, **kw)

    # ------------------------------------------------------------------ watches
    def push(self, path: str, event_type: str, obj: Mapping[str, Any]) -> None:
        self._streams[path].put_nowait(json.dumps({"type": event_type, "object": obj}).encode())

    def end_stream(self, path: str, error: BaseException | None = None) -> None:
        self._streams[path].put_nowait(error if error is not None else _END)

    async def stream(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]:
        self.watch_queries.append(dict(query))
        err = self._failure("WATCH", path)
        if err is not None:
            raise err
        q = self._streams[path]
        while True:
            item = await q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def close(self) -> None:
        return None

    # ------------------------------------------------------------------ reading the log
    def of(self, method: str, suffix: str = "") -> list[tuple[str, Any]]:
        return [(p, b) for m, p, b in self.calls if m == method and p.endswith(suffix)]

    def events(self) -> list[tuple[str, str]]:
        """(reason, involved pod name) of every created event."""
        return [
            (b["reason"], b["regarding"]["name"])
            for m, p, b in self.calls
            if m == "POST" and p.endswith("/events")
        ]
