"""benchmarks/cluster_bench.py's runs: --repeat for every pair, --paced-repeat for the
pairs at the shipped defaults only, --unthrottled-repeat for the throughput scenario's equal
and backlog pairs only; the control plane's CPU each run reads. No cluster."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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


def test_unthrottled_repeat_applies_to_the_throughput_scenarios_other_modes_only() -> None:
    args = B.parse_args(["--unthrottled-repeat", "3"])
    assert (args.repeat, args.paced_repeat, args.unthrottled_repeat) == (1, 1, 3)

    def runs(mode: str, scenario: str) -> int:
        return B.repeats_of(mode, args.repeat, args.paced_repeat, scenario, args.unthrottled_repeat)

    assert runs("equal", "throughput") == 3
    assert runs("backlog", "throughput") == 3
    assert runs("defaults", "throughput") == 1
    assert runs("equal", "deployments") == 1
    assert runs("equal", "preemption") == 1
    # --repeat stays a floor for every pair.
    assert B.repeats_of("backlog", 5, 1, "throughput", 3) == 5
    assert B.repeats_of("defaults", 2, 3, "throughput", 4) == 3
    assert B.parse_args([]).unthrottled_repeat == 1


@pytest.mark.parametrize("flag", ["--paced-repeat", "--unthrottled-repeat"])
@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_a_repeat_that_is_not_a_positive_count_is_refused(
    flag: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        B.parse_args([flag, bad])
    assert flag in capsys.readouterr().err


def test_the_schedulers_are_named_kube_and_py_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert B.parse_args([]).schedulers == "kube,py"
    assert B.parse_args(["--schedulers", " py, py,"]).schedulers == "py"
    for bad, said in (("py-scheduler", "unknown scheduler 'py-scheduler'"), (",", "no scheduler")):
        with pytest.raises(SystemExit):
            B.parse_args(["--schedulers", bad])
        err = capsys.readouterr().err
        assert "--schedulers" in err and said in err


class _State:
    def __init__(self, components: dict[str, object]) -> None:
        self.components = components

    def read_state(self) -> dict[str, object]:
        return {"components": self.components}


def test_the_control_plane_cpu_is_read_from_the_cluster_state(tmp_path: Path) -> None:
    """Each named component's CPU seconds by the pid in the cluster's state; a component
    that is gone or not listed is left out, as is any other component."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    bench = B.Bench(B.parse_args([]), tmp_path)
    assert bench.control_plane_cpu() == {}  # no cluster yet
    bench.local = _State(
        {"kube-apiserver": {"pid": os.getpid()}, "etcd": {"pid": gone.pid}, "kwok": {"pid": 1}}
    )
    cpu = bench.control_plane_cpu()
    assert list(cpu) == ["kube-apiserver"] and cpu["kube-apiserver"] > 0


def test_the_modes_default_to_all_three_and_a_backlog_repeats_like_the_equal_client() -> None:
    args = B.parse_args([])
    assert args.modes == ("defaults", "equal", "backlog")
    assert B.parse_args(["--modes", "backlog, equal,backlog"]).modes == ("backlog", "equal")
    assert B.repeats_of("backlog", 2, 3) == 2
    bench = B.Bench(args, Path("/nonexistent"))
    # The shipped client at the defaults; the equal client's 5000 QPS for the other two.
    assert [bench._qps(m) for m in args.modes] == [None, B.EQUAL_QPS, B.EQUAL_QPS]


@pytest.mark.parametrize("bad", ["fast", "defaults,fast", ","])
def test_an_unknown_mode_is_refused_by_name(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        B.parse_args(["--modes", bad])
    err = capsys.readouterr().err
    assert "--modes" in err
    assert ("'fast'" in err) if "fast" in bad else ("no mode given" in err)


def _pod(name: str, node: str | None = None) -> dict[str, object]:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"nodeName": node}}


