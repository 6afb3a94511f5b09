"""Builds notebooks/03_data_parallel.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/03_data_parallel.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/03_data_parallel.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 03 · Data parallelism

Data parallelism (DP) keeps a full copy of the model on every rank, gives each rank a different slice of the
batch, and all-reduces the gradients so that every copy takes the same optimizer step. It is the simplest way to
scale training — and full of small traps that give silently wrong numbers.

**Learning objectives.** After this chapter you can

- show that data-parallel gradients equal full-batch gradients, and combine uneven shards correctly (weight by
  shard size);
- predict what DDP does with a `sum` loss (it averages gradients over ranks), what `DistributedSampler` does with
  a dataset that doesn't divide (it repeats samples), and what an empty rank does;
- build synchronized BatchNorm from one all-reduce of (Σx, Σx², count);
- explain gradient bucketing (`bucket_cap_mb`) and how much communication hides behind the backward pass;
- check all of it against real `DistributedDataParallel` on gloo.
""", r"""
# 03 · 数据并行

数据并行 (DP) 在每个 rank 上保存一份完整的模型，让每个 rank 处理批量的不同部分，再对梯度做 AllReduce（全规约），使每份
副本执行相同的优化器更新。这是扩展训练最简单的方法——也充满了会悄悄给出错误数字的小陷阱。

**学习目标。** 学完本章，你能够

- 证明数据并行的梯度等于全批量梯度，并正确合并不均匀的分片（按分片大小加权）；
- 预测 DDP 遇到 `sum` 损失时的行为（它对各 rank 的梯度取平均）、`DistributedSampler` 遇到不能整除的数据集时的行为
  （它会重复样本），以及空 rank 的后果；
- 用一次对 (Σx, Σx², count) 的 AllReduce 搭建同步 BatchNorm；
- 解释梯度分桶（`bucket_cap_mb`）以及有多少通信能隐藏在反向传播之后；
- 用 gloo 上真实的 `DistributedDataParallel` 检验以上所有内容。
"""),
    code("""
import numpy as np
import matplotlib.pyplot as plt
import torch

from distlearn import data_parallel as dp, launch, plots  # plots: CJK font for figure labels
from distlearn.i18n import bi
from distlearn.labs import ddp as lab
from distlearn.widgets import data_parallel as view
"""),
    pair(r"""
## Why data parallelism is exact

For a loss that is a mean over N samples, $L = \frac1N\sum_{i=1}^{N}\ell_i$, split the batch into shards of sizes
$n_r$ ($\sum_r n_r = N$). Rank r computes its shard's mean loss $L_r$ and gradient $g_r$. Then

$$L = \sum_r \frac{n_r}{N} L_r, \qquad \nabla L = \sum_r \frac{n_r}{N} g_r ,$$

one all-reduce of $(n_r L_r,\ n_r g_r,\ n_r)$ followed by a division. With equal shards the weights are all $1/R$
and this is a plain average — which is what DDP computes. With uneven shards it is not.
""", r"""
## 为什么数据并行是精确的

对于在 N 个样本上取平均的损失 $L = \frac1N\sum_{i=1}^{N}\ell_i$，把批量切成大小为 $n_r$ 的分片（$\sum_r n_r = N$）。
rank r 计算自己分片的平均损失 $L_r$ 和梯度 $g_r$。于是

$$L = \sum_r \frac{n_r}{N} L_r, \qquad \nabla L = \sum_r \frac{n_r}{N} g_r ,$$

即对 $(n_r L_r,\ n_r g_r,\ n_r)$ 做一次 AllReduce 再相除。分片相等时权重都是 $1/R$，就是简单平均——这正是 DDP 的计算。
分片不相等时就不是了。
"""),
    pair(r"""
> **Common misconception.** *"Average the per-GPU losses and gradients."* The seed code (the starting snippets this
> course corrects; see chapter 00) has a `simulate_data_parallelism` that gives the first `N mod R` ranks one
> extra sample, then returns `np.mean(gpu_losses)`: every shard weighs the same, whatever its size. Its demo only
> tried 64 samples on 1, 2, 4 and 8 GPUs, where shards are equal and the mistake is invisible. On 3 ranks the
> shards are 22, 21, 21 and the mean of means is biased. (The seed's model also returned a gradient `d_out` = 16
> times too large for its own loss `mean(output**2)`: `dp.linear_mse_model` divides by all B·d_out outputs and is
> checked against autograd.)
""", r"""
> **常见误区。** *"把各 GPU 的损失和梯度取平均就行。"* 种子代码（本课程纠正的起始代码片段，见第 00 章）中的
> `simulate_data_parallelism` 让前 `N mod R` 个 rank 多分一个样本，然后返回 `np.mean(gpu_losses)`：不论分片大小，
> 每个分片权重相同。它的演示只在 1、2、4、8 张 GPU 上跑 64 个样本，此时分片相等，错误看不出来。在 3 个 rank 上
> 分片为 22、21、21，"均值的平均"就有偏差。（种子代码的模型返回的梯度对它自己的损失 `mean(output**2)` 而言也大了
> `d_out` = 16 倍：`dp.linear_mse_model` 除以全部 B·d_out 个输出，并用 autograd 检验过。）
"""),
    code("""
rng = np.random.default_rng(42)
data, weight = rng.standard_normal((64, 32)), rng.standard_normal((32, 16))
model_fn = dp.linear_mse_model(weight)
full_loss, full_grad = model_fn(data)
print(bi("full batch: loss", "全批量：损失"), f"{full_loss:.12f}")
print(bi("columns: ranks, shard sizes, the seed's loss (mean of shard means), weighted loss, the seed's bias, "
         "gradient = full batch?",
         "各列：rank 数、分片大小、种子代码的损失（分片均值的平均）、加权损失、种子代码的偏差、梯度是否等于全批量"))
print(f"{'ranks':>5} {'shards':>20} {'seed loss':>16} {'weighted loss':>16} {'seed bias':>10} {'grad = full':>12}")
for world_size in (1, 2, 3, 4, 5, 8):
    seed_loss, seed_grad = dp.seed_simulate_data_parallelism(data, world_size, model_fn)
    r = dp.simulate_data_parallelism(data, world_size, model_fn)
    sizes = str(r.shard_sizes) if world_size <= 5 else f"{r.shard_sizes[:2]}…"
    bias = seed_loss - full_loss
    bias = 0.0 if abs(bias) < 1e-12 else bias            # below 1e-12: float64 rounding, not bias
    grad_ok = np.allclose(r.grad, full_grad, rtol=1e-12, atol=1e-14)
    print(f"{world_size:5d} {sizes:>20} {seed_loss:16.12f} {r.loss:16.12f} {bias:+10.6f} {str(grad_ok):>12}")
"""),
    pair(r"""
The weighted version agrees with the full batch to float64 rounding (≈1e-16; a real DDP run in float32 agrees
within 1e-6, see below) for every world size — the tests check it for every N and R up to 80 × 12 with
hypothesis. The seed's bias is small here because all shards see similar data; with sorted or unshuffled data
(one class per shard, say) it can be large.
""", r"""
加权版本在任何 world size 下都与全批量结果在 float64 舍入误差（≈1e-16；下面 float32 的真实 DDP 运行误差在 1e-6 以内）
内一致——测试用 hypothesis 对 N ≤ 80、R ≤ 12 的所有情况都检查过。这里种子代码的偏差较小，是因为各分片的数据相似；
如果数据有序或未打乱（比如每个分片一个类别），偏差可能很大。
"""),
    pair(r"""
## Loss `sum` vs `mean` under DDP

DDP all-reduces gradients and **divides by world size**: it assumes each rank's loss is a mean over its local
batch. With `reduction="mean"` and equal local batches the result is the full-batch mean gradient. With
`reduction="sum"` it is the full-batch *sum* divided by world size — neither the single-process sum nor the mean,
and it changes when you change the number of GPUs (so does the best learning rate).
""", r"""
## DDP 下损失用 `sum` 还是 `mean`

DDP 对梯度做 AllReduce 后**除以 world size**：它假定每个 rank 的损失是本地批量上的平均。使用 `reduction="mean"` 且各
本地批量相等时，结果就是全批量的平均梯度。使用 `reduction="sum"` 时，结果是全批量梯度*之和*除以 world size——既不是单进程的
和，也不是平均值，而且会随 GPU 数量改变（最佳学习率也随之改变）。
"""),
    code("""
g = np.random.default_rng(0).standard_normal((16, 3))   # per-sample gradients of 16 samples
print(bi('gradients with reduction="mean" and with reduction="sum"', 'reduction="mean" 与 reduction="sum" 时的梯度'))
print(f"{bi('single process', '单进程')}: mean {np.round(g.mean(0), 4)}, sum {np.round(g.sum(0), 4)}")
for ws in (2, 4, 8):
    label = bi(f"DDP on {ws} ranks", f"{ws} 个 rank 上的 DDP")
    print(f"{label}: mean {np.round(dp.ddp_gradient(g, ws, 'mean'), 4)}, "
          f"sum {np.round(dp.ddp_gradient(g, ws, 'sum'), 4)}  (= sum / {ws})")
"""),
    pair(r"""
## DistributedSampler pads by repeating samples

`torch.utils.data.DistributedSampler` gives every rank ⌈N/R⌉ indices so that all ranks run the same number of
steps (otherwise a collective would hang). When R doesn't divide N it pads by repeating the first indices:
10 samples on 3 ranks become 12, samples 0 and 1 twice. A metric all-reduced over these shards counts them twice.
`dp.distributed_sampler_indices` reproduces the sampler exactly (tested against torch).
""", r"""
## DistributedSampler 用重复样本来填充

`torch.utils.data.DistributedSampler` 给每个 rank ⌈N/R⌉ 个索引，让所有 rank 执行相同的步数（否则集合通信会卡住）。
R 不能整除 N 时，它重复前面的索引来填充：10 个样本在 3 个 rank 上变成 12 个，样本 0 和 1 各出现两次。在这些分片上做
AllReduce 得到的指标会把它们计两次。`dp.distributed_sampler_indices` 精确复现了这个采样器（与 torch 对照测试）。
"""),
    code("""
from torch.utils.data import DistributedSampler

ours = dp.distributed_sampler_indices(10, 3)
theirs = [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
print("distlearn:", ours)
print("torch:    ", theirs, f" {bi('same', '相同')}:", ours == theirs)
correct = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0])      # the model gets samples 0 and 1 right
naive, true = dp.sampler_accuracy(correct, 3)
print(bi(f"accuracy all-reduced over the padded shards: {naive:.4f}; over the 10 samples: {true:.4f}",
         f"在填充后的分片上 AllReduce 得到的准确率：{naive:.4f}；在 10 个样本上：{true:.4f}"))
"""),
    pair(r"""
Fixes: evaluate on one rank, use `drop_last=True` and handle the tail separately, or carry the sample indices
and de-duplicate before counting.

**Empty ranks.** Splitting tiny data contiguously (`np.array_split`) can leave a rank with no samples: 2 samples
on 4 ranks give shards 1, 1, 0, 0. That rank's mean loss is 0/0 = NaN, and one NaN in an all-reduce makes every
rank's gradient NaN. The weighted all-reduce of $(n_r L_r, n_r g_r, n_r)$ is safe: an empty rank sends zeros.
""", r"""
解决办法：只在一个 rank 上评估；或者使用 `drop_last=True` 并单独处理尾部；或者携带样本索引，计数前去重。

**空 rank。** 把很少的数据连续切分（`np.array_split`）可能让某个 rank 没有样本：2 个样本在 4 个 rank 上得到分片
1、1、0、0。这个 rank 的平均损失是 0/0 = NaN，AllReduce 中只要有一个 NaN，所有 rank 的梯度都变成 NaN。对
$(n_r L_r, n_r g_r, n_r)$ 做加权 AllReduce 则是安全的：空 rank 发送的是零。
"""),
    code("""
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")                       # numpy warns "Mean of empty slice"
    empty_rank_loss = np.mean(np.zeros((0, 16)) ** 2)
print(bi(f"mean loss on a rank with no samples: {empty_rank_loss}", f"没有样本的 rank 上的平均损失：{empty_rank_loss}"))
seed_style, sizes = dp.data_parallel_loss(data[:2], 4, model_fn, reduction="mean_of_means")
weighted, _ = dp.data_parallel_loss(data[:2], 4, model_fn, reduction="weighted")
full = model_fn(data[:2])[0]
print(bi(f"shards {sizes}: mean of means {seed_style}, weighted {weighted:.12f}, full batch {full:.12f}",
         f"分片 {sizes}：均值的平均 {seed_style}，加权 {weighted:.12f}，全批量 {full:.12f}", sep="\\n"))
"""),
    pair(r"""
## Synchronized BatchNorm from one all-reduce

BatchNorm normalizes with the mean and (biased) variance of the batch. Under DP each rank sees only its shard,
so its statistics differ from the full batch's — badly so with small per-GPU batches. Synchronized BatchNorm
all-reduces the per-feature triple $(\sum x,\ \sum x^2,\ n)$ and uses $\mu = \sum x / N$ and
$\sigma^2 = \sum x^2 / N - \mu^2$. `nn.SyncBatchNorm` refuses CPU tensors, so `dp.sync_batchnorm` builds it from an
all-reduce; it equals single-process `nn.BatchNorm1d` on the whole batch, running statistics included (which
use the unbiased $N/(N-1)\,\sigma^2$). Even shards of 4, 3 and 3 samples (10 on 3 ranks) work.
""", r"""
## 用一次 AllReduce 实现同步 BatchNorm

BatchNorm 用批量的均值和（有偏）方差做归一化。数据并行时每个 rank 只看到自己的分片，统计量与全批量不同——每卡批量很小时
差别很大。同步 BatchNorm 对每个特征的三元组 $(\sum x,\ \sum x^2,\ n)$ 做 AllReduce，再用 $\mu = \sum x / N$ 和
$\sigma^2 = \sum x^2 / N - \mu^2$。`nn.SyncBatchNorm` 不接受 CPU 张量，所以 `dp.sync_batchnorm` 用 AllReduce 搭建它；
它与在整个批量上运行的单进程 `nn.BatchNorm1d` 结果相同，包括滑动统计量（使用无偏的 $N/(N-1)\,\sigma^2$）。分片大小为
4、3、3（10 个样本在 3 个 rank 上）也没问题。
"""),
    code("""
x = np.random.default_rng(1).standard_normal((10, 4)) * 3 + 1
shards = np.split(x, [4, 7])
outs, mean, var, running_mean, running_var = dp.sync_batchnorm(shards)
bn = torch.nn.BatchNorm1d(4, affine=False, dtype=torch.float64).train()
ref = bn(torch.from_numpy(x)).detach().numpy()
local = np.concatenate([(s - s.mean(0)) / np.sqrt(s.var(0) + 1e-5) for s in shards])
same = np.allclose(np.concatenate(outs), ref, rtol=0, atol=1e-12)
same_var = np.allclose(running_var, bn.running_var.numpy(), rtol=1e-12)
max_diff = f"{np.abs(local - ref).max():.2f}"
print(bi(f"sync BN equals torch BatchNorm1d (to 1e-12): {same}",
         f"同步 BN 与 torch BatchNorm1d 相同（误差 1e-12 内）：{same}"))
print(bi(f"running_var equal: {same_var}", f"running_var 相同：{same_var}"))
print(bi(f"per-rank BN (no sync) vs torch, max |diff|: {max_diff}",
         f"各 rank 各自做 BN（不同步）与 torch 的最大 |差|：{max_diff}"))
"""),
    pair(r"""
## Real DDP on gloo

Now the real thing: `distlearn.labs.ddp.ddp_gradients` wraps a small MLP in `DistributedDataParallel`, gives
rank r rows $[rk, (r+1)k)$ of a 32-sample batch, runs one backward pass and returns the gradients DDP leaves on
the rank. We compare them with one process on the whole batch (float32), for 2 and 4 ranks, with a `mean` loss
and with a `sum` loss; then synchronized BatchNorm built from `dist.all_reduce` on 3 ranks with shards 4, 3, 3.
Same script on GPUs: `torchrun --nproc-per-node 2 -m distlearn.labs.ddp`.
""", r"""
## gloo 上真实的 DDP

现在来真的：`distlearn.labs.ddp.ddp_gradients` 用 `DistributedDataParallel` 包装一个小 MLP，让 rank r 处理 32 个样本
批量中的第 $[rk, (r+1)k)$ 行，做一次反向传播，返回 DDP 留在该 rank 上的梯度。我们把它与单进程在整个批量上的结果
（float32）比较：2 个和 4 个 rank，分别使用 `mean` 损失和 `sum` 损失；然后在 3 个 rank（分片 4、3、3）上检验用
`dist.all_reduce` 搭建的同步 BatchNorm。在 GPU 上用同一个脚本：`torchrun --nproc-per-node 2 -m distlearn.labs.ddp`。
"""),
    code("""
ref, ref_sum = lab.reference_gradients(32, 0, "mean"), lab.reference_gradients(32, 0, "sum")
for world_size in (2, 4):
    per_rank = launch.run(lab.ddp_gradients, world_size, 32, 0, "both")   # a "mean" and a "sum" backward pass
    diff = max(np.abs(g["mean"][k] - ref[k]).max() for g in per_rank for k in ref)
    ratio = np.median(np.concatenate([(per_rank[0]["sum"][k] / ref_sum[k]).ravel() for k in ref_sum]))
    print(bi(f"DDP, {world_size} ranks, loss mean: max |grad - single process| < 1e-6: {diff < 1e-6}; "
             f"loss sum: DDP grad / single-process grad = {ratio:.4f}",
             f"DDP，{world_size} 个 rank，mean 损失：max |梯度 − 单进程| < 1e-6：{diff < 1e-6}；"
             f"sum 损失：DDP 梯度 / 单进程梯度 = {ratio:.4f}", sep="\\n"))
outs = launch.run(lab.sync_batchnorm_lab, 3, 10, 4, 0)
xb = torch.from_numpy(np.random.default_rng(0).standard_normal((10, 4)) * 3 + 1)
ref_bn = torch.nn.BatchNorm1d(4, affine=False, dtype=torch.float64).train()(xb).detach().numpy()
same = np.allclose(np.concatenate(outs), ref_bn, rtol=0, atol=1e-12)
shard_sizes = [len(o) for o in outs]
print(bi(f"sync BN on gloo (shards {shard_sizes}) equals BatchNorm1d (to 1e-12): {same}",
         f"gloo 上的同步 BN（分片 {shard_sizes}）与 BatchNorm1d 相同（误差 1e-12 内）：{same}"))
"""),
    pair(r"""
## Gradient bucketing and overlap

DDP does not wait for the whole backward pass: gradients become ready from the last layer to the first, and DDP
packs them into *buckets* (the first 1 MiB, then `bucket_cap_mb` = 25 MiB by default; `dp.bucket_assignment`
follows `compute_bucket_assignment_by_size` in PyTorch's reducer and is tested against it) and starts an
all-reduce as soon as a bucket is full, while backward continues. What matters is the *exposed* communication:
the time after backward ends until the last all-reduce finishes. Tiny buckets pay the latency α many times; one
huge bucket can't start until backward is over. Below: a 12-layer GPT-2-small-sized stack (fp32 gradients,
backward 60 ms in total, time proportional to parameters) on 8 ranks with α = 20 µs and 10 GB/s links — made-up
but plausible numbers; change them in the code.
""", r"""
## 梯度分桶与重叠

DDP 不会等整个反向传播结束：梯度从最后一层到第一层依次就绪，DDP 把它们装进*桶*（第一个桶 1 MiB，之后默认
`bucket_cap_mb` = 25 MiB；`dp.bucket_assignment` 按 PyTorch reducer 中的 `compute_bucket_assignment_by_size` 实现，
并与之对照测试），一个桶装满就立即启动 AllReduce，同时反向传播继续进行。关键是*暴露的*通信：反向结束后到最后一次
AllReduce 完成之间的时间。桶太小要多次付出延迟 α；一个巨大的桶要等反向结束才能开始。下面是一个 12 层、GPT-2 small 大小的
模型（fp32 梯度，反向共 60 毫秒，时间与参数量成正比），8 个 rank，α = 20 微秒，链路 10 GB/s——数字是编的但合理，可以在
代码中修改。
"""),
    code("""
h = 768
layer = [3 * h * h, h * h, 4 * h * h, 4 * h * h]                 # qkv, proj, fc1, fc2 weights of one layer
param_bytes = [4 * p for p in layer[::-1] * 12]                   # backward order, fp32
backward_times = [0.060 * b / sum(param_bytes) for b in param_bytes]
print(bi(f"{len(param_bytes)} gradients, {sum(param_bytes) / 2**20:.0f} MiB",
         f"{len(param_bytes)} 个梯度，共 {sum(param_bytes) / 2**20:.0f} MiB"))
print(bi("columns: bucket_cap_mb, buckets, total communication, exposed communication, step time (ms)",
         "各列：bucket_cap_mb、桶数、通信总时间、暴露的通信时间、步时间（毫秒）"))
print(f"{'bucket_cap_mb':>13} {'buckets':>8} {'comm total (ms)':>16} {'exposed (ms)':>13} {'step (ms)':>10}")
caps = [0.25, 1, 5, 25, 100, 400]
results = []
for cap in caps:
    t = dp.overlap_timeline(param_bytes, backward_times, 8, bucket_cap_mb=cap, alpha=20e-6, bandwidth=10e9)
    results.append(t)
    print(f"{cap:13g} {len(t.buckets):8d} {t.total_comm * 1e3:16.1f} {t.exposed_comm * 1e3:13.1f} "
          f"{t.step_end * 1e3:10.1f}")
"""),
    code("""
fig, axes = plt.subplots(2, 1, figsize=(9, 3.6), sharex=True, layout="constrained")
for ax, cap in zip(axes, (25, 400)):
    t = results[caps.index(cap)]
    for lane, y, color in (("compute", 1, "#4C72B0"), ("comm", 0, "#DD8452")):
        spans = [(s * 1e3, (e - s) * 1e3) for l, s, e, _ in t.events if l == lane]
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.3)
    ax.set_yticks([0, 1], ["all-reduce / 全规约", "backward / 反向"])
    ax.set_title(f"bucket_cap_mb = {cap}: exposed communication / 暴露的通信 {t.exposed_comm * 1e3:.1f} ms",
                 fontsize=9)
axes[-1].set_xlabel("ms / 毫秒")
plt.show()
"""),
    pair(r"""
## Explorer

Change the world size, the global batch, how the batch is split and how per-rank losses are combined, and see
the bias of the reported loss against the full batch; below it, the bytes each rank sends to all-reduce the bf16
gradients of a model of the chosen size, and the bandwidth-bound time per step.
""", r"""
## 探索器

改变 world size、全局批量大小、切分方式和各 rank 损失的合并方式，观察报告的损失相对全批量的偏差；下方是对所选大小模型的
bf16 梯度做 AllReduce 时每个 rank 发送的字节数，以及受带宽限制的每步时间。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
view.explorer()
"""),
    pair(r"""
## Summary

- Data-parallel gradients equal full-batch gradients when shards are combined weighted by size: one all-reduce
  of $(n_r L_r, n_r g_r, n_r)$. The seed's mean of per-shard means is biased for uneven shards (64 samples on 3
  ranks) and NaN with an empty rank.
- DDP averages gradients over ranks: a `sum` loss gives the full sum / world size.
- `DistributedSampler` repeats samples to pad (10 on 3 ranks: 2 repeated); metrics over its shards double-count.
- Synchronized BatchNorm = all-reduce of (Σx, Σx², n); equal to single-process BatchNorm.
- Buckets let gradient all-reduces overlap the backward pass; too small pays latency, too large exposes all of
  the communication.
- Real DDP on gloo (2 and 4 ranks) matches single-process gradients within 1e-6.
""", r"""
## 小结

- 按分片大小加权合并时，数据并行梯度等于全批量梯度：对 $(n_r L_r, n_r g_r, n_r)$ 做一次 AllReduce。种子代码的"分片均值的
  平均"在分片不均匀时（64 个样本在 3 个 rank 上）有偏差，遇到空 rank 时为 NaN。
- DDP 对各 rank 的梯度取平均：`sum` 损失得到的是全批量之和除以 world size。
- `DistributedSampler` 用重复样本填充（10 个样本在 3 个 rank 上：重复 2 个）；在其分片上统计的指标会重复计数。
- 同步 BatchNorm = 对 (Σx, Σx², n) 做 AllReduce；与单进程 BatchNorm 相同。
- 分桶让梯度 AllReduce 与反向传播重叠；桶太小付出延迟，太大则全部通信都暴露出来。
- gloo 上真实的 DDP（2 个和 4 个 rank）与单进程梯度的差在 1e-6 以内。
"""),
    pair(r"""
## Exercises

Open [exercises/03_data_parallel.ipynb](../exercises/03_data_parallel.ipynb): the weighted mean of shard means,
DistributedSampler's padding, global BatchNorm statistics from per-rank sums, and DDP's gradient scale with a `sum`
loss. Each has a check cell. Solutions: [solutions/03_data_parallel.ipynb](../solutions/03_data_parallel.ipynb).

**Next / 下一章:** [04 · Tensor parallelism](04_tensor_parallel.ipynb).
""", r"""
## 练习

打开 [exercises/03_data_parallel.ipynb](../exercises/03_data_parallel.ipynb)：分片均值的加权平均、DistributedSampler
的填充数、由各 rank 的求和得到全局 BatchNorm 统计量，以及 `sum` 损失下 DDP 的梯度缩放系数。每道题都有检查单元格。参考答案：
[solutions/03_data_parallel.ipynb](../solutions/03_data_parallel.ipynb)。

**下一章 / Next:** [04 · 张量并行](04_tensor_parallel.ipynb)。
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "03_data_parallel.ipynb")
