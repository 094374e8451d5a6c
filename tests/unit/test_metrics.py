"""scheduler.metrics: the lock-free families export what prometheus_client's own Counter,
Gauge and Histogram would (the text format, byte for byte, but for the ``_created``
samples that prometheus_client adds and kube-scheduler's metrics do not have)."""

from __future__ import annotations

import prometheus_client as prom
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from scheduler.metrics import Counter, Gauge, Histogram, Metrics


def exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


@pytest.mark.parametrize(
    "amounts",
    [
        pytest.param([], id="nothing observed"),
        pytest.param([0.00005, 0.0001, 0.00011, 0.2, 0.5, 1e9, -1.0], id="edges and beyond"),
        pytest.param([0.0002 * i for i in range(50)], id="many"),
    ],
)
def test_a_histogram_exports_as_prometheus_clients_own(amounts: list[float]) -> None:
    buckets = tuple(0.0001 * 2**i for i in range(12))
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    h = Histogram("x_seconds", "Latency.", ["point", "status"], buckets=buckets, registry=ours)
    p = prom.Histogram(
        "x_seconds", "Latency.", ["point", "status"], buckets=buckets, registry=theirs
    )
    for i, a in enumerate(amounts):
        labels = ("Filter", "Success" if i % 3 else "Error")
        h.labels(*labels).observe(a)
        p.labels(*labels).observe(a)
    assert exposition(ours) == exposition(theirs)


def test_counters_and_gauges_export_as_prometheus_clients_own() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    c = Counter("attempts_total", "Attempts.", ["result"], registry=ours)
    pc = prom.Counter("attempts_total", "Attempts.", ["result"], registry=theirs)
    g = Gauge("pending", "Pending.", ["queue"], registry=ours)
    pg = prom.Gauge("pending", "Pending.", ["queue"], registry=theirs)
    plain = Counter("plain_total", "Plain.", registry=ours)
    pplain = prom.Counter("plain_total", "Plain.", registry=theirs)
    for result in ("scheduled", "unschedulable", "scheduled"):
        c.labels(result).inc()
        pc.labels(result).inc()
    c.labels("error").inc(2.5)
    pc.labels("error").inc(2.5)
    g.labels("active").set(7)
    pg.labels("active").set(7)
    g.labels("backoff").inc(3)
    pg.labels("backoff").inc(3)
    g.labels("backoff").dec()
    pg.labels("backoff").dec()
    plain.inc()
    pplain.inc()
    assert exposition(ours) == exposition(theirs)
    assert plain.value == 1.0


def test_wrong_label_counts_are_refused_with_the_metric_and_its_labels() -> None:
    c = Counter("attempts_total", "Attempts.", ["result", "profile"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match=r"attempts_total: 2 label values needed \(result, "):
        c.labels("scheduled")


def test_the_schedulers_metrics_register_once_and_scrape() -> None:
    m = Metrics()
    m.extension_point("Filter", "Success", 0.001, "py-scheduler")
    m.pod_scheduled(2, 0.5, after_flush=True)
    reg = m.registry
    assert (
        reg.get_sample_value(
            "scheduler_framework_extension_point_duration_seconds_count",
            {"extension_point": "Filter", "status": "Success", "profile": "py-scheduler"},
        )
        == 1.0
    )
    assert (
        reg.get_sample_value(
            "scheduler_pod_scheduling_sli_duration_seconds_bucket", {"attempts": "2", "le": "0.64"}
        )
        == 1.0
    )
    assert reg.get_sample_value("scheduler_pod_scheduled_after_flush_total") == 1.0
    # a second family of a name already registered is refused, as prometheus_client does
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("scheduler_pod_scheduled_after_flush_total", "Again.", registry=reg)


def test_hint_times_fold_into_their_histogram_as_observed_one_by_one() -> None:
    folded, one_by_one = Metrics(), Metrics()
    seconds = [0.000001, 0.00001, 0.00002, 0.0005, 0.003, 0.05, 1.0]
    key = ("NodeResourcesFit", "NodeAdd", "QueueSkip")
    folded.fold_hint_times({key: seconds[:3]})
    folded.fold_hint_times({key: seconds[3:]})  # a second fold adds to the first
    for s in seconds:
        one_by_one.queueing_hint_seconds.labels(*key).observe(s)
    name = "scheduler_queueing_hint_execution_duration_seconds"
    assert exposition(folded.registry) == exposition(one_by_one.registry)
    labels = {"plugin": key[0], "event": key[1], "hint": key[2]}
    assert folded.registry.get_sample_value(f"{name}_count", labels) == len(seconds)
