"""Builds notebooks/06_zero_fsdp.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/06_zero_fsdp.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/06_zero_fsdp.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 06 · ZeRO and FSDP

Data parallelism (chapter 03) keeps a full copy of the parameters, gradients and optimizer state on every rank.
ZeRO and FSDP keep only a *shard* of them and fetch the rest when needed.

**Learning objectives.** After this chapter you can

- give the per-GPU model-state bytes and the communication volume per step of DDP and ZeRO stages 1, 2 and 3
  (2Ψ, 2Ψ, 2Ψ, 3Ψ) and name the FSDP sharding strategy each corresponds to;
- build FSDP's flat parameter by hand: flatten, chunk, **pad**, and gather back to the original shapes;
- explain FSDP2's per-parameter sharding on dim 0 and why some ranks may get nothing;
- compute FSDP units under a wrap policy on the meta device, and spot tied weights split across units;
- run the all-gather → compute → free → all-gather → backward → reduce-scatter → sharded step lifecycle with real
  arrays and see it reproduce unsharded training exactly;
- train a small GPT with real FSDP2 `fully_shard` on gloo and match the simulation.

Units: bytes; GB = 10⁹ bytes. Ψ is the number of parameters.
""", r"""
# 06 · ZeRO 与 FSDP

数据并行（第 03 章）在每个 rank 上都保存一整份参数、梯度和优化器状态。ZeRO 和 FSDP 每个 rank 只保存其中的一个
*分片*，需要时再把其余部分取回来。

**学习目标。** 学完本章，你能够

- 给出 DDP 与 ZeRO 阶段 1、2、3 每张 GPU 的模型状态字节数和每步通信量（2Ψ、2Ψ、2Ψ、3Ψ），并说出各自对应的 FSDP
  分片策略；
- 亲手构造 FSDP 的扁平参数 (FlatParameter)：展平、切块、**填充**，再收集回原来的形状；
- 解释 FSDP2 按参数在第 0 维分片，以及为什么有的 rank 可能一无所获；
- 在 meta 设备上按包装策略计算 FSDP 单元，并发现被拆到不同单元的共享（绑定）权重；
- 用真实数组跑一遍 AllGather → 计算 → 释放 → AllGather → 反向 → ReduceScatter → 分片优化器更新 的生命周期，
  并看到它与不分片训练的结果完全一致；
- 在 gloo 上用真实的 FSDP2 `fully_shard` 训练一个小 GPT，并与模拟结果对照。

单位：字节；GB = 10⁹ 字节。Ψ 表示参数个数。
"""),
    code("""
import numpy as np
import torch
from distlearn import fsdp, launch, memory
from distlearn.comm import VirtualCluster
from distlearn.i18n import bi
from distlearn.models import PRESETS, build_model, count_parameters
"""),
    pair(r"""
## ZeRO stages: what is sharded, what is sent

With mixed-precision Adam every parameter costs 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights,
momentum, variance) = 16 bytes (ZeRO, §3.1). Over a data-parallel degree $N_d$ (ZeRO, Figure 1):

| stage | per GPU | FSDP |
|---|---|---|
| 0 (DDP) | $16\Psi$ | `NO_SHARD` |
| 1 | $4\Psi + 12\Psi/N_d$ | — (FSDP has no optimizer-only mode) |
| 2 | $2\Psi + 14\Psi/N_d$ | `SHARD_GRAD_OP` (FSDP2: `reshard_after_forward=False`) |
| 3 | $16\Psi/N_d$ | `FULL_SHARD` (FSDP2: `reshard_after_forward=True`) |

Communication per step (ZeRO, §7): DDP all-reduces the gradients, which a ring does as a reduce-scatter plus an
all-gather: **2Ψ**. ZeRO-1 and ZeRO-2 reduce-scatter the gradients and all-gather the updated parameters: also
**2Ψ**, no extra cost. ZeRO-3 all-gathers the parameters in the forward, again in the backward, and reduce-scatters
the gradients: **3Ψ**, 1.5 × DDP. Each "Ψ" moves $(N_d-1)/N_d\cdot\Psi$ elements through every rank.
`HYBRID_SHARD` shards inside a node (`FULL_SHARD`) and replicates across nodes (DDP), so the 3Ψ of traffic stays on
the fast intra-node links and only the gradient all-reduce crosses nodes.
""", r"""
## ZeRO 各阶段：分片什么、发送什么

使用混合精度 Adam 时，每个参数占 2（bf16 权重）+ 2（bf16 梯度）+ 12（fp32 主权重、动量、方差）= 16 字节（ZeRO，
§3.1）。在数据并行度 $N_d$ 上（ZeRO，图 1）：

| 阶段 | 每张 GPU | FSDP |
|---|---|---|
| 0 (DDP) | $16\Psi$ | `NO_SHARD` |
| 1 | $4\Psi + 12\Psi/N_d$ | —（FSDP 没有只分片优化器状态的模式） |
| 2 | $2\Psi + 14\Psi/N_d$ | `SHARD_GRAD_OP`（FSDP2：`reshard_after_forward=False`） |
| 3 | $16\Psi/N_d$ | `FULL_SHARD`（FSDP2：`reshard_after_forward=True`） |

每步通信量（ZeRO，§7）：DDP 对梯度做 AllReduce（全规约），环形算法把它拆成一次 ReduceScatter 加一次 AllGather：
**2Ψ**。ZeRO-1 和 ZeRO-2 对梯度做 ReduceScatter，再对更新后的参数做 AllGather：同样是 **2Ψ**，没有额外代价。
ZeRO-3 在前向时 AllGather 参数，反向时再 AllGather 一次，然后对梯度做 ReduceScatter：**3Ψ**，是 DDP 的 1.5 倍。
每个 “Ψ” 让每个 rank 收发 $(N_d-1)/N_d\cdot\Psi$ 个元素。`HYBRID_SHARD` 在节点内分片（`FULL_SHARD`）、
在节点间复制（DDP），于是 3Ψ 的流量留在节点内的高速链路上，只有梯度的 AllReduce 跨节点。
"""),
    pair(r"""
The memory columns of the table below come from `distlearn.memory.model_state_bytes` (ZeRO's example: Ψ = 7.5 B,
$N_d$ = 64). The two byte columns are for a small Ψ = 8192 on 8 ranks in bf16. The column "measured" is not a
formula: `fsdp.step_traffic` runs each stage's collectives on a `VirtualCluster` with real arrays and reads the
bytes each rank sent. The column "formula" beside it is the 2Ψ or 3Ψ formula, comm_psi · (8 − 1)/8 · Ψ · 2 bytes;
the two agree.
""", r"""
下表中显存各列来自 `distlearn.memory.model_state_bytes`（ZeRO 论文的例子：Ψ = 7.5 B，$N_d$ = 64）。两个字节数列
用较小的 Ψ = 8192、8 个 rank、bf16。“实测”列不是公式：`fsdp.step_traffic` 在 `VirtualCluster` 上用真实数组执行
每个阶段的集合通信，并读取每个 rank 实际发送的字节数。旁边的“公式”列是 2Ψ 或 3Ψ 公式
comm_psi · (8 − 1)/8 · Ψ · 2 字节；两者一致。
"""),
    code("""
psi, dp = 7_500_000_000, 64
print(f"{'stage / 阶段':<13}{'params / 参数':>14}{'grads / 梯度':>14}{'optim / 优化器':>16}{'total / 总计':>14}"
      f"{'comm / 通信':>12}{'measured / 实测':>17}{'formula / 公式':>16}  FSDP")
print(f"{'':<13}{'GB':>14}{'GB':>14}{'GB':>16}{'GB':>14}{'':>12}{'B':>17}{'B':>16}")
for row in fsdp.zero_stage_table(psi, dp):
    s = row["zero_stage"]
    small = fsdp.zero_stage_table(8192, 8)[s]["sent_bytes_per_rank"]
    print(f"{s:<13}{row['params']/1e9:>14.2f}{row['grads']/1e9:>14.2f}{row['optimizer']/1e9:>16.2f}"
          f"{row['total']/1e9:>14.2f}{row['comm_psi']:>11}Ψ{fsdp.step_traffic(s, 8192, 8):>17}{small:>16.0f}  "
          f"{bi(row['fsdp'], row['fsdp_zh'])}")
"""),
    pair(r"""
> **Common misconception.** *"FSDP divides memory by the number of GPUs."* The seed code (the starting snippets this
> course corrects; see chapter 00) has a `calc_memory` that computes
> `(param + grad + optim) / n_gpus` with fp32 Adam (4 + 4 + 8 bytes). For pure data parallelism on 8 GPUs that is
> right for the *sharded* model states (7 B → 112 GB with DDP, 14 GB with FSDP), but ZeRO and FSDP shard over the
> **data-parallel degree**, not over the GPUs: with tensor parallelism of 8 on the same 8 GPUs, $N_d = 1$, each
> GPU already holds Ψ/8 parameters, and FSDP has nobody to shard with. It also forgets what FSDP must
> *unshard*: the units being computed (below) do not shrink with more GPUs.
""", r"""
> **常见误区。** *“FSDP 把显存除以 GPU 数量。”* 种子代码（本课程纠正的起始代码片段，见第 00 章）中的 `calc_memory` 用 fp32 Adam（4 + 4 + 8 字节）计算
> `(param + grad + optim) / n_gpus`。对 8 张 GPU 上的纯数据并行，这对*分片后*的模型状态是对的（7 B 模型：DDP
> 112 GB，FSDP 14 GB），但 ZeRO 和 FSDP 是按**数据并行度**分片，而不是按 GPU 数量：在同样 8 张 GPU 上做 8 路张量并行时
> $N_d = 1$，每张 GPU 已经只有 Ψ/8 个参数，FSDP 找不到可以一起分片的伙伴。它还忘了 FSDP 必须*临时还原*的部分：
> 正在计算的单元（见下文）不会随 GPU 增多而变小。
"""),
    code("""
print("seed calc_memory, 7B on 8 GPUs / 种子 calc_memory，7B、8 张 GPU：", fsdp.seed_calc_memory(7, 8, "ddp"), "GB DDP,",
      fsdp.seed_calc_memory(7, 8, "fsdp"), "GB FSDP")
fp32 = lambda n, dp: memory.model_state_bytes(n, dp=dp, zero_stage=3, precision="fp32").total / 1e9
print("ZeRO-3, dp = 8 (8 GPUs, no TP) / ZeRO-3，dp = 8（8 张 GPU，无张量并行）：", fp32(7_000_000_000, 8), "GB")
print("ZeRO-3, TP = 8 → dp = 1, Ψ/8 per GPU / ZeRO-3，TP = 8 → dp = 1，每张 GPU Ψ/8：", fp32(7_000_000_000 // 8, 1),
      "GB (not 14 / 8 / 不是 14 / 8)")
"""),
    pair(r"""
## Flat parameters and padding (FSDP1)

FSDP1 treats each unit's parameters as one **flat parameter**: it flattens and concatenates them into a vector of
N elements, splits it with `torch.chunk` into `world_size` pieces, and **right-pads every piece to the size of the
first one**, ⌈N / world_size⌉ (`FlatParamHandle._get_shard` in `torch/distributed/fsdp/_flat_param.py`). All shards
then have the same size, which all-gather and reduce-scatter need. `torch.chunk` may return fewer pieces than
ranks: a rank past the end holds **only padding**. (`tests/test_fsdp.py` compares `fsdp.flatten_and_shard` with
`FlatParamHandle._get_shard` itself, and `tests/test_labs_fsdp.py` reads the FlatParameters of real FSDP1 on 3
gloo ranks: same unit sizes, same padding.)
""", r"""
## 扁平参数与填充（FSDP1）

FSDP1 把每个单元的参数当作一个**扁平参数** (FlatParameter)：先把它们展平并拼接成一个 N 个元素的向量，用
`torch.chunk` 切成 `world_size` 块，再把**每一块右侧填充到第一块的大小** ⌈N / world_size⌉
（`torch/distributed/fsdp/_flat_param.py` 中的 `FlatParamHandle._get_shard`）。这样所有分片一样大，AllGather 和
ReduceScatter 需要这一点。`torch.chunk` 返回的块可能少于 rank 数：超出末尾的 rank **只持有填充**。（`tests/test_fsdp.py` 把 `fsdp.flatten_and_shard` 与
`FlatParamHandle._get_shard` 本身对照，`tests/test_labs_fsdp.py` 读取 3 个 gloo rank 上真实 FSDP1 的 FlatParameter：
单元大小和填充都相同。）
"""),
    code("""
for n in (10, 5):
    f = fsdp.flatten_and_shard([np.arange(1.0, n + 1)], world_size=4)
    print(f"{n} elements on 4 ranks / {n} 个元素分到 4 个 rank: shard_size = {f.shard_size}, padding per rank / 每个 rank 的填充 = {f.padding}")
    for r, s in enumerate(f.shards):
        print(f"  rank {r}: {s}")
"""),
    code("""
# a unit with three parameters of different shapes: shard, then gather back
params = [np.arange(6.0).reshape(2, 3), np.arange(6.0, 10.0), np.array([[10.0]])]
f = fsdp.flatten_and_shard(params, world_size=4)
print("shards / 分片:", [s.tolist() for s in f.shards])
back = f.gather()
print("gathered shapes / 收集后的形状:", [b.shape for b in back], "equal to the originals / 与原参数相同:",
      all(np.array_equal(a, b) for a, b in zip(params, back)))
"""),
    pair(r"""
> **Common misconception.** *"All-gather gives back the parameters."* The seed's `FlatParamShard.all_gather`
> returns `torch.cat(shards_list)`: the **padded flat vector**. Its own example (100 + 200 + 300 = 600 elements on
> 2 ranks) has no padding, so the mistake does not show. With 601 elements the "recovered" vector has 602 entries,
> the last one a padding zero, and no parameter has its shape. FSDP keeps each parameter's offset and shape
> (`_FlatParameterMeta`: shapes, numels, the padding) and, after the all-gather, views the first N elements as the
> original parameters.
""", r"""
> **常见误区。** *“AllGather 直接得到参数。”* 种子代码的 `FlatParamShard.all_gather` 返回
> `torch.cat(shards_list)`：也就是**带填充的扁平向量**。它自己的例子（100 + 200 + 300 = 600 个元素，2 个 rank）
> 恰好不需要填充，所以看不出错误。换成 601 个元素，“恢复”出的向量有 602 个元素，最后一个是填充的 0，而且没有一个
> 参数恢复了形状。FSDP 记录每个参数的偏移和形状（`_FlatParameterMeta`：shapes、numels、填充），在 AllGather 之后
> 把前 N 个元素视图化为原来的各个参数。
"""),
    code("""
torch.manual_seed(0)
seed_params = [torch.randn(100), torch.randn(200), torch.randn(301)]
seed = [fsdp.SeedFlatParamShard(seed_params, world_size=2, rank=r) for r in range(2)]
full = seed[0].all_gather([s.shard for s in seed])
print("seed all_gather / 种子 all_gather:", tuple(full.shape), "last element / 最后一个元素:", full[-1].item())
ours = fsdp.flatten_and_shard(seed_params, 2).gather([s.shard.numpy() for s in seed])
print("fsdp.flatten_and_shard(...).gather(...) shapes / 形状:", [a.shape for a in ours],
      "last parameter restored / 最后一个参数已恢复:", np.array_equal(ours[2], seed_params[2].numpy()))
"""),
    pair(r"""
### FSDP2: one shard per parameter

FSDP2 (`fully_shard`) does not flatten: each parameter becomes a `DTensor` sharded on **dim 0** with `torch.chunk`
semantics (`_chunk_with_empty` in `_fsdp_param.py`). A (5, 3) weight on 4 ranks gives rows 2, 2, 1, 0: the last
rank's local tensor is empty (FSDP2 pads internally for the collectives, but `to_local()` shows the real rows).
Per-parameter shards keep each parameter's identity, so freezing some parameters, different dtypes and
`torch.compile` are simpler than with one flat vector.
""", r"""
### FSDP2：每个参数一个分片

FSDP2（`fully_shard`）不做展平：每个参数变成在**第 0 维**上按 `torch.chunk` 语义分片的 `DTensor`
（`_fsdp_param.py` 中的 `_chunk_with_empty`）。一个 (5, 3) 的权重分到 4 个 rank 上得到 2、2、1、0 行：最后一个
rank 的本地张量是空的（FSDP2 在集合通信内部会填充，但 `to_local()` 显示真实的行）。按参数分片保留了每个参数的
身份，所以冻结部分参数、混用数据类型和 `torch.compile` 都比一个扁平向量简单。
"""),
    code("""
print("local shapes on ranks 0–3 / rank 0–3 的本地形状:", [fsdp.fsdp2_local_shape((5, 3), 4, r) for r in range(4)])
"""),
    pair(r"""
## FSDP units and wrap policies

FSDP all-gathers and frees parameters **one unit at a time**, so the unit size sets how much is unsharded at
once. A wrap policy decides the units; we compute them on the meta device (no memory), like
`torch.distributed.fsdp.wrap._recursive_wrap` (children before parents; the root takes what is left):

- `ModuleWrapPolicy({Block})`: one unit per transformer block — the usual choice;
- `size_based_auto_wrap_policy`: a module becomes a unit when the parameters not yet wrapped below it reach
  `min_num_params` (default 1e8). For GPT-2 small (124 M) the default wraps nothing: one unit, the whole model.
""", r"""
## FSDP 单元与包装策略

FSDP 以**单元为粒度** AllGather 和释放参数，所以单元大小决定了同一时刻有多少参数处于未分片状态。包装策略决定
如何划分单元；我们在 meta 设备上计算（不占内存），做法与 `torch.distributed.fsdp.wrap._recursive_wrap` 一致
（先子模块后父模块；根模块拿走剩下的一切）：

- `ModuleWrapPolicy({Block})`：每个 Transformer 块一个单元——常用的选择；
- `size_based_auto_wrap_policy`：当某模块之下尚未被包装的参数达到 `min_num_params`（默认 1e8）时，它成为一个单元。
  对 GPT-2 small（1.24 亿参数），默认阈值什么也不包装：整个模型只有一个单元。
"""),
    code("""
model = build_model(PRESETS["llama2-7b"])   # meta device: no memory
units = fsdp.wrap_units(model, "module")
rows = fsdp.unit_table(units, world_size=8, bytes_per_param=2)
print(f"{len(units)} units / 个单元, Ψ = {count_parameters(model):,}")
print(f"  {'unit / 单元':<12} {'params / 参数':>15} {'shard per rank / 每 rank 分片':>30} {'unsharded / 未分片':>18}")
for r in rows[:2] + rows[-1:]:
    print(f"  {r['name']:<12} {r['numel']:>15,} {r['shard_numel']:>30,} {r['unsharded_bytes']/1e9:>15.3f} GB")
print("size policy, default 1e8 on gpt2-small / 大小策略，默认阈值:",
      [u.name or "(root)" for u in fsdp.wrap_units(build_model(PRESETS["gpt2-small"]), "size")])
"""),
    pair(r"""
The **peak unsharded bytes** under `FULL_SHARD` is the root unit (FSDP1 never reshards it between forward and
backward, FSDP2 not when the root's `reshard_after_forward` is left at its default) plus the units alive together: the one computing and the ones prefetched (chapter 07). It depends on the
unit sizes, **not on the number of GPUs**: sharding more only shrinks the sharded part.
""", r"""
`FULL_SHARD` 下的**峰值未分片字节数**等于根单元（FSDP1 在前向和反向之间从不对它重新分片，FSDP2 在根模块的
`reshard_after_forward` 保持默认值时也不会）加上同时存活的单元：
正在计算的那个和已预取的那些（第 07 章）。它取决于单元的大小，**与 GPU 数量无关**：分片更多只会缩小分片部分。
"""),
    code("""
for k in (0, 1, 2):
    print(f"prefetch {k}: peak unsharded bf16 params / 峰值未分片 bf16 参数 = "
          f"{fsdp.peak_unsharded_bytes(units, 2, prefetch=k)/1e9:.2f} GB for any dp / 与 dp 无关")
"""),
    pair(r"""
### Tied weights must share a unit

GPT-2 ties the LM head to the token embedding: one `Parameter` registered under two names. If a policy puts the
embedding and the LM head in different units, the parameter is stored in one unit only, and the other unit would
compute with a weight that its owner has already resharded. A size-based policy with `min_num_params = 1e7` does
exactly that on GPT-2 small: `embed` (38.6 M) becomes a unit and so does `lm_head`, which then owns nothing.
Fix: keep both users in one unit (let the root own them, or wrap their common parent; FSDP2 accepts
`fully_shard([model.embed, model.lm_head])`).
""", r"""
### 绑定权重必须在同一个单元

GPT-2 把输出层 (LM head) 与词嵌入绑定：同一个 `Parameter` 以两个名字注册。如果包装策略把嵌入层和 LM head
放进不同的单元，这个参数只会存放在其中一个单元里，另一个单元计算时用到的权重已经被它的所有者重新分片了。
在 GPT-2 small 上用 `min_num_params = 1e7` 的大小策略正好会这样：`embed`（3860 万）成为一个单元，`lm_head` 也成为
一个单元，但它什么参数都没有。修正方法：让两个使用者在同一个单元（交给根单元，或包装它们的公共父模块；FSDP2
支持 `fully_shard([model.embed, model.lm_head])`）。
"""),
    code("""
gpt2 = build_model(PRESETS["gpt2-small"])
split_units = fsdp.wrap_units(gpt2, "size", min_num_params=10_000_000)
print("units (name, params) / 单元（名称，参数个数）:", [(u.name or "(root)", u.numel) for u in split_units])
print("split ties / 被拆开的绑定:", fsdp.tied_parameter_splits(gpt2, split_units))
print("module policy / 模块策略:", fsdp.tied_parameter_splits(gpt2, fsdp.wrap_units(gpt2, "module")))
"""),
    pair(r"""
> **Common misconception.** *The seed's `ModuleWrapPolicy` demo.* It stacks `nn.TransformerDecoderLayer` blocks
> and wraps them. That layer belongs to the encoder–decoder Transformer: its `forward(tgt, memory)` needs the
> encoder's output, and it carries a cross-attention and a third LayerNorm (12.6 M parameters per layer at d = 1024,
> of which 4.2 M are a cross-attention a decoder-only model never uses). The demo also only *creates* the policy
> and prints per-module parameter counts: it never shows the units. Use causal self-attention blocks
> (`distlearn.models.Block`) and compute the units, as above.
""", r"""
> **常见误区。** *种子代码中的 `ModuleWrapPolicy` 演示。* 它堆叠 `nn.TransformerDecoderLayer` 并包装它们。这个层属于
> 编码器–解码器 Transformer：它的 `forward(tgt, memory)` 需要编码器的输出，而且带有交叉注意力和第三个
> LayerNorm（d = 1024 时每层 1260 万参数，其中 420 万属于仅解码器模型根本用不到的交叉注意力）。这个演示也只是
> *创建*了策略、打印了每个模块的参数量，从没展示单元是什么。应使用因果自注意力块（`distlearn.models.Block`），并像
> 上面那样计算单元。
"""),
    code("""
with torch.device("meta"):
    layer = torch.nn.TransformerDecoderLayer(1024, nhead=8)
print("TransformerDecoderLayer params / 参数:", count_parameters(layer), "; cross-attention / 交叉注意力:",
      count_parameters(layer.multihead_attn))
try:
    layer(torch.empty(4, 2, 1024, device="meta"))
except TypeError as exc:
    print("calling it without memory: PyTorch's TypeError / 不传 memory 调用：PyTorch 的 TypeError（原文）:\\n   ", exc)
"""),
    pair(r"""
## The lifecycle with real shards

`fsdp.ShardedTrainer` runs `FULL_SHARD` on a `VirtualCluster` with real float64 arrays. Each rank keeps only its
padded shard of every unit and the Adam state for it. Per step:

1. forward, unit by unit: **all-gather** the shards, drop the padding, restore the shapes, compute, **free**;
2. backward, last unit first: **all-gather again**, compute this rank's gradients, flatten and pad them,
   **reduce-scatter** (sum) so each rank receives the gradient of its own shard, free;
3. Adam on each shard: element-wise, so the sharded step is the unsharded step cut into pieces.

The model is a 3-unit MLP with units of 42, 24 and 8 elements: 42 does not divide by 4, so its shards are padded.
Below it is trained for 5 steps on 4 ranks and compared with one process training on the concatenated batch.
""", r"""
## 用真实分片走一遍生命周期

`fsdp.ShardedTrainer` 在 `VirtualCluster` 上用真实的 float64 数组运行 `FULL_SHARD`。每个 rank 只保存每个单元中属于
自己的带填充分片，以及这部分的 Adam 状态。每一步：

1. 前向，逐个单元：**AllGather** 分片，去掉填充、恢复形状，计算，**释放**；
2. 反向，从最后一个单元开始：**再次 AllGather**，计算本 rank 的梯度，展平并填充，**ReduceScatter**（求和），
   每个 rank 只收到自己分片的梯度，释放；
3. 在各分片上做 Adam：逐元素计算，所以分片更新就是把不分片的更新切成几块。

模型是一个 3 个单元的 MLP，各单元分别有 42、24、8 个元素：42 不能被 4 整除，所以它的分片需要填充。下面在 4 个 rank 上训练 5 步，并与单进程在
拼接后的整个批次上训练的结果比较。
"""),
    code("""
widths, ws, steps = [5, 7, 3, 2], 4, 5
rng = np.random.default_rng(1)
xs = [[rng.standard_normal((3, widths[0])) for _ in range(ws)] for _ in range(steps)]
ys = [[rng.standard_normal((3, widths[-1])) for _ in range(ws)] for _ in range(steps)]
mlp = fsdp.MLPUnits(widths, seed=0)
cluster = VirtualCluster(ws)
trainer = fsdp.ShardedTrainer(mlp, cluster, lr=1e-2)
losses = [trainer.step(xs[t], ys[t]) for t in range(steps)]
ref_losses, ref_params = fsdp.train_unsharded(mlp, xs, ys, steps, lr=1e-2)
print("unit sizes / 单元大小:", [f.numel for f in trainer.flat], "shard sizes / 分片大小:", [f.shard_size for f in trainer.flat])
print("sharded losses   / 分片训练损失:", np.round(losses, 8))
print("unsharded losses / 不分片训练损失:", np.round(ref_losses, 8))
diff = max(np.abs(a - b).max() for u, r in zip(trainer.full_params(), ref_params) for a, b in zip(u, r))
print(f"max |param difference| after {steps} steps < 1e-13 / {steps} 步后参数最大差 < 1e-13: {diff < 1e-13}")
"""),
    code("""
print("first step's collectives (f = forward / 前向, b = backward / 反向; unit / 单元) / 第一步的集合通信:\\n   ",
      [(ph[0], u, k) for ph, u, k, _ in trainer.log[:9]])
padded = sum(f.padded_numel for f in trainer.flat)
print(f"bytes sent per rank / 每个 rank 发送: {cluster.bytes_sent[0]} = {steps} steps / 步 × 3 × (4−1)/4 × {padded} × 8 B "
      f"= {steps * 3 * 3 / 4 * padded * 8:.0f}")
"""),
    pair(r"""
> **Common misconception.** *"A rank can simulate FSDP alone."* The seed's `FSDPCommunicationSim` fakes the
> all-gather with `param_shard.repeat(world_size)`: the "full parameter" is its own shard copied four times, right
> length, wrong values; every other rank's data is missing. Its backward takes a slice of a gradient of ones, so
> no gradient is ever reduced across ranks, and `param_size // world_size` silently drops elements when the size
> does not divide. A real all-gather concatenates **every rank's** shard; a real reduce-scatter **sums** the
> gradients of all ranks and leaves each rank its slice. Only then does sharded training equal unsharded training.
""", r"""
> **常见误区。** *“一个 rank 就能模拟 FSDP。”* 种子代码的 `FSDPCommunicationSim` 用
> `param_shard.repeat(world_size)` 冒充 AllGather：所谓“完整参数”是自己的分片复制了四遍，长度对、数值错，其他
> rank 的数据全都缺失。它的反向只是从全 1 的梯度中取一段，梯度从未在 rank 之间规约；而且当大小不能整除时，
> `param_size // world_size` 会悄悄丢掉元素。真正的 AllGather 拼接的是**每个 rank** 的分片；真正的 ReduceScatter
> 把所有 rank 的梯度**求和**，再让每个 rank 留下自己那一段。只有这样，分片训练才等于不分片训练。
"""),
    code("""
f = fsdp.flatten_and_shard([np.arange(8.0)], 4)
print("seed 'all-gather' on rank 0 / 种子的“AllGather”:", fsdp.seed_fake_all_gather(f.shards[0], 4))
print("real all-gather / 真正的 AllGather:        ", VirtualCluster(4).all_gather(f.shards)[0])
"""),
    pair(r"""
## Transient units do not shrink with more GPUs

The model states shrink as 1/$N_d$; what FSDP materializes during a step does not: the root unit, the unit being
computed, the prefetched ones and their unsharded gradients. For Llama 2 7B with one unit per block, on 8, 64 and
512 data-parallel ranks (the explorer below draws the whole step):
""", r"""
## 临时还原的单元不会随 GPU 增多而变小

模型状态按 1/$N_d$ 缩小；FSDP 在一步中临时还原的部分却不会：根单元、正在计算的单元、已预取的单元以及它们未分片的
梯度。以每个 Transformer 块一个单元的 Llama 2 7B 为例，数据并行的 rank（进程编号）数分别为 8、64、512（下面的探索器画出了整个迭代）：
"""),
    code("""
from distlearn.widgets import zero_fsdp
for dp in (8, 64, 512):
    r = zero_fsdp.compute("llama2-7b", dp, 3, 1, 1)
    print(f"dp = {dp:>3}: sharded states / 分片状态 {r['sharded']/1e9:6.2f} GB + transient / 临时 "
          f"{r['transient_peak']/1e9:.2f} GB = peak / 峰值 {r['peak']/1e9:6.2f} GB")
"""),
    pair(r"""
## Real FSDP2 on gloo

`distlearn/labs/fsdp.py` trains a tiny GPT (vocabulary 61, hidden size 16, 2 blocks, 5 positions, so shards are
uneven) with `fully_shard` applied to each block and then to the root, AdamW, 4 steps, on 2 processes, each with
half of a fixed batch of 8 sequences. The same launch also trains the tied-embedding variant, a run with
`reshard_after_forward=False`, and one with `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`.
We compare with one process training on the whole batch, and each rank's local shard shapes with
`fsdp.fsdp2_local_shape`. (`torchrun --nproc-per-node 2 -m distlearn.labs.fsdp` runs the same code.)
""", r"""
## 在 gloo 上运行真实的 FSDP2

`distlearn/labs/fsdp.py` 训练一个很小的 GPT（词表 61、隐藏维度 16、2 个块、5 个位置，使分片不均匀）：先对每个块、
再对根模块调用 `fully_shard`，使用 AdamW 训练 4 步，2 个进程各拿固定的 8 条序列中的一半。同一次启动中还训练了
绑定嵌入的版本、`reshard_after_forward=False` 的版本，以及使用 `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`
的版本。我们与单进程在整个批次上的训练对比，并用 `fsdp.fsdp2_local_shape` 检查每个 rank 本地分片的形状。
（`torchrun --nproc-per-node 2 -m distlearn.labs.fsdp` 运行的是同一份代码。）
"""),
    code("""
from distlearn.labs import fsdp as lab
res = launch.run(lab.demo, 2, timeout=300)
ref, ref_tied = lab.train_reference(), lab.train_reference(tied=True)
for name, r in (("fp32", ref), ("tied", ref_tied)):
    got = res[0][name]["losses"]
    print(f"{name:<5} FSDP2 {np.round(got, 4)}  single / 单进程 {np.round(r, 4)}  "
          f"max diff < 1e-5 / 最大差 < 1e-5: {max(abs(a - b) for a, b in zip(got, r)) < 1e-5}")
meta = dict(build_model(lab.tiny_config()).named_parameters())
for rank in range(2):
    shapes = res[rank]["fp32"]["local_shapes"]
    ok = all(s == fsdp.fsdp2_local_shape(meta[n].shape, 2, rank) for n, s in shapes.items())
    print(f"rank {rank}: {res[rank]['fp32']['local_numel']} local elements / 本地元素, embed {shapes['embed.weight']}, "
          f"pos {shapes['pos.weight']}; equal to simulation / 与模拟一致: {ok}")
print("tied after fully_shard / fully_shard 后仍绑定:", res[0]["tied"]["tied"])
psi = lab.tiny_config().num_parameters()
zero3 = memory.model_state_bytes(psi, dp=2, zero_stage=3, precision="fp32")
for rank in range(2):
    r = res[rank]["fp32"]
    print(f"rank {rank}: measured params + AdamW state / 实测参数 + AdamW 状态 = {r['param_bytes']} + {r['optim_bytes']} B; "
          f"ZeRO-3 formula (4 + 8)·Ψ/dp / 公式 = {zero3.params:.0f} + {zero3.optimizer:.0f} B")
"""),
    code("""
nr, bf = res[0]["no_reshard"], res[0]["bf16"]
print("reshard_after_forward=True : block weight between forward and backward is a sharded DTensor / 前向后是分片 DTensor:",
      res[0]["fp32"]["dtensor_after_forward"])
print("reshard_after_forward=False: block weight between forward and backward is unsharded (not a DTensor) / "
      "前向后仍未分片（不是 DTensor）:", nr["dtensor_after_forward"] is False,
      " losses equal / 损失相同:", np.allclose(nr["losses"], ref[:2], atol=1e-5))
print(bi(f"bf16 policy: forward computes in {bf['compute_dtype']}, optimizer updates {bf['stored_dtype']} shards; "
         f"losses {np.round(bf['losses'], 4)} vs fp32 {np.round(ref[:2], 4)}",
         f"bf16 策略：前向用 {bf['compute_dtype']} 计算，优化器更新 {bf['stored_dtype']} 分片；"
         f"损失 {np.round(bf['losses'], 4)}，fp32 为 {np.round(ref[:2], 4)}", sep="\\n"))
print("split tie (embed in its own unit): PyTorch's error / 拆开的绑定（embed 单独成一个单元）：PyTorch 的报错（原文）:\\n   ",
      launch.run(lab.split_tie, 2)[0])
"""),
    pair(r"""
Losses agree to within 1e-5 (we measured about 1e-6: fp32 summation order), the local shards are exactly the simulated ones (rank 1 gets 30
of the 61 embedding rows), the bytes held per rank are the ZeRO-3 formula's up to the uneven dim-0 split, the tie survives sharding because the root owns both the embedding and the LM head, and
FSDP2 itself refuses a split tie — the case `fsdp.tied_parameter_splits` flags.
""", r"""
损失在 1e-5 以内一致（实测约 1e-6：fp32 求和顺序不同），本地分片与模拟完全相同（rank 1 拿到嵌入矩阵 61 行中的 30 行），
每个 rank 实际持有的字节数与 ZeRO-3 公式一致（只差第 0 维不均匀切分带来的差异），绑定在分片
后依然保持，因为根单元同时拥有嵌入层和 LM head；而 FSDP2 自己会拒绝被拆开的绑定——正是 `fsdp.tied_parameter_splits`
标记出的情况。
"""),
    pair(r"""
## Explorer

Pick a model, the data-parallel degree, the ZeRO stage and how many blocks form one unit: the plot shows the bytes
per GPU over one step (sharded states plus the transient unsharded units and gradients).
""", r"""
## 探索器

选择模型、数据并行度、ZeRO 阶段以及几个块组成一个单元：图中显示一步之内每张 GPU 的显存（分片后的状态加上临时
还原的单元和梯度）。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import zero_fsdp
zero_fsdp.explorer()
"""),
    pair(r"""
## Summary

- ZeRO-1/2/3 shard optimizer states, then gradients, then parameters over the **data-parallel degree**; ZeRO-1/2
  cost the same 2Ψ per step as DDP, ZeRO-3 costs 3Ψ. FSDP: `NO_SHARD` = DDP, `SHARD_GRAD_OP` ≈ ZeRO-2,
  `FULL_SHARD` = ZeRO-3, `HYBRID_SHARD` = `FULL_SHARD` inside a node and DDP across nodes.
- FSDP1 flattens a unit into one vector and pads every shard to ⌈N / world_size⌉; gathering must drop the padding
  and restore the shapes. FSDP2 shards each parameter on dim 0 (`torch.chunk`), some ranks may get nothing.
- Units come from a wrap policy; the unsharded units (root + computing + prefetched) set a memory floor that more
  GPUs do not lower. Tied weights must live in one unit.
- With real all-gathers and reduce-scatters, sharded training equals unsharded training; real FSDP2 on gloo
  matches the single-process losses to ~1e-6 and the simulated shard shapes exactly.
""", r"""
## 小结

- ZeRO-1/2/3 依次在**数据并行度**上分片优化器状态、梯度、参数；ZeRO-1/2 每步通信量与 DDP 相同（2Ψ），ZeRO-3 为
  3Ψ。FSDP：`NO_SHARD` = DDP，`SHARD_GRAD_OP` ≈ ZeRO-2，`FULL_SHARD` = ZeRO-3，`HYBRID_SHARD` = 节点内
  `FULL_SHARD`、节点间 DDP。
- FSDP1 把一个单元展平成一个向量，并把每个分片填充到 ⌈N / world_size⌉；收集时必须去掉填充并恢复形状。FSDP2 在第 0
  维（`torch.chunk`）上对每个参数分片，有的 rank 可能分不到任何元素。
- 单元由包装策略决定；未分片的单元（根 + 正在计算的 + 已预取的）构成显存下限，GPU 再多也降不下来。绑定权重必须在
  同一个单元中。
- 使用真正的 AllGather 和 ReduceScatter，分片训练与不分片训练结果一致；gloo 上的真实 FSDP2 与单进程损失相差约
  1e-6，分片形状与模拟完全一致。
"""),
    pair(r"""
## Exercises

Open [exercises/06_zero_fsdp.ipynb](../exercises/06_zero_fsdp.ipynb): shard a flat vector with padding, gather
parameters back, the bytes a rank sends per ZeRO-3 step, and model-state bytes per GPU for each stage. Solutions:
[solutions/06_zero_fsdp.ipynb](../solutions/06_zero_fsdp.ipynb).

**Next / 下一章:** [07 · Overlap and prefetch](07_overlap_prefetch.ipynb).
""", r"""
## 练习

打开 [exercises/06_zero_fsdp.ipynb](../exercises/06_zero_fsdp.ipynb)：带填充地切分扁平向量、把参数收集回来、
ZeRO-3 每步每个 rank 发送的字节数，以及各阶段每张 GPU 的模型状态字节数。参考答案：
[solutions/06_zero_fsdp.ipynb](../solutions/06_zero_fsdp.ipynb)。

**下一章 / Next:** [07 · 通信与计算重叠、预取](07_overlap_prefetch.ipynb)。
"""),
]

nbformat.write(new_notebook(cells), HERE / "06_zero_fsdp.ipynb")
print("wrote", HERE / "06_zero_fsdp.ipynb")
