"""``pick_one_node_for_preemption_steps`` (framework/preemption.py): the criteria of
pickOneNodeForPreemption as applied, for ``explain``. The choice itself is covered by
test_preemption.py's table for ``pick_one_node_for_preemption``, which now runs on it."""

from __future__ import annotations

import pytest

from scheduler.framework.preemption import (
    PICK_ONE_CRITERIA,
    PICK_ONE_FIRST,
    Candidate,
    pick_one_node_for_preemption,
    pick_one_node_for_preemption_steps,
)
from tests.builders import make_pod

CRITERIA = [name for name, _ in PICK_ONE_CRITERIA]


def _cand(node: str, victims: list[tuple[int, float]], pdb: int = 0) -> Candidate:
    pods = tuple(
        make_pod(f"{node}-v{i}").priority(p).node(node).started(start).info()
        for i, (p, start) in enumerate(victims)
    )
    return Candidate(node, pods, pdb)


def _lost_at(candidates: list[Candidate]) -> dict[str, str]:
    _, steps = pick_one_node_for_preemption_steps(candidates)
    out: dict[str, str] = {}
    for step in steps:
        for node, _ in step.scores:
            if node not in step.kept:
                out.setdefault(node, step.criterion)
    return out


@pytest.mark.parametrize(
    ("candidates", "winner", "lost_at"),
    [
        pytest.param(
            [_cand("n1", [(1, 0)], pdb=1), _cand("n2", [(1, 0)])],
            "n2",
            {"n1": "fewest PDB violations"},
            id="PDB violations",
        ),
        pytest.param(
            [_cand("n1", [(5, 0)]), _cand("n2", [(1, 0), (1, 0)])],
            "n2",
            {"n1": "lowest highest-priority victim"},
            id="highest victim priority",
        ),
        pytest.param(
            [_cand("n1", [(5, 0), (5, 0)]), _cand("n2", [(5, 0), (1, 0)])],
            "n2",
            {"n1": "smallest sum of victim priorities"},
            id="sum of priorities",
        ),
        pytest.param(
            [_cand("n1", [(5, 0)]), _cand("n2", [(5, 1)]), _cand("n3", [(5, 0)], pdb=2)],
            "n2",
            {"n3": "fewest PDB violations", "n1": "latest start of the highest-priority victims"},
            id="two nodes out at different criteria",
        ),
        pytest.param(
            [_cand("n1", [(5, 3)]), _cand("n2", [(5, 3)])],
            "n1",
            {"n2": PICK_ONE_FIRST},
            id="all tied: the first",
        ),
    ],
)
def test_steps_name_the_criterion_each_node_lost_at(
    candidates: list[Candidate], winner: str, lost_at: dict[str, str]
) -> None:
    best, steps = pick_one_node_for_preemption_steps(candidates)
    assert best is not None and best.node_name == winner
    assert pick_one_node_for_preemption(candidates) is best
    assert _lost_at(candidates) == lost_at
    # Criteria in upstream's order, stopping at the one that left a single node.
    names = [s.criterion for s in steps]
    assert names == [*CRITERIA, PICK_ONE_FIRST][: len(names)]
    assert steps[-1].kept == (winner,)


def test_steps_keep_scores_of_the_nodes_still_in_the_running() -> None:
    c = [_cand("n1", [(5, 0)], pdb=1), _cand("n2", [(7, 0)]), _cand("n3", [(6, 0)])]
    best, steps = pick_one_node_for_preemption_steps(c)
    assert best is not None and best.node_name == "n3"
    assert [s.criterion for s in steps] == CRITERIA[:2]
    assert steps[0].scores == (("n1", -1), ("n2", 0), ("n3", 0))
    assert steps[0].kept == ("n2", "n3")
    assert steps[1].scores == (("n2", -7), ("n3", -6))


def test_no_candidates() -> None:
    assert pick_one_node_for_preemption_steps([]) == (None, [])
