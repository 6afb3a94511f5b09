"""Builds solutions/03_data_parallel.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/03_data_parallel_solutions.py,
then .venv/bin/python -m distlearn.course execute solutions/03_data_parallel.ipynb and
python -m distlearn.course build-exercises"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "solutions"

cells = [
    pair(r"""
# 03 · Exercises: data parallelism

Complete each function, then run the check cell below it: it runs hidden cases and prints ✓ or ✗ with a hint.
""", r"""
# 03 · 练习：数据并行

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例，打印 ✓ 或 ✗ 并给出提示。
"""),
    code("""
import math

import numpy as np

from distlearn import check
from distlearn.i18n import bi
"""),
    pair(r"""
## Exercise 1: combine shard means

Each rank reports the mean loss over its shard (`shard_means`) and its shard size (`shard_sizes`). Return the
mean over the whole batch. A rank with 0 samples reports a meaningless mean: it must not count.
""", r"""
## 练习 1：合并分片均值

每个 rank 报告自己分片上的平均损失（`shard_means`）和分片大小（`shard_sizes`）。返回整个批量上的平均值。样本数为 0 的
rank 报告的均值没有意义：不能计入。
"""),
    code("""
def weighted_mean(shard_means, shard_sizes):
    ### BEGIN SOLUTION
    total = sum(shard_sizes)
    return sum(m * n for m, n in zip(shard_means, shard_sizes) if n) / total
    ### END SOLUTION
"""),
    code("""
check.ex03_weighted_mean(weighted_mean)
"""),
    code("""
try:
    mean = weighted_mean([1.0, 2.0, 3.0], [22, 21, 21])
    print(bi(f"64 samples on 3 ranks: {mean} vs the seed code's {np.mean([1.0, 2.0, 3.0])}",
             f"64 个样本在 3 个 rank 上：{mean}，种子代码给出 {np.mean([1.0, 2.0, 3.0])}"))
except NotImplementedError:
    print(bi("Solve exercise 1 above first.", "请先完成上面的练习 1。"))
"""),
    pair(r"""
## Exercise 2: DistributedSampler's padding

Return how many samples `DistributedSampler(shuffle=False, drop_last=False)` repeats when `num_samples` samples
are spread over `world_size` ranks (10 on 3 → 2).
""", r"""
## 练习 2：DistributedSampler 的填充数

当 `num_samples` 个样本分布到 `world_size` 个 rank 上时，返回 `DistributedSampler(shuffle=False, drop_last=False)`
重复的样本数（10 个样本、3 个 rank → 2）。
"""),
    code("""
def sampler_padding(num_samples, world_size):
    ### BEGIN SOLUTION
    return math.ceil(num_samples / world_size) * world_size - num_samples
    ### END SOLUTION
"""),
    code("""
check.ex03_sampler_padding(sampler_padding)
"""),
    pair(r"""
## Exercise 3: global BatchNorm statistics

Each rank r reports per-feature `sums[r]` = Σx and `sumsqs[r]` = Σx² (arrays of shape (C,)) over its shard and
`counts[r]`, its number of samples (possibly 0). Return `(mean, var)`: the global mean and the biased variance
that BatchNorm normalizes with, as arrays of shape (C,).
""", r"""
## 练习 3：全局 BatchNorm 统计量

每个 rank r 报告自己分片上逐特征的 `sums[r]` = Σx、`sumsqs[r]` = Σx²（形状为 (C,) 的数组），以及样本数 `counts[r]`
（可能为 0）。返回 `(mean, var)`：BatchNorm 用来归一化的全局均值和有偏方差，均为形状 (C,) 的数组。
"""),
    code("""
def global_bn_stats(sums, sumsqs, counts):
    ### BEGIN SOLUTION
    n = sum(counts)
    mean = np.sum(sums, axis=0) / n
    var = np.sum(sumsqs, axis=0) / n - mean ** 2
    return mean, var
    ### END SOLUTION
"""),
    code("""
check.ex03_global_bn_stats(global_bn_stats)
"""),
    pair(r"""
## Exercise 4: DDP with a `sum` loss

Every rank uses `loss = criterion(output, target, reduction="sum")` on equal local batches. Return the factor f
such that the gradient DDP leaves on each rank = f × the gradient of the summed loss over the whole batch in one
process.
""", r"""
## 练习 4：DDP 与 `sum` 损失

每个 rank 在相同大小的本地批量上使用 `loss = criterion(output, target, reduction="sum")`。返回系数 f，使得 DDP 留在每个
rank 上的梯度 = f × 单进程在整个批量上求和损失的梯度。
"""),
    code("""
def ddp_sum_scale(world_size):
    ### BEGIN SOLUTION
    return 1 / world_size
    ### END SOLUTION
"""),
    code("""
check.ex03_ddp_sum_scale(ddp_sum_scale)
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "03_data_parallel.ipynb")
