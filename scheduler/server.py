"""The one HTTP port: /healthz (the scheduling loop is not stalled), /readyz (caches
synced), /metrics (Prometheus text format)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["HealthServer", "ServeError"]


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
    ) -> None:
        self.host = host
        self.port = port
        self.healthy = healthy
        self.ready = ready
        self.registry = registry
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
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
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
