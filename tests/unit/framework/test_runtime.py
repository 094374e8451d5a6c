"""Framework: the two-pass filter with nominated pods, PreFilter (skip, rejection, node-name
results), Filter, PostFilter and weighted scoring. Mirrors upstream's
framework/runtime/framework_test.go where a case has a counterpart."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.backend.queue.nominator import Nominator
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    PostFilterResult,
    PreFilterResult,
    Status,
)
from scheduler.framework.plugins.noderesources.fit import NodeResourcesFit
from scheduler.framework.runtime import Framework
from scheduler.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod

FIT = "NodeResourcesFit"


def pod(name: str, prio: int, cpu: str, **labels: str) -> PodInfo:
    b = make_pod(name).req(cpu=cpu).priority(prio)
    for k, v in labels.items():
        b.label(k, v)
    return b.info()


def node(*pods: PodInfo) -> NodeInfo:
    return make_node("n1").alloc(cpu="4", memory="8Gi", pods=110).info(*pods)


def framework(*plugins: object, nominated: Sequence[tuple[PodInfo, str]] = ()) -> Framework:
    nom = Nominator()
    for p, n in nominated:
        nom.add_nominated_pod(p, n)
    return Framework.build("p", plugins, score_weights={}, nominator=nom)


class NeedsCompany:
    """Fits only a node that already holds a pod labelled app=db (an affinity stand-in)."""

    name = "NeedsCompany"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if any(p.labels.get("app") == "db" for p in node_info.pods.values()):
            return SUCCESS
        return Status.unschedulable("no company", plugin=self.name)


class Names(list[str]):
    """PreFilter state that clones itself, as mutable state data must."""

    def clone(self) -> Names:
        return Names(self)


class CountingPreFilter:
    """Records the extension calls; ``fail_add`` makes AddPod fail."""

    def __init__(self, name: str = "Counting", *, fail_add: bool = False) -> None:
        self.name = name
        self.fail_add = fail_add
        self.added: list[str] = []
        self.removed: list[str] = []

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(self.name, Names())
        return None, SUCCESS

    def pre_filter_extensions(self) -> CountingPreFilter:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        if self.fail_add:
            return Status.unschedulable("cannot add")
        state.read(self.name).append(to_add.name)
        self.added.append(to_add.name)
        return SUCCESS

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        self.removed.append(to_remove.name)
        return SUCCESS


# --------------------------------------------------------------------------- two-pass filter


@pytest.mark.parametrize(
    ("nominated", "code"),
    [
        pytest.param([], Code.SUCCESS, id="no nominated pods: fits"),
        pytest.param(
            [pod("big", 10, "3")],
            Code.UNSCHEDULABLE,
            id="higher-priority nominated pod takes the room",
        ),
        pytest.param(
            [pod("big", 5, "3")], Code.UNSCHEDULABLE, id="equal-priority nominated pod counts too"
        ),
        pytest.param([pod("big", 4, "3")], Code.SUCCESS, id="lower-priority nominated pod ignored"),
        pytest.param(
            [pod("small", 10, "1"), pod("low", 1, "3")],
            Code.SUCCESS,
            id="only the pods of priority >= are added",
        ),
    ],
)
def test_two_pass_filter_adds_nominated_pods_of_higher_or_equal_priority(
    nominated: list[PodInfo], code: Code
) -> None:
    fw = framework(NodeResourcesFit(), nominated=[(p, "n1") for p in nominated])
    incoming = pod("p", 5, "2")
    st = fw.run_filter_with_nominated_pods(CycleState(), incoming, node())
    assert st.code == code
    if code == Code.UNSCHEDULABLE:
        assert st.reasons == ("Insufficient cpu",) and st.plugin == FIT


def test_nominated_pods_on_other_nodes_do_not_count() -> None:
    fw = framework(NodeResourcesFit(), nominated=[(pod("big", 10, "3"), "n2")])
    assert fw.run_filter_with_nominated_pods(CycleState(), pod("p", 5, "2"), node()).is_success()


def test_the_pod_itself_is_ignored() -> None:
    incoming = pod("p", 5, "3")
    fw = framework(NodeResourcesFit(), nominated=[(incoming, "n1")])
    assert fw.run_filter_with_nominated_pods(CycleState(), incoming, node()).is_success()


def test_a_nominated_pod_already_on_the_node_is_not_counted_twice() -> None:
    big = pod("big", 10, "2")
    fw = framework(NodeResourcesFit(), nominated=[(big, "n1")])
    assert fw.run_filter_with_nominated_pods(CycleState(), pod("p", 5, "2"), node(big)).is_success()


def test_second_pass_rejects_a_pod_that_fits_only_thanks_to_nominated_pods() -> None:
    db = pod("db", 10, "1", app="db")
    fw = framework(NeedsCompany(), nominated=[(db, "n1")])
    st = fw.run_filter_with_nominated_pods(CycleState(), pod("p", 5, "1"), node())
    assert (st.code, st.plugin) == (Code.UNSCHEDULABLE, "NeedsCompany")
    # With the company really on the node, both passes pass.
    assert fw.run_filter_with_nominated_pods(CycleState(), pod("p", 5, "1"), node(db)).is_success()


def test_two_pass_filter_leaves_state_and_node_alone() -> None:
    pre = CountingPreFilter()
    fw = framework(pre, NodeResourcesFit(), nominated=[(pod("a", 10, "1"), "n1")])
    state = CycleState()
    incoming = pod("p", 5, "1")
    fw.run_pre_filter(state, incoming, Snapshot())
    ni = node()
    assert fw.run_filter_with_nominated_pods(state, incoming, ni).is_success()
    assert pre.added == ["a"]  # the extension saw the nominated pod ...
    assert state.read("Counting") == []  # ... in a clone of the state
    assert ni.pods == {} and ni.requested.milli_cpu == 0  # and of the node


def test_failing_add_pod_extension_is_an_error() -> None:
    fw = framework(CountingPreFilter(fail_add=True), nominated=[(pod("a", 10, "1"), "n1")])
    state = CycleState()
    fw.run_pre_filter(state, pod("p", 5, "1"), Snapshot())
    st = fw.run_filter_with_nominated_pods(state, pod("p", 5, "1"), node())
    assert (st.code, st.plugin) == (Code.ERROR, "Counting")


def test_skipped_pre_filter_plugins_get_no_extension_calls() -> None:
    class Skipping(CountingPreFilter):
        def pre_filter(
            self, state: CycleState, pod: PodInfo, snapshot: Snapshot
        ) -> tuple[PreFilterResult | None, Status]:
            return None, SKIP

    pre = Skipping()
    fw = framework(pre, nominated=[(pod("a", 10, "1"), "n1")])
    state = CycleState()
    fw.run_pre_filter(state, pod("p", 5, "1"), Snapshot())
    assert fw.run_filter_with_nominated_pods(state, pod("p", 5, "1"), node()).is_success()
    assert pre.added == []


# --------------------------------------------------------------------------- filter


class Verdict:
    def __init__(self, name: str, status: Status) -> None:
        self.name = name
        self.status = status
        self.calls = 0

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        self.calls += 1
        return self.status


def test_first_filter_rejection_wins_and_names_its_plugin() -> None:
    a = Verdict("A", SUCCESS)
    b = Verdict("B", Status.unresolvable("no"))
    c = Verdict("C", Status.unschedulable("never asked"))
    fw = framework(a, b, c)
    st = fw.run_filter(CycleState(), pod("p", 0, "1"), node())
    assert (st.code, st.reasons, st.plugin) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("no",), "B")
    assert (a.calls, b.calls, c.calls) == (1, 1, 0)


def test_filters_of_skipped_plugins_do_not_run() -> None:
    b = Verdict("B", Status.unresolvable("no"))
    state = CycleState()
    state.skip_filter_plugins.add("B")
    assert framework(b).run_filter(state, pod("p", 0, "1"), node()).is_success()
    assert b.calls == 0


# --------------------------------------------------------------------------- prefilter


class Pre:
    def __init__(self, name: str, status: Status = SUCCESS, nodes: set[str] | None = None) -> None:
        self.name = name
        self.status = status
        self.nodes = nodes
        self.calls = 0

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        self.calls += 1
        res = PreFilterResult(frozenset(self.nodes)) if self.nodes is not None else None
        return res, self.status

    def pre_filter_extensions(self) -> None:
        return None


def test_pre_filter_skip_marks_the_filter_skipped() -> None:
    state = CycleState()
    result, st = framework(Pre("A", SKIP), Pre("B")).run_pre_filter(
        state, pod("p", 0, "1"), Snapshot()
    )
    assert (result, st) == (None, SUCCESS)
    assert state.skip_filter_plugins == {"A"}


def test_pre_filter_unschedulable_runs_the_rest_then_reports() -> None:
    a, b = Pre("A", Status.unschedulable("wait")), Pre("B")
    state = CycleState()
    _, st = framework(a, b).run_pre_filter(state, pod("p", 0, "1"), Snapshot())
    assert (st.code, st.plugin, b.calls) == (Code.UNSCHEDULABLE, "A", 1)


def test_pre_filter_unresolvable_stops_at_once() -> None:
    a, b = Pre("A", Status.unresolvable("never")), Pre("B")
    _, st = framework(a, b).run_pre_filter(CycleState(), pod("p", 0, "1"), Snapshot())
    assert (st.code, st.plugin, b.calls) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "A", 0)


def test_pre_filter_error_stops_at_once() -> None:
    a, b = Pre("A", Status.error("boom")), Pre("B")
    _, st = framework(a, b).run_pre_filter(CycleState(), pod("p", 0, "1"), Snapshot())
    assert (st.code, st.plugin, b.calls) == (Code.ERROR, "A", 0)


@pytest.mark.parametrize(
    ("plugins", "names", "code", "message"),
    [
        pytest.param(
            [Pre("A", nodes={"n1", "n2"})], {"n1", "n2"}, Code.SUCCESS, "", id="one result"
        ),
        pytest.param(
            [Pre("A", nodes={"n1", "n2"}), Pre("B"), Pre("C", nodes={"n2", "n3"})],
            {"n2"},
            Code.SUCCESS,
            "",
            id="results intersect",
        ),
        pytest.param(
            [Pre("A", nodes=set())],
            set(),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "node(s) didn't satisfy plugin A",
            id="one plugin with no nodes",
        ),
        pytest.param(
            [Pre("A", nodes={"n1"}), Pre("B", nodes={"n2"})],
            set(),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "node(s) didn't satisfy plugin(s) [A B] simultaneously",
            id="disjoint results",
        ),
    ],
)
def test_pre_filter_node_names(
    plugins: list[Pre], names: set[str], code: Code, message: str
) -> None:
    result, st = framework(*plugins).run_pre_filter(CycleState(), pod("p", 0, "1"), Snapshot())
    assert result is not None and result.node_names == frozenset(names)
    assert st.code == code and st.message() == message


# --------------------------------------------------------------------------- postfilter


class Post:
    def __init__(self, name: str, status: Status, nominate: str = "") -> None:
        self.name = name
        self.status = status
        self.nominate = nominate
        self.calls = 0

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        self.calls += 1
        return (PostFilterResult(self.nominate) if self.nominate else None), self.status


def test_post_filter_first_success_wins() -> None:
    a = Post("A", Status.unschedulable("a no"))
    b = Post("B", SUCCESS, nominate="n1")
    c = Post("C", SUCCESS, nominate="n2")
    result, st = framework(a, b, c).run_post_filter(CycleState(), pod("p", 0, "1"), {})
    assert result == PostFilterResult("n1") and (st.plugin, c.calls) == ("B", 0)


def test_post_filter_all_unschedulable_collects_reasons() -> None:
    a, b = Post("A", Status.unschedulable("a no")), Post("B", Status.unschedulable("b no"))
    result, st = framework(a, b).run_post_filter(CycleState(), pod("p", 0, "1"), {})
    assert result is None
    assert (st.code, st.reasons, st.plugin) == (Code.UNSCHEDULABLE, ("a no", "b no"), "A")


def test_post_filter_unresolvable_stops() -> None:
    a, b = Post("A", Status.unresolvable("a never")), Post("B", SUCCESS)
    _, st = framework(a, b).run_post_filter(CycleState(), pod("p", 0, "1"), {})
    assert (st.code, st.plugin, b.calls) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "A", 0)


def test_post_filter_error_stops() -> None:
    a, b = Post("A", Status.error("boom")), Post("B", SUCCESS)
    _, st = framework(a, b).run_post_filter(CycleState(), pod("p", 0, "1"), {})
    assert (st.code, st.plugin, b.calls) == (Code.ERROR, "A", 0)


# --------------------------------------------------------------------------- score


class Scorer:
    def __init__(self, name: str, scores: dict[str, int], *, double: bool = False) -> None:
        self.name = name
        self.scores = scores
        self.double = double

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        return self.scores[node_info.name]

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        if self.double:
            scores[:] = [2 * s for s in scores]


class SkippingScorer(Scorer):
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        return SKIP


def _nodes(*names: str) -> list[NodeInfo]:
    return [make_node(n).info() for n in names]


def test_run_score_weighted_sum_of_normalized_scores() -> None:
    a = Scorer("A", {"n1": 10, "n2": 20})
    b = Scorer("B", {"n1": 30, "n2": 5}, double=True)
    fw = Framework.build("p", [a, b], score_weights={"A": 3, "B": 2})
    got = fw.run_score(CycleState(), pod("p", 0, "1"), _nodes("n1", "n2"))
    assert [(s.name, s.score) for s in got] == [("n1", 10 * 3 + 60 * 2), ("n2", 20 * 3 + 10 * 2)]


def test_run_score_skips_plugins_and_zero_weights() -> None:
    a = Scorer("A", {"n1": 10})
    s = SkippingScorer("S", {"n1": 50})
    z = Scorer("Z", {"n1": 99})
    fw = Framework.build("p", [a, s, z], score_weights={"Z": 0})
    assert [w.plugin.name for w in fw.score_plugins] == ["A", "S"]
    state = CycleState()
    assert fw.run_pre_score(state, pod("p", 0, "1"), _nodes("n1"), Snapshot()).is_success()
    assert state.skip_score_plugins == {"S"}
    assert [x.score for x in fw.run_score(state, pod("p", 0, "1"), _nodes("n1"))] == [10]


# --------------------------------------------------------------------------- wiring


class WithHints(Verdict):
    def events_to_register(self) -> list[EventRegistration]:
        return [EventRegistration(ClusterEvent("Node", "Add"))]


def test_build_wires_plugins_by_extension_point() -> None:
    f1 = WithHints("F1", SUCCESS)
    f2 = Verdict("F2", SUCCESS)
    post = Post("P", SUCCESS)
    sc = Scorer("S", {})
    fw = Framework.build(
        "prof", [f1, f2, post, sc], score_weights={}, filters=["F1"], post_filters=["P"]
    )
    assert [p.name for p in fw.filter_plugins] == ["F1"]
    assert [p.name for p in fw.post_filter_plugins] == ["P"]
    assert [w.plugin.name for w in fw.score_plugins] == ["S"]
    assert list(fw.hints) == ["F1"]
    assert fw.plugin_names == ["F1", "P", "S"]


class _Gate:
    """A PreEnqueue plugin that says no while its name is in ``closed``."""

    def __init__(self, name: str, closed: set[str], calls: list[str]) -> None:
        self.name = name
        self.closed = closed
        self.calls = calls

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.calls.append(self.name)
        if self.name in self.closed:
            return Status.unresolvable(f"{self.name} says no")
        return Status()


def test_pre_enqueue_asks_the_plugin_that_gated_the_pod_first() -> None:
    """Upstream's runPreEnqueuePluginsForPod: the gating plugin runs first; while it still
    says no it stays the gating plugin (its hints may let the pod in), although a plugin
    before it now says no too; once it says yes, the others run in order."""
    closed = {"B"}
    calls: list[str] = []
    fw = Framework.build(
        "p", [_Gate("A", closed, calls), _Gate("B", closed, calls)], score_weights={}
    )
    pod = make_pod("p").info()
    st = fw.run_pre_enqueue(pod)
    assert st is not None and st.plugin == "B" and calls == ["A", "B"]
    closed.add("A")
    calls.clear()
    st = fw.run_pre_enqueue(pod, "B")
    assert st is not None and st.plugin == "B" and calls == ["B"]
    closed.discard("B")
    calls.clear()
    st = fw.run_pre_enqueue(pod, "B")
    assert st is not None and st.plugin == "A" and calls == ["B", "A"]
    closed.clear()
    calls.clear()
    assert fw.run_pre_enqueue(pod, "A") is None and calls == ["A", "B"]
    calls.clear()
    assert fw.run_pre_enqueue(pod, "Gone") is None and calls == ["A", "B"]


def test_a_sampled_cycle_times_each_filter_plugin_on_each_node() -> None:
    """Upstream's runFilterPlugin under ShouldRecordPluginMetrics: one observation per
    plugin and node, with the plugin's status; the first rejection stops the node's run."""
    fw = framework(NodeResourcesFit(), NeedsCompany())
    seen: list[tuple[str, str, str]] = []
    state = CycleState()
    state.plugin_timer = lambda plugin, point, status, seconds: seen.append((plugin, point, status))
    for p in fw.pre_filter_plugins:
        p.pre_filter(state, pod("p", 0, "1"), Snapshot())
    assert not fw.run_filter(state, pod("p", 0, "1"), node()).is_success()
    assert seen == [
        ("NodeResourcesFit", "Filter", "Success"),
        ("NeedsCompany", "Filter", "Unschedulable"),
    ]
    seen.clear()
    big = pod("big", 0, "2")
    for p in fw.pre_filter_plugins:
        p.pre_filter(state, big, Snapshot())
    assert not fw.run_filter(state, big, node(pod("a", 0, "3"))).is_success()
    assert seen == [("NodeResourcesFit", "Filter", "Unschedulable")]
    seen.clear()
    state.plugin_timer = None  # an unsampled cycle observes nothing
    fw.run_filter(state, pod("p", 0, "1"), node())
    assert seen == []
