"""Build notebooks/09_deepspeed_fsdp.ipynb and solutions/09_deepspeed_fsdp.ipynb (then execute them).

Run: .venv/bin/python scripts/notebooks/09_deepspeed_fsdp.py
"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

ROOT = Path(__file__).resolve().parents[2]

chapter = [
    pair(r"""
# 09 · DeepSpeed and FSDP in practice

**Learning objectives.** After this chapter you can
- compare DDP, FSDP (FSDP1 and FSDP2) and DeepSpeed ZeRO 1/2/3/Infinity feature by feature, with a source and a
  version for every claim;
- map ZeRO stages to FSDP sharding strategies, and say where they differ;
- generate a DeepSpeed config from a plan and validate it with DeepSpeed's own config class;
- reproduce DeepSpeed's memory estimators exactly, and explain why they disagree with the ZeRO paper and with what a
  GPU really uses;
- run real DeepSpeed ZeRO stages 1, 2, 3 on two CPU processes and check them against plain PyTorch.
""", r"""
# 09 · DeepSpeed 与 FSDP 实战

**学习目标。** 学完本章，你能够
- 逐项比较 DDP、FSDP（FSDP1 与 FSDP2）和 DeepSpeed ZeRO 1/2/3/Infinity，且每条结论都有出处和版本；
- 把 ZeRO 的各个阶段对应到 FSDP 的分片策略，并说明它们的差别；
- 根据训练方案生成 DeepSpeed 配置，并用 DeepSpeed 自己的配置类校验；
- 精确复现 DeepSpeed 的显存估算函数，并解释它们为什么与 ZeRO 论文以及 GPU 的实际占用不一致；
- 在两个 CPU 进程上运行真实的 DeepSpeed ZeRO 1、2、3 阶段，并与普通 PyTorch 对照。
"""),
    pair(r"""
> **Common misconception.** The title of the seed code (the starting snippets this course corrects; see chapter 00)
> translates DeepSpeed as "深度速度" ("depth speed"). DeepSpeed is a product
> name (Microsoft's library): like PyTorch or Megatron-LM it stays in English in Chinese text, and so do its
> configuration keys. What does get translated are the concepts: ZeRO is 零冗余优化器, offload is 卸载.
""", r"""
> **常见误区。** 种子代码（本课程纠正的起始代码片段，见第 00 章）的标题把 DeepSpeed 译成了“深度速度”。DeepSpeed 是产品名（微软的库）：和 PyTorch、Megatron-LM 一样，
> 在中文里也保持英文，它的配置项同样不翻译。需要翻译的是概念：ZeRO 是零冗余优化器，offload 是卸载。
"""),
    code("""
from distlearn import deepspeed as D
from distlearn.i18n import bi
from distlearn.memory import model_state_bytes, GiB
from distlearn.models import PRESETS
print("installed / 已安装:", D.installed_versions())
"""),
    pair(r"""
## 1. DDP, FSDP and ZeRO side by side

Each cell of the table below carries its source (documentation page, paper, or the file of the installed package
where the behaviour is coded) and the version it was checked against. The claims that can be read from code are
re-checked against the installed torch and DeepSpeed every time this notebook runs (`D.verify_claims()`), so the table
cannot silently go stale.
""", r"""
## 1. DDP、FSDP 与 ZeRO 对比

下表每一格都带有出处（文档页面、论文，或已安装软件包中实现该行为的源文件）以及核对时的版本。能从代码中读出的结论，每次运行本
笔记本时都会对已安装的 torch 和 DeepSpeed 重新检查（`D.verify_claims()`），所以这张表不会在不知不觉中过时。
"""),
    code("""
def show(rows, header):
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(r))

print(bi("The table in English (the same table in Chinese follows in the next cell):",
         "英文版表格（同一张表的中文版见下一个单元格）：", sep="\\n"))
show(D.comparison_table("en"), ["feature"] + list(D.FRAMEWORKS))
"""),
    code("""
