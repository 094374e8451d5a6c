"""Configuration: a subset of KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).

Owns parsing and validation of the config file and the defaults. Unknown or unsupported
fields are errors that name the field path and the file: a typo must never silently fall
back to a default on a production scheduler. Several profiles may be configured, as
upstream: one queue and one cache serve them all, each pod is scheduled by the profile its
``spec.schedulerName`` names.

Our extensions (not upstream fields), documented in docs/configuration.md:
- ``disablePreemption: true``: shorthand for disabling the DefaultPreemption postFilter.
- ``asyncPreemption`` (default true): run preemption's API calls off the scheduling loop.
- ``apiCallOrder`` (default ``Arrival``, as client-go): the order of calls waiting at the
  client's rate limit; ``Priority``: by the priority of the pod each is about.
- ``DefaultPreemptionArgs.victimSchedulerNames``: only pods of these schedulers may be
  preempted (default: any pod, as upstream).
- ``httpBindAddress`` / ``httpPort``: the one port serving /healthz, /readyz, /metrics.
- ``secureServing``: that port as kube-scheduler's secure port (TLS with a given or
  self-signed certificate, delegated authentication and authorization).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from scheduler.framework.outoftree import discover, instantiate
from scheduler.framework.waiting_pods import FrameworkHandle, WaitingPods
from scheduler.types import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySpreadConstraint,
)

__all__ = [
    "ALL_PLUGINS",
    "API_CALL_ORDERS",
    "DEFAULT_SCORE_WEIGHTS",
    "BalancedAllocationArgs",
    "ConfigError",
    "DefaultPreemptionArgs",
    "DynamicResourcesArgs",
    "ExtenderConfig",
    "ExtenderTLS",
    "InterPodAffinityArgs",
    "LeaderElectionConfig",
    "NodeAffinityArgs",
    "NodeResourcesFitArgs",
    "PodTopologySpreadArgs",
    "SchedulerConfig",
    "SecureServing",
    "VolumeBindingArgs",
    "client_feature",
    "extended_resource_name_problem",
    "extenders_note",
    "load_config",
    "parse_config",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
DEFAULT_SCHEDULER_NAME = "py-scheduler"

FILTER_PLUGINS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",  # upstream inserts it before DefaultPreemption
    "NodeDeclaredFeatures",  # upstream appends it to the default profile after the others
)
SCORE_PLUGINS = (
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
    "ImageLocality",
    "DynamicResources",
)
# The in-tree plugins of the binding cycle's points (upstream's VolumeBinding and
# DynamicResources have both).
RESERVE_PLUGINS = ("VolumeBinding", "DynamicResources")
PRE_BIND_PLUGINS = ("VolumeBinding", "DynamicResources")
# DynamicResources first, as upstream: deallocating an idle claim beats evicting a pod.
POST_FILTER_PLUGINS = ("DynamicResources", "DefaultPreemption")
PRE_ENQUEUE_PLUGINS = ("SchedulingGates", "DynamicResources")
# Plugins with no effect here but accepted so upstream configs load (their names only).
ACCEPTED_NOOP = ("PrioritySort",)
# The QueueSort point's in-tree plugin: the queue's own order (priority, then enqueue
# time). An out-of-tree plugin with ``less`` may replace it (docs/plugins.md).
QUEUE_SORT_PLUGINS = ("PrioritySort",)
# The Bind point's in-tree plugin: the Binding API call (scheduler/kube/binder.py). Out-of-tree
# Bind plugins placed before it may bind a pod themselves (docs/plugins.md).
BIND_PLUGINS = ("DefaultBinder",)
ALL_PLUGINS = tuple(
    dict.fromkeys(FILTER_PLUGINS + SCORE_PLUGINS + POST_FILTER_PLUGINS + PRE_ENQUEUE_PLUGINS)
)
# Upstream's default score weights (pkg/scheduler/apis/config/v1/default_plugins.go).
DEFAULT_SCORE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "VolumeBinding": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "ImageLocality": 1,
    "DynamicResources": 2,
}


class ConfigError(ValueError):
    """A configuration we refuse; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    victim_scheduler_names: tuple[str, ...] = ()  # empty: any scheduler's pods
    # "BestEffort" (upstream: PDBs only rank candidates) or "Strict" (ours: a candidate
    # whose victims would violate a PDB is never chosen).
    pdb_policy: str = "BestEffort"


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    strategy: str = "LeastAllocated"
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    shape: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))
    ignored_resources: tuple[str, ...] = ()
    # Extended resources whose domain (the part before "/") is one of these are not checked.
    ignored_resource_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    """``addedAffinity``: node affinity every pod of the profile gets on top of its own.
    ``required``: None when not set (every node matches); ``preferred``: (weight, term)."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    """``defaultingType: System`` (upstream's default) spreads by zone and hostname
    (SYSTEM_DEFAULT_CONSTRAINTS); ``List`` uses ``default_constraints`` as given (none: pods
    without constraints of their own are not spread)."""

    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    system_defaulting: bool = True


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass(frozen=True, slots=True)
class BalancedAllocationArgs:
    """NodeResourcesBalancedAllocation's own resources (upstream: every weight is 1)."""

    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))


DEFAULT_BIND_TIMEOUT_SECONDS = 600
DEFAULT_VOLUME_SHAPE = ((0, 10), (100, 0))  # StorageCapacityScoring's default (beta, on)


DEFAULT_DRA_FILTER_TIMEOUT_SECONDS = 10.0  # upstream's DynamicResourcesFilterTimeoutDefault
DEFAULT_DRA_BINDING_TIMEOUT_SECONDS = 600.0  # upstream's DynamicResourcesBindingTimeoutDefault


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    # How long one node's allocation in Filter may search (0: no limit).
    filter_timeout_seconds: float = DEFAULT_DRA_FILTER_TIMEOUT_SECONDS
    # How long PreBind waits for devices' binding conditions (and how old an allocation
    # still waiting may be before it is given up).
    binding_timeout_seconds: float = DEFAULT_DRA_BINDING_TIMEOUT_SECONDS


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[tuple[int, int], ...] = DEFAULT_VOLUME_SHAPE


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = "py-scheduler"
    resource_namespace: str = "kube-system"


@dataclass(frozen=True, slots=True)
class SecureServing:
    """``secureServing``: HTTPS with TokenReview + SubjectAccessReview on the one port."""

    enabled: bool = False
    cert_file: str | None = None  # with key_file; neither: a self-signed certificate
    key_file: str | None = None
    # PEM bundle of the CAs whose client certificates authenticate (kube-scheduler's
    # --client-ca-file); None: bearer tokens only.
    client_ca_file: str | None = None


