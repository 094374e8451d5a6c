"""Pure helpers of benchmarks/cluster_bench.py: statistics, ratios against the targets,
profile folding and the markdown report. No I/O, no cluster, no matplotlib: unit-tested in
tests/unit/test_bench_helpers.py.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

KUBE = "kube-scheduler"
PY = "py-scheduler"
SCHEDULERS = (KUBE, PY)
QPS_MODES = ("defaults", "equal", "backlog")
QPS_MODE_TEXT = {
    "defaults": "shipped defaults (50 QPS / 100 burst for both)",
    "equal": "equal unthrottled client (5000 QPS / 5000 burst for both)",
    "backlog": "every pod created before the scheduler starts (5000 QPS / 5000 burst for both)",
}
# In plot titles.
QPS_MODE_SHORT = {"defaults": "default QPS", "equal": "5000 QPS", "backlog": "backlog"}

# --------------------------------------------------------------------------------------------
# Statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default); None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in [0, 100]")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """count, mean, p50, p90, p99, max (None when there are no values)."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)

    return {
        "count": len(values),
        "mean": r(sum(values) / len(values)),
        "p50": r(percentile(values, 50)),
        "p90": r(percentile(values, 90)),
        "p99": r(percentile(values, 99)),
        "max": r(max(values)),
    }


def quantile_sketch(values: Sequence[float], points: int = 101, digits: int = 4) -> list[float]:
    """`points` evenly spaced quantiles (0%..100%) of values: a small, plottable CDF."""
    if not values:
        return []
    if points < 2:
        raise ValueError("a sketch needs at least 2 points")
    out: list[float] = []
    for i in range(points):
        p = percentile(values, 100.0 * i / (points - 1))
        assert p is not None
        out.append(round(p, digits))
    return out


def cdf_xy(sketch: Sequence[float]) -> tuple[list[float], list[float]]:
    """(x, y) of a CDF from a quantile sketch: x the value, y the fraction at or below it."""
    n = len(sketch)
    if n == 0:
        return [], []
    if n == 1:
        return [sketch[0]], [1.0]
    return list(sketch), [i / (n - 1) for i in range(n)]


def completion_curve(
    times: Iterable[float], t0: float, max_points: int = 200
) -> list[tuple[float, int]]:
    """(seconds since t0, how many had completed by then), at most max_points points, always
    including the last one."""
    ordered = sorted(t - t0 for t in times)
    n = len(ordered)
    if n == 0:
        return []
    step = max(1, math.ceil(n / max_points))
    picks = list(range(step - 1, n, step))
    if picks[-1] != n - 1:
        picks.append(n - 1)
    return [(round(ordered[i], 3), i + 1) for i in picks]


def parse_time(text: str | None) -> float | None:
    """RFC 3339 ('2026-01-02T03:04:05Z', optionally with fractions or an offset) -> epoch
    seconds; None for None or ''."""
    if not text:
        return None
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def refill_seconds(qps: int | None) -> float:
    """How long an emptied client token bucket takes to fill again, burst / qps: the
    shipped 100 / 50 when ``qps`` is None (the defaults), 1 s for the equal client (its
    burst is its qps)."""
    if qps is None:
        return 100 / 50
    return 1.0


