"""Configuration: defaults, plugin sets and weights, plugin args, and errors that name the
field path and the file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scheduler.config import (
    ALL_PLUGINS,
    DEFAULT_SCORE_WEIGHTS,
    FILTER_PLUGINS,
    POST_FILTER_PLUGINS,
    PRE_ENQUEUE_PLUGINS,
    SCORE_PLUGINS,
    BalancedAllocationArgs,
    ConfigError,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    LeaderElectionConfig,
    NodeAffinityArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    SchedulerConfig,
    SecureServing,
    client_feature,
    load_config,
    parse_config,
)
from scheduler.types import NodeSelectorRequirement, NodeSelectorTerm, TopologySpreadConstraint

API = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def _profile(**kw: Any) -> dict[str, Any]:
    return {**API, "profiles": [kw]}


def _plugins(**points: Any) -> dict[str, Any]:
    return _profile(plugins=points)


def _args(name: str, args: Any) -> dict[str, Any]:
    return _profile(pluginConfig=[{"name": name, "args": args}])


def test_defaults() -> None:
    cfg = parse_config({})
    assert cfg == SchedulerConfig()
    assert cfg == load_config(None)
    assert cfg.scheduler_name == "py-scheduler"
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1.0, 10.0)
    assert cfg.pod_max_in_unschedulable_seconds == 300.0
    assert cfg.percentage_of_nodes_to_score == 0
    assert cfg.filters == FILTER_PLUGINS and cfg.scores == SCORE_PLUGINS
    assert cfg.post_filters == POST_FILTER_PLUGINS and cfg.preemption_enabled
    assert dict(cfg.score_weights) == DEFAULT_SCORE_WEIGHTS
    # Upstream's default weights (default_plugins.go).
    assert DEFAULT_SCORE_WEIGHTS["TaintToleration"] == 3
    assert DEFAULT_SCORE_WEIGHTS["NodeAffinity"] == 2
    assert DEFAULT_SCORE_WEIGHTS["PodTopologySpread"] == 2
    assert DEFAULT_SCORE_WEIGHTS["InterPodAffinity"] == 2
    assert cfg.preemption == DefaultPreemptionArgs(10, 100, ())
    assert cfg.fit == NodeResourcesFitArgs()
    assert cfg.leader_election == LeaderElectionConfig()
    assert (cfg.qps, cfg.burst) == (50.0, 100)
    assert cfg.api_call_order == "Arrival"  # client-go's order


def test_top_level_fields() -> None:
    cfg = parse_config(
        {
            **API,
            "percentageOfNodesToScore": 50,
            "podInitialBackoffSeconds": 2,
            "podMaxBackoffSeconds": 20,
            "parallelism": 16,
            "asyncPreemption": False,
            "apiCallOrder": "Priority",
            "httpBindAddress": "0.0.0.0",
            "httpPort": 8080,
            "clientConnection": {"qps": 20, "burst": 40, "kubeconfig": "/x"},
        }
    )
    assert cfg.percentage_of_nodes_to_score == 50
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (2.0, 20.0)
    assert cfg.async_preemption is False
    assert cfg.api_call_order == "Priority"
    assert (cfg.http_bind_address, cfg.http_port) == ("0.0.0.0", 8080)
    assert (cfg.qps, cfg.burst) == (20.0, 40)


@pytest.mark.parametrize(
    ("plugins", "filters", "scores", "post_filters", "weights"),
    [
        pytest.param(
            {"filter": {"disabled": [{"name": "NodePorts"}]}},
            tuple(p for p in FILTER_PLUGINS if p != "NodePorts"),
            SCORE_PLUGINS,
            POST_FILTER_PLUGINS,
            {},
            id="disable one filter",
        ),
        pytest.param(
            {
                "score": {
                    "disabled": [{"name": "*"}],
                    "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                }
            },
            FILTER_PLUGINS,
            ("NodeResourcesFit",),
            POST_FILTER_PLUGINS,
            {"NodeResourcesFit": 5},
            id="disable all scores, enable one with a weight",
        ),
        pytest.param(
            {"score": {"enabled": [{"name": "ImageLocality", "weight": 7}]}},
            FILTER_PLUGINS,
            SCORE_PLUGINS,
            POST_FILTER_PLUGINS,
            {"ImageLocality": 7},
            id="re-enabling a default plugin changes its weight only",
        ),
        pytest.param(
            {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}},
            tuple(p for p in FILTER_PLUGINS if p != "TaintToleration"),
            tuple(p for p in SCORE_PLUGINS if p != "TaintToleration"),
            POST_FILTER_PLUGINS,
            {},
            id="multiPoint disable removes the plugin everywhere",
        ),
        pytest.param(
            {
                "multiPoint": {
                    "disabled": [{"name": "*"}],
                    "enabled": [
                        {"name": "PrioritySort"},
                        {"name": "NodeResourcesFit", "weight": 3},
                        {"name": "DefaultPreemption"},
                        {"name": "DefaultBinder"},
                    ],
                }
            },
            ("NodeResourcesFit",),
            ("NodeResourcesFit",),
            ("DefaultPreemption",),
            {"NodeResourcesFit": 3},
            id="multiPoint from scratch",
        ),
        pytest.param(
            {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
            FILTER_PLUGINS,
            SCORE_PLUGINS,
            ("DynamicResources",),
            {},
            id="disable preemption through postFilter",
        ),
        pytest.param(
            {
                "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                "bind": {"enabled": [{"name": "DefaultBinder"}]},
            },
            FILTER_PLUGINS,
            SCORE_PLUGINS,
            POST_FILTER_PLUGINS,
            {},
            id="upstream's no-op plugins are accepted",
        ),
    ],
)
def test_plugin_sets(
    plugins: dict[str, Any],
    filters: tuple[str, ...],
    scores: tuple[str, ...],
    post_filters: tuple[str, ...],
    weights: dict[str, int],
) -> None:
    cfg = parse_config(_plugins(**plugins))
    assert (cfg.filters, cfg.scores, cfg.post_filters) == (filters, scores, post_filters)
    assert dict(cfg.score_weights) == {**DEFAULT_SCORE_WEIGHTS, **weights}


def test_disable_preemption_shorthand() -> None:
    cfg = parse_config({**API, "disablePreemption": True})
    assert cfg.post_filters == ("DynamicResources",) and not cfg.preemption_enabled
    assert parse_config({**API, "disablePreemption": False}).preemption_enabled


def test_scheduler_name() -> None:
    assert parse_config(_profile(schedulerName="other")).scheduler_name == "other"


def test_default_preemption_args() -> None:
    cfg = parse_config(
        _args(
            "DefaultPreemption",
            {
                "minCandidateNodesPercentage": 20,
                "minCandidateNodesAbsolute": 5,
                "victimSchedulerNames": ["py-scheduler", "default-scheduler"],
            },
        )
    )
    assert cfg.preemption == DefaultPreemptionArgs(20, 5, ("py-scheduler", "default-scheduler"))


def test_node_resources_fit_args() -> None:
    cfg = parse_config(
        _args(
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "resources": [{"name": "cpu", "weight": 2}, {"name": "nvidia.com/gpu"}],
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                    },
                },
                "ignoredResources": ["example.com/foo"],
            },
        )
    )
    assert cfg.fit == NodeResourcesFitArgs(
        strategy="RequestedToCapacityRatio",
        resources=(("cpu", 2), ("nvidia.com/gpu", 1)),
        shape=((0, 0), (100, 10)),
        ignored_resources=("example.com/foo",),
    )
    most = parse_config(_args("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated"}}))
    assert most.fit == NodeResourcesFitArgs(strategy="MostAllocated")


@pytest.mark.parametrize(
    ("le", "want"),
    [
        pytest.param({}, LeaderElectionConfig(), id="defaults"),
        pytest.param(
            {"leaseDuration": "1m", "renewDeadline": "45s", "retryPeriod": "5s"},
            LeaderElectionConfig(lease_duration=60.0, renew_deadline=45.0, retry_period=5.0),
            id="minutes and seconds",
        ),
        pytest.param(
            {"leaseDuration": "1m30s", "renewDeadline": "1m", "retryPeriod": "500ms"},
            LeaderElectionConfig(lease_duration=90.0, renew_deadline=60.0, retry_period=0.5),
            id="compound and milliseconds",
        ),
        pytest.param(
            {
                "leaderElect": False,
                "resourceName": "x",
                "resourceNamespace": "y",
                "resourceLock": "leases",
            },
            LeaderElectionConfig(leader_elect=False, resource_name="x", resource_namespace="y"),
            id="names",
        ),
    ],
)
def test_leader_election(le: dict[str, Any], want: LeaderElectionConfig) -> None:
    assert parse_config({**API, "leaderElection": le}).leader_election == want


@pytest.mark.parametrize(
    ("raw", "field_path"),
    [
        pytest.param({**API, "bogus": 1}, "bogus", id="unknown top-level field"),
        pytest.param(
            {**API, "leaderElection": {"leaseDuraton": "1s"}},
            "leaderElection.leaseDuraton",
            id="typo",
        ),
        pytest.param(
            _plugins(filter={"enabled": [{"name": "Nope"}]}),
            "profiles[0].plugins.filter.enabled[0].name",
            id="unknown plugin",
        ),
        pytest.param(
            _plugins(score={"enabled": [{"name": "NodeAffinity", "weight": -1}]}),
            "profiles[0].plugins.score.enabled[0].weight",
            id="negative weight",
        ),
        pytest.param(
            _plugins(score={"enabled": [{"name": "NodeAffinity", "wieght": 2}]}),
            "profiles[0].plugins.score.enabled[0].wieght",
            id="unknown field in a plugin entry",
        ),
        pytest.param(
            _profile(pluginConfig=[{"name": "TaintToleration", "args": {}}]),
            "profiles[0].pluginConfig[0].name",
            id="args for a plugin without args",
        ),
        pytest.param(
            _args("DefaultPreemption", {"minCandidateNodesPercentage": 101}),
            "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage",
            id="percentage out of range",
        ),
        pytest.param(
            _args(
                "DefaultPreemption",
                {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            ),
            "profiles[0].pluginConfig[0].args",
            id="both candidate minimums zero",
        ),
        pytest.param(
            _args("DefaultPreemption", {"victimSchedulerNames": "py-scheduler"}),
            "profiles[0].pluginConfig[0].args.victimSchedulerNames",
            id="victimSchedulerNames not a list",
        ),
        pytest.param(
            _args("NodeResourcesFit", {"scoringStrategy": {"type": "Random"}}),
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            id="unknown scoring strategy",
        ),
        pytest.param(
            _args(
                "NodeResourcesFit",
                {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
            ),
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight",
            id="resource weight out of range",
        ),
        pytest.param(
            _args(
                "NodeResourcesFit",
                {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
                    }
                },
            ),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
            id="shape score out of range",
        ),
        pytest.param(
            _args(
                "NodeResourcesFit",
                {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "requestedToCapacityRatio": {
                            "shape": [
                                {"utilization": 50, "score": 1},
                                {"utilization": 50, "score": 2},
                            ]
                        },
                    }
                },
            ),
            "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
            id="shape utilization not increasing",
        ),
        pytest.param(
            {**API, "percentageOfNodesToScore": "50"},
            "percentageOfNodesToScore",
            id="string for int",
        ),
        pytest.param(
            {**API, "percentageOfNodesToScore": True}, "percentageOfNodesToScore", id="bool for int"
        ),
        pytest.param(
            {**API, "podMaxBackoffSeconds": 0}, "podMaxBackoffSeconds", id="zero max backoff"
        ),
        pytest.param(
            {**API, "podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            "podMaxBackoffSeconds",
            id="max backoff below initial",
        ),
        pytest.param({**API, "asyncPreemption": "yes"}, "asyncPreemption", id="string for bool"),
        pytest.param({**API, "apiCallOrder": "priority"}, "apiCallOrder", id="unknown call order"),
        pytest.param({**API, "apiCallOrder": 1}, "apiCallOrder", id="call order not a string"),
        pytest.param({**API, "httpPort": 70000}, "httpPort", id="port out of range"),
        pytest.param(
            {**API, "secureServing": {"certFile": "/tls/tls.crt"}},
            "secureServing.keyFile",
            id="certificate without its key",
        ),
        pytest.param(
            {**API, "secureServing": {"enabled": "yes"}},
            "secureServing.enabled",
            id="secure serving not a bool",
        ),
        pytest.param(
            {**API, "secureServing": {"clientCAFile": ""}},
            "secureServing.clientCAFile",
            id="empty client CA file",
        ),
        pytest.param(
            {**API, "secureServing": {"requestheaderClientCAFile": "/ca"}},
            "secureServing.requestheaderClientCAFile",
            id="unsupported secure serving field",
        ),
        pytest.param(
            {**API, "clientConnection": {"qps": -1}}, "clientConnection.qps", id="negative qps"
        ),
        pytest.param(
            {**API, "leaderElection": {"leaseDuration": "15"}},
            "leaderElection.leaseDuration",
            id="duration without a unit",
        ),
        pytest.param(
            {**API, "leaderElection": {"leaseDuration": 15}},
            "leaderElection.leaseDuration",
            id="duration as a number",
        ),
        pytest.param(
            {**API, "leaderElection": {"leaseDuration": "5s", "renewDeadline": "10s"}},
            "leaderElection",
            id="lease shorter than renew deadline",
        ),
        pytest.param(
            {**API, "leaderElection": {"resourceLock": "configmaps"}},
            "leaderElection.resourceLock",
            id="only leases",
        ),
        pytest.param(
            {**API, "profiles": [{}, {}]}, "profiles[0].schedulerName", id="two unnamed profiles"
        ),
        pytest.param(
            {**API, "profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            "profiles[1].schedulerName",
            id="two profiles of one name",
        ),
        pytest.param({**API, "profiles": {"schedulerName": "a"}}, "profiles", id="not a list"),
        pytest.param(
            {**API, "profiles": [{"pluginConfig": {"name": "NodeResourcesFit"}}]},
            "profiles[0].pluginConfig",
            id="pluginConfig not a list",
        ),
        pytest.param({**API, "profiles": [[]]}, "profiles[0]", id="profile not a mapping"),
        pytest.param({"apiVersion": "v1beta3"}, "apiVersion", id="wrong apiVersion"),
        pytest.param({"kind": "Pod"}, "kind", id="wrong kind"),
    ],
)
def test_errors_name_the_field_path_and_the_file(raw: Any, field_path: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "sched.yaml")
    assert str(exc.value).startswith(f"sched.yaml: {field_path}: ")


def _term(*exprs: dict[str, Any], fields: Any = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        out["matchFields"] = list(fields)
    return out


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


POOL_IN = {"key": "pool", "operator": "In", "values": ["a", "b"]}
TERMS = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
TERM0 = f"{TERMS}[0]"
ZONE_STRICT = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}


def _list_defaults(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"defaultingType": "List", "defaultConstraints": list(constraints)}


def test_node_affinity_args() -> None:
    cfg = parse_config(
        _args(
            "NodeAffinity",
            {
                **_required(
                    _term(POOL_IN),
                    _term(
                        {"key": "gen", "operator": "Gt", "values": ["3"]},
                        fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                    ),
                ),
            },
        )
    )
    assert cfg.node_affinity == NodeAffinityArgs(
        required=(
            NodeSelectorTerm((NodeSelectorRequirement("pool", "In", ("a", "b")),), ()),
            NodeSelectorTerm(
                (NodeSelectorRequirement("gen", "Gt", ("3",)),),
                (NodeSelectorRequirement("metadata.name", "In", ("n1",)),),
            ),
        ),
    )
    preferred = parse_config(
        _args(
            "NodeAffinity",
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "NodeAffinityArgs",
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 10, "preference": _term(POOL_IN)},
                        {"weight": 0, "preference": _term(POOL_IN)},  # ignored, as upstream
                        {"weight": 5, "preference": {}},  # matches nothing: ignored
                    ]
                },
            },
        )
    )
    assert preferred.node_affinity == NodeAffinityArgs(
        None, ((10, NodeSelectorTerm((NodeSelectorRequirement("pool", "In", ("a", "b")),), ())),)
    )
    assert parse_config(_args("NodeAffinity", {})).node_affinity == NodeAffinityArgs()


def test_topology_spread_args() -> None:
    assert parse_config({}).topology_spread == PodTopologySpreadArgs((), True)
    cfg = parse_config(
        _args(
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {
                        "maxSkew": 3,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "minDomains": 2,
                        "nodeAffinityPolicy": "Ignore",
                        "nodeTaintsPolicy": "Honor",
                        "matchLabelKeys": ["app"],
                    },
                ],
            },
        )
    )
    assert cfg.topology_spread == PodTopologySpreadArgs(
        (
            TopologySpreadConstraint(1, "zone", "DoNotSchedule", None, 1, "Honor", "Ignore"),
            TopologySpreadConstraint(
                3, "kubernetes.io/hostname", "ScheduleAnyway", None, 2, "Ignore", "Honor"
            ),
        ),
        system_defaulting=False,
    )
    empty = parse_config(_args("PodTopologySpread", {"defaultingType": "List"}))
    assert empty.topology_spread == PodTopologySpreadArgs((), False)


def test_inter_pod_affinity_and_balanced_allocation_args() -> None:
    assert parse_config({}).inter_pod_affinity == InterPodAffinityArgs(1, False)
    cfg = parse_config(
        _profile(
            pluginConfig=[
                {
                    "name": "InterPodAffinity",
                    "args": {
                        "hardPodAffinityWeight": 0,
                        "ignorePreferredTermsOfExistingPods": True,
                    },
                },
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {
                        "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu"}]
                    },
                },
            ]
        )
    )
    assert cfg.inter_pod_affinity == InterPodAffinityArgs(0, True)
    assert cfg.balanced_allocation == BalancedAllocationArgs((("cpu", 1), ("example.com/gpu", 1)))
    assert parse_config({}).balanced_allocation.resources == (("cpu", 1), ("memory", 1))


def test_ignored_resource_groups() -> None:
    cfg = parse_config(
        _args(
            "NodeResourcesFit",
            {"ignoredResources": ["example.com/a"], "ignoredResourceGroups": ["example.org"]},
        )
    )
    assert cfg.fit.ignored_resources == ("example.com/a",)
    assert cfg.fit.ignored_resource_groups == ("example.org",)


@pytest.mark.parametrize(
    ("plugin", "args", "field_path", "problem"),
    [
        pytest.param(
            "NodeAffinity",
            _required(),
            TERMS,
            "must have at least one term (none matches no node)",
            id="no required terms",
        ),
        pytest.param(
            "NodeAffinity",
            _required({}),
            TERM0,
            "an empty term matches no node",
            id="an empty required term",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "pool", "operator": "Equals", "values": ["a"]})),
            f"{TERM0}.matchExpressions[0].operator",
            "'Equals': supported are In, NotIn, Exists, DoesNotExist, Gt, Lt",
            id="unknown operator",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "pool", "operator": "In"})),
            f"{TERM0}.matchExpressions[0].values",
            "for In, must be non-empty",
            id="In without values",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "pool", "operator": "Exists", "values": ["a"]})),
            f"{TERM0}.matchExpressions[0].values",
            "for Exists, must be empty",
            id="Exists with values",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "gen", "operator": "Lt", "values": ["three"]})),
            f"{TERM0}.matchExpressions[0].values",
            "for Lt, must be a single integer",
            id="Lt not an integer",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "Bad Key", "operator": "Exists"})),
            f"{TERM0}.matchExpressions[0].key",
            "'Bad Key': must be 63 characters at most, alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric",
            id="invalid label key",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term({"key": "pool", "operator": "In", "values": ["a b"]})),
            f"{TERM0}.matchExpressions[0].values[0]",
            "'a b' is not a valid label value",
            id="invalid label value",
        ),
        pytest.param(
            "NodeAffinity",
            _required(_term(fields=[{"key": "metadata.uid", "operator": "In", "values": ["x"]}])),
            f"{TERM0}.matchFields[0].key",
            "'metadata.uid': matchFields support metadata.name only",
            id="match field other than the name",
        ),
        pytest.param(
            "NodeAffinity",
            _required(
                _term(fields=[{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}])
            ),
            f"{TERM0}.matchFields[0].values",
            "must have one element",
            id="match field with two names",
        ),
        pytest.param(
            "NodeAffinity",
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 101, "preference": _term(POOL_IN)}
                    ]
                }
            },
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "101 is out of range [0, 100]",
            id="preferred weight out of range",
        ),
        pytest.param(
            "NodeAffinity",
            {"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
            "addedAffinity.requiredDuringSchedulingRequiredDuringExecution",
            "unknown or unsupported field",
            id="a field the API does not have",
        ),
        pytest.param(
            "NodeAffinity",
            {"kind": "PodTopologySpreadArgs"},
            "kind",
            "'PodTopologySpreadArgs' has to match plugin args (NodeAffinityArgs)",
            id="args of another plugin",
        ),
        pytest.param(
            "PodTopologySpread",
            {"defaultConstraints": [ZONE_STRICT]},
            "defaultingType",
            "System is invalid when .defaultConstraints are not empty (set List to use them)",
            id="constraints without List",
        ),
        pytest.param(
            "PodTopologySpread",
            {"defaultingType": "Custom"},
            "defaultingType",
            "'Custom': supported are System and List",
            id="unknown defaulting type",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults({**ZONE_STRICT, "maxSkew": 0}),
            "defaultConstraints[0].maxSkew",
            "0 is out of range [1, 2147483647]",
            id="maxSkew zero",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults({"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}),
            "defaultConstraints[0].topologyKey",
            "can not be empty",
            id="no topology key",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults({**ZONE_STRICT, "whenUnsatisfiable": "Sometimes"}),
            "defaultConstraints[0].whenUnsatisfiable",
            "'Sometimes': supported are DoNotSchedule and ScheduleAnyway",
            id="unknown action",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults({**ZONE_STRICT, "labelSelector": {"matchLabels": {"app": "web"}}}),
            "defaultConstraints[0].labelSelector",
            "constraint must not define a selector, as they deduced for each pod",
            id="a selector",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults(ZONE_STRICT, {**ZONE_STRICT, "maxSkew": 2}),
            "defaultConstraints[1]",
            "duplicate of defaultConstraints[0]: {zone, DoNotSchedule}",
            id="the same key and action twice",
        ),
        pytest.param(
            "PodTopologySpread",
            _list_defaults({**ZONE_STRICT, "nodeTaintsPolicy": "Sometimes"}),
            "defaultConstraints[0].nodeTaintsPolicy",
            "'Sometimes': supported are Honor and Ignore",
            id="unknown inclusion policy",
        ),
        pytest.param(
            "InterPodAffinity",
            {"hardPodAffinityWeight": 101},
            "hardPodAffinityWeight",
            "101 is out of range [0, 100]",
            id="hard weight out of range",
        ),
        pytest.param(
            "InterPodAffinity",
            {"ignorePreferredTermsOfExistingPods": "yes"},
            "ignorePreferredTermsOfExistingPods",
            "expected true or false, got 'yes'",
            id="not a boolean",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu", "weight": 2}]},
            "resources[0].weight",
            "2: must be 1",
            id="balanced weight not 1",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            "resources[1].name",
            "duplicate resource 'cpu'",
            id="balanced resource twice",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"ignoredResourceGroups": ["example.com/gpu"]},
            "ignoredResourceGroups[0]",
            "'example.com/gpu': resource group name can't contain '/'",
            id="group with a slash",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"ignoredResources": ["not a name"]},
            "ignoredResources[0]",
            "'not a name': must be 63 characters at most, alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric",
            id="ignored resource not a name",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "scoringStrategy.requestedToCapacityRatio",
            "must be specified when type is RequestedToCapacityRatio",
            id="ratio without its shape",
        ),
        pytest.param(
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
                }
            },
            "scoringStrategy.requestedToCapacityRatio",
            "must not be set when type is MostAllocated",
            id="a shape for another strategy",
        ),
    ],
)
def test_plugin_args_errors(plugin: str, args: Any, field_path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(_args(plugin, args), "sched.yaml")
    assert str(exc.value) == f"sched.yaml: profiles[0].pluginConfig[0].args.{field_path}: {problem}"


def test_plugin_config_twice_is_an_error() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(
            _profile(
                pluginConfig=[
                    {"name": "InterPodAffinity", "args": {}},
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
                ]
            ),
            "sched.yaml",
        )
    assert str(exc.value) == (
        "sched.yaml: profiles[0].pluginConfig[1].name: duplicate: InterPodAffinity is "
        "configured in pluginConfig[0]"
    )


def test_kube_scheduler_s_own_defaults_are_ours() -> None:
    """A configuration kube-scheduler v1.37.1 wrote out (every default made explicit) is
    read as py-scheduler's defaults: the plugin sets, weights and args all agree."""
    cfg = load_config(Path(__file__).parent / "configs" / "kube-scheduler-v1.37-defaults.yaml")
    assert cfg == replace(
        SchedulerConfig(),
        scheduler_name="default-scheduler",
        leader_election=replace(LeaderElectionConfig(), resource_name="kube-scheduler"),
        profiling_requested="enableProfiling",
        kubeconfig="/etc/kubernetes/scheduler.conf",
    )