show(D.comparison_table("zh"), ["特性"] + list(D.FRAMEWORKS))
print()
print("checked against installed code / 对照已安装代码检查:", D.verify_claims())
for key, src in D.SOURCES.items():
    print(f"  [{key}] {src}")
"""),
    pair(r"""
> **Common misconception.** Seed-b's `compare_frameworks` prints one "FSDP" column and one "DeepSpeed ZeRO-3" column
> with no version and no source, and several cells are out of date or wrong: pipeline parallelism is "manual" for DDP
> and "to be combined" for FSDP, but PyTorch has shipped `torch.distributed.pipelining` (GPipe, 1F1B, interleaved,
> zero-bubble schedules) since 2.4; ZeRO-3 is marked "native pipeline support", but DeepSpeed's pipeline engine refuses
> ZeRO-2 and ZeRO-3 ("incompatible with pipeline parallelism"); FSDP1 and FSDP2 are lumped together although they
> differ (FlatParameter vs per-parameter DTensor; FSDP2's `CPUOffloadPolicy` also runs the optimizer step on the
> CPU); and ZeRO-1/2 and ZeRO-Infinity (NVMe, stage 3 only) are missing. The table above gives every cell a source
> and the version it was checked against.
""", r"""
> **常见误区。** 种子 b 的 `compare_frameworks` 只打印了一列 “FSDP” 和一列 “DeepSpeed ZeRO-3”，没有版本也没有出处，而且有几格已经
> 过时或错误：它说 DDP 的流水线并行“需手动”、FSDP “需组合”，但 PyTorch 自 2.4 起就自带 `torch.distributed.pipelining`（GPipe、
> 1F1B、交错调度和零气泡调度）；它把 ZeRO-3 标为“原生支持”流水线，但 DeepSpeed 的流水线引擎拒绝 ZeRO-2 和 ZeRO-3
> （"incompatible with pipeline parallelism"）；它把 FSDP1 和 FSDP2 混为一谈，其实两者不同（FlatParameter 与逐参数 DTensor；
> FSDP2 的 `CPUOffloadPolicy` 还会在 CPU 上执行优化器更新）；它也没有 ZeRO-1/2 和 ZeRO-Infinity（NVMe，仅限阶段 3）。上面的表格为每一格
> 都给出了出处和核对时的版本。
"""),
    pair(r"""
## 2. ZeRO stages and FSDP sharding strategies

FSDP always shards gradients together with optimizer states, so ZeRO-1 has no FSDP counterpart. `SHARD_GRAD_OP`
(FSDP1) or `reshard_after_forward=False` (FSDP2) is close to ZeRO-2 but not equal: FSDP still shards the parameters
outside forward and backward, ZeRO-2 keeps the whole 16-bit parameters all the time.
""", r"""
## 2. ZeRO 阶段与 FSDP 分片策略

FSDP 总是把梯度和优化器状态一起分片，因此 ZeRO-1 在 FSDP 中没有对应。`SHARD_GRAD_OP`（FSDP1）或 `reshard_after_forward=False`
（FSDP2）接近 ZeRO-2 但并不相同：FSDP 在前向和反向之外仍会对参数分片，而 ZeRO-2 始终保留完整的 16 位参数。
"""),
    code("""
for zero, fsdp1, fsdp2, en, zh in D.ZERO_FSDP_MAPPING:
    print(f"{zero:40s} FSDP1: {fsdp1:35s} FSDP2: {fsdp2}")
    print(f"{'':40s} {en}\\n{'':40s} {zh}")
"""),
    pair(r"""
## 3. A DeepSpeed config from a plan

DeepSpeed insists that `train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × data-parallel
world size`. `D.deepspeed_config` writes the config from a plan; `D.validate_config` parses it with DeepSpeed's own
`DeepSpeedConfig` as `dp` ranks would see it, so a wrong batch identity fails exactly as it would at launch.
""", r"""
## 3. 由训练方案生成 DeepSpeed 配置

