"""Build notebooks/10_planning.ipynb and solutions/10_planning.ipynb with nbformat (then execute them with
``python -m distlearn.course execute`` and run ``python -m distlearn.course build-exercises``)."""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

ROOT = Path(__file__).resolve().parents[2]

chapter = [
    pair("""# 10 · Planning a training run

You have a model, a cluster, a global batch size and a sequence length. How should you split the work? This chapter
combines everything so far — data, tensor and pipeline parallelism, ZeRO, recomputation, micro-batching — into a
**planner** that lists every valid plan, keeps those that fit in memory, estimates their step time and ranks them.

**Learning objectives**
- add up the memory of one GPU under a plan: model states sharded by ZeRO over *dp*, activations × layers ×
  micro-batches in flight, logits, and a reserve you cannot use;
- estimate a step's time from FLOPs, exposed communication and the pipeline bubble, and read tokens/s and MFU;
- check the model against published runs (the ZeRO paper, Megatron-LM on 1024 and 3072 A100s);
- find the fewest GPUs for a model and explain why a plan is communication-bound.""",
         """# 10 · 规划一次大模型训练

给定模型、集群、全局批量大小和序列长度，应该怎样切分工作？本章把前面各章的内容——数据并行、张量并行、流水线并行、
ZeRO、重计算、微批次——组合成一个**规划器**：列出所有合法方案，保留放得进显存的方案，估计每步时间并排序。

**学习目标**
- 算清一个方案下单张 GPU 的显存：按 *dp* 做 ZeRO 分片的模型状态、激活值 × 层数 × 在途微批次数、logits，以及不可用的预留；
- 由 FLOPs、未被隐藏的通信和流水线气泡估计每步时间，读懂 tokens/s 和 MFU（模型 FLOPs 利用率）；
- 用已发表的训练（ZeRO 论文、Megatron-LM 在 1024 和 3072 块 A100 上的训练）检验这个模型；
- 找出一个模型最少需要多少 GPU，并解释一个方案为何受通信限制。"""),
    code("""%matplotlib inline
import matplotlib.pyplot as plt
from distlearn import planner, plots, seeds_planning
from distlearn.hardware import GPUS
from distlearn.i18n import bi
from distlearn.memory import GB, GiB
from distlearn.models import PRESETS"""),
    pair("""## The hardware

Every number the planner uses comes from a datasheet (sources in `distlearn/hardware.py`). Bandwidths are per GPU and
per direction: NVIDIA quotes NVLink as the two directions added, so 900 GB/s becomes 450 GB/s; a 400 Gb/s network
card moves 50 GB/s. Peak FLOP/s are dense 16-bit figures (the datasheets' headline numbers assume 2:4 sparsity and
are twice as large). Memory is the datasheet capacity in GB (1 GB = 1e9 bytes): an "A100 80GB" counts as 80 × 10⁹
bytes, slightly less than the 80 GiB (85.9 GB) the card really has, and the planner then also holds back a reserve —
a deliberately conservative choice.""",
         """## 硬件

规划器用到的每个数字都来自官方数据手册（出处见 `distlearn/hardware.py`）。带宽按每块 GPU、每个方向计：NVIDIA 给出的
NVLink 带宽是两个方向之和，900 GB/s 因此记为 450 GB/s；400 Gb/s 的网卡每秒传 50 GB。峰值算力是稠密 16 位算力
（数据手册上醒目的数字假设了 2:4 稀疏，是它的两倍）。显存取数据手册上以 GB 计的容量（1 GB = 1e9 字节）：一块“A100 80GB”
按 80 × 10⁹ 字节计，略少于这张卡实际拥有的 80 GiB（85.9 GB），规划器还要再扣除一份预留——这是有意保守的选择。"""),
    code("""print("GPU        memory    peak 16-bit   NVLink/dir.  network/GPU    GPUs/node")
print("GPU        显存      16 位峰值     NVLink 单向  每卡网络       每节点 GPU 数")
for g in GPUS.values():
    print(f"{g.name:10} {g.memory_bytes / GB:5.0f} GB  {g.peak_flops / 1e12:4.0f} TFLOP/s  "
          f"{g.nvlink_bw / 1e9:6.0f} GB/s  {g.network_bw / 1e9:8.2f} GB/s  {g.gpus_per_node:8}")
a100 = GPUS["a100-80gb"].memory_bytes
print(bi(f"a100-80gb: the planner uses {a100 / GB:.0f} GB = {a100 / GiB:.1f} GiB; the card has 80 GiB = "
         f"{80 * GiB / GB:.1f} GB.",
         f"a100-80gb：规划器按 {a100 / GB:.0f} GB = {a100 / GiB:.1f} GiB 计；这张卡实际有 80 GiB = {80 * GiB / GB:.1f} GB。",
         sep="\\n"))"""),
    pair("""## The seed's memory table

The seed code (the starting snippets this course corrects; see chapter 00) has a `run_all_demos` that printed this
table from its `memory_calculator` (a faithful copy lives in `distlearn.seeds_planning`):""",
         """## 种子代码的显存表

种子代码（本课程纠正的起始代码片段，见第 00 章）中的 `run_all_demos` 用它的 `memory_calculator` 打印了下面这张表
（`distlearn.seeds_planning` 中保留了原样副本）："""),
    code("""print(bi("The seed's table, exactly as it printed it:", "种子代码原样打印的表（英文表头：模型、分片、GPU 数、每卡显存、"
         "是否放得进 80GB）：", sep="\\n"))
print(seeds_planning.seed_memory_table())"""),
    pair("""> **Common misconception.** "7B on 8 GPUs with FSDP needs 17.5 GB, 405B on 128 GPUs needs 443 GB." The seed
> (1) forgets Adam's fp32 master weights: mixed-precision Adam costs 2 + 2 + 12 = 16 bytes per parameter, not 12;
> (2) invents activations as `0.5 × params × 2 bytes` — a constant with no source, that never shrinks with sharding,
> recomputation or a shorter sequence (its other branch, `4·s·b·h·2` per layer, undercounts Korthikanti et al.'s
> s·b·h·(34 + 5·a·s/h));
> (3) "FSDP" divides by the number of GPUs, which is right only when every GPU is a data-parallel rank;
> (4) says "fits" when the total is ≤ 80 GB, but the CUDA context, NCCL buffers and the allocator's fragmentation take
> several GB, and it never says whether 80 means GB or GiB.
> Below, each row done right: 16 B/parameter sharded over dp, Korthikanti's activations for the model's real shape
> (seq 2048, one sequence per GPU), our reserve of 2 GB + 10 %, in GB and GiB; and the planner's answer to the
> question the seed really asked — can *any* plan (adding tensor/pipeline parallelism and recomputation) train it?""",
         """> **常见误区。** “7B 模型用 8 张卡的 FSDP 只要 17.5 GB，405B 用 128 张卡要 443 GB。”种子代码
> (1) 漏掉了 Adam 的 fp32 主权重：混合精度 Adam 每个参数 2 + 2 + 12 = 16 字节，而不是 12；
> (2) 把激活值编造为 `0.5 × 参数量 × 2 字节`——没有出处的常数，而且不会随分片、重计算或更短的序列而减小
> （另一分支每层 `4·s·b·h·2` 则低估了 Korthikanti 等人的 s·b·h·(34 + 5·a·s/h)）；
> (3) “FSDP” 除以 GPU 数，只有当每张 GPU 都是数据并行的 rank 时才对；
> (4) 总数 ≤ 80 GB 就说“放得下”，但 CUDA 上下文、NCCL 缓冲区和分配器碎片要占几个 GB，而且没有说明 80 指 GB 还是 GiB。
> 下面逐行改正：每参数 16 字节按 dp 分片，按模型真实形状用 Korthikanti 公式计算激活值（序列长度 2048、每张 GPU 一条序列），
> 预留 2 GB + 10 %，同时给出 GB 和 GiB；最后一列是规划器对种子真正想问的问题的回答——加上张量/流水线并行和重计算后，
> 是否*存在*能训练它的方案？"""),
    code("""print("no recomputation / 不重计算")
print(seeds_planning.corrected_memory_table("none"))
print()
print("full recomputation / 完全重计算")
print(seeds_planning.corrected_memory_table("full"))"""),
    pair("""Without recomputation the activations of a 70B model at 2048 tokens are 153 GB per sequence — far more than the
seed's invented 70 GB — yet with full recomputation they drop to a few GB (the "acts GB" column of the second
table). 70B with ZeRO-3 on 16 GPUs does not fit
by sharding alone (70 GB of model states + reserve), but the planner finds a plan once tensor and pipeline
parallelism also split it; 405B on 64 80 GB GPUs cannot fit in any way: its model states alone are 101 GB per GPU.""",
         """不做重计算时，70B 模型在 2048 个词元上的激活值每条序列就有 153 GB——远多于种子编造的 70 GB——而完全重计算后只剩几 GB
（见第二张表的“激活”一列）。70B 模型在 16 张卡上只靠 ZeRO-3 分片放不下（70 GB 模型状态加预留），但加上张量并行和流水线并行后规划器能找到方案；
405B 在 64 张 80 GB 的卡上无论如何都放不下：仅模型状态每张卡就有 101 GB。"""),
    pair("""## Memory of one plan

For a plan (dp, tp, pp, ZeRO stage, recomputation, micro-batch size b and count m, v interleaved chunks), the
worst GPU holds:

- **model states** of its stage: $16\\,\\Psi_\\text{stage}/t$ bytes, of which ZeRO stage 1 shards the 12 optimizer
  bytes, stage 2 also the 2 gradient bytes, stage 3 also the 2 weight bytes — over **dp** (Rajbhandari et al. 2020);
- **activations**: per layer $s\\,b\\,h\\,(34/t + 5as/(ht))$ bytes with sequence parallelism (Korthikanti et al. 2022,
  Table 2; selective recomputation drops the $5as/h$ term, full keeps only $2sbh/t$ per layer plus one layer's full
  set while recomputing), times the layers of the stage, times the micro-batches in flight: with 1F1B the first stage
  holds $\\min(p, m)$ of them, and interleaving multiplies that by $1 + (p-1)/(pv)$;
- **logits** on the last stage, $4sbh/t\\,(1 + V/h)$ bytes (fp32 for the loss), a **ZeRO-3 buffer** of two gathered
  layers, and a **reserve** of 2 GB + 10 % of the device for the CUDA context, NCCL buffers and fragmentation.

(Korthikanti's formula is for GPT blocks; for Llama's SwiGLU MLP and grouped-query attention it is an approximation.)""",
         """## 一个方案的显存

对一个方案（dp、tp、pp、ZeRO 阶段、重计算方式、微批次大小 b 与个数 m、交错块数 v），最吃紧的 GPU 要放：

- 其流水线阶段的**模型状态**：$16\\,\\Psi_\\text{stage}/t$ 字节，其中 ZeRO 第 1 阶段把 12 字节优化器状态、第 2 阶段再把
  2 字节梯度、第 3 阶段再把 2 字节权重分片到 **dp** 上（Rajbhandari 等，2020）；
- **激活值**：开启序列并行时每层 $s\\,b\\,h\\,(34/t + 5as/(ht))$ 字节（Korthikanti 等，2022，表 2；选择性重计算去掉
  $5as/h$ 项，完全重计算每层只留 $2sbh/t$，另加重算时一层的完整激活值），乘以该阶段的层数，再乘以在途微批次数：
  1F1B 中第一个阶段保存 $\\min(p, m)$ 个，交错调度再乘以 $1 + (p-1)/(pv)$；
- 最后一个阶段的 **logits**，$4sbh/t\\,(1 + V/h)$ 字节（计算损失用 fp32）；ZeRO-3 的两层已收集参数的**缓冲**；以及
  2 GB + 显存 10 % 的**预留**，留给 CUDA 上下文、NCCL 缓冲区和碎片。

（Korthikanti 的公式针对 GPT 结构；对 Llama 的 SwiGLU MLP 与分组查询注意力只是近似。）"""),
    code("""MEMORY_ZH = {"params": "参数", "grads": "梯度", "optimizer": "优化器状态", "activations": "激活值",
             "logits": "logits", "zero3_buffer": "ZeRO-3 缓冲", "reserve": "预留", "total": "合计"}
model = PRESETS["llama3-70b"]
for zero in (1, 2):
    plan = planner.Plan(dp=8, tp=8, pp=1, zero_stage=zero, recompute="selective", micro_batch_size=1,
                        num_microbatches=64)
    est = planner.evaluate(model, plan, global_batch=512, seq_len=8192, gpu="h100-80gb")
    print(plan.describe())
    for k, v in est.memory.items():
        print(f"  {k:13} {v / GB:7.2f} GB  {v / GiB:7.2f} GiB   {MEMORY_ZH[k]}")
    print("  capacity / 容量", est.capacity / GB, "GB; fits / 放得下:", est.fits)"""),
    pair("""With ZeRO-1 the 16-bit gradients (17.6 GB, replicated over the 8 data-parallel ranks) push the total 2 GB over
the 80 GB; ZeRO-2 shards them too and the plan fits with room to spare.""",
         """使用 ZeRO-1 时，16 位梯度（17.6 GB，在 8 个数据并行 rank 上各存一份）让总量超出 80 GB 约 2 GB；ZeRO-2 把梯度也分片后，
这个方案绰绰有余地放得下。"""),
    pair("""> **Common misconception.** "ZeRO divides the model states by the number of GPUs." It divides them by the
> *data-parallel* degree. On 8 GPUs all used for tensor parallelism, dp = 1 and every ZeRO stage leaves the memory
> exactly where it was; with dp = 8 (tp = 1) stage 3 divides it by 8.""",
         """> **常见误区。** “ZeRO 把模型状态除以 GPU 数。”它除以的是*数据并行*度。8 张卡全部用于张量并行时 dp = 1，
> 每个 ZeRO 阶段的显存都和不用 ZeRO 完全一样；dp = 8（tp = 1）时第 3 阶段才把它除以 8。"""),
    code("""m13 = PRESETS["llama2-13b"]
for dp, tp in [(1, 8), (8, 1)]:
    row = []
    for z in range(4):
        e = planner.evaluate(m13, planner.Plan(dp=dp, tp=tp, pp=1, zero_stage=z, num_microbatches=8 // dp),
                             global_batch=8, seq_len=2048, gpu="a100-80gb")
        row.append(f"{(e.memory['params'] + e.memory['grads'] + e.memory['optimizer']) / GB:6.1f}")
    print(f"dp={dp} tp={tp}: model states GB for ZeRO 0-3 / 各 ZeRO 阶段的模型状态 (GB):", " ".join(row))"""),
    pair("""## Time of one step

**Compute.** A forward pass costs $F = 2Bs\\,(l\\,P_\\text{matmul} + Vh) + 4Bs^2hl$ FLOPs: every weight in a matrix
multiply costs 2 FLOPs per token, attention scores and their product with V cost $4s^2h$ per layer and sequence, and
the logits $2shV$. Backward costs twice the forward, so a step is $3F$ — the *model* FLOPs that MFU counts (Chowdhery
et al. 2022). Full recomputation runs the layers' forward again ($4F$ on the layers); for a GPT block
($P_\\text{matmul} = 12h^2$) this is exactly Narayanan et al.'s eq. 3,
$96\\,Bslh^2\\,(1 + s/6h + V/16lh)$. The time is FLOPs / (peak × 55 %): the 55 % is our stated kernel efficiency.

**Communication** (ring: $2(n-1)/n$ × bytes / bandwidth per all-reduce): tensor parallelism all-reduces $bsh$ 16-bit
values 4 times per layer (6 with full recomputation) over NVLink, on the critical path; pipeline stages exchange
$2bsh/t$ bytes per micro-batch; data parallelism synchronizes gradients once per step (ZeRO-3: gathers weights every
micro-batch), hidden behind backward where the framework can. **Bubble:** $(p-1)/(vm)$ of the ideal time.

First, the FLOP formula against PyTorch's own FLOP counter on a small real model, and against Megatron's eq. 3 and
$6ND$ for GPT-3 175B:""",
         """## 一步的时间

**计算。** 一次前向传播的 FLOPs 为 $F = 2Bs\\,(l\\,P_\\text{matmul} + Vh) + 4Bs^2hl$：矩阵乘法中的每个权重每个词元 2 次
浮点运算，注意力分数及其与 V 的乘积每层每条序列 $4s^2h$，logits 为 $2shV$。反向传播是前向的两倍，所以一步是 $3F$——即
MFU 统计的*模型* FLOPs（Chowdhery 等，2022）。完全重计算会把各层的前向再算一遍（各层 $4F$）；对 GPT 结构
（$P_\\text{matmul} = 12h^2$）这正是 Narayanan 等人的公式 3，$96\\,Bslh^2\\,(1 + s/6h + V/16lh)$。时间 = FLOPs /（峰值 × 55 %），
55 % 是我们明确假设的算子效率。

**通信**（环形算法：每次 AllReduce（全规约）耗时 $2(n-1)/n$ × 字节数 / 带宽）：张量并行每层对 $bsh$ 个 16 位数做 4 次
AllReduce（完全重计算时 6 次），走 NVLink，位于关键路径上；流水线阶段之间每个微批次交换 $2bsh/t$ 字节；数据并行每步同步一次
梯度（ZeRO-3 每个微批次都要收集权重），框架能做到时隐藏在反向传播之后。**气泡：** 理想时间的 $(p-1)/(vm)$。

先把 FLOPs 公式与 PyTorch 自带的 FLOP 计数器（在一个小的真实模型上）对照，再与 GPT-3 175B 的 Megatron 公式 3 和 $6ND$ 对照："""),
    code("""from distlearn.models import ModelConfig
tiny = ModelConfig("tiny-llama", "llama", 96, 64, 2, 4, 160, 32, num_kv_heads=2)
measured = planner.measured_flops(tiny, 3, 32)              # real PyTorch: FlopCounterMode
formula = sum(planner.forward_flops(tiny, 3, 32).values())
print("forward  measured / 实测", measured["forward"], " formula / 公式", formula)
print("backward measured / 实测", measured["backward"], " 2 × forward / 前向的 2 倍", 2 * formula)

gpt3 = planner.GPT3_175B_MEGATRON
full = planner.step_flops(gpt3, 1536, 2048, "full")["hardware"]
print(f"GPT-3 175B, B=1536: ours with full recompute / 我们的公式（完全重计算） {full:.4e}, "
      f"Megatron eq. 3 / 公式 3 {planner.megatron_flops(gpt3, 1536, 2048):.4e}")
print(f"model FLOPs / 6ND = {planner.step_flops(gpt3, 1536, 2048)['model'] / (6 * gpt3.num_parameters() * 1536 * 2048):.4f}")"""),
    code("""TIME_ZH = {"compute": "计算", "tp_comm": "张量并行通信", "pp_comm": "流水线通信", "bubble": "流水线气泡",
           "dp_comm": "数据并行通信（未隐藏）", "total": "合计"}
plan = planner.Plan(dp=8, tp=8, pp=1, zero_stage=2, recompute="selective", micro_batch_size=1, num_microbatches=64)
est = planner.evaluate(PRESETS["llama3-70b"], plan, global_batch=512, seq_len=8192, gpu="h100-80gb")
print(f"Llama 3 70B, {plan.describe()}, seq 8192, batch 512, H100")
print("time per step, s / 每步时间（秒）")
for k, v in est.time.items():
    print(f"  {k:9} {v:8.2f}   {TIME_ZH.get(k, k)}")
print(f"tokens/s {est.tokens_per_s:,.0f}   MFU {est.mfu:.1%}   bubble / 气泡 {est.bubble_fraction:.1%}")"""),
    pair("""## Checks against published runs

**ZeRO, Table 2.** The paper's "maximum theoretical model size" counts **model states only** (16 bytes per
parameter with mixed-precision Adam, sharded as above), on 32 GB V100s (32 × 10⁹ bytes) with dp = 64, no activations
and no reserve. The memory side of the planner reproduces every row (for MP > 1 the paper multiplies its rounded
MP = 1 figures, hence 121.6 beside our 122.3):""",
         """## 与已发表结果对照

**ZeRO 论文表 2。** 论文中的“理论最大模型规模”**只计模型状态**（混合精度 Adam 每参数 16 字节，按上文方式分片），
在 32 GB（32 × 10⁹ 字节）的 V100 上、dp = 64，不计激活值和预留。规划器的显存部分复现了每一行（MP > 1 时论文是把 MP = 1 的取整结果乘以 MP，所以 121.6 旁边是我们的 122.3）："""),
    code("""paper = {1: (2, 7.6, 14.4, 128), 2: (4, 15.2, 28.8, 256), 4: (8, 30.4, 57.6, 512), 8: (16, 60.8, 115.2, 1024),
         16: (32, 121.6, 230.4, 2048)}
v100 = GPUS["v100-32gb"]
print(f"{'MP':>3} {'GPUs':>5} | {'baseline':>17} {'P_os':>17} {'P_os+g':>17} {'P_os+g+p':>17}  (billions: paper / ours)")
print("(单位：十亿参数；每格为 论文 / 我们的结果；baseline = 不用 ZeRO)")
for mp, row in paper.items():
    ours = [planner.zero_max_params(v100.memory_bytes, dp=64, zero_stage=z, mp=mp) / 1e9 for z in range(4)]
    print(f"{mp:>3} {64 * mp:>5} | " + " ".join(f"{p:>8g} / {o:>6.1f}" for p, o in zip(row, ours)))"""),
    pair("""**Megatron-LM** (Narayanan et al. 2021, Table 1): GPT-3 175B on 1024 A100s (tp 8, pp 8, dp 16, batch 1536) at
138 TFLOP/s per GPU, and a 1T-parameter GPT on 3072 A100s (tp 8, pp 64, dp 6, batch 3072) at 163 TFLOP/s (52 % of
peak). We evaluate those exact layouts (micro-batch 1, full recomputation, no interleaving — our reading of the setup)
with the same constants as every other plan, and count FLOP/s the paper's way (eq. 3):""",
         """**Megatron-LM**（Narayanan 等，2021，表 1）：GPT-3 175B 在 1024 块 A100 上（tp 8、pp 8、dp 16、批量 1536）每块
GPU 达到 138 TFLOP/s；1T 参数的 GPT 在 3072 块 A100 上（tp 8、pp 64、dp 6、批量 3072）达到 163 TFLOP/s（峰值的 52 %）。
我们用与其他所有方案相同的常数评估这两个布局（微批次大小 1、完全重计算、不交错——这是我们对其设置的理解），并按论文的方式
（公式 3）统计 FLOP/s："""),
    code("""print(f"{'run':20} {'fits':>5} {'mem GB':>7} {'published':>10} {'predicted':>10} {'ratio':>6} {'tokens/s pub.':>14} {'pred.':>10}")
print(f"{'训练':18} {'可放':>3} {'显存 GB':>5} {'已发表':>7} {'预测':>8} {'比值':>4} {'已发表 词元/秒':>9} {'预测':>8}")
for name in planner.PUBLISHED_RUNS:
    r = planner.compare_published(name)
    print(f"{name:20} {str(r['fits']):>5} {r['estimate'].memory['total'] / GB:7.1f} {r['published_flops'] / 1e12:7.0f} TF "
          f"{r['predicted_flops'] / 1e12:7.0f} TF {r['ratio']:6.2f} {r['published_tokens_per_s']:14,.0f} "
          f"{r['predicted_tokens_per_s']:10,.0f}")"""),
    code("""res = planner.search(planner.GPT3_175B_MEGATRON, global_batch=1536, seq_len=2048, gpu="a100-80gb", num_gpus=1024,
                     top=3)
print("the planner's own best plans for GPT-3 175B on 1024 A100s / 规划器为 1024 块 A100 上的 GPT-3 175B 找到的最佳方案:")
for e in res.plans:
    print(f"  {e.plan.describe():60} {e.achieved_flops / 1e12:4.0f} TFLOP/s per GPU, MFU {e.mfu:.1%}")"""),
    pair("""Both runs fit, and one efficiency constant predicts both within the band the tests enforce (0.75–1.25 of the
published figure). The 1T run is under-predicted: its matrices (h = 25 600) are larger and reach a higher share of
peak than the 175B model's, and a single constant cannot know that — a reminder that the planner ranks plans well but
its absolute numbers are ±25 % estimates. The planner's own favourites for 175B use selective recomputation (made
possible by sequence parallelism: Korthikanti et al. 2022 report a 530B model on 2240 A100s at 54.2 % MFU with it,
29 % faster than the 42.1 % they reach with full recomputation),
and ZeRO-3 instead of pipeline parallelism: in this model its all-gathers hide behind the compute of large
micro-batches. Real ZeRO-3 overlap is less perfect than that — a reason to measure a plan before committing to it.""",
         """两次训练都放得下，并且同一个效率常数对两者的预测都落在测试所要求的范围内（已发表数字的 0.75–1.25 倍）。1T 的训练被低估了：
它的矩阵（h = 25 600）更大，能达到比 175B 模型更高的峰值比例，而单一常数无法知道这一点——这提醒我们：规划器擅长给方案排序，
但它给出的绝对数字只是 ±25 % 的估计。规划器自己为 175B 选出的最优方案使用选择性重计算（由序列并行使之可行：Korthikanti 等人
2022 年报告，530B 模型在 2240 张 A100 上用它达到 54.2 % 的 MFU，比完全重计算的 42.1 % 快 29 %），并用 ZeRO-3 代替流水线并行：
在这个模型里，它的 AllGather（全收集）能藏在大微批次的计算后面。真实的 ZeRO-3 重叠没有这么完美——这也是在投入之前要先实测一个方案的
原因。"""),
    pair("""## Searching all plans

`planner.search` enumerates every valid combination — tp dividing the node and the number of heads, every pp, dp
dividing the global batch, micro-batch sizes up to 16, ZeRO 0–3 (0–1 with pipeline parallelism, as DeepSpeed allows),
three recomputation modes, interleaving — keeps those that fit and ranks them by tokens/s. The same table is printed
by `python -m distlearn plan --model llama3-70b --gpus 64 --gpu h100-80gb --seq-len 8192 --global-batch 512`.""",
         """## 搜索所有方案

`planner.search` 枚举每一种合法组合——tp 整除节点 GPU 数和注意力头数、所有 pp、dp 整除全局批量大小、微批次大小至多 16、
ZeRO 0–3（使用流水线并行时为 0–1，与 DeepSpeed 的限制一致）、三种重计算方式、交错调度——保留放得下的方案，按 tokens/s
排序。命令 `python -m distlearn plan --model llama3-70b --gpus 64 --gpu h100-80gb --seq-len 8192 --global-batch 512`
打印同一张表。"""),
    code("""rc = planner.cli(["--model", "llama3-70b", "--gpus", "64", "--gpu", "h100-80gb", "--seq-len", "8192",
                  "--global-batch", "512", "--top", "8"])"""),
    code("""counts = [16, 24, 32, 48, 64, 128, 256]
best = [planner.search("llama3-70b", global_batch=512, seq_len=8192, gpu="h100-80gb", num_gpus=n, top=1).best
        for n in counts]
fig, ax = plots.new_figure(7, 3.2)
ok = [(n, b.tokens_per_s / n) for n, b in zip(counts, best) if b]
ax.plot(*zip(*ok), "o-", label="best plan / 最佳方案")
ax.plot([n for n, b in zip(counts, best) if not b], [0 for b in best if not b], "rx", ms=10,
        label="no plan fits / 没有可行方案")
ax.set_xscale("log", base=2)
ax.set_xticks(counts, [str(n) for n in counts])
ax.legend()
ax.set_xlabel("GPUs / GPU 数")
ax.set_ylabel("tokens/s per GPU / 每卡 tokens/s")
plots.title(ax, "Llama 3 70B, H100, seq 8192, batch 512: best plan per GPU count",
            "Llama 3 70B、H100、序列 8192、批量 512：各 GPU 数下的最佳方案")
plt.show()
for n, b in zip(counts, best):
    print(f"{n:4}", f"MFU {b.mfu:.1%}  {b.plan.describe()}" if b else "no plan fits / 没有可行方案")"""),
    pair("""With 16 GPUs nothing fits. With 24 it fits only with full recomputation, which runs the forward twice, so each
GPU is slower. From 32 GPUs on selective recomputation fits and per-GPU throughput is near its best; beyond 64 it
falls slowly: the global batch is fixed, so each GPU gets fewer micro-batches and communication weighs more.""",
         """16 块 GPU 时没有可行方案。24 块时只有完全重计算才放得下，前向要算两遍，每张卡因此更慢。从 32 块起选择性重计算放得下，
每卡吞吐量接近最佳；超过 64 块后缓慢下降：全局批量固定，每张卡分到的微批次更少，通信所占比重变大。"""),
    pair("""## When no plan fits

The planner then says so, and finds the smallest single change that would fit: more GPUs (doubling, then bisecting
the number of nodes), a shorter sequence, or a GPU with more memory.""",
         """## 没有可行方案时

规划器会明确说明，并找出能放下的最小单项改动：更多 GPU（先加倍再二分节点数）、更短的序列，或显存更大的 GPU。"""),
    code("""res = planner.search("llama3.1-405b", global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=16)
print(res.message)
print(res.suggestion["message"])
res = planner.search("llama2-7b", global_batch=8, seq_len=32768, gpu="h200", num_gpus=1)
print(res.message)
print(res.suggestion["message"])"""),
    pair("""## A communication-bound plan

Llama 3 8B on 64 H100s in pure data parallelism (ZeRO 0) with one sequence per GPU: each step all-reduces 16 GB of
gradients over 50 GB/s network links, about 0.63 s, while a micro-batch's backward takes about 0.27 s — so most of
the all-reduce cannot hide. With 8 micro-batches of gradient accumulation the same all-reduce is paid once for 8× the
work, and the share of communication drops.""",
         """## 受通信限制的方案

Llama 3 8B 在 64 块 H100 上做纯数据并行（ZeRO 0），每张卡一条序列：每步要对 16 GB 梯度做 AllReduce，网络链路 50 GB/s，约
0.63 秒，而一个微批次的反向传播只要约 0.27 秒——大部分 AllReduce 无法被隐藏。用 8 个微批次做梯度累积后，同一次 AllReduce
分摊到 8 倍的计算量上，通信占比随之下降。"""),
    code("""m8 = PRESETS["llama3-8b"]
for batch in (64, 512):
    p = planner.Plan(dp=64, tp=1, pp=1, zero_stage=0, recompute="selective", micro_batch_size=1,
                     num_microbatches=batch // 64, sequence_parallel=False)
    e = planner.evaluate(m8, p, global_batch=batch, seq_len=4096, gpu="h100-80gb")
    t = e.time
    print(f"batch {batch:3}: compute {t['compute']:.2f}  exposed DP all-reduce {t['dp_comm']:.2f}  "
          f"comm share / 通信占比 {e.comm_fraction:.0%}  MFU {e.mfu:.1%}")"""),
    pair("""## Explorer

Pick a model, a GPU type, a GPU count, a sequence length and a global batch: the table ranks the plans that fit, and
the bars show the chosen plan's memory stack against the capacity and its step time by part.""",
         """## 探索器

选择模型、GPU 型号、GPU 数、序列长度和全局批量大小：表格列出放得下的方案并排序，条形图给出所选方案的显存堆叠（与容量对比）
以及每步时间的构成。"""),
    code("""# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import planner as planner_widget
planner_widget.explorer()"""),
    pair("""## Summary

- A plan fits when model states (16 B/parameter ÷ tp·pp, sharded by ZeRO over **dp**), activations × layers ×
  micro-batches in flight, logits and a reserve for context and fragmentation stay under the device memory.
- Step time ≈ FLOPs / (peak × efficiency) + exposed communication + the bubble $(p-1)/(vm)$; MFU counts model FLOPs
  only, Megatron's TFLOP/s include recomputation.
- The model reproduces the ZeRO paper's Table 2 exactly and Megatron-LM's published throughput within ±25 % with one
  constant; use it to rank plans and to find what does not fit, then measure.
- The seed's table dropped master weights, invented activations and ignored the reserve.""",
         """## 小结

- 当模型状态（每参数 16 字节 ÷ tp·pp，再由 ZeRO 在 **dp** 上分片）、激活值 × 层数 × 在途微批次数、logits 以及上下文和碎片的预留之和
  不超过显存时，方案才放得下。
- 每步时间 ≈ FLOPs /（峰值 × 效率）+ 未被隐藏的通信 + 气泡 $(p-1)/(vm)$；MFU 只计模型 FLOPs，Megatron 的 TFLOP/s 包含重计算。
- 这个模型精确复现了 ZeRO 论文的表 2，并用同一个常数把 Megatron-LM 已发表的吞吐量预测在 ±25 % 以内；用它来给方案排序、
  找出放不下的配置，然后再实测。
- 种子代码的表漏掉了主权重、编造了激活值、忽略了预留。"""),
    pair("""## Exercises

Open [exercises/10_planning.ipynb](../exercises/10_planning.ipynb): model states per GPU under a plan, the pipeline
step time with its bubble, the data-parallel all-reduce time (and why a plan is communication-bound), and the fewest
GPUs for a model.

[Back to the course map](00_welcome.ipynb)""",
         """## 练习

打开 [exercises/10_planning.ipynb](../exercises/10_planning.ipynb)：一个方案下每张 GPU 的模型状态、含气泡的流水线每步时间、
数据并行 AllReduce 的时间（以及方案为何受通信限制）、一个模型最少需要的 GPU 数。

[返回课程地图](00_welcome.ipynb)"""),
]

