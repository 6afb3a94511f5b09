"""Build notebooks/05_pipeline_parallel.ipynb and solutions/05_pipeline_parallel.ipynb with nbformat.

Run: ``.venv/bin/python scripts/notebooks/05_pipeline_parallel.py`` then
``.venv/bin/python -m distlearn.course execute notebooks/05_pipeline_parallel.ipynb solutions/05_pipeline_parallel.ipynb``
and ``.venv/bin/python -m distlearn.course build-exercises``.
"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

ROOT = Path(__file__).resolve().parents[2]
NAME = "05_pipeline_parallel.ipynb"

chapter = [
    pair(r"""
# 05 · Pipeline parallelism

Pipeline parallelism (PP) cuts a model into consecutive groups of layers, the **stages**, and puts each stage on
its own GPU. A batch is split into **micro-batches** that flow through the stages like cars on an assembly line.

**Learning objectives.** After this chapter you can
- partition layers over stages so that no layer is lost and the slowest stage is as fast as possible;
- explain where the **pipeline bubble** comes from and compute it for GPipe, 1F1B and interleaved 1F1B;
- tell apart what 1F1B saves (activation memory) from what it does not (bubble time);
- choose the number and size of micro-batches at a fixed global batch;
- run a real pipeline with `torch.distributed.pipelining` and check it against one process.
""", r"""
# 05 · 流水线并行

流水线并行（PP）把模型切成若干组连续的层，即**流水线阶段（stage）**，每个阶段放在一张 GPU 上。一个批次被切成若干
**微批次（micro-batch）**，像装配线上的汽车一样依次流过各个阶段。

**学习目标。** 学完本章，你能够
- 把各层分配到各阶段，既不丢层，又让最慢的阶段尽量快；
- 解释**流水线气泡**从何而来，并计算 GPipe、1F1B 和交错 1F1B 的气泡；
- 分清 1F1B 节省的是什么（激活值显存）、不节省什么（气泡时间）；
- 在全局批量大小固定时选择微批次的个数和大小；
- 用 `torch.distributed.pipelining` 运行真实的流水线，并与单进程结果对照。
"""),
    code("""
import matplotlib.pyplot as plt
import torch

from distlearn import launch, pipeline as P, pipeline_plots as PP
from distlearn.labs import pipeline as lab
"""),
    pair(r"""
## Stages, micro-batches and the bubble

Notation (Narayanan et al. 2021, *Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM*, §2.2): $p$ stages, $m$ micro-batches per step, $t_f$ and $t_b$ the forward and backward time of
one micro-batch on one stage. The backward costs about $2\,t_f$: it computes gradients with respect to both the
activations and the weights.

Stage $s$ cannot start micro-batch 0 before stages $0 \dots s-1$ have finished it, and at the end of the step it
waits for the others to drain. With a flush at every step (synchronous training) both GPipe and 1F1B take

$$T = (m + p - 1)\,(t_f + t_b), \qquad t_{\text{bubble}} = (p-1)(t_f+t_b).$$

Two definitions of the **bubble fraction** are in use; we always say which:
- the **idle share** of all stage-time, $1 - \dfrac{\text{busy}}{p\,T} = \dfrac{p-1}{m+p-1}$ (what a profiler shows);
- the **Megatron ratio** $t_{\text{bubble}} / t_{\text{ideal}} = \dfrac{p-1}{m}$ with $t_{\text{ideal}} = m(t_f+t_b)$.
""", r"""
## 阶段、微批次与气泡

记号（Narayanan 等 2021，*Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM*，
§2.2）：$p$ 个阶段，每步 $m$ 个微批次，$t_f$ 和 $t_b$ 是一个微批次在一个阶段上的前向和反向时间。反向大约是
$2\,t_f$：它既要计算对激活值的梯度，也要计算对权重的梯度。

阶段 $s$ 必须等阶段 $0 \dots s-1$ 处理完微批次 0 才能开始；一步结束时，它又要等其他阶段排空。每步都做一次
冲刷（flush，同步训练）时，GPipe 和 1F1B 的耗时都是

$$T = (m + p - 1)\,(t_f + t_b), \qquad t_{\text{bubble}} = (p-1)(t_f+t_b).$$

