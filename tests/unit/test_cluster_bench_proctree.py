"""benchmarks/cluster_bench.py's measures of a scheduler's process tree (py-scheduler starts
an event writer beside itself): CPU seconds and peak RSS summed over the tree, on a fake
/proc folder and on this machine's, and the record keys a run keeps. No cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.scripts import load_script

B = load_script("benchmarks/cluster_bench.py")

TICK = os.sysconf("SC_CLK_TCK")


def _process(
    root: Path,
    pid: int,
    *,
    ppid: int,
    ticks: tuple[int, int, int, int],
    children: dict[int, str] | None = None,
    vmhwm_kib: int | None = None,
) -> None:
    """/proc/<pid> as the helpers read it: stat with utime, stime, cutime, cstime = ``ticks``
    (a command name holding a space and a bracket, as real ones may), status with VmHWM,
    and task/<tid>/children for each thread in ``children`` (None: a kernel without
    CONFIG_PROC_CHILDREN)."""
    folder = root / str(pid)
    folder.mkdir(parents=True)
    utime, stime, cutime, cstime = ticks
    (folder / "stat").write_text(
        f"{pid} (py sched) x) S {ppid} {pid} {pid} 0 -1 4194304 10 0 0 0 "
        f"{utime} {stime} {cutime} {cstime} 20 0 1 0 100 0 0\n"
    )
    status = f"Name:\tpy\nPPid:\t{ppid}\n"
    if vmhwm_kib is not None:
        status += f"VmHWM:\t  {vmhwm_kib} kB\n"
    (folder / "status").write_text(status)
    for tid, text in (children or {}).items():
        (folder / "task" / str(tid)).mkdir(parents=True)
        (folder / "task" / str(tid) / "children").write_text(text)


def _fake_tree(root: Path, *, children_files: bool) -> None:
    """Scheduler 100 (two threads; 600 ticks of its own, 40 of children it reaped) with
    a live child 200 (50 + 5 reaped) whose child 300 (10) is live too, and an unrelated
    400. Thread 101 lists child 999, whose /proc folder is gone by the time it is read."""

    def kids(tid_text: dict[int, str]) -> dict[int, str] | None:
        return tid_text if children_files else None

    _process(
        root,
        100,
        ppid=1,
        ticks=(500, 100, 30, 10),
        children=kids({100: "200 ", 101: "999 "}),
        vmhwm_kib=100_000,
    )
    _process(
        root, 200, ppid=100, ticks=(40, 10, 5, 0), children=kids({200: "300 "}), vmhwm_kib=20_000
    )
    _process(root, 300, ppid=200, ticks=(7, 3, 0, 0), children=kids({300: ""}), vmhwm_kib=3_000)
    _process(root, 400, ppid=1, ticks=(9000, 0, 0, 0), children=kids({400: ""}), vmhwm_kib=9_999)
    (root / "self").mkdir()  # not a pid: the fallback's scan passes it by


@pytest.mark.parametrize("children_files", [True, False], ids=["children files", "ppid scan"])
def test_the_tree_counts_live_descendants_and_reaped_children(
    tmp_path: Path, children_files: bool
) -> None:
    _fake_tree(tmp_path, children_files=children_files)
    assert sorted(B.tree_pids(100, proc_root=tmp_path)) == (
        [100, 200, 300, 999] if children_files else [100, 200, 300]
    )
    # 100: 500 + 100 own + 30 + 10 reaped; 200: 40 + 10 + 5; 300: 7 + 3; 999 skipped.
    assert B.tree_cpu_seconds(100, proc_root=tmp_path) == pytest.approx(705 / TICK)
    assert B.proc_cpu_seconds(100, proc_root=tmp_path) == pytest.approx(600 / TICK)
    # A subtree counts from where it starts.
    assert B.tree_cpu_seconds(200, proc_root=tmp_path) == pytest.approx(65 / TICK)


def test_a_child_whose_stat_vanished_is_skipped(tmp_path: Path) -> None:
    _fake_tree(tmp_path, children_files=True)
    (tmp_path / "300" / "stat").unlink()  # exited between the listing and the read
    assert B.tree_cpu_seconds(100, proc_root=tmp_path) == pytest.approx(695 / TICK)


def test_a_process_that_is_gone_has_no_figures(tmp_path: Path) -> None:
    _fake_tree(tmp_path, children_files=True)
    for measure in (B.tree_cpu_seconds, B.proc_cpu_seconds, B.tree_vmhwm_kib):
        assert measure(12345, proc_root=tmp_path) is None
    assert B.tree_pids(12345, proc_root=tmp_path) == [12345]


def test_vmhwm_sums_the_live_tree(tmp_path: Path) -> None:
    _fake_tree(tmp_path, children_files=False)
    assert B.tree_vmhwm_kib(100, proc_root=tmp_path) == 123_000
    assert B.proc_status_kib(100, "VmHWM", proc_root=tmp_path) == 100_000
    # A zombie child (no memory left, so no VmHWM line) adds nothing.
    (tmp_path / "300" / "status").write_text("Name:\tpy\nState:\tZ (zombie)\n")
    assert B.tree_vmhwm_kib(100, proc_root=tmp_path) == 120_000


def _started(argv: list[str], *, members: int) -> subprocess.Popen[bytes]:
    """``argv`` started in its own session, once its tree has ``members`` processes."""
    proc = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 10
    while len(B.tree_pids(proc.pid)) < members:
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.02)
    return proc


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the session we started: the shell and its sleep
    proc.wait(10)


def test_a_scheduler_process_measures_its_tree_on_this_machine(tmp_path: Path) -> None:
    sched = B.PySchedulerProc(tmp_path, tmp_path / "kubeconfig", None, None, None)
    assert sched.cpu_seconds() is None and sched.vmhwm_kib() is None
    sched.proc = _started(["sh", "-c", "sleep 30 & wait"], members=2)
    try:
        pids = B.tree_pids(sched.pid)
        assert pids[0] == sched.pid and len(pids) == 2
        mark = sched.usage_start()
        assert isinstance(mark, B.CpuMark) and mark.tree >= mark.main >= 0.0
        tree_kib, main_kib = sched.vmhwm_kib(), sched.main_vmhwm_kib()
        assert main_kib is not None and tree_kib is not None and tree_kib > main_kib
    finally:
        _kill_session(sched.proc)


class _StubProc:
    """What ``_record_usage`` asks of a scheduler: fixed readings, no process."""

    def __init__(self, tree: float | None, main: float | None) -> None:
        self.tree, self.main = tree, main

    def vmhwm_kib(self) -> int | None:
        return 150_000

    def main_vmhwm_kib(self) -> int | None:
        return 120_000

    def cpu_seconds(self) -> float | None:
        return self.tree

    def main_cpu_seconds(self) -> float | None:
        return self.main

    def limit_usage(self) -> dict[str, Any]:
        return {}


def test_a_run_records_the_tree_and_the_main_process() -> None:
    record: dict[str, Any] = {}
    B._record_usage(record, _StubProc(13.0, 11.0), B.CpuMark(tree=4.0, main=3.0), 5000)
    assert {k: v for k, v in record.items() if k != "loadavg_after"} == {
        "vmhwm_kib": 150_000,
        "main_vmhwm_kib": 120_000,
        "cpu_seconds": 9.0,
        "cpu_ms_per_pod": 1.8,
        "main_cpu_seconds": 8.0,
        "main_cpu_ms_per_pod": 1.6,
    }
    # Preemption keeps no per-pod CPU; a scheduler already gone keeps no CPU.
    record = {}
    B._record_usage(record, _StubProc(13.0, None), B.CpuMark(tree=4.0, main=3.0), pods=None)
    assert record["cpu_seconds"] == 9.0 and record["main_cpu_seconds"] is None
    assert "cpu_ms_per_pod" not in record and "main_cpu_ms_per_pod" not in record
