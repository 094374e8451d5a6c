"""benchmarks/bench_helpers.py: the pure part of the cluster benchmark (statistics, ratios
against the issue's targets, profile folding, the markdown report). No cluster, no clock."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripts import load_script

H = load_script("benchmarks/bench_helpers.py")


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        pytest.param([], 50, None, id="no values"),
        pytest.param([7.0], 99, 7.0, id="one value"),
        pytest.param([1.0, 2.0, 3.0, 4.0], 50, 2.5, id="median interpolates"),
        pytest.param([4.0, 1.0, 3.0, 2.0], 0, 1.0, id="unsorted, minimum"),
        pytest.param([4.0, 1.0, 3.0, 2.0], 100, 4.0, id="maximum"),
        pytest.param([float(i) for i in range(1, 101)], 99, 99.01, id="p99 of 1..100"),
    ],
)
def test_percentile(values: list[float], q: float, want: float | None) -> None:
    got = H.percentile(values, q)
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want)


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        H.percentile([1.0], 101)


def test_summarize() -> None:
    s = H.summarize([0.1, 0.2, 0.3, 0.4, 1.0])
    assert s == {"count": 5, "mean": 0.4, "p50": 0.3, "p90": 0.76, "p99": 0.976, "max": 1.0}
    assert H.summarize([])["p50"] is None


def test_quantile_sketch_and_cdf() -> None:
    values = [float(i) for i in range(11)]
    sketch = H.quantile_sketch(values, points=3)
    assert sketch == [0.0, 5.0, 10.0]
    xs, ys = H.cdf_xy(sketch)
    assert xs == [0.0, 5.0, 10.0]
    assert ys == [0.0, 0.5, 1.0]
    assert H.cdf_xy([]) == ([], [])
    assert H.cdf_xy([2.0]) == ([2.0], [1.0])
    assert H.quantile_sketch([]) == []


def test_completion_curve_keeps_the_last_point() -> None:
    times = [100.0 + i for i in range(10)]
    assert H.completion_curve(times, 100.0, max_points=3) == [(3.0, 4), (7.0, 8), (9.0, 10)]
    assert H.completion_curve([], 0.0) == []
    assert H.completion_curve([5.0, 3.0], 1.0) == [(2.0, 1), (4.0, 2)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("1970-01-01T00:00:10Z", 10.0, id="Z"),
        pytest.param("1970-01-01T00:00:10.5Z", 10.5, id="fractions"),
        pytest.param("1970-01-01T01:00:10+01:00", 10.0, id="offset"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="missing"),
    ],
)
def test_parse_time(text: str | None, want: float | None) -> None:
    assert H.parse_time(text) == want


def test_refill_seconds_is_burst_over_qps() -> None:
    assert H.refill_seconds(None) == 2.0  # the shipped 50 QPS, burst 100
    assert H.refill_seconds(5000) == 1.0  # the equal client: burst 5000 at 5000 QPS


def test_ratio() -> None:
    assert H.ratio(3.0, 2.0) == 1.5
    assert H.ratio(1.0, 3.0, 3) == 0.333
    assert H.ratio(None, 2.0) is None
    assert H.ratio(2.0, 0.0) is None


@pytest.mark.parametrize(
    ("message", "want"),
    [
        pytest.param("Preempted by pod abc-123 on node n1", ("abc-123", "n1"), id="v1.37"),
        pytest.param("Preempted by abc-123 on node n1", ("abc-123", "n1"), id="older upstream"),
        pytest.param("Scheduled to n1", None, id="other event"),
    ],
)
def test_parse_preempted_message(message: str, want: tuple[str, str] | None) -> None:
    assert H.parse_preempted_message(message) == want


def test_victims_summary() -> None:
    s = H.victims_summary({"a": 3, "b": 3, "c": 4}, preemptors=3, needed=3)
    assert s["victims_from_events"] == 10
    assert s["max_victims_for_one_preemptor"] == 4
    assert s["preemptors_over_needed"] == 1
    assert s["histogram"] == {"3": 2, "4": 1}
    assert s["victims_per_preemptor"] == 3.333


def _run(scenario: str, mode: str, sched: str, **metrics: Any) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "size": "large",
        "qps_mode": mode,
        "scheduler": sched,
        "complete": True,
        **metrics,
    }


RUNS = [
    _run("throughput", "defaults", H.KUBE, pods_per_second=50.0, vmhwm_kib=100 * 1024),
    _run("throughput", "defaults", H.PY, pods_per_second=40.0, vmhwm_kib=120 * 1024),
    _run(
        "throughput",
        "equal",
        H.KUBE,
        pods_per_second=200.0,
        vmhwm_kib=110 * 1024,
        cpu_ms_per_pod=2.5,
        latency_client={"p50": 1.0, "p99": 2.0},
    ),
    _run(
        "throughput",
        "equal",
        H.PY,
        pods_per_second=180.0,
        vmhwm_kib=200 * 1024,
        cpu_ms_per_pod=3.0,
        latency_client={"p50": 1.0, "p99": 1.5},
    ),
    _run("deployments", "equal", H.KUBE, pods_per_second=90.0, cpu_ms_per_pod=4.0),
    _run("deployments", "equal", H.PY, pods_per_second=95.0, cpu_ms_per_pod=3.6),
    _run(
        "preemption",
        "equal",
        H.KUBE,
        completion_seconds=40.0,
        victims_per_preemptor=3.0,
        max_victims_per_preemptor=3,
        victims_beyond_need=0,
    ),
    _run(
        "preemption",
        "equal",
        H.PY,
        completion_seconds=45.0,
        victims_per_preemptor=3.0,
        max_victims_per_preemptor=3,
        victims_beyond_need=0,
    ),
    {**_run("throughput", "equal", H.PY, pods_per_second=1.0, vmhwm_kib=999_999), "profiled": True},
]


def test_compute_ratios_against_the_targets() -> None:
    by_key = {(r["name"], r["qps_mode"]): r for r in H.compute_ratios(RUNS)}
    assert by_key[("throughput py/kube", "defaults")]["value"] == 0.8
    assert by_key[("throughput py/kube", "defaults")]["met"] is False  # target >= 1.0
    assert by_key[("throughput py/kube", "equal")]["value"] == 0.9
    assert by_key[("throughput py/kube", "equal")]["met"] is False  # target >= 1.0
    assert by_key[("CPU ms/pod py/kube", "equal")]["value"] == 1.2
    assert by_key[("CPU ms/pod py/kube", "equal")]["met"] is False  # target <= 1.0
    assert by_key[("latency p99 py/kube", "equal")]["value"] == 0.75
    assert by_key[("latency p99 py/kube", "equal")]["met"] is True
    assert by_key[("throughput py/kube (deployments)", "equal")]["met"] is True
    assert by_key[("CPU ms/pod py/kube (deployments)", "equal")]["value"] == 0.9
    assert by_key[("CPU ms/pod py/kube (deployments)", "equal")]["met"] is True
    assert by_key[("preemption completion kube/py", "equal")]["value"] == 0.89
    assert by_key[("preemption completion kube/py", "equal")]["met"] is True
    assert by_key[("victims per preemptor py - kube", "equal")]["met"] is True
    # The peak of each scheduler's throughput runs; the profiled run does not count.
    assert by_key[("peak RSS py/kube", "all")]["value"] == pytest.approx(200 / 110, abs=0.01)
    assert by_key[("peak RSS py/kube", "all")]["met"] is False
    assert ("preemption completion kube/py", "defaults") not in by_key


def test_incomplete_run_gives_no_verdict() -> None:
    runs = [
        _run("throughput", "equal", H.KUBE, pods_per_second=200.0),
        {**_run("throughput", "equal", H.PY, pods_per_second=10.0), "complete": False},
    ]
    (tp,) = [r for r in H.compute_ratios(runs) if r["name"] == "throughput py/kube"]
    assert tp["value"] is None
    assert tp["met"] is None


def _preemption(sched: str, **metrics: Any) -> dict[str, Any]:
    return _run("preemption", "equal", sched, completion_seconds=1.0, **metrics)


@pytest.mark.parametrize(
    ("kube", "py", "met"),
    [
        pytest.param(
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 0},
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 0},
            True,
            id="same victims",
        ),
        pytest.param(
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 0},
            {"victims_per_preemptor": 3.01, "victims_beyond_need": 0},
            False,
            id="more victims per preemptor",
        ),
        pytest.param(
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 0},
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 1},
            False,
            id="a victim beyond need",
        ),
        pytest.param(
            {"victims_per_preemptor": 3.0, "victims_on_nodes_without_preemptor": 0},
            {"victims_per_preemptor": 3.0, "victims_on_nodes_without_preemptor": 0},
            True,
            id="older results without victims_beyond_need",
        ),
        pytest.param(
            {"victims_per_preemptor": 3.0, "victims_beyond_need": 0},
            {
                "victims_per_preemptor": 3.0,
                "victims_beyond_need": 0,
                "max_victims_per_preemptor": 6,
            },
            True,
            id="duplicate Preempted events are not victims",
        ),
    ],
)
def test_victims_never_above_kube(kube: dict[str, Any], py: dict[str, Any], met: bool) -> None:
    runs = [_preemption(H.KUBE, **kube), _preemption(H.PY, **py)]
    (v,) = [r for r in H.compute_ratios(runs) if r["name"].startswith("victims")]
    assert v["met"] is met


def test_fold_profile() -> None:
    lines = [
        "process 1:python;main (scheduler/cli.py:10);loop (asyncio/base_events.py:5);"
        "select (selectors.py:1) 6",
        "main (/work/main/scheduler/cli.py:10);schedule_one (scheduler/schedule_one.py:3);"
        "fit (scheduler/framework/plugins/fit.py:7) 3",
        "main (scheduler/cli.py:10);schedule_one (scheduler/schedule_one.py:4) 1",
        "garbage line",
        "",
    ]
    folded = H.fold_profile(lines, top=3)
    assert folded["samples"] == 10
    assert folded["self"][0] == {"function": "select (selectors.py)", "samples": 6, "percent": 60.0}
    assert {r["area"]: r["samples"] for r in folded["areas"]} == {
        "selectors": 6,
        "scheduler/framework/plugins/fit.py": 3,
        "scheduler/schedule_one.py": 1,
    }
    inclusive = {r["function"]: r["samples"] for r in folded["inclusive"]}
    assert inclusive["main (scheduler/cli.py)"] == 10
    assert inclusive["schedule_one (scheduler/schedule_one.py)"] == 4


def test_render_markdown() -> None:
    results = {
        "meta": {"date": "2026-01-01", "machine": {"cores": 2}, "versions": {"KUBE": "v1"}},
        "runs": RUNS,
        "profile": {
            "tool": "py-spy",
            "samples": 10,
            "self": [{"function": "f (scheduler/x.py)", "samples": 5, "percent": 50.0}],
            "areas": [{"area": "ssl", "samples": 5, "percent": 50.0}],
            "inclusive": [],
        },
        "core": {"throughput": [{"nodes": 100, "pods_per_second": 900.5}], "date": "x"},
    }
    md = H.render_markdown(results)
    assert md.startswith("# Cluster benchmarks")
    assert "- py-scheduler's dependencies: the development virtualenv's" in md  # not recorded
    image = H.render_markdown({"meta": {"args": {"py_deps": "image"}}, "runs": RUNS})
    assert "- py-scheduler's dependencies: the image's (a virtualenv of requirements.lock)" in image
    # Nodes: records from before round 26 made them for every run.
    assert "- nodes: made anew for every run" in md
    kept = H.render_markdown({"meta": {"args": {"fresh_nodes": False}}, "runs": RUNS})
    assert "- nodes: made once and kept from run to run" in kept
    assert "| throughput py/kube | large | defaults | 0.80 | >= 1.0 | no |" in md
    assert "| large | equal | py-scheduler (profiled) |" in md
    assert "## Preemption" in md
    assert "`f (scheduler/x.py)`" in md
    assert "| 100 | 900.50 |" in md
    assert md.endswith("\n")


def test_node_cpu_usage_counts_pods_still_there() -> None:
    usage = H.node_cpu_usage(
        [
            ("n1", "low", True),
            ("n1", "low", False),  # deleted: a victim
            ("n1", "high", True),
            ("n2", "high", True),
            ("n2", "high", True),  # two preemptors on one node: over 4 cpu
            ("", "tp", True),  # not bound
        ]
    )
    assert usage == {"n1": 3900, "n2": 6000}


def test_nodes_over_capacity_row() -> None:
    runs = [
        _preemption(H.KUBE, victims_per_preemptor=3.0, overcommitted_nodes=0),
        _preemption(H.PY, victims_per_preemptor=3.0, overcommitted_nodes=32),
    ]
    (row,) = [r for r in H.compute_ratios(runs) if r["name"].startswith("nodes over capacity")]
    assert row["value"] == 32.0
    assert row["met"] is False
    assert row["detail"] == "py 32, kube 0"


def test_repeats_count_by_their_median() -> None:
    def tp(sched: str, pps: float, p99: float, oc: int, *, complete: bool = True) -> dict[str, Any]:
        run = _run(
            "throughput",
            "equal",
            sched,
            pods_per_second=pps,
            cpu_ms_per_pod=pps / 100,
            latency_client={"p50": 0.1, "p99": p99},
            overcommitted_nodes=oc,
        )
        return {**run, "complete": complete}

    runs = [
        tp(H.KUBE, 100.0, 0.5, 0),
        tp(H.PY, 90.0, 0.9, 0),
        tp(H.KUBE, 80.0, 0.6, 0),
        tp(H.PY, 120.0, 0.4, 1),
        tp(H.KUBE, 120.0, 0.7, 0),
        tp(H.PY, 110.0, 0.5, 0),
        tp(H.PY, 1.0, 9.0, 7, complete=False),  # an incomplete repeat does not count
    ]
    by_name = {r["name"]: r for r in H.compute_ratios(runs)}
    # Medians: kube 100 pods/s and p99 0.6 s; py 110 pods/s and p99 0.5 s.
    assert by_name["throughput py/kube"]["value"] == 1.1
    assert by_name["throughput py/kube"]["met"] is True
    # The medians meet the target, yet py-scheduler was ahead in one pair of three: the
    # detail says both (pairs are the i-th run of each; the incomplete one pairs with none).
    assert by_name["throughput py/kube"]["detail"] == (
        "110.00 / 100.00 pods/s (medians of 3 repeats); py's at or above in 1 of 3 pairs"
    )
    assert by_name["latency p99 py/kube"]["value"] == pytest.approx(0.5 / 0.6, abs=0.01)
    assert by_name["CPU ms/pod py/kube"]["value"] == 1.1
    assert by_name["CPU ms/pod py/kube"]["detail"] == (
        "1.10 / 1.00 ms (medians of 3 repeats); py's at or below in 2 of 3 pairs"
    )
    # Correctness counts by the worst complete repeat.
    over = by_name["nodes over capacity (throughput), py"]
    assert (over["value"], over["met"], over["detail"]) == (1.0, False, "py 1, kube 0")


def _paced(sched: str, p99: float, due_p99: float | None) -> dict[str, Any]:
    """A throughput run at the defaults: client p99 and, unless None, the p99 from due."""
    extra = {} if due_p99 is None else {"latency_due": {"p50": 1.0, "p99": due_p99}}
    return _run(
        "throughput",
        "defaults",
        sched,
        pods_per_second=50.0,
        latency_client={"p50": 1.0, "p99": p99},
        **extra,
    )


def test_paced_runs_get_a_p99_from_the_due_time() -> None:
    by_name = {
        r["name"]: r
        for r in H.compute_ratios([_paced(H.KUBE, 13.0, 15.0), _paced(H.PY, 14.6, 14.7)])
    }
    assert by_name["latency p99 py/kube"]["met"] is False  # 14.6 s against 13.0 s
    due = by_name["latency p99 from the paced arrival py/kube"]
    assert (due["value"], due["met"], due["detail"]) == (0.98, True, "14.70 s / 15.00 s")
    # Unpaced runs have no due times, and no such row.
    names = {r["name"] for r in H.compute_ratios(RUNS)}
    assert "latency p99 from the paced arrival py/kube" not in names


def test_a_latency_median_counts_the_repeats_that_recorded_it() -> None:
    """Repeats from before due times were recorded have a client p99 and no due p99: the
    due row's note counts only the repeats that have one."""

    runs = [
        _paced(H.KUBE, 1.3, None),
        _paced(H.PY, 1.4, None),
        _paced(H.KUBE, 1.4, 1.5),
        _paced(H.PY, 1.2, 1.3),
        _paced(H.KUBE, 1.5, 1.4),
        _paced(H.PY, 1.3, 1.2),
    ]
    by_name = {r["name"]: r for r in H.compute_ratios(runs)}
    client = by_name["latency p99 py/kube"]
    assert client["detail"] == (
        "1.30 s / 1.40 s (medians of 3 repeats); py's at or below in 2 of 3 pairs"
    )
    due = by_name["latency p99 from the paced arrival py/kube"]
    assert due["detail"] == (
        "1.25 s / 1.45 s (medians of 2 repeats); py's at or below in 2 of 2 pairs"
    )
    assert due["met"] is True


