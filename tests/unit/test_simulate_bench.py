"""benchmarks/simulate_bench.py still measures what it says: its dumps are inputs simulate
places, and its step timer (``--phases``) still runs against simulate's internals. Small
dumps only; no timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script

B = load_script("benchmarks/simulate_bench.py")


def test_a_bench_dump_is_read_and_every_pending_pod_placed(tmp_path: Path) -> None:
    objs = B.objects(4, 2, 3)
    kinds = [o["kind"] for o in objs]
    assert kinds.count("Node") == 4 and kinds.count("Pod") == 4 * 2 + 3
    for fmt in ("json", "yaml"):
        path = tmp_path / f"dump.{fmt}"
        B.write(path, objs, fmt)
        run = B.run_once(path, B.child_env(tmp_path / "pycache"))
        assert run["placed"] == 3, fmt


def test_the_child_caches_bytecode_outside_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = B.child_env(tmp_path / "pycache")
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")


def test_phases_time_every_step_of_a_simulation(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    B.write(path, B.objects(4, 2, 3), "json")
    steps = B.phases_once(path, B.child_env(tmp_path / "pycache"))
    assert list(steps) == ["import", "read_decode", "parse", "load", "schedule", "output"]
    assert all(isinstance(v, float) and v >= 0 for v in steps.values())