solutions = [
    pair("""# 10 · Planning a training run — exercises

Each exercise is a function; the cell after it checks it on cases you do not see.""",
         """# 10 · 规划一次大模型训练——练习

每道练习是一个函数；其后的单元格用你看不到的用例检查它。"""),
    code("""from distlearn import check, planner
from distlearn.memory import GB"""),
    pair("""## Exercise 1: model states per GPU

Return the bytes of model states (mixed-precision Adam: 2 + 2 + 12 bytes per parameter) on one GPU for a model of
`num_params` parameters split by tensor parallelism `tp` and pipeline parallelism `pp` (use `num_params // (tp * pp)`),
with ZeRO stage `zero_stage` over the data-parallel degree `dp`.""",
         """## 练习 1：每张 GPU 的模型状态

对一个有 `num_params` 个参数、按张量并行 `tp` 和流水线并行 `pp` 切分（用 `num_params // (tp * pp)`）、在数据并行度 `dp`
上使用 ZeRO 第 `zero_stage` 阶段的模型，返回一张 GPU 上模型状态的字节数（混合精度 Adam：每参数 2 + 2 + 12 字节）。"""),
    code("""def model_states_per_gpu(num_params, tp, pp, dp, zero_stage):
    ### BEGIN SOLUTION
    psi = num_params // (tp * pp)
    weights = 2 * psi / (dp if zero_stage >= 3 else 1)
    grads = 2 * psi / (dp if zero_stage >= 2 else 1)
    optim = 12 * psi / (dp if zero_stage >= 1 else 1)
    return weights + grads + optim
    ### END SOLUTION"""),
    code("check.ex10_model_states_per_gpu(model_states_per_gpu)"),
    pair("""## Exercise 2: pipeline step time

A micro-batch takes `t_microbatch` seconds (forward + backward) on each stage. Return the time of a step with
`num_microbatches` micro-batches on `pp` stages with `num_chunks` interleaved chunks per GPU, bubble included.""",
         """## 练习 2：流水线每步时间

每个微批次在每个阶段上耗时 `t_microbatch` 秒（前向 + 反向）。返回 `pp` 个阶段、每张 GPU `num_chunks` 个交错块、
`num_microbatches` 个微批次时一步的时间（含气泡）。"""),
    code("""def pipeline_step_time(t_microbatch, num_microbatches, pp, num_chunks):
    ### BEGIN SOLUTION
    return (num_microbatches + (pp - 1) / num_chunks) * t_microbatch
    ### END SOLUTION"""),
    code("check.ex10_pipeline_step_time(pipeline_step_time)"),
    pair("""## Exercise 3: why is a plan communication-bound?

Return the seconds of a ring all-reduce of the gradients of `num_params` parameters (`bytes_per_grad` bytes each)
over `dp` ranks at `bw` bytes/s per rank and direction (ignore latency). Then compare it with the backward time of
one micro-batch of Llama 3 8B at 4096 tokens on an H100 (below) and say which dominates when dp = 64 over the
network (50 GB/s) and when dp = 8 inside a node (450 GB/s).""",
         """## 练习 3：方案为何受通信限制？

返回对 `num_params` 个参数的梯度（每个 `bytes_per_grad` 字节）在 `dp` 个 rank 上做环形 AllReduce（全规约）所需的秒数，
带宽为每个 rank 每个方向 `bw` 字节/秒（忽略延迟）。然后与 Llama 3 8B 在一块 H100 上处理一个 4096 词元微批次的反向时间
（见下）比较，说明 dp = 64 走网络（50 GB/s）和 dp = 8 在节点内（450 GB/s）时哪一项占主导。"""),
    code("""def dp_allreduce_seconds(num_params, dp, bw, bytes_per_grad=2):
    ### BEGIN SOLUTION
    if dp == 1:
        return 0.0
    return 2 * (dp - 1) / dp * num_params * bytes_per_grad / bw
    ### END SOLUTION"""),
    code("check.ex10_dp_allreduce_seconds(dp_allreduce_seconds)"),
    code("""# Compare with the backward time (uses your dp_allreduce_seconds) / 与反向时间比较（要用到你写的函数）
from distlearn.i18n import bi
from distlearn.models import PRESETS
m8 = PRESETS["llama3-8b"]
flops = planner.step_flops(m8, 1, 4096)["model"]
backward = flops * 2 / 3 / (989e12 * planner.COMPUTE_EFFICIENCY)
print(f"backward of one micro-batch / 一个微批次的反向: {backward:.3f} s")
try:
    for dp, bw, where_en, where_zh in [(64, 50e9, "network", "网络"), (8, 450e9, "NVLink", "NVLink（节点内）")]:
        secs = dp_allreduce_seconds(m8.num_parameters(), dp, bw)
        print(bi(f"dp={dp} over {where_en}: all-reduce {secs:.3f} s", f"dp={dp} 走{where_zh}：AllReduce（全规约）{secs:.3f} 秒",
                 sep="\\n"))
except NotImplementedError:
    print(bi("Solve the exercise above first (dp_allreduce_seconds), then run this cell again.",
             "请先完成上面的练习（dp_allreduce_seconds），再运行这个单元格。", sep="\\n"))"""),
    pair("""Over the network the all-reduce (≈ 0.63 s) is longer than the backward it could hide behind (≈ 0.26 s), so the
step waits for communication: the plan is communication-bound. Inside a node (≈ 0.06 s) it hides completely.
Remedies: more micro-batches per step (the all-reduce is paid once per step), fewer data-parallel ranks across nodes
(tensor or pipeline parallelism instead), or a faster network.""",
         """走网络时 AllReduce（≈ 0.63 秒）比能用来隐藏它的反向传播（≈ 0.26 秒）更长，一步要等通信：这个方案受通信限制。在节点内
（≈ 0.06 秒）它能被完全隐藏。对策：每步更多微批次（AllReduce 每步只付一次）、减少跨节点的数据并行 rank（改用张量或流水线并行），
或更快的网络。"""),
    pair("""## Exercise 4: the fewest GPUs for a model

Return the smallest GPU count among 1, 2, 4, then 8, 16, 24, … (whole nodes of 8) for which
`planner.search(model, global_batch=..., seq_len=..., gpu=..., num_gpus=n, suggest=False).plans` is not empty
(return `None` if nothing up to 4096 GPUs fits).""",
         """## 练习 4：一个模型最少需要多少 GPU

在 1、2、4，然后 8、16、24……（每节点 8 块的整数个节点）中，返回使
`planner.search(model, global_batch=..., seq_len=..., gpu=..., num_gpus=n, suggest=False).plans` 非空的最小 GPU 数
（直到 4096 块都放不下时返回 `None`）。"""),
    code("""def smallest_gpu_count(model, gpu, seq_len, global_batch):
    ### BEGIN SOLUTION
    counts = [1, 2, 4] + list(range(8, 4097, 8))
    for n in counts:
        if planner.search(model, global_batch=global_batch, seq_len=seq_len, gpu=gpu, num_gpus=n,
                          suggest=False).plans:
            return n
    return None
    ### END SOLUTION"""),
    code("check.ex10_smallest_gpu_count(smallest_gpu_count)"),
]

if __name__ == "__main__":
    for path, cells in [(ROOT / "notebooks" / "10_planning.ipynb", chapter),
                        (ROOT / "solutions" / "10_planning.ipynb", solutions)]:
        path.parent.mkdir(exist_ok=True)
        nb = new_notebook(cells)
        for i, cell in enumerate(nb.cells):  # stable ids: rebuilding gives the same file
            cell.id = f"ch10-{i:03d}"
        nbformat.write(nb, path)
        print("wrote", path)