def test_pairs_count_the_repeats_run_side_by_side() -> None:
    """The i-th kube run against the i-th py run; a pair with an incomplete run does not
    count; an equal p99 counts for py (the target is <=); one pair gives no count."""
    kube = [_paced(H.KUBE, 1.3, None), _paced(H.KUBE, 1.4, None), _paced(H.KUBE, 1.5, None)]
    py = [_paced(H.PY, 1.3, None), _paced(H.PY, 1.5, None), _paced(H.PY, 1.0, None)]
    assert H.pairs_at_or_below(kube, py, "latency_client") == (2, 3)
    py[2] = {**py[2], "complete": False}
    assert H.pairs_at_or_below(kube, py, "latency_client") == (1, 2)
    assert H.pairs_at_or_below(kube[:1], py[:1], "latency_client") is None
    assert H.pairs_at_or_below(kube, py, "latency_due") is None  # no due times recorded
    by_name = {r["name"]: r for r in H.compute_ratios([kube[0], py[0]])}
    assert by_name["latency p99 py/kube"]["detail"] == "1.30 s / 1.30 s"


def test_one_run_stands_for_itself_and_no_complete_repeat_is_incomplete() -> None:
    one = _run("throughput", "equal", H.PY, pods_per_second=5.0)
    assert H.summarize_repeats([one]) is one
    assert H.summarize_repeats([]) is None
    failed = [{**one, "complete": False}, {**one, "complete": False}]
    summary = H.summarize_repeats(failed)
    assert summary is not None and summary["complete"] is False and summary["repeats"] == 2


