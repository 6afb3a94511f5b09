"""Shared set-up of the speed benchmarks (``make bench``), run by pytest-benchmark.

Every benchmark calls the ``measure`` fixture: it times a function with pytest-benchmark, records what was measured
and its goal in the benchmark's ``extra_info`` (which ``benchmarks/report.py`` turns into the README table) and
**asserts the goal**, so a goal missed fails ``make bench``. With ``--benchmark-disable`` (a smoke run) each
function runs once, untimed, and no goal is checked.

Timers: benchmarks of pure in-process computation use the process's CPU time (``time.process_time``), because on
a shared machine the wall-clock time also counts the waits for a core; they record the wall-clock median too.
Benchmarks that start processes (the gloo lab, ``make test``) use wall-clock time.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_addoption(parser):
    group = parser.getgroup("distlearn benchmarks")
    group.addoption("--with-make-test", action="store_true",
                    help="also time the whole `make test` (minutes) / 同时测量整个 make test 的耗时（数分钟）")
    group.addoption("--full-grid", action="store_true",
                    help="time the planner explorer at every slider setting, not a sample / 规划器探索器的全部滑块组合")


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info.pop("node", None)  # the host name says nothing about speed
    try:
        import torch
        machine_info["torch"] = torch.__version__
    except ImportError:
        pass
    try:
        machine_info["logical_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        machine_info["logical_cores"] = os.cpu_count()


def _cpu_timed(benchmark) -> bool:
    return getattr(benchmark, "_timer", None) is time.process_time


@pytest.fixture
def measure(benchmark):
    """``measure(fn, what=..., goal_s=..., rounds=None, measured_s=None)`` → ``fn()``'s result.

    Times ``fn`` with pytest-benchmark (``rounds`` fixed rounds via ``pedantic``, else calibrated), then asserts
    that the median is under ``goal_s`` seconds (``None``: measured for information, no goal). ``measured_s`` (a
    function of ``fn``'s result) replaces the median when the result itself holds the number to judge, e.g. the
    slowest setting of a sweep."""

    def run(fn, *, what: str, goal_s: float | None, rounds: int | None = None, measured_s=None):
        benchmark.extra_info.update(what=what, goal_s=goal_s)
        if rounds is None:
            result = benchmark(fn)
        else:
            result = benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
        if benchmark.disabled:
            return result
        value = measured_s(result) if measured_s is not None else benchmark.stats.stats.median
        benchmark.extra_info["measured_s"] = value
        benchmark.extra_info["timer"] = "cpu" if _cpu_timed(benchmark) else "wall"
        if _cpu_timed(benchmark) and measured_s is None:
            walls = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                walls.append(time.perf_counter() - t0)
            benchmark.extra_info["wall_s"] = statistics.median(walls)
        if goal_s is not None:
            assert value < goal_s, (f"goal missed / 未达目标: {what}: {value * 1e3:.1f} ms, goal < "
                                    f"{goal_s * 1e3:.1f} ms")
        return result

    return run