def limiter_start(
    bound: Iterable[float], first: float, qps: float = 50.0, burst: int = 100
) -> float | None:
    """When a client token bucket that binds every pod started its schedule, in seconds
    after ``first`` (the first pod sent): once the bucket is dry, the k-th bind (1-based)
    cannot come before start + (k - burst) / qps, and a scheduler bound by it binds on
    that schedule. The median over the later half of the binds of (bind - first) - (k -
    burst) / qps; None when the bucket never ran dry (fewer than 2 * burst binds).

    At the shipped defaults with pods arriving faster than ``qps`` it decides the tail
    latency: the start is the first bind, later by any time the bucket spent full while
    the first pods came in (a gap between them then wastes refill), so two schedulers'
    p99s differ by about their starts' difference."""
    times = sorted(bound)
    if len(times) < 2 * burst:
        return None
    late = [t - first - (k + 1 - burst) / qps for k, t in enumerate(times)][len(times) // 2 :]
    return _median(late)


def cfs_bandwidth(cores: float, period_us: int = 10_000) -> tuple[int, int]:
    """(quota, period) in microseconds for a CFS bandwidth limit of ``cores`` CPUs: the
    period is ``period_us`` (a short one spreads the allowance evenly: 10 ms by default),
    lengthened where the quota would fall under the kernel's 1 ms minimum. A limit that
    is not a positive number is a ValueError."""
    if not cores > 0 or cores != cores or cores == float("inf"):
        raise ValueError(f"a CPU limit must be a positive number of cores, got {cores!r}")
    period = max(period_us, math.ceil(1000 / cores))
    return max(1000, round(cores * period)), period


def steady_rate(bound: Iterable[float], lo: float = 0.1, hi: float = 0.9) -> float | None:
    """Binds per second between the ``lo`` and ``hi`` fractions of the binds (the middle of
    the run, without its ramp up and its tail); None with fewer than 10 binds or no time
    between them."""
    times = sorted(bound)
    if len(times) < 10:
        return None
    a, b = int(lo * (len(times) - 1)), int(hi * (len(times) - 1))
    span = times[b] - times[a]
    return None if span <= 0 else (b - a) / span


# The control plane's processes whose CPU each run records (``cpu_per_pod``): what the
# scheduler under test costs the API server, and through it etcd, per pod. On a many-core
# machine they are what both schedulers share, and on these 2 cores their CPU is taken from
# everything else.
CONTROL_PLANE = ("kube-apiserver", "etcd")


def cpu_per_pod(
    before: Mapping[str, float], after: Mapping[str, float], pods: int
) -> dict[str, float]:
    """CPU ms per pod of each process named in both readings (CPU seconds); {} without
    pods. A process that was restarted in between (less CPU than before) is left out."""
    if pods <= 0:
        return {}
    return {
        name: round(1000 * (after[name] - before[name]) / pods, 2)
        for name in before
        if name in after and after[name] >= before[name]
    }


# The API server's own counters (its /metrics): which calls a run made and how many watch
# events it sent, so that a difference in the API server's CPU per pod between the two
# schedulers can be traced to the calls that differ (the rest of the run is the same).
_SAMPLE = re.compile(
    r"^(apiserver_request_total|apiserver_watch_events_total|"
    r"apiserver_watch_events_sizes_sum|etcd_requests_total)\{([^}]*)\} (\S+)$"
)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def api_counters(text: str) -> dict[str, float]:
    """Counters from the API server's Prometheus text: ``"<VERB> <resource>[/<sub>]"`` for
    requests (summed over codes and scopes), ``"watch events <resource>[.<group>]"`` and
    ``"watch bytes <resource>[.<group>]"`` for what its watches sent, ``"etcd <operation>
    <resource>[.<group>]"`` for the API server's requests to etcd."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m.group(2)))
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if m.group(1) == "apiserver_request_total":
            res = labels.get("resource", "")
            if labels.get("subresource"):
                res += "/" + labels["subresource"]
            out[f"{labels.get('verb', '?')} {res}"] += value
        elif m.group(1) == "etcd_requests_total":
            what = labels.get("resource", "?")
            if labels.get("group"):
                what += "." + labels["group"]
            out[f"etcd {labels.get('operation', '?')} {what}"] += value
        else:  # by resource since 1.34 (the kind before it)
            what = labels.get("resource") or labels.get("kind") or "?"
            if labels.get("group"):
                what += "." + labels["group"]
            unit = "events" if m.group(1) == "apiserver_watch_events_total" else "bytes"
            out[f"watch {unit} {what}"] += value
    return dict(out)


def counts_per_pod(
    before: Mapping[str, float], after: Mapping[str, float], pods: int
) -> dict[str, float]:
    """Per pod, each counter that grew between the readings (3 decimals, 0 dropped); {}
    without pods or a reading."""
    if pods <= 0 or not before or not after:
        return {}
    out = {}
    for name, value in after.items():
        grew = value - before.get(name, 0.0)
        if grew > 0 and round(grew / pods, 3) > 0:
            out[name] = round(grew / pods, 3)
    return dict(sorted(out.items()))


def ratio(num: float | None, den: float | None, digits: int = 2) -> float | None:
    """num / den rounded, or None when either is missing or den is 0."""
    if num is None or den is None or den == 0:
        return None
    return round(num / den, digits)


_PREEMPTED = re.compile(r"Preempted by (?:pod |Pod )?(\S+) on node (\S+)")


def parse_preempted_message(message: str) -> tuple[str, str] | None:
    """(preemptor uid, node) from a Preempted event's message, from either scheduler:
    kube-scheduler 'Preempted by pod <uid> on node <node>' (older: without 'pod ')."""
    match = _PREEMPTED.search(message or "")
    return (match.group(1), match.group(2)) if match else None


def victims_summary(
    victims_by_preemptor: Mapping[str, int],
    preemptors: int,
    needed: int,
) -> dict[str, Any]:
    """Victims per preemptor from Preempted events grouped by preemptor."""
    counts = list(victims_by_preemptor.values())
    total = sum(counts)
    return {
        "preemptors_with_victims": len(counts),
        "victims_from_events": total,
        "victims_per_preemptor": ratio(total, preemptors, 3),
        "max_victims_for_one_preemptor": max(counts) if counts else 0,
        "preemptors_over_needed": sum(1 for c in counts if c > needed),
        "histogram": {str(k): v for k, v in sorted(Counter(counts).items())},
    }


# CPU requests (millicores) of the benchmark's pods, by name prefix.
POD_CPU_MILLI = {"tp": 100, "warmup": 100, "low": 900, "high": 3000}


def node_cpu_usage(pods: Iterable[tuple[str, str, bool]]) -> dict[str, int]:
    """Requested millicores per node of the pods still there: (node, name group, alive)."""
    usage: Counter[str] = Counter()
    for node, group, alive in pods:
        if node and alive:
            usage[node] += POD_CPU_MILLI.get(group, 0)
    return dict(usage)


# --------------------------------------------------------------------------------------------
# Ratios and targets


def find_run(
    runs: Sequence[Mapping[str, Any]], *, scenario: str, size: str, qps_mode: str, scheduler: str
) -> Mapping[str, Any] | None:
    for run in runs:
        if (
            run.get("scenario") == scenario
            and run.get("size") == size
            and run.get("qps_mode") == qps_mode
            and run.get("scheduler") == scheduler
            and not run.get("profiled")
        ):
            return run
    return None


def find_runs(
    runs: Sequence[Mapping[str, Any]], *, scenario: str, size: str, qps_mode: str, scheduler: str
) -> list[Mapping[str, Any]]:
    """Every unprofiled run of that scenario, size, mode and scheduler (``--repeat``)."""
    return [
        run
        for run in runs
        if run.get("scenario") == scenario
        and run.get("size") == size
        and run.get("qps_mode") == qps_mode
        and run.get("scheduler") == scheduler
        and not run.get("profiled")
    ]


# Summarised over repeats by the median; correctness counts by the worst run.
_MEDIAN_KEYS = ("pods_per_second", "cpu_ms_per_pod", "completion_seconds")
_WORST_KEYS = (
    "victims_per_preemptor",
    "victims_beyond_need",
    "victims_on_nodes_without_preemptor",
    "max_victims_per_preemptor",
    "overcommitted_nodes",
)


def summarize_repeats(runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """One run standing for repeats of the same run: itself when there is one; else the
    median of the throughput, CPU, completion time and client p99 of the complete repeats
    (each figure's own median), and the worst of the victim and over-capacity counts, with
    ``repeats`` saying how many. Incomplete when no repeat completed."""
    if not runs:
        return None
    if len(runs) == 1:
        return runs[0]
    done = [r for r in runs if r.get("complete", False)]
    if not done:
        return {**runs[0], "complete": False, "repeats": len(runs)}
    out: dict[str, Any] = {"complete": True, "repeats": len(done)}
    for key in _MEDIAN_KEYS:
        values = [float(r[key]) for r in done if isinstance(r.get(key), int | float)]
        if values:
            out[key] = _median(values)
    for key in _WORST_KEYS:
        worst = [r[key] for r in done if isinstance(r.get(key), int | float)]
        if worst:
            out[key] = max(worst)
    for lat in ("latency_client", "latency_due"):
        p99s = [v for v in (_p99(r, lat) for r in done) if v is not None]
        if p99s:
            out[lat] = {"p99": _median(p99s), "repeats": len(p99s)}
    # The dra scenario's claims: the worst repeat (fewest allocated, most on one device).
    claims = [r["allocated_claims"] for r in done if isinstance(r.get("allocated_claims"), dict)]
    if claims:
        out["allocated_claims"] = {
            "claims": max(c.get("claims", 0) for c in claims),
            "allocated": min(c.get("allocated", 0) for c in claims),
            "max_claims_per_device": max(c.get("max_claims_per_device", 0) for c in claims),
        }
    return out


def _repeats_note(*runs: Mapping[str, Any] | None) -> str:
    """' (medians of N repeats)' when the figures are medians, else ''."""
    n = max((int(r.get("repeats", 1)) for r in runs if r is not None), default=1)
    return f" (medians of {n} repeats)" if n > 1 else ""


def _latency_note(key: str, *runs: Mapping[str, Any] | None) -> str:
    """``_repeats_note`` for a latency figure: counts the repeats that recorded it (a run
    from before ``latency_due`` existed has none)."""
    n = 1
    for run in runs:
        lat = None if run is None else run.get(key)
        if isinstance(lat, Mapping):
            n = max(n, int(lat.get("repeats", 1)))
    return f" (medians of {n} repeats)" if n > 1 else ""


def pairs_meeting(
    kube: Sequence[Mapping[str, Any]],
    py: Sequence[Mapping[str, Any]],
    value: Callable[[Mapping[str, Any] | None], float | None],
    op: str,
) -> tuple[int, int] | None:
    """For repeats (``--repeat``): in how many pairs py-scheduler's ``value`` met kube-
    scheduler's (``op``: ">=" at or above, "<=" at or below), of the pairs where both have
    one. A pair is the i-th run of each, in the order they ran (each repeat runs one of
    each, back to back). None with fewer than two pairs: a single pair is the ratio itself."""
    pairs = [(value(k), value(p)) for k, p in zip(kube, py, strict=False)]
    both = [(k, p) for k, p in pairs if k is not None and p is not None]
    if len(both) < 2:
        return None
    return sum(1 for k, p in both if (p >= k if op == ">=" else p <= k)), len(both)


def pairs_at_or_below(
    kube: Sequence[Mapping[str, Any]], py: Sequence[Mapping[str, Any]], key: str
) -> tuple[int, int] | None:
    """``pairs_meeting`` for the p99 ``key`` of completed runs (lower is better)."""
    return pairs_meeting(kube, py, lambda run: _p99(run, key), "<=")


def _pairs_note(pairs: tuple[int, int] | None, op: str = "<=") -> str:
    """'; py's at or below in K of N pairs' (or 'at or above' for ">=") for a
    ``pairs_meeting`` count, else ''."""
    if pairs is None:
        return ""
    side = "above" if op == ">=" else "below"
    return f"; py's at or {side} in {pairs[0]} of {pairs[1]} pairs"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _metric(run: Mapping[str, Any] | None, key: str) -> float | None:
    if run is None or not run.get("complete", False):
        return None
    value = run.get(key)
    return float(value) if isinstance(value, int | float) else None


def _check(value: float | None, op: str, target: float) -> bool | None:
    if value is None:
        return None
    return value >= target if op == ">=" else value <= target


def compute_ratios(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The issue's ratios for every size that was run, each against its target.

    The hot-path issue's: for the throughput and deployments scenarios, throughput py/kube
    >= 1.0, CPU ms per pod py/kube <= 1.0 and client p99 latency py/kube <= 1.0 (both QPS
    modes); peak RSS py/kube <= 1.0; no node over capacity. Kept from the first round:
    preemption completion time kube/py (>= 0.8) and victims per preemptor (py never above
    kube). `met` is None when a run is missing or did not complete. Repeats of a run
    (``cluster_bench.py --repeat``) count by their median (``summarize_repeats``). Runs
    under a CPU limit (``--scheduler-cpus``) are not judged here: the issue's targets are
    for schedulers with the machine's CPU; those runs have a table of their own."""
    runs = [r for r in runs if not r.get("cpu_limit")]
    sizes = list(dict.fromkeys(str(r.get("size")) for r in runs))
    out: list[dict[str, Any]] = []

    def add(
        name: str, size: str, mode: str, value: float | None, op: str, target: float, detail: str
    ) -> None:
        out.append(
            {
                "name": name,
                "size": size,
                "qps_mode": mode,
                # Shown to two digits; judged unrounded (0.996 is not >= 1.0).
                "value": None if value is None else round(value, 2),
                "op": op,
                "target": target,
                "met": _check(value, op, target),
                "detail": detail,
            }
        )

    for size in sizes:
        for mode in QPS_MODES:

            def each(
                scenario: str, sched: str, size: str = size, mode: str = mode
            ) -> list[Mapping[str, Any]]:
                return find_runs(runs, scenario=scenario, size=size, qps_mode=mode, scheduler=sched)

            def get(scenario: str, sched: str) -> Mapping[str, Any] | None:
                return summarize_repeats(each(scenario, sched))

            for scenario in ("throughput", "deployments", "dra", "dra-extended"):
                tk, tp = get(scenario, KUBE), get(scenario, PY)
                if tk is None and tp is None:
                    continue
                what = "" if scenario == "throughput" else f" ({scenario})"
                of = _repeats_note(tk, tp)
                if scenario in ("dra", "dra-extended"):
                    # Correctness: a device is never given to two claims.
                    for sched, dra_run in ((PY, tp), (KUBE, tk)):
                        claims = (dra_run or {}).get("allocated_claims") or {}
                        most = claims.get("max_claims_per_device")
                        if most is not None:
                            add(
                                f"claims per device ({scenario}), {sched}",
                                size,
                                mode,
                                float(most),
                                "<=",
                                1.0,
                                f"{claims.get('allocated')} of {claims.get('claims')} claims "
                                "allocated",
                            )

                def paired(key: str, op: str, scenario: str = scenario) -> str:
                    pairs = pairs_meeting(
                        each(scenario, KUBE), each(scenario, PY), lambda run: _metric(run, key), op
                    )
                    return _pairs_note(pairs, op)

                value = ratio(_metric(tp, "pods_per_second"), _metric(tk, "pods_per_second"), 6)
                add(
                    f"throughput py/kube{what}",
                    size,
                    mode,
                    value,
                    ">=",
                    1.0,
                    f"{_fmt(_metric(tp, 'pods_per_second'))} / "
                    f"{_fmt(_metric(tk, 'pods_per_second'))} pods/s{of}"
                    f"{paired('pods_per_second', '>=')}",
                )
                ck, cp = _metric(tk, "cpu_ms_per_pod"), _metric(tp, "cpu_ms_per_pod")
                if ck is not None or cp is not None:
                    add(
                        f"CPU ms/pod py/kube{what}",
                        size,
                        mode,
                        ratio(cp, ck, 6),
                        "<=",
                        1.0,
                        f"{_fmt(cp)} / {_fmt(ck)} ms{of}{paired('cpu_ms_per_pod', '<=')}",
                    )
                for key, label in (
                    ("latency_client", "latency p99"),
                    ("latency_due", "latency p99 from the paced arrival"),
                ):
                    lk, lp = _p99(tk, key), _p99(tp, key)
                    if lk is not None or lp is not None:
                        pairs = pairs_at_or_below(each(scenario, KUBE), each(scenario, PY), key)
                        add(
                            f"{label} py/kube{what}",
                            size,
                            mode,
                            ratio(lp, lk, 6),
                            "<=",
                            1.0,
                            f"{_fmt(lp)} s / {_fmt(lk)} s{_latency_note(key, tk, tp)}"
                            f"{_pairs_note(pairs)}",
                        )
            pk, pp = get("preemption", KUBE), get("preemption", PY)
            if pk is not None or pp is not None:
                ck, cp = _metric(pk, "completion_seconds"), _metric(pp, "completion_seconds")
                add(
                    "preemption completion kube/py",
                    size,
                    mode,
                    ratio(ck, cp, 6),
                    ">=",
                    0.8,
                    f"{_fmt(ck)} s / {_fmt(cp)} s{_repeats_note(pk, pp)}",
                )
                vk = _metric(pk, "victims_per_preemptor")
                vp = _metric(pp, "victims_per_preemptor")
                bk, bp = _beyond_need(pk), _beyond_need(pp)
                most = "max_victims_per_preemptor"  # from Preempted events
                diff = None if vk is None or vp is None else round(vp - vk, 3)
                never_above = None
                if vk is not None and vp is not None and bk is not None and bp is not None:
                    never_above = bool(vp <= vk and bp <= bk)
                out.append(
                    {
                        "name": "victims per preemptor py - kube",
                        "size": size,
                        "qps_mode": mode,
                        "value": diff,
                        "op": "<=",
                        "target": 0.0,
                        "met": never_above,
                        "detail": f"deleted per preemptor {_fmt(vp, 3)} vs {_fmt(vk, 3)}; "
                        f"deleted beyond need {_fmt(bp, 0)} vs {_fmt(bk, 0)}; most victims "
                        f"named for one preemptor {_fmt(_metric(pp, most), 0)} vs "
                        f"{_fmt(_metric(pk, most), 0)}",
                    }
                )
            # Correctness: no node may end up with more requested cpu than it has.
            for scenario in ("throughput", "deployments", "preemption", "dra", "dra-extended"):
                ok, op_ = get(scenario, KUBE), get(scenario, PY)
                oc_py = None if op_ is None else op_.get("overcommitted_nodes")
                oc_kube = None if ok is None else ok.get("overcommitted_nodes")
                if oc_py is None and oc_kube is None:
                    continue
                add(
                    f"nodes over capacity ({scenario}), py",
                    size,
                    mode,
                    None if oc_py is None else float(oc_py),
                    "<=",
                    0.0,
                    f"py {_fmt(oc_py)}, kube {_fmt(oc_kube)}",
                )
        # Peak RSS: the largest high-water mark of each scheduler's throughput runs at this size.
        peaks: dict[str, float] = {}
        for sched in SCHEDULERS:
            marks = [
                float(r["vmhwm_kib"])
                for r in runs
                if r.get("size") == size
                and r.get("scheduler") == sched
                and r.get("scenario") in ("throughput", "deployments")
                and not r.get("profiled")
                and isinstance(r.get("vmhwm_kib"), int | float)
            ]
            if marks:
                peaks[sched] = max(marks)
        if peaks:
            add(
                "peak RSS py/kube",
                size,
                "all",
                ratio(peaks.get(PY), peaks.get(KUBE), 6),
                "<=",
                1.0,
                f"{_fmt(_mib(peaks.get(PY)), 0)} MiB / {_fmt(_mib(peaks.get(KUBE)), 0)} MiB",
            )
    return out


def _sum(a: Any, b: Any) -> float | None:
    """a + b, rounded to 2 digits; None when either is not a number."""
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return round(float(a) + float(b), 2)


def _p99(run: Mapping[str, Any] | None, key: str = "latency_client") -> float | None:
    """p99 latency of a complete run: client side from the create call (``latency_client``)
    or, for paced runs, from the time each pod was due (``latency_due``)."""
    if run is None or not run.get("complete", False):
        return None
    lat = run.get(key)
    value = lat.get("p99") if isinstance(lat, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def _beyond_need(run: Mapping[str, Any] | None) -> float | None:
    """Low pods deleted beyond need, from the pods themselves: victims on nodes where no
    preemptor was bound, plus victims over 3 per preemptor bound on a node."""
    if run is None or not run.get("complete", False):
        return None
    extra = run.get("victims_beyond_need")
    if isinstance(extra, int | float):
        return float(extra)
    # Older records: the victims on nodes where no preemptor went.
    wasted = run.get("victims_on_nodes_without_preemptor")
    return None if not isinstance(wasted, int | float) else float(wasted)


def _mib(kib: float | None) -> float | None:
    return None if kib is None else kib / 1024.0


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


# --------------------------------------------------------------------------------------------
# Profiles (py-spy --format raw: collapsed stacks "frame;frame;frame count")


def fold_profile(lines: Iterable[str], top: int = 15) -> dict[str, Any]:
    """Self and inclusive sample counts from collapsed stacks ('frame;frame;frame count').

    A frame looks like 'function (path/to/file.py:123)'; the line number is dropped so that
    one function is one row. Pseudo-frames without a '.py' file (process, thread) are skipped.
    `self`: the innermost frame's function; `areas`: self samples by package (the scheduler's
    own code by module); `inclusive`: time under each function of the scheduler's own code."""
    self_counts: Counter[str] = Counter()
    area_counts: Counter[str] = Counter()
    incl_counts: Counter[str] = Counter()
    total = 0
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count_text = line.rpartition(" ")
        try:
            count = int(count_text)
        except ValueError:
            continue
        frames = [f for f in (_frame(x) for x in stack.split(";")) if f is not None]
        if not frames:
            continue
        total += count
        func, path = frames[-1]
        self_counts[f"{func} ({path})"] += count
        area_counts[profile_area(path)] += count
        for name in {f"{f} ({p})" for f, p in frames if p.startswith("scheduler/")}:
            incl_counts[name] += count

    def rows(counter: Counter[str], key: str = "function") -> list[dict[str, Any]]:
        return [
            {key: name, "samples": n, "percent": round(100.0 * n / total, 1)}
            for name, n in counter.most_common(top)
        ]

    return {
        "samples": total,
        "self": rows(self_counts),
        "areas": rows(area_counts, "area"),
        "inclusive": rows(incl_counts),
    }


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame(frame: str) -> tuple[str, str] | None:
    match = _FRAME.match(frame.strip())
    if not match or ".py" not in match.group("file"):
        return None
    path = match.group("file")
    for marker in ("site-packages/", "/work/main/", "/lib/python3.11/", "/lib/python3.12/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return match.group("func"), path


def profile_area(path: str) -> str:
    """Where a frame's file belongs: the scheduler's own modules by name, else the top package
    ('kopf', 'urllib3', 'asyncio', 'ssl', ...)."""
    if path.startswith("scheduler/"):
        return path
    head = path.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def dump_results(results: Mapping[str, Any]) -> str:
    """results.json: indented at the top, one line per run or ratio (small, diffable)."""
    parts = []
    for key, value in results.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            body = ",\n".join("  " + json.dumps(v, separators=(",", ":")) for v in value)
            parts.append(f"{json.dumps(key)}: [\n{body}\n ]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"


# --------------------------------------------------------------------------------------------
# The markdown report


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(c) for c in row) + " |")
    return lines


def _lat(run: Mapping[str, Any], key: str, field: str) -> Any:
    return (run.get(key) or {}).get(field)


def with_main(total: Any, main: Any, digits: int = 2) -> Any:
    """A process tree's figure with its main process's beside it where they differ, e.g.
    "1.80 (main 1.55)": py-scheduler's ceiling depends on its main process, its comparison
    with kube-scheduler on the total. ``total`` alone (as is, for the table to format) when
    ``main`` is missing (a record from before it was kept) or shows the same."""
    if total is None or not isinstance(main, int | float):
        return total
    shown, shown_main = _fmt(total, digits), _fmt(main, digits)
    return shown if shown == shown_main else f"{shown} (main {shown_main})"


# Under the per-run tables: what their CPU and memory columns count.
_TREE_NOTE = (
    "CPU and peak RSS are the scheduler's process tree's (py-scheduler's event writer "
    "included; peak RSS: the sum of each live process's VmHWM, an upper bound), with the "
    "main process's alone in brackets where it differs."
)


_CONTROL_PLANE_NOTE = (
    "API server and etcd ms/pod: those processes' CPU over the same phase, per pod (the "
    "benchmark's own clients, kwok and kube-controller-manager call the API server too, the "
    "same for both schedulers; the difference is the scheduler's calls); empty in records "
    "from before round 21."
)


def render_markdown(results: Mapping[str, Any]) -> str:
    """results.md: the setup, one table per scenario, the ratios against the targets."""
    meta = results.get("meta") or {}
    runs: list[Mapping[str, Any]] = list(results.get("runs") or [])
    md: list[str] = ["# Cluster benchmarks: py-scheduler vs kube-scheduler", ""]
    machine = meta.get("machine") or {}
    versions = meta.get("versions") or {}
    md += [
        f"- date: {meta.get('date', '-')}; revision `{meta.get('revision', '-')}`",
        f"- machine: {machine.get('cores', '-')} cores, {machine.get('memory_gib', '-')} GiB, "
        f"{machine.get('cpu', '-')}; Python {machine.get('python', '-')}",
        "- control plane: Kubernetes "
        + ", ".join(f"{k}={v}" for k, v in versions.items())
        + "; kwok fake nodes (4 cpu, 32Gi, 110 pods)",
        "- py-scheduler's dependencies: "
        + {
            "image": "the image's (a virtualenv of requirements.lock)",
            "dev": "the development virtualenv's (with its extras)",
        }.get((meta.get("args") or {}).get("py_deps", "dev"), "-"),
        "- nodes: "
        + (
            "made anew for every run"
            if (meta.get("args") or {}).get("fresh_nodes", True)
            else "made once and kept from run to run (emptied and checked Ready before each)"
        ),
        *(
            [
                "- py-scheduler's configuration set by the benchmark (`--py-config`; the "
                "ratios below are of these runs): "
                + ", ".join(f"`{k}: {v}`" for k, v in py_config.items())
            ]
            if (py_config := (meta.get("args") or {}).get("py_config"))
            else []
        ),
        *(
            [
                "- kube-scheduler's configuration set by the benchmark (`--kube-config`; the "
                "ratios below are of these runs): "
                + ", ".join(f"`{k}: {v}`" for k, v in kube_config.items())
            ]
            if (kube_config := (meta.get("args") or {}).get("kube_config"))
            else []
        ),
        f"- load average before / after: {meta.get('loadavg_start', '-')} / "
        f"{meta.get('loadavg_end', '-')} (other work on the machine adds noise)",
        "",
    ]
    ratios = results.get("ratios") or compute_ratios(runs)
    if ratios:
        md += ["## Ratios against the targets", ""]
        md += _table(
            ["ratio", "size", "client QPS", "value", "target", "met", "detail"],
            (
                [
                    r["name"],
                    r["size"],
                    r["qps_mode"],
                    r["value"],
                    f"{r['op']} {r['target']}",
                    r["met"],
                    r["detail"],
                ]
                for r in ratios
            ),
        )
        md.append("")
    intro = {
        "throughput": (
            "## Throughput",
            "Pods of upstream scheduler_perf's default shape (100m / 500Mi, priority 0) created "
            "in bulk; pods/s from the first create call to the last bind the benchmark's watch "
            "saw. Latency (client): create call to the watch seeing `spec.nodeName`. Latency "
            "(server): `creationTimestamp` to the PodScheduled condition's "
            "`lastTransitionTime` (whole seconds). With the equal client the pods are created "
            "as fast as it can; at the shipped defaults (runs with a paced rate recorded) they "
            "are created at that fixed rate, above the 50 QPS both schedulers bind at, so both "
            "see the same arrivals and the same backlog. p99 from due: from the time the pace "
            "meant each pod to be created (a client slowed by the machine's load sends late, "
            "and a late pod waits less behind the rate limit). Limiter start (paced runs): "
            "when the 50 QPS token bucket's schedule of binds began, after the first pod was "
            "sent; every later bind follows that schedule, so two schedulers' p99s differ by "
            "about the difference of their starts, which the first pods decide. A backlog: "
            "every pod created before the scheduler starts; pods/s and CPU ms/pod from the "
            "first bind to the last (no client in the loop), the start-up in the table "
            "below.",
        ),
        "deployments": (
            "## Deployments",
            "Pods made by kube-controller-manager for real Deployments (50 replicas each, "
            "100m / 500Mi), each with a headless Service and a PodDisruptionBudget, in three "
            "PriorityClasses: the shape system default spreading and the selector informers "
            "see in production. pods/s from the first Deployment created to the last bind; "
            'latency (client): the watch seeing the pod to the watch seeing it bound; "create '
            's" is how long kube-controller-manager took to create every pod; limiter start '
            "(paced runs) counts from the first Deployment created.",
        ),
        "dra": (
            "## Dynamic resource allocation",
            "A backlog of pods that each have a ResourceClaim of their own for one device "
            "(a DeviceClass whose CEL selector reads the driver and an attribute), on nodes "
            "that each publish a ResourceSlice of 16 devices: both schedulers allocate a "
            "device per pod and write the claim (finalizer, allocation, reservation) before "
            "the Binding. pods/s and CPU ms/pod from the first bind to the last, as the "
            "throughput backlog's.",
        ),
        "dra-extended": (
            "## Dynamic resource allocation: extended resources backed by devices",
            "The same backlog and devices, behind an extended resource (a DeviceClass's "
            "extendedResourceName): every pod asks for one (requests and limits, no claim); "
            "both schedulers create a claim per pod, allocate a device and write it, and "
            "write the pod's status.extendedResourceClaimStatus before the Binding.",
        ),
    }
    for scenario, (title, text) in intro.items():
        tp = [r for r in runs if r.get("scenario") == scenario]
        if not tp:
            continue
        md += [title, "", text, ""]
        md += _table(
            [
                "size",
                "client QPS",
                "scheduler",
                "nodes",
                "pods",
                "bound",
                "pods/s",
                "create s",
                "p50 s",
                "p99 s",
                "p99 from due s",
                "limiter start ms",
                "server p50 s",
                "server p99 s",
                "peak RSS MiB",
                "CPU s",
                "CPU ms/pod",
                "API server ms/pod",
                "etcd ms/pod",
                "over capacity",
            ],
            (
                [
                    r["size"],
                    r["qps_mode"],
                    _scheduler_label(r),
                    r.get("nodes"),
                    r.get("pods"),
                    r.get("bound"),
                    r.get("pods_per_second"),
                    r.get("create_seconds"),
                    _lat(r, "latency_client", "p50"),
                    _lat(r, "latency_client", "p99"),
                    _lat(r, "latency_due", "p99"),
                    r.get("limiter_start_ms"),
                    _lat(r, "latency_server", "p50"),
                    _lat(r, "latency_server", "p99"),
                    with_main(_mib(r.get("vmhwm_kib")), _mib(r.get("main_vmhwm_kib"))),
                    r.get("cpu_seconds"),
                    with_main(r.get("cpu_ms_per_pod"), r.get("main_cpu_ms_per_pod")),
                    (r.get("control_plane_cpu_ms_per_pod") or {}).get("kube-apiserver"),
                    (r.get("control_plane_cpu_ms_per_pod") or {}).get("etcd"),
                    r.get("overcommitted_nodes"),
                ]
                for r in tp
            ),
        )
        md += ["", _TREE_NOTE + " " + _CONTROL_PLANE_NOTE, ""]
        if scenario == "deployments":
            md += _render_classes(tp)
        backlog = [r for r in tp if r.get("qps_mode") == "backlog"]
        if backlog:
            md += [
                'Backlog runs: the pods were created ("create s") before the scheduler was '
                'started; "first bind s" is from its start to the first bind the watch saw '
                '(start-up, the LIST of the backlog, caches synced), "drain s" from there to '
                'the last, "last bind s" their sum (when the backlog was all bound); steady '
                "pods/s counts between the 10th and the 90th percentile of the binds (no ramp, "
                "no tail); CPU with the start is the process tree's whole CPU per pod.",
                "",
            ]
            md += _table(
                [
                    "size",
                    "scheduler",
                    "pods",
                    "first bind s",
                    "drain s",
                    "last bind s",
                    "pods/s",
                    "steady pods/s",
                    "CPU ms/pod",
                    "CPU ms/pod with the start",
                ],
                (
                    [
                        r["size"],
                        r["scheduler"],
                        r.get("pods"),
                        r.get("first_bind_seconds"),
                        r.get("drain_seconds"),
                        _sum(r.get("first_bind_seconds"), r.get("drain_seconds")),
                        r.get("pods_per_second"),
                        r.get("steady_pods_per_second"),
                        r.get("cpu_ms_per_pod"),
                        r.get("cpu_ms_per_pod_with_start"),
                    ]
                    for r in backlog
                ),
            )
            md.append("")
    pre = [r for r in runs if r.get("scenario") == "preemption"]
    if pre:
        md += [
            "## Preemption",
            "",
            "Upstream PreemptionAsync's shape, scaled: every node holds 4 low-priority pods "
            "(900m each, grace 1 s); high-priority pods (3 cpu) arrive at a fixed rate and each "
            "needs 3 victims. Completion: first preemptor created to the last one bound. "
            "Victims are the low pods that got a deletionTimestamp; beyond need: those on "
            "nodes where no preemptor was bound plus any over 3 per preemptor bound on a node. "
            "Preempted events are grouped by the preemptor uid in their message.",
            "",
        ]
        md += _table(
            [
                "size",
                "client QPS",
                "scheduler",
                "nodes",
                "preemptors",
                "rate /s",
                "bound",
                "completion s",
                "victims (deleted)",
                "victims / preemptor",
                "deleted beyond need",
                "Preempted events",
                "most victims named for one",
                "peak RSS MiB",
            ],
            (
                [
                    r["size"],
                    r["qps_mode"],
                    r["scheduler"],
                    r.get("nodes"),
                    r.get("preemptors"),
                    r.get("rate"),
                    r.get("bound"),
                    r.get("completion_seconds"),
                    r.get("victims_deleted"),
                    r.get("victims_per_preemptor"),
                    _beyond_need({**r, "complete": True}),
                    r.get("preempted_events"),
                    r.get("max_victims_per_preemptor"),
                    with_main(_mib(r.get("vmhwm_kib")), _mib(r.get("main_vmhwm_kib"))),
                ]
                for r in pre
            ),
        )
        md.append("")
    md += _render_api_calls(runs)
    md += _render_cpu_limited(runs)
    profile = results.get("profile")
    if profile and profile.get("self"):
        md += [
            "## Profile of py-scheduler (largest throughput run)",
            "",
            f"{profile.get('tool', '-')}, {profile.get('samples', 0)} samples; "
            f"raw: `{profile.get('file', '-')}`.",
            "",
        ]
        md += _table(
            ["self %", "function"], ([p["percent"], f"`{p['function']}`"] for p in profile["self"])
        )
        md.append("")
        if profile.get("areas"):
            md += _table(
                ["self % by area", "package or module"],
                ([p["percent"], f"`{p['area']}`"] for p in profile["areas"]),
            )
            md.append("")
        if profile.get("inclusive"):
            md += _table(
                ["inclusive %", "py-scheduler function (time under it)"],
                ([p["percent"], f"`{p['function']}`"] for p in profile["inclusive"]),
            )
            md.append("")
    core = results.get("core")
    if core:
        md += ["## In-process core benchmark (benchmarks/core_bench.py)", ""]
        md += _render_core(core)
        md.append("")
    return "\n".join(md).rstrip() + "\n"


def _scheduler_label(r: Mapping[str, Any]) -> str:
    """The scheduler of a run, with the configuration fields the benchmark set for it
    (``--py-config``, ``--kube-config``) and whether it was profiled."""
    label = str(r.get("scheduler"))
    config = r.get("py_config") or r.get("kube_config") or {}
    if config:
        label += " (" + ", ".join(f"{k}: {v}" for k, v in config.items()) + ")"
    return label + (" (profiled)" if r.get("profiled") else "")


def _render_classes(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The Deployments' client latency by PriorityClass, a row per run (none for records
    from before it was kept)."""
    rows = [r for r in runs if r.get("latency_by_class")]
    if not rows:
        return []
    classes = list(rows[0]["latency_by_class"])
    md = [
        "By PriorityClass: the client latency (the pod's appearance to its bind), p50 / p99 "
        "s. Both schedulers pop their queue by priority; calls waiting at the client's rate "
        "limit leave in the order they came, unless py-scheduler's `apiCallOrder: Priority` "
        "is set.",
        "",
    ]
    md += _table(
        ["size", "client QPS", "scheduler", *classes],
        (
            [
                r["size"],
                r["qps_mode"],
                _scheduler_label(r),
                *(
                    " / ".join(
                        "-" if (v := _lat(r["latency_by_class"], c, q)) is None else f"{v:.2f}"
                        for q in ("p50", "p99")
                    )
                    for c in classes
                ),
            ]
            for r in rows
        ),
    )
    return [*md, ""]


def api_call_differences(
    runs: Sequence[Mapping[str, Any]], threshold: float = 0.05
) -> list[list[Any]]:
    """Rows (scenario, size, client QPS, counter, kube, py) of the API server's counters per
    pod (``api_calls_per_pod``, medians over a cell's runs) where the two schedulers differ
    by more than ``threshold`` of the larger and by 0.01 or more (10 or more of the watch
    bytes); every cell with both schedulers also gets the watch bytes of all resources
    summed."""
    cells: dict[tuple[str, str, str], dict[str, list[Mapping[str, float]]]] = {}
    for r in runs:
        calls = r.get("api_calls_per_pod")
        if not calls or r.get("profiled") or r.get("cpu_limit"):
            continue
        key = (str(r.get("scenario")), str(r.get("size")), str(r.get("qps_mode")))
        cells.setdefault(key, {}).setdefault(str(r.get("scheduler")), []).append(calls)
    rows: list[list[Any]] = []
    for (scenario, size, mode), by in cells.items():
        if KUBE not in by or PY not in by:
            continue
        names = sorted({n for c in by[KUBE] + by[PY] for n in c})
        for name in names:
            k, p = (_median([c.get(name, 0.0) for c in by[w]]) for w in (KUBE, PY))
            floor = 10.0 if name.startswith("watch bytes ") else 0.01
            if abs(p - k) >= floor and abs(p - k) > threshold * max(k, p):
                rows.append([scenario, size, mode, name, round(k, 3), round(p, 3)])
        total = [
            _median([sum(v for n, v in c.items() if n.startswith("watch bytes ")) for c in by[w]])
            for w in (KUBE, PY)
        ]
        rows.append([scenario, size, mode, "watch bytes, all", round(total[0]), round(total[1])])
    return rows


def _render_api_calls(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = api_call_differences(runs)
    if not rows:
        return []
    md = [
        "## API server calls per pod where the schedulers differ",
        "",
        "From the API server's /metrics over the same phase as its CPU (a backlog's from "
        "the scheduler's start): requests by verb and resource (`apiserver_request_total`), "
        "what its watches sent (`watch events`, `watch bytes`: every watcher's, in the "
        "encoding it asked for) and its requests to etcd (`etcd_requests_total`), per pod, "
        "medians of each cell's runs; only the counters where the two differ by more than "
        "5% (and by 0.01 per pod, or 10 bytes), and the watch bytes summed. kube-scheduler "
        "talks protobuf (unless `--kube-config clientConnection.contentType=...` said "
        "otherwise: see its label), py-scheduler JSON; kwok's node heartbeats "
        "(`PATCH nodes/status`) fall into some runs and not others.",
        "",
    ]
    md += _table(
        ["scenario", "size", "client QPS", "counter", "kube-scheduler", "py-scheduler"], rows
    )
    md.append("")
    return md


def per_core(rate: float | None, cores: float | None) -> float | None:
    """Pods a second per core of CPU limit: ``rate`` / ``cores`` (None when either is)."""
    if rate is None or not cores:
        return None
    return round(rate / cores, 1)


def _render_cpu_limited(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The runs made under --scheduler-cpus: each scheduler's saturated rate per core."""
    limited = [r for r in runs if r.get("cpu_limit") and r.get("scenario") != "preemption"]
    if not limited:
        return []
    md = [
        "## Under a CPU limit",
        "",
        "Each scheduler ran with the limit's cores' worth of CPU time (a CFS quota, "
        "`--scheduler-cpus`), so that it, not the control "
        "plane, is the bottleneck. Steady pods/s: binds a second between the 10th and 90th "
        "percentile of the binds. Per core: steady pods/s / the limit. Throttled: the share "
        "of CFS periods in which the scheduler used up its quota (near 1: it was CPU-bound "
        "throughout). py-scheduler is one thread, so its rate per core is the most it can "
        "bind on any machine; kube-scheduler spreads over cores, up to its own serial "
        "scheduling cycle's limit. CPU ms/pod: the scheduler's process tree's (the quota "
        'covers its children too, unless the limit says "main process": '
        "`--limit-main-only` moved them out of it, as on a many-core machine they have "
        "cores of their own), with its main process's in brackets where it differs: "
        "that is what py-scheduler's one thread spends per pod.",
        "",
    ]
    md += _table(
        [
            "scenario",
            "size",
            "client QPS",
            "scheduler",
            "limit (cores)",
            "pods",
            "bound",
            "pods/s",
            "steady pods/s",
            "steady pods/s per core",
            "CPU ms/pod",
            "throttled",
        ],
        (
            [
                r.get("scenario"),
                r.get("size"),
                r.get("qps_mode"),
                _scheduler_label(r),
                str(r.get("cpu_limit"))
                + (" (main process)" if r.get("cpu_limit_scope") == "main" else ""),
                r.get("pods"),
                r.get("bound"),
                r.get("pods_per_second"),
                r.get("steady_pods_per_second"),
                per_core(r.get("steady_pods_per_second"), r.get("cpu_limit")),
                with_main(r.get("cpu_ms_per_pod"), r.get("main_cpu_ms_per_pod")),
                r.get("throttled_share"),
            ]
            for r in limited
        ),
    )
    md.append("")
    return md


def _render_core(core: Mapping[str, Any]) -> list[str]:
    """Whatever core_bench.py wrote: lists of records as tables, records as key: value."""
    out: list[str] = []
    for key, value in core.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            headers = list(dict.fromkeys(k for v in value for k in v))
            out += [f"{key}:", ""]
            out += _table(headers, ([v.get(h) for h in headers] for v in value))
            out.append("")
        elif isinstance(value, Mapping):
            out.append(f"- {key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()))
        else:
            out.append(f"- {key}: {_fmt(value)}")
    return out
