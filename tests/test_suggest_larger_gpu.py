"""``suggest_fix``'s larger-GPU answer is found in one pass over the memory-minimal plans
(``plan_search._first_fitting_gpu``): it must be the GPU that asking :func:`any_plan_fits` GPU by GPU, in order of
memory, finds first (the reference below), for settings where the answer is a GPU and where it is None."""
from __future__ import annotations

import pytest

from distlearn.core.hardware import GPUS, Cluster
from distlearn.core.models import MOE_PRESETS
from distlearn.planning import any_plan_fits, suggest_fix
from distlearn.planning.setting import resolve

SETTINGS = [  # (model, gpu, num_gpus, seq_len, global_batch, precision): none fits as it is
    ("deepseek-v3", "v100-32gb", 128, 4096, 256, "mixed"),
    ("llama2-70b", "h800", 8, 4096, 8, "mixed"),
    ("llama3.1-405b", "h800", 64, 32768, 8, "mixed"),
    ("llama3-8b", "v100-32gb", 2, 4096, 256, "mixed"),
    ("gpt3-175b", "v100-32gb", 64, 1024, 256, "mixed"),
    ("llama3-8b", "h800", 1, 8192, 256, "mixed"),
    ("llama2-7b", "a100-80gb", 1, 512, 8, "mixed"),
    ("mixtral-8x7b", "v100-32gb", 8, 32768, 8, "mixed"),
    ("deepseek-v3", "v100-32gb", 64, 32768, 8, "mixed"),   # no larger GPU fits
    ("deepseek-v3", "h100-80gb", 16, 4096, 256, "te-fp8"),
]


def gpu_by_gpu(model, cluster, global_batch, seq_len, precision):
    """The reference: any_plan_fits asked for each larger GPU in order of memory, the first that fits."""
    for g in sorted(GPUS.values(), key=lambda g: g.memory_bytes):
        if g.memory_bytes > cluster.gpu.memory_bytes:
            c = Cluster(g.with_(gpus_per_node=cluster.gpus_per_node), cluster.num_nodes)
            if any_plan_fits(model, c, global_batch, seq_len, precision):
                return g.name
    return None


@pytest.mark.parametrize("name, gpu, num_gpus, seq_len, global_batch, precision", SETTINGS)
def test_larger_gpu_is_the_first_that_fits(name, gpu, num_gpus, seq_len, global_batch, precision):
    model, cluster = resolve(MOE_PRESETS.get(name, name), gpu, num_gpus, None)
    assert not any_plan_fits(model, cluster, global_batch, seq_len, precision)
    got = suggest_fix(model, cluster=cluster, global_batch=global_batch, seq_len=seq_len, precision=precision)["gpu"]
    assert got == gpu_by_gpu(model, cluster, global_batch, seq_len, precision)


def test_settings_include_both_answers():
    answers = set()
    for name, gpu, num_gpus, seq_len, global_batch, precision in SETTINGS:
        model, cluster = resolve(MOE_PRESETS.get(name, name), gpu, num_gpus, None)
        answers.add(gpu_by_gpu(model, cluster, global_batch, seq_len, precision) is None)
    assert answers == {True, False}