def test_the_watch_calls_a_groups_first_bound_hook_once() -> None:
    """A backlog run reads the scheduler's CPU at the first bind the watch sees: the hook
    runs at that bind, in the watch's thread, and never again."""
    watch = B.PodWatch(None, "ns")  # type: ignore[arg-type]
    calls: list[int] = []
    watch.on_first_bound["tp"] = lambda: calls.append(watch.count("tp", "bound"))
    watch._record("ADDED", _pod("tp-00000"), 1.0)
    watch._record("ADDED", _pod("warmup-0", "n1"), 1.5)  # another group's bind
    assert calls == []
    watch._record("MODIFIED", _pod("tp-00000", "n1"), 2.0)
    watch._record("ADDED", _pod("tp-00001", "n2"), 3.0)
    assert calls == [1]
    assert watch.on_first_bound == {}


def test_py_scheduler_runs_in_another_virtualenv_with_its_code_on_the_path(
    tmp_path: Path,
) -> None:
    """--py-deps image: the runtime virtualenv's interpreter runs ``-m scheduler`` with the
    work tree (or a --py-source snapshot) on PYTHONPATH; dev: this virtualenv, as before."""
    assert B.parse_args([]).py_deps == "image"
    kubeconfig = tmp_path / "kubeconfig"
    python = tmp_path / "venv" / "bin" / "python"
    proc = B.PySchedulerProc(tmp_path / "a", kubeconfig, None, python=python)
    assert proc.argv()[:3] == [str(python), "-m", "scheduler"]
    assert proc.argv()[3:5] == ["run", "--kubeconfig"]
    assert proc.env is not None and proc.env["PYTHONPATH"] == str(B.REPO_ROOT)
    snapshot = tmp_path / "snap"
    proc = B.PySchedulerProc(tmp_path / "b", kubeconfig, None, source=snapshot, python=python)
    assert proc.argv()[0] == str(python)
    assert proc.env is not None and proc.env["PYTHONPATH"] == str(snapshot)
    profiled = B.PySchedulerProc(tmp_path / "c", kubeconfig, None, tmp_path / "p", python=python)
    assert profiled.argv()[:3] == [str(python), "-m", "cProfile"]
    dev = B.PySchedulerProc(tmp_path / "d", kubeconfig, None)
    assert dev.env is None and str(python) not in dev.argv()


def test_the_runtime_virtualenv_is_built_once_per_lock_file_and_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built beside its final place (an interrupted build is never used), from the lock file
    alone with wheels only, checked, then reused until the lock file changes."""
    calls: list[list[str]] = []

    def run(argv: list[str], **_: object) -> None:
        calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            Path(argv[3], "bin").mkdir(parents=True)

    monkeypatch.setattr(B.subprocess, "run", run)
    lock = tmp_path / "requirements.lock"
    lock.write_text("orjson==3.13.0\n")
    python = B.runtime_venv(lock, tmp_path / "cache")
    assert python.parent.parent.parent == tmp_path / "cache" / "bench-venvs"
    assert (python.parent.parent / ".complete").is_file()
    assert [c[2] for c in calls] == ["venv", "pip", "pip"]
    install = calls[1]
    assert "--only-binary=:all:" in install and install[-2:] == ["--requirement", str(lock)]
    assert calls[2][-1] == "check"
    assert list((tmp_path / "cache" / "bench-venvs").iterdir()) == [python.parent.parent]
    calls.clear()
    assert B.runtime_venv(lock, tmp_path / "cache") == python and calls == []
    lock.write_text("orjson==3.14.0\n")
    assert B.runtime_venv(lock, tmp_path / "cache") != python and len(calls) == 3


class _NodesApi:
    """The calls fresh_nodes makes, against an in-memory set of nodes and bound pods: a
    node is Ready as soon as it is made unless listed in ``not_ready``."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, object]] = {}
        self.bound: dict[str, str] = {}  # pod name -> node name
        self.not_ready: set[str] = set()
        self.made: list[str] = []
        self.deleted: list[str] = []

    def request(
        self, method: str, path: str, body: dict[str, object] | None = None, **_: object
    ) -> tuple[int, dict[str, object]]:
        if method == "POST" and path == "/api/v1/nodes":
            assert body is not None
            meta = body["metadata"]
            assert isinstance(meta, dict)
            self.nodes[meta["name"]] = body
            self.made.append(meta["name"])
            return 201, body
        if method == "DELETE" and path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[1]
            self.deleted.append(name)
            return (200, {}) if self.nodes.pop(name, None) else (404, {})
        raise AssertionError(f"unexpected {method} {path}")

    def list_all(self, path: str, **query: str) -> tuple[list[dict[str, object]], str]:
        if path == "/api/v1/pods":
            assert query == {"fieldSelector": "spec.nodeName!="}
            return [{"spec": {"nodeName": n}} for n in self.bound.values()], "1"
        assert path == "/api/v1/nodes"
        key, value = query["labelSelector"].split("=")
        out = []
        for name, node in self.nodes.items():
            meta = node["metadata"]
            assert isinstance(meta, dict)
            if meta["labels"].get(key) != value:
                continue
            ready = "False" if name in self.not_ready else "True"
            out.append({**node, "status": {"conditions": [{"type": "Ready", "status": ready}]}})
        return out, "1"


