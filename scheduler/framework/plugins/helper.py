"""Small helpers shared by plugins: score normalisation and node-selector matching."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from scheduler.framework.interface import MAX_NODE_SCORE
from scheduler.types import NodeSelectorRequirement, NodeSelectorTerm

__all__ = ["default_normalize_score", "match_node_selector_terms", "match_requirement"]


def default_normalize_score(
    scores: list[int], *, reverse: bool, max_score: int = MAX_NODE_SCORE
) -> None:
    """Scale scores to 0..max by the highest score; ``reverse`` flips them (upstream's
    ``helper.DefaultNormalizeScore``). In place."""
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [max_score] * len(scores)
        return
    for i, s in enumerate(scores):
        s = max_score * s // highest
        scores[i] = max_score - s if reverse else s


_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: ASCII digits with an optional sign, in range
    (Python's ``int`` would also take spaces, underscores and non-ASCII digits)."""
    if not _INT.fullmatch(s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def match_requirement(req: NodeSelectorRequirement, value: str | None) -> bool:
    """One node selector requirement against a label (or field) value; None: absent."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        have = _parse_int64(value)
        want = _parse_int64(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _match_term(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches nothing (upstream)
    for req in term.match_expressions:
        if not match_requirement(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        if req.key != "metadata.name":
            return False
        if not match_requirement(req, node_name):
            return False
    return True


def match_node_selector_terms(
    terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; requirements inside a term are ANDed."""
    return any(_match_term(t, labels, node_name) for t in terms)
