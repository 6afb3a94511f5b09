"""Checkers for chapter 06 (ZeRO and FSDP). Expected values come from distlearn.fsdp / distlearn.memory, which the
tests check against PyTorch's FSDP code and the ZeRO paper."""
from __future__ import annotations

import numpy as np

from ..check import Case, verify
from ..fsdp import flatten_and_shard, gather_flat, step_traffic
from ..memory import model_state_bytes


def _arrays_equal(got, expected):
    try:
        return len(got) == len(expected) and all(
            np.shape(g) == np.shape(e) and np.array_equal(np.asarray(g), e) for g, e in zip(got, expected))
    except TypeError:
        return False


def ex06_shard_with_padding(fn):
    """``fn(flat, world_size)`` → list of world_size 1-D shards, each ⌈N / world_size⌉ long, zero-padded."""
    cases = []
    for n, ws in [(10, 4), (5, 4), (8, 4), (7, 2), (1, 3), (13, 5)]:
        flat = np.arange(1.0, n + 1)
        cases.append(Case((flat, ws), expected=flatten_and_shard([flat], ws).shards, compare=_arrays_equal,
                          hint_en="Shard size = ceil(N / world_size); pad every shard with zeros to that size "
                                  "(a rank past the end holds only padding).",
                          hint_zh="分片大小 = ceil(N / world_size)；每个分片都用 0 填充到这个大小"
                                  "（超出末尾的 rank 只有填充）。"))
    verify("ex06_shard_with_padding", fn, cases)


def ex06_gather_params(fn):
    """``fn(shards, shapes)`` → the parameters with their shapes, padding dropped."""
    rng = np.random.default_rng(6)
    cases = []
    for shapes, ws in [([(2, 3), (4,)], 4), ([(5,)], 4), ([(3, 3), (1,), (2, 2)], 3), ([(7,)], 1)]:
        params = [rng.standard_normal(s) for s in shapes]
        f = flatten_and_shard(params, ws)
        cases.append(Case((f.shards, shapes), expected=gather_flat(f.shards, shapes), compare=_arrays_equal,
                          hint_en="Concatenate the shards in rank order, keep only the first sum(numel) elements, "
                                  "then cut and reshape one parameter at a time.",
                          hint_zh="按 rank 顺序拼接分片，只保留前 sum(numel) 个元素，再逐个参数切分并 reshape。"))
    verify("ex06_gather_params", fn, cases)


def ex06_zero3_bytes_per_step(fn):
    """``fn(num_params, world_size, bytes_per_elem, num_microbatches)`` → bytes one rank sends per ZeRO-3 optimizer
    step of ``num_microbatches`` micro-batches (ring algorithm)."""
    hint_en = ("Every micro-batch: two all-gathers (forward, backward) and one reduce-scatter, each (n−1)/n × Ψ "
               "elements of bytes_per_elem bytes.")
    hint_zh = ("每个微批次：两次 AllGather（前向、反向）加一次 ReduceScatter，每次 (n−1)/n × Ψ 个元素，"
               "每个元素 bytes_per_elem 字节。")
    cases = [Case((psi, ws, 2, m), expected=float(step_traffic(3, psi, ws, num_microbatches=m)), rtol=1e-9,
                  hint_en=hint_en, hint_zh=hint_zh)
             for psi, ws, m in [(4096, 2, 1), (4096, 4, 1), (65536, 8, 1), (1024, 1, 1), (4096, 4, 3), (4096, 2, 8)]]
    # 3 · 4 · (7/8) · 7e9 · 2 bytes for 4 micro-batches, in integers so the expected value is exact
    cases.append(Case((7_000_000_000, 8, 2, 4), expected=float(3 * 4 * 7 * 7_000_000_000 * 2 // 8), rtol=1e-9,
                      hint_en=hint_en, hint_zh=hint_zh))
    verify("ex06_zero3_bytes_per_step", fn, cases)


def ex06_model_states_per_gpu(fn):
    """``fn(num_params, dp, zero_stage)`` → model-state bytes per GPU, mixed-precision Adam (2 + 2 + 12)."""
    cases = [Case((psi, dp, s), expected=model_state_bytes(psi, dp=dp, zero_stage=s).total, rtol=1e-9,
                  hint_en="Each parameter costs 16 bytes: 2 (params, sharded at stage 3) + 2 (grads, stage ≥ 2) "
                          "+ 12 (optimizer, stage ≥ 1); shard over dp.",
                  hint_zh="每参数 16 字节：2（参数，阶段 3 分片）+ 2（梯度，阶段 ≥ 2）+ 12（优化器，阶段 ≥ 1）；按 dp 分片。")
             for psi, dp, s in [(7_500_000_000, 64, 0), (7_500_000_000, 64, 1), (7_500_000_000, 64, 2),
                                (7_500_000_000, 64, 3), (1000, 1, 3), (1_000_000, 10, 2)]]
    verify("ex06_model_states_per_gpu", fn, cases)
