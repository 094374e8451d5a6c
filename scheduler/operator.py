"""The only importer of kopf: watches pods, nodes, PDBs and PriorityClasses and feeds every
event to the Scheduler; runs the process (health server, leader election, signals).

kopf is used only for watching (``on.event``, async handlers on the scheduler's loop): it
writes nothing to anyone's objects (no finalizers, annotations or status), posts no k8s
events of its own (``posting.enabled = False``), does no peering (standalone) and scans no
CRDs (``scanning.disabled``). kopf re-lists after 410 Gone and reconnects dropped watches;
the Scheduler's periodic resync reconciles whatever a watch gap missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

import kopf
import structlog

from scheduler.config import SchedulerConfig
from scheduler.kube.client import KubeClient
from scheduler.kube.leader import LeaderElector
from scheduler.scheduler import Scheduler
from scheduler.server import HealthServer

__all__ = ["run_operator"]

log = structlog.get_logger("py-scheduler")

WATCHED = (
    ("", "v1", "namespaces"),  # labels, for pod affinity terms' namespaceSelector
    ("scheduling.k8s.io", "v1", "priorityclasses"),
    ("", "v1", "nodes"),
    ("policy", "v1", "poddisruptionbudgets"),
    ("", "v1", "pods"),
)


def build_registry(sched: Scheduler, kubeconfig: str | None) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.scanning.disabled = True
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.reconnect_backoff = 1.0
        settings.batching.batch_window = 0.0
        settings.batching.idle_timeout = 30.0
        settings.networking.error_backoffs = [1, 2, 4, 8]

    @kopf.on.login(registry=registry)
    async def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    for group, version, plural in WATCHED:
        kopf.on.event(group, version, plural, registry=registry)(_handler(sched, plural))
    return registry


def _handler(sched: Scheduler, plural: str) -> Any:
    async def on_event(event: kopf.RawEvent, **_: Any) -> None:
        obj = event.get("object")
        if isinstance(obj, dict):
            sched.handle_event(plural, event.get("type"), obj)

    on_event.__name__ = f"on_{plural}"
    return on_event


async def run_operator(
    sched: Scheduler,
    client: KubeClient,
    config: SchedulerConfig,
    *,
    kubeconfig: str | None,
    leader_elect: bool,
) -> int:
    """Run until SIGTERM/SIGINT: watches, scheduling, health server, leader election."""
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
    stop_flag = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop_flag.set)

    server = HealthServer(
        host=config.http_bind_address,
        port=config.http_port,
        healthy=sched.healthy,
        ready=lambda: sched.synced,
        registry=sched.metrics.registry,
    )
    port = await server.start()
    log.info("http_serving", address=f"{config.http_bind_address}:{port}")

    elector: LeaderElector | None = None
    if leader_elect:
        le = config.leader_election
        lost = asyncio.Event()

        def on_stopped() -> None:
            sched.set_leader(False)
            lost.set()

        elector = LeaderElector(
            client,
            identity=sched.identity,
            name=le.resource_name,
            namespace=le.resource_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            on_started=lambda: sched.set_leader(True),
            on_stopped=on_stopped,
        )
    else:
        sched.set_leader(True)

    registry = build_registry(sched, kubeconfig)
    tasks = [
        asyncio.create_task(
            kopf.operator(
                registry=registry, clusterwide=True, standalone=True, stop_flag=stop_flag
            ),
            name="kopf",
        ),
        asyncio.create_task(sched.run(), name="scheduler"),
    ]
    if elector is not None:
        tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
    waiter = asyncio.create_task(stop_flag.wait())
    exit_code = 0
    watch: list[asyncio.Task[Any]] = [*tasks, waiter]
    if elector is not None:
        lost_waiter = asyncio.create_task(lost.wait())
        watch.append(lost_waiter)
    done, _ = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
    for t in done:
        if t is waiter or t.cancelled():
            continue
        if t.exception() is not None:
            log.error("component_failed", task=t.get_name(), error=repr(t.exception()))
            exit_code = 1
    if elector is not None and lost.is_set() and not stop_flag.is_set():
        # As kube-scheduler: a replica that lost its lease exits; its Deployment restarts it.
        log.error("leader_election_lost", identity=sched.identity)
        exit_code = 1
    log.info("shutting_down")
    stop_flag.set()
    await sched.stop()
    if elector is not None:
        await elector.release()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await server.stop()
    client.close()
    return exit_code
