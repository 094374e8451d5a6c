"""What a full listing of pods costs the informer: peak memory while it lists, memory kept
after, and time, for N bound pods in pages of 500 (the informer's page size).

The pods are shaped as the cluster benchmark's (a pause container with requests and limits,
bound, started by kwok, two managedFields entries) and serialized in the API server's field
order. The listing goes through the real ``Informer`` (its LIST loop, the managedFields cut,
``ObjectDecoder.pod``, the store) against an in-memory API that hands out pre-encoded pages,
so the figures are the informer's alone. Peak memory is tracemalloc's peak over the listing
(Python allocations, orjson's included), minus what was allocated before it began; kept is
what the store holds after it. Time is measured in a separate pass without tracemalloc.

    .venv/bin/python benchmarks/listing_bench.py --pods 10000 50000

To compare revisions, run it with ``PYTHONPATH`` pointing at another revision's tree
(``git archive REV scheduler | tar -x -C DIR``); it uses ``Informer``, ``ObjectDecoder``
and the managedFields cut, as they are since round 14.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: see above

import scheduler.decode as decoding
from scheduler.kube.informer import Informer, Resource

# Round 14 named the cut loads_watch_event.
LOADS = getattr(decoding, "loads_without_managed_fields", None) or decoding.loads_watch_event

PODS = Resource("Pod", "/api/v1/pods", namespaced=True)
TIME = "2026-11-27T01:38:45Z"


def _managed_fields() -> list[dict[str, Any]]:
    cond = {
        ".": {},
        "f:lastProbeTime": {},
        "f:lastTransitionTime": {},
        "f:status": {},
        "f:type": {},
    }
    return [
        {
            "manager": "kwok",
            "operation": "Update",
            "apiVersion": "v1",
            "time": TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        f'k:{{"type":"{t}"}}': cond
                        for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers")
                    }
                    | {'k:{"type":"Ready"}': cond},
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:hostIPs": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {".": {}, 'k:{"ip":"10.244.11.119"}': {".": {}, "f:ip": {}}},
                    "f:startTime": {},
                }
            },
            "subresource": "status",
        },
        {
            "manager": "unknown",
            "operation": "Update",
            "apiVersion": "v1",
            "time": TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:bench": {}, "f:group": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"pause"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:resources": {
                                ".": {},
                                "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}},
                                "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}},
                            },
                        }
                    },
                    "f:schedulerName": {},
                },
            },
        },
    ]


def pod(i: int, managed: list[dict[str, Any]]) -> dict[str, Any]:
    """A bound, running pod as the API server writes it (ObjectMeta's managedFields last)."""
    ready = {"lastProbeTime": None, "lastTransitionTime": TIME, "status": "True"}
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": f"tp-{i:06d}",
            "namespace": "bench",
            "uid": f"75d21992-8661-4aad-8c8f-{i:012d}",
            "resourceVersion": str(100000 + i),
            "generation": 1,
            "creationTimestamp": TIME,
            "labels": {"bench": "py-scheduler-bench", "group": "tp"},
            "managedFields": managed,
        },
        "spec": {
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {
                        "limits": {"cpu": "100m", "memory": "500Mi"},
                        "requests": {"cpu": "100m", "memory": "500Mi"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "automountServiceAccountToken": False,
            "nodeName": f"n{i % 5000:04d}",
            "securityContext": {},
            "schedulerName": "py-scheduler",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{k}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for k in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, **ready}
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "ContainersReady",
                    "Ready",
                    "PodScheduled",
                )
            ],
            "hostIP": "10.68.154.22",
            "hostIPs": [{"ip": "10.68.154.22"}],
            "podIP": "10.244.11.119",
            "podIPs": [{"ip": "10.244.11.119"}],
            "startTime": TIME,
            "containerStatuses": [
                {
                    "name": "pause",
                    "state": {"running": {"startedAt": TIME}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.k8s.io/pause:3.10",
                    "imageID": "kwok://registry.k8s.io/pause:3.10",
                    "started": True,
                }
            ],
            "qosClass": "Guaranteed",
        },
    }


def pages(n: int, size: int) -> list[bytes]:
    managed = _managed_fields()
    out = []
    for start in range(0, n, size):
        end = min(n, start + size)
        meta: dict[str, Any] = {"resourceVersion": "200000"}
        if end < n:
            meta["continue"] = f"page-{end}"
        body = {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": meta,
            "items": [pod(i, managed) for i in range(start, end)],
        }
        out.append(orjson.dumps(body))
    return out


class _Pages:
    """A ListWatcher that serves the pages in order (the informer never watches here)."""

    def __init__(self, encoded: list[bytes]) -> None:
        self.encoded = encoded
        self.at = 0

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        loads: Callable[[bytes], Any] = json.loads,
    ) -> dict[str, Any]:
        data = self.encoded[self.at]
        self.at += 1
        out: dict[str, Any] = loads(data)
        return out

    def stream(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[bytes]:
        raise AssertionError("not watched")


def _informer(encoded: list[bytes]) -> Informer[Any]:
    return Informer(
        _Pages(encoded),
        PODS,
        decode=decoding.ObjectDecoder().pod,
        handler=lambda delta: None,
        on_error=lambda raw, e: None,
        loads=LOADS,
    )


def measure(n: int, size: int) -> dict[str, Any]:
    encoded = pages(n, size)
    page_bytes = sum(len(p) for p in encoded) / len(encoded)
    # Time, without tracemalloc.
    gc.collect()
    inf = _informer(encoded)
    t0 = time.perf_counter()
    asyncio.run(inf._list())
    seconds = time.perf_counter() - t0
    assert len(inf.store) == n, (len(inf.store), n)
    del inf
    gc.collect()
    # Memory.
    tracemalloc.start()
    inf = _informer(encoded)
    gc.collect()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    asyncio.run(inf._list())
    gc.collect()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(inf.store) == n
    mib = 1 << 20
    return {
        "pods": n,
        "page_size": size,
        "page_kib": round(page_bytes / 1024, 1),
        "list_seconds": round(seconds, 3),
        "us_per_pod": round(seconds / n * 1e6, 1),
        "peak_mib": round((peak - base) / mib, 1),
        "kept_mib": round((kept - base) / mib, 1),
        "peak_over_kept_mib": round((peak - kept) / mib, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, nargs="+", default=[10000, 50000])
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    import scheduler.kube.informer as informer

    print(f"# scheduler from {Path(informer.__file__).parents[2]}", file=sys.stderr)
    rows = [measure(n, args.page_size) for n in args.pods]
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
