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
    from distlearn.labs.smoke import all_reduce_rank
    from distlearn.launch import run

    results = measure(lambda: run(all_reduce_rank, 4), rounds=2, goal_s=15.0,
                      what="4-rank gloo lab (smoke all_reduce), start to finish")
    assert results == [10.0] * 4  # 1 + 2 + 3 + 4 on every rank: a wrong result would make the time meaningless


def test_make_test(measure, request):
    if not request.config.getoption("--with-make-test"):
        pytest.skip("run with --with-make-test (make bench BENCH_ARGS=--with-make-test)")
    proc = measure(lambda: subprocess.run(["make", "test"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL), rounds=1, goal_s=5 * 60.0,
                   what="whole `make test`")
    assert proc.returncode == 0, f"make test exited with {proc.returncode}"
