"""LiveScheduler: the Scheduler wired to a real API server (upstream's ``scheduler.New``).

What it builds, once: three clients with separate rate budgets (the main one for lists,
watches, bindings, status patches and deletes; one for events; the leader-election lock has
its own, made by ``operator.py``), the decoder, the core's ports (binder, event recorder,
preemption executor), the event handlers and one informer per watched kind. Events are
written by the event process (``scheduler.kube.eventsink``, with the events' client and
budget) when ``event_process`` is set, else by an ``EventWriter`` in this process.

Start-up order: namespaces, PriorityClasses, nodes and PDBs are listed first (pods need the
classes to resolve their priority), then pods; when every informer has handed on its first
listing the scheduler is marked synced and may start cycles (kube-scheduler's
WaitForCacheSync). After that each informer keeps its store current on its own. A listing
is a streaming watch list, as client-go's in v1.37, unless ``watch_list`` is off
(``KUBE_FEATURE_WatchListClient=false``, read by the CLI) or the API server refuses one.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.clock import Clock
from scheduler.config import SchedulerConfig
from scheduler.decode import ObjectDecoder, loads_without_managed_fields
from scheduler.errors import ApiCallError
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.plugins.dracel import load_cel
from scheduler.kube.binder import Binder
from scheduler.kube.client import KubeClient, load_configuration
from scheduler.kube.events import EventRecorder
from scheduler.kube.eventsink import EventProcess
from scheduler.kube.eventwriter import EventWriter
from scheduler.kube.extender import build_extenders, raw_kinds
from scheduler.kube.informer import Informer, Resource
from scheduler.kube.preemption import PreemptionExecutor
from scheduler.logging import verbosity
from scheduler.metrics import Metrics
from scheduler.scheduler import Scheduler
from scheduler.types import ParseError, UnknownPriorityClassError

__all__ = ["RESOURCES", "LiveScheduler", "list_cluster", "settle_heap"]

log = structlog.get_logger("py-scheduler")
# The name of our informers in client-go's informer metrics (kube-scheduler's are named
# "kube-scheduler").
COMPONENT = "py-scheduler"

RESOURCES = {
    "namespaces": Resource("Namespace", "/api/v1/namespaces", namespaced=False),
    "priorityclasses": Resource(
        "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", namespaced=False
    ),
    "nodes": Resource("Node", "/api/v1/nodes", namespaced=False),
    "poddisruptionbudgets": Resource(
        "PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", namespaced=True
    ),
    "pods": Resource("Pod", "/api/v1/pods", namespaced=True),
    # The selectors of system default spreading (upstream's DefaultSelector).
    "services": Resource("Service", "/api/v1/services", namespaced=True),
    "replicationcontrollers": Resource(
        "ReplicationController", "/api/v1/replicationcontrollers", namespaced=True
    ),
    "replicasets": Resource("ReplicaSet", "/apis/apps/v1/replicasets", namespaced=True),
    "statefulsets": Resource("StatefulSet", "/apis/apps/v1/statefulsets", namespaced=True),
    # VolumeBinding's.
    "persistentvolumeclaims": Resource(
        "PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", namespaced=True
    ),
    "persistentvolumes": Resource(
        "PersistentVolume", "/api/v1/persistentvolumes", namespaced=False
    ),
    "storageclasses": Resource(
        "StorageClass", "/apis/storage.k8s.io/v1/storageclasses", namespaced=False
    ),
    # NodeVolumeLimits'.
    "csinodes": Resource("CSINode", "/apis/storage.k8s.io/v1/csinodes", namespaced=False),
    "csidrivers": Resource("CSIDriver", "/apis/storage.k8s.io/v1/csidrivers", namespaced=False),
    "volumeattachments": Resource(
        "VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments", namespaced=False
    ),
    # VolumeBinding's, for the drivers that publish their capacity.
    "csistoragecapacities": Resource(
        "CSIStorageCapacity", "/apis/storage.k8s.io/v1/csistoragecapacities", namespaced=True
    ),
    # DynamicResources'.
    "resourceclaims": Resource(
        "ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", namespaced=True
    ),
    "resourceslices": Resource(
        "ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", namespaced=False
    ),
    "deviceclasses": Resource(
        "DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", namespaced=False
    ),
    "devicetaintrules": Resource(
        "DeviceTaintRule", "/apis/resource.k8s.io/v1/devicetaintrules", namespaced=False
    ),
}
DRA_GROUP_PATH = "/apis/resource.k8s.io/v1"
DRA_KINDS = ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules")
DECODE_ERRORS = (ParseError, UnknownPriorityClassError, ValueError, TypeError, AttributeError)


def _pending_for(raw: Any, names: frozenset[str]) -> bool:
    """A pod one of our profiles is to schedule (whose raw form extenders are sent)."""
    spec = raw.get("spec") or {}
    return not spec.get("nodeName") and spec.get("schedulerName", "default-scheduler") in names


class LiveScheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        client: KubeClient,
        *,
        identity: str,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        event_process: bool = False,
        drain_seconds: float = 10.0,
        watch_list: bool = True,
    ) -> None:
        self.config = config
        self.watch_list = watch_list
        self.client = client
        self.drain_seconds = drain_seconds
        # Events have a budget of their own (kube-scheduler's event client).
        self.event_client = client.derive(qps=config.qps, burst=config.burst, pool_size=16)
        self.metrics = metrics or Metrics()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.decoder = ObjectDecoder()
        load_cel()  # DynamicResources' CEL: imported now, not by the first cycle that needs it
        namespace_labels: dict[str, dict[str, str]] = {}

        # In this process: the writer itself; else the event process, with this writer as
        # its fallback should the child exit.
        self.event_writer = EventWriter(
            self.event_client, identity=identity, controller=config.scheduler_name, spawn=self.spawn
        )
        self.event_process: EventProcess | None = None
        if event_process and not client.proxied:
            self.event_process = EventProcess(
                {
                    **client.connection_settings(),
                    "qps": config.qps,
                    "burst": config.burst,
                    "pool_size": 16,
                    "identity": identity,
                    "controller": config.scheduler_name,
                    "verbosity": verbosity(),
                    "drain_seconds": drain_seconds,
                },
                token=client.authorization,
                fallback=lambda: self.event_writer,
            )
        self.recorder = EventRecorder(
            client,
            self.event_process or self.event_writer,
            spawn=self.spawn,
            metrics=self.metrics,
            profiles=config.scheduler_names,
        )
        self.executor = PreemptionExecutor(
            client,
            self.recorder,
            asynchronous=config.async_preemption,
            metrics=self.metrics,
            wake=self._wake,
        )
        self.binder = Binder(
            client,
            on_result=self._bind_result,
            spawn=self.spawn,
            metrics=self.metrics,
            nominate=self.recorder.nominate,
        )
        # Scheduler extenders read the raw objects of the pods and nodes informers, built
        # below (the stores keep them only while extenders are configured).
        self.extenders = build_extenders(
            config.extenders,
            raw_pod=lambda key: self.informers["pods"].store.raw(key),
            raw_node=lambda name: self.informers["nodes"].store.raw(name),
        )
        self.scheduler = Scheduler(
            config,
            binder=self.binder,
            recorder=self.recorder,
            actions=self.executor,
            identity=identity,
            namespace_labels=namespace_labels,
            metrics=self.metrics,
            clock=clock,
            on_assumed=self.recorder.assumed,
            settle_preemption=None if config.async_preemption else self.executor.settle,
            cycle_writes=self.recorder,
            api_client=client,
            event_recorder=self.recorder,
            profile_recorders=self.recorder.for_profile,
            extenders=self.extenders,
        )
        self.executor.attach(self.scheduler.core)
        self.handlers = EventHandlers(
            self.scheduler.core,
            self.decoder,
            scheduler_names=config.scheduler_names,
            namespace_labels=namespace_labels,
            on_rejected=self.recorder.rejected,
            observe=self.metrics.event_handled,
        )
        h = self.handlers
        d = self.decoder
        self.informers: dict[str, Informer[Any]] = {
            "namespaces": self._informer("namespaces", d.namespace, h.namespace),
            "priorityclasses": self._informer(
                "priorityclasses", d.priority_class, h.priority_class
            ),
            "nodes": self._informer("nodes", d.node, h.node),
            "poddisruptionbudgets": self._informer("poddisruptionbudgets", d.pdb, h.pdb),
            "pods": self._informer("pods", d.pod, self._on_pod, on_error=h.pod_rejected),
            "services": self._informer("services", d.service, h.selector_object("Service")),
        }
        for kind in ("replicationcontrollers", "replicasets", "statefulsets"):
            name = RESOURCES[kind].kind
            self.informers[kind] = self._informer(
                kind, d.selector_object(name), h.selector_object(name)
            )
        for kind, decode in (
            ("persistentvolumeclaims", d.pvc),
            ("persistentvolumes", d.pv),
            ("storageclasses", d.storage_class),
            ("csinodes", d.csi_node),
            ("csidrivers", d.csi_driver),
            ("volumeattachments", d.volume_attachment),
            ("csistoragecapacities", d.csi_storage_capacity),
        ):
            self.informers[kind] = self._informer(
                kind, decode, h.volume_object(RESOURCES[kind].kind)
            )
        dra: tuple[tuple[str, Callable[[Any], Any]], ...] = (
            ("resourceclaims", d.resource_claim),
            ("resourceslices", d.resource_slice),
            ("deviceclasses", d.device_class),
            ("devicetaintrules", d.device_taint_rule),
        )
        for kind, decode_dra in dra:
            self.informers[kind] = self._informer(
                kind, decode_dra, h.dra_object(RESOURCES[kind].kind)
            )
        self.scheduler.gauge_sources.append(self._refresh_informer_gauges)
        pods_raw, nodes_raw = raw_kinds(config.extenders)
        if pods_raw == "pending":
            names = frozenset(config.scheduler_names)
            self.informers["pods"].store.keep_raw = lambda raw: _pending_for(raw, names)
        elif pods_raw == "all":
            self.informers["pods"].store.keep_raw = lambda raw: True
        if nodes_raw:
            self.informers["nodes"].store.keep_raw = lambda raw: True

    def _informer(
        self,
        kind: str,
        decode: Callable[[Any], Any],
        handler: Callable[[Any], None],
        *,
        on_error: Callable[[Any, Exception], None] | None = None,
    ) -> Informer[Any]:
        res = RESOURCES[kind]
        m = self.metrics
        labels = (COMPONENT, res.group, res.version, res.plural)
        return Informer(
            self.client,
            res,
            decode=decode,
            handler=handler,
            on_error=on_error or self.handlers.rejected(res.kind),
            decode_errors=DECODE_ERRORS,
            loads=loads_without_managed_fields,
            watch_list=self.watch_list,
            observe=m.child(m.informer_latency, *labels).observe,
        )

    def _refresh_informer_gauges(self) -> None:
        m = self.metrics
        for informer in self.informers.values():
            version = informer.store_version()
            if version is not None:
                res = informer.resource
                labels = (COMPONENT, res.group, res.version, res.plural)
                m.child(m.informer_store_version, *labels).set(version)

    # ------------------------------------------------------------------ plumbing
    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        """Run ``coro`` in the background, drained by ``stop``; its task, for a caller that
        also awaits it (a failed cycle's status write)."""
        # create_task for coroutines (ensure_future's checks cost ~1.5 % at two per pod)
        task = (
            asyncio.get_running_loop().create_task(coro)
            if asyncio.iscoroutine(coro)
            else asyncio.ensure_future(coro)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _wake(self) -> None:
        self.scheduler.wake()

    def _bind_result(self, key: str, outcome: str, message: str, plugin: str = "") -> None:
        self.scheduler.core.on_bind_result(key, outcome, message, plugin)

    def _on_pod(self, delta: Any) -> None:
        self.handlers.pod(delta)
        if getattr(delta, "new", None) is None:  # Deleted
            self.recorder.forget(delta.old.key)

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Informers, then (once synced) the scheduling loop; until cancelled."""
        tasks: list[asyncio.Task[Any]] = []
        if self.event_process is not None:
            await self.event_process.start()  # before anything can happen
        else:
            tasks.append(
                asyncio.create_task(self.event_writer.maintain_series(), name="event-series")
            )
        await self._drop_unserved_dra()
        first = {k: i for k, i in self.informers.items() if k != "pods"}
        tasks += [asyncio.create_task(i.run(), name=f"informer-{k}") for k, i in first.items()]
        # `py-scheduler run` starts with the collector off (scheduler.cli); it is back on
        # once the first listing is settled, or after a grace if the listing takes longer.
        grace = asyncio.get_running_loop().call_later(STARTUP_GC_GRACE, gc.enable)
        try:
            await asyncio.gather(*(i.synced.wait() for i in first.values()))
            pods = self.informers["pods"]
            tasks.append(asyncio.create_task(pods.run(), name="informer-pods"))
            await pods.synced.wait()
            by_stream = sorted(k for k, i in self.informers.items() if i.watch_list)
            log.info(
                "initial_state_listed",
                watch_list=by_stream,
                list=sorted(k for k in self.informers if k not in by_stream),
            )
            self.scheduler.mark_synced(**{k: len(i.store) for k, i in self.informers.items()})
            settle_heap()  # the collector is on from here; the grace's timer is moot
            await self.scheduler.run()
        finally:
            grace.cancel()
            gc.enable()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drop_unserved_dra(self) -> None:
        """An API server that does not serve resource.k8s.io/v1 (older than 1.34, or with
        the group turned off), or not one of its kinds (DeviceTaintRules are served in v1
        from 1.37), would leave that informer listing forever and the scheduler never
        synced: the kinds it does not list (discovery) are dropped, with a warning. Pods
        with ResourceClaims then wait (their claims are never found), as nothing could run
        them. Any other failure of the check keeps the informers (they retry)."""
        try:
            answer = await self.client.request("GET", DRA_GROUP_PATH)
        except ApiCallError as e:
            if e.status != 404:
                return
            answer = {}
        served = {str(r.get("name")) for r in answer.get("resources") or () if isinstance(r, dict)}
        missing = [k for k in DRA_KINDS if k not in served and k in self.informers]
        for kind in missing:
            del self.informers[kind]
        if missing:
            log.warning(
                "dra_not_served",
                group=DRA_GROUP_PATH,
                kinds=missing,
                effect="not watched: DynamicResources sees none of them",
            )

    async def stop(self, *, drain_seconds: float | None = None) -> None:
        """Stop taking pods, then wait (bounded) for bindings and API calls in flight, then
        for the event process to write what it was handed."""
        drain = self.drain_seconds if drain_seconds is None else drain_seconds
        await self.scheduler.stop()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            log.info("draining", calls=len(pending))
            await asyncio.wait(pending, timeout=drain)
        if self.event_process is not None:
            await self.event_process.stop(drain_seconds=drain)

    def dump(self) -> dict[str, Any]:
        """The cache and the queue, compared with the informers (upstream's CacheDumper and
        CacheComparer, which kube-scheduler runs on SIGUSR2). ``missing``: bound pods an
        informer holds that the cache lacks; ``ghosts``: pods the cache holds that no informer
        does (assumed pods are listed apart: they are ours until the watch confirms them)."""
        core = self.scheduler.core
        nom = core.queue.nominator
        snap = Snapshot()
        core.cache.update_snapshot(snap)
        nodes = {ni.name: sorted(ni.pods) for ni in snap.node_info_list}
        cached = {key for keys in nodes.values() for key in keys}
        assumed = sorted(k for k in cached if core.cache.is_assumed(k))
        store = self.informers["pods"].store
        bound = {
            p.key for p in store.values() if p.node_name and not p.terminal and p.node_name in nodes
        }
        return {
            "nodes": nodes,
            "assumed": assumed,
            "ghosts": sorted(cached - bound - set(assumed)),
            "missing": sorted(bound - cached),
            "missing_nodes": sorted(set(self.informers["nodes"].store.keys()) - set(nodes)),
            "pending": {
                q: sorted(p.key for p in ps) for q, ps in core.queue.pending_pods().items()
            },
            "nominated": {
                node: sorted(p.key for p in nom.nominated_pods_for_node(node))
                for node in sorted(nom.nodes_with_nominated_pods())
            },
            # Pods held at Permit (assumed, listed above too), with the plugins they wait for.
            "waiting": {wp.pod.key: sorted(wp.get_pending_plugins()) for wp in core.waiting_pods},
        }

    async def close(self) -> None:
        await self.event_client.close()
        for ext in self.extenders:
            await ext.close()


# How long the collector may stay off while the first listing is in progress.
STARTUP_GC_GRACE = 30.0


def settle_heap() -> None:
    """Once the first listing is in, the heap holds the cluster's records (pods, nodes,
    their NodeInfos) for as long as they exist. Collect once, then move every live object
    to the collector's permanent generation (``gc.freeze``): later full collections scan
    only what was allocated since, instead of the whole cache on every pass. Records hold
    no reference cycles, so reference counting still frees each one when it is dropped.
    The collector is enabled here if it was off (``py-scheduler run`` starts with it off)."""
    gc.collect()
    gc.freeze()
    gc.enable()


async def list_cluster(
    kubeconfig: str | None, *, qps: float, burst: int
) -> dict[str, list[dict[str, Any]]]:
    """One paged LIST of every kind the scheduler watches (for ``explain``)."""
    client = KubeClient(await load_configuration(kubeconfig), qps=qps, burst=burst)
    try:
        out: dict[str, list[dict[str, Any]]] = {}
        for kind, res in RESOURCES.items():
            items: list[dict[str, Any]] = []
            cont = ""
            while True:
                q: dict[str, Any] = {"limit": 500}
                if cont:
                    q["continue"] = cont
                try:
                    page = await client.request("GET", res.path, query=q)
                except ApiCallError as e:
                    if e.status == 404 and kind in DRA_KINDS:  # resource.k8s.io/v1 not served
                        break
                    raise
                items.extend(page.get("items") or [])
                cont = str((page.get("metadata") or {}).get("continue") or "")
                if not cont:
                    break
            out[kind] = items
        return out
    finally:
        await client.close()