**气泡率**有两种常用定义，我们总会说明用的是哪一种：
- 全部阶段时间中的**空闲占比** $1 - \dfrac{\text{busy}}{p\,T} = \dfrac{p-1}{m+p-1}$（性能分析器看到的）；
- **Megatron 比值** $t_{\text{bubble}} / t_{\text{ideal}} = \dfrac{p-1}{m}$，其中 $t_{\text{ideal}} = m(t_f+t_b)$。
"""),
    pair(r"""
## Partitioning layers over stages

With equal layers, give each stage $\lfloor n/p \rfloor$ layers and one more to the first $n \bmod p$ stages.
When layers cost differently (the embedding and the LM head of a language model cost several transformer
layers), balance the **cost**: the pipeline runs at the pace of its slowest stage.
""", r"""
## 把层分配到各阶段

各层代价相同时，每个阶段分 $\lfloor n/p \rfloor$ 层，前 $n \bmod p$ 个阶段各多分一层。各层代价不同时（语言模型的
嵌入层和输出头相当于好几个 Transformer 层），要按**代价**均衡：流水线的速度由最慢的阶段决定。
"""),
    code("""
print("10 layers on 3 stages / 10 层分到 3 个阶段:", P.partition_layers(10, 3))
print("30 layers on 4 stages / 30 层分到 4 个阶段:", P.partition_layers(30, 4))
costs = [3.0] + [1.0] * 10 + [4.0]  # embedding ≈ 3 layers, 10 transformer layers, LM head ≈ 4 layers
for name, sizes in [("equal counts / 等层数", P.partition_layers(len(costs), 4)),
                    ("balanced cost / 均衡代价", P.partition_by_cost(costs, 4))]:
    print(f"{name:24s} layers per stage / 每阶段层数 {sizes}, cost per stage / 每阶段代价 {P.stage_costs(costs, sizes)}")
"""),
    pair(r"""
## The seed's simulation, and what it gets wrong

The seed code (the starting snippets this course corrects; see chapter 00) simulated a pipeline like this (a faithful copy is `distlearn.pipeline.seed_simulate_pipeline_parallelism`):

```python
layers_per_stage = num_layers // num_stages
...  # every forward and every backward takes layers_per_stage time units
```

> **Common misconception.** "`num_layers // num_stages` layers per stage, backward as long as forward, and
> GPipe is all there is." Three mistakes: (1) the integer division **silently drops** `num_layers % num_stages`
> layers (30 layers on 4 stages simulate only 28); (2) the backward costs about **twice** the forward, not the
> same; (3) it models only GPipe, and the usual next claim, "1F1B has a smaller bubble", is false: with equal
> costs **GPipe and 1F1B have the same bubble**; 1F1B saves **activation memory** (at most $p-s$ micro-batches
> alive on stage $s$ instead of $m$). To shrink the bubble you need more micro-batches or interleaving.
""", r"""
## 种子代码的模拟及其错误

种子代码（本课程纠正的起始代码片段，见第 00 章）是这样模拟流水线的（忠实副本见 `distlearn.pipeline.seed_simulate_pipeline_parallelism`）：

```python
layers_per_stage = num_layers // num_stages
...  # 每个前向和每个反向都耗时 layers_per_stage 个单位
```

> **常见误区。** “每个阶段 `num_layers // num_stages` 层，反向和前向一样长，流水线就是 GPipe。”这里有三个错误：
> (1) 整除会**悄悄丢掉** `num_layers % num_stages` 层（30 层分 4 个阶段时只模拟了 28 层）；(2) 反向大约是前向的
> **两倍**，而不是一样长；(3) 它只模拟了 GPipe，而常见的下一句“1F1B 的气泡更小”是错的：代价相同时
> **GPipe 和 1F1B 的气泡一样大**；1F1B 节省的是**激活值显存**（阶段 $s$ 上同时存活的微批次最多 $p-s$ 个，而不是
> $m$ 个）。要缩小气泡，需要更多的微批次或交错调度。
"""),
    code("""
