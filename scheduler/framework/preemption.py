"""The preemption Evaluator: who may preempt, where, and whom (upstream's
``framework/preemption`` plus DefaultPreemption's victim selection).

Flow of ``Evaluator.preempt`` for a pod that fit no node:

1. Eligibility: ``preemptionPolicy: Never`` never preempts. A pod already nominated to a
   node that still holds a lower-priority pod terminating by preemption waits for it (unless
   that node is now UNSCHEDULABLE_AND_UNRESOLVABLE for it).
2. Candidates: only nodes whose filter status was UNSCHEDULABLE (preemption cannot fix an
   unresolvable rejection). From a random offset, dry-run nodes until ``num_candidates`` =
   min(max(pct% of them, absolute), their number) candidates exist and at least one violates
   no PDB; the PDB-violating and the non-violating lists each keep at most that many.
3. Victims per node (on a clone of its NodeInfo and a clone of the CycleState): remove every
   strictly-lower-priority pod; if the pod still does not fit (two-pass nominated filter),
   the node is out. Otherwise put pods back, most important first (priority, then earlier
   start), PDB-violating ones before the others; a pod stays removed (is a victim) only if
   the preemptor no longer fits with it.
4. Candidate filters (``candidate_filters``), then, in ``preempt_async``, the scheduler
   extenders' (``async_candidate_filter``, upstream's callExtenders).
5. Pick one node: fewest PDB violations, lowest highest-victim priority, smallest sum of
   victim priorities (each shifted by 2^31), fewest victims, latest earliest start time of
   the highest-priority victims, then the first (``PICK_ONE_CRITERIA``;
   ``pick_one_node_for_preemption_steps`` shows how each criterion split the candidates).

Steps 1-5 are ``Evaluator.decide``, free of side effects (``explain`` runs it as is);
``preempt`` adds the actions.

Fast dry run (``fast_dry_run``, on by default; same results): when every active filter
plugin reads only the node record (``node_only_filter``) or the node's summed requests and
pod count (``AmountsFilterPlugin``), no active PreFilter plugin keeps state that follows
removals (extensions), and the node has no nominated pods, step 3 runs on amounts: victims
are taken off and put back as sums, with no NodeInfo or CycleState clone and no re-run of
the node-only plugins (they passed once and read nothing that changes).

No I/O here: the decision goes out through ``PreemptionActions`` (scheduler/kube in the live
scheduler; an in-memory cluster in ``simulate``; recorders in tests).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.config import DefaultPreemptionArgs
from scheduler.framework.interface import (
    SUCCESS,
    AmountsFilterPlugin,
    Code,
    CycleState,
    FilterPlugin,
    PostFilterResult,
    Status,
)
from scheduler.framework.runtime import Framework
from scheduler.types import NodeInfo, PDBInfo, PodInfo

__all__ = [
    "PICK_ONE_CRITERIA",
    "Candidate",
    "Evaluator",
    "PickOneStep",
    "PreemptionActions",
    "PreemptionDecision",
    "filter_victims_with_pdb_violation",
    "more_important",
    "pdb_matches",
    "pick_one_node_for_preemption",
    "pick_one_node_for_preemption_steps",
]

MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_NODE_AVAILABLE = "0/{} nodes are available:"
_SHIFT = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    node_name: str
    victims: tuple[PodInfo, ...]  # most important first
    num_pdb_violations: int = 0


class PreemptionActions(Protocol):
    """Carries out a decided preemption. Implementations must not block the caller for
    long; the live one starts the API calls and returns (async preemption)."""

    def prepare_candidate(
        self,
        preemptor: PodInfo,
        candidate: Candidate,
        lower_nominated: Sequence[PodInfo],
    ) -> Status: ...


CandidateFilter = Callable[[PodInfo, list[Candidate]], list[Candidate]]
AsyncCandidateFilter = Callable[[PodInfo, list[Candidate]], Awaitable["list[Candidate] | Status"]]


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """Higher priority first; equal priority: the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.start_time < b.start_time


def most_important_first(pods: Iterable[PodInfo]) -> tuple[PodInfo, ...]:
    """Pods in a Candidate's victim order: highest priority first, then earliest start."""
    return tuple(sorted(pods, key=_importance_key))


