"""benchmarks/cluster_bench.py's CPU limit (--scheduler-cpus) on a stand-in cgroup folder:
the files it writes, the process it starts inside it (the same pid after exec), its
counters, and the errors that name what is missing. No cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.scripts import load_script

B = load_script("benchmarks/cluster_bench.py")


def _fake_controller(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.cfs_quota_us").write_text("-1\n")
    return root


def test_the_limit_writes_period_and_quota_and_runs_the_command_inside(tmp_path: Path) -> None:
    limit = B.CpuLimit(0.25, root=_fake_controller(tmp_path / "cpu"))
    assert (limit.path / "cpu.cfs_period_us").read_text() == "10000\n"
    assert (limit.path / "cpu.cfs_quota_us").read_text() == "2500\n"
    # The shell joins the group and execs: the pid written is the command's own.
    out = subprocess.run(
        limit.wrap(["sh", "-c", "echo $$"]), capture_output=True, text=True, check=True
    ).stdout
    assert (limit.path / "cgroup.procs").read_text().strip() == out.strip()
    (limit.path / "cpu.stat").write_text("nr_periods 200\nnr_throttled 150\nthrottled_time 9\n")
    assert limit.stat() == {"nr_periods": 200, "nr_throttled": 150, "throttled_time": 9}


def test_a_machine_without_the_controller_gets_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"cgroup v1 cpu controller at .*cpu\.cfs_quota_us"):
        B.CpuLimit(0.5, root=tmp_path)


def test_the_flag_takes_a_positive_number_or_zero() -> None:
    assert B.parse_args(["--scheduler-cpus", "0.2"]).scheduler_cpus == 0.2
    assert B.parse_args([]).scheduler_cpus == 0.0
    for bad in ("-1", "many", "inf"):
        with pytest.raises(SystemExit):
            B.parse_args(["--scheduler-cpus", bad])


def test_a_scheduler_without_a_limit_reports_none(tmp_path: Path) -> None:
    proc = B.PySchedulerProc(tmp_path, tmp_path / "kubeconfig", None, None, None)
    assert proc.limit_usage() == {}


def test_main_only_moves_the_children_out_of_the_quota(tmp_path: Path) -> None:
    """--limit-main-only: the scheduler's descendants are written to the root cgroup (here a
    stand-in /proc: pid 10 with child 11 and grandchild 12); without it nothing moves."""
    proc_root = tmp_path / "proc"
    for pid, ppid in ((10, 1), (11, 10), (12, 11)):
        (proc_root / str(pid)).mkdir(parents=True)
        fields = ["S", str(ppid)] + ["0"] * 20
        (proc_root / str(pid) / "stat").write_text(f"{pid} (python) {' '.join(fields)}\n")
    root = _fake_controller(tmp_path / "cpu")
    limit = B.CpuLimit(0.1, root=root, main_only=True)
    assert limit.release_children(10, proc_root=proc_root) == [11, 12]
    # The stand-in cgroup.procs is a plain file: it holds the last pid written.
    assert (root / "cgroup.procs").read_text() == "12\n"
    tree = B.CpuLimit(0.1, root=root)
    assert tree.release_children(10, proc_root=proc_root) == []
    with pytest.raises(SystemExit):
        B.parse_args(["--limit-main-only"])
    assert B.parse_args(["--scheduler-cpus", "0.1", "--limit-main-only"]).limit_main_only