DeepSpeed 要求 `train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × 数据并行 world size`。
`D.deepspeed_config` 根据方案写出配置；`D.validate_config` 以 `dp` 个 rank 的视角用 DeepSpeed 自己的 `DeepSpeedConfig` 解析它，
所以批量大小的等式不成立时，报错与真正启动时完全一样。
"""),
    code("""
import json
cfg = D.deepspeed_config(micro_batch_size=2, gradient_accumulation_steps=8, dp=64, zero_stage=3,
                         precision="bf16", offload_optimizer="cpu")
print(json.dumps(cfg, indent=2))
ds = D.validate_config(cfg, dp=64)
print("DeepSpeedConfig: train_batch_size / 全局批量", ds.train_batch_size,
      "| ZeRO stage / 阶段", ds.zero_optimization_stage, "| bf16 enabled / 启用", ds.bfloat16_config.enabled)
try:
    D.validate_config(cfg, dp=32)
except AssertionError as err:
    mb, ga = cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]
    print(bi(f"dp = 32 → DeepSpeed rejects the config: {cfg['train_batch_size']} ≠ {mb} × {ga} × 32. Its own message:",
             f"dp = 32 → DeepSpeed 拒绝该配置：{cfg['train_batch_size']} ≠ {mb} × {ga} × 32。以下是它自己的英文报错：",
             sep="\\n"))
    print(err)
"""),
    pair(r"""
## 4. DeepSpeed's memory estimators, as formulas

DeepSpeed ships `estimate_zero2_model_states_mem_needs_all_cold` and `estimate_zero3_..._all_cold`. Read in its code
(0.19.8), with $\Psi$ parameters, $G$ GPUs and $L$ parameters in the largest layer:

- ZeRO-2, no offload: GPU $2\Psi + 18\Psi/G$ — the 16-bit parameters stay whole (2 B) and 18 B/param are sharded:
  2 B 16-bit gradients + 4 B fp32 gradients + 4 B fp32 master weights + 8 B Adam moments;
- ZeRO-3, no offload: GPU $4L + 18\Psi/G$ — the largest layer is gathered whole, 16-bit parameters and gradients;
- CPU columns: the model loaded in fp32 by each local process, or the offloaded states, all × 1.5
  (`additional_buffer_factor`);
- printed "GB" are bytes / 2³⁰, i.e. GiB.
""", r"""
## 4. DeepSpeed 的显存估算函数，写成公式

DeepSpeed 提供了 `estimate_zero2_model_states_mem_needs_all_cold` 和 `estimate_zero3_..._all_cold`。读它的代码（0.19.8），记
$\Psi$ 为参数量、$G$ 为 GPU 数、$L$ 为最大一层的参数量：

- ZeRO-2，不卸载：GPU 上 $2\Psi + 18\Psi/G$——16 位参数保持完整（2 字节），每参数 18 字节被分片：16 位梯度 2 + fp32 梯度 4 +
  fp32 主权重 4 + Adam 的两个矩 8；
- ZeRO-3，不卸载：GPU 上 $4L + 18\Psi/G$——最大一层被完整 AllGather，包括 16 位参数和梯度；
- CPU 一列：每个本地进程以 fp32 加载的模型，或被卸载的状态，都乘以 1.5（`additional_buffer_factor`）；
- 打印的 "GB" 是字节数 / 2³⁰，即 GiB。
"""),
    code("""
llama = PRESETS["llama2-7b"]
n = llama.num_parameters()
largest = D.largest_layer_params_of_config(llama)  # = vocab × hidden: the embedding is the largest "layer"
ours = D.format_rows(D.estimator_rows(n, largest, zero_stage=3, num_gpus_per_node=8))
theirs = D.deepspeed_estimate_output(n, largest, zero_stage=3, num_gpus_per_node=8)   # DeepSpeed's own function
print("Llama-2-7B, ZeRO-3, 1 node × 8 GPUs — our formulas / 我们的公式:")
print(ours)
print("same numbers as DeepSpeed's own printout / 与 DeepSpeed 自己打印的数字相同:",
      D.printed_numbers(ours) == D.printed_numbers(theirs))
