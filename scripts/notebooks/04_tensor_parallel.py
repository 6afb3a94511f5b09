# Run from the repository root: .venv/bin/python scripts/notebooks/04_tensor_parallel.py
"""Builds notebooks/04_tensor_parallel.ipynb and solutions/04_tensor_parallel.ipynb (then run
``python -m distlearn.course execute`` on both and ``python -m distlearn.course build-exercises``)."""
import nbformat

from distlearn.course import ROOT, code, new_notebook, pair

P = pair
C = code

chapter = [
    P(r"""
# 04 · Tensor parallelism

A single weight matrix of a large transformer layer (GPT-3: 12288 × 49152 in the MLP) is too big and too slow for
one GPU. **Tensor parallelism (TP)** splits every such matrix over `tp` GPUs, which compute on their blocks at the
same time and exchange partial results with collective communication.

**Learning objectives.** After this chapter you can
- split a linear layer by columns or by rows and say which collective each split needs, in forward and backward;
- explain the Megatron-LM MLP and attention split (the f and g operators: one all-reduce forward, one backward);
- count the bytes each GPU sends per transformer layer;
- explain sequence parallelism and compute how much activation memory it saves;
- run real tensor parallelism with PyTorch DTensor and check it against the simulation.
""", r"""
# 04 · 张量并行

大型 Transformer 层中的单个权重矩阵（GPT-3 的 MLP 中为 12288 × 49152）对一张 GPU 来说太大、也太慢。
**张量并行（TP）** 把每个这样的矩阵切分到 `tp` 张 GPU 上：各 GPU 同时计算自己那一块，并通过集合通信交换部分结果。

**学习目标。** 学完本章你可以
- 按列或按行切分线性层，并说出每种切分在前向和反向中需要哪种集合通信；
- 解释 Megatron-LM 的 MLP 与注意力切分（f 和 g 算子：前向一次 AllReduce，反向一次）；
- 计算每张 GPU 每个 Transformer 层发送的字节数；
- 解释序列并行，并计算它节省多少激活显存；
- 用 PyTorch DTensor 运行真实的张量并行，并与模拟结果对照。
"""),
    C("""
import numpy as np
from distlearn import tensor_parallel as tp_sim
from distlearn.comm import VirtualCluster
from distlearn.i18n import bi
rng = np.random.default_rng(0)
"""),
    P(r"""
## Two ways to split a matrix

For $Y = XW$ with $W$ of shape $(d_{in}, d_{out})$ (Shoeybi et al. 2019, *Megatron-LM*, §3):

- **Column-parallel**: $W = [W_1, \dots, W_t]$ split along output features. Rank $r$ computes $Y_r = X W_r$, a
  block of *columns* of $Y$. Every rank needs the whole input $X$; the output is split. To have the full $Y$ on
  every rank, an **all-gather** is needed.
- **Row-parallel**: $W = [W_1; \dots; W_t]$ split along input features, and $X = [X_1, \dots, X_t]$ split the same
  way. Rank $r$ computes $X_r W_r$, which has the *full* shape of $Y$ but is only a partial sum:
  $Y = \sum_r X_r W_r$. Adding them is an **all-reduce**.

With a ring algorithm an all-gather sends $(t-1)/t$ of the output per rank and an all-reduce $2(t-1)/t$
(chapter 02).
""", r"""
## 切分矩阵的两种方式

对 $Y = XW$，$W$ 的形状为 $(d_{in}, d_{out})$（Shoeybi 等 2019，*Megatron-LM*，§3）：

- **列并行**：$W = [W_1, \dots, W_t]$ 沿输出特征切分。rank $r$ 计算 $Y_r = X W_r$，即 $Y$ 的一块*列*。每个 rank
  需要完整输入 $X$，输出是切分的。要让每个 rank 都有完整的 $Y$，需要一次 **AllGather（全收集）**。
- **行并行**：$W = [W_1; \dots; W_t]$ 沿输入特征切分，$X = [X_1, \dots, X_t]$ 也同样切分。rank $r$ 计算
  $X_r W_r$，形状与完整的 $Y$ 相同，但只是部分和：$Y = \sum_r X_r W_r$。把它们相加就是一次
  **AllReduce（全规约）**。

用环形算法，AllGather 每个 rank 发送输出的 $(t-1)/t$，AllReduce 发送 $2(t-1)/t$（第 02 章）。
"""),
    P(r"""
> **Common misconception.** The seed code (the starting snippets this course corrects; see chapter 00) has a
> `simulate_tensor_parallelism` that splits $W$ by columns, multiplies, and
> concatenates the blocks with `np.concatenate`, reporting an error of zero and no communication. Two things are
> missing: (1) on real GPUs that concatenation *is* an all-gather, which moves $(t-1)/t$ of the output to every
> rank; (2) the row split, the other half of every Megatron block, cannot be concatenated at all: its partial
> results must be **summed** by an all-reduce.
""", r"""
> **常见误区。** 种子代码（本课程纠正的起始代码片段，见第 00 章）中的 `simulate_tensor_parallelism` 把 $W$ 按列切分、相乘，再用 `np.concatenate` 拼接各块，
> 报告误差为零、没有通信。它漏掉了两点：(1) 在真实 GPU 上，这次拼接*就是*一次 AllGather，每个 rank 要接收输出的
> $(t-1)/t$；(2) 行切分（每个 Megatron 块的另一半）根本不能拼接：它的部分结果必须由 AllReduce **求和**。
"""),
    C("""
print(bi("The seed's code (kept as tp_sim.seed_simulate_tensor_parallelism):",
         "种子代码（保存为 tp_sim.seed_simulate_tensor_parallelism）：") + "\\n")
print(tp_sim.seed_source())
"""),
    C("""
x, W = rng.standard_normal((4, 512)), rng.standard_normal((512, 512))
out, err = tp_sim.seed_simulate_tensor_parallelism(x, W, 4)      # the seed: column split only
print(bi(f"seed, column split: max error < 1e-12: {err < 1e-12}, bytes counted: none",
         f"种子代码，列切分：最大误差 < 1e-12：{err < 1e-12}，统计的字节数：无"))
parts = [xr @ Wr for xr, Wr in zip(np.split(x, 4, axis=1), np.split(W, 4, axis=0))]   # a row split
shape = np.concatenate(parts, -1).shape
print(bi(f"row split + concatenate (the seed's idea): shape {shape}, wrong",
         f"行切分 + 拼接（种子代码的做法）：形状 {shape}，错误"))
ok = np.abs(sum(parts) - x @ W).max() < 1e-12
print(bi(f"row split + sum: max error < 1e-12: {ok}", f"行切分 + 求和：最大误差 < 1e-12：{ok}"))
"""),
    P(r"""
The corrected simulation runs on a `VirtualCluster`, whose collectives count the bytes each rank sends. The output
$Y$ here is $4 \times 512$ float64 values = 16384 bytes.
""", r"""
修正后的模拟运行在 `VirtualCluster` 上，它的集合通信会统计每个 rank 发送的字节数。这里的输出 $Y$ 是
$4 \times 512$ 个 float64 数 = 16384 字节。
"""),
    C("""
SPLIT = {"column": bi("column", "列"), "row": bi("row", "行")}
print(f"{'tp':>3} {'split / 切分':>12} {'collective / 集合通信':>20} {'error<1e-12 / 误差':>18} "
      f"{'bytes sent per rank / 每个 rank 发送字节':>30}")
for tp in [1, 2, 4, 8]:
    for split in ["column", "row"]:
        r = tp_sim.simulate_tensor_parallelism(x, W, tp, split=split)
        print(f"{tp:>3} {SPLIT[split]:>12} {r['collective']:>20} {str(r['max_error'] < 1e-12):>18} "
              f"{r['bytes_sent_per_rank']:>30,}")
"""),
    P(r"""
## The Megatron MLP: f and g

The MLP $Y = \mathrm{GeLU}(XA)\,B$ is split as **column-parallel $A$, then row-parallel $B$**. Because $A$ is
split by columns, each rank holds *whole* inputs of the GeLU, so the nonlinearity runs locally; and the split
output of $A$ is exactly the split input that the row-parallel $B$ wants. No communication between them.
Only two operators communicate (Shoeybi et al. 2019, Fig. 3):

| operator | forward | backward |
|---|---|---|
| f (before $A$) | identity | all-reduce of $\partial L/\partial X$ |
| g (after $B$) | all-reduce of partial sums | identity |

So **one all-reduce in forward and one in backward**, each of $s \cdot b \cdot h$ values. The weight gradients
$\partial L/\partial A_r = X^\top \partial L/\partial Z_r$ and $\partial L/\partial B_r = Z_r^\top
\partial L/\partial Y$ are computed locally, from the shards each rank holds.
""", r"""
## Megatron MLP：f 与 g

MLP $Y = \mathrm{GeLU}(XA)\,B$ 按 **先列并行 $A$、再行并行 $B$** 切分。由于 $A$ 按列切分，每个 rank 持有 GeLU 的
*完整*输入，非线性可以在本地计算；$A$ 的切分输出恰好就是行并行的 $B$ 需要的切分输入。两者之间无需通信。
只有两个算子需要通信（Shoeybi 等 2019，图 3）：

| 算子 | 前向 | 反向 |
|---|---|---|
| f（$A$ 之前） | 恒等 | 对 $\partial L/\partial X$ 做 AllReduce |
| g（$B$ 之后） | 对部分和做 AllReduce | 恒等 |

因此 **前向一次 AllReduce、反向一次 AllReduce**，每次 $s \cdot b \cdot h$ 个数。权重梯度
$\partial L/\partial A_r = X^\top \partial L/\partial Z_r$ 和 $\partial L/\partial B_r = Z_r^\top
\partial L/\partial Y$ 都在本地由各 rank 持有的分片计算。
"""),
    P(r"""
Which rank holds which block, for $t = 4$ ($W$ drawn with $d_{in}$ down and $d_{out}$ across; one unit = $h$):
""", r"""
$t = 4$ 时每个 rank 持有哪一块（$W$ 纵向为 $d_{in}$、横向为 $d_{out}$；一个单位 = $h$）：
"""),
    C("""
# NBVAL_IGNORE_OUTPUT
import matplotlib.pyplot as plt
from distlearn.widgets.tensor_parallel import draw_blocks
draw_blocks(4)
plt.show()
"""),
    C("""
s, b, h, f = 16, 2, 32, 128                    # sequence, micro-batch, hidden, MLP hidden (4h)
X, dY = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
A, a_bias = rng.standard_normal((h, f)) / h ** 0.5, rng.standard_normal(f)
B, b_bias = rng.standard_normal((f, h)) / f ** 0.5, rng.standard_normal(h)
Y_ref, grads_ref = tp_sim.reference_mlp(X, A, a_bias, B, b_bias, dY)   # unsharded, hand-written backward

print(bi("max|ΔY| and max|Δgrad| below 1e-12? (float64)", "max|ΔY| 和 max|Δgrad| 是否小于 1e-12？（float64）"))
print(f"{'tp':>3} {'ΔY':>6} {'Δgrad':>6}  " + bi("collectives (bytes sent per rank, float64)",
                                                "集合通信（每个 rank 发送的字节数，float64）"))
for tp in [1, 2, 4, 8]:
    r = tp_sim.megatron_mlp(X, A, a_bias, B, b_bias, dY, tp)
    dgrad = max(np.abs(r.grads[k] - grads_ref[k]).max() for k in grads_ref)
    comm = ", ".join(f"{c.phase_text()} {c.op} {c.bytes_per_rank:,}" for c in r.comm)
    print(f"{tp:>3} {str(np.abs(r.output - Y_ref).max() < 1e-12):>6} {str(dgrad < 1e-12):>6}  {comm}")
"""),
    P(r"""
The tests check the same equality against PyTorch autograd (`tests/test_tensor_parallel.py`), for forward outputs,
every weight gradient and the input gradient, for tp = 1, 2, 4, 8.

## Attention split by heads

Attention heads are independent, so the QKV projections are column-parallel **by heads**: rank $r$ holds the
columns of heads $r\cdot a/t, \dots, (r+1)\cdot a/t - 1$ and computes those heads entirely. The output projection
is row-parallel, followed by the same g all-reduce; f again all-reduces $\partial L/\partial X$ in backward.
This needs the number of heads $a$ to be divisible by $t$.
""", r"""
测试在 `tests/test_tensor_parallel.py` 中用 PyTorch 自动求导检查同样的相等关系：前向输出、每个权重梯度和输入梯度，
tp = 1, 2, 4, 8。

## 注意力按头切分

各注意力头相互独立，所以 QKV 投影 **按头** 做列并行：rank $r$ 持有第 $r\cdot a/t$ 到 $(r+1)\cdot a/t - 1$ 个头的列，
并完整地计算这些头。输出投影是行并行，之后同样是 g 的 AllReduce；反向时 f 同样对 $\partial L/\partial X$ 做 AllReduce。
这要求头数 $a$ 能被 $t$ 整除。
"""),
    C("""
heads = 8
Wq, Wk, Wv, Wo = (rng.standard_normal((h, h)) / h ** 0.5 for _ in range(4))
Y_ref, grads_ref = tp_sim.reference_attention(X, Wq, Wk, Wv, Wo, heads, dY)
for tp in [1, 2, 4, 8]:
    r = tp_sim.parallel_attention(X, Wq, Wk, Wv, Wo, heads, dY, tp)
    dgrad = max(np.abs(r.grads[k] - grads_ref[k]).max() for k in grads_ref)
    ok_y, ok_g = np.abs(r.output - Y_ref).max() < 1e-12, dgrad < 1e-12
    en_ph, zh_ph = ", ".join(c.phase for c in r.comm), "、".join(tp_sim.LABELS_ZH[c.phase] for c in r.comm)
    print(bi(f"tp={tp}: heads per rank {heads // tp}, max|ΔY| < 1e-12: {ok_y}, max|Δgrad| < 1e-12: {ok_g}, "
             f"all-reduces: {en_ph}",
             f"tp={tp}：每个 rank 的头数 {heads // tp}，max|ΔY| < 1e-12：{ok_y}，max|Δgrad| < 1e-12：{ok_g}，"
             f"AllReduce：{zh_ph}", sep="\\n      "))
"""),
    P(r"""
A shape that does not divide is refused with an error that names the sizes, never computed wrongly:
""", r"""
无法整除的形状会被拒绝，错误信息会写出相关的尺寸，而不会算出错误的结果：
"""),
    C("""
try:
    tp_sim.parallel_attention(X, Wq, Wk, Wv, Wo, heads, dY, 3)   # 8 heads over 3 ranks
except ValueError as e:
    print(e)
"""),
    P(r"""
## Communication per transformer layer

A layer has two blocks (attention and MLP), each with one all-reduce forward and one backward of the activation
$s\cdot b\cdot h$. In 16-bit precision, with a ring all-reduce, each GPU sends per layer and micro-batch

$$ 4 \times 2\,\frac{t-1}{t}\; s\,b\,h \times 2 \text{ bytes}. $$

This traffic sits on the critical path of every layer, which is why TP stays inside one node (NVLink).
Below: a GPT-3-sized layer ($h = 12288$, $s = 2048$, $b = 1$) and the weight bytes per GPU of that layer
(bf16, QKV and MLP weights split by $t$, biases of row-parallel layers and LayerNorms replicated).
""", r"""
## 每个 Transformer 层的通信量

一层有两个块（注意力和 MLP），每块在前向和反向各有一次对激活值 $s\cdot b\cdot h$ 的 AllReduce。16 位精度、环形
AllReduce 下，每张 GPU 每层、每个微批次发送

$$ 4 \times 2\,\frac{t-1}{t}\; s\,b\,h \times 2 \text{ 字节}。 $$

这些通信位于每一层的关键路径上，这也是张量并行通常只在一个节点内部（NVLink）使用的原因。
下面是 GPT-3 大小的层（$h = 12288$，$s = 2048$，$b = 1$），以及该层每张 GPU 的权重字节数（bf16，QKV 和 MLP
权重按 $t$ 切分，行并行层的偏置和 LayerNorm 为复制）。
"""),
    C("""
MiB = 2 ** 20
print(f"{'tp':>3} {'weights/GPU (MiB) / 每 GPU 权重':>32} {'sent/GPU/layer (MiB) / 每 GPU 每层发送':>38} "
      f"{'collectives / 集合通信次数':>26}")
for tp in [1, 2, 4, 8]:
    w = tp_sim.layer_weight_bytes(hidden_size=12288, tp=tp, num_heads=96)
    c = tp_sim.layer_comm_bytes(seq_len=2048, micro_batch_size=1, hidden_size=12288, tp=tp)
    print(f"{tp:>3} {w['total'] / MiB:>32.1f} {c['total'] / MiB:>38.1f} {c['num_collectives']:>26}")
"""),
    P(r"""
## Sequence parallelism

TP splits the matrix multiplications, but LayerNorm, dropout and the residual additions still run on the whole
$(s, b, h)$ activation on every rank, and their saved activations ($10\,sbh$ bytes per layer) are replicated
$t$ times. **Sequence parallelism (SP)** (Korthikanti et al. 2022, §4.2.2) splits these regions along the
sequence instead: rank $r$ holds positions $r\cdot s/t, \dots$ The all-reduce of each block becomes

- **g**: an all-gather along the sequence before the column-parallel layer (backward: a reduce-scatter), and
- **ḡ**: a reduce-scatter after the row-parallel layer (backward: an all-gather).

An all-reduce *is* a reduce-scatter followed by an all-gather, so the bytes are the same. (Megatron-LM stores
the LayerNorm output sharded and all-gathers it again in backward for the weight gradient: one extra all-gather
per block, usually overlapped with computation. The LayerNorm weights' gradients, computed on different
positions by different ranks, must be all-reduced.) Activation memory per layer (Korthikanti et al. 2022,
Table 2, bytes):

$$ \text{TP: } sbh\left(10 + \frac{24}{t} + \frac{5as}{ht}\right) \qquad
   \text{TP + SP: } sbh\left(\frac{34}{t} + \frac{5as}{ht}\right). $$
""", r"""
## 序列并行

张量并行切分了矩阵乘法，但 LayerNorm、dropout 和残差相加仍在每个 rank 上对完整的 $(s, b, h)$ 激活值计算，
它们保存的激活值（每层 $10\,sbh$ 字节）被复制了 $t$ 份。**序列并行（SP）**（Korthikanti 等 2022，§4.2.2）
改为沿序列维切分这些区域：rank $r$ 持有第 $r\cdot s/t$ 起的那些位置。每个块的 AllReduce 变成

- **g**：在列并行层之前沿序列做 AllGather（反向：ReduceScatter），以及
- **ḡ**：在行并行层之后做 ReduceScatter（反向：AllGather）。

AllReduce *就是* 先 ReduceScatter 再 AllGather，所以字节数相同。（Megatron-LM 以切分形式保存 LayerNorm 的输出，
在反向时为计算权重梯度再做一次 AllGather：每块多一次 AllGather，通常与计算重叠。各 rank 在不同位置上算出的
LayerNorm 权重梯度需要 AllReduce。）每层激活显存（Korthikanti 等 2022，表 2，字节）：

$$ \text{TP：} sbh\left(10 + \frac{24}{t} + \frac{5as}{ht}\right) \qquad
   \text{TP + SP：} sbh\left(\frac{34}{t} + \frac{5as}{ht}\right)。 $$
"""),
    C("""
gamma, beta = 1 + 0.1 * rng.standard_normal(h), 0.1 * rng.standard_normal(h)
Y_ref, grads_ref = tp_sim.reference_mlp_block(X, gamma, beta, A, a_bias, B, b_bias, dY)
for sp in [False, True]:
    r = tp_sim.sequence_parallel_mlp_block(X, gamma, beta, A, a_bias, B, b_bias, dY, 4, sequence_parallel=sp)
    dgrad = max(np.abs(r.grads[k] - grads_ref[k]).max() for k in grads_ref)
    shape, ok_y, ok_g = r.local[0]['x'].shape, np.abs(r.output - Y_ref).max() < 1e-12, dgrad < 1e-12
    print(bi(f"SP={sp}: input held per rank {shape}, max|ΔY| < 1e-12: {ok_y}, max|Δgrad| < 1e-12: {ok_g}",
             f"SP={sp}：每个 rank 持有的输入 {shape}，max|ΔY| < 1e-12：{ok_y}，max|Δgrad| < 1e-12：{ok_g}"))
    for c in r.comm:
        print(f"    {c.phase_text():>17} {c.op:>14} {c.bytes_per_rank:>7,} B  {c.label_text()}")
"""),
    C("""
kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
print(bi("activation memory per GPU per layer (MiB), and bytes sent per GPU per layer (MiB): TP, TP+SP, "
         "TP+SP with re-gather", "每张 GPU 每层的激活显存（MiB），以及每张 GPU 每层发送的字节数（MiB）：TP、TP+SP、"
         "TP+SP 且反向重新收集"))
print(f"{'tp':>3} {'TP (MiB)':>9} {'TP+SP (MiB)':>12} {'saved / 节省':>12}   " + bi("sent", "发送"))
for tp in [1, 2, 4, 8]:
    a0 = tp_sim.layer_activation_bytes(**kw, tp=tp)
    a1 = tp_sim.layer_activation_bytes(**kw, tp=tp, sequence_parallel=True)
    c0 = tp_sim.layer_comm_bytes(seq_len=2048, micro_batch_size=1, hidden_size=12288, tp=tp)["total"]
    c1 = tp_sim.layer_comm_bytes(seq_len=2048, micro_batch_size=1, hidden_size=12288, tp=tp,
                                 sequence_parallel=True, regather_in_backward=False)["total"]
    c2 = tp_sim.layer_comm_bytes(seq_len=2048, micro_batch_size=1, hidden_size=12288, tp=tp,
                                 sequence_parallel=True)["total"]
    print(f"{tp:>3} {a0 / MiB:>9.0f} {a1 / MiB:>12.0f} {1 - a1 / a0:>12.0%}   {c0 / MiB:.0f}, {c1 / MiB:.0f}, {c2 / MiB:.0f}")
"""),
    P(r"""
## Real tensor parallelism with DTensor

PyTorch's `parallelize_module` shards an `nn.Module` over a device mesh: `ColwiseParallel` shards
`nn.Linear.weight` (shape `(out, in)`) along dim 0, which is our column split of $W = $ `weight.T`;
`RowwiseParallel` shards it along dim 1 and all-reduces the output. The lab `distlearn.labs.tensor_parallel`
builds a small MLP ($h = 16$, $f = 64$), a causal attention block (4 heads) and a pre-LN MLP block with sequence
parallelism (`SequenceParallel` LayerNorm, `ColwiseParallel(input_layouts=Shard(0))`,
`RowwiseParallel(output_layouts=Shard(0))`) on every rank with the same seed, shards them on gloo, and compares outputs and gradients with an unsharded copy. It also returns each rank's
local shards (`to_local()`), which we compare with the simulation's shards. The same lab runs on GPUs with
`torchrun --nproc-per-node 2 -m distlearn.labs.tensor_parallel`.
""", r"""
## 用 DTensor 做真实的张量并行

PyTorch 的 `parallelize_module` 把一个 `nn.Module` 切分到设备网格 (DeviceMesh) 上：`ColwiseParallel` 沿第 0 维切分
`nn.Linear.weight`（形状 `(out, in)`），这正是对 $W = $ `weight.T` 的列切分；`RowwiseParallel` 沿第 1 维切分，并对
输出做 AllReduce。实验 `distlearn.labs.tensor_parallel` 在每个 rank 上用相同的随机种子构建一个小 MLP（$h = 16$，
$f = 64$）、一个因果注意力块（4 个头）和一个带序列并行的 pre-LN MLP 块（`SequenceParallel` 的 LayerNorm、
`ColwiseParallel(input_layouts=Shard(0))`、`RowwiseParallel(output_layouts=Shard(0))`），在 gloo 上切分，并把输出和梯度与未切分的副本比较。它还返回每个 rank 的本地
分片（`to_local()`），我们把它们与模拟得到的分片比较。同一个实验用
`torchrun --nproc-per-node 2 -m distlearn.labs.tensor_parallel` 即可在 GPU 上运行。
"""),
    C("""
from distlearn import launch
from distlearn.labs.tensor_parallel import tp_check

for world_size in [2, 4]:
    results = launch.run(tp_check, world_size)
    full, x0, g0 = results[0]["mlp"]["full"], results[0]["x"], results[0]["grad_out"]
    sim = tp_sim.megatron_mlp(x0, full["fc1.weight"].T, full["fc1.bias"], full["fc2.weight"].T,
                              full["fc2.bias"], g0, world_size)
    same = all(np.array_equal(r["mlp"]["local"]["fc1.weight"], sim.local[k]["w1"].T)
               and np.array_equal(r["mlp"]["local"]["fc2.weight"], sim.local[k]["w2"].T)
               and np.allclose(r["mlp"]["local_grads"]["fc1.weight"], sim.local[k]["grad_w1"].T, atol=1e-12)
               for k, r in enumerate(results))
    for block in ["mlp", "attention", "sp_block"]:
        err_out = max(r[block]["out_err"] for r in results)
        err_grad = max(r[block]["grad_err"] for r in results)
        ok_o, ok_g = err_out < 1e-12, err_grad < 1e-12
        n, shape = results[0][block]['local_numel'], results[0][block]['out_shape']
        print(bi(f"world_size={world_size} {block:>9}: max|Δoutput| < 1e-12: {ok_o}, max|Δgrad| < 1e-12: {ok_g}, "
                 f"rank 0 stores {n} params, output {shape}",
                 f"{'':>23}max|Δ输出| < 1e-12：{ok_o}，max|Δ梯度| < 1e-12：{ok_g}，rank 0 存 {n} 个参数，"
                 f"输出形状 {shape}", sep="\\n"))
    print("    " + bi(f"simulated MLP shards == DTensor to_local() shards (weights and gradients): {same}",
                      f"模拟的 MLP 分片 == DTensor to_local() 分片（权重和梯度）：{same}"))
"""),
    P(r"""
(The lab computes in float64, so the differences are at the level of rounding, far below $10^{-12}$; the exact tiny values depend on the CPU, so we print only the comparison.)

## Explorer

Choose the TP degree, the hidden size (heads of width 128, $f = 4h$), the sequence length, the micro-batch size
and whether sequence parallelism is on: the explorer shows the per-GPU weight memory, activation memory and
bytes sent for one layer, and which rank holds which block of each weight matrix. Try a TP degree that does not
divide the number of heads.
""", r"""
（实验用 float64 计算，所以差异处于舍入误差水平，远小于 $10^{-12}$；具体的微小数值取决于 CPU，所以这里只打印比较结果。）

## 探索器

选择张量并行度、隐藏维度（每头 128 维，$f = 4h$）、序列长度、微批次大小以及是否开启序列并行：探索器显示一层的
每张 GPU 权重显存、激活显存和发送的字节数，以及每个 rank 持有每个权重矩阵的哪一块。试试一个不能整除头数的张量并行度。
"""),
    C("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import tensor_parallel as tp_widget
tp_widget.explorer()
"""),
    P(r"""
## Summary

- Column-parallel: split output features; needs the whole input; the output is split (all-gather to assemble it).
  Its backward all-reduces $\partial L/\partial X$.
- Row-parallel: split input features; partial sums of the full output must be **all-reduced**; backward needs no
  communication.
- Megatron MLP and attention: column then row, so each block costs one all-reduce in forward (g) and one in
  backward (f), $2(t-1)/t\cdot sbh$ values each per rank; a layer sends $8(t-1)/t\cdot sbh$ values per GPU.
- Heads and the MLP width must be divisible by $t$.
- Sequence parallelism replaces each all-reduce with all-gather + reduce-scatter (same bytes) and divides the
  remaining $10\,sbh$ of activations by $t$.
- DTensor's `ColwiseParallel` / `RowwiseParallel` hold exactly the shards the simulation computes, and match the
  unsharded model.
""", r"""
## 小结

- 列并行：切分输出特征；需要完整输入；输出是切分的（要拼成完整输出需 AllGather）。它的反向需要对
  $\partial L/\partial X$ 做 AllReduce。
- 行并行：切分输入特征；完整形状输出的部分和必须 **AllReduce**；反向不需要通信。
- Megatron 的 MLP 和注意力：先列后行，所以每个块前向一次 AllReduce（g）、反向一次（f），每次每个 rank 发送
  $2(t-1)/t\cdot sbh$ 个数；每层每张 GPU 发送 $8(t-1)/t\cdot sbh$ 个数。
- 注意力头数和 MLP 宽度必须能被 $t$ 整除。
- 序列并行把每次 AllReduce 换成 AllGather + ReduceScatter（字节数相同），并把其余 $10\,sbh$ 的激活值除以 $t$。
- DTensor 的 `ColwiseParallel` / `RowwiseParallel` 持有的分片与模拟计算的完全相同，结果与未切分模型一致。
"""),
    P(r"""
## Exercises

In [exercises/04_tensor_parallel.ipynb](../exercises/04_tensor_parallel.ipynb): write the row-parallel forward
with its all-reduce, the input gradient of a column-parallel layer, count the bytes a GPU sends per layer, and compute the activation memory sequence
parallelism saves. Solutions: [solutions/04_tensor_parallel.ipynb](../solutions/04_tensor_parallel.ipynb).

**Next / 下一章:** [05 · Pipeline parallelism](05_pipeline_parallel.ipynb).
""", r"""
## 练习

在 [exercises/04_tensor_parallel.ipynb](../exercises/04_tensor_parallel.ipynb) 中：写出带 AllReduce 的行并行前向和列并行层的输入梯度，
计算每张 GPU 每层发送的字节数，并计算序列并行节省的激活显存。参考答案：
[solutions/04_tensor_parallel.ipynb](../solutions/04_tensor_parallel.ipynb)。

**下一章 / Next:** [05 · 流水线并行](05_pipeline_parallel.ipynb)。
"""),
]

solutions = [
    P(r"""
# 04 · Tensor parallelism: exercises

Complete each function, then run the check cell below it: it runs hidden cases and prints ✓ or ✗ with a hint.
""", r"""
# 04 · 张量并行：练习

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例，并给出 ✓ 或 ✗ 及提示。
"""),
    C("""
import numpy as np
from distlearn import check
from distlearn.comm import VirtualCluster
"""),
    P(r"""
## Exercise 1: row-parallel forward

Compute $Y = XW$ on `tp` ranks of a `VirtualCluster`: rank $r$ holds the $r$-th block of columns of `x` and the
$r$-th block of rows of `w`. Use `cluster.all_reduce` (a list with one array per rank, returns one per rank) to add
the partial sums. Return `(output, bytes_sent_per_rank)` where the bytes are `cluster.bytes_sent[0]`.
""", r"""
## 练习 1：行并行前向

在 `VirtualCluster` 的 `tp` 个 rank 上计算 $Y = XW$：rank $r$ 持有 `x` 的第 $r$ 块列和 `w` 的第 $r$ 块行。用
`cluster.all_reduce`（输入每个 rank 一个数组的列表，返回每个 rank 一个）把部分和相加。返回
`(output, bytes_sent_per_rank)`，其中字节数为 `cluster.bytes_sent[0]`。
"""),
    C("""
def row_parallel_forward(x, w, tp):
    cluster = VirtualCluster(tp)
    ### BEGIN SOLUTION
    x_shards = np.split(x, tp, axis=1)
    w_shards = np.split(w, tp, axis=0)
    partial = [xr @ wr for xr, wr in zip(x_shards, w_shards)]
    out = cluster.all_reduce(partial)
    return out[0], int(cluster.bytes_sent[0])
    ### END SOLUTION
"""),
    C("check.ex04_row_parallel_forward(row_parallel_forward)"),
    P(r"""
## Exercise 2: the backward of a column-parallel layer

For a column-parallel $Y = XW$, rank $r$ holds the columns $W_r$ and receives the gradient of its output block,
`grad_out[:, block r]`. Compute $\partial L/\partial X$ on `tp` ranks of a `VirtualCluster` (the backward of f)
and return `(grad_x, bytes_sent_per_rank)`.
""", r"""
## 练习 2：列并行层的反向

对列并行的 $Y = XW$，rank $r$ 持有列块 $W_r$，并收到其输出块的梯度 `grad_out[:, block r]`。在 `VirtualCluster`
的 `tp` 个 rank 上计算 $\partial L/\partial X$（即 f 的反向），返回 `(grad_x, bytes_sent_per_rank)`。
"""),
    C("""
def column_parallel_grad_input(grad_out, w, tp):
    cluster = VirtualCluster(tp)
    ### BEGIN SOLUTION
    g_shards = np.split(grad_out, tp, axis=1)
    w_shards = np.split(w, tp, axis=1)
    partial = [gr @ wr.T for gr, wr in zip(g_shards, w_shards)]
    grad_x = cluster.all_reduce(partial)
    return grad_x[0], int(cluster.bytes_sent[0])
    ### END SOLUTION
"""),
    C("check.ex04_column_parallel_grad_input(column_parallel_grad_input)"),
    P(r"""
## Exercise 3: bytes per layer

Return the bytes one GPU sends for one transformer layer (attention + MLP, forward + backward, no sequence
parallelism, ring all-reduce) for activations of `dtype_bytes` bytes per value.
""", r"""
## 练习 3：每层的字节数

返回一张 GPU 在一个 Transformer 层（注意力 + MLP，前向 + 反向，无序列并行，环形 AllReduce）中发送的字节数，
激活值每个数占 `dtype_bytes` 字节。
"""),
    C("""
def layer_comm_bytes(seq_len, micro_batch_size, hidden_size, tp, dtype_bytes):
    ### BEGIN SOLUTION
    activation = seq_len * micro_batch_size * hidden_size * dtype_bytes
    return 4 * round(2 * (tp - 1) / tp * activation)
    ### END SOLUTION
"""),
    C("check.ex04_layer_comm_bytes(layer_comm_bytes)"),
    P(r"""
## Exercise 4: what sequence parallelism saves

Return the activation bytes per layer per GPU that sequence parallelism saves, from Korthikanti et al. 2022,
Table 2 (the formulas already count bytes).
""", r"""
## 练习 4：序列并行节省了什么

根据 Korthikanti 等 2022 的表 2，返回序列并行为每张 GPU 每层节省的激活字节数（公式本身已按字节计）。
"""),
    C("""
def sp_activation_saving(seq_len, micro_batch_size, hidden_size, num_heads, tp):
    ### BEGIN SOLUTION
    s, b, h, a, t = seq_len, micro_batch_size, hidden_size, num_heads, tp
    without = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    with_sp = s * b * h * (34 / t + 5 * a * s / (h * t))
    return without - with_sp
    ### END SOLUTION
"""),
    C("check.ex04_sp_activation_saving(sp_activation_saving)"),
]

if __name__ == "__main__":
    nbformat.write(new_notebook(chapter), ROOT / "notebooks" / "04_tensor_parallel.ipynb")
    nbformat.write(new_notebook(solutions), ROOT / "solutions" / "04_tensor_parallel.ipynb")
