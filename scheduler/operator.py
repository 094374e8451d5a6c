"""The only importer of kopf: the operator runtime around the live scheduler.

kopf runs the process's lifecycle: its startup activity configures it, its login activity
checks the credentials before anything else starts (kubeconfig or ServiceAccount, as kopf
does for any operator), and its stop flag ends everything on SIGTERM/SIGINT. kopf watches
nothing here: every watch is an informer of ``scheduler.kube.informer`` (LIST + WATCH with
bookmarks, Replace semantics after a gap, typed deltas), because kopf's watcher re-lists
without telling us what vanished during a gap and its per-event machinery (diff bases,
progress storage) cost more CPU than the scheduling itself (docs/architecture.md).

It writes nothing to anyone's objects (no finalizers, annotations or status), posts no k8s
events of its own, does no peering and scans no CRDs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from pathlib import Path
from typing import Any

import kopf
import structlog

from scheduler.config import SchedulerConfig
from scheduler.errors import ApiCallError
from scheduler.kube.auth import DelegatedAuth
from scheduler.kube.client import KubeClient, load_configuration
from scheduler.kube.leader import LeaderElector
from scheduler.kube.live import LiveScheduler
from scheduler.server import ClientCert, Guard, HealthServer, ServeError
from scheduler.servingcert import CertError, server_context

__all__ = ["run", "run_operator"]

log = structlog.get_logger("py-scheduler")


def build_registry(kubeconfig: str | None) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.scanning.disabled = True
        settings.peering.standalone = True
        settings.networking.error_backoffs = [1, 2, 4, 8]

    @kopf.on.login(registry=registry)
    async def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return _in_cluster_login() or kopf.login_with_kubeconfig(**kwargs)

    return registry


SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _in_cluster_login() -> kopf.ConnectionInfo | None:
    """In a pod: the API server from KUBERNETES_SERVICE_HOST/PORT, as the official client's
    in-cluster config reads it (kopf's own service-account login asks DNS for
    kubernetes.default.svc, which a cluster without cluster DNS does not answer)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    token = SA_DIR / "token"
    if not host or not port or not token.exists():
        return None
    if ":" in host:  # IPv6
        host = f"[{host}]"
    namespace = SA_DIR / "namespace"
    return kopf.ConnectionInfo(
        server=f"https://{host}:{port}",
        ca_path=str(SA_DIR / "ca.crt"),
        token=token.read_text().strip(),
        default_namespace=namespace.read_text().strip() if namespace.exists() else None,
    )