def test_dump_results_round_trips() -> None:
    import json

    results = {"meta": {"date": "x"}, "runs": RUNS, "ratios": [], "profile": None}
    text = H.dump_results(results)
    assert json.loads(text) == results
    assert len(text.splitlines()) == len(RUNS) + 7


def test_ratios_are_judged_unrounded() -> None:
    """54.7 / 54.9 pods/s shows as 1.0 but misses ">= 1.0"; 3.0 / 3.0 ms meets "<= 1.0"."""
    runs = [
        _run("throughput", "equal", H.KUBE, pods_per_second=54.9, cpu_ms_per_pod=3.0),
        _run("throughput", "equal", H.PY, pods_per_second=54.7, cpu_ms_per_pod=3.0),
    ]
    by_name = {r["name"]: r for r in H.compute_ratios(runs)}
    assert by_name["throughput py/kube"]["value"] == 1.0
    assert by_name["throughput py/kube"]["met"] is False
    assert by_name["CPU ms/pod py/kube"]["met"] is True


def _binds_behind_bucket(arrivals: list[float], latency: float) -> list[float]:
    """Bind times of a scheduler that binds each pod ``latency`` after it arrives, through a
    50 QPS / burst 100 token bucket (client-go's: full at the start, reservations)."""
    tokens, stamp, out = 100.0, arrivals[0], []
    for t in arrivals:
        want = max(t + latency, stamp)
        tokens = min(100.0, tokens + (want - stamp) * 50)
        stamp = want
        tokens -= 1
        at = want if tokens >= 0 else want - tokens / 50
        out.append(at)
    return out


