"""Snapshot: the consistent, read-only view of the cluster one scheduling cycle works on.

The cache fills it incrementally (``Cache.update_snapshot``): only NodeInfos whose generation
moved since the last update are re-cloned, so a cycle costs O(changed nodes), not O(cluster).
Plugins read it; nothing writes to it during a cycle except the assume of the cycle's own pod
(applied through the cache, then seen by the next update).

Besides the NodeInfos it keeps derived views, all in step with ``node_info_list``:

- ``NodeArrays`` (``arrays()``): one numpy column per number the resource filter and the
  cheap scores read (allocatable, requested, non-zero requested, pod count, taint and image
  flags), row ``i`` describing ``node_info_list[i]``. Plugins use it to decide or score every
  node at once (``filter_batch`` / ``score_batch``); a node whose numbers are too large for
  exact int64/float64 arithmetic has ``exact[i] == False`` and goes the per-node way. Built
  lazily after a list rebuild (O(nodes)); ``swap_in`` rewrites one row (O(1)).
- ``image_num_nodes``: on how many listed nodes each image name is present (ImageLocality's
  spread; upstream's ``ImageStateSummary.NumNodes``).
- ``label_mask(key, value)``: which listed nodes carry a label (nodeSelector in bulk),
  computed on first use and kept in step by ``swap_in`` until the next rebuild.
- ``count_column`` (a per-node count, e.g. PodTopologySpread's matching pods) and
  ``pods_with_label`` (row -> pods, per label value): built on first use; ``swap_in`` moves
  only the pods that changed on the node (a bind: one), and adds a column's per-pod
  function over them when it has one (else calls its per-node function).

Invariant (``check_invariants``): the NodeInfos of a snapshot are never mutated in place
(the cache swaps in fresh clones), so the views describe exactly what the lists hold (the
columns and indexes equal a recount).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.types import NodeInfo, NodeRecord, PodInfo

__all__ = ["EXACT_LIMIT", "BoolArray", "Int64Array", "IntpArray", "NodeArrays", "Snapshot"]

# At most this many label masks are cached (a new one beyond it clears the cache).
_MAX_LABEL_MASKS = 256

# Values at or above this stay out of the arrays (the node is marked inexact): sums of two
# of them stay below 2**53, where int64 products by 100 and float64 quotients are exact.
EXACT_LIMIT = 2**50

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
IntpArray = npt.NDArray[np.intp]

_HARD_EFFECTS = ("NoSchedule", "NoExecute")

# Column order of ``_row``.
_INT_COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "nz_cpu",
    "nz_mem",
    "num_pods",
)
_BOOL_COLUMNS = (
    "exact",
    "unschedulable",
    "hard_taints",
    "prefer_taints",
    "has_images",
    "extended_alloc",
)
_ZERO_INTS = (0,) * len(_INT_COLUMNS)


def _row(ni: NodeInfo) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    node = ni.node
    assert node is not None, "only real nodes are listed"
    alloc = node.allocatable
    req = ni.requested
    ints = (
        alloc.milli_cpu,
        alloc.memory,
        alloc.ephemeral_storage,
        alloc.allowed_pod_number,
        req.milli_cpu,
        req.memory,
        req.ephemeral_storage,
        ni.non_zero_cpu,
        ni.non_zero_mem,
        len(ni.pods),
    )
    exact = all(-EXACT_LIMIT < v < EXACT_LIMIT for v in ints)
    hard = prefer = False
    for t in node.taints:
        if t.effect == "PreferNoSchedule":
            prefer = True
        elif t.effect in _HARD_EFFECTS:
            hard = True
    extended = any(v > 0 and "/" in k for k, v in alloc.scalar.items()) if alloc.scalar else False
    flags = (exact, node.unschedulable, hard, prefer, bool(node.images), extended)
    return (ints if exact else _ZERO_INTS), flags


_MAX_COUNT_COLUMNS = 64
# Label keys with a pods-by-value index (pods_with_label): one per distinct key that
# selectors use (app, name, ...); a bound on the upkeep each node change pays.
_MAX_LABEL_INDEXES = 16


def _code(entry: tuple[Any, list[str], dict[str, int]], value: str | None) -> int:
    if value is None:
        return -1
    code = entry[2].get(value)
    if code is None:
        code = entry[2][value] = len(entry[1])
        entry[1].append(value)
    return code


_NO_ROWS: Mapping[int, list[PodInfo]] = {}


# value -> row -> the pods of that row whose label (the index's key) has that value
_ValueRows = dict[str, dict[int, list[PodInfo]]]


def _index_row(index: _ValueRows, key: str, row: int, ni: NodeInfo) -> None:
    _index_pods(index, key, row, ni.pods.values())


def _index_pods(index: _ValueRows, key: str, row: int, members: Iterable[PodInfo]) -> None:
    """Add the ``members`` that carry label ``key`` to ``row`` of the index."""
    for p in members:
        value = p.labels.get(key)
        if value is None:
            continue
        rows = index.get(value)
        if rows is None:
            index[value] = {row: [p]}
            continue
        pods = rows.get(row)
        if pods is None:
            rows[row] = [p]
        else:
            pods.append(p)


def _pod_changes(old: NodeInfo, new: NodeInfo) -> tuple[list[PodInfo], list[PodInfo]]:
    """The pods of ``old`` that ``new`` does not hold (the same object under the same key),
    and the pods of ``new`` that ``old`` does not hold: (removed, added). A bind is one
    added pod; a pod replaced by its next version is one of each. O(pods of the node)."""
    before, after = old.pods, new.pods
    removed = [p for k, p in before.items() if after.get(k) is not p]
    added = [p for k, p in after.items() if before.get(k) is not p]
    return removed, added


def _reindex_pods(
    index: _ValueRows, key: str, row: int, removed: list[PodInfo], added: list[PodInfo]
) -> None:
    """Keep a row of the index current when its node's pods change, touching the pods that
    changed only (a row's list may then hold its pods in another order than ``_index_row``
    gives: readers only count them; ``check_invariants`` compares them as sets)."""
    for p in removed:
        value = p.labels.get(key)
        if value is None:
            continue
        rows = index.get(value)
        pods = rows.get(row) if rows is not None else None
        if rows is None or pods is None:
            continue
        for j, q in enumerate(pods):
            if q is p:
                del pods[j]
                break
        if not pods:
            del rows[row]
            if not rows:
                del index[value]
    _index_pods(index, key, row, added)


def _labels(ni: NodeInfo) -> Mapping[str, str]:
    assert ni.node is not None, "only real nodes are listed"
    return ni.node.labels


def _row_may_differ(old: NodeInfo, new: NodeInfo) -> bool:
    """False when ``_row`` surely gives ``new`` the row of ``old``: the same node record and
    the same sums it reads (a bound pod's status update, or the watch confirming a binding,
    changes neither). Cheaper than rewriting the row's sixteen cells."""
    if old.node is not new.node or len(old.pods) != len(new.pods):
        return True
    a, b = old.requested, new.requested
    return (
        a.milli_cpu != b.milli_cpu
        or a.memory != b.memory
        or a.ephemeral_storage != b.ephemeral_storage
        or old.non_zero_cpu != new.non_zero_cpu
        or old.non_zero_mem != new.non_zero_mem
    )