async def run_operator(
    live: LiveScheduler,
    lease_client: KubeClient,
    config: SchedulerConfig,
    *,
    kubeconfig: str | None,
    leader_elect: bool,
) -> int:
    """Run until SIGTERM/SIGINT: informers, scheduling, health server, leader election."""
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
    sched = live.scheduler
    stop_flag = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if not stop_flag.is_set():
            log.info("signal_received", signal=sig.name)
        stop_flag.set()

    def dump() -> None:
        # As kube-scheduler on SIGUSR2: the cache and queue, compared with the informers.
        log.info("cache_dump", **live.dump())

    def install_signals() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal, sig)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGUSR2, dump)

    install_signals()

    tls = None
    guard: Guard | None = None
    cert_source = ""
    # Reviews get a client of their own: a scrape never waits behind Bindings.
    auth_client = lease_client.derive(qps=config.qps, burst=config.burst, pool_size=2)
    if config.secure_serving.enabled:
        try:
            tls, cert_source = server_context(
                cert_file=config.secure_serving.cert_file,
                key_file=config.secure_serving.key_file,
                bind_address=config.http_bind_address,
                client_ca_file=config.secure_serving.client_ca_file,
            )
        except CertError as e:
            print(f"py-scheduler: {e}", file=sys.stderr)
            await live.close()
            await lease_client.close()
            await auth_client.close()
            return 2
        auth = DelegatedAuth(auth_client)

        async def reviewed(
            method: str, path: str, authorization: str | None, cert: ClientCert | None
        ) -> tuple[int, str]:
            decision = await auth.check(method, path, authorization, cert)
            return decision.status, decision.message

        guard = reviewed

    server = HealthServer(
        host=config.http_bind_address,
        port=config.http_port,
        healthy=sched.healthy,
        ready=lambda: sched.synced,
        registry=sched.metrics.registry,
        tls=tls,
        guard=guard,
        before_scrape=sched.refresh_gauges,
    )
    try:
        port = await server.start()
    except ServeError as e:
        print(f"py-scheduler: {e.args[1] if len(e.args) > 1 else e}", file=sys.stderr)
        await live.close()
        await lease_client.close()
        await auth_client.close()
        return 2
    if tls is not None:
        log.info(
            "https_serving",
            address=f"{config.http_bind_address}:{port}",
            certificate=cert_source,
            authentication=(
                "x509, TokenReview" if config.secure_serving.client_ca_file else "TokenReview"
            ),
            authorization="SubjectAccessReview",
        )
    else:
        log.info("http_serving", address=f"{config.http_bind_address}:{port}")

    if config.profiling_requested:
        # Go's /debug/pprof has no counterpart here (docs/deploy.md: py-spy).
        log.info("profiling_not_served", field=config.profiling_requested)
    elector: LeaderElector | None = None
    lost = asyncio.Event()
    leading = asyncio.Event()
    if leader_elect:
        le = config.leader_election

        def on_started() -> None:
            sched.set_leader(True)
            leading.set()

        def on_stopped() -> None:
            sched.set_leader(False)
            lost.set()

        elector = LeaderElector(
            lease_client,
            identity=sched.identity,
            name=le.resource_name,
            namespace=le.resource_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            on_started=on_started,
            on_stopped=on_stopped,
        )
    else:
        log.info("leader_election_disabled", identity=sched.identity)
        sched.set_leader(True, elected=False)

    # kopf stops last, on a flag of its own: when it stops it waits for and then cancels every
    # task created after it started, which would cut our bindings' drain short.
    kopf_stop = asyncio.Event()
    kopf_ready = asyncio.Event()
    kopf_task = asyncio.create_task(
        kopf.operator(
            registry=build_registry(kubeconfig),
            clusterwide=True,
            standalone=True,
            stop_flag=kopf_stop,
            ready_flag=kopf_ready,
        ),
        name="kopf",
    )
    # kopf installs SIGINT/SIGTERM handlers of its own as it starts (before it is ready):
    # ours take over again, so that a signal stops the scheduler at once and says so.
    ready_waiter = asyncio.create_task(kopf_ready.wait())
    stop_waiter = asyncio.create_task(stop_flag.wait())
    await asyncio.wait([ready_waiter, stop_waiter, kopf_task], return_when=asyncio.FIRST_COMPLETED)
    ready_waiter.cancel()
    stop_waiter.cancel()
    install_signals()
    delay_cache = config.delay_cache_until_active and elector is not None

    async def run_live() -> None:
        if delay_cache:
            # Upstream's delayCacheUntilActive: no informer (and no cache) until this
            # replica leads; not ready until then, as kube-scheduler's handler-sync check.
            log.info("informers_wait_for_leadership")
            gc.enable()  # the start-up pause of the collector is for the first listing
            await leading.wait()
            gc.disable()
            log.info("informers_starting", reason="delayCacheUntilActive")
        await live.run()

    tasks = [kopf_task, asyncio.create_task(run_live(), name="scheduler")]
    if elector is not None:
        tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
    waiters = [asyncio.create_task(stop_flag.wait()), asyncio.create_task(lost.wait())]
    exit_code = 0
    done, _ = await asyncio.wait([*tasks, *waiters], return_when=asyncio.FIRST_COMPLETED)
    for t in done:
        if t in waiters or t.cancelled():
            continue
        if t.exception() is not None:
            log.error("component_failed", task=t.get_name(), error=repr(t.exception()))
            exit_code = 1
    if lost.is_set() and not stop_flag.is_set():
        # As kube-scheduler: a replica that lost its lease exits; its Deployment restarts it.
        log.error("leader_election_lost", identity=sched.identity)
        exit_code = 1
    log.info("shutting_down")
    stop_flag.set()
    await live.stop()
    if elector is not None:
        await elector.release()
    others = [t for t in [*tasks, *waiters] if t is not kopf_task]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await server.stop()
    kopf_stop.set()
    await asyncio.gather(kopf_task, return_exceptions=True)
    await live.close()
    await lease_client.close()
    await auth_client.close()
    log.info("stopped", exit_code=exit_code)
    return exit_code


async def run(
    config: SchedulerConfig,
    *,
    kubeconfig: str | None,
    leader_elect: bool,
    event_process: bool = True,
    watch_list: bool = True,
) -> int:
    """``py-scheduler run``: build the live scheduler and run it; the process exit code.
    ``event_process``: Events are written by a child process (``scheduler.kube.eventsink``).
    ``watch_list``: the informers start with streaming watch lists (client-go's
    WatchListClient), else with paged LISTs."""
    import socket
    import sys
    import uuid

    try:
        configuration = await load_configuration(kubeconfig)
    except ApiCallError as e:
        print(f"py-scheduler: {e}", file=sys.stderr)
        return 2
    client = KubeClient(
        configuration,
        qps=config.qps,
        burst=config.burst,
        by_priority=config.api_call_order == "Priority",
    )
    # The lock's own client: renewals never wait behind Bindings (kube-scheduler does the same).
    lease_client = client.derive(qps=config.qps, burst=config.burst, pool_size=2)
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    if config.api_call_order != "Arrival":
        log.info("api_call_order", order=config.api_call_order)
    live = LiveScheduler(
        config, client, identity=identity, event_process=event_process, watch_list=watch_list
    )
    try:
        return await run_operator(
            live, lease_client, config, kubeconfig=kubeconfig, leader_elect=leader_elect
        )
    finally:
        await client.close()
