"""Benchmarks that start processes, timed by the wall clock: one real 4-rank gloo lab from start to finish
(spawn 4 processes, initialize the process group, all_reduce, tear down) in < 15 s on 2 cores; and, only with
``--with-make-test``, the whole ``make test`` in < 5 minutes (issue 12's target)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.benchmark(group="processes")


def test_gloo_lab_start_to_finish(measure):
    from distlearn.core.lab_smoke import all_reduce_rank
    from distlearn.core.launch import run

    results = measure(lambda: run(all_reduce_rank, 4), rounds=2, goal_s=15.0,
                      what="4-rank gloo lab (smoke all_reduce), start to finish")
    assert results == [10.0] * 4  # 1 + 2 + 3 + 4 on every rank: a wrong result would make the time meaningless


MAKE_TEST_LOG = ROOT / "build" / "bench-make-test.log"


def _make_test() -> subprocess.CompletedProcess:
    """``make test`` with its output in :data:`MAKE_TEST_LOG`. A run that fails raises: it is no measurement, so
    pytest-benchmark records nothing for it and benchmarks/README.md keeps the last good row."""
    MAKE_TEST_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(MAKE_TEST_LOG, "w", encoding="utf-8") as log:
        proc = subprocess.run(["make", "test"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise AssertionError(f"make test exited with {proc.returncode}; its output is in {MAKE_TEST_LOG}")
    return proc


def test_make_test(measure, request):
    if not request.config.getoption("--with-make-test"):
        pytest.skip("run with --with-make-test (make bench BENCH_ARGS=--with-make-test)")
    measure(_make_test, rounds=1, goal_s=5 * 60.0, what="whole `make test`")