class NodeArrays:
    """Columns over a snapshot's ``node_info_list`` (see the module docstring). Ints are
    int64: cpu in millicores, memory and ephemeral storage in bytes; ``nz_*`` are the
    non-zero requests scoring uses; ``exact`` False rows hold zeros and must not be read."""

    __slots__ = (*_INT_COLUMNS, *_BOOL_COLUMNS)

    alloc_cpu: Int64Array
    alloc_mem: Int64Array
    alloc_eph: Int64Array
    alloc_pods: Int64Array
    req_cpu: Int64Array
    req_mem: Int64Array
    req_eph: Int64Array
    nz_cpu: Int64Array
    nz_mem: Int64Array
    num_pods: Int64Array
    exact: BoolArray
    unschedulable: BoolArray
    hard_taints: BoolArray  # any NoSchedule or NoExecute taint
    prefer_taints: BoolArray  # any PreferNoSchedule taint
    has_images: BoolArray
    extended_alloc: BoolArray  # allocatable offers some extended resource (a name with "/")

    def __init__(self, infos: Iterable[NodeInfo]) -> None:
        rows = [_row(ni) for ni in infos]
        n = len(rows)
        ints = np.array([r[0] for r in rows], dtype=np.int64).reshape(n, len(_INT_COLUMNS))
        flags = np.array([r[1] for r in rows], dtype=np.bool_).reshape(n, len(_BOOL_COLUMNS))
        for j, name in enumerate(_INT_COLUMNS):
            setattr(self, name, np.ascontiguousarray(ints[:, j]))
        for j, name in enumerate(_BOOL_COLUMNS):
            setattr(self, name, np.ascontiguousarray(flags[:, j]))

    def set_row(self, i: int, ni: NodeInfo) -> None:
        """Rewrite row ``i`` from ``ni``. O(columns)."""
        ints, flags = _row(ni)
        for name, v in zip(_INT_COLUMNS, ints, strict=True):
            getattr(self, name)[i] = v
        for name, f in zip(_BOOL_COLUMNS, flags, strict=True):
            getattr(self, name)[i] = f

    def check_row(self, i: int, ni: NodeInfo) -> None:
        ints, flags = _row(ni)
        got_ints = tuple(int(getattr(self, name)[i]) for name in _INT_COLUMNS)
        got_flags = tuple(bool(getattr(self, name)[i]) for name in _BOOL_COLUMNS)
        assert (got_ints, got_flags) == (ints, flags), f"node {ni.name}: arrays drift"