def test_limiter_start_is_the_first_bind_when_pods_come_evenly() -> None:
    arrivals = [i / 60 for i in range(1000)]  # 60 pods/s, above the 50 QPS
    start = H.limiter_start(_binds_behind_bucket(arrivals, 0.010), 0.0)
    assert start == pytest.approx(0.010, abs=1e-3)


def test_a_gap_among_the_first_pods_moves_the_limiter_start_and_the_tail() -> None:
    even = [i / 60 for i in range(1000)]
    # The same pods, but the 3rd to the 10th arrive 40 ms late: the bucket, nearly full,
    # wastes what it refills meanwhile.
    gap = [t + (0.040 if 2 <= i < 10 else 0.0) for i, t in enumerate(even)]
    binds_even, binds_gap = _binds_behind_bucket(even, 0.010), _binds_behind_bucket(gap, 0.010)
    start_even, start_gap = H.limiter_start(binds_even, 0.0), H.limiter_start(binds_gap, 0.0)
    assert start_even is not None and start_gap is not None
    moved = start_gap - start_even
    assert 0.015 < moved < 0.045
    # Every later pod binds that much later (the p99's difference).
    assert binds_gap[-1] - binds_even[-1] == pytest.approx(moved, abs=1e-3)


def test_limiter_start_needs_a_bucket_that_ran_dry() -> None:
    assert H.limiter_start([i / 60 for i in range(150)], 0.0) is None


