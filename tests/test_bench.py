"""The benchmark harness (``make bench``) runs, finds benchmark modules, applies goals and writes its table.
Speed itself is measured by ``make bench``, never asserted here."""
from __future__ import annotations

import sys
import textwrap

import pytest

from benchmarks import run


def _fake_package(tmp_path, monkeypatch):
    pkg = tmp_path / "fakebench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bench_fast.py").write_text(textwrap.dedent('''
        GOALS = {"quick thing": 1.0, "slow thing": 0.001}
        def main(quick=False):
            assert quick is True
            return {"quick thing": 0.002, "slow thing": 0.5}
    '''))
    (pkg / "bench_plain.py").write_text("GOAL = 2.0\ndef main():\n    return {'plain': 3.0}\n")
    (pkg / "bench_broken.py").write_text("def main():\n    raise RuntimeError('boom')\n")
    (pkg / "bench_info.py").write_text("GOAL = 1.0\nGOALS = {'info': None}\ndef main():\n    return {'info': 5.0}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def test_discover_finds_the_benchmark_modules(tmp_path, monkeypatch):
    assert {"bench_explorers", "bench_lab"} <= set(run.discover())
    pkg = _fake_package(tmp_path, monkeypatch)
    assert run.discover(pkg) == ["bench_broken", "bench_fast", "bench_info", "bench_plain"]


def test_goals_pass_fail_and_errors(tmp_path, monkeypatch):
    _fake_package(tmp_path, monkeypatch)
    fast = run.run_module("bench_fast", quick=True, package="fakebench")
    assert [(r.name, r.goal_s, r.status) for r in fast] == [("quick thing", 1.0, "pass"), ("slow thing", 0.001, "FAIL")]
    (plain,) = run.run_module("bench_plain", package="fakebench")
    assert (plain.goal_s, plain.measured_s, plain.status) == (2.0, 3.0, "FAIL")
    (info,) = run.run_module("bench_info", package="fakebench")
    assert info.goal_s is None and info.status == "—"
    (broken,) = run.run_module("bench_broken", package="fakebench")
    assert broken.status == "error" and "boom" in broken.error
    text = run.render(fast + [plain, broken], run.machine(), "2026-01-01 00:00 UTC")
    assert "| quick thing | < 1.00 s | 2.0 ms | pass |" in text
    assert "| slow thing | < 1.0 ms | 500.0 ms | FAIL |" in text
    assert "error: RuntimeError: boom" in text and "2026-01-01" in text


def test_machine_names_cpu_and_cores():
    info = run.machine()
    assert info["cpu"] and info["cores"] >= 1 and info["python"].startswith("3.")


def test_quick_run_writes_table(tmp_path):
    out = tmp_path / "README.md"
    assert run.main(["--quick", "--out", str(out), "--only", "explorers"]) == 0
    text = out.read_text()
    assert "| benchmark / 基准 | goal / 目标 | measured / 实测 | result / 结果 |" in text
    assert "logical cores" in text and (tmp_path / "results.json").exists()
    assert "| whole `make test`" not in text  # --only runs just what it names


def test_previous_make_test_time_is_kept(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"date": "2026-01-01", "rows": [{"module": "make", "name": "whole `make test`", '
                    '"goal_s": 900, "measured_s": 600.0, "error": "", "date": "2026-01-01"}]}')
    row = run._previous_make_test(path)
    assert row.measured_s == 600.0 and row.status == "pass" and "2026-01-01" in row.note


def test_explorer_benchmark_covers_every_explorer():
    from benchmarks import bench_explorers

    result = bench_explorers.main(quick=True)
    assert len(result) == 2 * len(bench_explorers.explorer_modules())  # compute, and compute + render
    assert all(v >= 0 for v in result.values())


@pytest.mark.slow
def test_lab_benchmark_runs_a_real_lab():
    from benchmarks import bench_lab

    (seconds,) = bench_lab.main(quick=True).values()
    assert 0 < seconds < 120