def _importance_key(p: PodInfo) -> tuple[int, float]:
    return (-p.priority, p.start_time)


def pdb_matches(pdb: PDBInfo, pod: PodInfo) -> bool:
    """Whether a PDB covers a pod for preemption, as upstream: same namespace, a non-empty
    selector that matches the pod's labels (a PDB with no or an empty selector matches
    nothing; a pod without labels is never covered)."""
    if not pod.labels or pdb.namespace != pod.namespace:
        return False
    sel = pdb.selector
    return sel is not None and not sel.is_empty() and sel.matches(pod.labels)


def filter_victims_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PDBInfo]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split pods (in the given order) into PDB-violating and non-violating, spending each
    PDB's ``disruptions_allowed`` as pods match it; pods already listed in a PDB's
    ``disruptedPods`` do not spend it. Only PDBs of the pod's namespace count; a PDB with no
    or an empty selector matches nothing; a pod without labels never violates."""
    if not pdbs:
        return [], list(pods)
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    ok: list[PodInfo] = []
    for pod in pods:
        bad = False
        for i, pdb in enumerate(pdbs):
            if not pdb_matches(pdb, pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                # As upstream: the first PDB it would break settles it; the PDBs after that
                # one are not spent on this pod.
                bad = True
                break
        (violating if bad else ok).append(pod)
    return violating, ok


def _earliest_start_of_highest(victims: Sequence[PodInfo]) -> float:
    top = max(v.priority for v in victims)
    return min(v.start_time for v in victims if v.priority == top)


# Upstream's pickOneNodeForPreemption criteria, in order: each keeps only the candidates
# with the highest score (the names are what ``explain`` shows).
PICK_ONE_CRITERIA: tuple[tuple[str, Callable[[Candidate], float]], ...] = (
    ("fewest PDB violations", lambda c: -c.num_pdb_violations),
    ("lowest highest-priority victim", lambda c: -c.victims[0].priority if c.victims else 0),
    (
        "smallest sum of victim priorities",
        lambda c: -sum(v.priority + _SHIFT for v in c.victims),
    ),
    ("fewest victims", lambda c: -len(c.victims)),
    (
        "latest start of the highest-priority victims",
        lambda c: _earliest_start_of_highest(c.victims) if c.victims else float("-inf"),
    ),
)
PICK_ONE_FIRST = "first in candidate order"


@dataclass(frozen=True, slots=True)
class PickOneStep:
    """One criterion of ``pick_one_node_for_preemption`` as it was applied: the score of
    every candidate still in the running, and the nodes it kept (best score)."""

    criterion: str
    scores: tuple[tuple[str, float], ...]  # (node, score) in candidate order
    kept: tuple[str, ...]


def pick_one_node_for_preemption_steps(
    candidates: Sequence[Candidate],
) -> tuple[Candidate | None, list[PickOneStep]]:
    """``pick_one_node_for_preemption`` with its working shown: the criteria are applied
    in order until one candidate is left; a tie after all of them goes to the first
    candidate (a last step named ``PICK_ONE_FIRST``). Criteria not reached are not listed.
    Runtime complexity: O(criteria x candidates x victims)."""
    if not candidates:
        return None, []
    steps: list[PickOneStep] = []
    remaining = list(candidates)
    for name, f in PICK_ONE_CRITERIA:
        scores = [(c.node_name, f(c)) for c in remaining]
        best = max(score for _, score in scores)
        remaining = [c for c, (_, score) in zip(remaining, scores, strict=True) if score == best]
        steps.append(PickOneStep(name, tuple(scores), tuple(c.node_name for c in remaining)))
        if len(remaining) == 1:
            return remaining[0], steps
    steps.append(
        PickOneStep(
            PICK_ONE_FIRST,
            tuple((c.node_name, 0.0) for c in remaining),
            (remaining[0].node_name,),
        )
    )
    return remaining[0], steps


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> Candidate | None:
    """Upstream's criteria in order (``PICK_ONE_CRITERIA``); each keeps only the
    best-scoring nodes; a tie after all of them goes to the first candidate. (The same
    choice as ``pick_one_node_for_preemption_steps``, without recording the steps.)"""
    remaining = list(candidates)
    for _, f in PICK_ONE_CRITERIA:
        if len(remaining) <= 1:
            break
        scores = [f(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
    return remaining[0] if remaining else None


@dataclass(frozen=True, slots=True)
class PreemptionDecision:
    """What ``Evaluator.decide`` found, before any action. ``result``/``status`` are what
    ``preempt`` returns when the actions succeed; ``candidates`` are the dry run's (after
    candidate filters), ``node_statuses`` the potential nodes the dry run rejected, and
    ``potential`` the names of the nodes preemption could help (in snapshot order)."""

    result: PostFilterResult | None
    status: Status
    candidates: tuple[Candidate, ...] = ()
    node_statuses: Mapping[str, Status] = field(default_factory=dict)
    potential: tuple[str, ...] = ()
    offset: int = 0
    best: Candidate | None = None


@dataclass
class Evaluator:
    framework: Framework
    snapshot: Snapshot
    args: DefaultPreemptionArgs
    pdbs: Callable[[], Sequence[PDBInfo]]
    actions: PreemptionActions | None = None
    rng: random.Random = field(default_factory=random.Random)
    candidate_filters: list[CandidateFilter] = field(default_factory=list)
    # After those, in ``preempt_async`` only: the scheduler extenders' (the core sets it).
    # The candidates left, or the Status that ends the preemption (an extender's error).
    async_candidate_filter: AsyncCandidateFilter | None = None
    # Plugins' preemption hooks (docs/plugins.md), as upstream's Evaluator interface:
    # IsEligiblePod (victim, preemptor) -> may it be a victim; OrderedScoreFuncs
    # (candidates) -> score functions of a node name, applied in order instead of
    # pickOneNodeForPreemption's criteria (None: keep the criteria).
    eligibility_hooks: list[Callable[[PodInfo, PodInfo], bool]] = field(default_factory=list)
    ordering_hooks: list[Callable[[Sequence[Candidate]], Sequence[Callable[[str], int]] | None]] = (
        field(default_factory=list)
    )
    # The candidate chosen by the last successful ``preempt`` (for reports and `simulate`).
    last_candidate: Candidate | None = None
    # Victims this evaluator handed to the actions port, per preemptor key: (node, victim
    # keys). The watch reports their DisruptionTarget and deletionTimestamp a moment after
    # the API calls; until it does, this closes the window in which the preemptor would
    # look eligible again and preempt a second time. Dropped once no victim is left on the
    # node, or when the preemptor is bound or deleted (``forget_preemptor``).
    pending_victims: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    # Dry-run nodes on amounts where that gives the same answer (module docstring).
    fast_dry_run: bool = True

    # ------------------------------------------------------------------ eligibility
    def _nominated_node(self, pod: PodInfo) -> str:
        nom = self.framework.nominator
        node = nom.nominated_node(pod.key) if nom is not None else None
        return node or pod.nominated_node_name

    def is_victim_allowed(self, victim: PodInfo, preemptor: PodInfo) -> bool:
        if victim.priority >= preemptor.priority:
            return False
        names = self.args.victim_scheduler_names
        if names and victim.scheduler_name not in names:
            return False
        return all(hook(victim, preemptor) for hook in self.eligibility_hooks)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated_status: Status | None
    ) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, MSG_NEVER
        node_name = self._nominated_node(pod)
        if node_name:
            if nominated_status is not None and (
                nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                return True, ""
            ni = self.snapshot.get(node_name)
            if ni is not None:
                for p in ni.pods.values():
                    if p.terminating_by_preemption and self.is_victim_allowed(p, pod):
                        return False, MSG_TERMINATING
                pending = self.pending_victims.get(pod.key)
                if pending is not None and pending[0] == node_name:
                    if any(key in ni.pods for key in pending[1]):
                        return False, MSG_TERMINATING
                    del self.pending_victims[pod.key]
        return True, ""

    def forget_preemptor(self, key: str) -> None:
        self.pending_victims.pop(key, None)

    # ------------------------------------------------------------------ candidates
    def num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node_info: NodeInfo, pdbs: Sequence[PDBInfo]
    ) -> tuple[list[PodInfo], int, Status]:
        """Mutates ``node_info`` and ``state``: pass clones."""
        fw = self.framework
        potential = [p for p in node_info.pods.values() if self.is_victim_allowed(p, pod)]
        if not potential:
            return [], 0, Status.unresolvable(MSG_NO_VICTIMS)
        for p in potential:
            node_info.remove_pod(p.key)
            st = fw.run_pre_filter_remove_pod(state, pod, p, node_info)
            if not st.is_success():
                return [], 0, st
        st = fw.run_filter_with_nominated_pods(state, pod, node_info)
        fw.count_filter_run(state, st)
        if not st.is_success():
            return [], 0, st
        potential.sort(key=_importance_key)
        violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(p: PodInfo) -> tuple[bool, Status]:
            node_info.add_pod(p)
            add = fw.run_pre_filter_add_pod(state, pod, p, node_info)
            if not add.is_success():
                return False, add
            run = fw.run_filter_with_nominated_pods(state, pod, node_info)
            fw.count_filter_run(state, run)
            fits = run.is_success()
            if not fits:
                node_info.remove_pod(p.key)
                rm = fw.run_pre_filter_remove_pod(state, pod, p, node_info)
                if not rm.is_success():
                    return False, rm
                victims.append(p)
            return fits, Status()

        num_violating = 0
        for p in violating:
            fits, st = reprieve(p)
            if st.code == Code.ERROR:
                return [], 0, st
            if not fits:
                num_violating += 1
        for p in non_violating:
            _, st = reprieve(p)
            if st.code == Code.ERROR:
                return [], 0, st
        if violating and non_violating:
            victims.sort(key=_importance_key)
        return victims, num_violating, Status()

    def _amounts_plan(
        self, state: CycleState
    ) -> list[tuple[FilterPlugin, AmountsFilterPlugin | None]] | None:
        """The active filter plugins in order, each paired with itself if it filters on
        amounts or None if it reads only the node record; None when the dry run cannot go
        on amounts (another kind of plugin, or PreFilter extensions to keep in step)."""
        fw = self.framework
        skip = state.skip_filter_plugins
        for pf in fw.pre_filter_plugins:
            if pf.name not in skip and pf.pre_filter_extensions() is not None:
                return None
        plan: list[tuple[FilterPlugin, AmountsFilterPlugin | None]] = []
        for p in fw.filter_plugins:
            if p.name in skip:
                continue
            if getattr(p, "node_only_filter", False) is True:
                plan.append((p, None))
            elif isinstance(p, AmountsFilterPlugin):
                plan.append((p, p))
            else:
                return None
        return plan

    def _select_victims_by_amounts(
        self,
        state: CycleState,
        pod: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[PDBInfo],
        plan: list[tuple[FilterPlugin, AmountsFilterPlugin | None]],
    ) -> tuple[list[PodInfo], int, Status]:
        """``select_victims_on_node`` for a node without nominated pods under an
        ``_amounts_plan``: the same victims in the same order and the same statuses, with
        pods taken off and put back as sums. Reads ``state`` and ``node_info`` only."""
        priority = pod.priority
        names = self.args.victim_scheduler_names  # is_victim_allowed, inlined
        potential = [
            p
            for p in node_info.pods.values()
            if p.priority < priority and (not names or p.scheduler_name in names)
        ]
        if self.eligibility_hooks:
            potential = [p for p in potential if self.is_victim_allowed(p, pod)]
        if not potential:
            return [], 0, Status.unresolvable(MSG_NO_VICTIMS)
        alloc = node_info.allocatable
        num_pods = len(node_info.pods) - len(potential)
        used = node_info.requested.copy()
        for p in potential:
            used.sub(p.requests)
        fw = self.framework
        for plugin, amounts in plan:
            if amounts is None:
                st = plugin.filter(state, pod, node_info)  # reads the node record only
            else:
                st = amounts.filter_amounts(state, pod, alloc, used, num_pods)
            if st is not SUCCESS and not st.is_success():
                st = st.with_plugin(plugin.name)
                fw.count_filter_run(state, st)
                return [], 0, st
        fits = [(a.fits_amounts, p.name) for p, a in plan if a is not None]
        potential.sort(key=_importance_key)
        violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0
        # Plugin evaluations as upstream's runs would count them: the run above, then one
        # per pod put back, every plugin up to the one that turned the node down.
        runs_passed = 1
        rejected_by: dict[str, int] = {}
        for is_violating, group in ((True, violating), (False, non_violating)):
            for p in group:
                req = p.requests
                used.add(req)
                num_pods += 1
                rejecting = ""
                for fit, name in fits:
                    if not fit(state, pod, alloc, used, num_pods):
                        rejecting = name
                        break
                if not rejecting:
                    runs_passed += 1
                    continue
                rejected_by[rejecting] = rejected_by.get(rejecting, 0) + 1
                used.sub(req)
                num_pods -= 1
                victims.append(p)
                if is_violating:
                    num_violating += 1
        fw.count_filter(state, runs_passed, rejected_by)
        if violating and non_violating:
            victims.sort(key=_importance_key)
        return victims, num_violating, Status()

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: PodInfo,
        potential: Sequence[NodeInfo],
        pdbs: Sequence[PDBInfo],
        offset: int,
        num_candidates: int,
    ) -> tuple[list[Candidate], dict[str, Status]]:
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        n = len(potential)
        plan = self._amounts_plan(state) if self.fast_dry_run else None
        nom = self.framework.nominator
        with_nominated = set(nom.nodes_with_nominated_pods()) if nom is not None else set()
        for i in range(n):
            ni = potential[(offset + i) % n]
            if plan is not None and ni.name not in with_nominated:
                victims, num_pdb, st = self._select_victims_by_amounts(state, pod, ni, pdbs, plan)
            else:
                victims, num_pdb, st = self.select_victims_on_node(
                    state.clone(), pod, ni.clone(), pdbs
                )
            if st.is_success() and victims:
                c = Candidate(ni.name, tuple(victims), num_pdb)
                bucket = violating if num_pdb else non_violating
                # Each list holds at most num_candidates (upstream's candidateList): a node
                # found once a list is full is evaluated but dropped.
                if len(bucket) < num_candidates:
                    bucket.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if st.is_success():
                st = Status.error(f"expected at least one victim pod on node {ni.name!r}")
            statuses[ni.name] = st
        return non_violating + violating, statuses

    # ------------------------------------------------------------------ the whole thing
    def potential_nodes(self, statuses: Mapping[str, Status]) -> list[NodeInfo]:
        """The nodes preemption might help: those whose filter status was UNSCHEDULABLE
        (an UNSCHEDULABLE_AND_UNRESOLVABLE rejection survives any eviction)."""
        snap = self.snapshot
        position = snap.position
        rows = sorted(
            r
            for name, st in statuses.items()
            if st.code == Code.UNSCHEDULABLE and (r := position(name)) is not None
        )
        listed = snap.node_info_list
        return [listed[r] for r in rows]

    def find_candidates(
        self,
        state: CycleState,
        pod: PodInfo,
        statuses: Mapping[str, Status],
        *,
        offset: int | None = None,
    ) -> tuple[list[Candidate], dict[str, Status]]:
        """Dry-run the potential nodes from ``offset`` (None: a random one, as upstream)."""
        return self._find_candidates(state, pod, self.potential_nodes(statuses), offset)

    def _find_candidates(
        self, state: CycleState, pod: PodInfo, potential: list[NodeInfo], offset: int | None
    ) -> tuple[list[Candidate], dict[str, Status]]:
        if not potential:
            return [], {}
        if offset is None:
            offset = self.rng.randrange(len(potential))
        return self.dry_run_preemption(
            state, pod, potential, list(self.pdbs()), offset, self.num_candidates(len(potential))
        )

    def decide(
        self,
        state: CycleState,
        pod: PodInfo,
        statuses: Mapping[str, Status],
        *,
        offset: int | None = None,
    ) -> PreemptionDecision:
        """Everything ``preempt`` does short of acting: eligibility, the dry run, the
        candidate filters and the pick. No side effects (``explain`` calls it with a fixed
        ``offset``; None draws one from ``rng`` as upstream). The async candidate filter
        (extenders) is ``decide_async``'s only."""
        found = self._candidates(state, pod, statuses, offset)
        if isinstance(found, PreemptionDecision):
            return found
        return self._pick_decision(*found)

    async def decide_async(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> PreemptionDecision:
        """``decide`` with ``async_candidate_filter`` after the others (upstream's
        callExtenders, after the candidates are found, before one is picked)."""
        found = self._candidates(state, pod, statuses, None)
        if isinstance(found, PreemptionDecision):
            return found
        seen, filtered = found
        if self.async_candidate_filter is not None:
            narrowed = await self.async_candidate_filter(pod, filtered)
            if isinstance(narrowed, Status):
                return replace(seen, candidates=(), status=narrowed)
            filtered = narrowed
            if not filtered:
                msg = "no candidate node for preemption"
                return replace(seen, candidates=(), status=Status.unschedulable(msg))
        return self._pick_decision(seen, filtered)

    def _candidates(
        self,
        state: CycleState,
        pod: PodInfo,
        statuses: Mapping[str, Status],
        offset: int | None,
    ) -> PreemptionDecision | tuple[PreemptionDecision, list[Candidate]]:
        """Eligibility, the dry run and the synchronous candidate filters: the final
        decision when one of them settles it, else (the decision so far, the candidates
        left)."""
        nominated = self._nominated_node(pod)
        ok, msg = self.pod_eligible_to_preempt_others(
            pod, statuses.get(nominated) if nominated else None
        )
        if not ok:
            return PreemptionDecision(None, Status.unschedulable(msg))
        all_nodes = self.snapshot.num_nodes()
        if all_nodes == 0:
            return PreemptionDecision(None, Status.error("no nodes available"))
        potential_infos = self.potential_nodes(statuses)
        potential = tuple(ni.name for ni in potential_infos)
        if potential and offset is None:
            offset = self.rng.randrange(len(potential))
        found, node_statuses = self._find_candidates(state, pod, potential_infos, offset or 0)
        candidates = tuple(found)
        seen = PreemptionDecision(
            None, Status(), candidates, node_statuses, potential, offset=offset or 0
        )
        errors = [s for s in node_statuses.values() if s.code == Code.ERROR]
        if errors and not candidates:
            return replace(seen, status=errors[0])
        if not candidates:
            msg = fit_error_message(all_nodes, node_statuses, absent_reason=MSG_NOT_HELPFUL)
            return replace(seen, result=PostFilterResult(""), status=Status.unschedulable(msg))
        filtered = list(candidates)
        if self.args.pdb_policy == "Strict":
            # Ours (kubernetes/kubernetes#91492): PDBs are a hard limit, not a preference.
            allowed = [c for c in filtered if c.num_pdb_violations == 0]
            if not allowed:
                blocked = dict(node_statuses)
                for c in filtered:
                    blocked[c.node_name] = Status.unschedulable(MSG_PDB_STRICT)
                msg = fit_error_message(all_nodes, blocked, absent_reason=MSG_NOT_HELPFUL)
                return replace(seen, result=PostFilterResult(""), status=Status.unschedulable(msg))
            filtered = allowed
        for f in self.candidate_filters:
            filtered = f(pod, filtered)
            if not filtered:
                msg = "no candidate node for preemption"
                return replace(seen, candidates=(), status=Status.unschedulable(msg))
        return seen, filtered

    def _pick_decision(
        self, seen: PreemptionDecision, filtered: list[Candidate]
    ) -> PreemptionDecision:
        best = self._pick(filtered)
        if best is None:
            msg = "no candidate node for preemption"
            return replace(seen, candidates=tuple(filtered), status=Status.unschedulable(msg))
        return replace(
            seen,
            result=PostFilterResult(best.node_name),
            status=Status(
                Code.SUCCESS,
                (
                    f"found a potential placement for pod on node {best.node_name}, "
                    f"preempting {len(best.victims)} victims",
                ),
            ),
            candidates=tuple(filtered),
            best=best,
        )

    def preempt(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Returns (result, status) as upstream's ``Evaluator.Preempt``:
        (None, UNSCHEDULABLE): not eligible — keep any nomination;
        (result with "" node, UNSCHEDULABLE): preemption cannot help — clear the nomination;
        (result with node, SUCCESS): victims chosen and handed to the actions port."""
        self.last_candidate = None
        return self._act(pod, self.decide(state, pod, statuses))

    async def preempt_async(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """``preempt`` through ``decide_async``."""
        self.last_candidate = None
        return self._act(pod, await self.decide_async(state, pod, statuses))

    def _act(
        self, pod: PodInfo, decision: PreemptionDecision
    ) -> tuple[PostFilterResult | None, Status]:
        best = decision.best
        if best is None:
            return decision.result, decision.status
        self.last_candidate = best
        if self.actions is not None:
            lower = self.lower_priority_nominated_pods(pod, best.node_name)
            st = self.actions.prepare_candidate(pod, self._preempt_in_memory(best), lower)
            if not st.is_success():
                return None, st
            self.pending_victims[pod.key] = (
                best.node_name,
                frozenset(v.key for v in best.victims),
            )
        return decision.result, decision.status

    def _preempt_in_memory(self, best: Candidate) -> Candidate:
        """Victims that are not bound yet are stopped in memory, as upstream's executor
        does, with no API call: one held at Permit ends its wait with an error, one whose
        async PreBind is under way has it cancelled (unless it has just finished); their
        bindings unwind and they go back to the queue after backoff. The candidate that
        remains is what the actions port deletes."""
        fw = self.framework
        if not len(fw.waiting_pods) and not fw.pods_in_pre_bind:
            return best
        rest = []
        for v in best.victims:
            wp = fw.waiting_pods.get(v.uid)
            if wp is not None and wp.preempt("DefaultPreemption", "preempted"):
                continue
            binding = fw.pods_in_pre_bind.get(v.uid)
            if binding is not None and binding.cancel("preempted by DefaultPreemption"):
                continue
            rest.append(v)
        return best if len(rest) == len(best.victims) else replace(best, victims=tuple(rest))

    def _pick(self, candidates: list[Candidate]) -> Candidate | None:
        """pickOneNodeForPreemption, or the first plugin's OrderedScoreFuncs: each function
        keeps the candidates with the highest score; a tie goes to the first candidate."""
        for hook in self.ordering_hooks:
            funcs = hook(candidates)
            if funcs is None:
                continue
            remaining = list(candidates)
            for f in funcs:
                scores = [f(c.node_name) for c in remaining]
                top = max(scores, default=0)
                remaining = [c for c, sc in zip(remaining, scores, strict=True) if sc == top]
                if len(remaining) <= 1:
                    break
            return remaining[0] if remaining else None
        return pick_one_node_for_preemption(candidates)

    def lower_priority_nominated_pods(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        nom = self.framework.nominator
        if nom is None:
            return []
        return [
            p
            for p in nom.nominated_pods_for_node(node_name)
            if p.priority < pod.priority and p.key != pod.key
        ]


MSG_PDB_STRICT = "preemption would violate a PodDisruptionBudget (pdbPolicy: Strict)"


def fit_error_message(
    num_all_nodes: int,
    statuses: dict[str, Status],
    *,
    pre_filter_msg: str = "",
    post_filter_msg: str = "",
    absent_reason: str = "",
) -> str:
    """Upstream's ``FitError.Error()``: "0/N nodes are available: <count> <reason>, ...."
    with the reasons counted over nodes and sorted as strings, then the PostFilter message."""
    msg = NO_NODE_AVAILABLE.format(num_all_nodes)
    if pre_filter_msg:
        msg += f" {pre_filter_msg}."
    else:
        counts: dict[str, int] = {}
        for st in statuses.values():
            for r in st.reasons:
                counts[r] = counts.get(r, 0) + 1
        absent = num_all_nodes - len(statuses)
        if absent_reason and absent > 0:
            counts[absent_reason] = counts.get(absent_reason, 0) + absent
        parts = sorted(f"{n} {r}" for r, n in counts.items())
        if parts:
            msg += " " + ", ".join(parts) + "."
    if post_filter_msg:
        msg += f" {post_filter_msg}"
    return msg