@pytest.mark.parametrize(
    ("cores", "want"),
    [
        pytest.param(0.25, (2500, 10_000), id="a quarter core: 2.5 ms every 10 ms"),
        pytest.param(1.5, (15_000, 10_000), id="more than one core"),
        pytest.param(0.05, (1000, 20_000), id="under the 1 ms minimum: a longer period"),
        pytest.param(0.03, (1000, 33_334), id="the period rounds up, the quota stays >= 1 ms"),
    ],
)
def test_cfs_bandwidth(cores: float, want: tuple[int, int]) -> None:
    assert H.cfs_bandwidth(cores) == want


@pytest.mark.parametrize("cores", [0.0, -1.0, float("nan"), float("inf")])
def test_cfs_bandwidth_refuses_what_is_not_a_positive_number(cores: float) -> None:
    with pytest.raises(ValueError, match="positive number of cores"):
        H.cfs_bandwidth(cores)


def test_steady_rate_leaves_out_the_ramp_and_the_tail() -> None:
    # 10 binds in the first second (the ramp), then 100 a second for 8 s, then a slow tail.
    ramp = [i / 10 for i in range(10)]
    steady = [1.0 + i / 100 for i in range(800)]
    tail = [9.0 + i for i in range(10)]
    rate = H.steady_rate(ramp + steady + tail)
    assert rate == pytest.approx(100.0, rel=0.02)
    # The whole run's average is far below it.
    assert len(ramp + steady + tail) / 18.0 < 50


def test_steady_rate_needs_binds_spread_over_time() -> None:
    assert H.steady_rate([1.0, 2.0, 3.0]) is None
    assert H.steady_rate([5.0] * 20) is None


def test_the_report_shows_cpu_limited_runs_per_core() -> None:
    runs: list[dict[str, Any]] = [
        {
            "scenario": "throughput",
            "size": "large",
            "qps_mode": "equal",
            "scheduler": H.PY,
            "pods": 5000,
            "bound": 5000,
            "pods_per_second": 70.0,
            "steady_pods_per_second": 80.0,
            "cpu_ms_per_pod": 1.2,
            "cpu_limit": 0.1,
            "throttled_share": 0.97,
            "latency_client": {},
            "latency_server": {},
        },
        {
            "scenario": "throughput",
            "size": "large",
            "qps_mode": "equal",
            "scheduler": H.KUBE,
            "pods": 5000,
            "bound": 5000,
            "pods_per_second": 30.0,
            "steady_pods_per_second": 31.0,
            "cpu_ms_per_pod": 3.1,
            "latency_client": {},
            "latency_server": {},
        },
    ]
    md = H.render_markdown({"meta": {}, "runs": runs})
    section = md.split("## Under a CPU limit", 1)[1]
    # One row: the run without a limit is not in this table.
    rows = [ln for ln in section.split("\n## ", 1)[0].splitlines() if ln.startswith("| thro")]
    assert len(rows) == 1 and H.PY in rows[0]
    assert "| 800.00 |" in rows[0] and "| 0.97 |" in rows[0]
    assert H.per_core(None, 0.1) is None and H.per_core(80.0, None) is None
    # Limited runs are not judged against the targets (meant for the machine's CPU).
    assert H.compute_ratios([{**runs[1], "cpu_limit": 0.1}, runs[0]]) == []
    assert H.compute_ratios(runs)  # the unlimited run still is (its pair missing)