@dataclass(frozen=True, slots=True)
class ExtenderTLS:
    """An extender's ``tlsConfig`` (client-go's TLSClientConfig fields; ``*Data`` decoded
    from base64)."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0  # upstream's DefaultExtenderTimeout


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """One entry of ``extenders`` (upstream's Extender): an HTTP service asked to filter,
    score, bind, or narrow preemption's candidates. Verbs left empty are not called."""

    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    tls: ExtenderTLS | None = None
    http_timeout: float = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    node_cache_capable: bool = False
    # (name, ignoredByScheduler); empty: the extender is interested in every pod.
    managed_resources: tuple[tuple[str, bool], ...] = ()
    ignorable: bool = False


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    percentage_of_nodes_to_score: int = 0  # 0: upstream's adaptive default
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    pod_max_in_unschedulable_seconds: float = 300.0
    filters: tuple[str, ...] = FILTER_PLUGINS
    scores: tuple[str, ...] = SCORE_PLUGINS
    post_filters: tuple[str, ...] = POST_FILTER_PLUGINS
    pre_enqueue: tuple[str, ...] = PRE_ENQUEUE_PLUGINS
    # VolumeBinding (in-tree) and out-of-tree plugins; Permit and PostBind: out-of-tree only.
    reserve: tuple[str, ...] = RESERVE_PLUGINS
    permit: tuple[str, ...] = ()
    pre_bind: tuple[str, ...] = PRE_BIND_PLUGINS
    # In order; "DefaultBinder" is the Binding API call (upstream's DefaultBinder).
    bind: tuple[str, ...] = BIND_PLUGINS
    post_bind: tuple[str, ...] = ()
    # The one QueueSort plugin: "PrioritySort" (the queue's own order) or an out-of-tree one.
    queue_sort: str = QUEUE_SORT_PLUGINS[0]
    score_weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_SCORE_WEIGHTS))
    preemption: DefaultPreemptionArgs = DefaultPreemptionArgs()
    fit: NodeResourcesFitArgs = NodeResourcesFitArgs()
    balanced_allocation: BalancedAllocationArgs = BalancedAllocationArgs()
    node_affinity: NodeAffinityArgs = NodeAffinityArgs()
    topology_spread: PodTopologySpreadArgs = PodTopologySpreadArgs()
    inter_pod_affinity: InterPodAffinityArgs = InterPodAffinityArgs()
    volume_binding: VolumeBindingArgs = VolumeBindingArgs()
    dynamic_resources: DynamicResourcesArgs = DynamicResourcesArgs()
    async_preemption: bool = True
    # Upstream's delayCacheUntilActive: with leader election, a standby starts its informers
    # only once it leads (no cache while it waits, a full listing when it takes over).
    delay_cache_until_active: bool = False
    # The field (enableProfiling or enableContentionProfiling) that asked for Go's pprof
    # endpoints, which py-scheduler does not serve; empty when none did.
    profiling_requested: str = ""
    # ours: the order of calls waiting at the main client's rate limit (API_CALL_ORDERS)
    api_call_order: str = "Arrival"
    # Upstream's OpportunisticBatching feature gate (framework/batch.py): not a field of
    # the file; ``--feature-gates`` sets it (``feature_gates``).
    opportunistic_batching: bool = True
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    # Client QPS/burst: upstream's defaults are 50/100; we keep them (see docs/configuration.md).
    qps: float = 50.0
    burst: int = 100
    # clientConnection.kubeconfig: the cluster to use when --kubeconfig is not given (as
    # kube-scheduler's; "": $KUBECONFIG, else the in-cluster configuration).
    kubeconfig: str = ""
    http_bind_address: str = "127.0.0.1"
    http_port: int = 10260
    secure_serving: SecureServing = SecureServing()
    # Every profile's extenders (top-level ``extenders``), the ignorable ones last as
    # upstream calls them.
    extenders: tuple[ExtenderConfig, ...] = ()
    # Out-of-tree plugins of the profile (docs/plugins.md): (name, class, args), in the
    # order they were enabled; their extension points are named in filters/scores/...
    out_of_tree: tuple[tuple[str, type, Mapping[str, Any]], ...] = ()
    # This config is ``profiles[0]``; the other profiles follow, each a whole config whose
    # fields outside the profile (backoff, client, leader election, serving...) are this
    # one's. Pods choose a profile by ``spec.schedulerName``.
    more_profiles: tuple[SchedulerConfig, ...] = ()

    @property
    def preemption_enabled(self) -> bool:
        return "DefaultPreemption" in self.post_filters

    @property
    def profiles(self) -> tuple[SchedulerConfig, ...]:
        """Every profile, in the order configured (this one first)."""
        return (self, *self.more_profiles)

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The profiles' names: the ``spec.schedulerName`` values of the pods we schedule."""
        return tuple(p.scheduler_name for p in self.profiles)


# apiCallOrder: as they came (client-go's limiter), or by the priority of the pod each is about.
API_CALL_ORDERS = ("Arrival", "Priority")

