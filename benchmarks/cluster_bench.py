#!/usr/bin/env python3
"""Cluster benchmarks: py-scheduler side by side with kube-scheduler on a real API server.

A script that measures and reports, never a test. It starts a private local control plane
(hack/localcluster.py: etcd, kube-apiserver, kube-controller-manager, kwok) in its own state
dir under the cache and, for each scheduler in turn (only one runs at a time), on a fresh
namespace and empty kwok nodes (4 cpu, 32Gi, 110 pods; made once and kept from run to run,
or made anew for every run with --fresh-nodes), measures:

1. throughput: P pods of upstream scheduler_perf's default shape (100m / 500Mi, priority 0)
   created in bulk on N nodes; pods/s from the first create call to the last bind seen by a
   client-side watch; latency p50/p99 client side (create call -> watch sees spec.nodeName)
   and server side (creationTimestamp -> PodScheduled lastTransitionTime, whole seconds).
   With an equal unthrottled client the pods are created as fast as the client can; at the
   shipped defaults they are paced (--paced-rate, 60/s, above the 50 QPS the schedulers
   bind at), so that the backlog behind the schedulers' rate limit, which makes the
   latency there, is the same for both and does not depend on how much CPU the other
   processes left the client. Where the client still falls behind its pace, the p99 from
   each pod's due time (latency_due) counts that delay too. Each run starts once the
   scheduler has bound and let go of a warm-up pod and then idled for burst / qps seconds
   (2 s at the defaults, 1 s with the equal client): both schedulers LIST and WATCH through
   their client's rate budget when they start, and the pause gives both a full bucket. The
   client's threads open their connections before the first pod, so that no TLS handshake
   puts gaps between the first pods (at the defaults those gaps decide the p99: see
   bench_helpers.limiter_start, reported per paced run as "limiter start ms"). Each run's
   pods.tsv, beside the scheduler's log, has every pod's send, due and bound times.
   A backlog (--modes backlog): every pod created before the scheduler starts, then the
   scheduler started; pods/s and CPU ms per pod from the first bind the watch sees to the
   last, the time to that first bind and the CPU with the start-up beside them. With the
   equal client on 2 cores the benchmark's creation is the limit at the small size (both
   schedulers keep up with it); a backlog has no client in the loop.
2. preemption (upstream PreemptionAsync's shape, scaled): every node holds 4 low-priority pods
   (900m, grace 1s), high-priority pods (3 cpu) arrive at a fixed rate, each needing 3 victims;
   time until all are bound, victims per preemptor, preemptors that took more than needed.
3. memory and CPU, of each scheduler's process tree (the process started and the live
   processes under it, e.g. py-scheduler's event writer): peak RSS at the end of every run
   as the sum of their VmHWM (an upper bound: each peaked at its own time), and the CPU
   seconds of the measured phase, in all and per pod, children already exited and reaped
   included. Beside them, the main process's alone (main_vmhwm_kib, main_cpu_ms_per_pod):
   one-threaded py-scheduler's ceiling is set by its main process's CPU per pod, while the
   tree's total is what is compared with kube-scheduler (one process: both are equal).
   With --scheduler-cpus Q the scheduler under test runs under a CFS quota of Q cores (a
   cgroup v1 cpu controller, which its children share): saturated, its pods/s per core is
   what it binds per core-second (for one-threaded py-scheduler, the most it can bind on
   any machine).

4. deployments: pods made by kube-controller-manager for real Deployments (50 replicas each)
   with a headless Service and a PDB each, in three PriorityClasses; the scheduler watches
   the Services and ReplicaSets (system default spreading), as in production. At the
   defaults the Deployments are paced too (one every 50 / --paced-rate seconds), and
   latency_due counts from the time each pod's Deployment was due.

5. dra (not in the default --scenarios; a backlog only): the throughput backlog with
   dynamic resource allocation: every node publishes a ResourceSlice of 16 devices, every
   pod has a ResourceClaim of its own for one device (a DeviceClass with a CEL selector);
   both schedulers allocate and write the claims. Also recorded: how many claims ended
   allocated and the most claims one device was given (1, or a double allocation).
   dra-extended (likewise): the same devices behind an extended resource (a DeviceClass's
   extendedResourceName); every pod asks for one (requests and limits, no claim), and each
   scheduler creates a claim per pod, allocates it, and writes the pod's status.

Each scenario runs with both schedulers at their shipped client QPS/burst defaults (50/100)
and with an equal unthrottled client (5000/5000); the throughput scenario also with a
backlog (5000/5000). py-scheduler is profiled (py-spy, else
cProfile) in one extra throughput run at the largest size. With --repeat N every pair runs N
times (who goes first alternates) and the ratios are judged on the medians of the repeats
(the worst repeat for victims and nodes over capacity); the runs table lists each repeat.
--paced-repeat N repeats only the pairs at the shipped defaults (at least N times): their
p99s differ by when each run's rate limiter schedule started, tens of ms that the machine
decides in the first pods (docs/benchmarks.md, rounds 17-21), so one pair is a coin toss;
with repeats the p99 rows also count the pairs where py-scheduler's p99 was at or below.
--unthrottled-repeat N does the same for the throughput scenario's equal and backlog pairs
(one backlog pair at large moved kube-scheduler's drain from 240 to 154 pods/s).

Output in --out (default benchmarks/results/latest): results.json (raw), results.md and PNG
plots. `make bench` runs benchmarks/core_bench.py first and passes its JSON with --core-json
so that one report holds both.

Usage:
    python benchmarks/cluster_bench.py [--size small|large|xl|both|all|LIST] [--out DIR]
        [--scenarios throughput,deployments,preemption,dra,dra-extended]
        [--modes defaults,equal,backlog]
        [--schedulers kube,py] [--repeat N] [--paced-repeat N] [--unthrottled-repeat N]
        [--core-json FILE] [--profile auto|off] [--wait-quiet LOAD] [--kube-args FLAGS]
        [--scheduler-cpus CORES [--limit-main-only]] [--py-config FIELD=VALUE ...]
        [--kube-config FIELD=VALUE ...]
    python benchmarks/cluster_bench.py --replot DIR    # results.md + plots from results.json
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import hashlib
import http.client
import importlib.util
import io
import json
import os
import platform
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import bench_helpers as H  # noqa: E402


def _load_localcluster() -> ModuleType:
    """hack/ is not a package: load hack/localcluster.py as the module `localcluster`."""
    if "localcluster" in sys.modules:
        return sys.modules["localcluster"]
    path = REPO_ROOT / "hack" / "localcluster.py"
    spec = importlib.util.spec_from_file_location("localcluster", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules["localcluster"] = module
    spec.loader.exec_module(module)
    return module


localcluster = _load_localcluster()

LOOPBACK = "127.0.0.1"
BENCH_LABEL = "py-scheduler-bench"  # every node and namespace we make carries bench=<this>
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HIGH_CLASS = "bench-high"
EQUAL_QPS = 5000
NODE_CPU_MILLI = 4000  # every benchmark node: 4 cpu, 32Gi, 110 pods


@dataclass(frozen=True)
class Size:
    name: str
    nodes: int
    pods: int
    preempt_nodes: int  # one preemptor per node, 4 low-priority pods per node


SIZES = {
    "tiny": Size("tiny", nodes=10, pods=100, preempt_nodes=10),  # a smoke test of the script
    "small": Size("small", nodes=100, pods=1000, preempt_nodes=100),
    "large": Size("large", nodes=1000, pods=5000, preempt_nodes=500),
    # scheduler_perf's SchedulingBasic shape (5000 nodes, 10000 pods).
    "xl": Size("xl", nodes=5000, pods=10000, preempt_nodes=1000),
}
# --size: one name, a comma-separated list, "both" (small,large) or "all" (small,large,xl).
XL_NODES = 2000  # from this many nodes the control plane gets kwok's longer node lease
SIZE_GROUPS = {"both": ("small", "large"), "all": ("small", "large", "xl")}
# The dra scenario: devices per node (small: 100 nodes x 16 for 1000 pods), their driver
# and class, and where slices live.
DRA_DEVICES = 16
DRA_DRIVER = "gpu.bench.example.com"
DRA_CLASS = "bench-gpu"
DRA_EXTENDED_CLASS = "bench-gpu-extended"
DRA_EXTENDED = "gpu.bench.example.com/gpu"
DRA_SCENARIOS = ("dra", "dra-extended")
DRA_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
# The deployments scenario: Deployments of this many replicas, in these PriorityClasses.
DEPLOYMENT_REPLICAS = 50
DEPLOYMENT_CLASSES = (("bench-dep-low", 10), ("bench-dep-mid", 100), ("bench-dep-high", 1000))


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# A small API client: persistent HTTPS connections (one per thread) and watch streams


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Api:
    """Just enough REST for the benchmark, from the admin kubeconfig (embedded certs)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())

        def named(kind: str, name: str) -> dict[str, Any]:
            for item in config.get(kind) or []:
                if item.get("name") == name:
                    return dict(item.get(kind[:-1]) or {})
            raise RuntimeError(f"{kubeconfig}: no {kind[:-1]} {name!r}")

        context = named("contexts", config["current-context"])
        cluster = named("clusters", context["cluster"])
        user = named("users", context["user"])
        url = urllib.parse.urlsplit(cluster["server"])
        self.host = url.hostname or LOOPBACK
        self.port = url.port or 443
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.context = ssl.create_default_context(cadata=ca)
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            cert, key = Path(tmp) / "c.crt", Path(tmp) / "c.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(base64.b64decode(user["client-key-data"]))
            self.context.load_cert_chain(cert, key)
        self._local = threading.local()

    def _new_connection(self, timeout: float | None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=timeout
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        allow: Sequence[int] = (),
    ) -> tuple[int, dict[str, Any]]:
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        attempt = 0
        while True:
            attempt += 1
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._new_connection(60.0)
                self._local.conn = conn
            try:
                conn.request(method, url, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt >= 4:
                    raise
                time.sleep(0.2 * attempt)
                continue
            if resp.status == 429 and attempt < 20:  # the API server's max-inflight limit
                time.sleep(min(1.0, 0.05 * attempt))
                continue
            break
        parsed: dict[str, Any] = {}
        if raw:
            with contextlib.suppress(ValueError):
                parsed = json.loads(raw)
        if resp.status >= 400 and resp.status not in allow:
            raise ApiError(resp.status, f"{method} {path}: {parsed.get('message', raw[:200])}")
        return resp.status, parsed

    def get(self, path: str, **query: str) -> dict[str, Any]:
        return self.request("GET", path, query=query or None)[1]

    def get_text(self, path: str) -> str:
        """A GET's body as text (e.g. /metrics), on a connection of its own."""
        conn = self._new_connection(60.0)
        try:
            conn.request("GET", path, headers={"Accept": "text/plain"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if resp.status >= 400:
            raise ApiError(resp.status, f"GET {path}: {raw[:200]!r}")
        return raw.decode("utf-8", "replace")

    def list_all(self, path: str, **query: str) -> tuple[list[dict[str, Any]], str]:
        """All items of a LIST (pages of 500) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            page = {"limit": "500", **query}
            if cont:
                page["continue"] = cont
            out = self.get(path, **page)
            items.extend(out.get("items") or [])
            cont = (out.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items, str((out.get("metadata") or {}).get("resourceVersion", ""))

    def open_stream(
        self, path: str, query: Mapping[str, str]
    ) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
        conn = self._new_connection(None)
        conn.request(
            "GET",
            path + "?" + urllib.parse.urlencode(query),
            headers={"Accept": "application/json"},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            detail = resp.read()[:300]
            conn.close()
            raise ApiError(resp.status, f"watch {path}: {detail!r}")
        return conn, resp


# --------------------------------------------------------------------------------------------
# A client-side pod watch: when did we see each pod created, bound, deleting, gone


@dataclass
class PodRecord:
    uid: str = ""
    node: str = ""
    added: float | None = None
    bound: float | None = None
    running: float | None = None
    deleting: float | None = None
    deleted: float | None = None


def _write_pod_times(
    path: Path,
    sent: Mapping[str, float],
    due: Mapping[str, float],
    bound: Mapping[str, PodRecord],
) -> None:
    """Each pod's start (the create call's; for a Deployment's pod, the watch seeing it),
    due time (paced runs) and bound time as the watch saw it, in wall-clock seconds, beside
    the scheduler's log: what the summaries are made of."""
    with path.open("w") as out:
        out.write("pod\tstart\tdue\tbound\n")
        for name in sorted(sent):
            rec = bound.get(name)
            cells = (sent[name], due.get(name), rec.bound if rec else None)
            out.write(name + "".join(f"\t{c:.6f}" if c else "\t-" for c in cells) + "\n")


def _limiter_start_ms(mode: str, bound: Mapping[str, PodRecord], first: float) -> float | None:
    """At the shipped defaults (50 QPS, burst 100): when the rate limiter's schedule of
    binds started, in ms after the first pod was sent (``H.limiter_start``)."""
    if mode != "defaults":
        return None
    start = H.limiter_start((r.bound for r in bound.values() if r.bound), first)
    return None if start is None else round(start * 1000, 1)


def _group(name: str) -> str:
    return name.split("-", 1)[0]


class PodWatch:
    """Watches one namespace's pods in a thread; counts per name group ('tp', 'low', ...)."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.pods: dict[str, PodRecord] = {}
        self.counts: Counter[tuple[str, str]] = Counter()  # (group, what) -> pods
        self.last_change: dict[str, float] = {}  # what -> last time a count moved
        self.cond = threading.Condition()
        self.errors: list[str] = []
        self._stop = False
        self._conn: http.client.HTTPSConnection | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{namespace}", daemon=True)
        self._rv = ""
        # group -> called once, from the watch's thread, when it sees the group's first bind.
        self.on_first_bound: dict[str, Callable[[], None]] = {}

    def start(self) -> PodWatch:
        items, self._rv = self.api.list_all(f"/api/v1/namespaces/{self.namespace}/pods")
        now = time.time()
        for obj in items:
            self._record("ADDED", obj, now)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self._stop:
            try:
                query = {
                    "watch": "1",
                    "resourceVersion": self._rv,
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": "3600",
                }
                conn, resp = self.api.open_stream(path, query)
                self._conn = conn
                try:
                    while not self._stop:
                        line = resp.readline()
                        if not line:
                            break
                        now = time.time()
                        event = json.loads(line)
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            self.errors.append(f"watch error: {obj.get('message')}")
                            if obj.get("code") == 410:  # too old: resume from a fresh list
                                _, self._rv = self.api.list_all(path)
                            break
                        self._rv = obj.get("metadata", {}).get("resourceVersion", self._rv)
                        if kind != "BOOKMARK":
                            self._record(kind, obj, now)
                finally:
                    conn.close()
            except Exception as err:  # reconnect; a benchmark must not die of a dropped watch
                if not self._stop:
                    self.errors.append(f"watch: {err!r}")
                    time.sleep(0.2)

    def _bump(self, group: str, what: str, now: float) -> None:
        self.counts[(group, what)] += 1
        self.last_change[what] = now

    def _record(self, kind: str | None, obj: Mapping[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        group = _group(name)
        with self.cond:
            rec = self.pods.get(name)
            if rec is None or (meta.get("uid") and rec.uid and rec.uid != meta.get("uid")):
                rec = self.pods[name] = PodRecord(uid=str(meta.get("uid", "")))
                rec.added = now
                self._bump(group, "added", now)
            node = (obj.get("spec") or {}).get("nodeName")
            if node and rec.bound is None:
                rec.bound, rec.node = now, str(node)
                self._bump(group, "bound", now)
                hook = self.on_first_bound.pop(group, None)
                if hook is not None:
                    hook()
            if (obj.get("status") or {}).get("phase") == "Running" and rec.running is None:
                rec.running = now
                self._bump(group, "running", now)
            if (meta.get("deletionTimestamp") or kind == "DELETED") and rec.deleting is None:
                rec.deleting = now
                self._bump(group, "deleting", now)
            if kind == "DELETED" and rec.deleted is None:
                rec.deleted = now
                self._bump(group, "deleted", now)
            self.cond.notify_all()

    def count(self, group: str, what: str) -> int:
        return self.counts[(group, what)]

    def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float,
        proc: SchedulerProc | None = None,
    ) -> bool:
        """True once predicate holds; False after timeout. RuntimeError if proc exited."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                if proc is not None and not proc.alive:
                    raise RuntimeError(
                        f"{proc.label} exited with {proc.returncode} in the middle of the run; "
                        f"see {proc.log_path}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(min(remaining, 1.0))
        return True

    def wait_quiet(self, what: str, quiet: float, timeout: float) -> None:
        """Until no pod changed `what` for `quiet` seconds (bounded by timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = self.last_change.get(what, 0.0)
            if time.time() - last >= quiet:
                return
            time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# The schedulers under test, as processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


PROC = Path("/proc")


def _stat_fields(pid: int, *, proc_root: Path = PROC) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (which may hold spaces and
    brackets): [0] state, [1] ppid, [11] utime, [12] stime, [13] cutime, [14] cstime. None
    when the process is gone (or the file is cut short)."""
    try:
        raw = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields if len(fields) > 14 else None


def proc_status_kib(pid: int, field: str, *, proc_root: Path = PROC) -> int | None:
    try:
        for line in (proc_root / str(pid) / "status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def proc_cpu_seconds(pid: int, *, proc_root: Path = PROC) -> float | None:
    """The process's own CPU seconds (utime + stime, all its threads), without its children."""
    fields = _stat_fields(pid, proc_root=proc_root)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _listed_children(pid: int, *, proc_root: Path = PROC) -> list[int] | None:
    """The live children of ``pid`` from /proc/<pid>/task/*/children (each thread lists the
    children it started). None when there is no such file: a kernel without
    CONFIG_PROC_CHILDREN, or the process is gone."""
    files = sorted((proc_root / str(pid) / "task").glob("*/children"))
    if not files:
        return None
    kids: list[int] = []
    for path in files:
        with contextlib.suppress(OSError, ValueError):  # a thread that just exited
            kids += [int(word) for word in path.read_text().split()]
    return kids


def _children_by_ppid(*, proc_root: Path = PROC) -> dict[int, list[int]]:
    """Every process's children, from the ppid in each /proc/<pid>/stat: the fallback when
    the kernel has no children files."""
    out: dict[int, list[int]] = {}
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name), proc_root=proc_root)
        if fields is not None:
            with contextlib.suppress(ValueError):
                out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def tree_pids(pid: int, *, proc_root: Path = PROC) -> list[int]:
    """``pid`` and its live descendants, parents before their children. /proc is scanned
    for ppids at most once, and only when a process has no children file."""
    order, seen = [pid], {pid}
    by_ppid: dict[int, list[int]] | None = None
    for parent in order:  # grows while it is walked: breadth first
        kids = _listed_children(parent, proc_root=proc_root)
        if kids is None:
            if by_ppid is None:
                by_ppid = _children_by_ppid(proc_root=proc_root)
            kids = by_ppid.get(parent, [])
        for kid in kids:
            if kid not in seen:  # a pid reused while we walk must not loop
                seen.add(kid)
                order.append(kid)
    return order


def tree_cpu_seconds(pid: int, *, proc_root: Path = PROC) -> float | None:
    """CPU seconds of the process tree under ``pid``: for it and every live descendant,
    utime + stime (its own threads) + cutime + cstime (its children that exited and were
    reaped, with whatever they had reaped in turn): each process the tree ran counts once,
    live or reaped. A descendant whose stat vanished between listing and reading is
    skipped: once reaped, its time is in its parent's cutime. None when ``pid`` itself is
    gone. py-scheduler's event writer is such a child: the pid alone would leave its CPU
    out of the scheduler's."""
    members = tree_pids(pid, proc_root=proc_root)
    stats = [_stat_fields(member, proc_root=proc_root) for member in members]
    if stats[0] is None:
        return None
    ticks = sum(int(f) for fields in stats if fields is not None for f in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_vmhwm_kib(pid: int, *, proc_root: Path = PROC) -> int | None:
    """The sum of VmHWM (peak RSS) over ``pid`` and its live descendants: an upper bound of
    the tree's peak, since each process peaked at its own time and the pages they share
    count once per process. Descendants that already exited are not in it (their peaks
    went with them). None when ``pid`` itself has none (gone)."""
    own = proc_status_kib(pid, "VmHWM", proc_root=proc_root)
    if own is None:
        return None
    rest = tree_pids(pid, proc_root=proc_root)[1:]
    return own + sum(proc_status_kib(kid, "VmHWM", proc_root=proc_root) or 0 for kid in rest)


def _http_status(url: str, context: ssl.SSLContext | None = None) -> int:
    parsed = urllib.parse.urlsplit(url)
    conn: http.client.HTTPConnection
    if parsed.scheme == "https":
        conn = http.client.HTTPSConnection(
            parsed.hostname or LOOPBACK, parsed.port, context=context, timeout=2
        )
    else:
        conn = http.client.HTTPConnection(parsed.hostname or LOOPBACK, parsed.port, timeout=2)
    try:
        conn.request("GET", parsed.path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


class CpuLimit:
    """A CFS bandwidth limit (cgroup v1 ``cpu`` controller) that the scheduler under test
    starts in: ``--scheduler-cpus Q`` gives either scheduler Q cores' worth of CPU time, so
    that it, not the 2-core control plane, is the bottleneck. Its saturated pods/s divided
    by Q is what it binds per core-second; for py-scheduler, which is one thread, that is
    the most it can bind on any machine. One cgroup per invocation, removed at the end."""

    def __init__(
        self, cores: float, root: Path = CGROUP_V1_CPU, *, main_only: bool = False
    ) -> None:
        self.cores = cores
        self.root = root
        # Only the main process under the quota: its children are moved back to the root
        # (``release_children``) once they exist.
        self.main_only = main_only
        self.quota_us, self.period_us = H.cfs_bandwidth(cores)
        if not (root / "cpu.cfs_quota_us").is_file():
            raise RuntimeError(
                f"--scheduler-cpus needs the cgroup v1 cpu controller at {root} "
                "(cpu.cfs_quota_us), which this machine does not have"
            )
        self.path = root / f"py-scheduler-bench-{os.getpid()}"
        try:
            self.path.mkdir(exist_ok=True)
            # The period first: a quota is checked against the period in force.
            (self.path / "cpu.cfs_period_us").write_text(f"{self.period_us}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{self.quota_us}\n")
        except OSError as e:
            raise RuntimeError(f"--scheduler-cpus: cannot set up {self.path}: {e}") from e

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started inside the cgroup: the shell joins it, then execs (same pid)."""
        procs = str(self.path / "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]

    def release_children(self, pid: int, *, proc_root: Path = PROC) -> list[int]:
        """With ``main_only``: move every live descendant of ``pid`` out of the quota (to
        the root cgroup); the pids moved. Writing a pid to ``cgroup.procs`` moves its whole
        thread group; one that exited meanwhile is skipped."""
        if not self.main_only:
            return []
        moved = []
        for kid in tree_pids(pid, proc_root=proc_root)[1:]:
            try:
                (self.root / "cgroup.procs").write_text(f"{kid}\n")
            except OSError:
                continue
            moved.append(kid)
        return moved

    def stat(self) -> dict[str, int]:
        """cpu.stat: nr_periods, nr_throttled, throttled_time (ns)."""
        out: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    out[key] = int(value)
        return out

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


@dataclass(frozen=True)
class CpuMark:
    """A scheduler's CPU seconds when a measured phase began: its process tree's and its
    main process's alone."""

    tree: float
    main: float


class SchedulerProc:
    """One scheduler process with its config, log, health URL and /proc numbers."""

    label = ""
    scheduler_name = ""

    def __init__(self, workdir: Path, kubeconfig: Path, qps: int | None) -> None:
        self.env: dict[str, str] | None = None  # None: this process's environment
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.qps = qps  # None: the shipped defaults
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_limit: CpuLimit | None = None  # set before start(): run inside it
        self._limit0: dict[str, int] = {}  # its counters when the measured phase began
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{self.label}.log"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 120.0) -> None:
        argv = self.argv() if self.cpu_limit is None else self.cpu_limit.wrap(self.argv())
        with open(self.log_path, "ab") as out:
            out.write(f"# {time.strftime('%F %T')} {' '.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=self.env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.label} exited with {self.proc.returncode}; see {self.log_path}"
                )
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.ready():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.label} not ready after {timeout:.0f}s; see {self.log_path}")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    # The pid is the scheduler's own even under --scheduler-cpus (the wrapper shell execs
    # into it); what it starts (py-scheduler's event writer) is measured with it.

    def vmhwm_kib(self) -> int | None:
        """The sum of VmHWM over the live process tree: an upper bound of its peak RSS
        (``tree_vmhwm_kib``)."""
        return None if self.proc is None else tree_vmhwm_kib(self.proc.pid)

    def main_vmhwm_kib(self) -> int | None:
        """The main process's own peak RSS."""
        return None if self.proc is None else proc_status_kib(self.proc.pid, "VmHWM")

    def cpu_seconds(self) -> float | None:
        """CPU seconds of the whole process tree, reaped children included: what is
        compared with kube-scheduler (one process, so the same as its main's)."""
        return None if self.proc is None else tree_cpu_seconds(self.proc.pid)

    def main_cpu_seconds(self) -> float | None:
        """CPU seconds of the main process alone: one-threaded py-scheduler's ceiling is set
        by what its main process spends per pod, not by what its children do beside it."""
        return None if self.proc is None else proc_cpu_seconds(self.proc.pid)

    def usage_start(self) -> CpuMark:
        """The measured phase starts: the CPU seconds so far (the tree's and the main
        process's, read together), and the CPU limit's counters kept for ``limit_usage``."""
        if self.cpu_limit is not None:
            self.cpu_limit.release_children(self.pid)
        self._limit0 = {} if self.cpu_limit is None else self.cpu_limit.stat()
        return CpuMark(tree=self.cpu_seconds() or 0.0, main=self.main_cpu_seconds() or 0.0)

    def limit_usage(self) -> dict[str, Any]:
        """Under ``--scheduler-cpus``: the limit (cores) and the share of CFS periods since
        ``usage_start`` in which the scheduler used up its quota (near 1: CPU-bound)."""
        if self.cpu_limit is None:
            return {}
        now, then = self.cpu_limit.stat(), self._limit0
        periods = now.get("nr_periods", 0) - then.get("nr_periods", 0)
        throttled = now.get("nr_throttled", 0) - then.get("nr_throttled", 0)
        return {
            "cpu_limit": self.cpu_limit.cores,
            "cpu_limit_scope": "main" if self.cpu_limit.main_only else "tree",
            "throttled_share": round(throttled / periods, 3) if periods > 0 else None,
        }

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class KubeSchedulerProc(SchedulerProc):
    label = H.KUBE
    scheduler_name = "default-scheduler"

    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        qps: int | None,
        bin_dir: Path,
        extra_args: Sequence[str] = (),
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(workdir, kubeconfig, qps)
        self.binary = bin_dir / "kube-scheduler"
        self.extra_args = list(extra_args)
        client: dict[str, Any] = {"kubeconfig": str(kubeconfig)}
        if qps is not None:
            client.update(qps=qps, burst=qps)
        self.config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": client,
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": self.scheduler_name}],
        }
        set_fields(self.config, extra or {})  # --kube-config
        self.config_path = workdir / "kube-scheduler.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config))
        self._insecure = ssl.create_default_context()
        self._insecure.check_hostname = False
        self._insecure.verify_mode = ssl.CERT_NONE

    def argv(self) -> list[str]:
        return [
            str(self.binary),
            f"--config={self.config_path}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self.port}",
            *self.extra_args,
        ]

    def ready(self) -> bool:
        return _http_status(f"https://{LOOPBACK}:{self.port}/readyz", self._insecure) == 200


class PySchedulerProc(SchedulerProc):
    label = H.PY
    scheduler_name = "py-scheduler"

    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        qps: int | None,
        cprofile_out: Path | None = None,
        source: Path | None = None,
        python: Path | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(workdir, kubeconfig, qps)
        self.cprofile_out = cprofile_out
        self.source = source  # a snapshot holding scheduler/, run instead of the work tree
        self.python = python  # another virtualenv's interpreter (runtime_venv), else this one
        if source is not None or python is not None:
            self.env = {**os.environ, "PYTHONPATH": str(source or REPO_ROOT)}
        self.config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": self.scheduler_name}],
            "leaderElection": {"leaderElect": False},
            "httpBindAddress": LOOPBACK,
            "httpPort": self.port,
        }
        if qps is not None:
            self.config["clientConnection"] = {"qps": qps, "burst": qps}
        set_fields(self.config, extra or {})  # --py-config
        self.config_path = workdir / "py-scheduler.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config))

    def argv(self) -> list[str]:
        args = [
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--no-leader-elect",
            "--config",
            str(self.config_path),
        ]
        python = str(self.python or sys.executable)
        if self.cprofile_out is not None:
            return [
                python,
                "-m",
                "cProfile",
                "-o",
                str(self.cprofile_out),
                "-m",
                "scheduler",
                *args,
            ]
        exe = Path(sys.executable).parent / "py-scheduler"
        if exe.exists() and self.source is None and self.python is None:
            return [str(exe), *args]
        return [python, "-m", "scheduler", *args]

    def ready(self) -> bool:
        return _http_status(f"http://{LOOPBACK}:{self.port}/readyz") == 200


class PySpy:
    """py-spy record attached to a running pid (raw collapsed stacks), stopped with SIGINT."""

    def __init__(self, exe: str, pid: int, out: Path, log_path: Path) -> None:
        self.out = out
        # --gil: only the thread holding the GIL is sampled, so threads blocked in I/O or
        # waiting on a queue do not show up as hot; what remains is the serial Python work.
        argv = [
            exe,
            "record",
            "--gil",
            "--pid",
            str(pid),
            "--rate",
            "100",
            "--nonblocking",
            "--format",
            "raw",
            "-o",
            str(out),
        ]
        with open(log_path, "ab") as handle:
            self.proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT)
        time.sleep(1.0)
        if self.proc.poll() is not None:
            raise RuntimeError(f"py-spy exited with {self.proc.returncode}; see {log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# --------------------------------------------------------------------------------------------
# Objects


def pod_body(
    name: str,
    scheduler_name: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    node: str | None = None,
    priority_class: str | None = None,
    grace: int = 0,
) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": grace,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "ports": [{"containerPort": 80}],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": BENCH_LABEL, "group": _group(name)}},
        "spec": spec,
    }


