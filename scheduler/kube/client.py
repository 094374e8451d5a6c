"""An async raw-JSON client over the official client's asyncio package (``kubernetes.aio``).

What it owns: one keep-alive connection pool per client (``scheduler.kube.http1``, which
also opens each watch's connection; aiohttp when a proxy is set), authentication (the
official loaders: kubeconfig with exec plugins and token refresh, or in-cluster config with
its rotating ServiceAccount token), a client-go style token bucket (QPS/burst) per client,
translation of failures into ``scheduler.kube.errors``, and streaming of watch responses
line by line.

Why raw JSON and not the generated models: the scheduler decodes API objects itself
(``scheduler.decode``; the same decoder serves ``simulate`` and ``explain``), the generated
models cost time, and for the Binding subresource they fail to deserialise a successful
reply. From ``kubernetes.aio`` we take the configuration loaders and the authentication
settings (``Configuration.auth_settings``: the bearer token, refreshed by the loaders'
hooks); the request itself goes straight to our own connection pool with an orjson body.
The generated ``ApiClient.call_api`` path measured at a quarter of the scheduler's CPU
(generic body sanitising, and aiohttp's ``trust_env``, which looks up proxy settings in a
thread for every request): we read the proxy environment once, at start.

Separate budgets: kube-scheduler gives its event broadcaster and its leader-election lock
clients of their own, so that a burst of Bindings can neither delay events nor push a lease
renewal past its deadline. ``KubeClient.derive()`` makes such a sibling: same credentials,
its own pool and its own bucket.

The order of waiting calls: as client-go's, in the order they came (``apiCallOrder:
Arrival``), or by the priority of the pod each call is about (``Priority``,
``scheduler.kube.transport.PriorityTokenBucket``): ``request(..., priority=)`` names it.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config

from scheduler.decode import loads_json
from scheduler.kube.errors import ApiError, Unreachable, error_for_status
from scheduler.kube.http1 import ConnectionPool, HttpError
from scheduler.kube.transport import (
    detail,
    ignore_reply,
    read_reply,
    target,
    tls_context,
    token_bucket,
    unreachable_message,
)

__all__ = [
    "KubeClient",
    "context_namespace",
    "environment_proxy",
    "ignore_reply",
    "load_configuration",
    "loads_json",
]

try:
    import orjson

    def dumps_json(obj: Any) -> bytes:
        return orjson.dumps(obj)

except ImportError:  # pragma: no cover - orjson is a dependency; this keeps a broken env usable
    import json

    def dumps_json(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


def _ssl_context(cfg: aio_client.Configuration) -> ssl.SSLContext:
    """The TLS settings of the configuration, as ``kubernetes.aio``'s REST client reads them."""
    return tls_context(
        ca_file=cfg.ssl_ca_cert,
        ca_data=cfg.ca_cert_data,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        verify=bool(cfg.verify_ssl),
    )


def _proxy_for(cfg: aio_client.Configuration) -> str | None:
    """The proxy to use: the configuration's, else the environment's for its host (read
    once; what aiohttp's trust_env would do on every request)."""
    if cfg.proxy:
        return str(cfg.proxy)
    return environment_proxy(str(cfg.host))


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``: HTTPS_PROXY or HTTP_PROXY by its
    scheme (either case), none when NO_PROXY names its host or the host is localhost or a
    loopback address, as Go's ProxyFromEnvironment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if host == "localhost" or _loopback(host):
        return None
    if urllib.request.proxy_bypass_environment(host):  # type: ignore[attr-defined]
        return None
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    return str(proxy) if proxy else None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


JSON = Mapping[str, Any]


async def load_configuration(kubeconfig: str | None) -> aio_client.Configuration:
    """From a kubeconfig file, else in-cluster config, else $KUBECONFIG/~/.kube/config."""
    cfg = aio_client.Configuration()
    try:
        if kubeconfig:
            await aio_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                aio_config.load_incluster_config(client_configuration=cfg)
            except aio_config.ConfigException:
                await aio_config.load_kube_config(client_configuration=cfg)
    except (aio_config.ConfigException, OSError, TypeError, ValueError) as e:
        where = kubeconfig or "in-cluster config, $KUBECONFIG or ~/.kube/config"
        raise ApiError(f"cannot load Kubernetes client configuration from {where}: {e}") from e
    cfg.retries = None  # our callers decide what to retry
    return cfg


SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def context_namespace(kubeconfig: str | None) -> str:
    """The namespace kubectl would use: the current context's ``namespace`` of the
    kubeconfig (``kubeconfig``, else the first file of $KUBECONFIG, else ~/.kube/config),
    else the pod's own namespace in a cluster, else "default"."""
    import os
    from pathlib import Path

    import yaml

    candidates = [kubeconfig] if kubeconfig else []
    candidates += [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates.append(str(Path.home() / ".kube" / "config"))
    for path in candidates:
        try:
            cfg = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        current = cfg.get("current-context")
        for ctx in cfg.get("contexts") or []:
            if isinstance(ctx, dict) and ctx.get("name") == current:
                ns = (ctx.get("context") or {}).get("namespace")
                return str(ns) if ns else "default"
        return "default"
    try:
        return Path(SA_NAMESPACE).read_text().strip() or "default"
    except OSError:
        return "default"


class KubeClient:
    def __init__(
        self,
        configuration: aio_client.Configuration,
        *,
        qps: float = 50.0,
        burst: int = 100,
        timeout: float = 30.0,
        pool_size: int = 64,
        user_agent: str = "py-scheduler",
        by_priority: bool = False,
    ) -> None:
        self.configuration = configuration
        self.qps = qps
        self.burst = burst
        self.timeout = timeout
        self.pool_size = pool_size
        self.user_agent = user_agent
        # apiCallOrder: Priority: waiting calls go by the priority of the pod they are about
        self.bucket = token_bucket(qps, burst, by_priority=by_priority)
        self._session: aiohttp.ClientSession | None = None
        self._pool: ConnectionPool | None = None
        self._base = str(configuration.host).rstrip("/")
        self._server_hostname = configuration.tls_server_name or None
        self._proxy = _proxy_for(configuration)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.pool_size, ssl=_ssl_context(self.configuration)
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                read_bufsize=2**21,  # watch events can be larger than aiohttp's default
                headers={"User-Agent": self.user_agent, "Accept": "application/json"},
            )
        return self._session

    def _get_pool(self) -> ConnectionPool:
        if self._pool is None:
            self._pool = ConnectionPool(
                self._base,
                ssl_context=_ssl_context(self.configuration),
                server_hostname=self._server_hostname,
                size=self.pool_size,
                user_agent=self.user_agent,
            )
        return self._pool

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Content-Type": content_type}
        authorization = await self.authorization()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    def derive(self, *, qps: float, burst: int, pool_size: int = 4) -> KubeClient:
        """A sibling with the same credentials, its own connection pool and rate budget
        (its waiting calls in the order they came)."""
        return KubeClient(
            self.configuration,
            qps=qps,
            burst=burst,
            timeout=self.timeout,
            pool_size=pool_size,
            user_agent=self.user_agent,
        )

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    @property
    def proxied(self) -> bool:
        """Whether calls go through an HTTP proxy (then through aiohttp)."""
        return self._proxy is not None

    def connection_settings(self) -> dict[str, Any]:
        """Where and how this client connects, as plain values (the event process makes
        its own connections from them): the API server, the TLS files or data, the
        server name, the timeout and user agent."""
        cfg = self.configuration
        ca_data = cfg.ca_cert_data
        return {
            "host": self._base,
            "ca_file": cfg.ssl_ca_cert,
            # PEM text as is; DER bytes in base64 (the settings travel as JSON)
            "ca_data": ca_data if not isinstance(ca_data, bytes) else None,
            "ca_der": base64.b64encode(ca_data).decode() if isinstance(ca_data, bytes) else None,
            "cert_file": cfg.cert_file,
            "key_file": cfg.key_file,
            "verify": bool(cfg.verify_ssl),
            "server_name": self._server_hostname,
            "timeout": self.timeout,
            "user_agent": self.user_agent,
        }

    async def authorization(self) -> str | None:
        """The Authorization header's value now (the loaders' hooks refresh the token), or
        None without a bearer token."""
        auth = (await self.configuration.auth_settings()).get("BearerToken")
        return str(auth["value"]) if auth else None

    # ------------------------------------------------------------------ requests
    async def _take_token(self, priority: int | None = None) -> None:
        await self.bucket.take(priority)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
        priority: int | None,
    ) -> aiohttp.ClientResponse:
        await self._take_token(priority)
        url = self._base + target(path, query)
        try:
            return await self._get_session().request(
                method,
                url,
                headers=await self._headers(content_type),
                data=None if body is None else dumps_json(body),
                timeout=timeout,
                proxy=self._proxy,
                server_hostname=self._server_hostname,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise Unreachable(self._unreachable(method, path, e)) from e

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        loads: Callable[[bytes], Any] = loads_json,
        priority: int | None = None,
    ) -> dict[str, Any]:
        """One API call after the rate limiter; the JSON body decoded by ``loads`` (``{}``
        when empty). Raises ApiError (NotFound, Conflict, ... Unreachable). Through the
        keep-alive pool (``scheduler.kube.http1``), or aiohttp when a proxy is in the way.
        ``priority``: that of the pod the call is about, for ``apiCallOrder: Priority``
        (None: about no pod)."""
        if self._proxy is not None:
            status, data = await self._request_via_session(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=timeout,
                priority=priority,
            )
        else:
            await self._take_token(priority)
            try:
                status, data = await self._get_pool().request(
                    method,
                    target(path, query),
                    headers=await self._headers(content_type),
                    body=None if body is None else dumps_json(body),
                    timeout=timeout or self.timeout,
                )
            except HttpError as e:
                raise Unreachable(self._unreachable(method, path, e)) from e
        return read_reply(method, path, status, data, loads)

    async def _request_via_session(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
        priority: int | None,
    ) -> tuple[int, bytes]:
        limit = aiohttp.ClientTimeout(total=timeout or self.timeout)
        resp = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=limit,
            priority=priority,
        )
        try:
            async with resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise Unreachable(self._unreachable(method, path, e)) from e

    # Kept for callers that think of it as "the call" (events, leases, reviews).
    call = request

    async def stream(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]:
        """GET a streaming response (a watch) and yield its lines. The stream ends when the
        server closes it; a broken connection raises Unreachable, a refusal ApiError. On a
        connection of its own (``scheduler.kube.http1``), or aiohttp when a proxy is set."""
        if self._proxy is not None:
            async for line in self._stream_via_session(
                path, query=query, read_timeout=read_timeout
            ):
                yield line
            return
        await self._take_token()
        try:
            stream = await self._get_pool().open_stream(
                target(path, query),
                headers=await self._headers("application/json"),
                timeout=self.timeout,
            )
        except HttpError as e:
            raise Unreachable(self._unreachable("GET", path, e)) from e
        try:
            if stream.status >= 300:
                try:
                    data = await stream.read_body(self.timeout)
                except HttpError as e:
                    raise Unreachable(self._unreachable("GET", path, e)) from e
                raise error_for_status(
                    stream.status, f"GET {path}: {stream.status}: {detail(data)}"
                )
            try:
                async for line in stream.lines(read_timeout):
                    yield line
            except HttpError as e:
                raise Unreachable(self._unreachable("GET", path, e)) from e
        finally:
            stream.close()

    async def _stream_via_session(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]:
        limit = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=read_timeout)
        resp = await self._send(
            "GET",
            path,
            query=query,
            body=None,
            content_type="application/json",
            timeout=limit,
            priority=None,
        )
        async with resp:
            if resp.status >= 300:
                data = await resp.read()
                raise error_for_status(resp.status, f"GET {path}: {resp.status}: {detail(data)}")
            try:
                while True:
                    line = await resp.content.readline()
                    if not line:
                        return
                    if line.strip():
                        yield line
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                raise Unreachable(self._unreachable("GET", path, e)) from e
            except ValueError as e:  # a line longer than the read buffer
                raise ApiError(f"GET {path}: unreadable watch stream: {e}") from e

    def _unreachable(self, method: str, path: str, err: object) -> str:
        return unreachable_message(self.host, method, path, err)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
