"""Builds notebooks/01_memory.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/01_memory.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/01_memory.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 01 · Where does the memory go?

Before splitting a model over many GPUs, we need to know what takes the memory. This chapter counts it exactly.

**Learning objectives.** After this chapter you can

- name the *model states* (parameters, gradients, optimizer states) and the *residual states* (activations,
  temporary buffers, fragmentation) of a training step;
- give the bytes per parameter of common recipes: fp32 Adam 16 B, ZeRO-style mixed precision 2 + 2 + 12 = 16 B,
  Megatron-style mixed precision with fp32 gradients 18 B, SGD, 8-bit Adam;
- count the parameters of a real model without allocating it (PyTorch's meta device);
- check the calculator against bytes measured in real PyTorch tensors after an optimizer step;
- apply ZeRO stages over the **data-parallel degree** `dp`, not over the number of GPUs.

Units: bytes; GB = 10⁹ bytes (the ZeRO paper, GPU data sheets), GiB = 2³⁰ bytes (`nvidia-smi`, PyTorch).
""", r"""
# 01 · 显存都去哪儿了

在把模型切分到多张 GPU 之前，先要知道显存被什么占用。本章精确地数一数。

**学习目标。** 学完本章，你能够

- 说出一次训练迭代中的*模型状态*（参数、梯度、优化器状态）和*剩余状态*（激活值、临时缓冲区、内存碎片）；
- 给出常见方案下每个参数占的字节数：fp32 Adam 16 字节，ZeRO 式混合精度 2 + 2 + 12 = 16 字节，带 fp32 梯度的
  Megatron 式混合精度 18 字节，SGD，8 位 Adam；
- 在不分配内存的情况下统计真实模型的参数量（PyTorch 的 meta 设备）；
- 用真实 PyTorch 张量在优化器一步之后实测的字节数来检验计算器；
- 按**数据并行度** `dp`（而不是 GPU 数量）应用 ZeRO 各阶段。

单位：字节；GB = 10⁹ 字节（ZeRO 论文、GPU 规格书），GiB = 2³⁰ 字节（`nvidia-smi`、PyTorch）。
"""),
    pair(r"""
## What a training step keeps in memory

Rajbhandari et al. (2020, *ZeRO*, §3) split the memory of training into

- **model states**: the parameters, their gradients, and the optimizer's state (for Adam: momentum and variance,
  and in mixed precision an fp32 master copy of the weights). They grow with the parameter count Ψ:
  $\text{model states} = \Psi\,(w + g + o)$ bytes, with $w, g, o$ the bytes per parameter of weights, gradients and
  optimizer state;
- **residual states**: activations kept for the backward pass, temporary buffers (e.g. for communication), and
  memory fragmentation. They grow with batch size and sequence length (chapter 08).

This chapter is about model states.
""", r"""
## 一次训练迭代在显存中保留了什么

Rajbhandari 等人（2020，*ZeRO*，§3）把训练显存分为

- **模型状态**：参数、梯度和优化器状态（Adam 的一阶动量和二阶动量；混合精度下还有一份 fp32 主权重）。它们随参数量 Ψ
  增长：$\text{模型状态} = \Psi\,(w + g + o)$ 字节，其中 $w, g, o$ 分别是权重、梯度和优化器状态每个参数占的字节数；
- **剩余状态**：为反向传播保存的激活值、临时缓冲区（例如通信用的）和内存碎片。它们随批大小和序列长度增长（第 08 章）。

本章讨论模型状态。
"""),
    pair(r"""
## Bytes per parameter, recipe by recipe

- **fp32 + Adam**: 4 (weights) + 4 (gradients) + 4 + 4 (momentum, variance) = **16 B**.
- **Mixed precision, ZeRO convention** (`"mixed"`): 16-bit weights (2) and gradients (2); the optimizer keeps
  fp32 master weights, momentum and variance, K = 12 (ZeRO §3.1): 2 + 2 + 12 = **16 B**. No saving over fp32.
- **Mixed precision with fp32 gradients** (`"mixed-fp32-grads"`, Megatron-LM's bf16 recipe: gradients are
  accumulated in fp32 `main_grad` buffers): 2 + 4 + 12 = **18 B**; the Megatron Core documentation (*Distributed
  Optimizer*) lists 18 B, and 6 + 12/d when the optimizer state is sharded over d data-parallel ranks. PyTorch's `autocast` keeps fp32 weights and
  gradients (16 B with Adam) and makes 16-bit copies of the weights during the forward pass.
- **SGD**: no state (4 + 4 = 8 B in fp32); **SGD with momentum**: one fp32 buffer, +4 B.
- **8-bit Adam** (Dettmers et al. 2022, bitsandbytes): two 1-byte states, +2 B (its per-block scales, about
  0.03 B/param, are ignored).
""", r"""
## 逐个方案计算每个参数的字节数

- **fp32 + Adam**：4（权重）+ 4（梯度）+ 4 + 4（一阶、二阶动量）= **16 字节**。
- **混合精度，ZeRO 约定**（`"mixed"`）：16 位权重（2）和梯度（2）；优化器保留 fp32 主权重、一阶和二阶动量，K = 12
  （ZeRO §3.1）：2 + 2 + 12 = **16 字节**。相比 fp32 没有节省。
- **带 fp32 梯度的混合精度**（`"mixed-fp32-grads"`，Megatron-LM 的 bf16 方案：梯度在 fp32 的 `main_grad` 缓冲区中累加）：
  2 + 4 + 12 = **18 字节**；Megatron Core 文档（*Distributed Optimizer*）给出的正是 18 字节，优化器状态在 d 个数据并行
  rank 上分片时为 6 + 12/d。PyTorch 的 `autocast` 保留 fp32 权重和梯度（配合 Adam 为 16 字节），在前向传播时临时生成
  16 位权重副本。
- **SGD**：没有状态（fp32 下 4 + 4 = 8 字节）；**带动量的 SGD**：一个 fp32 缓冲区，+4 字节。
- **8 位 Adam**（Dettmers 等人 2022，bitsandbytes）：两个 1 字节状态，+2 字节（分块缩放因子约 0.03 字节/参数，忽略）。
"""),
    code("""
from distlearn.memory import OPTIMIZERS, PRECISIONS, bytes_per_param

print(f"{'precision / 精度':<20}{'optimizer / 优化器':<18}{'params':>7}{'grads':>7}{'optim':>7}{'total':>7}  (B/param)")
for precision in PRECISIONS:
    for optimizer in OPTIMIZERS:
        b = bytes_per_param(precision, optimizer)
        print(f"{precision:<20}{optimizer:<18}{b['params']:>7}{b['grads']:>7}{b['optimizer']:>7}{b['total']:>7}")
"""),
    pair(r"""
> **Common misconception (seed mistake 1).** *"Mixed precision cuts model memory by 25 %."* The seed code's
> (the starting snippets this course corrects; see chapter 00) `mixed_precision_comparison` counts 2 B weights + 2 B gradients + 8 B Adam moments = 12 B/param for "mixed bf16"
> and reports 25 % savings over fp32 (16 B). It drops the **fp32 master weights**. Its own `fp16_with_master_gb`
> line (16 B) is the right one. Model states stay 16 B/param (ZeRO convention) or 18 B/param (fp32 gradients);
> mixed precision saves *activation* memory and time, not model-state memory.
""", r"""
> **常见误区（种子错误 1）。** *“混合精度能把模型显存减少 25 %。”* 种子代码（本课程纠正的起始代码片段，见第 00 章）中的 `mixed_precision_comparison` 把“mixed bf16”算成
> 2 字节权重 + 2 字节梯度 + 8 字节 Adam 动量 = 每参数 12 字节，并声称比 fp32（16 字节）节省 25 %。它漏掉了
> **fp32 主权重**。它自己的 `fp16_with_master_gb` 那一行（16 字节）才是对的。模型状态仍是每参数 16 字节（ZeRO 约定）
> 或 18 字节（fp32 梯度）；混合精度节省的是*激活值*显存和时间，而不是模型状态显存。
"""),
    code("""
from distlearn import seeds
from distlearn.memory import GB, model_state_bytes

print(f"{'model':>6} | {'seed: fp32':>10} {'seed: mixed':>11} {'seed saving':>11} | {'fp32':>8} {'mixed':>8} {'mixed+fp32 grads':>16}  (GB)")
for billions in (7, 13, 70, 405):
    s = seeds.seed_mixed_precision_comparison(billions)
    psi = billions * 10**9
    fp32, mixed, amp = (model_state_bytes(psi, precision=p).total / GB for p in ("fp32", "mixed", "mixed-fp32-grads"))
    print(f"{billions:>5}B | {s['fp32_total_gb']:>10.0f} {s['mixed_bf16_gb']:>11.0f} {s['savings_vs_fp32']:>11.0%} |"
          f" {fp32:>8.0f} {mixed:>8.0f} {amp:>16.0f}")
"""),
    pair(r"""
Why keep an fp32 copy at all? bf16 has 8 significant bits: near 1.0 its spacing is 2⁻⁷ ≈ 0.0078. An Adam update
of 10⁻³ added to a bf16 weight of 1.0 rounds back to 1.0, so the weight would never move. The update is applied to
the fp32 master copy, and the bf16 weights are re-cast from it.
""", r"""
为什么一定要保留 fp32 副本？bf16 只有 8 位有效数字：在 1.0 附近，相邻可表示数之间的间隔是 2⁻⁷ ≈ 0.0078。把 10⁻³ 的
Adam 更新加到值为 1.0 的 bf16 权重上，结果会舍入回 1.0，权重永远不会变化。因此更新作用在 fp32 主权重上，再把它转换
回 bf16 权重。
"""),
    code("""
from distlearn.memory_measure import bf16_round_trip

r = bf16_round_trip(weight=1.0, update=1e-3)
print(f"bf16: 1.0 + 0.001 = {r['bf16']!r}   (spacing near 1.0 / 1.0 附近的间隔: {r['bf16_spacing']})")
print(f"fp32: 1.0 + 0.001 = {r['fp32']!r}")
"""),
    pair(r"""
## Counting parameters without allocating them

`distlearn.models.PRESETS` holds the published shapes of GPT-2, GPT-3 and Llama models, and
`ModelConfig.num_parameters()` counts their parameters in closed form. To check the closed form against a real
`nn.Module`, we build the model on PyTorch's **meta device**: tensors have shapes and dtypes but no storage, so
even a 405B model costs no memory.
""", r"""
## 不分配内存地统计参数量

`distlearn.models.PRESETS` 收录了 GPT-2、GPT-3 和 Llama 模型公开的形状，`ModelConfig.num_parameters()` 用闭式公式统计
参数量。为了用真实的 `nn.Module` 检验闭式公式，我们在 PyTorch 的 **meta 设备**上构建模型：张量只有形状和数据类型，没有
存储，因此即使 405B 的模型也不占内存。
"""),
    code("""
from distlearn.models import PRESETS, build_model, count_parameters

print(f"{'model / 模型':<16}{'parameters Ψ / 参数量':>24}{'16 B/param (GB)':>18}")
for name, cfg in PRESETS.items():
    psi = cfg.num_parameters()
    print(f"{name:<16}{psi:>24,}{16 * psi / 1e9:>18,.1f}")

model = build_model(PRESETS["llama3-8b"])            # meta device: no memory allocated / 不分配内存
print("device:", next(model.parameters()).device, "| counted on meta / meta 上统计:", f"{count_parameters(model):,}")
"""),
    pair(r"""
Where do Llama 3 8B's parameters sit? Grouped-query attention makes K and V small (8 K/V heads for 32 query
heads), the SwiGLU MLP has three matrices, and the untied 128K-token vocabulary costs two large matrices.
""", r"""
Llama 3 8B 的参数都在哪里？分组查询注意力让 K 和 V 很小（32 个查询头只对应 8 个 K/V 头），SwiGLU MLP 有三个矩阵，
而不共享的 128K 词表要占两个大矩阵。
"""),
    code("""
c = PRESETS["llama3-8b"]
parts = {"embedding / 词嵌入": c.embedding_parameters(),
         f"{c.num_layers} × attention / 注意力": c.num_layers * c.attention_parameters(),
         f"{c.num_layers} × MLP": c.num_layers * c.mlp_parameters(),
         "norms / 归一化": (2 * c.num_layers + 1) * c.norm_parameters(),
         "LM head / 输出层": c.lm_head_parameters()}
for part, n in parts.items():
    print(f"{part:<26}{n:>15,}  {n / c.num_parameters():6.1%}")
print(f"{'total / 合计':<26}{sum(parts.values()):>15,}")
"""),
    pair(r"""
> **Common misconception.** *The seed's `LargeLM`.* Its block computes `h = x + attn(norm1(x))`, then
> `h = norm2(h)` and `h = h + ffn(h)`: the second residual adds to the **normalized** tensor, so the residual
> stream is replaced by its LayerNorm in every layer (a pre-LN block must add to the un-normalized stream:
> `x = x + ffn(norm2(x))`). Its attention also takes (seq, batch, d) inputs by default while the model feeds
> (batch, seq, d), and has no causal mask. And the seed builds the model on the CPU in fp32 just to count it:
> 6.85 B parameters × 4 B = 27.4 GB of RAM. Counting on the meta device costs nothing.
""", r"""
> **常见误区。** *种子材料中的 `LargeLM`。* 它的块先算 `h = x + attn(norm1(x))`，再算 `h = norm2(h)` 和
> `h = h + ffn(h)`：第二个残差加在了**归一化之后**的张量上，于是每一层的残差流都被它的 LayerNorm 替换掉了（pre-LN 块必须
> 加在未归一化的残差流上：`x = x + ffn(norm2(x))`）。它的注意力默认接收 (seq, batch, d) 形状的输入，而模型传入的是
> (batch, seq, d)，而且没有因果掩码。此外，种子代码仅仅为了数参数，就在 CPU 上以 fp32 构建整个模型：
> 68.5 亿参数 × 4 字节 = 27.4 GB 内存。在 meta 设备上统计则不花任何内存。
"""),
    code("""
big = seeds.build_large_lm()                     # the seed's sizes, on the meta device / 种子的尺寸，meta 设备
n = count_parameters(big)
print(f"LargeLM: {n:,} parameters (closed form / 闭式公式: {seeds.large_lm_parameters(50000, 4096, 32, 16384):,})")
print(f"fp32 weights alone / 仅 fp32 权重: {4 * n / 1e9:.1f} GB; fp32 Adam model states / 模型状态: {16 * n / 1e9:.1f} GB")
"""),
    pair(r"""
The seed then feeds this model to its `analyze_memory`, which repeats seed mistakes 1 and 3 (numbered in chapter 00's table: no fp32 master weights, and dividing by
the number of GPUs instead of dp): "FSDP + BF16" is
2 + 2 + 8 = 12 B/param (no master weights) divided by the number of GPUs. Beside it, the correct ZeRO-3 numbers with
dp = number of GPUs (pure data parallelism, the only case where the two coincide):
""", r"""
种子随后把这个模型交给它的 `analyze_memory`，又犯了种子错误 1 和 3（编号见第 00 章的表格：没有 fp32 主权重，以及除以 GPU 数量而不是 dp）：“FSDP + BF16”按 2 + 2 + 8 = 每参数 12 字节（没有主权重）
计算，再除以 GPU 数。旁边是正确的 ZeRO-3 数值，取 dp = GPU 数（纯数据并行，这是两者唯一一致的情形）：
"""),
    code("""
print(f"{'GPUs':>5} | {'seed FSDP fp32':>14} {'seed FSDP+BF16':>14} | {'ZeRO-3 fp32':>11} {'ZeRO-3 mixed':>12}  (GB per GPU / 每卡)")
for gpus in (8, 16, 32):
    fp32 = model_state_bytes(n, dp=gpus, zero_stage=3, precision="fp32").total / GB
    mixed = model_state_bytes(n, dp=gpus, zero_stage=3, precision="mixed").total / GB
    print(f"{gpus:>5} | {seeds.seed_analyze_memory(big, gpus, 'fsdp'):>14.1f} {seeds.seed_analyze_memory(big, gpus, 'fsdp', True):>14.1f} |"
          f" {fp32:>11.1f} {mixed:>12.1f}")
"""),
    pair(r"""
A clean test of the residual bug: make both branches of a block output zero (zero their last linear layers). A
correct residual block then passes its input through unchanged. The seed's block returns `norm2(x)` instead.
""", r"""
检验残差错误的一个干净方法：让块的两个分支都输出零（把它们最后一个线性层置零）。这时正确的残差块应当原样输出输入；
而种子的块输出的却是 `norm2(x)`。
"""),
    code("""
import torch

SeedBlock, FixedBlock = seeds.transformer_blocks()
torch.manual_seed(0)
x = torch.randn(2, 5, 16) * 3 + 1                # (batch, seq, d)
fixed = seeds.zero_residual_branches(FixedBlock(16, 4, 32))
seed = seeds.zero_residual_branches(SeedBlock(16, 4, 32))
with torch.no_grad():
    print("fixed block / 修正后的块: max |block(x) - x|        =", float((fixed(x) - x).abs().max()))
    print("seed block  / 种子的块:   max |block(x) - x|        =", round(float((seed(x) - x).abs().max()), 3))
    print("seed block  / 种子的块:   max |block(x) - norm(x)|  <", 1e-5,
          bool((seed(x) - torch.nn.functional.layer_norm(x, (16,))).abs().max() < 1e-5))
"""),
    pair(r"""
> **Common misconception.** *"A GPT layer is `nn.TransformerDecoderLayer`."* The seed wraps
> `nn.TransformerDecoderLayer` blocks. That layer belongs to the encoder–decoder Transformer: its `forward(tgt,
> memory)` needs the encoder's output `memory`, and it carries a cross-attention (4·d² + 4·d parameters) and a third
> LayerNorm that a decoder-only model does not have. A GPT/Llama block is causally masked *self*-attention + MLP,
> e.g. `nn.TransformerEncoderLayer` called with a causal mask, or `distlearn.models.Block`.
""", r"""
> **常见误区。** *“GPT 的层就是 `nn.TransformerDecoderLayer`。”* 种子代码用 `nn.TransformerDecoderLayer` 堆叠模型。
> 这个层属于编码器–解码器 Transformer：它的 `forward(tgt, memory)` 需要编码器的输出 `memory`，还带有一个交叉注意力
> （4·d² + 4·d 个参数）和第三个 LayerNorm，而仅解码器模型没有这些。GPT/Llama 的块是带因果掩码的*自*注意力 + MLP，
> 例如带因果掩码调用的 `nn.TransformerEncoderLayer`，或 `distlearn.models.Block`。
"""),
    code("""
d = 1024
dec = seeds.seed_decoder_layer(d, nhead=8)           # meta device
try:
    dec(torch.empty(16, 2, d, device="meta"))
except TypeError as exc:
    print("TypeError:", exc)
own = seeds.decoder_only_layer(d, nhead=8)
print(f"TransformerDecoderLayer: {count_parameters(dec):,} | self-attention block / 自注意力块: {count_parameters(own):,}"
      f" | difference / 差值: {count_parameters(dec) - count_parameters(own):,} = 4d²+4d+2d = {4*d*d + 6*d:,}")
"""),
    pair(r"""
## Measured versus predicted

Is 2 + 2 + 12 what PyTorch really keeps? `distlearn.memory_measure.measure_one_step` builds a small Llama-shaped
model on the CPU, trains it for one real step, and sums `numel × element_size` over the tensors that survive the
step: the model's parameters, the gradient buffers, and the optimizer's state. The `"mixed"` recipe is implemented
honestly: a bf16 model with bf16 gradients, and an `AdamW` that owns fp32 master copies; after the step the bf16
weights are re-cast from the masters. `"mixed-fp32-grads"` accumulates into fp32 `main_grad` buffers instead.
""", r"""
## 实测与预测

PyTorch 真的保留了 2 + 2 + 12 字节吗？`distlearn.memory_measure.measure_one_step` 在 CPU 上构建一个 Llama 结构的小模型，
真实地训练一步，然后对这一步之后仍保留的张量（模型参数、梯度缓冲区和优化器状态）求和 `numel × element_size`。
`"mixed"` 方案是如实实现的：bf16 模型和 bf16 梯度，`AdamW` 持有 fp32 主权重；更新之后再从主权重转换回 bf16 权重。
`"mixed-fp32-grads"` 则把梯度累加到 fp32 的 `main_grad` 缓冲区中。
"""),
    code("""
from distlearn.memory_measure import TINY, measure_one_step

print(f"model / 模型: {TINY.name}, Ψ = {TINY.num_parameters():,}")
print(f"{'recipe / 方案':<18}{'':>10}{'params':>10}{'grads':>10}{'optim':>10}{'total':>10}  B/param  equal?")
for precision in ("fp32", "mixed", "mixed-fp32-grads"):
    m = measure_one_step(precision=precision, optimizer="adam")
    p = model_state_bytes(m.num_params, precision=precision, optimizer="adam")
    same = (m.params, m.grads, m.optimizer) == (p.params, p.grads, p.optimizer)
    print(f"{precision:<18}{'measured':>10}{m.params:>10,}{m.grads:>10,}{m.optimizer:>10,}{m.total:>10,}{m.total / m.num_params:>9g}  {same}")
    print(f"{'':<18}{'predicted':>10}{p.params:>10,.0f}{p.grads:>10,.0f}{p.optimizer:>10,.0f}{p.total:>10,.0f}")
print("Adam's step counters / Adam 的步数计数器:", m.optimizer_scalars, "bytes (one 0-d fp32 tensor per parameter tensor)")
print("the step trained the model / 这一步确实训练了模型:", m.loss_after < m.loss_before)
"""),
    pair(r"""
The calculator equals the measurement byte for byte. The only extra bytes are Adam's `step` counters: one 4-byte
tensor per parameter *tensor*, not per parameter, which no per-parameter formula counts.
""", r"""
计算器与实测结果逐字节相等。唯一多出来的是 Adam 的 `step` 计数器：每个参数*张量*一个 4 字节的张量，而不是每个参数一个，
按参数计的公式不会计入它。
"""),
    pair(r"""
## ZeRO stages divide by the data-parallel degree

With plain data parallelism every replica holds all model states. ZeRO (§5) shards them over the `dp` replicas:
stage 1 the optimizer states, stage 2 also the gradients, stage 3 also the parameters (FSDP's `FULL_SHARD`). With
2 + 2 + 12 bytes per parameter, per GPU:

| stage | bytes per GPU |
|---|---|
| 0 | $(2 + 2 + 12)\,\Psi$ |
| 1 | $(2 + 2)\,\Psi + 12\,\Psi / dp$ |
| 2 | $2\,\Psi + (2 + 12)\,\Psi / dp$ |
| 3 | $(2 + 2 + 12)\,\Psi / dp$ |

ZeRO's Figure 1 example: Ψ = 7.5 B, dp = 64 → 120, 31.4, 16.6 and 1.9 GB.
""", r"""
## ZeRO 各阶段按数据并行度分片

普通数据并行下，每个副本都持有全部模型状态。ZeRO（§5）把它们在 `dp` 个副本之间分片：阶段 1 分片优化器状态，阶段 2 再
分片梯度，阶段 3 再分片参数（即 FSDP 的 `FULL_SHARD`）。按每参数 2 + 2 + 12 字节，每张 GPU 上：

| 阶段 | 每张 GPU 的字节数 |
|---|---|
| 0 | $(2 + 2 + 12)\,\Psi$ |
| 1 | $(2 + 2)\,\Psi + 12\,\Psi / dp$ |
| 2 | $2\,\Psi + (2 + 12)\,\Psi / dp$ |
| 3 | $(2 + 2 + 12)\,\Psi / dp$ |

ZeRO 论文图 1 的例子：Ψ = 75 亿，dp = 64 → 120、31.4、16.6 和 1.9 GB。
"""),
    code("""
import matplotlib.pyplot as plt
from distlearn.widgets import memory

results = [memory.compute(model="custom", custom_billions=7.5, dp=64, zero_stage=z, gpu="A100 80GB") for z in range(4)]
for z, r in enumerate(results):
    print(f"ZeRO-{z}: {r['total_gb']:6.1f} GB = {r['total_gib']:6.1f} GiB per GPU / 每张 GPU")
memory.plot_states(results, [f"ZeRO-{z}" for z in range(4)],
                   title_en="Ψ = 7.5B, dp = 64 (ZeRO Figure 1)", title_zh="Ψ = 75 亿，dp = 64（ZeRO 论文图 1）")
plt.show()
"""),
    pair(r"""
**ZeRO-1 on real processes.** PyTorch's `ZeroRedundancyOptimizer` is ZeRO stage 1: each data-parallel rank keeps
Adam's state only for the parameters it owns and all-gathers the updated parameters after the step. The lab
`distlearn.labs.memory_states` runs it on 2 real gloo processes (the tiny model, fp32 AdamW) and reports the bytes
of optimizer state each rank holds. It assigns whole tensors to ranks, so the shares are close to, not exactly,
8Ψ/dp; together they are exactly 8Ψ. (DeepSpeed and FSDP flatten and pad instead: chapter 06.)
""", r"""
**真实进程上的 ZeRO-1。** PyTorch 的 `ZeroRedundancyOptimizer` 就是 ZeRO 阶段 1：每个数据并行 rank 只为自己负责的参数
保留 Adam 状态，更新之后再对参数做 AllGather（全收集）。实验 `distlearn.labs.memory_states` 在 2 个真实的 gloo 进程上
运行它（小模型，fp32 AdamW），报告每个 rank 实际持有的优化器状态字节数。它按整个张量分配给各 rank，因此每份接近而不恰好
等于 8Ψ/dp；各份之和恰好是 8Ψ。（DeepSpeed 和 FSDP 则是展平后填充：见第 06 章。）
"""),
    code("""
from distlearn import launch
from distlearn.labs.memory_states import zero1_adam_state_bytes

ranks = launch.run(zero1_adam_state_bytes, 2)
psi = ranks[0]["num_params"]
calc = model_state_bytes(psi, dp=2, zero_stage=1, precision="fp32").optimizer
for r in ranks:
    print(f"rank {r['rank']}: owns {r['owned_params']:,} params / 个参数, Adam state / Adam 状态 {r['state_bytes']:,} B"
          f"  (calculator 8Ψ/dp / 计算器: {calc:,.0f} B; plain AdamW / 不分片: {r['full_state_bytes']:,} B)")
print("sum over ranks / 各 rank 之和 == 8Ψ:", sum(r["state_bytes"] for r in ranks) == 8 * psi,
      "| ranks agree after the step / 更新后各 rank 参数一致:", all(r["max_param_diff"] == 0.0 for r in ranks))
"""),
    pair(r"""
> **Common misconception.** *"ZeRO/FSDP divides the model states by the number of GPUs."* The seed's
> `calc_memory` and `memory_calculator` divide by `num_gpus`. ZeRO divides by the **data-parallel degree**
> dp = #GPUs / (tp · pp). Tensor and pipeline parallelism already split the model; ZeRO only shards what is
> replicated across data-parallel ranks. With TP = 8 on 8 GPUs, dp = 1: every ZeRO stage gives the same bytes,
> and "FSDP on 8 GPUs" on top of TP = 8 does not divide by 8 again.
""", r"""
> **常见误区。** *“ZeRO/FSDP 把模型状态除以 GPU 数量。”* 种子中的 `calc_memory` 和 `memory_calculator` 都除以
> `num_gpus`。ZeRO 除以的是**数据并行度** dp = GPU 数 / (tp · pp)。张量并行和流水线并行已经切分了模型；ZeRO 只对在
> 数据并行各 rank 之间重复的部分分片。在 8 张 GPU 上用 TP = 8 时，dp = 1：ZeRO 各阶段的字节数完全相同，在 TP = 8
> 之上再做“8 卡 FSDP”并不会再除以 8。
"""),
    code("""
psi, gpus, tp = 70 * 10**9, 8, 8
dp = gpus // tp
for z in range(4):
    per_gpu = model_state_bytes(psi // tp, dp=dp, zero_stage=z).total / GB
    print(f"70B, TP = {tp}, dp = {dp}, ZeRO-{z}: {per_gpu:6.1f} GB per GPU / 每张 GPU")
print(f"seed's thinking (TP shard, then FSDP over 8 GPUs) / 种子的思路（先 TP 切分再在 8 卡上 FSDP）: "
      f"{seeds.seed_calc_memory(70 / tp, gpus, 'fsdp'):.1f} GB  <- 8× too small / 小了 8 倍")
"""),
    pair(r"""
Offload moves bytes, it does not remove them: ZeRO-Offload keeps the optimizer state (master weights included) in
CPU memory, ZeRO-Infinity also the parameter shards (stage 3). (DeepSpeed also streams the gradient shards to the
CPU for the optimizer step; the calculator keeps them on the GPU, the conservative count.)
""", r"""
卸载只是搬走字节，而不是消除它们：ZeRO-Offload 把优化器状态（包括主权重）放在 CPU 内存中，ZeRO-Infinity 还把参数分片
也放到 CPU（阶段 3）。（DeepSpeed 还会把梯度分片传到 CPU 上做优化器更新；计算器把它们算在 GPU 上，是偏保守的估计。）
"""),
    code("""
psi = PRESETS["llama3-70b"].num_parameters()
for off_opt, off_par in ((False, False), (True, False), (True, True)):
    m = model_state_bytes(psi, dp=8, zero_stage=3, offload_optimizer=off_opt, offload_params=off_par)
    print(f"Llama 3 70B, dp=8, ZeRO-3, offload optimizer={off_opt!s:<5} params={off_par!s:<5}: "
          f"GPU {m.total / GB:6.1f} GB, CPU {m.cpu_total / GB:6.1f} GB per GPU process / 每个 GPU 进程")
"""),
    pair(r"""
> **Common misconception.** *The seed's `memory_calculator`.* Four errors in one function:
> (1) Adam state is 8 B/param with 16-bit weights: no master weights (12 B in truth);
> (2) without layer sizes, activations are `0.5 × params × bytes`, an invented constant that ignores sequence
> length and batch size; (3) with them, `4·s·b·h·bytes` per layer, while Korthikanti et al. (2022) count
> `s·b·h·(34 + 5·a·s/h)` bytes per layer, about 14× as much for a 7B model at s = 2048; (4) "fits on 80 GB" compares
> GB (10⁹) with an 80 GB card and ignores the CUDA context, the allocator's cache and temporary buffers: an
> "80GB" A100 reports 81,920 MiB = 85.9 GB in total, of which less is usable.
""", r"""
> **常见误区。** *种子中的 `memory_calculator`。* 一个函数里有四处错误：
> （1）16 位权重时 Adam 状态按每参数 8 字节计：漏掉了主权重（实际是 12 字节）；（2）不给层尺寸时，激活值按
> `0.5 × 参数量 × 字节数` 计，这是凭空捏造的常数，与序列长度和批大小无关；（3）给了层尺寸时，每层按 `4·s·b·h·字节数`
> 计，而 Korthikanti 等人（2022）每层计 `s·b·h·(34 + 5·a·s/h)` 字节，对 7B 模型在 s = 2048 时约为前者的 14 倍；（4）“80 GB
> 放得下”用 GB（10⁹）与 80 GB 显卡比较，并忽略了 CUDA 上下文、分配器缓存和临时缓冲区：一张“80GB”的 A100 总共报告
> 81,920 MiB = 85.9 GB，其中可用的更少。
"""),
    code("""
from distlearn.memory import activation_bytes_per_layer

s_, b_, h_, a_, layers = 2048, 1, 4096, 32, 32        # Llama 2 7B shape, one sequence / 一条序列
seed = seeds.seed_memory_calculator(7, sequence_length=s_, batch_size_per_gpu=b_, hidden_dim=h_, num_layers=layers)
kort = layers * activation_bytes_per_layer(seq_len=s_, micro_batch_size=b_, hidden_size=h_, num_heads=a_)
print(f"optimizer / 优化器状态:  seed {seeds.seed_memory_calculator(7)['optimizer_gb']:.0f} GB   correct / 正确 {model_state_bytes(7 * 10**9).optimizer / GB:.0f} GB")
print(f"activations, no sizes / 不给尺寸的激活值: seed {seeds.seed_memory_calculator(7, sequence_length=512)['activations_gb']:.0f} GB at s=512,"
      f" {seeds.seed_memory_calculator(7, sequence_length=8192)['activations_gb']:.0f} GB at s=8192")
print(f"activations, s={s_} / 激活值: seed {seed['activations_gb']:.1f} GB   Korthikanti {kort / GB:.1f} GB  ({kort / (seed['activations_gb'] * GB):.2f}×)")
print(f"'80GB' A100: {memory.GPUS['A100 80GB']:,} bytes = {memory.GPUS['A100 80GB'] / GB:.1f} GB = {memory.GPUS['A100 80GB'] / 2**30:.0f} GiB (total, not usable)")
"""),
    pair(r"""
## Explorer

Pick a model (or a custom size), a precision recipe, an optimizer, the data-parallel degree and a ZeRO stage,
offload, and a GPU. The bar shows parameters, gradients and optimizer states per GPU in GB (left axis) and GiB
(right axis) against the GPU's total memory. Remember that activations, the CUDA context and the allocator's cache
need room too.
""", r"""
## 探索器

选择模型（或自定义规模）、精度方案、优化器、数据并行度和 ZeRO 阶段、是否卸载，以及 GPU 型号。柱状图显示每张 GPU 上
参数、梯度和优化器状态的大小，左轴为 GB，右轴为 GiB，并与 GPU 的总显存对比。别忘了激活值、CUDA 上下文和分配器缓存也要占
空间。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
memory.explorer()
"""),
    pair(r"""
## Summary

- Model states cost Ψ·(w + g + o) bytes: 16 B/param for fp32 Adam **and** for ZeRO-style mixed precision
  (2 + 2 + 12), 18 B/param with fp32 gradients. Mixed precision saves activations and time, not model states.
- Count parameters on the meta device: Llama 3 8B has 8,030,261,248; the seed's `LargeLM` has 6,853,804,880 and
  needs no 27 GB of RAM to be counted.
- Real PyTorch tensors after an Adam step hold exactly the calculator's bytes (plus a few bytes of step counters).
- ZeRO shards over the data-parallel degree dp = #GPUs / (tp · pp), not over all GPUs.
- The seed's calculators drop the master weights, invent activation constants, and mix GB with GiB.
""", r"""
## 小结

- 模型状态占 Ψ·(w + g + o) 字节：fp32 Adam **和** ZeRO 式混合精度（2 + 2 + 12）都是每参数 16 字节，使用 fp32 梯度时
  为 18 字节。混合精度节省的是激活值显存和时间，而不是模型状态。
- 在 meta 设备上统计参数：Llama 3 8B 有 8,030,261,248 个参数；种子的 `LargeLM` 有 6,853,804,880 个，统计它无需 27 GB 内存。
- Adam 一步之后，真实 PyTorch 张量所占字节与计算器完全相等（外加几个字节的步数计数器）。
- ZeRO 在数据并行度 dp = GPU 数 / (tp · pp) 上分片，而不是在全部 GPU 上。
- 种子中的计算器漏掉主权重、捏造激活值常数，并混用 GB 与 GiB。
"""),
    pair(r"""
## Exercises

Open [exercises/01_memory.ipynb](../exercises/01_memory.ipynb): bytes per parameter of a recipe, ZeRO model
states for a given dp and stage, the parameters of one Llama layer, and ZeRO under tensor parallelism. Answers
are in [solutions/01_memory.ipynb](../solutions/01_memory.ipynb).
""", r"""
## 练习

打开 [exercises/01_memory.ipynb](../exercises/01_memory.ipynb)：某个方案每个参数的字节数、给定 dp 和阶段时 ZeRO 的
模型状态、一层 Llama 的参数量，以及张量并行下的 ZeRO。参考答案在 [solutions/01_memory.ipynb](../solutions/01_memory.ipynb)。
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "01_memory.ipynb")
print("wrote notebooks/01_memory.ipynb")
