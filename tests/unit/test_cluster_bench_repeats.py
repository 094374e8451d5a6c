"""benchmarks/cluster_bench.py's repeats: --repeat for every pair, --paced-repeat for the
pairs at the shipped defaults only. No cluster."""

from __future__ import annotations

import pytest

from tests.scripts import load_script

B = load_script("benchmarks/cluster_bench.py")


def test_paced_repeat_applies_to_the_defaults_only() -> None:
    args = B.parse_args(["--paced-repeat", "3"])
    assert (args.repeat, args.paced_repeat) == (1, 3)
    assert B.repeats_of("defaults", args.repeat, args.paced_repeat) == 3
    assert B.repeats_of("equal", args.repeat, args.paced_repeat) == 1
    # --repeat is a floor for both: the larger of the two wins at the defaults.
    assert B.repeats_of("defaults", 5, 3) == 5
    assert B.repeats_of("equal", 5, 3) == 5
    assert B.parse_args([]).paced_repeat == 1


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_a_paced_repeat_that_is_not_a_positive_count_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        B.parse_args(["--paced-repeat", bad])
    assert "--paced-repeat" in capsys.readouterr().err