def test_with_main_shows_the_main_process_where_it_differs() -> None:
    assert H.with_main(1.8, 1.55) == "1.80 (main 1.55)"
    assert H.with_main(1.8, 1.8) == "1.80"
    assert H.with_main(1.8, 1.801) == "1.80"  # the same as shown
    assert H.with_main(1.8, None) == 1.8  # an older record: as before
    assert H.with_main(None, 1.5) is None
    assert H.with_main(160.0, 125.5, digits=0) == "160 (main 126)"


def _tree_runs(**main: float) -> list[dict[str, Any]]:
    py = _run(
        "throughput",
        "equal",
        H.PY,
        pods=5000,
        bound=5000,
        pods_per_second=90.0,
        steady_pods_per_second=95.0,
        vmhwm_kib=160 * 1024,
        cpu_ms_per_pod=1.8,
        cpu_limit=0.5,
        throttled_share=0.9,
        **main,
    )
    # kube-scheduler is one process: its main figures, when kept, are its totals.
    kube = {**py, "scheduler": H.KUBE, "cpu_ms_per_pod": 3.0, "vmhwm_kib": 90 * 1024}
    kube.update({f"main_{key}": kube[key] for key in ("cpu_ms_per_pod", "vmhwm_kib") if main})
    return [py, kube]


def _rows(md: str, title: str, first: str) -> list[str]:
    """The rows of the section ``title`` whose first column is ``first``."""
    section = md.split(title, 1)[1].split("\n## ", 1)[0]
    return [ln for ln in section.splitlines() if ln.startswith(f"| {first} |")]


def test_the_report_shows_main_process_cpu_and_memory_beside_the_tree() -> None:
    md = H.render_markdown(
        {"meta": {}, "runs": _tree_runs(main_cpu_ms_per_pod=1.55, main_vmhwm_kib=125 * 1024)}
    )
    py, kube = _rows(md, "## Throughput", "large")
    assert "| 160.00 (main 125.00) |" in py and "| 1.80 (main 1.55) |" in py
    assert "(main" not in kube  # kube-scheduler is one process: the total alone
    (limited, _kube) = _rows(md, "## Under a CPU limit", "throughput")
    assert "| 1.80 (main 1.55) |" in limited and "| 190.00 |" in limited
    assert "main process's alone in brackets" in md


def test_records_without_the_main_figures_render_as_before() -> None:
    md = H.render_markdown({"meta": {}, "runs": _tree_runs()})
    assert "(main" not in md
    py, _kube = _rows(md, "## Throughput", "large")
    assert "| 160.00 |" in py and "| 1.80 |" in py
    assert "| 1.80 |" in _rows(md, "## Under a CPU limit", "throughput")[0]
    # The same figure for both: no brackets either.
    same = H.render_markdown({"meta": {}, "runs": _tree_runs(main_cpu_ms_per_pod=1.8)})
    assert "(main" not in same
    assert "(main" not in H.render_markdown({"meta": {}, "runs": RUNS})


def test_control_plane_cpu_per_pod_and_its_columns() -> None:
    before = {"kube-apiserver": 10.0, "etcd": 4.0}
    after = {"kube-apiserver": 22.5, "etcd": 3.0}  # etcd restarted: its reading is left out
    assert H.cpu_per_pod(before, after, 5000) == {"kube-apiserver": 2.5}
    assert H.cpu_per_pod(before, {"kube-apiserver": 11.0}, 0) == {}
    assert H.cpu_per_pod({}, after, 100) == {}
    runs = _tree_runs()
    runs[0] = {**runs[0], "control_plane_cpu_ms_per_pod": {"kube-apiserver": 7.25, "etcd": 1.5}}
    md = H.render_markdown({"meta": {}, "runs": runs})
    first, second = _rows(md, "## Throughput", "large")
    assert "| 7.25 | 1.50 |" in first
    assert "| 7.25 |" not in second  # a record without them: empty cells
    assert "API server and etcd ms/pod" in md


def _request_total(code: int, group: str, resource: str, sub: str, verb: str, n: str) -> str:
    labels = (
        f'code="{code}",component="apiserver",dry_run="",group="{group}",resource="{resource}",'
        f'scope="resource",subresource="{sub}",verb="{verb}",version="v1"'
    )
    return "apiserver_request_total{" + labels + "} " + n


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests ...",
        "# TYPE apiserver_request_total counter",
        _request_total(201, "", "pods", "binding", "POST", "1000"),
        _request_total(409, "", "pods", "binding", "POST", "2"),
        _request_total(200, "", "pods", "", "LIST", "3"),
        _request_total(201, "events.k8s.io", "events", "", "POST", "1e+03"),
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 4000',
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 8.5e+06',
        'apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 4000',
        'apiserver_watch_events_total{group="events.k8s.io",kind="Event",version="v1"} 9',
        'etcd_requests_total{group="",operation="create",resource="pods"} 1000',
        'apiserver_request_duration_seconds_sum{verb="POST",resource="pods"} 12.5',
    ]
)


