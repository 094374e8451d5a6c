"""The one HTTP(S) port: /healthz and /livez (the scheduling loop is not stalled), /readyz
(caches synced), /metrics (Prometheus text format).

Plain HTTP by default (``py-scheduler run`` on a workstation, bound to loopback). With
``secureServing.enabled`` (the Deployment in manifests/) it is kube-scheduler's secure port:
TLS, and every request passes a guard first (``scheduler.kube.auth.DelegatedAuth``: a
verified client certificate or a TokenReview, then a SubjectAccessReview, with /healthz,
/livez, /readyz always allowed)."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["ClientCert", "Guard", "HealthServer", "ServeError", "client_cert_identity"]

# A verified client certificate's subject: (common name, organizations).
ClientCert = tuple[str, tuple[str, ...]]
# (method, path, Authorization header, verified client certificate) -> (HTTP status,
# message); 200 lets the request through.
Guard = Callable[[str, str, "str | None", "ClientCert | None"], Awaitable[tuple[int, str]]]


def client_cert_identity(peercert: object) -> ClientCert | None:
    """The subject of a peer certificate as ``ssl`` decodes a verified one
    (``getpeercert()``): its first commonName and every organizationName. None when
    there is none (no certificate, or the context did not ask for one)."""
    if not isinstance(peercert, dict) or not peercert.get("subject"):
        return None
    cn = ""
    orgs: list[str] = []
    for rdn in peercert["subject"]:
        for key, value in rdn:
            if key == "commonName" and not cn:
                cn = str(value)
            elif key == "organizationName":
                orgs.append(str(value))
    return cn, tuple(orgs)


class ServeError(OSError):
    """The port cannot be served (in use, not permitted, no such address): one line that
    names the address."""


class HealthServer:
    def __init__(
        self,
        *,
        host: str,
        port: int,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        registry: CollectorRegistry,
        tls: ssl.SSLContext | None = None,
        guard: Guard | None = None,
        before_scrape: Callable[[], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.healthy = healthy
        self.ready = ready
        self.registry = registry
        self.tls = tls
        self.guard = guard
        self.before_scrape = before_scrape
        self._runner: web.AppRunner | None = None

    async def _healthz(self, _: web.Request) -> web.Response:
        ok = self.healthy()
        return web.Response(
            status=200 if ok else 500, text="ok" if ok else "scheduling loop stalled"
        )

    async def _readyz(self, _: web.Request) -> web.Response:
        ok = self.ready()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "caches not synced")

    async def _metrics(self, _: web.Request) -> web.Response:
        if self.before_scrape is not None:
            self.before_scrape()  # gauges read from live state (same loop: no lock needed)
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    @web.middleware
    async def _guarded(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.guard is not None:
            cert = None
            if self.tls is not None and request.transport is not None:
                cert = client_cert_identity(request.transport.get_extra_info("peercert"))
            status, message = await self.guard(
                request.method, request.path, request.headers.get("Authorization"), cert
            )
            if status != 200:
                headers = (
                    {"WWW-Authenticate": 'Bearer realm="py-scheduler"'} if status == 401 else {}
                )
                return web.Response(status=status, text=message + "\n", headers=headers)
        return await handler(request)

    async def start(self) -> int:
        app = web.Application(middlewares=[self._guarded] if self.guard is not None else [])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            self._runner = None
            reason = e.strerror or str(e)
            raise ServeError(
                e.errno, f"cannot serve health and metrics on {self.host}:{self.port}: {reason}"
            ) from e
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
