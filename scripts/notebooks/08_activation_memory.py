"""Build notebooks/08_activation_memory.ipynb and solutions/08_activation_memory.ipynb (then execute them).

Run: .venv/bin/python scripts/notebooks/08_activation_memory.py
"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

ROOT = Path(__file__).resolve().parents[2]

chapter = [
    pair(r"""
# 08 · Activation memory and how to save it

**Learning objectives.** After this chapter you can
- count the bytes one transformer layer keeps for backward (Korthikanti et al. 2022) and say where each term comes from;
- measure those bytes exactly on a real PyTorch block and explain every byte the formula does not count;
- add up a whole model's activations on one GPU: layers per pipeline stage, micro-batches in flight, embeddings, fp32 logits, gradient accumulation;
- price full and selective recomputation in FLOPs, and CPU / NVMe offload in transfer time per step;
- redo the memory grid of the seed code (the starting snippets this course corrects; see chapter 00) with real
  formulas and explain why its numbers were wrong.
""", r"""
# 08 · 激活显存与省显存技术

**学习目标。** 学完本章，你能够
- 计算一个 Transformer 层为反向传播保存的字节数（Korthikanti 等，2022），并说明每一项的来源；
- 在真实的 PyTorch 模块上精确测量这些字节，并解释公式没有计入的每一个字节；
- 汇总整个模型在一张 GPU 上的激活值：每个流水线阶段的层数、同时在途的微批次 (micro-batch)、嵌入层、fp32 logits、梯度累积；
- 用 FLOPs 衡量完全重计算与选择性重计算的代价，用每步传输时间衡量 CPU / NVMe 卸载的代价；
- 用正确的公式重做种子代码（本课程纠正的起始代码片段，见第 00 章）中的显存表格，并解释它的数字错在哪里。
"""),
    code("""
import torch
from distlearn import activations as A, activation_measure as M
from distlearn.i18n import bi
from distlearn.memory import activation_bytes_per_layer, to_gb, to_gib, GB, GiB
from distlearn.models import PRESETS

"""),
    pair(r"""
## 1. What one layer keeps for backward

Backward needs, for every operation, the inputs it will differentiate against. Korthikanti et al. 2022 (§4.1) count
them for a GPT layer with 16-bit activations and 1-byte dropout masks, with $s$ = sequence length, $b$ = micro-batch
size, $h$ = hidden size, $a$ = attention heads:

$$\text{bytes per layer} = s\,b\,h\left(34 + 5\,\frac{a\,s}{h}\right)$$

The $34\,sbh$ are the linear layers' inputs, Q, K and V for the attention matmuls, the LayerNorm and GELU inputs and the
dropout masks; the $5\,a s^2 b$ are the
attention scores: softmax output (2 bytes), its dropout mask (1 byte) and the dropped probabilities (2 bytes), each
$a \times s \times s$ per sequence. The formula already counts **bytes**: never multiply it by a dtype size again.
""", r"""
## 1. 一层为反向传播保存了什么

反向传播需要每个运算的输入，才能对它们求导。Korthikanti 等（2022，§4.1）在 16 位激活值、1 字节 dropout 掩码的前提下，对
GPT 的一层做了统计。记 $s$ = 序列长度，$b$ = 微批次大小，$h$ = 隐藏维度，$a$ = 注意力头数：

$$\text{每层字节数} = s\,b\,h\left(34 + 5\,\frac{a\,s}{h}\right)$$

其中 $34\,sbh$ 是各线性层的输入、注意力矩阵乘法所需的 Q、K、V、LayerNorm 与 GELU 的输入以及 dropout 掩码；$5\,a s^2 b$ 是注意力分数：softmax 输出（2 字节）、
它的 dropout 掩码（1 字节）和经过 dropout 的概率（2 字节），每个序列各 $a \times s \times s$ 个元素。公式本身已经是**字节数**：
不要再乘以数据类型的字节数。
"""),
    code("""
