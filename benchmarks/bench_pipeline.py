"""The pipeline simulator (chapter 05): interleaved 1F1B with p = 64 stages, m = 1024 micro-batches and 4 chunks
per stage (524,288 operations), and plain 1F1B at p = 64, m = 1024, each in < 100 ms."""
from __future__ import annotations

import time

import pytest

from distlearn.pipeline_parallel.schedules import simulate

GOAL_S = 0.100
pytestmark = pytest.mark.benchmark(timer=time.process_time, group="pipeline")

CASES = {
    "interleaved p=64 m=1024 v=4": dict(schedule="interleaved-1f1b", num_stages=64, num_microbatches=1024,
                                        num_chunks=4),
    "1f1b p=64 m=1024": dict(schedule="1f1b", num_stages=64, num_microbatches=1024),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pipeline_simulate(measure, name):
    kw = CASES[name]
    result = measure(lambda: simulate(**kw), goal_s=GOAL_S, what=f"pipeline.simulate {name}")
    assert result.total_time > 0