@pytest.mark.parametrize(
    ("plugins", "want"),
    [
        pytest.param({}, DEFAULT_SCORE_WEIGHTS, id="defaults"),
        pytest.param(
            {"score": {"enabled": [{"name": "NodeAffinity"}]}},
            {**DEFAULT_SCORE_WEIGHTS, "NodeAffinity": 1},
            id="re-enabled without a weight: 1, not the default's 2",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 0}]}},
            {**DEFAULT_SCORE_WEIGHTS, "TaintToleration": 1},
            id="weight 0 is 1",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 7}]},
                "score": {"enabled": [{"name": "ImageLocality", "weight": 300}]},
            },
            {**DEFAULT_SCORE_WEIGHTS, "ImageLocality": 300},
            id="score's weight over multiPoint's, above 100",
        ),
        pytest.param(
            {"preScore": {"enabled": [{"name": "InterPodAffinity", "weight": 9}]}},
            DEFAULT_SCORE_WEIGHTS,
            id="preScore weights are not read",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "NodePorts", "weight": 5}]}},
            DEFAULT_SCORE_WEIGHTS,
            id="a plugin that does not score has no weight",
        ),
    ],
)
def test_score_weights_as_upstream_merges_them(
    plugins: dict[str, Any], want: dict[str, int]
) -> None:
    """Upstream's mergePluginSet: an enabled entry replaces the default one, weight and
    all; getValidScoreWeights: 0 is 1, Score's weight wins over MultiPoint's."""
    assert dict(parse_config(_plugins(**plugins)).score_weights) == want


