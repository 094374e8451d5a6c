"""Builds a profile's Framework from configuration: the in-tree plugins by name, their
args, the score weights, and the DefaultPreemption Evaluator wired to the snapshot."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.backend.queue.nominator import Nominator
from scheduler.config import SchedulerConfig
from scheduler.framework.outoftree import guard, instantiate
from scheduler.framework.plugins.defaultpreemption import DefaultPreemption
from scheduler.framework.plugins.dynamicresources import DraMetrics, DraObjects, DynamicResources
from scheduler.framework.plugins.helper import SelectorObjects
from scheduler.framework.plugins.imagelocality import ImageLocality
from scheduler.framework.plugins.interpodaffinity import InterPodAffinity
from scheduler.framework.plugins.nodeaffinity import NodeAffinity
from scheduler.framework.plugins.nodedeclaredfeatures import NodeDeclaredFeatures
from scheduler.framework.plugins.nodename import NodeName
from scheduler.framework.plugins.nodeports import NodePorts
from scheduler.framework.plugins.noderesources.balanced_allocation import BalancedAllocation
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit, ResourceSpec
from scheduler.framework.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.framework.plugins.nodevolumelimits import NodeVolumeLimits
from scheduler.framework.plugins.podtopologyspread import PodTopologySpread
from scheduler.framework.plugins.schedulinggates import SchedulingGates
from scheduler.framework.plugins.tainttoleration import TaintToleration
from scheduler.framework.plugins.volumebinding import (
    VolumeBinding,
    VolumeMetrics,
    VolumeObjects,
)
from scheduler.framework.plugins.volumerestrictions import VolumeRestrictions
from scheduler.framework.plugins.volumezone import VolumeZone
from scheduler.framework.preemption import Evaluator, PreemptionActions
from scheduler.framework.runtime import Framework
from scheduler.framework.waiting_pods import (
    ApiClient,
    EventRecorder,
    FrameworkHandle,
    PodInPreBind,
    WaitingPods,
)
from scheduler.types import PDBInfo, PriorityClassInfo

__all__ = ["PluginMetrics", "build_framework"]


class PluginMetrics(DraMetrics, VolumeMetrics, Protocol):
    """Where the in-tree plugins' own metrics go (DynamicResources', VolumeBinding's)."""


