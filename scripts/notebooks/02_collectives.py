"""Builds notebooks/02_collectives.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/02_collectives.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/02_collectives.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 02 · Collective communication

Every parallel training method in this course is built from a handful of *collectives*: operations in which all
ranks of a process group take part. This chapter runs each of them on a virtual cluster with real arrays, step by
step, counts the bytes each rank sends, builds a cost model, and then runs the same collectives with real
`torch.distributed` processes.

**Learning objectives.** After this chapter you can

- say what broadcast, reduce, all-reduce, all-gather, reduce-scatter, all-to-all and send/recv compute;
- run ring all-reduce by hand: n−1 reduce-scatter steps, then n−1 all-gather steps, and explain why each rank
  sends 2(n−1)/n × the message, whatever n is;
- estimate a collective's time with the α-β model and tell algorithm bandwidth from bus bandwidth (nccl-tests);
- check the simulation against real gloo processes and fit α and β to measured times.
""", r"""
# 02 · 集合通信

本课程中的每一种并行训练方法都由少数几种*集合通信*搭建而成：进程组中所有 rank 共同参与的操作。本章在一个持有真实数组的
虚拟集群上逐步运行每一种集合通信，统计每个 rank 发送的字节数，建立代价模型，再用真实的 `torch.distributed` 进程运行同样的
集合通信。

**学习目标。** 学完本章，你能够

- 说出广播 (Broadcast)、Reduce（规约）、AllReduce（全规约）、AllGather（全收集）、ReduceScatter（规约-分散）、
  AllToAll（全对全）和 send/recv 各自计算什么；
- 手工执行环形 AllReduce：先 n−1 步 ReduceScatter，再 n−1 步 AllGather，并解释为什么无论 n 多大，每个 rank 都发送
  2(n−1)/n × 消息大小；
- 用 α-β 模型估计集合通信的时间，并区分算法带宽与总线带宽（nccl-tests 的定义）；
- 用真实的 gloo 进程检验模拟结果，并用实测时间拟合 α 和 β。
"""),
    code("""
import numpy as np
import matplotlib.pyplot as plt

from distlearn import cost, launch, plots
from distlearn.comm import VirtualCluster, ring_bytes_per_rank
from distlearn.i18n import bi
from distlearn.labs import collectives as lab
from distlearn.widgets import collectives as view
"""),
    pair(r"""
## The collectives on a virtual cluster

`VirtualCluster(n)` holds one numpy array per rank. Each collective takes the list of per-rank inputs and returns
the list of per-rank outputs, computed by actually moving chunks between ranks, and counts each rank's bytes.
Below, rank r holds `[10r, 10r+1, …]` so you can see where every number went.
""", r"""
## 虚拟集群上的集合通信

`VirtualCluster(n)` 为每个 rank 保存一个 numpy 数组。每种集合通信接收各 rank 的输入列表，通过在 rank 之间真实地搬运数据块
计算出各 rank 的输出列表，并统计每个 rank 收发的字节数。下面 rank r 持有 `[10r, 10r+1, …]`，方便看出每个数去了哪里。
"""),
    code("""
n = 4
xs = [np.arange(4) + 10 * r for r in range(n)]
cluster = VirtualCluster(n)
results = {   # (English, 中文) name → the output on each rank
    ("broadcast(src=0)", "广播（src=0）"): cluster.broadcast(xs, src=0),
    ("reduce(dst=0)", "Reduce（dst=0）"): cluster.reduce(xs, dst=0),
    ("all_reduce(sum)", "AllReduce（求和）"): cluster.all_reduce(xs),
    ("all_reduce(max)", "AllReduce（最大值）"): cluster.all_reduce(xs, op="max"),
    ("all_gather", "AllGather"): cluster.all_gather(xs),
    ("reduce_scatter(sum)", "ReduceScatter（求和）"): cluster.reduce_scatter(xs),
    ("all_to_all", "AllToAll"): cluster.all_to_all(xs),
}
print(bi("input", "输入"))
for r in range(n):
    print(f"  rank {r}: {xs[r]}")
for (en, zh), outs in results.items():
    print("\\n" + bi(en, zh))
    for r, o in enumerate(outs):
        print(f"  rank {r}: {o}")
"""),
    pair(r"""
Each collective runs as a sequence of steps. Below, one row per collective on 4 ranks, one column per step: cell
(rank, chunk) shows how many ranks' data that rank's copy of that chunk holds (0 = not there yet). Broadcast and
reduce move the whole message along a chain; the others move one chunk per rank per step. For all-to-all, column
c is the slot that receives rank c's data. The explorer at the end of the chapter lets you step through them one
at a time.
""", r"""
每种集合通信都由一系列步骤组成。下图每行是 4 个 rank 上的一种集合通信，每列是一个步骤：格子 (rank, 数据块) 表示该 rank
手中这个数据块已包含多少个 rank 的数据（0 = 还没有）。广播和 Reduce 沿一条链传递整条消息；其余的每一步每个 rank 传一个
数据块。对 AllToAll，第 c 列是接收 rank c 数据的位置。本章末尾的探索器可以一步一步地查看。
"""),
    code("""
ops = ["broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all", "all_reduce"]
fig, axes = plt.subplots(len(ops), 7, figsize=(13, 11), layout="constrained")
for row, op in zip(axes, ops):
    vc, _ = view.run_steps(op, 4)
    vmax = max(int(step.holdings.max()) for step in vc.steps)
    for ax in row:
        ax.axis("off")
    for ax, (i, step) in zip(row, enumerate(vc.steps)):
        ax.axis("on")
        view.draw_holdings(ax, step.holdings, vmax)
        ax.set_title(view.step_title(op, i, step.phase), fontsize=7)
plt.show()
"""),
    pair(r"""
What each one computes (n ranks, input $x_r$ on rank r):

| collective | rank r ends with | used by |
|---|---|---|
| broadcast | $x_{src}$ | initial weights in DDP |
| reduce | $\sum_i x_i$ on `dst` only | gathering a metric on rank 0 |
| all-reduce | $\sum_i x_i$ everywhere | DDP gradients, tensor-parallel row layers |
| all-gather | $[x_0, x_1, …, x_{n-1}]$ | ZeRO-3 / FSDP parameters before forward |
| reduce-scatter | chunk r of $\sum_i x_i$ | ZeRO-2/3 / FSDP gradients |
| all-to-all | chunk r of every $x_i$ | expert parallelism, sequence ↔ head re-sharding |

Note all-reduce = reduce-scatter followed by all-gather: that identity is the ring algorithm, and it is also why
ZeRO can shard gradients at no extra communication.
""", r"""
各自计算什么（n 个 rank，rank r 的输入为 $x_r$）：

| 集合通信 | rank r 最终得到 | 用在哪里 |
|---|---|---|
| 广播 (Broadcast) | $x_{src}$ | DDP 中广播初始权重 |
| Reduce（规约） | 仅 `dst` 得到 $\sum_i x_i$ | 在 rank 0 上汇总指标 |
| AllReduce（全规约） | 所有 rank 得到 $\sum_i x_i$ | DDP 梯度、张量并行的行切分层 |
| AllGather（全收集） | $[x_0, x_1, …, x_{n-1}]$ | ZeRO-3 / FSDP 前向前收集参数 |
| ReduceScatter（规约-分散） | $\sum_i x_i$ 的第 r 块 | ZeRO-2/3 / FSDP 的梯度 |
| AllToAll（全对全） | 每个 $x_i$ 的第 r 块 | 专家并行、序列与注意力头之间的重新分片 |

注意 AllReduce = ReduceScatter 之后接 AllGather：这个恒等式就是环形算法，也是 ZeRO 能够分片梯度而不增加通信量的原因。
"""),
    pair(r"""
## Ring all-reduce, step by step

The ranks form a ring $0 → 1 → … → n-1 → 0$; each sends only to its right neighbour. The message is cut into n
chunks. In reduce-scatter step s (s = 0 … n−2) rank r sends chunk $(r-s-1) \bmod n$ to rank r+1, which adds it to
its own copy; after n−1 steps rank r holds chunk r summed over all ranks. Then n−1 all-gather steps pass the
finished chunks around the ring. Each step every rank sends one chunk of $M/n$ bytes, so each rank sends

$$2(n-1)\cdot\frac{M}{n} = \frac{2(n-1)}{n}M \quad\text{bytes}$$

(Patarasuk & Yuan 2009, who also prove it is the minimum). It barely grows with n: at most 2M per rank.
The heat maps show, after each step, how many ranks' data each rank's copy of each chunk contains (4 = complete).
""", r"""
## 环形 AllReduce，逐步演示

各 rank 组成一个环 $0 → 1 → … → n-1 → 0$，每个 rank 只向右边的邻居发送。消息被切成 n 块。在 ReduceScatter 的第 s 步
（s = 0 … n−2）rank r 把第 $(r-s-1) \bmod n$ 块发给 rank r+1，后者把它加到自己的副本上；n−1 步之后 rank r 持有对所有
rank 求和后的第 r 块。接着 n−1 步 AllGather 把完成的数据块沿环传一圈。每一步每个 rank 发送一块 $M/n$ 字节，所以每个
rank 共发送

$$2(n-1)\cdot\frac{M}{n} = \frac{2(n-1)}{n}M \quad\text{字节}$$

（Patarasuk & Yuan 2009，他们也证明了这是下界）。它几乎不随 n 增长：每个 rank 最多 2M。
热力图显示每一步之后，每个 rank 手中每个数据块已经包含了多少个 rank 的数据（4 = 完整）。
"""),
    code("""
cluster = VirtualCluster(4)
cluster.all_reduce([np.arange(8.0) for _ in range(4)])
fig, axes = plt.subplots(1, len(cluster.steps), figsize=(14, 2.6), layout="constrained")
for ax, (i, step) in zip(axes, enumerate(cluster.steps)):
    view.draw_holdings(ax, step.holdings, vmax=4)
    ax.set_title(view.step_title("all_reduce", i, step.phase), fontsize=8)
plt.show()
print(bi("messages of each step (src→dst [chunk])", "每一步的消息（源→目的 [数据块]）"))
for i, step in enumerate(cluster.steps[1:], 1):
    label = bi(f"step {i} ({step.phase})", f"第 {i} 步（{view.zh_name(step.phase)}）")
    print(f"{label}: " + ", ".join(f"{t.src}→{t.dst} [{t.chunk}]" for t in step.transfers))
"""),
    pair(r"""
**Messages that don't divide.** A message of M elements is split like `np.array_split`: the first $M \bmod n$
chunks get one element more, nothing is padded. Rank r sends every chunk but r in reduce-scatter and every chunk
but r+1 in all-gather, so ranks differ by at most a few elements, and the total over ranks is exactly
$2(n-1)M$ bytes. The results equal numpy's sums for any size (tested with hypothesis in `tests/test_comm.py`).
""", r"""
**消息长度不能整除时。** M 个元素按 `np.array_split` 的方式切分：前 $M \bmod n$ 块各多一个元素，不做填充。rank r 在
ReduceScatter 中发送除第 r 块外的所有块，在 AllGather 中发送除第 r+1 块外的所有块，所以各 rank 之间最多相差几个元素，
而所有 rank 的总和恰好是 $2(n-1)M$ 字节。对任意长度，结果都等于 numpy 直接求和（`tests/test_comm.py` 用 hypothesis
测试）。
"""),
    code("""
cluster = VirtualCluster(4)
xs = [np.arange(10, dtype=np.float64) * (r + 1) for r in range(4)]
out = cluster.all_reduce(xs)
print(bi("chunk sizes (elements)", "数据块大小（元素数）") + ":", [len(c) for c in np.array_split(np.zeros(10), 4)])
print(bi("equal to numpy on every rank", "每个 rank 都与 numpy 的结果相同") + ":",
      all(np.array_equal(o, np.sum(xs, axis=0)) for o in out))
print(f"{bi('bytes sent per rank', '每个 rank 发送的字节数')}: {cluster.bytes_sent.tolist()}; "
      f"{bi('total', '总计')}: {cluster.bytes_sent.sum()} = 2(n-1)·M = {2 * 3 * xs[0].nbytes}")
"""),
    pair(r"""
**How big is that in practice?** The bf16 gradients of a 7-billion-parameter model are $7\times10^9 \times 2$ =
14 GB. A ring all-reduce over 8 ranks makes each rank send $2 \cdot 7/8 \cdot 14$ = 24.5 GB (GB = 10⁹ bytes) —
every training step.
""", r"""
**实际有多大？** 70 亿参数模型的 bf16 梯度为 $7\times10^9 \times 2$ = 14 GB。在 8 个 rank 上做环形 AllReduce，每个 rank
要发送 $2 \cdot 7/8 \cdot 14$ = 24.5 GB（GB = 10⁹ 字节）——每一个训练步都如此。
"""),
    code("""
grad_bytes = 7e9 * 2
print(bi("GB sent per rank (ring) for the 14 GB of bf16 gradients of a 7B model",
         "7B 模型 14 GB 的 bf16 梯度：每个 rank 发送的 GB 数（环形算法）"))
print(f"{'ranks':>5} {'AllReduce':>10} {'AllGather / ReduceScatter':>26}")
for n in (2, 8, 64, 1024):
    print(f"{n:5d} {ring_bytes_per_rank('all_reduce', grad_bytes, n) / 1e9:10.2f} "
          f"{ring_bytes_per_rank('all_gather', grad_bytes, n) / 1e9:26.2f}")
"""),
    pair(r"""
> **Common misconception.** *"An all-gather can be faked by repeating my own shard."* The seed code (the starting
> snippets this course corrects; see chapter 00) has an `FSDPCommunicationSim` that builds the "full" parameter as
> `param_shard.repeat(world_size)`: every rank then
> computes with n copies of its own slice, not with the model. A real all-gather fills slot i with rank i's
> shard, in rank order, and costs (n−1)/n × the full size per rank. Below, the seed's idea and the real all-gather
> differ on every rank; chapter 06 builds FSDP on the real one.
""", r"""
> **常见误区。** *"用自己的分片重复 n 次就能模拟 AllGather。"* 种子代码（本课程纠正的起始代码片段，见第 00 章）中的
> `FSDPCommunicationSim` 用
> `param_shard.repeat(world_size)` 构造"完整"参数：于是每个 rank 用的是自己那一片的 n 份拷贝，而不是模型本身。真正的
> AllGather 把第 i 个位置填上 rank i 的分片（按 rank 顺序），每个 rank 的通信量是完整大小的 (n−1)/n。下面种子代码的
> 做法与真实 AllGather 在每个 rank 上都不同；第 06 章在真实的 AllGather 上搭建 FSDP。
"""),
    code("""
full = np.arange(8.0)                       # the parameter, sharded over 4 ranks
shards = np.split(full, 4)
seed_idea = [np.tile(s, 4) for s in shards]  # the seed: repeat(world_size) of one's own shard
real = VirtualCluster(4).all_gather(shards)
print(bi("seed: own shard repeated; real: all-gather; full: the whole parameter",
         "种子代码：重复自己的分片；真实：AllGather；完整：整个参数"))
for r in range(4):
    print(f"rank {r}: {bi('seed', '种子代码')} {seed_idea[r]}  {bi('real', '真实')} {real[r]}  "
          f"{bi('real == full', '真实 == 完整')}: {np.array_equal(real[r], full)}")
"""),
    pair(r"""
## The α-β cost model

Sending m bytes between two ranks takes $\alpha + m\beta$: a latency α per message and $\beta = 1/B$ seconds per
byte. Counting steps gives each algorithm's time (Thakur, Rabenseifner & Gropp 2005, §4):

| algorithm | time |
|---|---|
| ring all-reduce | $2(n-1)\alpha + 2\frac{n-1}{n}M\beta$ |
| ring all-gather, ring reduce-scatter | $(n-1)\alpha + \frac{n-1}{n}M\beta$ |
| recursive-doubling all-reduce | $\lceil\log_2 n\rceil(\alpha + M\beta)$ |
| Rabenseifner all-reduce (halving + doubling) | $2\lceil\log_2 n\rceil\alpha + 2\frac{n-1}{n}M\beta$ |
| binomial-tree all-reduce (reduce + broadcast) | $2\lceil\log_2 n\rceil(\alpha + M\beta)$ |
| binomial-tree broadcast | $\lceil\log_2 n\rceil(\alpha + M\beta)$ |

The ring is bandwidth-optimal but pays $2(n-1)$ latencies: for small messages on many ranks, log-depth
algorithms win. On paper Rabenseifner's algorithm has both optima; in practice its partners are far apart in the
network (contention the α-β model ignores), while a ring uses only neighbour links. NCCL picks among ring and
tree algorithms (and others) by message size and topology.
""", r"""
## α-β 代价模型

在两个 rank 之间发送 m 字节耗时 $\alpha + m\beta$：每条消息的延迟 α，加上每字节 $\beta = 1/B$ 秒。数一数各算法的步骤就得到
它们的时间（Thakur、Rabenseifner 与 Gropp 2005，第 4 节）：

| 算法 | 时间 |
|---|---|
| 环形 AllReduce | $2(n-1)\alpha + 2\frac{n-1}{n}M\beta$ |
| 环形 AllGather、环形 ReduceScatter | $(n-1)\alpha + \frac{n-1}{n}M\beta$ |
| 递归倍增 AllReduce | $\lceil\log_2 n\rceil(\alpha + M\beta)$ |
| Rabenseifner AllReduce（递归减半 + 倍增） | $2\lceil\log_2 n\rceil\alpha + 2\frac{n-1}{n}M\beta$ |
| 二项树 AllReduce（Reduce + 广播） | $2\lceil\log_2 n\rceil(\alpha + M\beta)$ |
| 二项树广播 | $\lceil\log_2 n\rceil(\alpha + M\beta)$ |

环形算法在带宽上最优，但要付出 $2(n-1)$ 次延迟：消息小、rank 多时，对数深度的算法更快。纸面上 Rabenseifner 算法两方面
都最优；但实际中它的通信对象在网络上相距很远（α-β 模型忽略了这种链路争用），而环形只用相邻链路。NCCL 按消息大小和拓扑在环形、
树形等算法之间选择。
"""),
    code("""
n, alpha, bw = 64, 5e-6, 25e9    # 64 ranks, 5 µs per message, 25 GB/s links
sizes = np.logspace(3, 10, 50)
names = {"ring_all_reduce": "ring / 环形", "recursive_doubling_all_reduce": "recursive doubling / 递归倍增",
         "rabenseifner_all_reduce": "Rabenseifner", "tree_all_reduce": "binomial tree / 二项树"}
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
for algo, name in names.items():
    ax.loglog(sizes, [cost.collective_time(algo, m, n, alpha=alpha, bandwidth=bw) for m in sizes], label=name)
ax.set_xlabel("message (bytes) / 消息大小（字节）")
ax.set_ylabel("seconds / 秒")
plots.title(ax, "All-reduce on 64 ranks, α = 5 µs, 25 GB/s", "64 个 rank 上的 AllReduce，α = 5 µs，25 GB/s")
ax.legend(fontsize=8)
plt.show()
for m in (1e3, 1e6, 1e9):
    best = min(cost.ALGORITHMS[:1] + cost.ALGORITHMS[3:6],
               key=lambda a: cost.collective_time(a, m, n, alpha=alpha, bandwidth=bw))
    print(bi(f"{m:.0e} bytes: fastest all-reduce is {best}", f"{m:.0e} 字节：最快的 AllReduce 是 {best}"))
"""),
    pair(r"""
**Algorithm bandwidth and bus bandwidth.** nccl-tests (NVIDIA/nccl-tests, `doc/PERFORMANCE.md`) reports two
numbers. The *algorithm bandwidth* is $S/t$, with S the operation's size (the all-reduce buffer, the all-gather
output). It falls as n grows, because each rank moves $2(n-1)/n \cdot S$, not S. The *bus bandwidth* multiplies
it by that factor — $2(n-1)/n$ for all-reduce, $(n-1)/n$ for all-gather, reduce-scatter and all-to-all, 1 for
broadcast and reduce — so it is the speed each link actually ran at, comparable with the hardware's peak for
any n. For a pure-bandwidth ring all-reduce, bus bandwidth = link bandwidth exactly:
""", r"""
**算法带宽与总线带宽。** nccl-tests（NVIDIA/nccl-tests 的 `doc/PERFORMANCE.md`）报告两个数。*算法带宽* 为 $S/t$，
S 为操作的数据量（AllReduce 的缓冲区，AllGather 的输出）。它随 n 增大而下降，因为每个 rank 搬运的是
$2(n-1)/n \cdot S$ 而不是 S。*总线带宽* 把它乘上这个系数——AllReduce 为 $2(n-1)/n$，AllGather、ReduceScatter 和
AllToAll 为 $(n-1)/n$，广播和 Reduce 为 1——于是它就是每条链路实际跑出的速度，无论 n 多大都可以和硬件峰值比较。对纯带宽
的环形 AllReduce，总线带宽恰好等于链路带宽：
"""),
    code("""
for n in (2, 8, 64):
    t = cost.collective_time("ring_all_reduce", 1e9, n, alpha=0.0, bandwidth=50e9)
    print(f"n = {n:2d}: {bi('time', '时间')} {t * 1e3:5.1f} ms, "
          f"{bi('algbw', '算法带宽')} {cost.algbw(1e9, t) / 1e9:5.1f} GB/s, "
          f"{bi('busbw', '总线带宽')} {cost.busbw('all_reduce', 1e9, t, n) / 1e9:5.1f} GB/s")
"""),
    pair(r"""
## The same collectives with real processes

`distlearn.launch.run` starts real `torch.distributed` processes (gloo on CPU) and runs
`distlearn.labs.collectives.run_collectives` on each: `dist.all_reduce`, `broadcast`, `reduce`, `all_gather`,
`reduce_scatter_tensor`, `all_to_all_single` and a ring of `send`/`recv`. Every rank's input is made of integers
so sums are exact in any order; every result must equal the virtual cluster's, bit for bit. The same worker runs
unchanged on GPUs: `torchrun --nproc-per-node 4 -m distlearn.labs.collectives`.
""", r"""
## 用真实进程运行同样的集合通信

`distlearn.launch.run` 启动真实的 `torch.distributed` 进程（CPU 上用 gloo），在每个进程中运行
`distlearn.labs.collectives.run_collectives`：`dist.all_reduce`、`broadcast`、`reduce`、`all_gather`、
`reduce_scatter_tensor`、`all_to_all_single` 以及一圈 `send`/`recv`。每个 rank 的输入都是整数，所以求和顺序不影响结果；
每个结果都必须与虚拟集群的结果逐位相同。同一个 worker 在 GPU 上可原样运行：
`torchrun --nproc-per-node 4 -m distlearn.labs.collectives`。
"""),
    code("""
world_size, length = 4, 12
real = launch.run(lab.run_collectives, world_size, length, 0)
xs = [lab.rank_input(r, world_size, length) for r in range(world_size)]
vc = VirtualCluster(world_size)
for r in range(world_size):
    vc.send(xs[r], r, (r + 1) % world_size)
virtual = {
    "all_reduce_sum": vc.all_reduce(xs), "all_reduce_max": vc.all_reduce(xs, op="max"),
    "all_reduce_mean": vc.all_reduce(xs, op="mean"), "broadcast": vc.broadcast(xs, src=0),
    "reduce": vc.reduce(xs, dst=0), "all_gather": vc.all_gather(xs), "reduce_scatter": vc.reduce_scatter(xs),
    "all_to_all": vc.all_to_all(xs), "send_recv": [vc.recv((r - 1) % world_size, r) for r in range(world_size)],
}
for key, per_rank in virtual.items():
    ranks = [0] if key == "reduce" else range(world_size)   # reduce: only dst's result is defined
    same = all(np.array_equal(real[r][key], per_rank[r]) for r in ranks)
    print(f"{key:16s} {bi('gloo == virtual cluster', 'gloo == 虚拟集群')}: {same}")
"""),
    pair(r"""
## Timing all-reduce and fitting α and β

Now we time a real gloo all-reduce on 2 processes for messages from 4 KB to 32 MB and fit the ring model's α and
bandwidth to the measurements (`cost.fit_alpha_beta`, least squares on relative error). On one machine gloo sends
every message through the operating system's loopback network stack, and each call also pays Python's and gloo's
own overhead, so the fitted α is the fixed cost of a whole small all-reduce call — far larger than the latency of a
GPU interconnect — and the bandwidth is that of memory copies through the kernel, not of a network link. The
numbers differ from machine to machine and from run to run (this cell's output is not compared by the tests).
""", r"""
## 测量 AllReduce 的时间并拟合 α 与 β

下面在 2 个进程上测量真实 gloo AllReduce 在 4 KB 到 32 MB 消息上的时间，并用测量值拟合环形模型的 α 和带宽
（`cost.fit_alpha_beta`，按相对误差做最小二乘）。在一台机器上，gloo 的每条消息都要经过操作系统的回环网络协议栈，每次调用
还要付出 Python 和 gloo 自身的开销，所以拟合出的 α 是一次小 AllReduce 调用的固定开销——远大于 GPU 互连的延迟；带宽则是经由
内核的内存拷贝速度，而不是网络链路的带宽。这些数字因机器而异，每次运行也不同（测试不比较这个单元格的输出）。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
sizes = [4096, 65536, 1 << 20, 8 << 20, 32 << 20]
times = launch.run(lab.time_all_reduce, 2, sizes, 5)[0]
fit = cost.fit_alpha_beta(sizes, times, world_size=2)
print(bi(f"fitted α = {fit.alpha * 1e6:.1f} µs, bandwidth = {fit.bandwidth / 1e9:.2f} GB/s",
         f"拟合得到 α = {fit.alpha * 1e6:.1f} µs，带宽 = {fit.bandwidth / 1e9:.2f} GB/s"))
for m, t in zip(sizes, times):
    print(f"{m:>10d} B: {bi('measured', '实测')} {t * 1e3:8.3f} ms, "
          f"{bi('model', '模型')} {fit.predict(m) * 1e3:8.3f} ms, "
          f"{bi('busbw', '总线带宽')} {cost.busbw('all_reduce', m, t, 2) / 1e9:5.2f} GB/s")
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
ax.loglog(sizes, times, "o", label="measured (gloo) / 实测")
grid = np.logspace(np.log10(sizes[0]), np.log10(sizes[-1]), 50)
ax.loglog(grid, fit.predict(grid), label="α-β fit / 拟合")
ax.set_xlabel("message (bytes) / 消息大小（字节）")
ax.set_ylabel("seconds / 秒")
ax.legend()
plt.show()
"""),
    pair(r"""
## Explorer

Pick a collective, a world size and a step. The left panel shows which rank holds which chunk after that step
(numbers: how many ranks' data it contains); the right panel the bytes each rank has sent so far for a message
of the chosen size, beside the closed form for the whole collective.
""", r"""
## 探索器

选择一种集合通信、world size 和步骤。左图显示该步之后哪个 rank 持有哪个数据块（数字：已包含多少个 rank 的数据）；右图
显示在所选消息大小下每个 rank 到目前为止发送的字节数，旁边的虚线是整个集合通信的公式值。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
view.explorer()
"""),
    pair(r"""
## Summary

- Collectives: broadcast, reduce, all-reduce, all-gather, reduce-scatter, all-to-all, send/recv; all-reduce =
  reduce-scatter + all-gather.
- Ring all-reduce: 2(n−1) steps, each rank sends 2(n−1)/n × M (24.5 GB for the bf16 gradients of a 7B model on
  8 ranks); all-gather and reduce-scatter send (n−1)/n × M. Uneven messages: split like `np.array_split`, no
  padding.
- α-β model: the ring is bandwidth-optimal, log-depth algorithms are latency-optimal; bus bandwidth =
  algorithm bandwidth × 2(n−1)/n for all-reduce (nccl-tests).
- Real gloo collectives give the same results as the virtual cluster, bit for bit.
""", r"""
## 小结

- 集合通信：广播、Reduce、AllReduce、AllGather、ReduceScatter、AllToAll、send/recv；AllReduce = ReduceScatter +
  AllGather。
- 环形 AllReduce：2(n−1) 步，每个 rank 发送 2(n−1)/n × M（7B 模型的 bf16 梯度在 8 个 rank 上为 24.5 GB）；AllGather 和
  ReduceScatter 发送 (n−1)/n × M。不能整除的消息按 `np.array_split` 切分，不填充。
- α-β 模型：环形算法带宽最优，对数深度的算法延迟最优；AllReduce 的总线带宽 = 算法带宽 × 2(n−1)/n（nccl-tests）。
- 真实 gloo 集合通信与虚拟集群的结果逐位相同。
"""),
    pair(r"""
## Exercises

Open [exercises/02_collectives.ipynb](../exercises/02_collectives.ipynb): implement ring all-reduce with
`send`/`recv` on the virtual cluster, the bytes per rank, the bus bandwidth, and the α-β time of a ring all-reduce.
Each has a check cell. Solutions: [solutions/02_collectives.ipynb](../solutions/02_collectives.ipynb).

**Next / 下一章:** [03 · Data parallelism](03_data_parallel.ipynb).
""", r"""
## 练习

打开 [exercises/02_collectives.ipynb](../exercises/02_collectives.ipynb)：在虚拟集群上用 `send`/`recv` 实现环形
AllReduce，计算每个 rank 的字节数、总线带宽和环形 AllReduce 的 α-β 时间。每道题都有检查单元格。参考答案：
[solutions/02_collectives.ipynb](../solutions/02_collectives.ipynb)。

**下一章 / Next:** [03 · 数据并行](03_data_parallel.ipynb)。
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "02_collectives.ipynb")