terms = A.layer_activation_terms(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
print(f"{'term / 项':22s} {'MiB':>10s}")
for name, nbytes in terms.items():
    print(f"{name:22s} {nbytes / 2**20:10.0f} MiB")
print("contract function / 约定函数:", activation_bytes_per_layer(seq_len=2048, micro_batch_size=1,
      hidden_size=12288, num_heads=96) / 2**20, "MiB  (GPT-3 175B, s = 2048, b = 1)")
"""),
    pair(r"""
With tensor parallelism of degree $t$ the parts inside the attention and MLP blocks are split ($24/t$), the
LayerNorm and dropout parts are not ($10$); sequence parallelism splits those too ($34/t$). Selective recomputation
drops the $5as/h$ term; full recomputation keeps only the layer input, $2sbh$ (Korthikanti, Table 2).
""", r"""
张量并行度为 $t$ 时，注意力和 MLP 块内部的部分被切分（$24/t$），LayerNorm 和 dropout 部分则不切分（$10$）；序列并行把这部分也切分了
（$34/t$）。选择性重计算去掉 $5as/h$ 项；完全重计算只保留该层的输入 $2sbh$（Korthikanti，表 2）。
"""),
    code("""
kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
print(f"{'setting / 设置':34s} {'MiB per layer / 每层':>20s}")
for label, extra in [("no parallelism / 无并行", {}), ("tp = 8", dict(tp=8)),
                     ("tp = 8 + sequence parallel / 序列并行", dict(tp=8, sequence_parallel=True)),
                     ("tp = 8 + SP + selective / 选择性", dict(tp=8, sequence_parallel=True, recompute="selective")),
                     ("tp = 8 + SP + full / 完全重计算", dict(tp=8, sequence_parallel=True, recompute="full"))]:
    print(f"{label:34s} {activation_bytes_per_layer(**kw, **extra) / 2**20:20.1f}")
"""),
    pair(r"""
> **Common misconception.** Seed-a's `memory_calculator` estimates activations as `4 · s · b · h · bytes` per layer, or,
> without a shape, as `0.5 × params × bytes` (an invented constant). Both are wrong: a layer keeps
> $34\,sbh + 5\,as^2b$ bytes, so `4·s·b·h·2 = 8 sbh` undercounts by more than 4× even before the attention scores,
> and activations do not scale with the parameter count at all — they scale with $s$, $b$, $h$ and the number of
> layers. (The seed also ignores the CUDA context, the allocator cache and temporary buffers when it says "fits on
> 80 GB", and mixes GB with GiB.)
""", r"""
> **常见误区。** 种子 a 的 `memory_calculator` 把每层激活值估计为 `4 · s · b · h · 字节数`；没有形状信息时，则估计为
> `0.5 × 参数量 × 字节数`（一个编造的常数）。两者都不对：一层保存 $34\,sbh + 5\,as^2b$ 字节，所以 `4·s·b·h·2 = 8 sbh`
> 即使不算注意力分数也少算了 4 倍以上；而且激活值与参数量根本不成比例——它随 $s$、$b$、$h$ 和层数增长。（种子代码在判断
> “80 GB 放得下”时还忽略了 CUDA 上下文、分配器缓存和临时缓冲区，并且混用了 GB 与 GiB。）
"""),
    code("""
cfg = PRESETS["llama2-7b"]
seed_shape = A.seed_activation_bytes(7, 2, 4096, 1, hidden_dim=cfg.hidden_size, num_layers=cfg.num_layers)
seed_blind = A.seed_activation_bytes(7, 2)
real = cfg.num_layers * activation_bytes_per_layer(seq_len=4096, micro_batch_size=1, hidden_size=cfg.hidden_size,
                                                   num_heads=cfg.num_heads)
print(f"Llama-2-7B, s = 4096, b = 1, layers only / 仅各层:")
print(f"  seed / 种子 4·s·b·h·bytes(字节)      {to_gb(seed_shape):7.1f} GB")
print(f"  seed / 种子 0.5 × params(参数) × 2   {to_gb(seed_blind):7.1f} GB")
print(f"  Korthikanti                          {to_gb(real):7.1f} GB  ({real / seed_shape:.0f}× the seed / 是种子的 {real / seed_shape:.0f} 倍)")
"""),
    pair(r"""
## 2. Measured on a real block

`distlearn.activation_measure.KorthikantiBlock` is a GPT block written the way the paper counts (separate Q, K, V
projections of one input, explicit QKᵀ → softmax → dropout → ·V, GELU MLP). We run its forward under
`torch.autograd.graph.saved_tensors_hooks`, count every saved **storage** once (K and Kᵀ share one) and skip
parameters. Two details matter on CPU: `F.dropout` on CPU saves a mask in the activation dtype (on CUDA it is a
1-byte bool mask), so the block calls `torch.native_dropout` as CUDA does; and each LayerNorm saves its mean and 1/std,
and `masked_fill` saves the $s \times s$ causal mask — two small terms the paper leaves out.
""", r"""
## 2. 在真实模块上测量

`distlearn.activation_measure.KorthikantiBlock` 按论文的统计方式编写 GPT 块（同一输入上分别做 Q、K、V 投影，显式的
QKᵀ → softmax → dropout → ·V，GELU MLP）。我们在 `torch.autograd.graph.saved_tensors_hooks` 下运行前向，每个被保存的
**存储 (storage)** 只计一次（K 与 Kᵀ 共享同一块存储），并排除参数。在 CPU 上有两个细节：CPU 上的 `F.dropout` 以激活值的数据
类型保存掩码（CUDA 上是 1 字节的 bool 掩码），所以该模块像 CUDA 一样调用 `torch.native_dropout`；另外每个 LayerNorm 保存均值和
1/std，`masked_fill` 保存 $s \times s$ 的因果掩码——这是论文略去的两个小项。
"""),
    code("""
s, b, h, a = 128, 2, 128, 4
print(f"{'dtype':6s} {'recompute / 重计算':18s} {'measured / 实测':>14s} {'formula / 公式':>14s} {'extra / 额外项':>14s} {'diff / 差':>9s}")
for dtype, p in [("bf16", 2), ("fp32", 4)]:
    for rc in ["none", "selective", "full"]:
        m = M.measure_block(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, dtype=dtype, recompute=rc)
        f = A.layer_activation_bytes(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, recompute=rc,
                                     activation_bytes=p)
        e = M.extra_terms(seq_len=s, micro_batch_size=b, dtype=dtype, recompute=rc)["total"]
        print(f"{dtype:6s} {rc:18s} {m.total:14,d} {f:14,.0f} {e:14,d} {m.total / f - 1:9.2%}")
"""),
    pair(r"""
Measured = formula + LayerNorm statistics + causal mask, to the byte, for every row (a test checks it for several
shapes). With full recomputation (`torch.utils.checkpoint(..., use_reentrant=False)`) only the block input is kept.
The fp32 rows use the same terms with 4-byte tensors (masks stay 1 byte): account for the dtype term by term instead of
multiplying the 16-bit formula by 2. And on CPU, plain `F.dropout` would cost one extra byte per mask element:
""", r"""
每一行都满足：实测 = 公式 + LayerNorm 统计量 + 因果掩码，精确到字节（测试对多种形状做了检查）。完全重计算
（`torch.utils.checkpoint(..., use_reentrant=False)`）时只保留模块的输入。fp32 各行使用同样的各项，只是张量为 4 字节
（掩码仍是 1 字节）：应逐项考虑数据类型，而不是把 16 位公式乘以 2。另外，在 CPU 上直接用 `F.dropout`，每个掩码元素会多占 1 字节：
"""),
    code("""
native = M.measure_block(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, dtype="bf16")
functional = M.measure_block(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, dtype="bf16",
                             dropout_impl="functional")
print("by dtype, native_dropout / 按类型（native_dropout）:", native.by_dtype())
print("by dtype, F.dropout on CPU / 按类型（CPU 上的 F.dropout）:", functional.by_dtype())
print("extra bytes / 多出的字节:", functional.total - native.total, "= mask elements / 掩码元素数", 2*s*b*h + a*s*s*b)
"""),
    pair(r"""
The course's own `distlearn.models.Block` uses `F.scaled_dot_product_attention`. On CPU (and with FlashAttention on
GPUs) that kernel saves Q, K, V, its output and one fp32 log-sum-exp per row, and recomputes the probabilities in
backward: the $5as^2b$ term disappears, exactly as with selective recomputation, and the bytes grow linearly in $s$.
""", r"""
课程自己的 `distlearn.models.Block` 使用 `F.scaled_dot_product_attention`。在 CPU 上（以及 GPU 上使用 FlashAttention 时），
这个算子保存 Q、K、V、它的输出以及每行一个 fp32 的 log-sum-exp，并在反向时重算注意力概率：$5as^2b$ 项消失了，效果与选择性重计算
完全相同，字节数随 $s$ 线性增长。
"""),
    code("""
from distlearn.models import Block
print(f"{'s':>5s} {'SDPA block measured / 实测':>26s} {'16p·sbh + 4asb + LN':>20s} {'Korthikanti block / 按论文写法':>30s}")
for seq in (64, 128, 256):
    gpt = PRESETS["gpt2-small"].with_(hidden_size=h, num_heads=a, ffn_hidden_size=4 * h, max_seq_len=seq)
    torch.manual_seed(0)
    sdpa = M.measure_block(seq_len=seq, micro_batch_size=b, hidden_size=h, num_heads=a,
                           block=Block(gpt).to(torch.bfloat16))
    paper = M.measure_block(seq_len=seq, micro_batch_size=b, hidden_size=h, num_heads=a, dtype="bf16", dropout=0.0)
    print(f"{seq:5d} {sdpa.total:26,d} {M.sdpa_block_bytes(seq_len=seq, micro_batch_size=b, hidden_size=h, num_heads=a):20,d} {paper.total:30,d}")
"""),
    pair(r"""
## 3. The whole model on one GPU

Per GPU, for pipeline stage $i$ of $p$: (layers on the stage) × (bytes per layer) × (micro-batches in flight), plus
the embedding dropout mask ($sbh$, first stage), the final norm and LM-head inputs ($4sbh$) and the **fp32 logits**
$4\,s\,b\,V$ (last stage; divided by $t$ with a vocabulary-parallel loss). Micro-batches in flight have a closed
form: GPipe keeps all $m$; 1F1B keeps $\min(p - i, m)$ on stage $i$, so the first stage holds $p$ micro-batches of
$L/p$ layers — as much as all $L$ layers of one micro-batch. Gradient accumulation runs micro-batches one after the
other, so it multiplies the batch without multiplying activation memory.
""", r"""
## 3. 整个模型在一张 GPU 上

对 $p$ 个流水线阶段中的第 $i$ 个：（该阶段的层数）×（每层字节数）×（在途微批次数），再加上嵌入层的 dropout 掩码（$sbh$，第一个阶段）、
最后的归一化层和 LM head 的输入（$4sbh$），以及 **fp32 logits** $4\,s\,b\,V$（最后一个阶段；使用词表并行的损失时除以 $t$）。
在途微批次数有闭式解：GPipe 保留全部 $m$ 个；1F1B 在第 $i$ 个阶段保留 $\min(p - i, m)$ 个，因此第一个阶段保存 $p$ 个微批次、每个
$L/p$ 层——与一个微批次的全部 $L$ 层一样多。梯度累积让微批次依次执行，所以它增大了批量，却不会成倍增加激活显存。
"""),
    code("""
gpt3 = PRESETS["gpt3-175b"]
common = dict(seq_len=2048, micro_batch_size=1, tp=8, sequence_parallel=True, pp=8, num_microbatches=64)
print(f"GPT-3 175B, tp = 8 + SP, pp = 8, m = 64, s = 2048, b = 1   (GiB)")
print(f"{'stage':>5s} {'layers':>6s} {'in flight':>9s} {'1F1B total':>10s} {'logits':>7s} {'GPipe total':>11s}")
print(f"{'阶段':>3s} {'层数':>4s} {'在途微批':>5s} {'1F1B 合计':>8s} {'logits':>7s} {'GPipe 合计':>9s}")
for stage in [0, 1, 7]:
    f = A.model_activation_bytes(gpt3, stage=stage, schedule="1f1b", **common)
    g = A.model_activation_bytes(gpt3, stage=stage, schedule="gpipe", **common)
    print(f"{stage:5d} {f.layers_on_stage:6d} {f.inflight:9d} {to_gib(f.total):10.2f} {to_gib(f.logits):7.2f} {to_gib(g.total):11.2f}")
print("global batch 1536 = micro-batch 1 × accumulation", A.gradient_accumulation_steps(1536, 1, 24),
      "× dp 24")
print("全局批量 1536 = 微批次 1 × 累积步数", A.gradient_accumulation_steps(1536, 1, 24), "× dp 24")
"""),
    pair(r"""
## 4. What recomputation costs

A layer's forward costs $24\,sbh^2 + 4\,s^2bh$ FLOPs (linear layers and attention scores); backward costs two
forwards, so a step is three forwards (Narayanan et al. 2021: $72\,BsLh^2(1 + s/6h + V/12hL)$ per iteration).
Full recomputation runs every layer's forward again (+1 forward: about +33 %); selective recomputation reruns only
QKᵀ, softmax, dropout and ·V ($4\,s^2bh$ per layer): a few percent, for most of the memory saving.
""", r"""
## 4. 重计算的代价

一层前向需要 $24\,sbh^2 + 4\,s^2bh$ FLOPs（线性层与注意力分数）；反向相当于两次前向，所以一步训练相当于三次前向（Narayanan 等，
2021：每次迭代 $72\,BsLh^2(1 + s/6h + V/12hL)$）。完全重计算把每一层的前向再跑一遍（多 1 次前向：约 +33%）；选择性重计算只重算
QKᵀ、softmax、dropout 和 ·V（每层 $4\,s^2bh$）：代价只有几个百分点，却换来大部分的显存节省。
"""),
    code("""
for name in ["gpt3-175b", "llama2-7b"]:
    cfg = PRESETS[name]
    for rc in ["selective", "full"]:
        r = A.recompute_flops(cfg, seq_len=4096, micro_batch_size=1, recompute=rc)
        mem = A.model_activation_bytes(cfg, seq_len=4096, micro_batch_size=1, recompute=rc).total
        base = A.model_activation_bytes(cfg, seq_len=4096, micro_batch_size=1).total
        print(f"{name:10s} {rc:9s}: +{r['overhead']:6.2%} FLOPs, activations / 激活值 {to_gb(base):6.1f} → {to_gb(mem):6.1f} GB")
"""),
    pair(r"""
## 5. Offload: memory moved to the host, time paid on PCIe

ZeRO-Offload (Ren et al. 2021) keeps the optimizer state (fp32 master weights and both Adam moments, 12 B/param) in
CPU memory and runs the update there: each step a rank sends its 16-bit gradient shard down and receives 16-bit
parameters back, 4 B/param of $\Psi/dp$. ZeRO-Infinity also offloads parameters (fetched for forward and backward) and
can put the optimizer state on NVMe (read and written every step). The times below assume 25 GB/s effective PCIe and
6 GB/s of NVMe bandwidth for each GPU, no overlap with compute (an upper bound).
""", r"""
## 5. 卸载：显存挪到主机，时间花在 PCIe 上

ZeRO-Offload（Ren 等，2021）把优化器状态（fp32 主权重和 Adam 的两个矩，每参数 12 字节）放在 CPU 内存中，并在 CPU 上完成更新：
每一步，每个 rank 把自己的 16 位梯度分片传到 CPU，再取回 16 位参数，即 $\Psi/dp$ 个参数每个 4 字节。ZeRO-Infinity 还会卸载参数
（前向和反向时取回），并可以把优化器状态放到 NVMe 上（每步读写一次）。下面的时间假设每张 GPU 的 PCIe 有效带宽为 25 GB/s、NVMe 带宽为 6 GB/s，且不与计算重叠
（上界）。
"""),
    code("""
n = PRESETS["llama2-70b"].num_parameters()
print("Llama-2-70B, dp = 8: traffic per rank and step / 每个 rank 每步的传输量与时间")
for label, kw in [("ZeRO-2 + optimizer / 优化器 → CPU", dict(zero_stage=2)),
                  ("ZeRO-3 + optimizer / 优化器 → CPU", dict(zero_stage=3)),
                  ("ZeRO-3 + optimizer, params / 优化器、参数 → CPU", dict(zero_stage=3, offload_params=True)),
                  ("ZeRO-3 + params / 参数 → CPU, optimizer / 优化器 → NVMe",
                   dict(zero_stage=3, offload_params=True, nvme=True))]:
    t = A.offload_traffic(n, dp=8, offload_optimizer=True, **kw)
    print(f"PCIe {to_gb(t['pcie_bytes']):6.1f} GB {t['pcie_s']:5.2f} s | NVMe {to_gb(t['nvme_bytes']):6.1f} GB {t['nvme_s']:6.2f} s   {label}")
"""),
    pair(r"""
> **Common misconception.** Seed-b's `estimate_memory` grid (70B, seq 2048, bf16 × offload × checkpointing on 8 × 80 GB)
> gives bf16 model states `2 + 2 + 4` bytes per parameter (one Adam moment and the fp32 master weights are missing),
> fixes `d_model = 4096` for every model (a 70B model has $h$ = 8192), models checkpointing as `× 0.1` and offload as
> `− 30 %` — invented constants. In truth mixed-precision Adam still needs 16 B/param (ZeRO paper), offloading the
> optimizer removes its 12 B/param from the GPU entirely, and full recomputation keeps $2sbh$ per layer plus one
> layer's working set. Below: the seed's numbers beside the real ones for Llama-2-70B (80 layers, $h$ = 8192) with
> ZeRO-3 over 8 GPUs, micro-batch 1 (both in GB = 1e9 bytes, like the seed).
""", r"""
> **常见误区。** 种子 b 的 `estimate_memory` 表格（70B、序列长度 2048、在 8 × 80 GB 上组合 bf16 × 卸载 × 检查点）把 bf16 的模型
> 状态算成每参数 `2 + 2 + 4` 字节（少了 Adam 的一个矩和 fp32 主权重），对所有模型都固定 `d_model = 4096`（70B 模型的 $h$ 是
> 8192），把检查点建模为 `× 0.1`、把卸载建模为 `− 30 %`——都是编造的常数。实际上混合精度 Adam 仍需每参数 16 字节（ZeRO 论文），
> 卸载优化器会把它的每参数 12 字节完全移出 GPU，而完全重计算每层保留 $2sbh$，再加上一层的工作集。下面把种子的数字与 Llama-2-70B
> （80 层，$h$ = 8192）在 8 张 GPU 上用 ZeRO-3、微批次为 1 时的真实数字并列（单位都是 GB = 1e9 字节，与种子相同）。
"""),
    code("""
rows = A.seed_grid(PRESETS["llama2-70b"], seq_len=2048, n_gpus=8)
CAP = 80 * GB   # the seed's "80 GB", read as the datasheet's 80 × 1e9 bytes (like the planner in chapter 10)
CAP_TRUE = 80 * GiB   # what an "80GB" A100 / H100 really has: 80 GiB (nvidia-smi: 81920 MiB), chapter 01
print(f"{'bf16':>5s} {'offload':>7s} {'ckpt':>5s} | {'seed GB':>8s} {'seed fits':>9s} | {'real GB':>8s} {'real fits':>9s}  states / activations")
print(f"{'bf16':>5s} {'卸载':>5s} 检查点| {'种子 GB':>6s} {'种子可放':>5s} | {'真实 GB':>6s} {'真实可放':>5s}  模型状态 / 激活值")
for r in rows:
    st = (r["real"]["params"] + r["real"]["grads"] + r["real"]["optimizer"]) / GB
    print(f"{r['bf16']!s:>5s} {r['offload']!s:>7s} {r['ckpt']!s:>5s} | {r['seed_gb']:8.1f} {str(r['seed_gb'] < CAP / GB):>9s} | "
          f"{r['real_gb']:8.1f} {str(r['real_gb'] * GB < CAP):>9s}  {st:6.1f} / {r['real']['activations'] / GB:6.1f}")
print(bi(f"'fits' means < {CAP / GB:.0f} GB = {CAP / GiB:.1f} GiB (the datasheet's 80 GB, 1 GB = 1e9 bytes). "
         f"An '80GB' GPU really has 80 GiB = {CAP_TRUE / GB:.1f} GB.",
         f"“放得下”指 < {CAP / GB:.0f} GB = {CAP / GiB:.1f} GiB（数据手册的 80 GB，1 GB = 1e9 字节）。"
         f"一张“80GB”的 GPU 实际有 80 GiB = {CAP_TRUE / GB:.1f} GB。", sep="\\n"))
for r in rows:
    if CAP < r["real_gb"] * GB <= CAP_TRUE:
        print(bi(f"Borderline: bf16={r['bf16']}, offload={r['offload']}, ckpt={r['ckpt']} needs {r['real_gb']:.1f} GB: "
                 f"over {CAP / GB:.0f} GB, but it would fit in the true 80 GiB = {CAP_TRUE / GB:.1f} GB "
                 f"(before the CUDA context and buffers).",
                 f"临界：bf16={r['bf16']}、卸载={r['offload']}、检查点={r['ckpt']} 需要 {r['real_gb']:.1f} GB："
                 f"超过 {CAP / GB:.0f} GB，但放得进真实的 80 GiB = {CAP_TRUE / GB:.1f} GB（尚未计入 CUDA 上下文和缓冲区）。",
                 sep="\\n"))
"""),
    code("""
import matplotlib.pyplot as plt
from distlearn.plots_activations import seed_grid_figure
seed_grid_figure(rows)
plt.show()
"""),
    pair(r"""
The seed's bf16 rows "fit" only because it drops 8 of the 16 bytes per parameter and shrinks the activations. With
the real formulas, ZeRO-3 over 8 GPUs leaves 16 B × Ψ / 8 ≈ 138 GB of model states per GPU whatever the precision, so
nothing fits without offload; recomputation is the knob for activations (without it, the $5as^2b$ attention scores
alone exceed the GPU), offload the knob for model states, and only bf16 + offload + checkpointing fits in 80 GB (a row printed as
borderline above would also fit in the card's true 80 GiB, but with no room to spare). Even that
"fits" leaves out the CUDA context, the allocator's cache and communication buffers (a few GB in practice).
""", r"""
种子里 bf16 的几行之所以“放得下”，只是因为它每参数少算了 16 字节中的 8 字节，并且把激活值算小了。用真实公式计算，ZeRO-3 在 8 张
GPU 上分片后，无论精度如何，每张 GPU 都有 16 B × Ψ / 8 ≈ 138 GB 的模型状态，所以不卸载就什么都放不下；重计算是控制激活值的
手段（不用它时，仅 $5as^2b$ 的注意力分数就超过了 GPU 容量），卸载是控制模型状态的手段，按 80 GB 计只有 bf16 + 卸载 + 检查点这一种组合放得下（上面标为“临界”的一行放得进这张卡真实的 80 GiB，但毫无余量）。
即便如此，这里的“放得下”也还没算 CUDA 上下文、分配器缓存和通信缓冲区（实际中有好几 GB）。
"""),
    pair(r"""
## 6. Explorer

Choose a model, sequence length, micro-batch, tensor parallelism, sequence parallelism, recomputation and offload;
the bar shows one GPU's memory by part against the GPU size, and the text gives recomputation's compute price. That
price is converted to time at an assumed 400 TFLOP/s achieved per GPU — about 40 % of an H100's 989 TFLOP/s dense
bf16 peak (the datasheet figure in `distlearn/hardware.py`); the explorer prints where the number comes from.
""", r"""
## 6. 探索器

选择模型、序列长度、微批次、张量并行、序列并行、重计算与卸载方式；条形图按类别显示一张 GPU 的显存并与 GPU 容量对比，文字给出
重计算的计算代价。这个代价按假设的每张 GPU 实际吞吐 400 TFLOP/s 换算成时间——约为 H100 稠密 bf16 峰值 989 TFLOP/s
（`distlearn/hardware.py` 中的数据手册数字）的 40 %；探索器会打印这个数字的来源。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import activations as explorer_08
explorer_08.explorer()
"""),
    pair(r"""
## Summary

- A layer keeps $sbh(34 + 5as/h)$ bytes with 16-bit activations and 1-byte masks; we measured it on a real block to
  the byte, plus the LayerNorm statistics and the causal mask the paper leaves out.
- Tensor parallelism splits $24$ of the $34$; sequence parallelism the rest; selective recomputation removes the
  $5as/h$ term for a few percent of FLOPs; full recomputation keeps $2sbh$ for about +33 %.
- Whole-model activations: layers × micro-batches in flight (1F1B: $p - i$ on stage $i$) + embeddings + fp32 logits.
  Gradient accumulation grows the batch, not the activations.
- Offload moves optimizer states (and parameters) to the host at a PCIe / NVMe price per step.
""", r"""
## 小结

- 在 16 位激活值、1 字节掩码的前提下，一层保存 $sbh(34 + 5as/h)$ 字节；我们在真实模块上测量，精确到字节，另外还有论文略去的
  LayerNorm 统计量和因果掩码。
- 张量并行切分 $34$ 中的 $24$；序列并行切分其余部分；选择性重计算以几个百分点的 FLOPs 去掉 $5as/h$ 项；完全重计算只保留 $2sbh$，
  代价约 +33%。
- 整个模型的激活值：层数 × 在途微批次数（1F1B：第 $i$ 阶段为 $p - i$）+ 嵌入层 + fp32 logits。梯度累积增大批量，不增加激活值。
- 卸载把优化器状态（以及参数）移到主机内存，代价是每步的 PCIe / NVMe 传输时间。
"""),
    pair(r"""
## Exercises

Open [exercises/08_activation_memory.ipynb](../exercises/08_activation_memory.ipynb): per-layer bytes, micro-batches
in flight under 1F1B, the price of selective recomputation, and the PCIe time of optimizer offload — each with a check
cell.

**Next:** [09 · DeepSpeed and FSDP in practice](09_deepspeed_fsdp.ipynb)
""", r"""
## 练习

打开 [exercises/08_activation_memory.ipynb](../exercises/08_activation_memory.ipynb)：每层字节数、1F1B 下的在途微批次数、
选择性重计算的代价，以及优化器卸载的 PCIe 时间——每题都有检查单元格。

**下一章：** [09 · DeepSpeed 与 FSDP 实战](09_deepspeed_fsdp.ipynb)
"""),
]

solutions = [
    pair(r"""
# 08 · Exercises: activation memory

Complete each function, then run the check cell below it.
""", r"""
# 08 · 练习：激活显存

补全每个函数，然后运行其下方的检查单元格。
"""),
    code("from distlearn import check"),
    pair(r"""
## Exercise 1: bytes per layer

Return the bytes one GPT layer keeps for backward with no parallelism and no recomputation (Korthikanti et al. 2022).
""", r"""
## 练习 1：每层字节数

返回一个 GPT 层在无并行、无重计算时为反向传播保存的字节数（Korthikanti 等，2022）。
"""),
    code("""
def layer_activation_bytes(seq_len, micro_batch_size, hidden_size, num_heads):
    ### BEGIN SOLUTION
    s, b, h, a = seq_len, micro_batch_size, hidden_size, num_heads
    return s * b * h * (34 + 5 * a * s / h)
    ### END SOLUTION
"""),
    code("check.ex08_layer_activation_bytes(layer_activation_bytes)"),
    pair(r"""
## Exercise 2: micro-batches in flight under 1F1B

Return how many micro-batches' activations stage `stage` (0-based) of a `pp`-stage 1F1B pipeline holds at its peak,
with `num_microbatches` micro-batches.
""", r"""
## 练习 2：1F1B 下的在途微批次

对一个 `pp` 阶段、共 `num_microbatches` 个微批次的 1F1B 流水线，返回第 `stage` 个阶段（从 0 开始）在峰值时保存了多少个微批次的激活值。
"""),
    code("""
def inflight_1f1b(pp, num_microbatches, stage):
    ### BEGIN SOLUTION
    return min(pp - stage, num_microbatches)
    ### END SOLUTION
"""),
    code("check.ex08_inflight_1f1b(inflight_1f1b)"),
    pair(r"""
## Exercise 3: the price of selective recomputation

For a GPT with $f = 4h$ and micro-batch 1, return the extra FLOPs of selective recomputation divided by the model
FLOPs of one step (forward + backward of all layers and the LM head).
""", r"""
## 练习 3：选择性重计算的代价

对 $f = 4h$、微批次为 1 的 GPT，返回选择性重计算额外的 FLOPs 与一步训练的模型 FLOPs（所有层和 LM head 的前向 + 反向）之比。
"""),
    code("""
def selective_overhead(seq_len, hidden_size, num_layers, vocab_size):
    ### BEGIN SOLUTION
    s, h, L, V = seq_len, hidden_size, num_layers, vocab_size
    layer = 24 * s * h * h + 4 * s * s * h
    model = 3 * (L * layer + 2 * s * h * V)
    return L * 4 * s * s * h / model
    ### END SOLUTION
"""),
    code("check.ex08_selective_overhead(selective_overhead)"),
    pair(r"""
## Exercise 4: PCIe time of optimizer offload

With ZeRO-2 and the optimizer offloaded to the CPU, return the seconds per step one rank spends on PCIe at
`pcie_gb_per_s` GB/s (1 GB = 1e9 bytes), without overlap.
""", r"""
## 练习 4：优化器卸载的 PCIe 时间

在 ZeRO-2 且优化器卸载到 CPU 时，返回一个 rank 每步在 PCIe 上花费的秒数（带宽 `pcie_gb_per_s` GB/s，1 GB = 1e9 字节），不考虑重叠。
"""),
    code("""
def offload_seconds(num_params, dp, pcie_gb_per_s):
    ### BEGIN SOLUTION
    return 4 * num_params / dp / (pcie_gb_per_s * 1e9)
    ### END SOLUTION
"""),
    code("check.ex08_offload_seconds(offload_seconds)"),
]

if __name__ == "__main__":
    nbformat.write(new_notebook(chapter), ROOT / "notebooks" / "08_activation_memory.ipynb")
    nbformat.write(new_notebook(solutions), ROOT / "solutions" / "08_activation_memory.ipynb")
    print("wrote notebooks/08_activation_memory.ipynb and solutions/08_activation_memory.ipynb")