# --------------------------------------------------------------------------------------------
# The benchmark


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = proc_status_kib_meminfo()
    return {
        "cores": os.cpu_count(),
        "memory_gib": None if mem_kib is None else round(mem_kib / 1024 / 1024, 1),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def proc_status_kib_meminfo() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return None


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "scheduler"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not dirty:
            return rev
        # The hot path changes under us: name the working tree's scheduler/ by its diff.
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", "scheduler"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        ).stdout
        return f"{rev}+scheduler/ diff sha256:{hashlib.sha256(diff).hexdigest()[:12]}"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Bench:
    def __init__(self, args: argparse.Namespace, out_dir: Path) -> None:
        self.args = args
        self.out_dir = out_dir
        self.results: dict[str, Any] = {"meta": {}, "runs": []}
        self.local: Any = None
        self.api: Api | None = None
        self.bin_dir: Path | None = None
        self.kubeconfig: Path | None = None
        self.work: Path | None = None
        self.seq = 0
        self.py_source: Path | None = None
        self.py_python: Path | None = None  # None: py-scheduler runs in this virtualenv
        self.cpu_limit: CpuLimit | None = None
        # The benchmark nodes standing (fresh_nodes): the run that made the set names them.
        self.node_set: str | None = None

    # ---------------------------------------------------------------- cluster
    def up(self) -> None:
        if self.args.py_deps == "image" and "py" in self.args.schedulers.split(","):
            lock = REPO_ROOT / "requirements.lock"
            self.py_python = runtime_venv(lock, localcluster.cache_root())
        parent = localcluster.cache_root() / "bench"
        _reap_stale(parent)
        state_dir = (
            Path(self.args.state_dir)
            if self.args.state_dir
            else parent / f"{os.getpid()}-{secrets.token_hex(3)}"
        )
        env = dict(os.environ)
        env["PY_SCHEDULER_KWOK_DELETE_DELAY"] = self.args.kwok_delete_delay
        if max(SIZES[name].nodes for name in size_names(self.args.size)) >= XL_NODES:
            # 5000 kwok nodes renewing a 40 s lease every 10 s is more than kwok and the API
            # server do on 2 cores: nodes fall back to NotReady. Renew every minute instead.
            env.setdefault("PY_SCHEDULER_NODE_LEASE_SECONDS", "240")
        # A private cluster dies with this process (even on SIGKILL); a named one is kept.
        keep = bool(self.args.keep_cluster or self.args.state_dir)
        self.local = localcluster.LocalCluster(state_dir, env=env, die_with_parent=not keep)
        started = time.monotonic()
        info = self.local.up(nodes=0)
        state = self.local.read_state() or {}
        self.bin_dir = Path(state["bin_dir"])
        self.kubeconfig = Path(info.kubeconfig)
        self.api = Api(self.kubeconfig)
        # Scheduler configs and logs of the last benchmark, kept after the cluster is gone.
        self.work = localcluster.cache_root() / "bench-logs" / "latest"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.results["meta"]["logs"] = str(self.work)
        if self.args.py_source != "worktree":
            self.py_source = snapshot_scheduler(self.args.py_source, self.work / "py-source")
        log(f"control plane up in {time.monotonic() - started:.0f}s (state {state_dir})")

    def down(self) -> None:
        if self.local is None or self.args.keep_cluster or self.args.state_dir:
            return
        self.local.down()
        self.local.lock_path.unlink(missing_ok=True)

    @property
    def client(self) -> Api:
        assert self.api is not None
        return self.api

    def ensure_priority_class(self) -> None:
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": HIGH_CLASS, "labels": {"bench": BENCH_LABEL}},
            "value": 1000,
            "description": "py-scheduler cluster benchmark preemptors",
        }
        self.client.request(
            "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body, allow=(409,)
        )

    def _delete_all(
        self, path: str, timeout: float, only: Collection[str] | None = None, **query: str
    ) -> bool:
        """DELETE every object a LIST of path returns (of those named in ``only``, if given),
        one call each from a few threads (a DELETE of the whole collection times out at 5000
        pods); True once none is left."""
        grace = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        deadline = time.monotonic() + timeout
        while True:
            items, _ = self.client.list_all(path, **query)
            # Terminating ones too: a DELETE with grace 0 ends their grace period now.
            names = [
                i["metadata"]["name"]
                for i in items
                if only is None or i["metadata"]["name"] in only
            ]
            if not names:
                return True
            if time.monotonic() > deadline:
                return False

            def delete(name: str) -> None:
                self.client.request("DELETE", f"{path}/{name}", grace, allow=(404, 409))

            self._parallel(delete, names, self.args.client_threads)
            time.sleep(0.5)

    def delete_bench_nodes(self, timeout: float = 300.0) -> None:
        if not self._delete_all("/api/v1/nodes", timeout, labelSelector=f"bench={BENCH_LABEL}"):
            raise RuntimeError("old benchmark nodes were not deleted in time")
        self.node_set = None

    def _pods_bound_to(self, names: Collection[str]) -> int:
        """How many pods, in any namespace, are bound to one of these nodes."""
        pods, _ = self.client.list_all("/api/v1/pods", fieldSelector="spec.nodeName!=")
        return sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") in names)

    def fresh_nodes(self, count: int, run_id: str, timeout: float | None = None) -> list[str]:
        """``count`` empty, Ready kwok nodes for the run ``run_id``.

        The nodes are made once and kept from run to run: a run that needs fewer nodes than
        stand deletes the surplus, one that needs more makes the missing ones. Before every
        run each kept node must be Ready and no pod in any namespace bound to it (the last
        run's namespace is emptied with grace 0 before the next run starts); otherwise, and
        always with --fresh-nodes, every benchmark node is deleted and a new set made, as
        before round 26. Both schedulers get the same nodes either way; what keeping them
        saves is kwok readying them (about 13 nodes/s on 2 cores at 5000 nodes: six minutes
        of every xl run). The wait for Ready scales with the nodes made."""
        existing = {
            n["metadata"]["name"]: n
            for n in self.client.list_all("/api/v1/nodes", labelSelector=f"bench={BENCH_LABEL}")[0]
        }
        prefix = None if self.args.fresh_nodes else self.node_set
        if prefix is not None:
            kept = [n for n in _node_names(prefix, count) if n in existing]
            not_ready = [n for n in kept if not localcluster.node_is_ready(existing[n])]
            busy = self._pods_bound_to(set(kept)) if kept else 0
            if not_ready or busy:
                log(
                    f"{run_id}: the kept nodes cannot be reused ({len(not_ready)} not Ready, "
                    f"{busy} pods bound to them): making new ones"
                )
                prefix = None
        if prefix is None:
            prefix = run_id
            self.node_set = None
        names = _node_names(prefix, count)
        wanted = set(names)
        surplus = [n for n in existing if n not in wanted]
        missing = [n for n in names if n not in existing]
        selector = f"bench={BENCH_LABEL}"
        if surplus and not self._delete_all(
            "/api/v1/nodes", 300, set(surplus), labelSelector=selector
        ):
            raise RuntimeError(f"{len(surplus)} benchmark nodes were not deleted in 300s")
        labels = {"bench": BENCH_LABEL, "bench-set": prefix}

        def create(name: str) -> None:
            body = localcluster.node_manifest(name, cpu="4", memory="32Gi", pods=110, labels=labels)
            self.client.request("POST", "/api/v1/nodes", body, allow=(409,))

        self._parallel(create, missing, self.args.client_threads)
        self.node_set = prefix
        if timeout is None:
            timeout = max(300.0, 0.25 * len(missing))
        log(
            f"{run_id}: {count} nodes: {count - len(missing)} kept, {len(missing)} made, "
            f"{len(surplus)} deleted"
        )
        deadline = time.monotonic() + timeout
        while True:
            nodes, _ = self.client.list_all("/api/v1/nodes", labelSelector=f"bench-set={prefix}")
            ready = sum(
                1
                for n in nodes
                if n["metadata"]["name"] in wanted and localcluster.node_is_ready(n)
            )
            if ready == count:
                return names
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {ready}/{count} nodes Ready after {timeout:.0f}s")
            time.sleep(1.0)

    def fresh_namespace(self, run_id: str) -> str:
        ns = f"bench-{run_id}"
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"bench": BENCH_LABEL}},
        }
        self.client.request("POST", "/api/v1/namespaces", body, allow=(409,))
        deadline = time.monotonic() + 60
        while True:  # pods are refused until the service account controller made `default`
            status, _ = self.client.request(
                "GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default", allow=(404,)
            )
            if status == 200:
                return ns
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default service account in {ns}")
            time.sleep(0.2)

    def drop_namespace(self, ns: str, timeout: float = 300.0) -> None:
        """Pods gone at once (grace 0), then the namespace, waited for until it is gone.

        The wait keeps the namespace controller's work out of the next run: it deletes the
        run's Events (about 1.24 per pod), Services, PDBs and the rest one collection at a
        time, and until round 28 it did so during the next run, whose API server and etcd
        CPU per pod took it in (all but the first run of an invocation). Best effort: a
        cleanup failure or a namespace still there after ``timeout`` is logged, it never
        loses a measurement."""
        try:
            if not self._delete_all(f"/api/v1/namespaces/{ns}/pods", 600):
                log(f"warning: pods of {ns} still there after 600s")
            self.client.request("DELETE", f"/api/v1/namespaces/{ns}", allow=(404, 409))
            deadline = time.monotonic() + timeout
            while self.client.request("GET", f"/api/v1/namespaces/{ns}", allow=(404,))[0] != 404:
                if time.monotonic() > deadline:
                    log(f"warning: namespace {ns} still there after {timeout:.0f}s")
                    return
                time.sleep(0.5)
        except (ApiError, OSError, http.client.HTTPException) as err:
            log(f"warning: cleaning up {ns}: {err}")

    @staticmethod
    def _parallel(
        fn: Callable[[Any], None],
        items: Sequence[Any],
        threads: int,
        ready: Callable[[], None] | None = None,
        go: Callable[[], None] | None = None,
    ) -> None:
        """``fn`` over ``items`` from ``threads`` threads. ``ready``: each thread's first
        call (before any item); ``go``: called once, when every thread has made it."""
        lock = threading.Lock()
        it = iter(items)
        errors: list[BaseException] = []
        count = max(1, threads)
        barrier = threading.Barrier(count, action=go)

        def worker() -> None:
            try:
                if ready is not None:
                    ready()
            except BaseException as err:
                errors.append(err)
            barrier.wait()
            while True:
                with lock:
                    item = next(it, None)
                if item is None or errors:
                    return
                try:
                    fn(item)
                except BaseException as err:
                    errors.append(err)
                    return

        workers = [threading.Thread(target=worker) for _ in range(count)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise errors[0]

    def create_pods(
        self, ns: str, bodies: Sequence[dict[str, Any]], rate: float = 0.0
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Create in bulk from a few threads; returns each pod's create-call start time, and
        (paced only) the time it was due. ``rate`` > 0: pod i is not sent before start +
        i / rate (a paced arrival process, the same for every scheduler as long as the
        client can keep up; when it cannot, the pod is sent late and ``due`` keeps the
        time it was meant to arrive)."""
        sent: dict[str, float] = {}
        due: dict[str, float] = {}
        path = f"/api/v1/namespaces/{ns}/pods"
        clock = {"start": time.monotonic(), "wall": time.time()}

        def connect() -> None:
            # Each thread's connection (TLS with a client certificate) is opened before the
            # first pod: a handshake inside the run puts gaps between the first pods, and at
            # the shipped defaults a gap while the scheduler's token bucket is still full
            # wastes its refill, which shows on every later pod's latency (round 17).
            self.client.request("GET", f"/api/v1/namespaces/{ns}")

        def start() -> None:
            clock["start"], clock["wall"] = time.monotonic(), time.time()

        def create(item: tuple[int, dict[str, Any]]) -> None:
            i, body = item
            name = body["metadata"]["name"]
            if rate > 0:
                due[name] = clock["wall"] + i / rate
                wait = clock["start"] + i / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            t = time.time()
            self.client.request("POST", path, body, allow=(409,))
            sent[name] = t

        self._parallel(
            create, list(enumerate(bodies)), self.args.client_threads, ready=connect, go=start
        )
        return sent, due

    def start_scheduler(
        self, which: str, qps: int | None, run_dir: Path, cprofile_out: Path | None = None
    ) -> SchedulerProc:
        proc = self.new_scheduler(which, qps, run_dir, cprofile_out)
        proc.start()
        return proc

    def new_scheduler(
        self, which: str, qps: int | None, run_dir: Path, cprofile_out: Path | None = None
    ) -> SchedulerProc:
        """The scheduler under test, configured but not started."""
        assert self.kubeconfig is not None and self.bin_dir is not None
        proc: SchedulerProc
        if which == H.KUBE:
            proc = KubeSchedulerProc(
                run_dir,
                self.kubeconfig,
                qps,
                self.bin_dir,
                shlex.split(self.args.kube_args),
                self.args.kube_config,
            )
        else:
            proc = PySchedulerProc(
                run_dir,
                self.kubeconfig,
                qps,
                cprofile_out,
                self.py_source,
                self.py_python,
                self.args.py_config,
            )
        proc.cpu_limit = self.cpu_limit
        return proc

    def warm_up(self, ns: str, proc: SchedulerProc, watch: PodWatch, qps: int | None) -> None:
        """One pod scheduled and deleted: the scheduler's caches are synced and it binds.
        Then a pause of ``H.refill_seconds``: both schedulers LIST and WATCH through their
        rate budget at start, and a run that began at once would find the bucket of the one
        that became ready sooner still short of those tokens (round 16: py-scheduler's ran
        dry 40 pods early at the small size's defaults, 115 ms on its p99)."""
        name = "warmup-0"
        self.client.request(
            "POST", f"/api/v1/namespaces/{ns}/pods", pod_body(name, proc.scheduler_name)
        )
        if not watch.wait_until(lambda: watch.count("warmup", "bound") >= 1, 180, proc):
            raise RuntimeError(f"{proc.label} did not bind the warm-up pod; see {proc.log_path}")
        self.client.request(
            "DELETE",
            f"/api/v1/namespaces/{ns}/pods/{name}",
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
        )
        watch.wait_until(lambda: watch.count("warmup", "deleted") >= 1, 60)
        time.sleep(H.refill_seconds(qps))

    def control_plane_cpu(self) -> dict[str, float]:
        """CPU seconds so far of the control plane's processes in ``H.CONTROL_PLANE`` (those
        this cluster runs and that are alive)."""
        state = (self.local.read_state() if self.local is not None else None) or {}
        components = state.get("components") or {}
        out: dict[str, float] = {}
        for name in H.CONTROL_PLANE:
            pid = (components.get(name) or {}).get("pid")
            cpu = proc_cpu_seconds(pid) if isinstance(pid, int) else None
            if cpu is not None:
                out[name] = cpu
        return out

    def api_counters(self) -> dict[str, float]:
        """The API server's request and watch-event counters so far (``H.api_counters``);
        {} if /metrics cannot be read (the run goes on without them)."""
        try:
            return H.api_counters(self.client.get_text("/metrics"))
        except (ApiError, OSError, http.client.HTTPException) as exc:
            log(f"API server /metrics not read: {exc}")
            return {}

    def _new_run(self, scenario: str, size: Size, mode: str, which: str) -> tuple[str, Path]:
        self.seq += 1
        short = "kube" if which == H.KUBE else "py"
        run_id = f"{self.seq:02d}-{scenario[:4]}-{size.name}-{mode[:3]}-{short}"
        assert self.work is not None
        run_dir = self.work / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        return run_id, run_dir

    def _qps(self, mode: str) -> int | None:
        return None if mode == "defaults" else EQUAL_QPS

    # ---------------------------------------------------------------- throughput
    def throughput(self, size: Size, mode: str, which: str, profile: str = "") -> dict[str, Any]:
        if mode == "backlog":
            return self.backlog(size, which)
        run_id, run_dir = self._new_run("throughput", size, mode, which)
        nodes, pods = size.nodes, size.pods
        log(f"{run_id}: throughput, {which}, {nodes} nodes / {pods} pods, client QPS {mode}")
        ns = self.fresh_namespace(run_id)
        self.fresh_nodes(nodes, run_id)
        cprofile_out = self.out_dir / "profile.pstats" if profile == "cprofile" else None
        proc = self.start_scheduler(which, self._qps(mode), run_dir, cprofile_out)
        watch = PodWatch(self.client, ns).start()
        spy: PySpy | None = None
        record: dict[str, Any] = {
            "scenario": "throughput",
            "size": size.name,
            "qps_mode": mode,
            "qps": self._qps(mode) or 50,
            "burst": self._qps(mode) or 100,
            "scheduler": which,
            "nodes": nodes,
            "pods": pods,
            "profiled": bool(profile),
        }
        try:
            self.warm_up(ns, proc, watch, self._qps(mode))
            if profile == "py-spy":
                spy = PySpy(
                    self.args.py_spy, proc.pid, self.out_dir / "profile.folded", run_dir / "spy.log"
                )
            bodies = [pod_body(f"tp-{i:05d}", proc.scheduler_name) for i in range(pods)]
            record["loadavg_before"] = loadavg()
            api0 = self.api_counters()  # first: the scrape's own CPU is not the run's
            cpu0 = proc.usage_start()
            cp0 = self.control_plane_cpu()
            rate = self.args.paced_rate if mode == "defaults" else 0.0
            record["create_rate"] = rate or None
            sent, due = self.create_pods(ns, bodies, rate)
            created = time.time()
            timeout = self.args.timeout or (120 + pods / 5)
            complete = watch.wait_until(lambda: watch.count("tp", "bound") >= pods, timeout, proc)
            _record_usage(record, proc, cpu0, pods)
            record["control_plane_cpu_ms_per_pod"] = H.cpu_per_pod(
                cp0, self.control_plane_cpu(), pods
            )
            record["api_calls_per_pod"] = H.counts_per_pod(api0, self.api_counters(), pods)
        finally:
            if spy is not None:
                spy.stop()
            proc.stop()
            watch.stop()
        first = min(sent.values())
        bound = {n: r for n, r in watch.pods.items() if _group(n) == "tp" and r.bound}
        last = max((r.bound for r in bound.values() if r.bound), default=None)
        client_lat = [r.bound - sent[n] for n, r in bound.items() if r.bound and n in sent]
        # Paced: from the time each pod was due, which also counts the delay of a client
        # that fell behind its pace (a loaded machine sends late, and a late pod waits less
        # behind the rate limit: the usual latency would reward taking the client's CPU).
        due_lat = [r.bound - due[n] for n, r in bound.items() if r.bound and n in due]
        items, _ = self.client.list_all(f"/api/v1/namespaces/{ns}/pods")
        server_lat = [x for x in (_server_latency(p) for p in items) if x is not None]
        usage = H.node_cpu_usage(
            (r.node, _group(k), r.deleting is None) for k, r in watch.pods.items() if r.bound
        )
        record["overcommitted_nodes"] = sum(1 for m in usage.values() if m > NODE_CPU_MILLI)
        _write_pod_times(run_dir / "pods.tsv", sent, due, bound)
        record.update(
            complete=complete,
            bound=len(bound),
            create_seconds=round(created - first, 2),
            span_seconds=None if last is None else round(last - first, 2),
            pods_per_second=None if last is None else round(len(bound) / (last - first), 1),
            steady_pods_per_second=_rounded(
                H.steady_rate(r.bound for r in bound.values() if r.bound)
            ),
            latency_client=H.summarize(client_lat),
            latency_server=H.summarize(server_lat, digits=1),
            latency_client_sketch=H.quantile_sketch(client_lat),
            latency_server_sketch=H.quantile_sketch(server_lat, digits=1),
            latency_due=H.summarize(due_lat) if due_lat else None,
            create_lag_max=(
                round(max(sent[n] - due[n] for n in due if n in sent), 2) if due else None
            ),
            bound_curve=H.completion_curve([r.bound for r in bound.values() if r.bound], first),
            created_curve=H.completion_curve(sent.values(), first),
            limiter_start_ms=_limiter_start_ms(mode, bound, first),
            backlog_at_create_end=sum(1 for r in bound.values() if r.bound and r.bound > created)
            + (pods - len(bound)),
            watch_errors=watch.errors[:5],
            log=str(proc.log_path),
        )
        self.drop_namespace(ns)
        log(
            f"{run_id}: {record['bound']}/{pods} bound, {record['pods_per_second']} pods/s, "
            f"p50 {record['latency_client']['p50']} s, p99 {record['latency_client']['p99']} s, "
            f"VmHWM {(record.get('vmhwm_kib') or 0) // 1024} MiB"
        )
        return record

    def backlog(self, size: Size, which: str, scenario: str = "throughput") -> dict[str, Any]:
        """Every pod created before the scheduler starts, then the scheduler started (a
        restart or a failover with work waiting, a burst faster than any client): its own
        rate with no client in the loop. On 2 cores the equal client's pods/s at the small
        size is how fast the benchmark can create pods (both schedulers keep up), not how
        fast either schedules. Here pods/s and CPU ms per pod count from the first bind the
        watch sees to the last; what the scheduler spent before its first bind (start-up,
        the LIST of the backlog, its caches) is recorded beside them.

        ``scenario`` "dra": the same with dynamic resource allocation: every node publishes
        a ResourceSlice of ``DRA_DEVICES`` devices, every pod has a ResourceClaim of its own
        for one device of a DeviceClass whose CEL selector reads the driver and an
        attribute; the scheduler allocates a device for each pod and writes its claim
        (finalizer, allocation, reservation) before the Binding. ``scenario``
        "dra-extended": the same devices behind the extended resource ``DRA_EXTENDED``,
        which every pod asks for instead of a claim; the scheduler creates each pod's claim
        (then writes it as above, and the pod's status)."""
        mode = "backlog"
        run_id, run_dir = self._new_run(scenario, size, mode, which)
        nodes, pods = size.nodes, size.pods
        log(f"{run_id}: {scenario}, {which}, {nodes} nodes / {pods} pods, a backlog")
        ns = self.fresh_namespace(run_id)
        node_names = self.fresh_nodes(nodes, run_id)
        proc = self.new_scheduler(which, EQUAL_QPS, run_dir)
        watch = PodWatch(self.client, ns).start()
        record: dict[str, Any] = {
            "scenario": scenario,
            "size": size.name,
            "qps_mode": mode,
            "qps": EQUAL_QPS,
            "burst": EQUAL_QPS,
            "scheduler": which,
            "nodes": nodes,
            "pods": pods,
            "profiled": False,
        }
        mark: dict[str, Any] = {}

        def first_bind() -> None:  # the watch's thread, at the first bind it sees
            mark["cpu"] = proc.usage_start()
            mark["control_plane"] = self.control_plane_cpu()

        watch.on_first_bound["tp"] = first_bind
        bodies = [pod_body(f"tp-{i:05d}", proc.scheduler_name) for i in range(pods)]
        if scenario == "dra":
            self.dra_objects(ns, node_names, pods)
            record["devices_per_node"] = DRA_DEVICES
            for i, body in enumerate(bodies):
                body["spec"]["resourceClaims"] = [
                    {"name": "gpu", "resourceClaimName": f"c-{i:05d}"}
                ]
        elif scenario == "dra-extended":
            self.dra_objects(ns, node_names, 0, extended=True)
            record["devices_per_node"] = DRA_DEVICES
            for body in bodies:
                res = body["spec"]["containers"][0]["resources"]
                res["requests"][DRA_EXTENDED] = "1"
                res["limits"] = {**res.get("limits", {}), DRA_EXTENDED: "1"}
        try:
            sent, _ = self.create_pods(ns, bodies)
            created = time.time()
            record["loadavg_before"] = loadavg()
            # The API server's counters from before the start: read at the first bind (in
            # the watch's thread, or after it) they missed most of a small backlog's binds.
            api0 = self.api_counters()
            spawned = time.time()
            proc.start(timeout=max(120.0, pods / 50))
            timeout = self.args.timeout or (120 + pods / 5)
            complete = watch.wait_until(lambda: watch.count("tp", "bound") >= pods, timeout, proc)
            whole = proc.cpu_seconds()
            if "cpu" in mark:  # the drain's CPU, per pod bound after the first
                _record_usage(record, proc, mark["cpu"], pods - 1)
                record["control_plane_cpu_ms_per_pod"] = H.cpu_per_pod(
                    mark["control_plane"], self.control_plane_cpu(), pods - 1
                )
                # with the start-up's calls (its listing of the backlog), per pod
                record["api_calls_per_pod"] = H.counts_per_pod(api0, self.api_counters(), pods)
            record["cpu_seconds_with_start"] = _rounded(whole)
            record["cpu_ms_per_pod_with_start"] = (
                None if whole is None else round(1000 * whole / pods, 2)
            )
        finally:
            proc.stop()
            watch.stop()
        bound = {n: r for n, r in watch.pods.items() if _group(n) == "tp" and r.bound}
        times = sorted(r.bound for r in bound.values() if r.bound)
        usage = H.node_cpu_usage(
            (r.node, _group(k), r.deleting is None) for k, r in watch.pods.items() if r.bound
        )
        record["overcommitted_nodes"] = sum(1 for m in usage.values() if m > NODE_CPU_MILLI)
        _write_pod_times(run_dir / "pods.tsv", sent, {}, bound)
        drain = times[-1] - times[0] if len(times) > 1 else None
        record.update(
            complete=complete,
            bound=len(bound),
            create_seconds=round(created - min(sent.values()), 2),
            first_bind_seconds=None if not times else round(times[0] - spawned, 2),
            drain_seconds=_rounded(drain, 2),
            pods_per_second=None if not drain else round((len(times) - 1) / drain, 1),
            steady_pods_per_second=_rounded(H.steady_rate(times)),
            bound_curve=H.completion_curve(times, spawned),
            watch_errors=watch.errors[:5],
            log=str(proc.log_path),
        )
        if scenario in DRA_SCENARIOS:
            record["allocated_claims"] = self.allocated_claims(ns)
        self.drop_namespace(ns)
        if scenario in DRA_SCENARIOS:
            self._delete_all(DRA_SLICES, 300, labelSelector=f"bench={BENCH_LABEL}")
        log(
            f"{run_id}: {record['bound']}/{pods} bound, first bind {record['first_bind_seconds']}"
            f" s after the start, then {record['pods_per_second']} pods/s, CPU "
            f"{record.get('cpu_ms_per_pod')} ms/pod ({record['cpu_ms_per_pod_with_start']} with "
            f"the start), VmHWM {(record.get('vmhwm_kib') or 0) // 1024} MiB"
        )
        return record

    def dra_objects(
        self, ns: str, nodes: Sequence[str], claims: int, *, extended: bool = False
    ) -> None:
        """The dra scenarios' DeviceClass (kept; ``extended``: the one that backs the
        extended resource), a ResourceSlice per node and a claim per pod (made before the
        run: not measured)."""
        selector = (
            f'device.driver == "{DRA_DRIVER}" && device.attributes["{DRA_DRIVER}"].model == "a100"'
        )
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
        if extended:
            spec["extendedResourceName"] = DRA_EXTENDED
        self.client.request(
            "POST",
            "/apis/resource.k8s.io/v1/deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {
                    "name": DRA_EXTENDED_CLASS if extended else DRA_CLASS,
                    "labels": {"bench": BENCH_LABEL},
                },
                "spec": spec,
            },
            allow=(409,),
        )
        self._delete_all(DRA_SLICES, 300, labelSelector=f"bench={BENCH_LABEL}")

        def make_slice(node: str) -> None:
            devices = [
                {
                    "name": f"gpu-{d}",
                    "attributes": {"model": {"string": "a100"}, "index": {"int": d}},
                    "capacity": {"memory": {"value": "40Gi"}},
                }
                for d in range(DRA_DEVICES)
            ]
            body = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpus", "labels": {"bench": BENCH_LABEL}},
                "spec": {
                    "driver": DRA_DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
            self.client.request("POST", DRA_SLICES, body, allow=(409,))

        def make_claim(i: int) -> None:
            body = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"c-{i:05d}"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_CLASS}}]
                    }
                },
            }
            self.client.request(
                "POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", body
            )

        self._parallel(make_slice, list(nodes), self.args.client_threads)
        self._parallel(make_claim, list(range(claims)), self.args.client_threads)

    def allocated_claims(self, ns: str) -> dict[str, int]:
        """The run's claims: how many are allocated, and the most claims one device got
        (must be 1: two pods on one device would be a double allocation)."""
        items, _ = self.client.list_all(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
        per_device: Counter[tuple[str, ...]] = Counter()
        allocated = 0
        for c in items:
            results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            allocated += bool(results)
            for r in results:
                per_device[(r.get("driver"), r.get("pool"), r.get("device"))] += 1
        return {
            "claims": len(items),
            "allocated": allocated,
            "max_claims_per_device": max(per_device.values(), default=0),
        }

    # ---------------------------------------------------------------- deployments
    def ensure_deployment_classes(self) -> None:
        for name, value in DEPLOYMENT_CLASSES:
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name, "labels": {"bench": BENCH_LABEL}},
                "value": value,
                "description": "py-scheduler cluster benchmark: the deployments scenario",
            }
            self.client.request(
                "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body, allow=(409,)
            )

    def deployment_objects(self, index: int, scheduler_name: str) -> list[tuple[str, Any]]:
        """A Deployment (pods of the throughput shape, named dep-...), its headless Service
        and its PodDisruptionBudget: (collection path suffix, body) in creation order."""
        app = f"dep-{index:03d}"
        labels = {"app": app, "bench": BENCH_LABEL}
        klass = DEPLOYMENT_CLASSES[index % len(DEPLOYMENT_CLASSES)][0]
        pod = pod_body(app, scheduler_name, priority_class=klass)
        template = {"metadata": {"labels": dict(labels)}, "spec": pod["spec"]}
        return [
            (
                "/api/v1/namespaces/{ns}/services",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": app, "labels": labels},
                    "spec": {
                        "clusterIP": "None",
                        "selector": {"app": app},
                        "ports": [{"port": 80}],
                    },
                },
            ),
            (
                "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": app, "labels": labels},
                    "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": app}}},
                },
            ),
            (
                "/apis/apps/v1/namespaces/{ns}/deployments",
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": app, "labels": labels},
                    "spec": {
                        "replicas": DEPLOYMENT_REPLICAS,
                        "selector": {"matchLabels": {"app": app}},
                        "template": template,
                    },
                },
            ),
        ]

    def deployments(self, size: Size, mode: str, which: str) -> dict[str, Any]:
        """Pods created by kube-controller-manager for real Deployments (with Services,
        PDBs and mixed PriorityClasses): the shape of production workloads."""
        run_id, run_dir = self._new_run("deployments", size, mode, which)
        count = max(1, size.pods // DEPLOYMENT_REPLICAS)
        pods = count * DEPLOYMENT_REPLICAS
        log(
            f"{run_id}: deployments, {which}, {size.nodes} nodes, {count} Deployments x "
            f"{DEPLOYMENT_REPLICAS} replicas, client QPS {mode}"
        )
        self.ensure_deployment_classes()
        ns = self.fresh_namespace(run_id)
        self.fresh_nodes(size.nodes, run_id)
        proc = self.start_scheduler(which, self._qps(mode), run_dir, None)
        watch = PodWatch(self.client, ns).start()
        record: dict[str, Any] = {
            "scenario": "deployments",
            "size": size.name,
            "qps_mode": mode,
            "qps": self._qps(mode) or 50,
            "burst": self._qps(mode) or 100,
            "scheduler": which,
            "nodes": size.nodes,
            "pods": pods,
            "deployments": count,
            "profiled": False,
        }
        try:
            self.warm_up(ns, proc, watch, self._qps(mode))
            objs = [
                o for i in range(count) for o in self.deployment_objects(i, proc.scheduler_name)
            ]
            record["loadavg_before"] = loadavg()
            api0 = self.api_counters()  # first: the scrape's own CPU is not the run's
            cpu0 = proc.usage_start()
            cp0 = self.control_plane_cpu()
            first = time.time()
            start = time.monotonic()
            # At the defaults, paced like the throughput scenario: Deployment i (its
            # replicas) is not created before start + i * replicas / rate.
            rate = self.args.paced_rate if mode == "defaults" else 0.0
            record["create_rate"] = rate or None
            due: dict[str, float] = {}

            def create(item: tuple[int, tuple[str, Any]]) -> None:
                j, (path, body) = item
                if rate > 0 and body["kind"] == "Deployment":
                    offset = (j // 3) * DEPLOYMENT_REPLICAS / rate
                    due[body["metadata"]["name"]] = first + offset
                    wait = start + offset - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                self.client.request("POST", path.format(ns=ns), body, allow=(409,))

            self._parallel(create, list(enumerate(objs)), self.args.client_threads)
            timeout = self.args.timeout or (300 + pods / 5)
            complete = watch.wait_until(lambda: watch.count("dep", "bound") >= pods, timeout, proc)
            _record_usage(record, proc, cpu0, pods)
            record["control_plane_cpu_ms_per_pod"] = H.cpu_per_pod(
                cp0, self.control_plane_cpu(), pods
            )
            record["api_calls_per_pod"] = H.counts_per_pod(api0, self.api_counters(), pods)
        finally:
            proc.stop()
            watch.stop()
        recs = {n: r for n, r in watch.pods.items() if _group(n) == "dep"}
        bound = {n: r for n, r in recs.items() if r.bound}
        last = max((r.bound for r in bound.values() if r.bound), default=None)
        added = [r.added for r in recs.values() if r.added]
        client_lat = [r.bound - r.added for r in bound.values() if r.bound and r.added]
        # Paced: from the time the pod's Deployment was due (pods are named <app>-<rs>-<id>).
        due_lat = [
            r.bound - due[app]
            for n, r in bound.items()
            if r.bound and (app := n.rsplit("-", 2)[0]) in due
        ]
        items, _ = self.client.list_all(f"/api/v1/namespaces/{ns}/pods")
        server_lat = [
            x
            for x in (_server_latency(p) for p in items if _group(p["metadata"]["name"]) == "dep")
            if x is not None
        ]
        usage = H.node_cpu_usage(
            (r.node, _group(k), r.deleting is None) for k, r in watch.pods.items() if r.bound
        )
        record["overcommitted_nodes"] = sum(1 for m in usage.values() if m > NODE_CPU_MILLI)
        _write_pod_times(
            run_dir / "pods.tsv",
            {n: r.added for n, r in recs.items() if r.added},
            {n: due[app] for n in recs if (app := n.rsplit("-", 2)[0]) in due},
            bound,
        )
        record.update(
            complete=complete,
            bound=len(bound),
            create_seconds=None if not added else round(max(added) - first, 2),
            span_seconds=None if last is None else round(last - first, 2),
            pods_per_second=None if last is None else round(len(bound) / (last - first), 1),
            steady_pods_per_second=_rounded(
                H.steady_rate(r.bound for r in bound.values() if r.bound)
            ),
            latency_client=H.summarize(client_lat),
            latency_server=H.summarize(server_lat, digits=1),
            latency_client_sketch=H.quantile_sketch(client_lat),
            latency_server_sketch=H.quantile_sketch(server_lat, digits=1),
            latency_due=H.summarize(due_lat) if due_lat else None,
            latency_by_class=_latency_by_class(bound),
            bound_curve=H.completion_curve([r.bound for r in bound.values() if r.bound], first),
            created_curve=H.completion_curve(added, first),
            limiter_start_ms=_limiter_start_ms(mode, bound, first),
            watch_errors=watch.errors[:5],
            log=str(proc.log_path),
        )
        self.drop_deployments(ns)
        self.drop_namespace(ns)
        log(
            f"{run_id}: {record['bound']}/{pods} bound, {record['pods_per_second']} pods/s, "
            f"p50 {record['latency_client']['p50']} s, p99 {record['latency_client']['p99']} s, "
            f"CPU {record.get('cpu_ms_per_pod')} ms/pod, "
            f"VmHWM {(record.get('vmhwm_kib') or 0) // 1024} MiB"
        )
        return record

    def drop_deployments(self, ns: str) -> None:
        """Deployments and their ReplicaSets first, or the controllers would replace the pods
        drop_namespace deletes. Best effort, like drop_namespace."""
        for path in (
            f"/apis/apps/v1/namespaces/{ns}/deployments",
            f"/apis/apps/v1/namespaces/{ns}/replicasets",
        ):
            try:
                self.client.request(
                    "DELETE",
                    path,
                    {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Orphan"},
                    allow=(404,),
                )
            except (ApiError, OSError, http.client.HTTPException) as err:
                log(f"warning: deleting {path}: {err}")

    # ---------------------------------------------------------------- preemption
    def preemption(self, size: Size, mode: str, which: str) -> dict[str, Any]:
        run_id, run_dir = self._new_run("preemption", size, mode, which)
        n = size.preempt_nodes
        rate = self.args.preemption_rate
        log(f"{run_id}: preemption, {which}, {n} nodes x 4 low pods, {n} preemptors at {rate}/s")
        self.ensure_priority_class()
        ns = self.fresh_namespace(run_id)
        nodes = self.fresh_nodes(n, run_id)
        watch = PodWatch(self.client, ns).start()
        record: dict[str, Any] = {
            "scenario": "preemption",
            "size": size.name,
            "qps_mode": mode,
            "qps": self._qps(mode) or 50,
            "burst": self._qps(mode) or 100,
            "scheduler": which,
            "nodes": n,
            "low_pods": 4 * n,
            "preemptors": n,
            "rate": rate,
        }
        proc: SchedulerProc | None = None
        try:
            sched_name = (
                KubeSchedulerProc.scheduler_name
                if which == H.KUBE
                else PySchedulerProc.scheduler_name
            )
            low = [
                pod_body(f"low-{i:04d}-{j}", sched_name, cpu="900m", node=node, grace=1)
                for i, node in enumerate(nodes)
                for j in range(4)
            ]
            self.create_pods(ns, low)  # unpaced: no due times
            if not watch.wait_until(lambda: watch.count("low", "running") >= len(low), 600):
                raise RuntimeError("low-priority pods did not all turn Running")
            proc = self.start_scheduler(which, self._qps(mode), run_dir)
            self.warm_up(ns, proc, watch, self._qps(mode))
            record["loadavg_before"] = loadavg()
            cpu0 = proc.usage_start()
            sent: dict[str, float] = {}
            start = time.time()
            for i in range(n):
                due = start + i / rate
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                body = pod_body(
                    f"high-{i:04d}", sched_name, cpu="3", priority_class=HIGH_CLASS, grace=1
                )
                sent[body["metadata"]["name"]] = time.time()
                self.client.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
            timeout = self.args.timeout or (300 + n / rate)
            complete = watch.wait_until(lambda: watch.count("high", "bound") >= n, timeout, proc)
            done = time.time()
            # Victims still being deleted for the last preemptors: let them settle.
            watch.wait_quiet("deleting", 3.0, 30.0)
            _record_usage(record, proc, cpu0, pods=None)  # CPU in all, none per preemptor
        finally:
            if proc is not None:
                proc.stop()
            watch.stop()
        first = min(sent.values())
        highs = {k: r for k, r in watch.pods.items() if _group(k) == "high"}
        bound_times = [r.bound for r in highs.values() if r.bound]
        last = max(bound_times, default=None)
        victims = {k: r for k, r in watch.pods.items() if _group(k) == "low" and r.deleting}
        # Victims per node against preemptors bound there: more than 3 per preemptor, or
        # victims on a node no preemptor took, is preemption beyond need.
        victims_on: Counter[str] = Counter(r.node for r in victims.values())
        preemptors_on: Counter[str] = Counter(r.node for r in highs.values() if r.bound)
        wasted = sum(c for node, c in victims_on.items() if not preemptors_on.get(node))
        over_nodes = sum(1 for node, c in victims_on.items() if c > 3 * preemptors_on.get(node, 0))
        events = self._preempted_events(ns)
        uid_to_name = {r.uid: k for k, r in highs.items()}
        # Distinct victims per preemptor: a Preempted event posted twice for one pod (e.g. a
        # second attempt while the victims still terminate) is not a second victim.
        distinct = set(events)
        by_preemptor: Counter[str] = Counter()
        for uid, _victim in distinct:
            by_preemptor[uid_to_name.get(uid, uid)] += 1
        beyond = sum(max(0, c - 3 * preemptors_on.get(node, 0)) for node, c in victims_on.items())
        usage = H.node_cpu_usage(
            (r.node, _group(k), r.deleting is None) for k, r in watch.pods.items() if r.bound
        )
        summary = H.victims_summary(by_preemptor, len(bound_times) or n, needed=3)
        record.update(
            complete=complete,
            bound=len(bound_times),
            completion_seconds=None if last is None else round(last - first, 2),
            wall_seconds=round(done - first, 2),
            victims_deleted=len(victims),
            victims_per_preemptor=H.ratio(len(victims), len(bound_times) or None, 3),
            max_victims_per_preemptor=summary["max_victims_for_one_preemptor"],
            preemptors_over_needed=summary["preemptors_over_needed"],
            preempted_events=len(events),
            duplicate_preempted_events=len(events) - len(distinct),
            overcommitted_nodes=sum(1 for m in usage.values() if m > NODE_CPU_MILLI),
            most_preemptors_on_one_node=max(preemptors_on.values(), default=0),
            victims_beyond_need=beyond,
            victims_histogram=summary["histogram"],
            nodes_over_preempted=over_nodes,
            victims_on_nodes_without_preemptor=wasted,
            latency_client=H.summarize(
                [r.bound - sent[k] for k, r in highs.items() if r.bound and k in sent]
            ),
            bound_curve=H.completion_curve(bound_times, first),
            arrival_curve=H.completion_curve(sent.values(), first),
            watch_errors=watch.errors[:5],
            log=str(proc.log_path if proc else ""),
        )
        self.drop_namespace(ns)
        log(
            f"{run_id}: {record['bound']}/{n} preemptors bound in "
            f"{record['completion_seconds']} s, {record['victims_deleted']} victims "
            f"({record['victims_per_preemptor']} per preemptor, max "
            f"{record['max_victims_per_preemptor']}), VmHWM "
            f"{(record.get('vmhwm_kib') or 0) // 1024} MiB"
        )
        return record

    def _preempted_events(self, ns: str) -> list[tuple[str, str]]:
        """(preemptor uid, victim name) of every Preempted event in the namespace."""
        items, _ = self.client.list_all(f"/api/v1/namespaces/{ns}/events")
        out: list[tuple[str, str]] = []
        for ev in items:
            if ev.get("reason") != "Preempted":
                continue
            parsed = H.parse_preempted_message(str(ev.get("message") or ev.get("note") or ""))
            victim = str((ev.get("involvedObject") or ev.get("regarding") or {}).get("name", ""))
            if parsed:
                out.extend([(parsed[0], victim)] * max(1, int(ev.get("count") or 1)))
        return out

    # ---------------------------------------------------------------- driver
    def save(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.results["ratios"] = H.compute_ratios(self.results["runs"])
        path = self.out_dir / "results.json"
        path.write_text(H.dump_results(self.results))

    def run(self) -> None:
        args = self.args
        sizes = [SIZES[s] for s in size_names(args.size)]
        modes = list(mode_names(args.modes))
        scheds = [{"kube": H.KUBE, "py": H.PY}[s] for s in args.schedulers.split(",") if s]
        scenarios = [s for s in args.scenarios.split(",") if s]
        meta = self.results["meta"]
        meta.update(
            date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            revision=git_revision() if args.py_source == "worktree" else _rev_parse(args.py_source),
            machine=machine_info(),
            versions=localcluster.read_versions(),
            loadavg_start=loadavg(),
            args={k: v for k, v in vars(args).items() if k != "replot"},
            sizes={s.name: vars(s) for s in sizes},
        )
        if args.core_json and Path(args.core_json).is_file():
            self.results["core"] = json.loads(Path(args.core_json).read_text())
        if args.scheduler_cpus:
            self.cpu_limit = CpuLimit(args.scheduler_cpus, main_only=args.limit_main_only)
            meta["scheduler_cpu_limit"] = {
                "cores": args.scheduler_cpus,
                "main_only": args.limit_main_only,
                "cfs_quota_us": self.cpu_limit.quota_us,
                "cfs_period_us": self.cpu_limit.period_us,
            }
        try:
            self.up()
            meta["py_scheduler_version"] = _py_scheduler_version()
            meta["kube_scheduler_version"] = _kube_scheduler_version(self.bin_dir)
            for size in sizes:
                for k, mode in enumerate(modes):
                    for scenario in scenarios:
                        if mode == "backlog" and scenario not in ("throughput", *DRA_SCENARIOS):
                            continue  # a backlog is the throughput and dra scenarios'
                        if scenario in DRA_SCENARIOS and mode != "backlog":
                            continue  # dra runs as a backlog only
                        repeats = repeats_of(
                            mode, args.repeat, args.paced_repeat, scenario, args.unthrottled_repeat
                        )
                        for rep in range(repeats):
                            # Alternate which scheduler goes first, so neither always gets
                            # the warmer (or the noisier) slot.
                            first = scheds if (k + rep) % 2 == 0 else list(reversed(scheds))
                            for which in first:
                                run = self._one(scenario, size, mode, which)
                                if repeats > 1:
                                    run["repeat"] = rep + 1
                                if which == H.PY and args.py_config:
                                    run["py_config"] = args.py_config
                                if which == H.KUBE and args.kube_config:
                                    run["kube_config"] = args.kube_config
                                self.results["runs"].append(run)
                                self.save()
            tool = self._profile_tool()
            if tool and "throughput" in scenarios and H.PY in scheds:
                size = sizes[-1]
                log(f"profiling py-scheduler with {tool} in an extra throughput run ({size.name})")
                rec = self.throughput(size, "equal", H.PY, profile=tool)
                if args.py_config:
                    rec["py_config"] = args.py_config
                self.results["runs"].append(rec)
                self.results["profile"] = self._summarize_profile(tool)
                self.save()
            self.delete_bench_nodes()
        finally:
            meta["loadavg_end"] = loadavg()
            self.save()
            self.down()
            if self.cpu_limit is not None:
                self.cpu_limit.remove()

    def _one(self, scenario: str, size: Size, mode: str, which: str) -> dict[str, Any]:
        """One run; a failure (e.g. the scheduler crashed) is recorded and the bench goes on."""
        try:
            if scenario == "throughput":
                return self.throughput(size, mode, which)
            if scenario in DRA_SCENARIOS:
                return self.backlog(size, which, scenario=scenario)
            if scenario == "deployments":
                return self.deployments(size, mode, which)
            return self.preemption(size, mode, which)
        except Exception as err:
            log(f"run failed: {err}")
            self.drop_bench_namespaces()
            return {
                "scenario": scenario,
                "size": size.name,
                "qps_mode": mode,
                "scheduler": which,
                "complete": False,
                "error": str(err),
            }

    def drop_bench_namespaces(self) -> None:
        items, _ = self.client.list_all("/api/v1/namespaces", labelSelector=f"bench={BENCH_LABEL}")
        for ns in items:
            name = ns["metadata"]["name"]
            if not ns["metadata"].get("deletionTimestamp"):
                self.drop_namespace(name)

    def _profile_tool(self) -> str:
        if self.args.profile == "off":
            return ""
        spy = self.args.py_spy or shutil.which("py-spy")
        if not spy:
            candidate = Path(sys.executable).parent / "py-spy"
            spy = str(candidate) if candidate.exists() else ""
        if spy:
            self.args.py_spy = spy
            return "py-spy"
        return "cprofile"

    def _summarize_profile(self, tool: str) -> dict[str, Any]:
        if tool == "py-spy":
            path = self.out_dir / "profile.folded"
            if not path.exists():
                return {"tool": tool, "error": "py-spy wrote no profile"}
            with path.open() as handle:
                folded = H.fold_profile(handle, top=15)
            return {
                "tool": "py-spy record --gil at 100 Hz (raw collapsed stacks)",
                "file": path.name,
                **folded,
            }
        path = self.out_dir / "profile.pstats"
        if not path.exists():
            return {"tool": tool, "error": "cProfile wrote no profile"}
        import pstats

        stats = pstats.Stats(str(path))
        raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
        total = sum(v[2] for v in raw.values()) or 1.0
        rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:15]
        return {
            "tool": "cProfile",
            "file": path.name,
            "samples": len(raw),
            "self": [
                {
                    "function": f"{func} ({Path(file).name}:{line})",
                    "samples": round(v[2], 3),
                    "percent": round(100 * v[2] / total, 1),
                }
                for (file, line, func), v in rows
            ],
            "inclusive": [],
        }


def _node_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-n{i:05d}" for i in range(count)]


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _record_usage(
    record: dict[str, Any], proc: SchedulerProc, cpu0: CpuMark, pods: int | None
) -> None:
    """At the end of a measured phase: load, the scheduler's peak RSS and its CPU since
    ``cpu0`` (in all and, given ``pods``, per pod), each for the process tree and, under
    ``main_``, for the main process alone. Both are read at once, as at the start."""
    record["loadavg_after"] = loadavg()
    record["vmhwm_kib"] = proc.vmhwm_kib()
    record["main_vmhwm_kib"] = proc.main_vmhwm_kib()
    for prefix, cpu1, start in (
        ("", proc.cpu_seconds(), cpu0.tree),
        ("main_", proc.main_cpu_seconds(), cpu0.main),
    ):
        record[f"{prefix}cpu_seconds"] = None if cpu1 is None else round(cpu1 - start, 1)
        if cpu1 is not None and pods:
            record[f"{prefix}cpu_ms_per_pod"] = round(1000 * (cpu1 - start) / pods, 2)
    record.update(proc.limit_usage())


def _rev_parse(rev: str) -> str:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            ["git", "rev-parse", "--short", rev],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return rev


def runtime_venv(lock: Path, cache: Path) -> Path:
    """The interpreter of a virtualenv holding exactly the packages pinned in ``lock``
    (requirements.lock: the image's runtime dependencies, nothing of the development
    extras), built once per lock file and Python version under ``cache``. py-scheduler runs
    there with its code on PYTHONPATH, so that start-up, memory and CPU are those of what
    ships: in the development virtualenv structlog finds ``rich`` (import-linter's
    dependency) and imports it, a few MiB and tens of milliseconds in each process."""
    key = hashlib.sha256(lock.read_bytes() + sys.version.encode()).hexdigest()[:12]
    dest = cache / "bench-venvs" / key
    python = dest / "bin" / "python"
    if (dest / ".complete").is_file():
        return python
    # Built beside and renamed into place: an interrupted build is never taken for a venv.
    building = dest.with_name(f"{key}.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    log(f"building py-scheduler's runtime virtualenv from {lock.name} into {dest} (PyPI)")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(building)], check=True)
    pip = [str(building / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "install", "--quiet", "--only-binary=:all:", "--requirement", str(lock)], check=True
    )
    subprocess.run([*pip, "check"], check=True, stdout=subprocess.DEVNULL)
    (building / ".complete").write_text(f"{lock}\n{sys.version}\n")
    shutil.rmtree(dest, ignore_errors=True)
    building.rename(dest)
    return python


def snapshot_scheduler(rev: str, dest: Path) -> Path:
    """scheduler/ as of git revision `rev`, extracted into dest (a PYTHONPATH entry)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "scheduler"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    log(f"py-scheduler runs from scheduler/ of {rev} ({dest})")
    return dest


def _server_latency(pod: Mapping[str, Any]) -> float | None:
    created = H.parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            bound = H.parse_time(cond.get("lastTransitionTime"))
            if created is not None and bound is not None:
                return bound - created
    return None


def _py_scheduler_version() -> str:
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from scheduler import __version__

        return str(__version__)
    except ImportError:
        return "unknown"


def _kube_scheduler_version(bin_dir: Path | None) -> str:
    if bin_dir is None:
        return "unknown"
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(
            [str(bin_dir / "kube-scheduler"), "--version"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    return "unknown"


def _reap_stale(parent: Path) -> None:
    """Stop clusters of benchmark runs that died without tearing down (dirs <pid>-<hex>)."""
    if not parent.is_dir():
        return
    for entry in parent.iterdir():
        pid_text = entry.name.lstrip(".").split("-", 1)[0]
        if not pid_text.isdigit() or Path(f"/proc/{pid_text}").exists():
            continue
        if entry.name.endswith(".lock"):
            entry.unlink(missing_ok=True)
            continue
        stale = localcluster.LocalCluster(entry)
        with contextlib.suppress(localcluster.ClusterError, OSError):
            stale.down()
        stale.lock_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# Plots (matplotlib, headless)

COLORS = {H.KUBE: "#1f77b4", H.PY: "#ff7f0e"}


def write_plots(results: Mapping[str, Any], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results.get("runs") or [] if not r.get("profiled")]
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=90)
        plt.close(fig)
        written.append(name)

    def panels(scenario: str) -> list[tuple[str, str]]:
        seen = [(r["size"], r["qps_mode"]) for r in runs if r.get("scenario") == scenario]
        return list(dict.fromkeys(seen))

    def label(size: str, mode: str) -> str:
        nodes = {
            r.get("nodes") for r in runs if r["size"] == size and r["scenario"] == "throughput"
        }
        nodes.discard(None)
        where = f"{size} ({next(iter(nodes))} nodes)" if len(nodes) == 1 else size
        return f"{where}, {H.QPS_MODE_SHORT.get(mode, mode)}"

    # Throughput bars.
    tp_panels = panels("throughput")
    if tp_panels:
        fig, ax = plt.subplots(figsize=(max(5.0, 2.2 * len(tp_panels)), 3.8))
        width = 0.38
        for k, sched in enumerate(H.SCHEDULERS):
            values = []
            for size, mode in tp_panels:
                run = H.find_run(
                    runs, scenario="throughput", size=size, qps_mode=mode, scheduler=sched
                )
                values.append((run or {}).get("pods_per_second") or 0.0)
            xs = [i + (k - 0.5) * width for i in range(len(tp_panels))]
            bars = ax.bar(xs, values, width, label=sched, color=COLORS[sched])
            ax.bar_label(bars, fmt="%.0f", fontsize=8)
        ax.set_xticks(range(len(tp_panels)))
        ax.set_xticklabels([label(s, m).replace(", ", "\n") for s, m in tp_panels], fontsize=8)
        ax.set_ylabel("pods/s (first create to last bind;\nbacklog: first bind to last)")
        ax.set_title("Scheduling throughput")
        ax.legend(fontsize=8)
        save(fig, "throughput.png")

        # Latency CDFs, one panel per size x QPS mode (a backlog has no arrival to count from).
        lat_panels = [(s, m) for s, m in tp_panels if m != "backlog"] or tp_panels
        fig, axes = plt.subplots(
            1, len(lat_panels), figsize=(3.6 * len(lat_panels), 3.4), squeeze=False
        )
        for ax, (size, mode) in zip(axes[0], lat_panels, strict=True):
            for sched in H.SCHEDULERS:
                run = H.find_run(
                    runs, scenario="throughput", size=size, qps_mode=mode, scheduler=sched
                )
                xs, ys = H.cdf_xy((run or {}).get("latency_client_sketch") or [])
                if xs:
                    ax.plot(xs, ys, label=sched, color=COLORS[sched])
            ax.set_title(label(size, mode), fontsize=9)
            ax.set_xlabel("create -> bound seen (s)", fontsize=8)
            ax.set_ylim(0, 1.01)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("fraction of pods")
        if axes[0][0].get_legend_handles_labels()[0]:
            axes[0][0].legend(fontsize=8)
        save(fig, "latency_cdf.png")

        # Pods bound over time against pods created: is creation or scheduling the limit?
        fig, axes = plt.subplots(
            1, len(tp_panels), figsize=(3.6 * len(tp_panels), 3.4), squeeze=False
        )
        for ax, (size, mode) in zip(axes[0], tp_panels, strict=True):
            for sched in H.SCHEDULERS:
                run = H.find_run(
                    runs, scenario="throughput", size=size, qps_mode=mode, scheduler=sched
                )
                if not run:
                    continue
                for key, style in (("bound_curve", "-"), ("created_curve", ":")):
                    curve = run.get(key) or []
                    if curve:
                        what = "bound" if key == "bound_curve" else "created"
                        ax.plot(
                            [0.0] + [c[0] for c in curve],
                            [0] + [c[1] for c in curve],
                            style,
                            color=COLORS[sched],
                            label=f"{sched} {what}",
                        )
            ax.set_title(label(size, mode), fontsize=9)
            since = "the scheduler started" if mode == "backlog" else "the first create"
            ax.set_xlabel(f"seconds since {since}", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("pods")
        axes[0][0].legend(fontsize=7)
        save(fig, "throughput_timeline.png")

    # Preemption completion over time.
    pre_panels = panels("preemption")
    if pre_panels:
        fig, axes = plt.subplots(
            1, len(pre_panels), figsize=(3.8 * len(pre_panels), 3.4), squeeze=False
        )
        for ax, (size, mode) in zip(axes[0], pre_panels, strict=True):
            arrivals_drawn = False
            for sched in H.SCHEDULERS:
                run = H.find_run(
                    runs, scenario="preemption", size=size, qps_mode=mode, scheduler=sched
                )
                if not run:
                    continue
                curve = run.get("bound_curve") or []
                if curve:
                    ax.step(
                        [0.0] + [c[0] for c in curve],
                        [0] + [c[1] for c in curve],
                        where="post",
                        label=sched,
                        color=COLORS[sched],
                    )
                arrivals = run.get("arrival_curve") or []
                if arrivals and not arrivals_drawn:
                    ax.plot(
                        [c[0] for c in arrivals],
                        [c[1] for c in arrivals],
                        "--",
                        color="gray",
                        linewidth=0.8,
                        label="created",
                    )
                    arrivals_drawn = True
            nodes = {
                r.get("nodes") for r in runs if r["size"] == size and r["scenario"] == "preemption"
            }
            nodes.discard(None)
            mode_text = H.QPS_MODE_SHORT.get(mode, mode)
            ax.set_title(f"{size} ({', '.join(map(str, nodes))} nodes), {mode_text}", fontsize=9)
            ax.set_xlabel("seconds since the first preemptor", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("preemptors bound")
        axes[0][0].legend(fontsize=8)
        save(fig, "preemption.png")

    # Peak RSS per run.
    mem = [r for r in runs if r.get("vmhwm_kib")]
    if mem:
        keys = list(dict.fromkeys((r["scenario"], r["size"], r["qps_mode"]) for r in mem))
        fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(keys)), 3.8))
        width = 0.38
        for k, sched in enumerate(H.SCHEDULERS):
            values = []
            for scenario, size, mode in keys:
                run = H.find_run(mem, scenario=scenario, size=size, qps_mode=mode, scheduler=sched)
                values.append(((run or {}).get("vmhwm_kib") or 0) / 1024)
            xs = [i + (k - 0.5) * width for i in range(len(keys))]
            bars = ax.bar(xs, values, width, label=sched, color=COLORS[sched])
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"{s}\n{z}\n{m}" for s, z, m in keys], fontsize=7)
        ax.set_ylabel("peak RSS, VmHWM summed over the process tree (MiB)", fontsize=8)
        ax.set_title("Scheduler memory")
        ax.legend(fontsize=8)
        save(fig, "memory.png")

    profile = results.get("profile") or {}
    if profile.get("self"):
        rows = list(reversed(profile["self"][:12]))
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
        ax.barh([r["function"][:90] for r in rows], [r["percent"] for r in rows], color="#ff7f0e")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("% of samples (self)")
        ax.set_title("py-scheduler hot spots (largest throughput run)", fontsize=9)
        save(fig, "profile_top.png")
    return written


def write_report(results: dict[str, Any], out_dir: Path) -> None:
    results["ratios"] = H.compute_ratios(results.get("runs") or [])
    (out_dir / "results.json").write_text(H.dump_results(results))
    (out_dir / "results.md").write_text(H.render_markdown(results))
    try:
        names = write_plots(results, out_dir)
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no plots")
        names = []
    log(f"wrote {out_dir / 'results.md'}, results.json, {', '.join(names) or 'no plots'}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _latency_by_class(bound: Mapping[str, PodRecord]) -> dict[str, Any]:
    """The Deployments' client latency (appearance to bound) per PriorityClass: pods are
    named ``dep-<index>-<rs>-<id>`` and Deployment ``index`` has class ``index % 3``."""
    by: dict[str, list[float]] = {name: [] for name, _ in DEPLOYMENT_CLASSES}
    for name, r in bound.items():
        if not (r.bound and r.added):
            continue
        index = int(name.split("-")[1])
        by[DEPLOYMENT_CLASSES[index % len(DEPLOYMENT_CLASSES)][0]].append(r.bound - r.added)
    return {name: H.summarize(values) for name, values in by.items()}


def _config_field(text: str) -> tuple[str, Any]:
    """--py-config / --kube-config: ``FIELD=VALUE``, the value read as YAML
    (``asyncPreemption=false``); a dotted FIELD names a nested one
    (``clientConnection.contentType=application/json``)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or "" in name.strip().split("."):
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE, got {text!r}")
    try:
        return name.strip(), yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(f"{name}: the value is not YAML: {e}") from None


def set_fields(config: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Each ``--py-config`` / ``--kube-config`` field set in a scheduler's configuration, a
    dotted name in the mappings it names (made where missing)."""
    for dotted, value in fields.items():
        *parents, last = dotted.split(".")
        at = config
        for key in parents:
            inner = at.setdefault(key, {})
            if not isinstance(inner, dict):
                raise SystemExit(f"--py-config/--kube-config {dotted}: {key} is not a mapping")
            at = inner
        at[last] = value


def _cores(text: str) -> float:
    """--scheduler-cpus: 0 (no limit) or a CPU limit cfs_bandwidth accepts."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of cores, got {text!r}") from None
    if value == 0:
        return 0.0
    try:
        H.cfs_bandwidth(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--size",
        type=size_names,
        default="small",
        help=f"{', '.join(SIZES)}, a comma-separated list, both (small,large) or all",
    )
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / "latest"))
    ap.add_argument(
        "--scenarios",
        default="throughput,deployments,preemption",
        help="throughput, deployments, preemption, dra, dra-extended (comma-separated; the "
        "dra ones run with --modes backlog only)",
    )
    ap.add_argument(
        "--modes",
        type=mode_names,
        default="defaults,equal,backlog",
        help="client QPS passes: defaults (50 QPS, pods paced), equal (5000 QPS, pods as fast "
        "as the client can), backlog (throughput only: every pod created before the "
        "scheduler starts)",
    )
    ap.add_argument(
        "--schedulers",
        type=scheduler_names,
        default="kube,py",
        help="kube, py or both (comma-separated)",
    )
    ap.add_argument(
        "--repeat",
        type=_positive_int,
        default=1,
        help="run each pair N times, alternating who goes first; ratios use the medians",
    )
    ap.add_argument(
        "--paced-repeat",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run each pair at the shipped defaults at least N times (their p99s are decided "
        "by when the rate limiter's schedule starts, which varies by tens of ms from run to run)",
    )
    ap.add_argument(
        "--unthrottled-repeat",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run each throughput pair with the equal client or a backlog at least N times "
        "(one pair's ratio moves by a third from run to run on 2 cores)",
    )
    ap.add_argument("--preemption-rate", type=float, default=10.0, help="preemptors per second")
    ap.add_argument("--client-threads", type=int, default=4, help="threads creating objects")
    ap.add_argument(
        "--paced-rate",
        type=float,
        default=60.0,
        help="throughput at the shipped defaults: create pods at this many per second "
        "(0: as fast as the client can), so that both schedulers see the same arrivals",
    )
    ap.add_argument("--timeout", type=float, default=0.0, help="per run (0: from the size)")
    ap.add_argument("--kwok-delete-delay", default="1s", help="cap on Terminating (kwok)")
    ap.add_argument("--core-json", help="benchmarks/core_bench.py's --json, to report as well")
    ap.add_argument("--profile", choices=("auto", "off"), default="auto")
    ap.add_argument("--py-spy", default="", help="py-spy executable (default: from PATH/venv)")
    ap.add_argument(
        "--py-source",
        default="worktree",
        help="py-scheduler's code: the work tree (default) or a git revision (e.g. HEAD) "
        "extracted to a snapshot, so that edits made during a long run do not change it",
    )
    ap.add_argument(
        "--py-config",
        type=_config_field,
        action="append",
        default=[],
        metavar="FIELD=YAML",
        help="a field of py-scheduler's configuration for every py-scheduler run, e.g. "
        "apiCallOrder=Priority (dotted for a nested one; repeatable; recorded in each run)",
    )
    ap.add_argument(
        "--kube-config",
        type=_config_field,
        action="append",
        default=[],
        metavar="FIELD=YAML",
        help="a field of kube-scheduler's KubeSchedulerConfiguration for every kube-scheduler "
        "run, e.g. clientConnection.contentType=application/json (dotted for a nested one; "
        "repeatable; recorded in each run)",
    )
    ap.add_argument(
        "--py-deps",
        choices=("image", "dev"),
        default="image",
        help="py-scheduler's dependencies: image (default; a virtualenv of requirements.lock, "
        "the image's pinned runtime packages, built once under ~/.cache/py-scheduler) or dev "
        "(this virtualenv, with the development extras)",
    )
    ap.add_argument(
        "--fresh-nodes",
        action="store_true",
        help="delete the benchmark nodes and make new ones for every run (the default keeps "
        "them from run to run, emptied and checked Ready before each)",
    )
    ap.add_argument(
        "--kube-args",
        default="",
        help="extra kube-scheduler flags, e.g. '-v=6' (every API request in its log)",
    )
    ap.add_argument(
        "--scheduler-cpus",
        type=_cores,
        default=0.0,
        help="run the scheduler under test with this many cores' worth of CPU time (a cgroup "
        "v1 CFS quota), so that it is the bottleneck: pods/s per core (0: no limit)",
    )
    ap.add_argument(
        "--limit-main-only",
        action="store_true",
        help="with --scheduler-cpus: the quota holds the scheduler's main process only; its "
        "children (py-scheduler's event process) are moved out of it once the scheduler is "
        "ready, as on a many-core machine they have cores of their own",
    )
    ap.add_argument("--state-dir", help="reuse this control plane state dir (kept running)")
    ap.add_argument("--keep-cluster", action="store_true", help="do not stop the control plane")
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="first wait (up to 10 min) until the 1-minute load average is below this",
    )
    ap.add_argument("--replot", metavar="DIR", help="only re-render results.md and plots of DIR")
    ap.add_argument(
        "--merge",
        metavar="DIR",
        action="append",
        default=[],
        help="with --out: one report from the results.json of several runs (repeat), e.g. "
        "the xl size measured in a run of its own",
    )
    args = ap.parse_args(argv)
    if args.limit_main_only and not args.scheduler_cpus:
        ap.error("--limit-main-only needs --scheduler-cpus")
    args.py_config = dict(args.py_config)
    args.kube_config = dict(args.kube_config)
    return args


def repeats_of(
    mode: str, repeat: int, paced_repeat: int, scenario: str = "", unthrottled_repeat: int = 1
) -> int:
    """How many times a pair runs in ``mode``: ``--repeat``; at the shipped defaults at least
    ``--paced-repeat``; the throughput scenario's unthrottled pairs (the equal client and the
    backlog) at least ``--unthrottled-repeat``."""
    if mode == "defaults":
        return max(repeat, paced_repeat)
    if scenario == "throughput":
        return max(repeat, unthrottled_repeat)
    return repeat


def mode_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """--modes: a comma-separated list of ``H.QPS_MODES``; unknown names are an error."""
    if not isinstance(text, str):
        return tuple(text)
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    for name in names:
        if name not in H.QPS_MODES:
            raise argparse.ArgumentTypeError(
                f"unknown mode {name!r} (known: {', '.join(H.QPS_MODES)})"
            )
    if not names:
        raise argparse.ArgumentTypeError("no mode given")
    return names


def scheduler_names(text: str) -> str:
    """--schedulers: a comma-separated list of ``kube`` and ``py``; anything else is an
    error naming the known ones (kept as the text, which the run records)."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    for name in names:
        if name not in ("kube", "py"):
            raise argparse.ArgumentTypeError(f"unknown scheduler {name!r} (known: kube, py)")
    if not names:
        raise argparse.ArgumentTypeError("no scheduler given")
    return ",".join(dict.fromkeys(names))


def size_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """--size: a name, a comma-separated list, or a group; unknown names are an error."""
    if not isinstance(text, str):
        return tuple(text)
    names: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        for name in SIZE_GROUPS.get(part, (part,)):
            if name not in SIZES:
                known = ", ".join([*SIZES, *SIZE_GROUPS])
                raise argparse.ArgumentTypeError(f"unknown size {name!r} (known: {known})")
            if name not in names:
                names.append(name)
    if not names:
        raise argparse.ArgumentTypeError("no size given")
    return tuple(names)


def wait_quiet(threshold: float, max_wait: float = 600.0) -> None:
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        log(f"load average {loadavg()} >= {threshold}: waiting for a quieter machine")
        time.sleep(30)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM, and SIGINT even when started in the background (where it is ignored), end the
    # run early but still write the report of what was measured and stop the control plane.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    if args.merge:
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        parts = [json.loads((Path(d) / "results.json").read_text()) for d in args.merge]
        merged: dict[str, Any] = {**parts[0], "runs": [], "parts": []}
        for d, part in zip(args.merge, parts, strict=True):
            merged["runs"] += part.get("runs") or []
            merged["parts"].append({"dir": str(d), "meta": part.get("meta")})
            for key in ("profile", "core"):
                if part.get(key):
                    merged[key] = part[key]
        if args.core_json and Path(args.core_json).is_file():
            merged["core"] = json.loads(Path(args.core_json).read_text())
        write_report(merged, out_dir)
        return 0
    if args.replot:
        out_dir = Path(args.replot)
        results = json.loads((out_dir / "results.json").read_text())
        if args.core_json and Path(args.core_json).is_file():
            results["core"] = json.loads(Path(args.core_json).read_text())
        write_report(results, out_dir)
        return 0
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("profile.folded", "profile.pstats"):
        (out_dir / stale).unlink(missing_ok=True)
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    bench = Bench(args, out_dir)
    code = 0
    try:
        bench.run()
    except KeyboardInterrupt:
        log("interrupted: reporting what was measured")
        code = 130
    except Exception as err:
        log(f"failed: {err!r}; reporting what was measured")
        code = 1
    write_report(bench.results, out_dir)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