def _node_bench(tmp_path: Path, *argv: str) -> tuple[object, _NodesApi]:
    bench = B.Bench(B.parse_args(["--client-threads", "2", *argv]), tmp_path)
    api = _NodesApi()
    bench.api = api
    return bench, api


def test_the_nodes_are_kept_from_run_to_run_and_resized(tmp_path: Path) -> None:
    """Made by the first run and kept by the next: a run that needs fewer deletes the
    surplus, one that needs more makes only the missing ones."""
    bench, api = _node_bench(tmp_path)
    api.nodes["stale"] = {"metadata": {"name": "stale", "labels": {"bench": B.BENCH_LABEL}}}
    first = bench.fresh_nodes(4, "r1")
    assert first == [f"r1-n{i:05d}" for i in range(4)]
    assert api.deleted == ["stale"] and sorted(api.made) == first  # an older invocation's node went
    api.made.clear()
    api.deleted.clear()
    assert bench.fresh_nodes(4, "r2") == first and api.made == [] and api.deleted == []
    assert bench.fresh_nodes(2, "r3") == first[:2]
    assert sorted(api.deleted) == first[2:] and api.made == []
    assert bench.fresh_nodes(3, "r4") == [*first[:2], "r1-n00002"]
    assert api.made == ["r1-n00002"]
    assert sorted(api.nodes) == [*first[:2], "r1-n00002"]


@pytest.mark.parametrize("why", ["a pod bound", "a node not Ready", "--fresh-nodes"])
def test_nodes_that_cannot_be_kept_are_all_made_anew(tmp_path: Path, why: str) -> None:
    """A pod still bound to a kept node (in any namespace), a kept node that is not Ready,
    or --fresh-nodes: every benchmark node deleted and a new set made for the run."""
    bench, api = _node_bench(tmp_path, *(["--fresh-nodes"] if why == "--fresh-nodes" else []))
    first = bench.fresh_nodes(3, "r1")
    if why == "a pod bound":
        api.bound["left-over"] = first[1]
    elif why == "a node not Ready":
        api.not_ready.add(first[2])
    api.made.clear()
    second = bench.fresh_nodes(3, "r2")
    assert second == [f"r2-n{i:05d}" for i in range(3)] and sorted(api.made) == second
    assert sorted(api.deleted) == first and sorted(api.nodes) == second


def test_nodes_not_ready_in_time_fail_the_run_and_are_kept_once_ready(tmp_path: Path) -> None:
    """A set whose nodes did not all get Ready in time fails its run and stays; the next run
    keeps it if they are all Ready by then (else it makes a new set, as above)."""
    bench, api = _node_bench(tmp_path)
    api.not_ready.add("r1-n00001")
    with pytest.raises(RuntimeError, match="only 1/2 nodes Ready"):
        bench.fresh_nodes(2, "r1", timeout=0.0)
    api.not_ready.clear()
    api.made.clear()
    assert bench.fresh_nodes(2, "r2") == ["r1-n00000", "r1-n00001"] and api.made == []


class _NamespaceApi:
    """A namespace whose pods are gone and which the namespace controller takes ``gets``
    more GETs to remove after its DELETE."""

    def __init__(self, gets: int) -> None:
        self.gets = gets
        self.calls: list[str] = []

    def request(self, method: str, path: str, *_: object, **__: object) -> tuple[int, object]:
        self.calls.append(f"{method} {path}")
        if method == "DELETE":
            return 200, {}
        assert method == "GET" and path == "/api/v1/namespaces/bench-r1"
        self.gets -= 1
        return (404, {}) if self.gets < 0 else (200, {})

    def list_all(self, path: str, **_: str) -> tuple[list[dict[str, object]], str]:
        assert path == "/api/v1/namespaces/bench-r1/pods"
        return [], "1"