def test_enabling_a_plugin_twice_at_one_point_is_an_error() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(
            _plugins(score={"enabled": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]}),
            "sched.yaml",
        )
    assert str(exc.value) == (
        "sched.yaml: profiles[0].plugins.score.enabled[1].name: ImageLocality is already enabled[0]"
    )


def test_pod_group_points_are_accepted_empty_only() -> None:
    empty = {"placementGenerate": {}, "placementScore": {}, "podGroupPostFilter": {}}
    assert parse_config(_plugins(**empty)).scores == SCORE_PLUGINS
    with pytest.raises(ConfigError) as exc:
        parse_config(_plugins(placementScore={"enabled": [{"name": "X"}]}), "sched.yaml")
    assert str(exc.value).startswith(
        "sched.yaml: profiles[0].plugins.placementScore.enabled: the pod-group extension "
        "points are not built"
    )


def test_debugging_and_cache_fields() -> None:
    cfg = parse_config({**API, "delayCacheUntilActive": True, "enableProfiling": False})
    assert cfg.delay_cache_until_active and cfg.profiling_requested == ""
    contention = parse_config({**API, "enableContentionProfiling": True})
    assert contention.profiling_requested == "enableContentionProfiling"
    assert not parse_config({}).delay_cache_until_active
    with pytest.raises(ConfigError) as exc:
        parse_config({**API, "delayCacheUntilActive": "yes"}, "sched.yaml")
    assert str(exc.value) == "sched.yaml: delayCacheUntilActive: expected true or false, got 'yes'"


