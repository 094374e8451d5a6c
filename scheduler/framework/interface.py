"""The framework's vocabulary: status codes, Status, CycleState and the plugin Protocols.

Expected outcomes are values, not exceptions: a filter that rejects a node returns
``Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))``. Only programming errors and I/O
faults raise. The Protocols mirror upstream's extension points; a plugin implements the
ones it needs and the Framework (runtime.py) discovers them with ``isinstance``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from scheduler.backend.queue.events import (
    ClusterEvent,
    EventHint,
    EventRegistration,
    QueueingHint,
)
from scheduler.types import NodeInfo, PodInfo, Resource

if TYPE_CHECKING:
    from scheduler.backend.cache.snapshot import BoolArray, Int64Array, IntpArray, Snapshot
    from scheduler.backend.queue.priority_queue import QueuedPodInfo

__all__ = [
    "SUCCESS",
    "AmountsFilterPlugin",
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "ClusterEvent",
    "Code",
    "CycleState",
    "EventHint",
    "EventRegistration",
    "FilterPlugin",
    "NodeScore",
    "Plugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueueingHint",
    "ScorePlugin",
    "SignFragment",
    "SignPlugin",
    "Status",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE, reasons, plugin)

    @staticmethod
    def unresolvable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @staticmethod
    def error(message: str, plugin: str = "") -> Status:
        return Status(Code.ERROR, (message,), plugin)


# Status codes as upstream prints them (metrics labels, explain's output).
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}

SUCCESS = Status()
SKIP = Status(Code.SKIP)


class CycleState:
    """Per-cycle scratch space shared by a cycle's plugins. ``clone`` is shallow per key, as
    each stored value is responsible for its own ``clone()`` when it is mutable."""

    __slots__ = (
        "_data",
        "feasible_rows",
        "plugin_timer",
        "pods_to_activate",
        "skip_filter_plugins",
        "skip_score_plugins",
    )

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # Set on the cycles whose plugin durations are recorded (upstream samples 10%):
        # (plugin, extension point, status, seconds).
        self.plugin_timer: Callable[[str, str, str, float], None] | None = None
        # Set by the core before PreScore when its bulk filter found the feasible nodes:
        # their rows in the cycle's snapshot, in the order PreScore and Score get them
        # (None: unknown). Plugins may read columns at these rows instead of the nodes.
        self.feasible_rows: IntpArray | None = None
        # Upstream's PodsToActivate: keys ("namespace/name") of pending pods a plugin wants
        # tried again at once; the core moves them to activeQ at the end of a scheduling
        # cycle that assumed the pod, and again after its binding. Clones share it.
        self.pods_to_activate: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        return self._data.get(key)

    def clone(self) -> CycleState:
        c = CycleState()
        for k, v in self._data.items():
            clone = getattr(v, "clone", None)
            c._data[k] = clone() if callable(clone) else v
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.feasible_rows = self.feasible_rows
        c.pods_to_activate = self.pods_to_activate
        return c


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the nodes to evaluate (None: all). Upstream's PreFilterResult.NodeNames;
    ``plugins``: the PreFilter plugins whose results made the restriction (the framework
    fills it in; the nodes left out are reported as not satisfying them)."""

    node_names: frozenset[str] | None = None
    plugins: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


@dataclass(frozen=True, slots=True)
class NodeScore:
    name: str
    score: int


# ------------------------------------------------------------------- cluster events / hints