_, seed_total, seed_bubble = P.seed_simulate_pipeline_parallelism(30, 4, 8)
sizes = P.partition_layers(30, 4)
gp = P.simulate("gpipe", 4, 8, fwd_time=sizes, bwd_time=[2 * n for n in sizes])  # 1 unit per layer forward, 2 backward
ob = P.simulate("1f1b", 4, 8, fwd_time=sizes, bwd_time=[2 * n for n in sizes])
print(f"seed / 种子:  layers simulated / 模拟的层数 {4 * (30 // 4)}, step time / 步时间 {seed_total}, "
      f"bubble / 气泡率 {seed_bubble:.1%}")
print(f"GPipe:       layers / 层数 {sum(sizes)}, step time / 步时间 {gp.total_time:g}, bubble / 气泡率 {gp.bubble_fraction:.1%}, "
      f"peak micro-batches per stage / 各阶段峰值微批次 {gp.peak_inflight_chunks.tolist()}")
print(f"1F1B:        layers / 层数 {sum(sizes)}, step time / 步时间 {ob.total_time:g}, bubble / 气泡率 {ob.bubble_fraction:.1%}, "
      f"peak micro-batches per stage / 各阶段峰值微批次 {ob.peak_inflight_chunks.tolist()}")
"""),
    pair(r"""
The seed simulated 28 of the 30 layers and gave the backward the forward's cost, so its step time (154) is far
from the corrected 250-odd units. The two stages with 8 layers set the pace, so the stages with 7 layers idle in
every step: both bubbles are above $(p-1)/(m+p-1) = 3/11 = 27.3\%$. GPipe and 1F1B are equally fast only when all
stages cost the same; with unequal stages their orders overlap the slow and fast stages differently and the times
differ a little (here by about 2 %). The large difference is memory: $m = 8$ micro-batches alive on every stage
for GPipe, $p - s$ for 1F1B.
""", r"""
种子代码只模拟了 30 层中的 28 层，还让反向与前向耗时相同，所以它的步时间（154）与修正后的 250 多个单位相差很远。
有 8 层的两个阶段决定了节奏，只有 7 层的阶段每一步都会空闲：两种调度的气泡率都高于
$(p-1)/(m+p-1) = 3/11 = 27.3\%$。只有当所有阶段代价相同时，GPipe 和 1F1B 才一样快；阶段代价不等时，两种顺序让快慢
阶段重叠的方式不同，耗时会略有差别（这里约 2%）。真正的大差别在显存：GPipe 每个阶段同时存活 $m = 8$ 个微批次，
1F1B 只有 $p - s$ 个。
"""),
    pair(r"""
## Three schedules on a timeline

`distlearn.pipeline.simulate` is an event simulation: each stage runs its operations in the schedule's order,
and an operation starts when the stage is free and its input has arrived (the forward of micro-batch $j$ on stage
$s$ needs stage $s-1$'s forward of $j$; the backward needs stage $s+1$'s backward).

- **GPipe** (Huang et al. 2019): all forwards, then all backwards.
- **1F1B** (PipeDream-Flush): stage $s$ runs $\min(p-s-1, m)$ warm-up forwards, then alternates one forward and
  one backward, then drains the remaining backwards. A micro-batch's activations are freed as soon as its
  backward is done, so at most $p-s$ are alive.
- **Interleaved 1F1B** (Narayanan et al. 2021, §2.2.2): each GPU holds $v$ smaller model chunks (stage $s$ holds
  chunks $s, s+p, \dots$). Each operation is $v$ times shorter, so the fill and drain shrink:
  $t_{\text{bubble}} = (p-1)(t_f+t_b)/v$ when $m$ is a multiple of $p$, at the price of $v$ times more
  point-to-point messages.
""", r"""
## 时间线上的三种调度

`distlearn.pipeline.simulate` 是一个事件模拟：每个阶段按调度给出的顺序执行操作；当该阶段空闲且输入已经到达时，
操作才开始（阶段 $s$ 上微批次 $j$ 的前向需要阶段 $s-1$ 对 $j$ 的前向；反向需要阶段 $s+1$ 的反向）。