class Snapshot:
    __slots__ = (
        "_affinity_index",
        "_anti_index",
        "_arrays",
        "_count_columns",
        "_index",
        "_label_codes",
        "_label_masks",
        "_node_masks",
        "_pod_labels",
        "generation",
        "have_pods_with_affinity",
        "have_pods_with_required_anti_affinity",
        "image_num_nodes",
        "node_info_list",
        "node_info_map",
        "used_pvc",
    )

    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        self.have_pods_with_affinity: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity: list[NodeInfo] = []
        self.generation = 0
        self.used_pvc: set[str] = set()
        self.image_num_nodes: dict[str, int] = {}
        self._index: dict[str, int] = {}
        self._affinity_index: dict[str, int] = {}
        self._anti_index: dict[str, int] = {}
        self._arrays: NodeArrays | None = None
        self._label_masks: dict[tuple[str, str], BoolArray] = {}
        # key -> (a per-row mask, the predicate of a node record that gives it)
        self._node_masks: dict[object, tuple[BoolArray, Callable[[NodeRecord], bool]]] = {}
        # key -> (codes per row, -1 where the label is missing; the values, by code)
        self._label_codes: dict[str, tuple[Int64Array, list[str], dict[str, int]]] = {}
        # id -> (a per-row count, the function of a NodeInfo that gives it, and optionally
        # the function of a pod whose sum over a node's pods gives the same)
        self._count_columns: dict[
            int, tuple[Int64Array, Callable[[NodeInfo], int], Callable[[PodInfo], int] | None]
        ] = {}
        # label key -> value -> row -> the pods of that row carrying it; a key's index is
        # built on its first use (pods_with_label), then kept current row by row as nodes
        # change. Per key: a scan reads one label of each pod, not all of them.
        self._pod_labels: dict[str, _ValueRows] = {}

    @classmethod
    def from_node_infos(cls, infos: list[NodeInfo]) -> Snapshot:
        """A snapshot over the given NodeInfos (used by tests and dry runs); NodeInfos
        without a node are left out, as in a snapshot the cache fills."""
        s = cls()
        for ni in infos:
            if ni.node is not None:
                s.node_info_map[ni.name] = ni
        s.rebuild_lists()
        return s

    def rebuild_lists(self) -> None:
        """Recompute the ordered lists and their derived views from the map. O(nodes)."""
        self.node_info_list = [ni for ni in self.node_info_map.values() if ni.node is not None]
        self.have_pods_with_affinity = [ni for ni in self.node_info_list if ni.pods_with_affinity]
        self.have_pods_with_required_anti_affinity = [
            ni for ni in self.node_info_list if ni.pods_with_required_anti_affinity
        ]
        self._index = {ni.name: i for i, ni in enumerate(self.node_info_list)}
        self._affinity_index = {ni.name: i for i, ni in enumerate(self.have_pods_with_affinity)}
        self._anti_index = {
            ni.name: i for i, ni in enumerate(self.have_pods_with_required_anti_affinity)
        }
        images: dict[str, int] = {}
        for ni in self.node_info_list:
            assert ni.node is not None
            for name in ni.node.images:
                images[name] = images.get(name, 0) + 1
        self.image_num_nodes = images
        self._arrays = None
        self._label_masks = {}
        self._node_masks = {}
        self._label_codes = {}
        self._count_columns = {}
        self._pod_labels = {}

    def swap_in(self, new: NodeInfo) -> None:
        """Replace the listed NodeInfo of the same name by ``new`` (already in the map), in
        every list and view. The caller guarantees that the node stays listed and keeps its
        affinity flags (otherwise it must ``rebuild_lists``). O(images and pods of the node,
        plus count columns times the pods that changed)."""
        name = new.name
        i = self._index[name]
        old = self.node_info_list[i]
        self.node_info_list[i] = new
        j = self._affinity_index.get(name)
        if j is not None:
            self.have_pods_with_affinity[j] = new
        j = self._anti_index.get(name)
        if j is not None:
            self.have_pods_with_required_anti_affinity[j] = new
        if old.node is not new.node:
            assert old.node is not None and new.node is not None
            if old.node.images != new.node.images:
                images = self.image_num_nodes
                for img in old.node.images:
                    left = images[img] - 1
                    if left:
                        images[img] = left
                    else:
                        del images[img]
                for img in new.node.images:
                    images[img] = images.get(img, 0) + 1
        if self._arrays is not None and _row_may_differ(old, new):
            self._arrays.set_row(i, new)
        if self._label_masks and old.node is not new.node:
            assert new.node is not None
            labels = new.node.labels
            for (key, value), mask in self._label_masks.items():
                mask[i] = labels.get(key) == value
        if self._node_masks and old.node is not new.node:
            assert new.node is not None
            for mask, predicate in self._node_masks.values():
                mask[i] = predicate(new.node)
        if self._label_codes and old.node is not new.node:
            for key, entry in self._label_codes.items():
                entry[0][i] = _code(entry, _labels(new).get(key))
        if not self._pod_labels and not self._count_columns:
            return
        removed, added = _pod_changes(old, new)
        for key, index in self._pod_labels.items():
            _reindex_pods(index, key, i, removed, added)
        for col, fn, per_pod in self._count_columns.values():
            if per_pod is None:
                col[i] = fn(new)
                continue
            delta = 0
            for p in added:
                delta += per_pod(p)
            for p in removed:
                delta -= per_pod(p)
            if delta:
                col[i] += delta

    def arrays(self) -> NodeArrays:
        """The numeric columns of ``node_info_list`` (built on first use after a rebuild)."""
        if self._arrays is None:
            self._arrays = NodeArrays(self.node_info_list)
        return self._arrays

    def label_mask(self, key: str, value: str) -> BoolArray:
        """True at the rows of ``node_info_list`` whose node has label ``key=value``.
        Shared: read it, never write it. O(nodes) on first use, then O(1)."""
        mask = self._label_masks.get((key, value))
        if mask is None:
            if len(self._label_masks) >= _MAX_LABEL_MASKS:
                self._label_masks.clear()
            mask = np.fromiter(
                (_labels(ni).get(key) == value for ni in self.node_info_list),
                dtype=np.bool_,
                count=len(self.node_info_list),
            )
            self._label_masks[key, value] = mask
        return mask

    def label_codes(self, key: str) -> tuple[Int64Array, list[str]]:
        """Per row of ``node_info_list``, the code of the node's value of label ``key`` (-1:
        no such label), and the values by code. Shared: read only. O(nodes) on first use,
        then kept current row by row as nodes change."""
        entry = self._label_codes.get(key)
        if entry is None:
            values: list[str] = []
            index: dict[str, int] = {}
            codes = np.empty(len(self.node_info_list), dtype=np.int64)
            entry = (codes, values, index)
            for i, ni in enumerate(self.node_info_list):
                codes[i] = _code(entry, _labels(ni).get(key))
            self._label_codes[key] = entry
        return entry[0], entry[1]

    def node_mask(self, key: object, predicate: Callable[[NodeRecord], bool]) -> BoolArray:
        """True at the rows of ``node_info_list`` whose node record satisfies ``predicate``
        (a function of the record only; ``key`` names it), kept current as node records
        change. Shared: read it, never write it. O(nodes) calls on first use, then one per
        changed node record."""
        entry = self._node_masks.get(key)
        if entry is None:
            if len(self._node_masks) >= _MAX_LABEL_MASKS:
                self._node_masks.clear()
            mask = np.fromiter(
                (ni.node is not None and predicate(ni.node) for ni in self.node_info_list),
                dtype=np.bool_,
                count=len(self.node_info_list),
            )
            entry = self._node_masks[key] = (mask, predicate)
        return entry[0]

    def count_column(
        self,
        key: int,
        fn: Callable[[NodeInfo], int],
        first: Callable[[], Mapping[int, int]] | None = None,
        per_pod: Callable[[PodInfo], int] | None = None,
    ) -> Int64Array:
        """Per row of ``node_info_list``, ``fn(node_info)``, kept current as nodes change
        (``fn`` must depend on the NodeInfo only; ``key`` names it). Shared: read only.
        O(nodes) calls of ``fn`` on first use, then one call per changed node. ``first``,
        when given, builds the column instead: the rows where ``fn`` is not 0, with its
        value (e.g. from ``pods_with_label``), so that the first use costs O(those rows).
        ``per_pod``, when given, must be a function of a pod whose sum over a node's pods is
        ``fn``: a changed node then costs one call per pod added or removed, not ``fn``."""
        entry = self._count_columns.get(key)
        if entry is None:
            if len(self._count_columns) >= _MAX_COUNT_COLUMNS:
                self._count_columns.clear()
            n = len(self.node_info_list)
            if first is not None:
                col = np.zeros(n, dtype=np.int64)
                got = first()
                if got:
                    rows = np.fromiter(got.keys(), dtype=np.int64, count=len(got))
                    col[rows] = np.fromiter(got.values(), dtype=np.int64, count=len(got))
            else:
                col = np.fromiter((fn(ni) for ni in self.node_info_list), dtype=np.int64, count=n)
            entry = self._count_columns[key] = (col, fn, per_pod)
        return entry[0]

    def pods_with_label(self, key: str, value: str) -> Mapping[int, list[PodInfo]]:
        """Row -> the pods on that row's node whose label ``key`` is ``value`` (rows without
        such pods are absent). Shared: read only. O(pods) on the first use of ``key`` after
        a rebuild, then kept current as nodes change."""
        index = self._pod_labels.get(key)
        if index is None:
            if len(self._pod_labels) >= _MAX_LABEL_INDEXES:
                self._pod_labels.clear()
            index = self._pod_labels[key] = {}
            for i, ni in enumerate(self.node_info_list):
                _index_row(index, key, i, ni)
        return index.get(value, _NO_ROWS)

    def layout(self) -> object:
        """A token that stays the same object while every row of ``node_info_list`` names
        the same node (``rebuild_lists`` makes a new one): rows kept across cycles are
        still valid while it does. O(1)."""
        return self._index

    def position(self, name: str) -> int | None:
        """The row of node ``name`` in ``node_info_list`` (None: not listed). O(1)."""
        return self._index.get(name)

    def get(self, name: str) -> NodeInfo | None:
        return self.node_info_map.get(name)

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def check_invariants(self) -> None:
        assert self._index == {ni.name: i for i, ni in enumerate(self.node_info_list)}
        for ni in self.node_info_list:
            assert self.node_info_map.get(ni.name) is ni, f"node {ni.name}: list != map"
        assert self.have_pods_with_affinity == [
            ni for ni in self.node_info_list if ni.pods_with_affinity
        ]
        assert self.have_pods_with_required_anti_affinity == [
            ni for ni in self.node_info_list if ni.pods_with_required_anti_affinity
        ]
        images: dict[str, int] = {}
        for ni in self.node_info_list:
            assert ni.node is not None
            for name in ni.node.images:
                images[name] = images.get(name, 0) + 1
        assert self.image_num_nodes == images, "image counts drift"
        if self._arrays is not None:
            for i, ni in enumerate(self.node_info_list):
                self._arrays.check_row(i, ni)
        for (key, value), mask in self._label_masks.items():
            want = [_labels(ni).get(key) == value for ni in self.node_info_list]
            assert mask.tolist() == want, f"label mask {key}={value} drifts"
        for mask_key, (mask, predicate) in self._node_masks.items():
            want = [ni.node is not None and predicate(ni.node) for ni in self.node_info_list]
            assert mask.tolist() == want, f"node mask {mask_key!r} drifts"
        for cid, (col, fn, _) in self._count_columns.items():
            assert col.tolist() == [fn(ni) for ni in self.node_info_list], f"count {cid} drifts"

        def ids(vr: _ValueRows) -> dict[str, dict[int, set[int]]]:
            return {v: {r: {id(p) for p in ps} for r, ps in rs.items()} for v, rs in vr.items()}

        for label, index in self._pod_labels.items():
            fresh: _ValueRows = {}
            for i, ni in enumerate(self.node_info_list):
                _index_row(fresh, label, i, ni)
            assert ids(index) == ids(fresh), f"pods by label {label} drift"