# ------------------------------------------------------------------- plugin protocols


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Incremental updates of a plugin's PreFilter state when the dry run adds/removes pods."""

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Whether a pod may enter the scheduling queue at all: anything but SUCCESS keeps it
    in the queue's gated set (no Filter, Score or preemption) until an update of the pod, or
    a cluster event the plugin's queueing hints accept, lets every PreEnqueue plugin pass."""

    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Upstream's ReservePlugin: ``reserve`` runs once the pod is assumed on its node (a
    non-SUCCESS status fails the attempt); ``unreserve`` undoes it, on every Reserve plugin
    in reverse order, when Reserve or the binding fails. Both are required."""

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Upstream's PermitPlugin: the last say before the binding cycle, once Reserve agreed.
    ``permit`` returns ``(status, timeout_seconds)``: SUCCESS lets the pod go on; WAIT
    holds it (assumed, keeping its room) until the plugin allows it through a
    ``WaitingPod`` (``FrameworkHandle.get_waiting_pod``), something rejects it, or the
    timeout (at most 15 minutes) passes; a rejection makes it unschedulable for this
    plugin's hints; anything else is an error. The timeout is read only with WAIT."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Upstream's PreBindPlugin: work that must be done before the Binding (in the binding
    cycle). A non-SUCCESS status fails the binding (Unreserve runs). An optional
    ``pre_bind_pre_flight(state, pod, node_name)`` says whether ``pre_bind`` has anything to
    do (SUCCESS) or not (SKIP: it is not called); without it the plugin always runs."""

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Upstream's BindPlugin: binds the pod to the node, after PreBind. SKIP: not this
    plugin's pod (the next Bind plugin in order, DefaultBinder by default, binds it);
    SUCCESS: the plugin has bound it; a rejection or an error fails the binding (Unreserve
    runs). ``bind`` may be a coroutine function, awaited in the pod's binding task."""

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Upstream's QueueSortPlugin: the order of the active queue (and, within a second of
    backoff expiry, of backoffQ). ``less(a, b)``: whether ``a`` goes before ``b``; a strict
    weak order that stays the same while the pods wait. One per profile (PrioritySort by
    default, which the queue implements itself)."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Upstream's PostBindPlugin: told once the pod is bound; informational."""

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int: ...

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Rescale ``scores`` in place to 0..100 (a no-op for plugins already in range)."""
        ...


class SignFragment(NamedTuple):
    """One part of a pod's signature (upstream's SignFragment): ``key`` names what it
    describes (upstream's signer names, in framework/signers.py, for the parts in-tree
    plugins read), ``value`` is compared with ``==`` against other pods' values. (A named
    tuple: a pod is signed once a cycle, by every plugin of its profile.)"""

    key: str
    value: object


@runtime_checkable
class SignPlugin(Plugin, Protocol):
    """Upstream's SignPlugin, for OpportunisticBatching (framework/batch.py): the parts of
    the pod this plugin's PreFilter, Filter, PreScore and Score read, so that two pods with
    equal signatures get the same feasibility and scores on the same nodes. SUCCESS with
    the fragments (possibly none); any other status: this pod cannot be signed (it is then
    scheduled on its own). A profile batches only when every PreFilter, Filter, PreScore
    and Score plugin of it implements ``sign_pod``."""

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[SignFragment], Status]: ...


@runtime_checkable
class AmountsFilterPlugin(FilterPlugin, Protocol):
    """Optional for a filter plugin that reads a node's pods only through the sum of their
    requests and their number: ``filter`` on those amounts, so that preemption's dry run
    can take pods off and put them back as arithmetic.

    (A filter plugin that reads neither the node's pods nor the CycleState, only the pod
    and the node record, says so with a class attribute ``node_only_filter = True``.)"""

    def filter_amounts(
        self, state: CycleState, pod: PodInfo, alloc: Resource, used: Resource, num_pods: int
    ) -> Status: ...

    def fits_amounts(
        self, state: CycleState, pod: PodInfo, alloc: Resource, used: Resource, num_pods: int
    ) -> bool:
        """Exactly ``filter_amounts(...).is_success()`` (it may skip building the Status)."""
        ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    """Optional for a filter plugin: answer for every node of the snapshot at once."""

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray | None:
        """A mask over ``snapshot.node_info_list``: True where ``filter`` would surely
        return SUCCESS for ``pod``; False where it may not (the framework then runs
        ``filter`` on that node for the exact status). None: no bulk answer for this pod."""
        ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """Optional for a score plugin: score many nodes of the snapshot at once."""

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array | None:
        """Exactly ``score`` of the nodes ``snapshot.node_info_list[rows]``, in that order.
        None: no bulk answer for this pod (the framework calls ``score`` per node)."""
        ...

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        """Exactly what ``normalize_scores`` makes of the same scores (may reuse ``scores``)."""
        ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Iterable[EventRegistration]: ...


@dataclass(slots=True)
class Diagnosis:
    """Why a pod did not fit: per-node status plus the plugins that rejected it."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    # Nodes the filter walk's Filter calls turned down, by the plugin (for the count of
    # plugin evaluations; statuses set without a call, as PreFilter's, are not in it).
    rejected_by: dict[str, int] = field(default_factory=dict)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    num_all_nodes: int = 0