- **GPipe**（Huang 等 2019）：先做完所有前向，再做所有反向。
- **1F1B**（PipeDream-Flush）：阶段 $s$ 先做 $\min(p-s-1, m)$ 个预热前向，然后前向、反向交替（稳定阶段），
  最后做完剩下的反向（收尾阶段）。一个微批次的反向一结束就释放它的激活值，所以最多同时存活 $p-s$ 个。
- **交错 1F1B**（Narayanan 等 2021，§2.2.2）：每张 GPU 持有 $v$ 个更小的模型块（阶段 $s$ 持有第 $s, s+p, \dots$
  块）。每个操作短了 $v$ 倍，填充和排空也随之缩短：当 $m$ 是 $p$ 的倍数时
  $t_{\text{bubble}} = (p-1)(t_f+t_b)/v$，代价是点对点通信的消息多了 $v$ 倍。
"""),
    code("""
fig, axes = plt.subplots(3, 1, figsize=(10, 8.5), layout="constrained")
for ax, (schedule, v) in zip(axes, [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2)]):
    PP.gantt(P.simulate(schedule, 4, 8, num_chunks=v), ax=ax)
plt.show()
"""),
    pair(r"""
The simulation against the closed forms ($t_f = 1$, $t_b = 2$). The closed forms are not used by the simulation:
they are an independent check (the tests check many more cases, and the interleaved order against
`torch.distributed.pipelining`'s own `ScheduleInterleaved1F1B`).
""", r"""
模拟结果与闭式解对照（$t_f = 1$，$t_b = 2$）。模拟并不使用闭式解：闭式解是独立的检验（测试检查了更多情形，还把交错
调度的顺序与 `torch.distributed.pipelining` 自己的 `ScheduleInterleaved1F1B` 对照）。
"""),
    code("""
print(f"{'schedule / 调度':18s} {'p':>3s} {'m':>4s} {'v':>2s} | {'T sim':>7s} {'T formula':>9s} | "
      f"{'bubble sim':>10s} {'formula':>8s} | peak micro-batches per stage / 各阶段峰值微批次")
for schedule, p, m, v in [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("interleaved-1f1b", 4, 8, 2),
                          ("interleaved-1f1b", 4, 8, 4), ("1f1b", 8, 32, 1), ("interleaved-1f1b", 8, 32, 4)]:
    r = P.simulate(schedule, p, m, num_chunks=v)
    c = P.closed_form(schedule, p, m, num_chunks=v)
    peak = ", ".join(f"{x:g}" for x in r.peak_inflight)
    print(f"{schedule:18s} {p:3d} {m:4d} {v:2d} | {r.total_time:7.2f} {c['total_time']:9.2f} | "
          f"{r.bubble_fraction:10.1%} {c['bubble_fraction']:8.1%} | {peak}")
"""),
    pair(r"""
Interleaving also costs memory: the first stage warms up with $2(p-1) + (v-1)p$ chunk-forwards and holds
$p + (p-1)/v$ micro-batches' worth of activations (Korthikanti et al. 2022, §4.2.3), a little more than 1F1B's $p$.
""", r"""
交错调度也要付出显存：第一个阶段的预热包含 $2(p-1) + (v-1)p$ 个模型块前向，要保存相当于 $p + (p-1)/v$ 个微批次的
激活值（Korthikanti 等 2022，§4.2.3），比 1F1B 的 $p$ 个略多。
"""),
    pair(r"""
## Where the simulation departs from the closed forms, and why

The formulas assume equal costs, no communication time and, for interleaving, enough micro-batches. Each case
below breaks one assumption:
- **$m < p$ with interleaving** (p = 4, m = 2, v = 2): before chunk 1 can start on stage 0, micro-batch 0 must go
  round all $p$ stages in chunk 0, but stage 0 has only $m < p$ chunk-forwards to fill that time: it idles, and
  the bubble is larger than $(p-1)(t_f+t_b)/v$.
- **point-to-point time** $c$ per message: GPipe's total grows by exactly $2(p-1)c$ (the first micro-batch crosses
  $p-1$ links each way). 1F1B grows faster: in its steady phase a stage's next step waits for a backward coming
  back from the next stage, so the latency sits on the critical path again and again, not only in fill and drain.
  With $v$ chunks a micro-batch crosses $2(pv-1)$ links, so interleaving loses its edge when messages are slow.