def test_extenders() -> None:
    cfg = parse_config(
        {
            **API,
            "extenders": [
                {"urlPrefix": "http://a/x", "bindVerb": "bind", "ignorable": True},
                {
                    "urlPrefix": "https://b:8443",
                    "filterVerb": "filter",
                    "preemptVerb": "preempt",
                    "prioritizeVerb": "prioritize",
                    "weight": 3,
                    "enableHTTPS": True,
                    "tlsConfig": {"insecure": True, "serverName": "b.svc", "caData": "YWJj"},
                    "httpTimeout": "30s",
                    "nodeCacheCapable": True,
                    "managedResources": [
                        {"name": "example.com/gpu", "ignoredByScheduler": True},
                        {"name": "example.com/fpga"},
                    ],
                },
            ],
            "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}],
        }
    )
    # Ignorable extenders go last, as upstream asks them; every profile has them.
    first, last = cfg.extenders
    assert (first.url_prefix, last.url_prefix, last.ignorable) == (
        "https://b:8443",
        "http://a/x",
        True,
    )
    assert (first.weight, first.http_timeout, first.node_cache_capable) == (3, 30.0, True)
    assert (first.preempt_verb, last.preempt_verb) == ("preempt", "")
    assert first.tls is not None and (first.tls.server_name, first.tls.ca_data) == ("b.svc", b"abc")
    assert first.managed_resources == (("example.com/gpu", True), ("example.com/fpga", False))
    assert last.http_timeout == 5.0  # upstream's DefaultExtenderTimeout
    # ignoredByScheduler resources become every profile's NodeResourcesFit ignoredResources.
    for prof in cfg.profiles:
        assert prof.extenders == cfg.extenders
        assert prof.fit.ignored_resources == ("example.com/gpu",)