# Go's time.ParseDuration: a sequence of decimal numbers, each with a unit ("1m30s", "500ms").
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path}: {problem}")

    def mapping(self, raw: Any, path: str, allowed: set[str] | None) -> Mapping[str, Any]:
        """A mapping with only ``allowed`` keys (None: any key)."""
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise self.fail(path, f"expected a mapping, got {type(raw).__name__}")
        for k in raw:
            if allowed is not None and k not in allowed:
                raise self.fail(f"{path}.{k}" if path else str(k), "unknown or unsupported field")
        return raw

    def integer(self, raw: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise self.fail(path, f"expected an integer, got {raw!r}")
        if (lo is not None and raw < lo) or (hi is not None and raw > hi):
            raise self.fail(path, f"{raw} is out of range [{lo}, {hi}]")
        return raw

    def number(self, raw: Any, path: str) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
            raise self.fail(path, f"expected a positive number, got {raw!r}")
        return float(raw)

    def boolean(self, raw: Any, path: str) -> bool:
        if not isinstance(raw, bool):
            raise self.fail(path, f"expected true or false, got {raw!r}")
        return raw

    def string(self, raw: Any, path: str) -> str:
        if not isinstance(raw, str) or not raw:
            raise self.fail(path, f"expected a non-empty string, got {raw!r}")
        return raw

    def duration(self, raw: Any, path: str) -> float:
        if isinstance(raw, str) and raw:
            parts = list(_DURATION_PART.finditer(raw))
            if "".join(m.group(0) for m in parts) == raw:
                return sum(float(m[1]) * _DURATION_UNITS[m[2]] for m in parts)
        raise self.fail(path, f"expected a duration like '15s', '1m30s' or '500ms', got {raw!r}")


def _plugin_set(
    r: _Reader, raw: Any, path: str, default: tuple[str, ...], known: tuple[str, ...]
) -> tuple[tuple[str, ...], dict[str, int]]:
    """Apply an upstream PluginSet (enabled/disabled) to a default list."""
    ps = r.mapping(raw, path, {"enabled", "disabled"})
    names = list(default)
    weights: dict[str, int] = {}
    seen_enabled: dict[str, int] = {}
    for i, d in enumerate(ps.get("disabled") or ()):
        dm = r.mapping(d, f"{path}.disabled[{i}]", {"name"})
        name = r.string(dm.get("name"), f"{path}.disabled[{i}].name")
        if name == "*":
            names = []
        elif name in known or name in ACCEPTED_NOOP:
            names = [n for n in names if n != name]
        else:
            raise r.fail(f"{path}.disabled[{i}].name", f"unknown plugin {name!r}")
    for i, e in enumerate(ps.get("enabled") or ()):
        em = r.mapping(e, f"{path}.enabled[{i}]", {"name", "weight"})
        name = r.string(em.get("name"), f"{path}.enabled[{i}].name")
        if name in ACCEPTED_NOOP and name not in known:
            continue
        if name not in known:
            raise r.fail(f"{path}.enabled[{i}].name", f"unknown or unsupported plugin {name!r}")
        if name in seen_enabled:
            # Upstream's framework refuses a plugin enabled twice at one point.
            raise r.fail(
                f"{path}.enabled[{i}].name", f"{name} is already enabled[{seen_enabled[name]}]"
            )
        seen_enabled[name] = i
        if name not in names:
            names.append(name)
        weight = em.get("weight")
        if weight is not None:
            weight = r.integer(weight, f"{path}.enabled[{i}].weight", 0, 2**31 - 1)
        # As upstream's mergePluginSet, an entry replaces the default one, weight and all:
        # no weight (or 0) is weight 1, not the default plugin's weight.
        weights[name] = weight or 1
    return tuple(names), weights


def parse_config(raw: Any, source: str = "<config>") -> SchedulerConfig:
    r = _Reader(source)
    top = r.mapping(
        raw,
        "",
        {
            "apiVersion",
            "kind",
            "profiles",
            "percentageOfNodesToScore",
            "podInitialBackoffSeconds",
            "podMaxBackoffSeconds",
            "leaderElection",
            "clientConnection",
            "parallelism",
            "disablePreemption",
            "asyncPreemption",
            "apiCallOrder",
            "httpBindAddress",
            "httpPort",
            "secureServing",
            "pluginModules",
            "extenders",
            "delayCacheUntilActive",
            "enableProfiling",
            "enableContentionProfiling",
        },
    )
    if top.get("apiVersion", API_VERSION) != API_VERSION:
        raise r.fail("apiVersion", f"expected {API_VERSION}, got {top.get('apiVersion')!r}")
    if top.get("kind", "KubeSchedulerConfiguration") != "KubeSchedulerConfiguration":
        raise r.fail("kind", f"expected KubeSchedulerConfiguration, got {top.get('kind')!r}")
    kw: dict[str, Any] = {}
    if "percentageOfNodesToScore" in top:
        kw["percentage_of_nodes_to_score"] = r.integer(
            top["percentageOfNodesToScore"], "percentageOfNodesToScore", 0, 100
        )
    if "podInitialBackoffSeconds" in top:
        kw["pod_initial_backoff_seconds"] = float(
            r.integer(top["podInitialBackoffSeconds"], "podInitialBackoffSeconds", 1)
        )
    if "podMaxBackoffSeconds" in top:
        kw["pod_max_backoff_seconds"] = float(
            r.integer(top["podMaxBackoffSeconds"], "podMaxBackoffSeconds", 1)
        )
    if kw.get("pod_max_backoff_seconds", 10.0) < kw.get("pod_initial_backoff_seconds", 1.0):
        raise r.fail("podMaxBackoffSeconds", "must be >= podInitialBackoffSeconds")
    if "parallelism" in top:
        r.integer(top["parallelism"], "parallelism", 1)  # accepted; we schedule on one loop
    if top.get("delayCacheUntilActive") is not None:
        kw["delay_cache_until_active"] = r.boolean(
            top["delayCacheUntilActive"], "delayCacheUntilActive"
        )
    for name in ("enableProfiling", "enableContentionProfiling"):
        # Go's /debug/pprof has no Python counterpart: accepted (upstream's defaults are
        # true) and said at start-up when true; docs/deploy.md profiles with py-spy.
        if top.get(name) is not None and r.boolean(top[name], name):
            kw.setdefault("profiling_requested", name)
    if "asyncPreemption" in top:
        kw["async_preemption"] = r.boolean(top["asyncPreemption"], "asyncPreemption")
    if "apiCallOrder" in top:
        order = r.string(top["apiCallOrder"], "apiCallOrder")
        if order not in API_CALL_ORDERS:
            raise r.fail("apiCallOrder", f"expected Arrival or Priority, got {order!r}")
        kw["api_call_order"] = order
    if "httpBindAddress" in top:
        kw["http_bind_address"] = r.string(top["httpBindAddress"], "httpBindAddress")
    if "httpPort" in top:
        kw["http_port"] = r.integer(top["httpPort"], "httpPort", 0, 65535)
    ss = r.mapping(
        top.get("secureServing"),
        "secureServing",
        {"enabled", "certFile", "keyFile", "clientCAFile"},
    )
    if "secureServing" in top:
        cert = r.string(ss["certFile"], "secureServing.certFile") if "certFile" in ss else None
        key = r.string(ss["keyFile"], "secureServing.keyFile") if "keyFile" in ss else None
        if (cert is None) != (key is None):
            missing = "keyFile" if key is None else "certFile"
            raise r.fail(f"secureServing.{missing}", "certFile and keyFile go together")
        client_ca = (
            r.string(ss["clientCAFile"], "secureServing.clientCAFile")
            if "clientCAFile" in ss
            else None
        )
        kw["secure_serving"] = SecureServing(
            enabled=r.boolean(ss.get("enabled", True), "secureServing.enabled"),
            cert_file=cert,
            key_file=key,
            client_ca_file=client_ca,
        )

    le = r.mapping(
        top.get("leaderElection"),
        "leaderElection",
        {
            "leaderElect",
            "leaseDuration",
            "renewDeadline",
            "retryPeriod",
            "resourceLock",
            "resourceName",
            "resourceNamespace",
        },
    )
    if le:
        if le.get("resourceLock", "leases") != "leases":
            raise r.fail("leaderElection.resourceLock", "only 'leases' is supported")
        lec = LeaderElectionConfig(
            leader_elect=r.boolean(le.get("leaderElect", True), "leaderElection.leaderElect"),
            lease_duration=r.duration(
                le.get("leaseDuration", "15s"), "leaderElection.leaseDuration"
            ),
            renew_deadline=r.duration(
                le.get("renewDeadline", "10s"), "leaderElection.renewDeadline"
            ),
            retry_period=r.duration(le.get("retryPeriod", "2s"), "leaderElection.retryPeriod"),
            resource_name=r.string(
                le.get("resourceName", "py-scheduler"), "leaderElection.resourceName"
            ),
            resource_namespace=r.string(
                le.get("resourceNamespace", "kube-system"), "leaderElection.resourceNamespace"
            ),
        )
        if not lec.lease_duration > lec.renew_deadline > lec.retry_period:
            raise r.fail("leaderElection", "need leaseDuration > renewDeadline > retryPeriod")
        kw["leader_election"] = lec
    cc = r.mapping(
        top.get("clientConnection"),
        "clientConnection",
        {"qps", "burst", "kubeconfig", "contentType", "acceptContentTypes"},
    )
    if "qps" in cc:
        kw["qps"] = r.number(cc["qps"], "clientConnection.qps")
    if "burst" in cc:
        kw["burst"] = r.integer(cc["burst"], "clientConnection.burst", 1)
    if cc.get("kubeconfig"):
        kw["kubeconfig"] = r.string(cc["kubeconfig"], "clientConnection.kubeconfig")

    modules_raw = r.mapping(top.get("pluginModules"), "pluginModules", None)
    modules = {
        r.string(k, "pluginModules"): r.string(v, f"pluginModules.{k}")
        for k, v in modules_raw.items()
    }
    try:
        external = discover(modules)
    except ValueError as e:
        raise r.fail("pluginModules", str(e)) from e
    clash = sorted(set(external) & (set(ALL_PLUGINS) | set(ACCEPTED_NOOP) | set(BIND_PLUGINS)))
    if clash:
        raise r.fail("pluginModules", f"{clash[0]!r} is the name of an in-tree plugin")

    profiles = top.get("profiles")
    if profiles is None or profiles == []:
        profiles = [{}]  # upstream's defaulting: one profile, every default
    if not isinstance(profiles, list):
        raise r.fail("profiles", f"expected a list of profiles, got {type(profiles).__name__}")
    disable_preemption = "disablePreemption" in top and r.boolean(
        top["disablePreemption"], "disablePreemption"
    )
    parsed = [
        _profile(r, prof, f"profiles[{i}]", external, disable_preemption)
        for i, prof in enumerate(profiles)
    ]
    if len(parsed) > 1:
        seen: dict[str, int] = {}
        for i, (prof, pkw) in enumerate(zip(profiles, parsed, strict=True)):
            if not isinstance(prof, Mapping) or "schedulerName" not in prof:
                raise r.fail(
                    f"profiles[{i}].schedulerName",
                    "required: every profile needs a name when there is more than one",
                )
            name = pkw["scheduler_name"]
            if name in seen:
                raise r.fail(
                    f"profiles[{i}].schedulerName",
                    f"{name!r} is already the name of profiles[{seen[name]}]",
                )
            seen[name] = i
        # As upstream's validateCommonQueueSort: one queue serves every profile, so they
        # must all order it alike (the same QueueSort plugin, with the same args).
        first = parsed[0]
        for i, pkw in enumerate(parsed[1:], start=1):
            if pkw["queue_sort"] != first["queue_sort"]:
                raise r.fail(
                    f"profiles[{i}].plugins.queueSort",
                    f"must be the same for all profiles: {pkw['queue_sort']} here, "
                    f"{first['queue_sort']} in profiles[0]",
                )
            if _plugin_args(pkw, pkw["queue_sort"]) != _plugin_args(first, first["queue_sort"]):
                raise r.fail(
                    f"profiles[{i}].pluginConfig",
                    f"the args of queue sort plugin {pkw['queue_sort']} must be the same for "
                    "all profiles",
                )
    if "extenders" in top:
        extenders = _extenders(r, top["extenders"])
        kw["extenders"] = extenders
        # As upstream's buildExtenders: the extended resources an extender manages with
        # ignoredByScheduler become every profile's NodeResourcesFit ignoredResources
        # (in place of the args' own list).
        ignored = tuple(n for e in extenders for n, skip in e.managed_resources if skip)
        if ignored:
            for pkw in parsed:
                fit = pkw.get("fit", NodeResourcesFitArgs())
                pkw["fit"] = replace(fit, ignored_resources=ignored)
    # A profile's own fields (its percentageOfNodesToScore among them) over the top level's.
    others = tuple(SchedulerConfig(**{**kw, **pkw}) for pkw in parsed[1:])
    return SchedulerConfig(**{**kw, **parsed[0]}, more_profiles=others)


_EXTENDER_FIELDS = {
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
_TLS_FIELDS = {
    "insecure",
    "serverName",
    "certFile",
    "keyFile",
    "caFile",
    "certData",
    "keyData",
    "caData",
}
# apimachinery's IsQualifiedName: [DNS subdomain prefix "/"] name (63 at most).
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def extenders_note(config: SchedulerConfig) -> list[str]:
    """The note ``simulate`` and ``explain`` give when the configuration has extenders,
    which they do not call (they make no network calls): empty without any."""
    if not config.extenders:
        return []
    urls = ", ".join(e.url_prefix for e in config.extenders)
    return [
        f"the configuration's extenders ({urls}) are not called here: these decisions are "
        "the plugins' alone, which the extenders may narrow or reorder in the live scheduler"
    ]


def extended_resource_name_problem(name: str) -> str | None:
    """Why ``name`` is not an extended resource name (upstream's
    validateExtendedResourceName: a qualified name outside the kubernetes.io domain, not
    starting ``requests.``, that stays qualified with ``requests.`` in front), or None."""
    prefix, slash, local = name.rpartition("/")
    if not slash:
        return "is an invalid extended resource name (it needs a domain: example.com/name)"
    if (
        not _DNS_SUBDOMAIN.fullmatch(prefix)
        or len(prefix) > 253
        or not _QUALIFIED_NAME.fullmatch(local)
        or len(local) > 63
    ):
        return "must be a qualified name: a DNS subdomain, '/', then 63 characters at most"
    if "kubernetes.io/" in name or name.startswith("requests."):
        return "is an invalid extended resource name"
    quota = f"requests.{prefix}"
    if len(quota) > 253 or not _DNS_SUBDOMAIN.fullmatch(quota):
        return "is an invalid extended resource name"
    return None


def _extenders(r: _Reader, raw: Any) -> tuple[ExtenderConfig, ...]:
    """``extenders``, validated as upstream's validateExtenders (a positive weight with a
    prioritize verb, one binder at most, managed resources extended and named once),
    plus what upstream finds out only when calling: an http(s) URL. Ignorable ones last."""
    if not isinstance(raw, list):
        raise r.fail("extenders", f"expected a list of extenders, got {type(raw).__name__}")
    out: list[ExtenderConfig] = []
    binders: list[int] = []
    managed: set[str] = set()
    for i, item in enumerate(raw):
        at = f"extenders[{i}]"
        e = r.mapping(item, at, _EXTENDER_FIELDS)
        url = r.string(e.get("urlPrefix"), f"{at}.urlPrefix")
        if not url.startswith(("http://", "https://")):
            raise r.fail(f"{at}.urlPrefix", f"expected an http:// or https:// URL, got {url!r}")
        verbs = {
            k: r.string(e[k], f"{at}.{k}") if k in e else ""
            for k in ("filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb")
        }
        weight = r.integer(e.get("weight", 0), f"{at}.weight")
        if verbs["prioritizeVerb"] and weight <= 0:
            raise r.fail(f"{at}.weight", f"{weight}: must have a positive weight applied to it")
        if verbs["bindVerb"]:
            binders.append(i)
        resources: list[tuple[str, bool]] = []
        mr = e.get("managedResources") or []
        if not isinstance(mr, list):
            raise r.fail(f"{at}.managedResources", "expected a list")
        for j, res in enumerate(mr):
            rp = f"{at}.managedResources[{j}]"
            rm = r.mapping(res, rp, {"name", "ignoredByScheduler"})
            name = r.string(rm.get("name"), f"{rp}.name")
            problem = extended_resource_name_problem(name)
            if problem is not None:
                raise r.fail(f"{rp}.name", f"{name!r} {problem}")
            if name in managed:
                raise r.fail(f"{rp}.name", f"{name!r}: duplicate extender managed resource name")
            managed.add(name)
            skip = r.boolean(rm.get("ignoredByScheduler", False), f"{rp}.ignoredByScheduler")
            resources.append((name, skip))
        https = r.boolean(e.get("enableHTTPS", False), f"{at}.enableHTTPS")
        tls = _extender_tls(r, e["tlsConfig"], f"{at}.tlsConfig") if "tlsConfig" in e else None
        timeout = DEFAULT_EXTENDER_TIMEOUT_SECONDS
        if "httpTimeout" in e:
            timeout = r.duration(e["httpTimeout"], f"{at}.httpTimeout") or timeout
        out.append(
            ExtenderConfig(
                url_prefix=url,
                filter_verb=verbs["filterVerb"],
                preempt_verb=verbs["preemptVerb"],
                prioritize_verb=verbs["prioritizeVerb"],
                bind_verb=verbs["bindVerb"],
                weight=weight,
                enable_https=https,
                tls=tls,
                http_timeout=timeout,
                node_cache_capable=r.boolean(
                    e.get("nodeCacheCapable", False), f"{at}.nodeCacheCapable"
                ),
                managed_resources=tuple(resources),
                ignorable=r.boolean(e.get("ignorable", False), f"{at}.ignorable"),
            )
        )
    if len(binders) > 1:
        raise r.fail(
            "extenders",
            f"found {len(binders)} extenders implementing bind "
            f"(extenders{binders}): only one extender can implement bind",
        )
    return tuple(sorted(out, key=lambda x: x.ignorable))  # stable: ignorable ones last


def _extender_tls(r: _Reader, raw: Any, path: str) -> ExtenderTLS:
    t = r.mapping(raw, path, _TLS_FIELDS)

    def text(k: str) -> str:
        return r.string(t[k], f"{path}.{k}") if k in t else ""

    def data(k: str) -> bytes:
        if k not in t:
            return b""
        try:
            return base64.b64decode(r.string(t[k], f"{path}.{k}"), validate=True)
        except binascii.Error as e:
            raise r.fail(f"{path}.{k}", f"expected base64 (as the field is []byte): {e}") from e

    return ExtenderTLS(
        insecure=r.boolean(t.get("insecure", False), f"{path}.insecure"),
        server_name=text("serverName"),
        cert_file=text("certFile"),
        key_file=text("keyFile"),
        ca_file=text("caFile"),
        cert_data=data("certData"),
        key_data=data("keyData"),
        ca_data=data("caData"),
    )


# Upstream's pod-group extension points (PlacementGenerate, PlacementScore,
# PodGroupPostFilter): accepted empty, as kube-scheduler writes them out.
_POD_GROUP_POINTS = ("placementGenerate", "placementScore", "podGroupPostFilter")


def _plugin_args(pkw: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The args an out-of-tree plugin was enabled with in a parsed profile (None: in-tree)."""
    return next((args for n, _, args in pkw["out_of_tree"] if n == name), None)


def _profile(
    r: _Reader,
    raw: Any,
    at: str,
    external: Mapping[str, type],
    disable_preemption: bool,
) -> dict[str, Any]:
    """One entry of ``profiles`` (``at`` is its path, e.g. ``profiles[1]``): the
    SchedulerConfig fields that are the profile's own."""
    ext = tuple(external)
    external_args: dict[str, Mapping[str, Any]] = {}
    kw: dict[str, Any] = {}
    filters: tuple[str, ...] = FILTER_PLUGINS
    scores: tuple[str, ...] = SCORE_PLUGINS
    post_filters: tuple[str, ...] = POST_FILTER_PLUGINS
    pre_enqueue: tuple[str, ...] = PRE_ENQUEUE_PLUGINS
    # The binding-cycle points: VolumeBinding's Reserve and PreBind, and out-of-tree plugins.
    in_tree_binding: dict[str, tuple[str, ...]] = {
        "reserve": RESERVE_PLUGINS,
        "permit": (),
        "preBind": PRE_BIND_PLUGINS,
        "postBind": (),
    }
    binding = dict(in_tree_binding)
    bind: tuple[str, ...] = BIND_PLUGINS
    queue_sort: tuple[str, ...] = QUEUE_SORT_PLUGINS
    named_sorters: set[str] = set()  # enabled at queueSort itself: must implement less
    weights = dict(DEFAULT_SCORE_WEIGHTS)
    prof = r.mapping(
        raw, at, {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}
    )
    if "percentageOfNodesToScore" in prof:
        # As upstream: the profile's, when set, instead of the top-level one.
        kw["percentage_of_nodes_to_score"] = r.integer(
            prof["percentageOfNodesToScore"], f"{at}.percentageOfNodesToScore", 0, 100
        )
    if "schedulerName" in prof:
        kw["scheduler_name"] = r.string(prof["schedulerName"], f"{at}.schedulerName")
    else:
        kw["scheduler_name"] = DEFAULT_SCHEDULER_NAME
    plugins = r.mapping(
        prof.get("plugins"),
        f"{at}.plugins",
        {
            "multiPoint",
            "preFilter",
            "filter",
            "postFilter",
            "preScore",
            "score",
            "queueSort",
            "reserve",
            "permit",
            "preBind",
            "bind",
            "postBind",
            "preEnqueue",
            *_POD_GROUP_POINTS,
        },
    )
    for point in _POD_GROUP_POINTS:
        # kube-scheduler writes these out empty; their plugins (pod-group scheduling,
        # behind gates that are off by default in v1.37) are not built here.
        pg = r.mapping(plugins.get(point), f"{at}.plugins.{point}", {"enabled", "disabled"})
        if pg.get("enabled"):
            raise r.fail(
                f"{at}.plugins.{point}.enabled",
                "the pod-group extension points are not built (their upstream gates are off "
                "by default in v1.37)",
            )
    if "multiPoint" in plugins:
        mp, mp_weights = _plugin_set(
            r,
            plugins["multiPoint"],
            f"{at}.plugins.multiPoint",
            ALL_PLUGINS + BIND_PLUGINS + QUEUE_SORT_PLUGINS,
            ALL_PLUGINS + BIND_PLUGINS + QUEUE_SORT_PLUGINS + ext,
        )
        # An out-of-tree plugin enabled at multiPoint joins every point (the framework
        # wires it where it implements one).
        extra = tuple(n for n in mp if n in external)
        filters = tuple(n for n in filters if n in mp) + extra
        scores = tuple(n for n in scores if n in mp) + extra
        post_filters = tuple(n for n in post_filters if n in mp) + extra
        pre_enqueue = tuple(n for n in pre_enqueue if n in mp) + extra
        binding = {
            point: tuple(n for n in names if n in mp) + extra
            for point, names in in_tree_binding.items()
        }
        # As upstream, DefaultBinder stays first: a Bind plugin enabled at multiPoint
        # binds nothing unless DefaultBinder is disabled.
        bind = tuple(n for n in bind if n in mp) + extra
        # As upstream, a QueueSort plugin enabled at multiPoint sorts nothing unless
        # PrioritySort is disabled: two are refused below.
        queue_sort = tuple(n for n in queue_sort if n in mp) + extra
        weights.update(mp_weights)
    for point in ("preFilter", "filter"):
        if point in plugins:
            filters, _ = _plugin_set(
                r, plugins[point], f"{at}.plugins.{point}", filters, FILTER_PLUGINS + ext
            )
    for point in ("preScore", "score"):
        if point in plugins:
            scores, w = _plugin_set(
                r, plugins[point], f"{at}.plugins.{point}", scores, SCORE_PLUGINS + ext
            )
            if point == "score":  # upstream reads weights at score and multiPoint only
                weights.update(w)
    if "postFilter" in plugins:
        post_filters, _ = _plugin_set(
            r,
            plugins["postFilter"],
            f"{at}.plugins.postFilter",
            post_filters,
            POST_FILTER_PLUGINS + ext,
        )
    if "preEnqueue" in plugins:
        pre_enqueue, _ = _plugin_set(
            r,
            plugins["preEnqueue"],
            f"{at}.plugins.preEnqueue",
            pre_enqueue,
            PRE_ENQUEUE_PLUGINS + ext,
        )
    for point, names in binding.items():
        if point in plugins:
            binding[point], _ = _plugin_set(
                r, plugins[point], f"{at}.plugins.{point}", names, in_tree_binding[point] + ext
            )
    if "bind" in plugins:
        bind, _ = _plugin_set(r, plugins["bind"], f"{at}.plugins.bind", bind, BIND_PLUGINS + ext)
    if "queueSort" in plugins:
        before = set(queue_sort)
        queue_sort, _ = _plugin_set(
            r, plugins["queueSort"], f"{at}.plugins.queueSort", queue_sort, QUEUE_SORT_PLUGINS + ext
        )
        named_sorters = set(queue_sort) - before
    configs = prof.get("pluginConfig") or []
    if not isinstance(configs, list):
        raise r.fail(f"{at}.pluginConfig", "expected a list of {name, args}")
    seen_config: dict[str, int] = {}
    for i, pc in enumerate(configs):
        path = f"{at}.pluginConfig[{i}]"
        pcm = r.mapping(pc, path, {"name", "args"})
        name = r.string(pcm.get("name"), f"{path}.name")
        if name in seen_config:
            # Upstream: field.Duplicate; which of the two would win is not a thing to guess.
            raise r.fail(
                f"{path}.name",
                f"duplicate: {name} is configured in pluginConfig[{seen_config[name]}]",
            )
        seen_config[name] = i
        args = pcm.get("args") or {}
        parse_args = _IN_TREE_ARGS.get(name)
        if parse_args is not None:
            field_name, parse = parse_args
            _check_args_kind(r, args, f"{path}.args", name)
            kw[field_name] = parse(r, args, f"{path}.args")
        elif name in external:
            external_args[name] = r.mapping(args, f"{path}.args", None)
        else:
            raise r.fail(f"{path}.name", f"no supported args for plugin {name!r}")
    if disable_preemption:
        post_filters = tuple(p for p in post_filters if p != "DefaultPreemption")
    enabled = dict.fromkeys(
        n
        for n in (
            *pre_enqueue,
            *filters,
            *scores,
            *post_filters,
            *binding["reserve"],
            *binding["permit"],
            *binding["preBind"],
            *bind,
            *binding["postBind"],
            *queue_sort,
        )
        if n in external
    )
    out_of_tree = []
    binders = [n for n in bind if n in BIND_PLUGINS]
    sorters = [n for n in queue_sort if n in QUEUE_SORT_PLUGINS]
    for name in enabled:
        args = external_args.get(name, {})
        try:
            # The plugin validates its own args (a throwaway handle for those that take one).
            plugin = instantiate(external[name], args, FrameworkHandle(WaitingPods()))
        except (ValueError, TypeError) as e:
            where = next(
                (
                    f"{at}.pluginConfig[{i}].args"
                    for i, pc in enumerate(configs)
                    if isinstance(pc, Mapping) and pc.get("name") == name
                ),
                f"{at}.plugins ({name})",
            )
            raise r.fail(where, f"plugin {name}: {e}") from e
        out_of_tree.append((name, external[name], args))
        if name in bind and callable(getattr(plugin, "bind", None)):
            binders.append(name)
        if name in queue_sort and callable(getattr(plugin, "less", None)):
            sorters.append(name)
        elif name in named_sorters:
            raise r.fail(f"{at}.plugins.queueSort", f"plugin {name} does not implement less")
    if len(sorters) != 1:
        # Upstream: "only one queue sort plugin required for profile"; both cases named.
        got = ", ".join(sorters) if sorters else "none"
        hint = (
            "disable PrioritySort (at multiPoint or queueSort) to order the queue by another"
            if len(sorters) > 1
            else "enable PrioritySort or a plugin that implements less"
        )
        raise r.fail(
            f"{at}.plugins.queueSort",
            f"exactly one queue sort plugin is needed, got {len(sorters)} ({got}): {hint}",
        )
    if not binders:
        raise r.fail(
            f"{at}.plugins",
            "at least one bind plugin is needed: DefaultBinder is disabled (at multiPoint "
            "or bind) and no enabled plugin implements bind",
        )
    kw.update(
        filters=filters,
        scores=scores,
        post_filters=post_filters,
        pre_enqueue=pre_enqueue,
        reserve=binding["reserve"],
        permit=binding["permit"],
        pre_bind=binding["preBind"],
        bind=bind,
        post_bind=binding["postBind"],
        queue_sort=sorters[0],
        # Weights are read for Score plugins only (upstream's getValidScoreWeights).
        score_weights={n: w for n, w in weights.items() if n in SCORE_PLUGINS or n in external},
        out_of_tree=tuple(out_of_tree),
    )
    return kw


def _preemption_args(r: _Reader, raw: Any, path: str) -> DefaultPreemptionArgs:
    a = r.mapping(
        raw,
        path,
        {
            "apiVersion",
            "kind",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
            "victimSchedulerNames",
            "pdbPolicy",
        },
    )
    pct = r.integer(
        a.get("minCandidateNodesPercentage", 10), f"{path}.minCandidateNodesPercentage", 0, 100
    )
    absolute = r.integer(
        a.get("minCandidateNodesAbsolute", 100), f"{path}.minCandidateNodesAbsolute", 0
    )
    if pct == 0 and absolute == 0:
        raise r.fail(
            path, "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be 0"
        )
    victims = a.get("victimSchedulerNames") or []
    if not isinstance(victims, list):
        raise r.fail(f"{path}.victimSchedulerNames", "expected a list of scheduler names")
    policy = r.string(a.get("pdbPolicy", "BestEffort"), f"{path}.pdbPolicy")
    if policy not in ("BestEffort", "Strict"):
        raise r.fail(f"{path}.pdbPolicy", f"expected BestEffort or Strict, got {policy!r}")
    return DefaultPreemptionArgs(
        pct,
        absolute,
        tuple(r.string(v, f"{path}.victimSchedulerNames[{i}]") for i, v in enumerate(victims)),
        policy,
    )


def _fit_args(r: _Reader, raw: Any, path: str) -> NodeResourcesFitArgs:
    a = r.mapping(
        raw, path, {*_TYPE_META, "scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
    )
    sp = f"{path}.scoringStrategy"
    ss = r.mapping(a.get("scoringStrategy"), sp, {"type", "resources", "requestedToCapacityRatio"})
    strategy = ss.get("type", "LeastAllocated")
    if strategy not in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
        raise r.fail(f"{sp}.type", f"unknown strategy {strategy!r}")
    resources: list[tuple[str, int]] = []
    for i, res in enumerate(_list(r, ss.get("resources"), f"{sp}.resources")):
        rm = r.mapping(res, f"{sp}.resources[{i}]", {"name", "weight"})
        resources.append(
            (
                r.string(rm.get("name"), f"{sp}.resources[{i}].name"),
                # 0 or unset: 1, as upstream's defaulting
                r.integer(rm.get("weight") or 1, f"{sp}.resources[{i}].weight", 1, 100),
            )
        )
    shape: list[tuple[int, int]] = []
    rtc_path = f"{sp}.requestedToCapacityRatio"
    if strategy == "RequestedToCapacityRatio":
        if ss.get("requestedToCapacityRatio") is None:
            raise r.fail(rtc_path, "must be specified when type is RequestedToCapacityRatio")
        rtc = r.mapping(ss["requestedToCapacityRatio"], rtc_path, {"shape"})
        if not rtc.get("shape"):
            raise r.fail(f"{rtc_path}.shape", "at least one point must be specified")
        shape = _shape(r, rtc["shape"], f"{rtc_path}.shape")
    elif ss.get("requestedToCapacityRatio") is not None:
        raise r.fail(rtc_path, f"must not be set when type is {strategy}")
    ignored = [
        _label_name(r, x, f"{path}.ignoredResources[{i}]")
        for i, x in enumerate(_list(r, a.get("ignoredResources"), f"{path}.ignoredResources"))
    ]
    groups = []
    gpath = f"{path}.ignoredResourceGroups"
    for i, g in enumerate(_list(r, a.get("ignoredResourceGroups"), gpath)):
        if isinstance(g, str) and "/" in g:
            raise r.fail(f"{gpath}[{i}]", f"{g!r}: resource group name can't contain '/'")
        groups.append(_label_name(r, g, f"{gpath}[{i}]"))
    return NodeResourcesFitArgs(
        strategy=strategy,
        resources=tuple(resources) or (("cpu", 1), ("memory", 1)),
        shape=tuple(shape) or ((0, 10), (100, 0)),
        ignored_resources=tuple(ignored),
        ignored_resource_groups=tuple(groups),
    )


def _shape(r: _Reader, raw: Any, path: str) -> list[tuple[int, int]]:
    """A broken-linear scoring shape: (utilization 0..100, increasing; score 0..10) points."""
    if raw is not None and not isinstance(raw, list):
        raise r.fail(path, "expected a list of {utilization, score}")
    shape: list[tuple[int, int]] = []
    for i, pt in enumerate(raw or ()):
        pp = f"{path}[{i}]"
        pm = r.mapping(pt, pp, {"utilization", "score"})
        point = (
            r.integer(pm.get("utilization"), f"{pp}.utilization", 0, 100),
            r.integer(pm.get("score"), f"{pp}.score", 0, 10),
        )
        if shape and point[0] <= shape[-1][0]:
            raise r.fail(f"{pp}.utilization", "values must be sorted in increasing order")
        shape.append(point)
    return shape


def _volume_binding_args(r: _Reader, raw: Any, path: str) -> VolumeBindingArgs:
    a = r.mapping(raw, path, {*_TYPE_META, "bindTimeoutSeconds", "shape"})
    timeout = DEFAULT_BIND_TIMEOUT_SECONDS
    if a.get("bindTimeoutSeconds") is not None:
        timeout = r.integer(a["bindTimeoutSeconds"], f"{path}.bindTimeoutSeconds")
        if timeout < 0:
            raise r.fail(f"{path}.bindTimeoutSeconds", f"{timeout}: should not be negative")
    if "shape" in a and not a["shape"]:
        raise r.fail(f"{path}.shape", "at least one point must be specified")
    shape = _shape(r, a.get("shape"), f"{path}.shape")
    return VolumeBindingArgs(timeout, tuple(shape) or DEFAULT_VOLUME_SHAPE)


def _dynamic_resources_args(r: _Reader, raw: Any, path: str) -> DynamicResourcesArgs:
    a = r.mapping(raw, path, {*_TYPE_META, "filterTimeout", "bindingTimeout"})
    timeout = DEFAULT_DRA_FILTER_TIMEOUT_SECONDS
    if a.get("filterTimeout") is not None:
        timeout = r.duration(a["filterTimeout"], f"{path}.filterTimeout")
    binding = DEFAULT_DRA_BINDING_TIMEOUT_SECONDS
    if a.get("bindingTimeout") is not None:
        binding = r.duration(a["bindingTimeout"], f"{path}.bindingTimeout")
        if binding < 1:
            raise r.fail(
                f"{path}.bindingTimeout", f"{a['bindingTimeout']}: must be at least 1 second"
            )
    return DynamicResourcesArgs(timeout, binding)


_TYPE_META = {"apiVersion", "kind"}


def _check_args_kind(r: _Reader, raw: Any, path: str, plugin: str) -> None:
    """Args may carry their TypeMeta; when they do it must be this plugin's (upstream
    refuses args of another kind: "has to match plugin args")."""
    if not isinstance(raw, Mapping):
        return  # the parser names the problem
    kind = raw.get("kind")
    if kind is not None and kind != f"{plugin}Args":
        raise r.fail(f"{path}.kind", f"{kind!r} has to match plugin args ({plugin}Args)")
    version = raw.get("apiVersion")
    if version is not None and version != API_VERSION:
        raise r.fail(f"{path}.apiVersion", f"expected {API_VERSION}, got {version!r}")


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _label_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a label name (apimachinery's ValidateLabelName: an optional DNS
    subdomain prefix and "/", then a name of 63 characters at most), or None."""
    if not isinstance(name, str) or not name:
        return f"expected a label name, got {name!r}"
    prefix, slash, local = name.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"{name!r}: the prefix must be a DNS subdomain (lower case, 253 characters at most)"
    if not (len(local) <= 63 and _QUALIFIED_NAME.fullmatch(local)):
        return (
            f"{name!r}: must be 63 characters at most, alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def _label_name(r: _Reader, raw: Any, path: str) -> str:
    problem = _label_name_problem(raw)
    if problem is not None:
        raise r.fail(path, problem)
    return str(raw)


def _list(r: _Reader, raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise r.fail(path, f"expected a list, got {type(raw).__name__}")
    return raw


_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _node_selector_requirement(
    r: _Reader, raw: Any, path: str, *, field_selector: bool
) -> NodeSelectorRequirement:
    """One requirement of a node selector term, as upstream's parser accepts it
    (labels.NewRequirement for matchExpressions; metadata.name In/NotIn one name for
    matchFields)."""
    e = r.mapping(raw, path, {"key", "operator", "values"})
    op = e.get("operator")
    values = [str(v) for v in _list(r, e.get("values"), f"{path}.values")]
    if field_selector:
        if e.get("key") != "metadata.name":
            raise r.fail(f"{path}.key", f"{e.get('key')!r}: matchFields support metadata.name only")
        if op not in ("In", "NotIn"):
            raise r.fail(f"{path}.operator", f"{op!r}: matchFields support In and NotIn")
        if len(values) != 1:
            raise r.fail(f"{path}.values", "must have one element")
        return NodeSelectorRequirement("metadata.name", str(op), tuple(values))
    key = _label_name(r, e.get("key"), f"{path}.key")
    if op not in _NODE_SELECTOR_OPERATORS:
        raise r.fail(
            f"{path}.operator", f"{op!r}: supported are {', '.join(_NODE_SELECTOR_OPERATORS)}"
        )
    if op in ("In", "NotIn") and not values:
        raise r.fail(f"{path}.values", f"for {op}, must be non-empty")
    if op in ("Exists", "DoesNotExist") and values:
        raise r.fail(f"{path}.values", f"for {op}, must be empty")
    if op in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"[-+]?\d+", values[0])):
        raise r.fail(f"{path}.values", f"for {op}, must be a single integer")
    for j, v in enumerate(values):
        if len(v) > 63 or not _LABEL_VALUE.fullmatch(v):
            raise r.fail(f"{path}.values[{j}]", f"{v!r} is not a valid label value")
    return NodeSelectorRequirement(key, str(op), tuple(values))


def _node_selector_term(r: _Reader, raw: Any, path: str) -> NodeSelectorTerm:
    t = r.mapping(raw, path, {"matchExpressions", "matchFields"})
    return NodeSelectorTerm(
        tuple(
            _node_selector_requirement(r, e, f"{path}.matchExpressions[{j}]", field_selector=False)
            for j, e in enumerate(_list(r, t.get("matchExpressions"), f"{path}.matchExpressions"))
        ),
        tuple(
            _node_selector_requirement(r, e, f"{path}.matchFields[{j}]", field_selector=True)
            for j, e in enumerate(_list(r, t.get("matchFields"), f"{path}.matchFields"))
        ),
    )


def _node_affinity_args(r: _Reader, raw: Any, path: str) -> NodeAffinityArgs:
    a = r.mapping(raw, path, {*_TYPE_META, "addedAffinity"})
    at = f"{path}.addedAffinity"
    added = r.mapping(
        a.get("addedAffinity"),
        at,
        {
            "requiredDuringSchedulingIgnoredDuringExecution",
            "preferredDuringSchedulingIgnoredDuringExecution",
        },
    )
    required: tuple[NodeSelectorTerm, ...] | None = None
    req_path = f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
    if added.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        req = r.mapping(
            added["requiredDuringSchedulingIgnoredDuringExecution"], req_path, {"nodeSelectorTerms"}
        )
        terms_path = f"{req_path}.nodeSelectorTerms"
        raw_terms = _list(r, req.get("nodeSelectorTerms"), terms_path)
        if not raw_terms:
            # Upstream takes an empty selector and then no node matches: every pod of the
            # profile would wait for ever, which no one means.
            raise r.fail(terms_path, "must have at least one term (none matches no node)")
        required = tuple(
            _node_selector_term(r, t, f"{terms_path}[{i}]") for i, t in enumerate(raw_terms)
        )
        for i, term in enumerate(required):
            if not term.match_expressions and not term.match_fields:
                raise r.fail(f"{terms_path}[{i}]", "an empty term matches no node")
    preferred: list[tuple[int, NodeSelectorTerm]] = []
    pref_path = f"{at}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, p in enumerate(
        _list(r, added.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)
    ):
        pm = r.mapping(p, f"{pref_path}[{i}]", {"weight", "preference"})
        weight = r.integer(pm.get("weight"), f"{pref_path}[{i}].weight", 0, 100)
        term = _node_selector_term(r, pm.get("preference"), f"{pref_path}[{i}].preference")
        if weight and (term.match_expressions or term.match_fields):
            preferred.append((weight, term))  # upstream skips weight 0 and empty terms
    return NodeAffinityArgs(required, tuple(preferred))


_SPREAD_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_INCLUSION_POLICIES = ("Honor", "Ignore")


def _topology_spread_args(r: _Reader, raw: Any, path: str) -> PodTopologySpreadArgs:
    a = r.mapping(raw, path, {*_TYPE_META, "defaultConstraints", "defaultingType"})
    defaulting = a.get("defaultingType", "System")
    if defaulting not in ("System", "List"):
        raise r.fail(f"{path}.defaultingType", f"{defaulting!r}: supported are System and List")
    cpath = f"{path}.defaultConstraints"
    raw_constraints = _list(r, a.get("defaultConstraints"), cpath)
    if defaulting == "System" and raw_constraints:
        raise r.fail(
            f"{path}.defaultingType",
            "System is invalid when .defaultConstraints are not empty (set List to use them)",
        )
    constraints: list[TopologySpreadConstraint] = []
    for i, c in enumerate(raw_constraints):
        p = f"{cpath}[{i}]"
        cm = r.mapping(
            c,
            p,
            {
                "maxSkew",
                "topologyKey",
                "whenUnsatisfiable",
                "labelSelector",
                "minDomains",
                "nodeAffinityPolicy",
                "nodeTaintsPolicy",
                "matchLabelKeys",
            },
        )
        max_skew = r.integer(cm.get("maxSkew"), f"{p}.maxSkew", 1, 2**31 - 1)
        if not cm.get("topologyKey"):
            raise r.fail(f"{p}.topologyKey", "can not be empty")
        key = _label_name(r, cm["topologyKey"], f"{p}.topologyKey")
        action = cm.get("whenUnsatisfiable")
        if not action:
            raise r.fail(f"{p}.whenUnsatisfiable", "can not be empty")
        if action not in _SPREAD_ACTIONS:
            raise r.fail(
                f"{p}.whenUnsatisfiable",
                f"{action!r}: supported are DoNotSchedule and ScheduleAnyway",
            )
        if cm.get("labelSelector") is not None:
            raise r.fail(
                f"{p}.labelSelector",
                "constraint must not define a selector, as they deduced for each pod",
            )
        min_domains = 1
        if cm.get("minDomains") is not None:
            min_domains = r.integer(cm["minDomains"], f"{p}.minDomains", 1, 2**31 - 1)
        policies = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            value = cm.get(name, default)
            if value not in _INCLUSION_POLICIES:
                raise r.fail(f"{p}.{name}", f"{value!r}: supported are Honor and Ignore")
            policies.append(str(value))
        for j, k in enumerate(_list(r, cm.get("matchLabelKeys"), f"{p}.matchLabelKeys")):
            _label_name(r, k, f"{p}.matchLabelKeys[{j}]")  # accepted; no effect (upstream)
        for j, other in enumerate(constraints):
            if (other.topology_key, other.when_unsatisfiable) == (key, action):
                raise r.fail(p, f"duplicate of defaultConstraints[{j}]: {{{key}, {action}}}")
        constraints.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=key,
                when_unsatisfiable=str(action),
                label_selector=None,
                min_domains=min_domains,
                node_affinity_policy=policies[0],
                node_taints_policy=policies[1],
            )
        )
    return PodTopologySpreadArgs(tuple(constraints), defaulting == "System")


def _inter_pod_affinity_args(r: _Reader, raw: Any, path: str) -> InterPodAffinityArgs:
    a = r.mapping(
        raw, path, {*_TYPE_META, "hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}
    )
    weight = 1
    if a.get("hardPodAffinityWeight") is not None:
        weight = r.integer(a["hardPodAffinityWeight"], f"{path}.hardPodAffinityWeight", 0, 100)
    ignore = False
    if a.get("ignorePreferredTermsOfExistingPods") is not None:
        ignore = r.boolean(
            a["ignorePreferredTermsOfExistingPods"], f"{path}.ignorePreferredTermsOfExistingPods"
        )
    return InterPodAffinityArgs(weight, ignore)


def _balanced_allocation_args(r: _Reader, raw: Any, path: str) -> BalancedAllocationArgs:
    a = r.mapping(raw, path, {*_TYPE_META, "resources"})
    resources: list[tuple[str, int]] = []
    for i, res in enumerate(_list(r, a.get("resources"), f"{path}.resources")):
        p = f"{path}.resources[{i}]"
        rm = r.mapping(res, p, {"name", "weight"})
        name = r.string(rm.get("name"), f"{p}.name")
        if any(name == n for n, _ in resources):
            raise r.fail(f"{p}.name", f"duplicate resource {name!r}")
        weight = r.integer(rm.get("weight") or 1, f"{p}.weight")  # 0 or unset: 1 (upstream)
        if weight != 1:
            raise r.fail(f"{p}.weight", f"{weight}: must be 1")
        resources.append((name, weight))
    return BalancedAllocationArgs(tuple(resources) or BalancedAllocationArgs().resources)


def load_config(path: str | Path | None) -> SchedulerConfig:
    """Read a config file (None: all defaults). Raises ConfigError naming the file/field."""
    if path is None:
        return SchedulerConfig()
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from e
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from e
    return parse_config(raw or {}, str(p))


# pluginConfig names with in-tree args: the SchedulerConfig field each sets, and its parser.
_IN_TREE_ARGS: dict[str, tuple[str, Any]] = {
    "DefaultPreemption": ("preemption", _preemption_args),
    "NodeResourcesFit": ("fit", _fit_args),
    "NodeResourcesBalancedAllocation": ("balanced_allocation", _balanced_allocation_args),
    "NodeAffinity": ("node_affinity", _node_affinity_args),
    "PodTopologySpread": ("topology_spread", _topology_spread_args),
    "InterPodAffinity": ("inter_pod_affinity", _inter_pod_affinity_args),
    "VolumeBinding": ("volume_binding", _volume_binding_args),
    "DynamicResources": ("dynamic_resources", _dynamic_resources_args),
}


# client-go's feature gates that py-scheduler honours, with their v1.37 defaults.
CLIENT_FEATURES = {"WatchListClient": True}
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def client_feature(name: str, environ: Mapping[str, str]) -> bool:
    """A client-go feature gate, set as client-go reads it: ``KUBE_FEATURE_<name>`` in the
    environment (kube-scheduler honours the same variables), else its default. Raises
    ConfigError naming the variable for a value that is not a boolean (client-go logs and
    ignores one; a scheduler that silently runs otherwise than asked is worse)."""
    var = f"KUBE_FEATURE_{name}"
    value = environ.get(var)
    if value is None:
        return CLIENT_FEATURES[name]
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"environment variable {var}: {value!r} is not a boolean (true or false)")


# kube-scheduler's feature gates that ``--feature-gates`` may set, with their v1.37
# defaults. Every other gate is fixed at its v1.37 default (docs/configuration.md).
SCHEDULER_FEATURES = {"OpportunisticBatching": True}


def feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates`` as kube-scheduler reads it: ``Name=true,Other=false``. Raises
    ConfigError naming the flag for a gate py-scheduler does not set or a value that is not
    a boolean."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep:
            raise ConfigError(f"--feature-gates: {item!r}: missing =true or =false")
        if name not in SCHEDULER_FEATURES:
            known = ", ".join(sorted(SCHEDULER_FEATURES))
            raise ConfigError(
                f"--feature-gates: unrecognized feature gate {name!r} (py-scheduler sets "
                f"{known}; the others are fixed at their v1.37 defaults)"
            )
        if value in _TRUE:
            gates[name] = True
        elif value in _FALSE:
            gates[name] = False
        else:
            raise ConfigError(f"--feature-gates: {name}={value!r}: not a boolean (true or false)")
    return gates


def with_feature_gates(config: SchedulerConfig, text: str | None) -> SchedulerConfig:
    """``config`` with the gates ``--feature-gates`` sets (``text``; None: none)."""
    if not text:
        return config
    gates = feature_gates(text)
    batching = gates.get("OpportunisticBatching", config.opportunistic_batching)
    return replace(config, opportunistic_batching=batching)
