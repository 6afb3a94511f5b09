"""Checkers for chapter 14 (planning a training run). Expected values come from distlearn's own planner, cost and
memory modules, which tests/test_planner.py checks against the ZeRO and Megatron-LM papers."""
from __future__ import annotations

from distlearn import planning as planner
from distlearn.core.cost import collective_time
from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.memory.formulas import model_state_bytes


def _states(num_params, tp, pp, dp, zero_stage):
    return model_state_bytes(num_params // (tp * pp), dp=dp, zero_stage=zero_stage).total


def ex14_model_states_per_gpu(fn):
    """``model_states_per_gpu(num_params, tp, pp, dp, zero_stage)`` → bytes of mixed-precision Adam states."""
    cases = []
    for args in [(8_000_000_000, 1, 1, 8, 0), (8_000_000_000, 1, 1, 8, 3), (70_000_000_000, 8, 1, 1, 3),
                 (70_000_000_000, 8, 1, 1, 0), (70_000_000_000, 4, 4, 4, 1), (405_000_000_000, 8, 16, 8, 1),
                 (1_000_000_000, 1, 1, 64, 2)]:
        cases.append(Case(args=args, expected=_states(*args), rtol=1e-6,
                          hint_en="16 bytes per parameter (2 weights + 2 gradients + 12 optimizer); first divide "
                                  "the model by tp × pp, then ZeRO shards over dp only (stage 1: optimizer, 2: + "
                                  "gradients, 3: + weights). With dp = 1 ZeRO saves nothing.",
                          hint_zh="每个参数 16 字节（权重 2 + 梯度 2 + 优化器 12）；先按 tp × pp 切分模型，"
                                  "ZeRO 只在 dp 上分片（第 1 阶段：优化器；第 2 阶段：再加梯度；第 3 阶段：再加权重）。"
                                  "dp = 1 时 ZeRO 不省显存。"))
    verify("ex14_model_states_per_gpu", fn, cases)


def ex14_pipeline_step_time(fn):
    """``pipeline_step_time(t_microbatch, num_microbatches, pp, num_chunks)`` → seconds, bubble included."""
    cases = []
    for t, m, p, v in [(1.0, 8, 1, 1), (1.0, 8, 4, 1), (0.5, 32, 8, 1), (0.5, 32, 8, 2), (2.0, 3, 4, 1),
                       (0.1, 64, 16, 4)]:
        expected = m * t * (1 + planner.bubble_ratio(p, m, v))
        cases.append(Case(args=(t, m, p, v), expected=expected, rtol=1e-9,
                          hint_en="start from the ideal time m·t; Megatron's bubble ratio (the chapter's "
                                  "bubble_ratio, not the idle share bubble_fraction) is a share of that ideal "
                                  "time, and interleaving divides it by v.",
                          hint_zh="从理想时间 m·t 出发；Megatron 的气泡比值（本章的 bubble_ratio，而不是空闲占比 "
                                  "bubble_fraction）是相对这个理想时间的比例，交错调度把它除以 v。"))
    verify("ex14_pipeline_step_time", fn, cases)


def ex14_dp_allreduce_seconds(fn):
    """``dp_allreduce_seconds(num_params, dp, bw, bytes_per_grad=2)`` → seconds of a ring all-reduce (no α)."""
    cases = []
    for psi, dp, bw, g in [(8e9, 8, 450e9, 2), (8e9, 64, 50e9, 2), (7e9, 2, 25e9, 4), (1e9, 1, 25e9, 2),
                           (70e9, 16, 50e9, 2)]:
        cases.append(Case(args=(psi, dp, bw), kwargs={"bytes_per_grad": g},
                          expected=collective_time("ring_all_reduce", psi * g, dp, alpha=0.0, bandwidth=bw), rtol=1e-9,
                          hint_en="a ring all-reduce sends 2(n − 1)/n × the buffer per rank; time = that / bw; "
                                  "0 when dp = 1.",
                          hint_zh="环形 AllReduce（全规约）每个 rank 发送缓冲区的 2(n − 1)/n 倍；时间 = 该字节数 / 带宽；"
                                  "dp = 1 时为 0。"))
    verify("ex14_dp_allreduce_seconds", fn, cases)


def _gpu_counts(limit=4096):
    n = 1
    while n < 8:
        yield n
        n *= 2
    n = 8
    while n <= limit:
        yield n
        n += 8


def reference_smallest_gpu_count(model, gpu, seq_len, global_batch):
    """The fewest GPUs among 1, 2, 4, then whole nodes of 8, on which the planner finds a plan (None up to 4096)."""
    for n in _gpu_counts():
        if planner.search(model, global_batch=global_batch, seq_len=seq_len, gpu=gpu, num_gpus=n,
                          suggest=False).plans:
            return n
    return None


def ex14_smallest_gpu_count(fn):
    """``smallest_gpu_count(model, gpu, seq_len, global_batch)`` → the fewest GPUs with a plan that fits."""
    cases = []
    for args in [("gpt2-xl", "a100-80gb", 1024, 64), ("llama2-7b", "a100-80gb", 4096, 64),
                 ("llama2-7b", "h200", 4096, 64), ("llama3-70b", "h100-80gb", 8192, 64),
                 ("llama2-13b", "a100-80gb", 4096, 64)]:
        cases.append(Case(args=args, expected=reference_smallest_gpu_count(*args),
                          hint_en="try 1, 2, 4, then 8, 16, 24, … GPUs in order and return the first n for which "
                                  "planner.search(...).plans is not empty.",
                          hint_zh="依次尝试 1、2、4，然后 8、16、24……块 GPU，返回第一个使 planner.search(...).plans "
                                  "非空的 n。"))
    verify("ex14_smallest_gpu_count", fn, cases)
