"""Checkers for chapter 03 (data parallelism). Expected values come from :mod:`distlearn.data_parallel.simulation`, which
tests/test_data_parallel.py checks against full-batch numpy, torch's DistributedSampler and BatchNorm1d."""
from __future__ import annotations

import math

import numpy as np

from distlearn.data_parallel import simulation as dp
from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises


def ex03_weighted_mean(fn):
    """``weighted_mean(shard_means, shard_sizes)`` → the full-batch mean (empty shards weigh 0)."""
    cases = []
    nan = float("nan")  # what np.mean gives on a rank with no samples: it must weigh nothing, not poison the sum
    for means, sizes in [([1.0, 2.0, 3.0], [22, 21, 21]), ([0.5, 4.0], [9, 1]), ([2.0, 2.0], [3, 3]),
                         ([1.0, 7.0, 0.0], [1, 1, 0]), ([3.5], [10]), ([2.0, nan, 4.0], [3, 0, 1]),
                         ([nan, 5.0], [0, 2])]:
        expected = sum(m * s for m, s in zip(means, sizes) if s) / sum(sizes)
        cases.append(Case(args=(means, sizes), expected=expected, rtol=1e-12,
                          hint_en="each shard mean stands for n_r samples: Σ n_r·mean_r / Σ n_r. A rank with no "
                                  "samples adds nothing: its mean is undefined (nan), so leave it out rather than "
                                  "multiply it by 0 (nan × 0 is nan).",
                          hint_zh="每个分片均值代表 n_r 个样本：Σ n_r·mean_r / Σ n_r。没有样本的 rank 不贡献："
                                  "它的均值没有定义（nan），要把它排除在外，而不是乘以 0（nan × 0 仍是 nan）。"))
    verify("ex03_weighted_mean", fn, cases)


def ex03_sampler_padding(fn):
    """``sampler_padding(num_samples, world_size)`` → how many indices DistributedSampler adds as padding (not the
    number of distinct samples repeated: 2 samples on 5 ranks get 3 padding indices, 2 distinct samples)."""
    cases = []
    for n, ws in [(10, 3), (12, 4), (7, 4), (2, 5), (1000, 64), (1, 1)]:
        expected = sum(len(i) for i in dp.distributed_sampler_indices(n, ws)) - n
        cases.append(Case(args=(n, ws), expected=expected,
                          hint_en="every rank gets ⌈N / world_size⌉ indices; count the indices added as padding, "
                                  "the total minus N (with N < world_size one sample's index can be added twice, "
                                  "and each addition counts).",
                          hint_zh="每个 rank 得到 ⌈N / world_size⌉ 个索引；要数的是为填充而添加的索引个数，即总数 − N"
                                  "（N < world_size 时，同一个样本的索引可能被添加两次，每次都要算上）。"))
    verify("ex03_sampler_padding", fn, cases)


def ex03_global_bn_stats(fn):
    """``global_bn_stats(sums, sumsqs, counts)`` → (mean, var): per-feature global mean and biased variance from
    per-rank Σx, Σx² (arrays of shape (C,)) and sample counts."""
    cases = []
    rng = np.random.default_rng(7)
    for sizes in ([5, 5], [4, 3, 3], [6, 0, 2, 2], [1, 1], [10]):
        x = rng.standard_normal((sum(sizes), 3)) * 2 + 1
        shards = np.split(x, np.cumsum(sizes)[:-1])
        sums = [s.sum(0) for s in shards]
        sumsqs = [(s ** 2).sum(0) for s in shards]
        bn = dp.sync_batchnorm(shards)
        cases.append(Case(args=(sums, sumsqs, list(sizes)), expected=(bn.mean, bn.var), rtol=1e-9, atol=1e-12,
                          parts=(("mean", "均值"), ("variance", "方差")),
                          hint_en="all-reduce (sum) the three, then mean = Σx / N and var = Σx² / N − mean² "
                                  "(biased, as BatchNorm normalizes with).",
                          hint_zh="对三者做 AllReduce（求和），然后 mean = Σx / N，var = Σx² / N − mean²"
                                  "（有偏方差，BatchNorm 用它归一化）。"))
    verify("ex03_global_bn_stats", fn, cases)


def ex03_ddp_sum_scale(fn):
    """``ddp_sum_scale(world_size)`` → factor f such that, with loss reduction "sum" on every rank, DDP's gradient
    = f × the single-process gradient of the summed loss."""
    cases = []
    for ws in (1, 2, 4, 8, 3):
        g = np.random.default_rng(ws).standard_normal((ws * 4, 2))
        expected = float(dp.ddp_gradient(g, ws, "sum")[0] / g.sum(0)[0])
        cases.append(Case(args=(ws,), expected=expected, rtol=1e-9,
                          hint_en="DDP all-reduces the gradients and divides by world_size.",
                          hint_zh="DDP 对梯度做 AllReduce 后除以 world_size。"))
    assert math.isclose(cases[1].expected, 0.5)
    verify("ex03_ddp_sum_scale", fn, cases)