def build_framework(
    config: SchedulerConfig,
    *,
    snapshot: Snapshot,
    nominator: Nominator,
    pdbs: Callable[[], Sequence[PDBInfo]],
    actions: PreemptionActions | None,
    rng: random.Random,
    namespace_labels: Callable[[str], Mapping[str, str]] | None = None,
    selectors: SelectorObjects | None = None,
    api_client: ApiClient | None = None,
    event_recorder: EventRecorder | None = None,
    waiting_pods: WaitingPods | None = None,
    pods_in_pre_bind: dict[str, PodInPreBind] | None = None,
    volumes: VolumeObjects | None = None,
    dra: DraObjects | None = None,
    now: Callable[[], float] = time.time,
    metrics: PluginMetrics | None = None,
    priority_classes: Mapping[str, PriorityClassInfo] | None = None,
) -> tuple[Framework, Evaluator]:
    """``config``: one profile. ``waiting_pods`` (the pods held at Permit) and
    ``pods_in_pre_bind`` (those whose async PreBind is under way): maps that upstream's
    profiles share, so that a preemption finds any profile's pod there (new ones if None).
    ``volumes``: the claims, volumes and classes VolumeBinding reads (none if None);
    ``dra``: the ResourceClaims, ResourceSlices and DeviceClasses DynamicResources reads;
    ``now``: the wall clock (seconds since the epoch) DynamicResources stamps and times
    allocations with; ``priority_classes``: the PriorityClasses plugins may read through
    their FrameworkHandle."""
    fit = config.fit
    resources = tuple(ResourceSpec(n, w) for n, w in fit.resources)
    volume_objects = VolumeObjects() if volumes is None else volumes
    dra_objects = DraObjects() if dra is None else dra
    plugins: list[object] = [
        NodeUnschedulable(),
        NodeName(),
        TaintToleration(),
        NodeAffinity(
            added_required=config.node_affinity.required,
            added_preferred=config.node_affinity.preferred,
        ),
        NodePorts(),
        NodeResourcesFit(
            strategy=fit.strategy,
            resources=resources,
            shape=fit.shape,
            ignored_resources=fit.ignored_resources,
            ignored_resource_groups=fit.ignored_resource_groups,
            dra=dra_objects,
        ),
        VolumeRestrictions(volume_objects),
        NodeVolumeLimits(volume_objects),
        VolumeBinding(
            volume_objects,
            client=api_client,
            bind_timeout_seconds=config.volume_binding.bind_timeout_seconds,
            shape=config.volume_binding.shape,
            metrics=metrics,
        ),
        VolumeZone(volume_objects),
        DynamicResources(
            dra_objects,
            client=api_client,
            filter_timeout=config.dynamic_resources.filter_timeout_seconds,
            binding_timeout=config.dynamic_resources.binding_timeout_seconds,
            events=event_recorder,
            now=now,
            metrics=metrics,
            profile=config.scheduler_name,
        ),
        PodTopologySpread(
            default_constraints=config.topology_spread.default_constraints,
            system_defaulting=config.topology_spread.system_defaulting,
            selectors=selectors,
        ),
        InterPodAffinity(
            hard_pod_affinity_weight=config.inter_pod_affinity.hard_pod_affinity_weight,
            ignore_preferred_terms_of_existing_pods=(
                config.inter_pod_affinity.ignore_preferred_terms_of_existing_pods
            ),
            namespace_labels=namespace_labels,
        ),
        BalancedAllocation(
            tuple(ResourceSpec(n, w) for n, w in config.balanced_allocation.resources),
            dra=dra_objects,
        ),
        ImageLocality(),
        SchedulingGates(),
        NodeDeclaredFeatures(),
    ]
    # Out-of-tree plugins (docs/plugins.md): a fresh instance per framework, guarded so that
    # an exception becomes an Error for that pod, never a stopped scheduler.
    # Plugins that take a FrameworkHandle share the framework's waiting pods through it.
    waiting = WaitingPods() if waiting_pods is None else waiting_pods
    handle = FrameworkHandle(
        waiting,
        lambda: snapshot.node_info_list,
        api_client,
        event_recorder,
        storage=volume_objects,
        namespace_labels=namespace_labels,
        dra=dra_objects,
        pdbs=pdbs,
        selectors=selectors,
        priority_classes=priority_classes,
    )
    plugins += [
        guard(name, instantiate(cls, args, handle)) for name, cls, args in config.out_of_tree
    ]
    fw = Framework.build(
        config.scheduler_name,
        plugins,
        score_weights=dict(config.score_weights),
        filters=config.filters,
        scores=config.scores,
        post_filters=config.post_filters,
        pre_enqueue=config.pre_enqueue,
        reserve=config.reserve,
        permit=config.permit,
        pre_bind=config.pre_bind,
        bind=config.bind,
        post_bind=config.post_bind,
        queue_sort=config.queue_sort,
        nominator=nominator,
        waiting_pods=waiting,
    )
    if pods_in_pre_bind is not None:
        fw.pods_in_pre_bind = pods_in_pre_bind
    evaluator = Evaluator(fw, snapshot, config.preemption, pdbs, actions, rng)
    for p in plugins:  # out-of-tree preemption hooks (docs/plugins.md)
        name = str(getattr(p, "name", ""))
        if name not in config.post_filters:
            continue
        hook = getattr(p, "is_eligible_victim", None)
        if callable(hook):
            evaluator.eligibility_hooks.append(hook)
        order = getattr(p, "ordered_score_funcs", None)
        if callable(order):
            evaluator.ordering_hooks.append(order)
    if config.preemption_enabled:
        dp = DefaultPreemption(evaluator)
        fw.post_filter_plugins.append(dp)
        fw.hints[dp.name] = list(dp.events_to_register())
    return fw, evaluator