"""),
    pair(r"""
Why they disagree with the ZeRO paper: the paper counts $2 + 2 + 12 = 16$ B/param (ZeRO-2: $2\Psi + 14\Psi/N$), while
DeepSpeed's estimator adds the 4-byte fp32 gradient copy its implementation keeps for the optimizer (18 instead of
14) and, for ZeRO-3, the largest layer gathered unsharded. Why both disagree with a real GPU: neither counts
activations (chapter 08), communication buckets (`reduce_bucket_size`, `allgather_bucket_size`,
`stage3_prefetch_bucket_size`), the CUDA context and the caching allocator's fragmentation.
""", r"""
为什么它们与 ZeRO 论文不一致：论文按每参数 $2 + 2 + 12 = 16$ 字节计算（ZeRO-2：$2\Psi + 14\Psi/N$），而 DeepSpeed 的估算加上了
其实现为优化器保留的 4 字节 fp32 梯度副本（18 而不是 14），ZeRO-3 还加上了未分片的最大一层。为什么两者都与 GPU 的实际占用不一致：
它们都没有计入激活值（第 08 章）、通信缓冲区（`reduce_bucket_size`、`allgather_bucket_size`、`stage3_prefetch_bucket_size`）、
CUDA 上下文以及缓存分配器的碎片。
"""),
    code("""
print(f"Llama-2-7B on 8 GPUs, GiB per GPU / 每张 GPU 的 GiB")
for stage in (2, 3):
    paper = model_state_bytes(n, dp=8, zero_stage=stage).total
    if stage == 2:
        _, ds_gpu = D.zero2_model_states_mem_needs(n, 8, 1, cpu_offload=False)
    else:
        _, ds_gpu, _ = D.zero3_model_states_mem_needs(n, largest, 8, 1, cpu_offload=False, cpu_offload_params=False)
    print(f"  ZeRO-{stage}: paper / 论文 {paper / GiB:6.2f}   DeepSpeed estimator / 估算 {ds_gpu / GiB:6.2f}")
"""),
    pair(r"""
**Explorer.** Pick a model, the cluster, the stage and the offload: DeepSpeed's estimate beside the paper's count.
""", r"""
**探索器。** 选择模型、集群规模、阶段和卸载方式：把 DeepSpeed 的估算与论文的计数放在一起比较。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import deepspeed_estimator
deepspeed_estimator.explorer()
"""),
    pair(r"""
## 5. Real DeepSpeed on two CPU processes

`distlearn.launch.run` starts two processes with a gloo process group (and `MASTER_ADDR`, `MASTER_PORT`, `RANK`,
`LOCAL_RANK`, `WORLD_SIZE` set); inside, `deepspeed.initialize` finds that group and uses it — no `deepspeed`
launcher needed. The lab trains the same tiny GPT under ZeRO stages 1, 2 and 3 (fp32, `torch.optim.AdamW`, so no C++
op is compiled), each rank on half of the batch, and reports what each rank stores.
""", r"""
## 5. 在两个 CPU 进程上运行真实的 DeepSpeed

`distlearn.launch.run` 启动两个带 gloo 进程组的进程（并设置好 `MASTER_ADDR`、`MASTER_PORT`、`RANK`、`LOCAL_RANK`、
`WORLD_SIZE`）；进程内的 `deepspeed.initialize` 会找到这个进程组并直接使用——不需要 `deepspeed` 启动器。实验用 ZeRO 1、2、3 阶段
训练同一个小 GPT（fp32、`torch.optim.AdamW`，因此无需编译任何 C++ 算子），每个 rank 处理一半的批量，并报告每个 rank 存储了什么。
"""),
    code("""
