"""Fixtures for the e2e suite: a real API server with real controllers and kwok nodes.

By default a private local control plane (hack/localcluster.py) is started for the session, in
its own state dir under the cache, so a developer's `make cluster-up` cluster is left alone.
With E2E_KUBECONFIG set, that cluster is used instead and nothing is started; it must run kwok
managing nodes annotated kwok.x-k8s.io/node=fake (see docs/control-plane.md).

If the control plane cannot be started the tests fail; they never skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from tests.scripts import load_script

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]

T = TypeVar("T")


localcluster = load_script("hack/localcluster.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed e2e test's report gets the API's view of its namespace (pods, their nodes,
    phases, deletion and nomination, and recent events) and the schedulers it spawned: a
    rare failure must be explainable from the CI log alone."""
    report = yield
    if report.when == "call" and report.failed:
        describe = getattr(item, "funcargs", {}).get("kit")
        if describe is not None:
            try:
                report.sections.append(("namespace state", describe.describe()))
            except Exception as err:  # the report must not hide the test's own failure
                report.sections.append(("namespace state", f"unavailable: {err!r}"))
        spawned = getattr(item, "funcargs", {}).get("spawn_scheduler")
        for proc in getattr(spawned, "started", ()):
            report.sections.append((f"scheduler {proc.name} log", proc.tail(80)))
    return report