@pytest.mark.parametrize(
    ("extenders", "field_path", "problem"),
    [
        pytest.param({"urlPrefix": "a:80"}, "extenders[0].urlPrefix", "http", id="no scheme"),
        pytest.param({}, "extenders[0].urlPrefix", "non-empty", id="no url"),
        pytest.param(
            {"urlPrefix": "http://a", "prioritizeVerb": "p"},
            "extenders[0].weight",
            "must have a positive weight applied to it",
            id="prioritizer without weight",
        ),
        pytest.param(
            {"urlPrefix": "http://a", "managedResources": [{"name": "cpu"}]},
            "extenders[0].managedResources[0].name",
            "invalid extended resource name",
            id="native resource",
        ),
        pytest.param(
            {"urlPrefix": "http://a", "managedResources": [{"name": "kubernetes.io/x"}]},
            "extenders[0].managedResources[0].name",
            "invalid extended resource name",
            id="kubernetes.io resource",
        ),
        pytest.param(
            {"urlPrefix": "http://a", "tlsConfig": {"certData": "%%"}},
            "extenders[0].tlsConfig.certData",
            "base64",
            id="certData not base64",
        ),
        pytest.param(
            {"urlPrefix": "http://a", "httpTimeout": 5},
            "extenders[0].httpTimeout",
            "duration",
            id="timeout not a duration",
        ),
        pytest.param(
            {"urlPrefix": "http://a", "verb": "x"},
            "extenders[0].verb",
            "unknown",
            id="unknown field",
        ),
    ],
)
def test_extender_errors(extenders: dict[str, Any], field_path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({**API, "extenders": [extenders]}, "sched.yaml")
    assert str(exc.value).startswith(f"sched.yaml: {field_path}: ")
    assert problem in str(exc.value)


def test_extender_errors_across_entries() -> None:
    two_binders = [
        {"urlPrefix": "http://a", "bindVerb": "b"},
        {"urlPrefix": "http://c", "bindVerb": "b"},
    ]
    with pytest.raises(ConfigError, match=r"extenders: found 2 extenders implementing bind"):
        parse_config({**API, "extenders": two_binders})
    twice = [
        {"urlPrefix": "http://a", "managedResources": [{"name": "example.com/gpu"}]},
        {"urlPrefix": "http://c", "managedResources": [{"name": "example.com/gpu"}]},
    ]
    with pytest.raises(
        ConfigError, match=r"extenders\[1\].managedResources\[0\].name: .*duplicate"
    ):
        parse_config({**API, "extenders": twice})


def test_secure_serving() -> None:
    assert parse_config(API).secure_serving == SecureServing(enabled=False)
    assert parse_config({**API, "secureServing": {}}).secure_serving == SecureServing(enabled=True)
    got = parse_config(
        {
            **API,
            "secureServing": {"enabled": True, "certFile": "/t/tls.crt", "keyFile": "/t/tls.key"},
        }
    ).secure_serving
    assert got == SecureServing(enabled=True, cert_file="/t/tls.crt", key_file="/t/tls.key")
    assert (
        parse_config({**API, "secureServing": {"enabled": False}}).secure_serving.enabled is False
    )
    with_ca = parse_config({**API, "secureServing": {"clientCAFile": "/etc/k8s/ca.crt"}})
    assert with_ca.secure_serving == SecureServing(enabled=True, client_ca_file="/etc/k8s/ca.crt")


def test_load_config_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "podMaxBackoffSeconds: 30\n"
        "profiles:\n"
        "- schedulerName: mine\n"
        "  plugins:\n"
        "    score:\n"
        "      enabled:\n"
        "      - name: NodeResourcesBalancedAllocation\n"
        "        weight: 4\n"
    )
    cfg = load_config(path)
    assert (cfg.scheduler_name, cfg.pod_max_backoff_seconds) == ("mine", 30.0)
    assert cfg.score_weights["NodeResourcesBalancedAllocation"] == 4
    assert load_config(str(path)) == cfg


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        load_config(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("nope: 1\n")
    with pytest.raises(ConfigError, match=r"unknown\.yaml: nope: unknown or unsupported field"):
        load_config(unknown)
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config(tmp_path / "missing.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == SchedulerConfig()


def test_all_plugins_lists_each_plugin_once() -> None:
    assert len(ALL_PLUGINS) == len(set(ALL_PLUGINS))
    assert set(ALL_PLUGINS) == (
        set(FILTER_PLUGINS)
        | set(SCORE_PLUGINS)
        | set(POST_FILTER_PLUGINS)
        | set(PRE_ENQUEUE_PLUGINS)
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("false", False), ("0", False), ("F", False), ("true", True), ("1", True)],
)
def test_client_feature_gates_read_the_environment_as_client_go(
    value: str | None, expected: bool
) -> None:
    env = {} if value is None else {"KUBE_FEATURE_WatchListClient": value}
    assert client_feature("WatchListClient", env) is expected


def test_a_client_feature_gate_that_is_not_a_boolean_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"KUBE_FEATURE_WatchListClient: 'off' is not a boolean"):
        client_feature("WatchListClient", {"KUBE_FEATURE_WatchListClient": "off"})


def test_run_refuses_a_client_feature_gate_that_is_not_a_boolean(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler import cli

    monkeypatch.setenv("KUBE_FEATURE_WatchListClient", "yes please")
    assert cli.main(["run"]) == 2
    err = capsys.readouterr().err
    assert "KUBE_FEATURE_WatchListClient: 'yes please' is not a boolean" in err


@pytest.mark.parametrize(
    ("flag", "configured", "env", "want"),
    [
        pytest.param("/flag", "/config", "/env", "/flag", id="the flag first"),
        pytest.param(None, "/config", "/env", "/config", id="then the configuration's"),
        pytest.param(None, "", "/env", "/env", id="then $KUBECONFIG"),
        pytest.param(None, "", None, None, id="else in-cluster"),
    ],
)
def test_which_kubeconfig_run_and_explain_use(
    flag: str | None,
    configured: str,
    env: str | None,
    want: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    from scheduler.cli import _kubeconfig

    if env is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    else:
        monkeypatch.setenv("KUBECONFIG", env)
    cfg = parse_config({**API, "clientConnection": {"kubeconfig": configured}})
    assert cfg.kubeconfig == configured
    assert _kubeconfig(argparse.Namespace(kubeconfig=flag), cfg) == want
