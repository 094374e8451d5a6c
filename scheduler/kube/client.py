"""A thin raw-JSON client over the official ``kubernetes`` package.

Why raw JSON: the scheduler works on dicts parsed by ``scheduler.types`` (the same path as
kopf's event bodies and ``simulate``'s YAML), and the generated models cost time and, for
the Binding subresource, fail to deserialise a successful response. So every call goes
through ``request`` with ``param_serialize``/``call_api`` and we read status and body
ourselves. Calls are blocking; the async wrapper runs them in a bounded thread pool and
applies the configured QPS/burst with a token bucket, like client-go's rate limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from scheduler.kube.errors import ApiError, Unreachable, error_for_status

__all__ = ["KubeClient", "load_api_client"]

JSON = Mapping[str, Any]


def load_api_client(kubeconfig: str | None) -> k8s_client.ApiClient:
    """From a kubeconfig file, else in-cluster config, else $KUBECONFIG/~/.kube/config."""
    cfg = k8s_client.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=cfg)
            except ConfigException:
                k8s_config.load_kube_config(client_configuration=cfg)
    except (ConfigException, OSError) as e:
        where = kubeconfig or "in-cluster config, $KUBECONFIG or ~/.kube/config"
        raise ApiError(f"cannot load Kubernetes client configuration from {where}: {e}") from e
    cfg.retries = 0
    return k8s_client.ApiClient(cfg)


class _TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.rate = qps
        self.capacity = float(max(burst, 1))
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def delay(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class KubeClient:
    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        qps: float = 50.0,
        burst: int = 100,
        workers: int = 16,
        timeout: float = 30.0,
        user_agent: str = "py-scheduler",
    ) -> None:
        self.api = api
        self.api.user_agent = user_agent
        self.timeout = timeout
        self._bucket = _TokenBucket(qps, burst)
        # Events get a budget of their own, as kube-scheduler's separate event client does,
        # so that Scheduled/FailedScheduling events never halve the Bindings' rate.
        self._event_bucket = _TokenBucket(qps, burst)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    # ------------------------------------------------------------------ blocking
    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One API call; returns the decoded JSON body (``{}`` when empty). Raises ApiError."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            _, url, hdrs, _, _ = self.api.param_serialize(
                method,
                path,
                query_params=list((query or {}).items()),
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            resp = self.api.call_api(
                method,
                url,
                header_params=hdrs,
                body=body,  # the REST client JSON-encodes it (dumping here would encode twice)
                _request_timeout=timeout or self.timeout,
            )
            status = resp.status
            data = resp.read()
        except ApiException as e:
            status = e.status or 0
            data = e.body or b""
            if not status:
                raise Unreachable(self._unreachable(method, path, e.reason)) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unreachable(self._unreachable(method, path, e)) from e
        text = data.decode() if isinstance(data, bytes | bytearray) else str(data or "")
        if status >= 300:
            detail = text
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(text).get("message", text)
            raise error_for_status(status, f"{method} {path}: {status}: {detail}")
        if not text:
            return {}
        try:
            out = json.loads(text)
        except ValueError as e:
            raise ApiError(f"{method} {path}: response is not JSON") from e
        return out if isinstance(out, dict) else {"items": out}

    def _unreachable(self, method: str, path: str, err: object) -> str:
        reason = getattr(err, "reason", None) or err
        text = str(reason)
        if "Errno" in text:  # "... [Errno 111] Connection refused')" -> "Connection refused"
            text = text.split("]", 1)[-1].strip().rstrip("'\")")
        return f"cannot reach the API server at {self.host} ({method} {path}): {text}"

    # ------------------------------------------------------------------ async
    async def call(
        self, method: str, path: str, *, events: bool = False, **kw: Any
    ) -> dict[str, Any]:
        """``request`` off the loop, after the rate limiter (``events``: the event budget)."""
        wait = (self._event_bucket if events else self._bucket).delay()
        if wait > 0:
            await asyncio.sleep(wait)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: self.request(method, path, **kw))

    async def list_all(self, path: str, *, page: int = 500) -> list[dict[str, Any]]:
        """LIST with pagination; returns the items."""
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            q: dict[str, Any] = {"limit": page}
            if cont:
                q["continue"] = cont
            out = await self.call("GET", path, query=q)
            items.extend(out.get("items") or [])
            cont = (out.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.api.close()
