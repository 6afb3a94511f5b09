"""Builds notebooks/07_overlap_prefetch.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/07_overlap_prefetch.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/07_overlap_prefetch.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 07 · Overlap and prefetch

FSDP / ZeRO-3 all-gathers every unit's parameters before using them (chapter 06). If each all-gather waited for
the previous computation to end, the GPU would sit idle during all communication. **Prefetching** issues the next
all-gather while the current unit computes, so communication hides behind computation — at a price in memory.

**Learning objectives.** After this chapter you can

- draw the timeline of one FSDP step on two streams (compute, communication): forward all-gathers, backward
  all-gathers and reduce-scatters;
- derive the closed form of the seed code (the starting snippets this course corrects; see chapter 00) for uniform
  units, comm + compute + (n − 1)·max(comm, compute), and say when it
  does not apply (non-uniform units, backward, reduce-scatter, limits);
- compute the **memory price of prefetching**: how many units are unsharded at once, and why FSDP limits the
  all-gathers in flight;
- compare `reshard_after_forward=True` (ZeRO-3) with `False` (ZeRO-2) in time, traffic and memory;
- check the simulated order of collectives against the order real FSDP2 issues them.
""", r"""
# 07 · 通信与计算重叠、预取

FSDP / ZeRO-3 在使用每个单元的参数之前都要先 AllGather（第 06 章）。如果每次 AllGather 都等上一个计算结束才开始，
所有通信期间 GPU 都会空闲。**预取**在当前单元计算的同时发起下一次 AllGather，让通信藏在计算后面——代价是显存。

**学习目标。** 学完本章，你能够

- 画出一次 FSDP 迭代在两个流（计算、通信）上的时间线：前向 AllGather、反向 AllGather 和 ReduceScatter；
- 推导种子代码（本课程纠正的起始代码片段，见第 00 章）中均匀单元的闭式解 comm + compute + (n − 1)·max(comm, compute)，并说明何时它不成立（单元不均匀、
  反向、ReduceScatter、限流）；
- 计算**预取的显存代价**：同一时刻有多少单元处于未分片状态，以及 FSDP 为什么要限制同时进行的 AllGather 数量；
- 比较 `reshard_after_forward=True`（ZeRO-3）与 `False`（ZeRO-2）在时间、通信量和显存上的差别；
- 把模拟出的集合通信顺序与真实 FSDP2 发出的顺序进行对照。
"""),
    code("""
import matplotlib.pyplot as plt
from distlearn import launch, overlap
from distlearn.widgets.overlap import plot_timeline
"""),
    pair(r"""
## The model: two streams and a few rules

`distlearn.overlap.simulate` follows one rank. A **compute stream** runs forward of units 0 … n−1, then backward of
units n−1 … 0. One **communication channel** runs collectives one at a time, in the order they were issued
(all-gathers and reduce-scatters share the links). The rules, after PyTorch FSDP's runtime
(`_runtime_utils.py` for FSDP1, `_fully_shard/_fsdp_state.py` for FSDP2):

- a unit computes when its parameters have arrived and the previous computation is done;
- **prefetch depth k**: the all-gather for the computation k places ahead is issued when the current one starts
  (k = 0: only when the unit is reached). Backward all-gathers wait for the forward to end;
- after a unit's backward its gradient is reduce-scattered;
- **`max_inflight`**: an all-gather is issued only while fewer units than this are unsharded (FSDP1's
  `limit_all_gathers=True` keeps 2);
- **memory**: unsharded parameters live from the issue of their all-gather until freed (after the forward when
  resharding, else after the backward); an unsharded gradient lives from its backward until its reduce-scatter ends.

For n identical units, forward only, with prefetch the first all-gather and the last computation are exposed, and
every other unit costs the slower of the two:
$$T_\text{prefetch} = t_\text{comm} + t_\text{compute} + (n-1)\max(t_\text{comm}, t_\text{compute}),\qquad
T_\text{serial} = n\,(t_\text{comm} + t_\text{compute}).$$
""", r"""
## 模型：两个流和几条规则

`distlearn.overlap.simulate` 跟踪一个 rank。**计算流**先依次执行单元 0 … n−1 的前向，再执行单元 n−1 … 0 的反向。
一个**通信通道**按发起顺序逐个执行集合通信（AllGather 和 ReduceScatter 共用链路）。规则取自 PyTorch FSDP 的
运行时代码（FSDP1 的 `_runtime_utils.py`，FSDP2 的 `_fully_shard/_fsdp_state.py`）：

- 某单元的参数到齐且上一个计算结束后，它才开始计算；
- **预取深度 k**：当前计算开始时，发起其后第 k 个计算所需的 AllGather（k = 0：轮到该单元时才发起）。反向的
  AllGather 要等前向结束；
- 某单元反向结束后，它的梯度做 ReduceScatter；
- **`max_inflight`**：只有当未分片的单元少于该值时才发起新的 AllGather（FSDP1 的 `limit_all_gathers=True` 取 2）；
- **显存**：未分片的参数从其 AllGather 发起时开始存在，直到被释放（重新分片时在前向之后，否则在反向之后）；
  未分片的梯度从反向开始存在，直到其 ReduceScatter 结束。

对 n 个相同的单元、只看前向：有预取时，第一次 AllGather 和最后一次计算无法被掩盖，其余每个单元耗时取两者中较慢的：
$$T_\text{prefetch} = t_\text{comm} + t_\text{compute} + (n-1)\max(t_\text{comm}, t_\text{compute}),\qquad
T_\text{serial} = n\,(t_\text{comm} + t_\text{compute}).$$
"""),
    code("""
seed = overlap.SeedPrefetchSimulator(n_units=12)          # the seed's numbers: compute 0.1 s, comm 0.08 s
fwd_pf = overlap.uniform(12, 0.1, 0.08, include_backward=False)
fwd_no = overlap.uniform(12, 0.1, 0.08, include_backward=False, forward_prefetch=0)
W, WO = "with prefetch / 有预取", "without / 无预取"
print(f"seed closed form / 种子闭式解: {W} {seed.run_with_prefetch():.2f}, {WO} {seed.run_without_prefetch():.2f}")
print(f"event simulation / 事件模拟:   {W} {fwd_pf.total_time:.2f}, {WO} {fwd_no.total_time:.2f}")
print(f"units unsharded at once / 同时未分片的单元: {W} {fwd_pf.peak_units}, {WO} {fwd_no.peak_units}")
"""),
    pair(r"""
> **Common misconception.** *"Prefetching is free, and one formula gives the step time."* The seed's
> `PrefetchSimulator` models the **forward pass only**, with **identical units**, and counts **no memory**: its
> speed-up looks free. In a real step the backward does an all-gather *and* a reduce-scatter per unit on the same
> links, units differ in size (embeddings, LM head, MoE layers), and every prefetched unit is one more unit of
> unsharded parameters in memory: with depth k, k + 1 units are unsharded at once, which is why FSDP1 rate-limits
> all-gathers (`limit_all_gathers`) and FSDP2 exposes the prefetch explicitly
> (`set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`). The closed form is still right for what
> it covers — the simulation reproduces it exactly (a test checks it on random cases).
""", r"""
> **常见误区。** *“预取不花代价，一个公式就能算出迭代时间。”* 种子代码的 `PrefetchSimulator` 只模拟**前向**，
> 所有单元**完全相同**，而且**不计显存**：它算出的加速看起来是白来的。在真实的一步中，反向对每个单元在同一条链路上
> 既要 AllGather 又要 ReduceScatter；单元大小各不相同（嵌入层、LM head、MoE 层）；每多预取一个单元，就多一个单元的
> 未分片参数留在显存里：预取深度为 k 时，同一时刻有 k + 1 个单元未分片。这正是 FSDP1 要限制 AllGather 数量
> （`limit_all_gathers`）、FSDP2 要显式设置预取（`set_modules_to_forward_prefetch` /
> `set_modules_to_backward_prefetch`）的原因。闭式解在它覆盖的范围内仍然正确——事件模拟能精确复现它（有测试在
> 随机用例上检查）。
"""),
    pair(r"""
## A whole step: forward and backward prefetch

Six identical units, forward time 1, backward 2, all-gather and reduce-scatter 0.6 each. Without prefetch nothing
overlaps; with depth 1 (FSDP2's default in backward, FSDP1's `BACKWARD_PRE`) the compute stream waits only for the
first all-gather of each phase and the last reduce-scatter. The lower panel counts unsharded units (parameters
plus gradients).
""", r"""
## 完整的一步：前向与反向预取

6 个相同的单元，前向时间 1，反向 2，AllGather 和 ReduceScatter 各 0.6。没有预取时什么都不重叠；预取深度为 1 时
（FSDP2 反向的默认行为，FSDP1 的 `BACKWARD_PRE`），计算流只需等待每个阶段的第一次 AllGather 和最后一次
ReduceScatter。下方的图统计未分片的单元数（参数加梯度）。
"""),
    code("""
for depth in (0, 1):
    r = overlap.uniform(6, 1.0, 0.6, forward_prefetch=depth, backward_prefetch=depth)
    print(f"depth / 深度 {depth}: step time / 迭代时间 {r.total_time:.1f}, exposed comm / 暴露的通信 {r.exposed_comm:.1f}, "
          f"peak unsharded / 峰值未分片 {r.peak_bytes:.0f} unit-sizes / 个单元大小")
    plot_timeline(r, title=(f"prefetch depth {depth}", f"预取深度 {depth}"))
    plt.show()
"""),
    pair(r"""
## Per-unit costs: when the closed form fails

Real units are not identical. Take 8 units with forward time 1, where unit 4 is four times larger and its
all-gather takes 2.4 instead of 0.3. The closed form with the *average* all-gather time predicts one number; the
simulation shows that depth 1 cannot hide the big all-gather (it starts only one unit ahead), while deeper prefetch
can — and pays for it in memory. A limit of 2 unsharded units (depth 3, limit 2) lowers the peak from 7 to 5
unit-sizes, but the forward time goes back up from 8.3 to 9.7, the time of depth 1: the memory is saved, the
speed-up is lost.
""", r"""
## 各单元代价不同：闭式解失效的时候

真实的单元并不相同。取 8 个前向时间为 1 的单元，其中单元 4 大四倍，它的 AllGather 需要 2.4 而不是 0.3。用*平均*
AllGather 时间代入闭式解会得到一个数；模拟显示深度为 1 时这次大的 AllGather 无法被掩盖（它只提前一个单元开始），
更深的预取可以掩盖它——但要付出显存。把未分片单元数限制为 2（深度 3、限制 2），峰值从 7 降到 5 个单元大小，
但前向时间从 8.3 又升回 9.7，与深度 1 相同：省下了显存，却失去了加速。
"""),
    code("""
fw, ag, size = [1.0] * 8, [0.3, 0.3, 0.3, 0.3, 2.4, 0.3, 0.3, 0.3], [1, 1, 1, 1, 4, 1, 1, 1]
print(f"closed form with the mean all-gather / 用平均 AllGather 的闭式解: {overlap.closed_form_forward(8, 1.0, sum(ag) / 8):.2f}")
print(f"{'depth / 深度':<14}{'limit / 限制':<14}{'forward time / 前向时间':>24}{'peak unsharded (unit-sizes) / 峰值未分片':>42}")
for depth, limit in [(0, None), (1, None), (2, None), (3, None), (3, 2)]:
    r = overlap.simulate(fw, ag, unit_bytes=size, include_backward=False, forward_prefetch=depth, max_inflight=limit)
    lim = "none / 无" if limit is None else str(limit)
    print(f"{depth:<14}{lim:<14}{r.total_time:>24.1f}{r.peak_bytes:>42.0f}")
"""),
    pair(r"""
## Resharding after forward: ZeRO-3 or ZeRO-2

With `reshard_after_forward=False` (FSDP `SHARD_GRAD_OP`, ZeRO-2-like) a unit stays unsharded from its forward to
its backward: no backward all-gather (2Ψ of traffic instead of 3Ψ), a shorter step when communication is the
bottleneck, and **all units unsharded at once** at the turn from forward to backward.
""", r"""
## 前向后是否重新分片：ZeRO-3 还是 ZeRO-2

设置 `reshard_after_forward=False`（FSDP 的 `SHARD_GRAD_OP`，类似 ZeRO-2）时，单元从前向到反向一直保持未分片：
反向不需要 AllGather（通信量 2Ψ 而不是 3Ψ），在通信是瓶颈时迭代更短，但在前向转入反向时**所有单元同时未分片**。
"""),
    code("""
for reshard in (True, False):
    r = overlap.uniform(8, 1.0, 1.5, reshard_after_forward=reshard)
    n_ag = sum(o.kind == "all_gather" for o in r.ops)
    print(f"reshard_after_forward={reshard!s:<5}: step / 迭代 {r.total_time:5.1f}, all-gathers / AllGather 次数 {n_ag:>2}, "
          f"peak unsharded params / 峰值未分片参数 {r.peak_units} of 8 units / 个单元（共 8 个）")
"""),
    pair(r"""
## Checked against real FSDP2

On CPU with gloo the timings mean little, but the **order** of collectives is what the rules decide. The lab
`distlearn.labs.fsdp.count_collectives` wraps the two functions FSDP2 calls for every unit
(`dist.all_gather_single`, `dist.reduce_scatter_single`) and records one training step of a 4-block GPT with
`fully_shard` on each block and on the root (left at the default, so FSDP2 keeps the root unsharded after
forward). The simulation of the 4 blocks with backward prefetch 1 (FSDP2's implicit backward prefetch) plus the
root's one all-gather and one reduce-scatter must give the same sequence.
""", r"""
## 与真实 FSDP2 对照

在 CPU 上用 gloo 测时间意义不大，但集合通信的**顺序**正是由这些规则决定的。实验
`distlearn.labs.fsdp.count_collectives` 包装了 FSDP2 对每个单元调用的两个函数（`dist.all_gather_single`、
`dist.reduce_scatter_single`），记录一个 4 块 GPT 的一次训练迭代：对每个块和根模块调用 `fully_shard`（根模块用默认
设置，因此 FSDP2 在前向后不对它重新分片）。对 4 个块、反向预取深度 1（FSDP2 隐式的反向预取）的模拟，再加上根单元的
一次 AllGather 和一次 ReduceScatter，必须得到相同的序列。
"""),
    code("""
from distlearn.labs import fsdp as lab
orders = launch.run(lab.collective_orders, 2, 4, timeout=300)[0]
for reshard in (True, False):
    real = orders[reshard]
    sim = overlap.uniform(4, 1.0, 0.5, reshard_after_forward=reshard)
    sim_order = ["all_gather"] + [o.kind for o in sim.ops if o.stream == "comm"] + ["reduce_scatter"]
    short = lambda seq: " ".join("AG" if k == "all_gather" else "RS" for k in seq)
    print(f"reshard_after_forward={reshard}\\n  real FSDP2 / 真实: {short(real)}\\n  simulated  / 模拟: {short(sim_order)}"
          f"\\n  equal / 一致: {real == sim_order}")
"""),
    pair(r"""
## Explorer

Change the ratio of all-gather time to forward time, the prefetch depth, the limit on unsharded units, the number
of units and the resharding: watch the exposed communication and the memory curve.
""", r"""
## 探索器

改变 AllGather 时间与前向时间之比、预取深度、未分片单元数的上限、单元数以及是否重新分片：观察暴露出来的通信时间和
显存曲线。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import overlap as overlap_explorer
overlap_explorer.explorer()
"""),
    pair(r"""
## Summary

- Prefetching overlaps the next all-gather with the current computation; for identical units the forward takes
  comm + compute + (n − 1)·max(comm, compute) instead of n·(comm + compute).
- A step also has a backward with an all-gather and a reduce-scatter per unit on the same links; non-uniform units
  need a timeline, not a formula.
- Each level of prefetch keeps one more unit unsharded: speed is paid in memory. Limits on in-flight all-gathers
  (FSDP1's `limit_all_gathers`, FSDP2's explicit prefetch lists) bound that memory.
- Not resharding after forward (ZeRO-2 / `SHARD_GRAD_OP`) removes the backward all-gather but keeps every unit
  unsharded between forward and backward.
- The simulated order of collectives matches real FSDP2's.
""", r"""
## 小结

- 预取让下一次 AllGather 与当前计算重叠；对相同的单元，前向耗时从 n·(comm + compute) 降为
  comm + compute + (n − 1)·max(comm, compute)。
- 一次迭代还有反向：每个单元在同一条链路上要做一次 AllGather 和一次 ReduceScatter；单元不均匀时需要时间线，而不是
  公式。
- 每多一级预取，就多一个单元保持未分片：速度是用显存换来的。限制同时进行的 AllGather（FSDP1 的
  `limit_all_gathers`、FSDP2 的显式预取列表）可以约束这部分显存。
- 前向后不重新分片（ZeRO-2 / `SHARD_GRAD_OP`）省掉了反向的 AllGather，但在前向和反向之间所有单元都未分片。
- 模拟出的集合通信顺序与真实 FSDP2 一致。
"""),
    pair(r"""
## Exercises

Open [exercises/07_overlap_prefetch.ipynb](../exercises/07_overlap_prefetch.ipynb): the prefetch closed form, the
peak number of unsharded units, and the step time without any overlap. Solutions:
[solutions/07_overlap_prefetch.ipynb](../solutions/07_overlap_prefetch.ipynb).

**Next / 下一章:** [08 · Activation memory and how to save it](08_activation_memory.ipynb).
""", r"""
## 练习

打开 [exercises/07_overlap_prefetch.ipynb](../exercises/07_overlap_prefetch.ipynb)：预取的闭式解、未分片单元数的
峰值，以及完全不重叠时的迭代时间。参考答案：[solutions/07_overlap_prefetch.ipynb](../solutions/07_overlap_prefetch.ipynb)。

**下一章 / Next:** [08 · 激活显存与省显存技术](08_activation_memory.ipynb)。
"""),
]

nbformat.write(new_notebook(cells), HERE / "07_overlap_prefetch.ipynb")
print("wrote", HERE / "07_overlap_prefetch.ipynb")