- **unequal stages**: the slowest stage sets the pace (see the seed example above).
""", r"""
## 模拟在哪里偏离闭式解，以及原因

这些公式假设代价相同、没有通信时间，并且（交错调度时）微批次足够多。下面每种情形打破一个假设：
- **交错调度且 $m < p$**（p = 4，m = 2，v = 2）：模型块 1 在阶段 0 上开始之前，微批次 0 必须先在模型块 0 中走完全部
  $p$ 个阶段，而阶段 0 只有 $m < p$ 个模型块前向来填补这段时间：它只能空闲，气泡大于 $(p-1)(t_f+t_b)/v$。
- **点对点通信时间**：每条消息耗时 $c$ 时，GPipe 的总时间恰好增加 $2(p-1)c$（第一个微批次往返各跨过 $p-1$ 条链路）。
  1F1B 增加得更快：在稳定阶段，一个阶段的下一步要等从下一个阶段传回的反向结果，所以延迟一次又一次地落在关键路径上，
  而不只是在填充和排空时。有 $v$ 个模型块时，一个微批次要跨过 $2(pv-1)$ 条链路，所以消息慢时交错调度的优势会消失。
- **各阶段代价不等**：最慢的阶段决定节奏（见上面种子代码的例子）。
"""),
    code("""
r = P.simulate("interleaved-1f1b", 4, 2, num_chunks=2)
c = P.closed_form("interleaved-1f1b", 4, 2, num_chunks=2)
print(f"p=4, m=2, v=2: bubble time / 气泡时间 {r.bubble_time:g} vs formula / 公式 {c['bubble_time']:g}")
print(f"{'p2p c':>6s} | {'GPipe':>6s} {'GPipe formula':>13s} | {'1F1B':>6s} | {'interleaved v=2':>15s} | {'v=4':>6s}")
for comm in [0.0, 0.1, 0.25, 0.5]:
    g = P.simulate("gpipe", 4, 8, p2p_time=comm).total_time
    print(f"{comm:6.2f} | {g:6.2f} {(8 + 3) * 3 + 2 * 3 * comm:13.2f} | {P.simulate('1f1b', 4, 8, p2p_time=comm).total_time:6.2f} | "
          f"{P.simulate('interleaved-1f1b', 4, 8, num_chunks=2, p2p_time=comm).total_time:15.2f} | "
          f"{P.simulate('interleaved-1f1b', 4, 8, num_chunks=4, p2p_time=comm).total_time:6.2f}")
"""),
    pair(r"""
## Edge cases: fewer micro-batches than stages

$m < p$ and $m = 1$ are legal, just wasteful: with $m = 1$ only one stage works at a time and the bubble is
$(p-1)/p$. In 1F1B, stage $s$ then warms up with $\min(p-s-1, m)$ forwards, never more than it has.
""", r"""
## 边界情形：微批次比阶段少

$m < p$ 和 $m = 1$ 都是合法的，只是浪费：$m = 1$ 时同一时刻只有一个阶段在工作，气泡率为 $(p-1)/p$。此时 1F1B 中
阶段 $s$ 的预热前向数是 $\min(p-s-1, m)$，不会超过它拥有的微批次数。
"""),
    code("""
for m in [1, 2]:
    r = P.simulate("1f1b", 4, m)
    print(f"p=4, m={m}: bubble / 气泡率 {r.bubble_fraction:.1%} (formula / 公式 {3 / (m + 3):.1%}), "
          f"peak per stage / 各阶段峰值 {r.peak_inflight_chunks.tolist()}")
print("1F1B order of stage 0, p=4, m=2 / 阶段 0 的 1F1B 顺序:", [f"{k}{j}" for k, j, _ in P.stage_order("1f1b", 0, 4, 2)])
"""),
    pair(r"""
## Micro-batching: sizes and the trade-off

Splitting a batch must not lose samples. `torch.chunk` makes chunks of $\lceil B/m \rceil$ and may return **fewer**
than $m$ chunks; `distlearn.pipeline.split_microbatches` returns exactly $m$ pieces whose sizes differ by at most one.
""", r"""
## 微批次：大小与权衡