from distlearn import launch
from distlearn.labs import deepspeed_zero as lab
reference = lab.reference_losses(steps=3)
per_rank = launch.run(lab.train_stages, 2, (1, 2, 3), 3, timeout=300)
print(f"Ψ = {per_rank[0][0]['num_params']:,} parameters / 个参数")
print(f"{'stage':>5s} {'rank':>4s} {'params stored':>14s} {'Adam exp_avg':>13s} {'max |loss − single process|':>28s}")
print(f"{'阶段':>3s} {'rank':>4s} {'存储的参数':>9s} {'Adam 一阶矩':>10s} {'与单进程损失之差的最大值':>16s}")
for results in per_rank:
    for r in results:
        diff = max(abs(x - y) for x, y in zip(r["losses"], reference))
        print(f"{r['zero_stage']:5d} {r['rank']:4d} {r['param_numel']:14,d} {r['optimizer_numel']:13,d} {diff:28.1e}")
"""),
    pair(r"""
Every stage gives the single-process losses (to rounding), each rank keeps half of Adam's state at every stage, and
only stage 3 also halves the parameters each rank stores. (Stage 2 differs from stage 1 in the gradients, which are
reduce-scattered instead of all-reduced.)
""", r"""
每个阶段的损失都与单进程相同（仅有舍入误差）；在每个阶段，每个 rank 都只保存一半的 Adam 状态，而只有阶段 3 还把每个 rank 存储的
参数也减半。（阶段 2 与阶段 1 的区别在于梯度：梯度做的是 ReduceScatter 而不是 AllReduce。）
"""),
    pair(r"""
## Summary

- FSDP2 (`fully_shard`, DTensor per parameter) is PyTorch's current sharding API; FSDP1 uses FlatParameters; DeepSpeed
  ZeRO is configured with JSON and adds NVMe offload (ZeRO-Infinity, stage 3 only).
- ZeRO-2 ≈ `SHARD_GRAD_OP`, ZeRO-3 = `FULL_SHARD`; ZeRO-1 has no FSDP equivalent.
- DeepSpeed's estimators use 18 B/param (fp32 gradient copy), a 4L largest-layer term and a 1.5 CPU buffer factor, and
  print GiB; none counts activations, buckets or the CUDA context.
- Real DeepSpeed ZeRO 1/2/3 runs on CPU with gloo under `distlearn.launch.run`, with the same losses as one process.
""", r"""
## 小结

- FSDP2（`fully_shard`，每个参数一个 DTensor）是 PyTorch 当前的分片 API；FSDP1 使用 FlatParameter；DeepSpeed ZeRO 用 JSON 配置，
  并额外支持 NVMe 卸载（ZeRO-Infinity，仅限阶段 3）。
- ZeRO-2 ≈ `SHARD_GRAD_OP`，ZeRO-3 = `FULL_SHARD`；ZeRO-1 在 FSDP 中没有对应。
- DeepSpeed 的估算函数按每参数 18 字节（含 fp32 梯度副本）、最大层 4L 项以及 CPU 端 1.5 倍缓冲系数计算，并以 GiB 打印；它们都没有
  计入激活值、通信缓冲区或 CUDA 上下文。
- 真实的 DeepSpeed ZeRO 1/2/3 可以在 CPU 上通过 `distlearn.launch.run` 用 gloo 运行，损失与单进程相同。
"""),
    pair(r"""
## Exercises

Open [exercises/09_deepspeed_fsdp.ipynb](../exercises/09_deepspeed_fsdp.ipynb): DeepSpeed's batch identity, its
ZeRO-2 and ZeRO-3 GPU estimates, and the ZeRO → FSDP mapping — each with a check cell.

**Next:** [10 · Planning a training run](10_planning.ipynb)
""", r"""
## 练习

