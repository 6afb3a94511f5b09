"""The benchmark harness (``make bench``, pytest-benchmark): a missed goal fails the run, the report renders
pytest-benchmark's JSON as the README table, and every benchmark module imports and covers what it should.

No benchmark is run here (``make test`` stays fast and timings on a shared machine prove nothing): the explorers'
``compute`` at every control's range is exercised by test_widgets.py, the planner's results by test_planner.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from benchmarks import report

ROOT = Path(__file__).resolve().parent.parent


# A pytest of its own with pytest-benchmark as its only plugin: loading every installed one (nbval, hypothesis, …)
# took 2.2 s of each such run's 3 s.
BENCH_PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_benchmark.plugin"]


def _outside_xdist() -> dict:
    """This environment without pytest-xdist's worker variables (a pytest started from a worker of ``make test``
    (``-n 2``) would take itself for one and pytest-benchmark would switch its benchmarks off), and with no plugin
    loaded but the ones named (``BENCH_PYTEST``)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_a_missed_goal_fails_the_benchmark_run(tmp_path):
    shutil.copy(ROOT / "benchmarks" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "bench_fake.py").write_text(textwrap.dedent('''
        import time
        import pytest
        pytestmark = pytest.mark.benchmark(timer=time.process_time, min_rounds=2, max_time=0.05)

        def busy(seconds):
            t0 = time.process_time()
            while time.process_time() - t0 < seconds:
                pass

        def test_meets_its_goal(measure):
            measure(lambda: busy(0.001), what="quick", goal_s=1.0)

        def test_misses_its_goal(measure):
            measure(lambda: busy(0.02), what="slow", goal_s=0.005)

        def test_no_goal(measure):
            measure(lambda: busy(0.001), what="information", goal_s=None)
    '''))
    out = tmp_path / "out.json"
    proc = subprocess.run([*BENCH_PYTEST, str(tmp_path / "bench_fake.py"),
                           f"--benchmark-json={out}", "-q", "--rootdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_outside_xdist())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 2 passed" in proc.stdout and "goal missed / 未达目标: slow" in proc.stdout
    data = json.loads(out.read_text())
    status = {b["extra_info"]["what"]: report.status(b) for b in data["benchmarks"]}
    assert status == {"quick": "pass", "slow": "FAIL", "information": "—"}  # the failed one is still reported
    assert data["benchmarks"][0]["extra_info"]["timer"] == "cpu"


def _bench(name, what, goal, median, **extra):
    return {"name": name, "fullname": f"benchmarks/bench_x.py::{name}", "stats": {"median": median},
            "extra_info": {"what": what, "goal_s": goal, **extra}, "options": {}}


def test_report_writes_the_table_and_keeps_the_make_test_row(tmp_path):
    machine_info = {"cpu": {"brand_raw": "Test CPU"}, "logical_cores": 2, "system": "Linux", "release": "6",
                    "python_version": "3.11.7", "torch": "2.13.0+cpu"}
    old = {"datetime": "2026-11-30T00:00:00", "machine_info": machine_info,
           "benchmarks": [_bench("test_make_test", "whole `make test`", 300, 250.0, timer="wall",
                                 machine="Old CPU, 2 cores"),
                          _bench("test_removed_since", "gone", 1.0, 0.5),
                          _bench("test_a[x]", "explorer x, old", 0.05, 0.009)]}
    new = {"datetime": "2026-12-01T00:00:00", "machine_info": machine_info,
           "benchmarks": [_bench("test_a[x]", "explorer x", 0.05, 0.004, measured_s=0.004, timer="cpu", wall_s=0.01),
                          _bench("test_b", "sweep", 0.05, 7.0, measured_s=0.08, timer="cpu",
                                 slowest_setting={"num_gpus": 16}),
                          _bench("test_c", "drawing", None, 0.2, timer="cpu")]}
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "results.json").write_text(json.dumps(old))
    out = tmp_path / "README.md"
    new["benchmarks"][0]["stats"]["data"] = [0.004] * 1000  # every round's time: not kept
    merged = report.merge(json.loads(json.dumps(new)), old, {"test_a", "test_b", "test_c", "test_make_test"})
    assert [b["name"] for b in merged["benchmarks"]] == ["test_a[x]", "test_b", "test_c", "test_make_test"]
    assert "data" not in merged["benchmarks"][0]["stats"]
    assert report.main([str(tmp_path / "new.json"), "--results", str(tmp_path / "results.json"),
                        "--out", str(out)]) == 0  # with this repository's benchmarks: test_make_test exists
    text = out.read_text()
    assert "| what / 测量内容 | goal / 目标 | measured / 实测 | result / 结果 | machine / 机器 |" in text
    assert "| explorer x | < 50.0 ms | 4.0 ms CPU (wall 10.0 ms) | pass | Test CPU, 2 cores |" in text
    assert "| sweep; slowest: num_gpus=16 | < 50.0 ms | 80.0 ms CPU | FAIL |" in text
    assert "| drawing | — | 200.0 ms CPU | — |" in text
    assert "| whole `make test` | < 5.0 min | 4.2 min wall, measured 2026-11-30 | pass | Old CPU, 2 cores |" in text
    assert "explorer x, old" not in text and "gone" not in text


def test_every_benchmark_module_imports_and_covers_every_explorer():
    proc = subprocess.run([*BENCH_PYTEST, "benchmarks", "-o", "python_files=bench_*.py", "--collect-only", "-q"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=_outside_xdist())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from benchmarks.bench_explorers import explorer_modules
    names = explorer_modules()
    assert "planning" in names and len(names) >= 9
    for name in names:
        assert f"test_explorer_compute_slowest_extreme_setting[{name}]" in proc.stdout
    for expected in ("test_planner_explorer_slider_grid", "test_planner_search", "test_pipeline_simulate",
                     "test_gloo_lab_start_to_finish", "test_make_test"):
        assert expected in proc.stdout