切分批次时不能丢样本。`torch.chunk` 按 $\lceil B/m \rceil$ 切块，返回的块数可能**少于** $m$；
`distlearn.pipeline.split_microbatches` 恰好返回 $m$ 块，各块大小最多相差一。
"""),
    code("""
batch = torch.arange(6)
print("torch.chunk(6 samples, 4):", [len(c) for c in torch.chunk(batch, 4)], "→", len(torch.chunk(batch, 4)), "chunks / 块")
print("split_microbatches(6 samples, 4):", [len(c) for c in P.split_microbatches(batch, 4)])
print("microbatch_sizes(10, 4):", P.microbatch_sizes(10, 4))
"""),
    pair(r"""
At a fixed global batch $B$ (per pipeline), more micro-batches shrink the bubble, but each micro-batch gets smaller
and uses the GPU less efficiently. `microbatch_tradeoff` uses a simple cost model (an assumption, not a
measurement): a forward costs $4 + 1 \cdot b$ time units for a micro-batch of $b$ samples, the backward twice that.
The best $m$ lies in between; activation memory on stage 0 (1F1B) is $\min(p, m) \cdot b$ samples.
""", r"""
全局批量大小 $B$（每条流水线）固定时，微批次越多气泡越小，但每个微批次越小，GPU 的利用效率越低。
`microbatch_tradeoff` 使用一个简单的代价模型（是假设，不是测量）：大小为 $b$ 的微批次前向耗时 $4 + 1 \cdot b$，
反向是它的两倍。最好的 $m$ 位于中间；1F1B 中阶段 0 的激活值显存为 $\min(p, m) \cdot b$ 个样本。
"""),
    code("""
print(f"{'m':>4s} {'b':>4s} | {'step time / 步时间':>18s} | {'bubble / 气泡率':>14s} | activations on stage 0 (samples) / 阶段 0 激活值（样本数）")
for row in P.microbatch_tradeoff(64, 4, [1, 2, 4, 8, 16, 32, 64]):
    print(f"{row['num_microbatches']:4d} {row['micro_batch_size']:4d} | {row['total_time']:18g} | "
          f"{row['bubble_fraction']:14.1%} | {row['peak_activation_samples']:g}")
"""),
    code("""
PP.bubble_vs_microbatches(4, [1, 2, 4, 8, 16, 32, 64])
plt.show()
"""),
    pair(r"""
## A real pipeline with `torch.distributed.pipelining`

`distlearn.labs.pipeline` builds the same 8-block MLP (float64) on every rank, keeps its stage's blocks in a
`PipelineStage`, and runs one step with `ScheduleGPipe`, `Schedule1F1B` and `ScheduleInterleaved1F1B` (2 chunks
per rank, so 4 stages on 2 processes) over gloo, with 4 micro-batches of 2 samples. We compare with one process
on the whole batch: torch scales each micro-batch's gradients by $1/m$, so the accumulated gradients must equal
the full-batch gradients, and the mean micro-batch loss must equal the full-batch loss. Hooks also record the
order in which torch runs each rank's forwards and backwards: it is exactly the order of
`distlearn.pipeline.stage_order`, the one the simulator uses. The same file runs with
`torchrun --nproc-per-node 4 -m distlearn.labs.pipeline`.
""", r"""
## 用 `torch.distributed.pipelining` 运行真实的流水线

`distlearn.labs.pipeline` 在每个 rank 上构建同一个 8 块的 MLP（float64），把本阶段的块放进 `PipelineStage`，
然后通过 gloo 分别用 `ScheduleGPipe`、`Schedule1F1B` 和 `ScheduleInterleaved1F1B`（每个 rank 2 个模型块，所以 2 个
进程上有 4 个阶段）运行一步，共 4 个微批次、每个 2 个样本。我们与单进程在整个批次上的结果对照：torch 把每个微批次
的梯度乘以 $1/m$，所以累积的梯度必须等于整批梯度，微批次损失的平均值也必须等于整批损失。钩子（hook）还记录了 torch
在每个 rank 上执行前向和反向的顺序：它与模拟器所用的 `distlearn.pipeline.stage_order` 完全一致。同一个文件也可以用
`torchrun --nproc-per-node 4 -m distlearn.labs.pipeline` 运行。
"""),
    code("""