def test_api_counters_and_their_growth_per_pod() -> None:
    before = H.api_counters(METRICS)
    assert before == {
        "POST pods/binding": 1002.0,  # codes summed
        "LIST pods": 3.0,
        "POST events": 1000.0,
        "watch events pods": 4000.0,
        "watch bytes pods": 8.5e6,
        "watch events Event.events.k8s.io": 9.0,  # before 1.34: by kind
        "etcd create pods": 1000.0,
    }
    after = {**before, "POST pods/binding": 3002.0, "watch events pods": 12000.0, "GET leases": 5.0}
    assert H.counts_per_pod(before, after, 2000) == {
        "GET leases": 0.003,  # new since the first reading
        "POST pods/binding": 1.0,
        "watch events pods": 4.0,
    }
    assert H.counts_per_pod(before, after, 0) == {}
    assert H.counts_per_pod({}, after, 100) == {}  # no first reading: nothing to compare
    assert H.api_counters("not prometheus\n{}") == {}


def _backlog(sched: str, **metrics: Any) -> dict[str, Any]:
    return _run("throughput", "backlog", sched, pods=1000, **metrics)


def test_a_backlog_is_judged_on_its_drain_and_has_no_latency_rows() -> None:
    runs = [
        _backlog(H.KUBE, pods_per_second=320.0, cpu_ms_per_pod=1.8, first_bind_seconds=0.3),
        _backlog(H.PY, pods_per_second=480.0, cpu_ms_per_pod=0.9, first_bind_seconds=2.1),
    ]
    rows = [r for r in H.compute_ratios(runs) if r["qps_mode"] == "backlog"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["throughput py/kube"]["value"] == 1.5
    assert by_name["throughput py/kube"]["met"] is True
    assert by_name["CPU ms/pod py/kube"]["value"] == 0.5
    assert not [n for n in by_name if "latency" in n]


def test_the_report_lists_the_backlog_runs_start_up() -> None:
    runs = [
        _backlog(
            H.KUBE,
            pods_per_second=320.0,
            cpu_ms_per_pod=1.8,
            first_bind_seconds=0.31,
            drain_seconds=3.12,
            steady_pods_per_second=410.5,
            cpu_ms_per_pod_with_start=2.1,
        ),
        _backlog(H.PY, pods_per_second=480.0, cpu_ms_per_pod=0.9),  # an older record
    ]
    md = H.render_markdown({"meta": {}, "runs": runs})
    assert "Backlog runs: the pods were created" in md
    row = "| large | kube-scheduler | 1000 | 0.31 | 3.12 | 3.43 | 320.00 | 410.50 | 1.80 | 2.10 |"
    assert row in md
    assert "| large | py-scheduler | 1000 | - | - | - | 480.00 | - | 0.90 | - |" in md
    # Without a backlog run there is no such table.
    assert "Backlog runs" not in H.render_markdown({"meta": {}, "runs": RUNS})


def test_api_calls_where_the_schedulers_differ() -> None:
    """Medians per cell of each scheduler's runs; a counter is shown where the two differ by
    more than 5% and by 0.01 or more per pod; the watch bytes summed for every cell."""

    def calls(binding: float, events: float, pod_bytes: float) -> dict[str, float]:
        return {
            "POST pods/binding": binding,
            "POST events": events,
            "watch bytes pods": pod_bytes,
            "watch bytes nodes": 100.0 + pod_bytes / 10000,  # 3.x bytes apart: not shown
        }

    runs = [
        _run("deployments", "defaults", H.KUBE, api_calls_per_pod=calls(1.0, 1.24, 32000.0)),
        _run("deployments", "defaults", H.PY, api_calls_per_pod=calls(1.0, 1.5, 35000.0)),
        _run("deployments", "defaults", H.PY, api_calls_per_pod=calls(1.0, 1.3, 36000.0)),
        _run("deployments", "defaults", H.KUBE, api_calls_per_pod=calls(1.005, 1.2, 33000.0)),
        _run("deployments", "defaults", H.PY, api_calls_per_pod=calls(1.0, 1.26, 90000.0)),
        # a cell with one scheduler only, and a profiled run: neither is compared
        _run("throughput", "defaults", H.PY, api_calls_per_pod=calls(2.0, 2.0, 1.0)),
        _run("deployments", "defaults", H.PY, profiled=True, api_calls_per_pod=calls(9, 9, 9)),
    ]
    rows = H.api_call_differences(runs)
    assert rows == [
        ["deployments", "large", "defaults", "POST events", 1.22, 1.3],
        ["deployments", "large", "defaults", "watch bytes pods", 32500.0, 36000.0],
        ["deployments", "large", "defaults", "watch bytes, all", 32603, 36104],
    ]
    md = H.render_markdown({"meta": {}, "runs": runs})
    got = _rows(md, "## API server calls per pod where the schedulers differ", "deployments")
    assert got[0] == "| deployments | large | defaults | POST events | 1.22 | 1.30 |"
    assert len(got) == 3
    assert "API server calls per pod" not in H.render_markdown({"meta": {}, "runs": RUNS})


def test_deployments_by_priority_class_and_the_py_config_of_a_run() -> None:
    lat = {"count": 1, "p50": 1.0, "p99": 2.0}
    runs = [
        {
            "scenario": "deployments",
            "size": "large",
            "qps_mode": "defaults",
            "scheduler": H.KUBE,
            "latency_by_class": {"bench-dep-low": lat, "bench-dep-high": lat},
        },
        {
            "scenario": "deployments",
            "size": "large",
            "qps_mode": "defaults",
            "scheduler": H.PY,
            "py_config": {"apiCallOrder": "Priority"},
            "latency_by_class": {
                "bench-dep-low": {"count": 1, "p50": 3.0, "p99": 9.5},
                "bench-dep-high": {"count": 1, "p50": 0.1, "p99": 0.25},
            },
        },
    ]
    md = H.render_markdown({"meta": {}, "runs": runs})
    assert "--py-config" not in md
    assert "| size | client QPS | scheduler | bench-dep-low | bench-dep-high |" in md
    assert "| large | defaults | kube-scheduler | 1.00 / 2.00 | 1.00 / 2.00 |" in md
    row = "| large | defaults | py-scheduler (apiCallOrder: Priority) | 3.00 / 9.50 | 0.10 / 0.25 |"
    assert row in md
    meta = {"args": {"py_config": {"apiCallOrder": "Priority"}}}
    header = H.render_markdown({"meta": meta, "runs": runs})
    assert "(`--py-config`; the ratios below are of these runs): `apiCallOrder: Priority`" in header
    kube = {**runs[0], "kube_config": {"clientConnection.contentType": "application/json"}}
    md = H.render_markdown(
        {"meta": {"args": {"kube_config": kube["kube_config"]}}, "runs": [kube, runs[1]]}
    )
    assert (
        "| large | defaults | kube-scheduler (clientConnection.contentType: application/json) |"
        in md
    )
    assert "(`--kube-config`; the ratios below are of these runs): `clientConnection." in md
    # records from before the classes were kept: no such table
    old = [{k: v for k, v in r.items() if k != "latency_by_class"} for r in runs]
    assert "By PriorityClass" not in H.render_markdown({"meta": {}, "runs": old})


def test_the_dra_backlog_is_judged_like_the_throughput_backlog_and_by_claims_per_device() -> None:
    claims = {"claims": 1000, "allocated": 1000, "max_claims_per_device": 1}
    double = {"claims": 1000, "allocated": 1000, "max_claims_per_device": 2}
    runs = [
        _run(
            "dra",
            "backlog",
            H.KUBE,
            pods_per_second=100.0,
            cpu_ms_per_pod=4.0,
            allocated_claims=claims,
            overcommitted_nodes=0,
        ),
        _run(
            "dra",
            "backlog",
            H.PY,
            pods_per_second=150.0,
            cpu_ms_per_pod=3.0,
            allocated_claims=double,
            overcommitted_nodes=0,
        ),
    ]
    got = {(r["name"], r["qps_mode"]): (r["value"], r["met"]) for r in H.compute_ratios(runs)}
    assert got[("throughput py/kube (dra)", "backlog")] == (1.5, True)
    assert got[("CPU ms/pod py/kube (dra)", "backlog")] == (0.75, True)
    assert got[(f"claims per device (dra), {H.PY}", "backlog")] == (2.0, False)
    assert got[(f"claims per device (dra), {H.KUBE}", "backlog")] == (1.0, True)
    assert got[("nodes over capacity (dra), py", "backlog")] == (0.0, True)
    # Repeats: the worst one counts.
    fine = {"claims": 1000, "allocated": 999, "max_claims_per_device": 1}
    runs += [
        {**runs[0], "allocated_claims": fine},
        {**runs[1], "allocated_claims": claims},
    ]
    got = {(r["name"], r["qps_mode"]): (r["value"], r["met"]) for r in H.compute_ratios(runs)}
    assert got[(f"claims per device (dra), {H.PY}", "backlog")] == (2.0, False)
    kube = next(r for r in H.compute_ratios(runs) if r["name"].endswith(H.KUBE))
    assert kube["detail"] == "999 of 1000 claims allocated"


def test_the_extended_resource_backlog_is_judged_as_the_dra_one() -> None:
    claims = {"claims": 1000, "allocated": 1000, "max_claims_per_device": 1}
    runs = [
        _run(
            "dra-extended",
            "backlog",
            sched,
            pods_per_second=rate,
            cpu_ms_per_pod=cpu,
            allocated_claims=claims,
            overcommitted_nodes=0,
        )
        for sched, rate, cpu in ((H.KUBE, 100.0, 4.0), (H.PY, 120.0, 5.0))
    ]
    got = {(r["name"], r["qps_mode"]): (r["value"], r["met"]) for r in H.compute_ratios(runs)}
    assert got[("throughput py/kube (dra-extended)", "backlog")] == (1.2, True)
    assert got[("CPU ms/pod py/kube (dra-extended)", "backlog")] == (1.25, False)
    assert got[(f"claims per device (dra-extended), {H.PY}", "backlog")] == (1.0, True)
    assert got[("nodes over capacity (dra-extended), py", "backlog")] == (0.0, True)