打开 [exercises/09_deepspeed_fsdp.ipynb](../exercises/09_deepspeed_fsdp.ipynb)：DeepSpeed 的批量等式、ZeRO-2 与 ZeRO-3 的
GPU 估算，以及 ZeRO → FSDP 的对应关系——每题都有检查单元格。

**下一章：** [10 · 规划一次大模型训练](10_planning.ipynb)
"""),
]

solutions = [
    pair(r"""
# 09 · Exercises: DeepSpeed and FSDP

Complete each function, then run the check cell below it.
""", r"""
# 09 · 练习：DeepSpeed 与 FSDP

补全每个函数，然后运行其下方的检查单元格。
"""),
    code("from distlearn import check"),
    pair(r"""
## Exercise 1: train_batch_size

Return the `train_batch_size` DeepSpeed requires for a micro-batch per GPU, accumulation steps and data-parallel ranks.
""", r"""
## 练习 1：train_batch_size

给定每张 GPU 的微批次、梯度累积步数和数据并行 rank 数，返回 DeepSpeed 要求的 `train_batch_size`。
"""),
    code("""
def train_batch_size(micro_batch_size, gradient_accumulation_steps, dp):
    ### BEGIN SOLUTION
    return micro_batch_size * gradient_accumulation_steps * dp
    ### END SOLUTION
"""),
    code("check.ex09_train_batch_size(train_batch_size)"),
    pair(r"""
## Exercise 2: DeepSpeed's ZeRO-2 estimate

Return the GPU bytes DeepSpeed's ZeRO-2 estimator gives without offload (an int, as DeepSpeed computes it).
""", r"""
## 练习 2：DeepSpeed 的 ZeRO-2 估算

返回 DeepSpeed 的 ZeRO-2 估算函数在不卸载时给出的 GPU 字节数（与 DeepSpeed 的计算方式一样，为整数）。
"""),
    code("""
def zero2_gpu_bytes(total_params, total_gpus):
    ### BEGIN SOLUTION
    return 2 * total_params + int(18 * total_params / total_gpus)
    ### END SOLUTION
"""),
    code("check.ex09_zero2_gpu_bytes(zero2_gpu_bytes)"),
    pair(r"""
## Exercise 3: DeepSpeed's ZeRO-3 estimate

Return the GPU bytes DeepSpeed's ZeRO-3 estimator gives without any offload.
""", r"""
## 练习 3：DeepSpeed 的 ZeRO-3 估算

返回 DeepSpeed 的 ZeRO-3 估算函数在完全不卸载时给出的 GPU 字节数。
"""),
    code("""
def zero3_gpu_bytes(total_params, largest_layer_params, total_gpus):
    ### BEGIN SOLUTION
    return 4 * largest_layer_params + int(18 * total_params / total_gpus)
    ### END SOLUTION
"""),
    code("check.ex09_zero3_gpu_bytes(zero3_gpu_bytes)"),
    pair(r"""
## Exercise 4: ZeRO stage → FSDP1 strategy

Return the name of the FSDP1 `ShardingStrategy` closest to a ZeRO stage (0–3), or `None` where there is none.
""", r"""
## 练习 4：ZeRO 阶段 → FSDP1 策略

返回与某个 ZeRO 阶段（0–3）最接近的 FSDP1 `ShardingStrategy` 名称；没有对应时返回 `None`。
"""),
    code("""
def fsdp_strategy(zero_stage):
    ### BEGIN SOLUTION
    return {0: "NO_SHARD", 1: None, 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}[zero_stage]
    ### END SOLUTION
"""),
    code("check.ex09_fsdp_strategy(fsdp_strategy)"),
]

if __name__ == "__main__":
    nbformat.write(new_notebook(chapter), ROOT / "notebooks" / "09_deepspeed_fsdp.ipynb")
    nbformat.write(new_notebook(solutions), ROOT / "solutions" / "09_deepspeed_fsdp.ipynb")
    print("wrote notebooks/09_deepspeed_fsdp.ipynb and solutions/09_deepspeed_fsdp.ipynb")