rows = lab.summarize(launch.run(lab.run_all, 2, 4, 8))
print(f"{'schedule / 调度':18s} {'stages / 阶段':>13s} | {'pipeline loss':>14s} {'1-process loss':>14s} | "
      f"{'|Δ loss|':>8s} {'max |Δ grad|':>12s} | order = stage_order / 顺序一致")
for r in rows:
    ok = "✓" if r["loss_diff"] < 1e-6 and r["max_grad_diff"] < 1e-6 else "✗"
    print(f"{r['schedule']:18s} {r['num_stages']:13d} | {r['loss']:14.10f} {r['ref_loss']:14.10f} | "
          f"{r['loss_diff']:8.1e} {r['max_grad_diff']:12.1e} {ok} | {r['order_matches']}")
"""),
    pair(r"""
## Explorer

Change the schedule, the number of stages, micro-batches and chunks, the backward/forward cost ratio and the
point-to-point time; watch the bubble and the activations each stage holds.
""", r"""
## 探索器

改变调度、阶段数、微批次数和模型块数、反向/前向耗时比以及点对点通信时间，观察气泡和每个阶段保存的激活值。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import pipeline as pipeline_explorer
pipeline_explorer.explorer()
"""),
    pair(r"""
## Summary

- Partition **all** layers: sizes differ by at most one, or balance cost when layers differ; the slowest stage
  sets the pace.
- GPipe and 1F1B with equal costs take $(m+p-1)(t_f+t_b)$: bubble fraction $(p-1)/(m+p-1)$, the same for both.
- 1F1B frees activations early: stage $s$ holds at most $\min(p-s, m)$ micro-batches instead of $m$.
- Interleaving with $v$ chunks cuts the bubble to $(p-1)(t_f+t_b)/v$ (when $m$ is a multiple of $p$) for $v$
  times more messages and a little more memory.
- More micro-batches shrink the bubble but make each one less efficient; split batches without losing samples.
- `torch.distributed.pipelining` reproduces the single-process loss and gradients, and runs each stage's
  forwards and backwards in exactly the order the simulator assumes.
""", r"""
## 小结

- 分配**所有**层：各阶段层数最多相差一；各层代价不同时按代价均衡；最慢的阶段决定节奏。
- 代价相同时，GPipe 和 1F1B 都耗时 $(m+p-1)(t_f+t_b)$：气泡率同为 $(p-1)/(m+p-1)$。
- 1F1B 提前释放激活值：阶段 $s$ 最多保存 $\min(p-s, m)$ 个微批次，而不是 $m$ 个。
- 用 $v$ 个模型块做交错调度，可把气泡缩小到 $(p-1)(t_f+t_b)/v$（$m$ 为 $p$ 的倍数时），代价是消息多 $v$ 倍、显存略增。
- 微批次越多气泡越小，但每个微批次的效率越低；切分批次时不要丢样本。
- `torch.distributed.pipelining` 复现了单进程的损失和梯度，并且每个阶段执行前向和反向的顺序与模拟器的假设完全一致。
"""),
    pair(r"""
## Exercises

Open [exercises/05_pipeline_parallel.ipynb](../exercises/05_pipeline_parallel.ipynb): compute a bubble by hand,
write the 1F1B order of one stage, partition layers, and count the activations a stage holds.
""", r"""
## 练习

打开 [exercises/05_pipeline_parallel.ipynb](../exercises/05_pipeline_parallel.ipynb)：手算气泡率，写出一个阶段的
1F1B 顺序，分配各层，并计算一个阶段保存的激活值。
"""),
]

solutions = [
    pair(r"""
# 05 · Pipeline parallelism: exercises

Complete each function, then run the check cell below it: it runs hidden cases and prints ✓ or ✗ with a hint.
""", r"""
# 05 · 流水线并行：练习

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例，并打印 ✓ 或 ✗ 及提示。
"""),
    code("""
from distlearn import check
"""),
    pair(r"""
## Exercise 1: the bubble by hand