def wait_for(predicate: Callable[[], T], timeout: float, desc: str, interval: float = 0.2) -> T:
    """Poll predicate until it returns something truthy (returned); AssertionError on timeout.

    Exceptions from the predicate count as "not yet"; the last one is reported on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = predicate()
        except Exception as err:  # keep polling; report it if we time out
            last = err
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {desc} (last: {last!r})"
            )
        time.sleep(interval)


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@dataclass
class Cluster:
    """What the tests talk to: a kubeconfig, an ApiClient, and kwok-node helpers."""

    kubeconfig: str
    api: k8s.ApiClient
    local: Any = None  # localcluster.LocalCluster when we started it, else None
    created_nodes: list[str] = field(default_factory=list)

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    def create_nodes(
        self,
        count: int = 1,
        *,
        prefix: str | None = None,
        cpu: str = "4",
        memory: str = "32Gi",
        pods: int | str = 110,
        ephemeral_storage: str | None = "100Gi",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[str | Mapping[str, str]] | None = None,
        timeout: float = 90.0,
    ) -> list[str]:
        """Create kwok nodes (annotation kwok.x-k8s.io/node=fake) and wait until they are Ready
        and free of the not-ready taint. Works on any cluster whose kwok manages those nodes."""
        prefix = prefix or f"{unique('e2e')}-"
        parsed = [
            localcluster.parse_taint(t) if isinstance(t, str) else dict(t) for t in taints or []
        ]
        existing = [n.metadata.name for n in self.core.list_node().items]
        names: list[str] = localcluster.next_node_names(existing, prefix, count)
        for name in names:
            body = localcluster.node_manifest(
                name,
                cpu=cpu,
                memory=memory,
                pods=pods,
                ephemeral_storage=ephemeral_storage,
                labels=labels,
                taints=parsed,
            )
            self.core.create_node(body=body)
            self.created_nodes.append(name)

        def all_ready() -> bool:
            for name in names:
                node = self.api.sanitize_for_serialization(self.core.read_node(name))
                if not localcluster.node_is_ready(node):
                    return False
            return True

        wait_for(all_ready, timeout, f"kwok nodes {names} to be Ready and untainted")
        return names

    def delete_created_nodes(self, drain_timeout: float = 30.0) -> None:
        """Delete the nodes this session made, after giving their pods (in namespaces being
        deleted) a bounded chance to finish terminating, so none is left orphaned."""

        def drained() -> bool:
            for name in self.created_nodes:
                if self.core.list_pod_for_all_namespaces(
                    field_selector=f"spec.nodeName={name}"
                ).items:
                    return False
            return True

        try:
            wait_for(drained, drain_timeout, "pods on the e2e nodes to finish terminating")
        except AssertionError as err:  # best effort: pod GC removes orphans later
            print(f"warning: {err}", file=sys.stderr)
        for name in self.created_nodes:
            try:
                self.core.delete_node(name)
            except ApiException as err:
                if err.status != 404:
                    raise
        self.created_nodes.clear()


def _reap_stale_sessions(parent: Path) -> None:
    """Stop clusters of e2e sessions that died without teardown (state dir e2e/<pid>-<hex>)."""
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
        try:
            stale.down()
        except localcluster.ClusterError as err:
            print(f"could not clean stale e2e cluster {entry}: {err}", file=sys.stderr)
        stale.lock_path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    external = os.environ.get("E2E_KUBECONFIG", "").strip()
    if external:
        if not Path(external).is_file():
            pytest.fail(f"E2E_KUBECONFIG={external} is not a file", pytrace=False)
        api = k8s_config.new_client_from_config(config_file=external)
        handle = Cluster(kubeconfig=external, api=api)
        try:
            yield handle
        finally:
            handle.delete_created_nodes()
            api.close()
        return

    parent = localcluster.cache_root() / "e2e"
    _reap_stale_sessions(parent)
    state_dir = parent / f"{os.getpid()}-{secrets.token_hex(3)}"
    # die_with_parent: if pytest is killed outright, the components go with it.
    local = localcluster.LocalCluster(state_dir, die_with_parent=True)
    started = time.monotonic()
    failure = None
    try:
        info = local.up(nodes=0)
    except (localcluster.ClusterError, OSError) as err:
        failure = str(err)
    if failure is not None:  # outside the except block: no chained traceback
        with_ci = " (CI=true)" if os.environ.get("CI") == "true" else ""
        pytest.fail(f"could not start the local control plane{with_ci}: {failure}", pytrace=False)
    print(
        f"\nlocal control plane up in {time.monotonic() - started:.1f}s; "
        f"kubeconfig {info.kubeconfig}, logs {info.log_dir}",
        file=sys.stderr,
    )
    api = k8s_config.new_client_from_config(config_file=str(info.kubeconfig))
    handle = Cluster(kubeconfig=str(info.kubeconfig), api=api, local=local)
    try:
        yield handle
    finally:
        api.close()
        if request.session.testsfailed:
            kept = keep_logs(info.log_dir, parent.parent / "e2e-logs" / state_dir.name)
            print(
                f"\n{request.session.testsfailed} e2e test(s) failed: control-plane logs kept "
                f"in {kept}",
                file=sys.stderr,
            )
        local.down()
        local.lock_path.unlink(missing_ok=True)


KEPT_LOG_SESSIONS = 3


def keep_logs(log_dir: Path, dest: Path) -> Path:
    """Copy a failed session's control-plane logs (apiserver, etcd, kcm, kwok) out of the
    state dir that teardown removes; only the newest KEPT_LOG_SESSIONS copies stay."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(log_dir, dest, dirs_exist_ok=True)
    older = sorted(dest.parent.iterdir(), key=lambda d: d.stat().st_mtime)[:-KEPT_LOG_SESSIONS]
    for d in older:
        shutil.rmtree(d, ignore_errors=True)
    return dest


@pytest.fixture(scope="session")
def kwok_node(cluster: Cluster) -> str:
    """One plain kwok node shared by tests that bind pods with spec.nodeName."""
    return cluster.create_nodes(1, prefix=f"{unique('e2e-shared')}-")[0]


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace (with its default service account, so pods are admitted); deleted
    after the test without waiting for the deletion to finish."""
    name = unique("e2e")
    core = cluster.core
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    wait_for(
        lambda: core.read_namespaced_service_account("default", name),
        30,
        f"service account {name}/default",
    )
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise


# The scheduler fixtures live in kit.py (which imports the names above); registering them
# here, once, keeps each session-scoped fixture a single instance for the whole suite.
# (Importing fixtures into several test modules would define one copy per module, and two
# copies of the shared scheduler would then schedule the same pods.)
from tests.e2e.kit import kit, py_scheduler, scheduler_workdir, spawn_scheduler  # noqa: E402

__all__ = ["Cluster", "kit", "py_scheduler", "scheduler_workdir", "spawn_scheduler", "wait_for"]