def test_the_next_run_starts_after_the_last_ones_namespace_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """drop_namespace returns once the namespace is gone (its controller's deletions of the
    run's Events and the rest would otherwise fall into the next run's control-plane CPU);
    one still there after the timeout is logged, not an error."""
    monkeypatch.setattr(B.time, "sleep", lambda _s: None)
    bench = B.Bench(B.parse_args([]), tmp_path)
    api = _NamespaceApi(gets=3)
    bench.api = api
    bench.drop_namespace("bench-r1")
    assert (
        api.calls
        == ["DELETE /api/v1/namespaces/bench-r1"] + ["GET /api/v1/namespaces/bench-r1"] * 4
    )
    api = _NamespaceApi(gets=10**9)
    bench.api = api
    bench.drop_namespace("bench-r1", timeout=0.0)
    assert "namespace bench-r1 still there after 0s" in capsys.readouterr().err


def test_py_config_fields_reach_py_scheduler_s_configuration(tmp_path: Path) -> None:
    args = B.parse_args(["--py-config", "apiCallOrder=Priority", "--py-config", "httpPort=0"])
    assert args.py_config == {"apiCallOrder": "Priority", "httpPort": 0}
    assert B.parse_args([]).py_config == {}
    for bad in ("apiCallOrder", "=Priority", "x=[1"):
        with pytest.raises(SystemExit):
            B.parse_args(["--py-config", bad])
    proc = B.PySchedulerProc(
        tmp_path, tmp_path / "kubeconfig", 50, extra={"apiCallOrder": "Priority"}
    )
    import yaml

    written = yaml.safe_load(proc.config_path.read_text())
    assert written["apiCallOrder"] == "Priority"
    assert written["clientConnection"] == {"qps": 50, "burst": 50}


def test_kube_config_fields_reach_kube_scheduler_s_configuration_dotted(tmp_path: Path) -> None:
    args = B.parse_args(
        ["--kube-config", "clientConnection.contentType=application/json", "--kube-config", "a.b=1"]
    )
    assert args.kube_config == {"clientConnection.contentType": "application/json", "a.b": 1}
    assert B.parse_args([]).kube_config == {}
    for bad in ("clientConnection.=x", ".x=1", "a..b=1"):
        with pytest.raises(SystemExit):
            B.parse_args(["--kube-config", bad])
    proc = B.KubeSchedulerProc(
        tmp_path,
        tmp_path / "kubeconfig",
        50,
        tmp_path,
        extra={"clientConnection.contentType": "application/json", "percentageOfNodesToScore": 0},
    )
    import yaml

    written = yaml.safe_load(proc.config_path.read_text())
    assert written["clientConnection"] == {
        "kubeconfig": str(tmp_path / "kubeconfig"),
        "qps": 50,
        "burst": 50,
        "contentType": "application/json",
    }
    assert written["percentageOfNodesToScore"] == 0
    # a dotted field under one that is not a mapping: a clear stop, nothing overwritten
    with pytest.raises(SystemExit, match=r"leaderElection\.leaderElect\.x: leaderElect"):
        B.KubeSchedulerProc(
            tmp_path, tmp_path / "kc", None, tmp_path, extra={"leaderElection.leaderElect.x": 1}
        )


def test_deployments_latency_is_kept_per_priority_class() -> None:
    pods = {
        "dep-000-abc-x1": B.PodRecord(added=10.0, bound=11.0),  # index 0: low
        "dep-003-abc-x2": B.PodRecord(added=10.0, bound=13.0),  # index 3: low
        "dep-002-abc-x3": B.PodRecord(added=10.0, bound=10.5),  # index 2: high
        "dep-001-abc-x4": B.PodRecord(added=10.0, bound=None),  # not bound: not counted
    }
    by = B._latency_by_class(pods)
    assert list(by) == [name for name, _ in B.DEPLOYMENT_CLASSES]
    assert by["bench-dep-low"]["count"] == 2 and by["bench-dep-low"]["max"] == 3.0
    assert by["bench-dep-mid"]["count"] == 0
    assert by["bench-dep-high"]["p50"] == 0.5