A pipeline of `num_stages` $p$ stages runs `num_microbatches` $m$ micro-batches with GPipe or 1F1B, every
forward taking $t_f$ and every backward $t_b$ (the same on every stage). Return the bubble fraction as the idle
share of all stage-time. Your function gets only $p$ and $m$: show that $t_f$ and $t_b$ cancel out.
""", r"""
## 练习 1：手算气泡率

一条有 `num_stages` $p$ 个阶段的流水线用 GPipe 或 1F1B 处理 `num_microbatches` $m$ 个微批次，每个前向耗时 $t_f$，
每个反向耗时 $t_b$（各阶段相同）。返回气泡率（全部阶段时间中的空闲占比）。你的函数只接收 $p$ 和 $m$：
请说明 $t_f$ 和 $t_b$ 为什么会相互抵消。
"""),
    code("""
def bubble_fraction(num_stages, num_microbatches):
    ### BEGIN SOLUTION
    p, m = num_stages, num_microbatches
    total = (m + p - 1)          # in units of (t_f + t_b)
    busy_per_stage = m
    return 1 - busy_per_stage / total
    ### END SOLUTION
"""),
    code("check.ex05_bubble_fraction(bubble_fraction)"),
    pair(r"""
## Exercise 2: the 1F1B order of one stage

Return the order in which stage `stage` of a 1F1B (PipeDream-Flush) pipeline runs its operations, as strings
`"F3"` (forward of micro-batch 3) and `"B3"` (its backward). Remember the warm-up, steady and cool-down phases,
and that $m$ may be smaller than $p$.
""", r"""
## 练习 2：一个阶段的 1F1B 顺序

返回 1F1B（PipeDream-Flush）流水线中阶段 `stage` 执行操作的顺序，用字符串 `"F3"`（微批次 3 的前向）和 `"B3"`
（它的反向）表示。别忘了预热、稳定和收尾三个阶段，并且 $m$ 可能小于 $p$。
"""),
    code("""
def one_f_one_b_order(stage, num_stages, num_microbatches):
    ### BEGIN SOLUTION
    m = num_microbatches
    warmup = min(num_stages - stage - 1, m)
    order = [f"F{j}" for j in range(warmup)]
    for i in range(m - warmup):
        order += [f"F{warmup + i}", f"B{i}"]
    order += [f"B{j}" for j in range(m - warmup, m)]
    return order
    ### END SOLUTION
"""),
    code("check.ex05_one_f_one_b_order(one_f_one_b_order)"),
    pair(r"""
## Exercise 3: partition layers

Return a list with the number of layers on each of `num_stages` stages: every one of `num_layers` layers placed
exactly once, and sizes differing by at most one.
""", r"""
## 练习 3：分配各层

返回一个列表，给出 `num_stages` 个阶段各自的层数：`num_layers` 层每层恰好分配一次，各阶段层数最多相差一。
"""),
    code("""
def partition_layers(num_layers, num_stages):
    ### BEGIN SOLUTION
    base, extra = divmod(num_layers, num_stages)
    return [base + 1 if s < extra else base for s in range(num_stages)]
    ### END SOLUTION
"""),
    code("check.ex05_partition_layers(partition_layers)"),
    pair(r"""
## Exercise 4: activations held by a stage

Return the largest number of micro-batches whose activations stage `stage` holds at the same time, for
`schedule` `"gpipe"` or `"1f1b"`.
""", r"""
## 练习 4：一个阶段保存的激活值

对 `schedule` 为 `"gpipe"` 或 `"1f1b"` 的情形，返回阶段 `stage` 同时保存激活值的微批次的最大个数。
"""),
    code("""
def peak_activations(schedule, stage, num_stages, num_microbatches):
    ### BEGIN SOLUTION
    if schedule == "gpipe":
        return num_microbatches
    return min(num_stages - stage, num_microbatches)
    ### END SOLUTION
"""),
    code("check.ex05_peak_activations(peak_activations)"),
]


def main():
    for folder, cells in (("notebooks", chapter), ("solutions", solutions)):
        path = ROOT / folder / NAME
        path.parent.mkdir(exist_ok=True)
        nbformat.write(new_notebook(cells), path)
        print("wrote", path)


if __name__ == "__main__":
    main()
