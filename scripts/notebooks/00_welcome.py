"""Builds notebooks/00_welcome.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/00_welcome.py
then store outputs: .venv/bin/python -m distlearn.course execute notebooks/00_welcome.ipynb"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "notebooks"

cells = [
    pair(r"""
# 00 · Welcome and setup

This course explains how large neural networks are trained on many GPUs, and lets you compute, simulate and run
every idea yourself on a laptop. Each number you see comes from the tested `distlearn` package, and wherever a real
engine exists (PyTorch's `torch.distributed`), the simulation is checked against it.

**Learning objectives.** After this notebook you can

- find your way through the 11 chapters and know what each one teaches;
- use an *explorer* (an interactive widget) and an *exercise* with its automatic check;
- check that your environment is ready: Python, PyTorch, CPU cores, CUDA, and the widgets front end.
""", r"""
# 00 · 导论与环境

本课程讲解大型神经网络如何在多张 GPU 上训练，并让你在笔记本电脑上亲手计算、模拟和运行每一个概念。你看到的每个数字都来自
经过测试的 `distlearn` 包；只要存在真实引擎（PyTorch 的 `torch.distributed`），模拟结果都会与之对照。

**学习目标。** 学完本笔记本，你能够

- 了解 11 章的内容和每章讲什么；
- 使用*探索器*（交互式控件）和带自动检查的*练习*；
- 检查你的环境是否就绪：Python、PyTorch、CPU 核数、CUDA，以及控件前端。
"""),
    pair(r"""
## Course map

| # | Chapter | What you learn |
|---|---|---|
| 00 | Welcome and setup | this map, explorers and exercises, the environment check |
| 01 | Where does the memory go? | bytes per parameter by precision recipe and optimizer, counting parameters on the meta device, measuring real bytes of parameters, gradients and Adam state |
| 02 | Collective communication | broadcast, reduce, all-reduce (ring), all-gather, reduce-scatter, all-to-all; bytes moved; α-β cost; real gloo processes |
| 03 | Data parallelism | why DP equals full-batch training, uneven shards, loss mean vs sum, sampler padding, synchronized BatchNorm, bucketing; real DDP |
| 04 | Tensor parallelism | column- and row-parallel layers, the Megatron MLP and attention, sequence parallelism; real DTensor |
| 05 | Pipeline parallelism | GPipe, 1F1B, interleaved 1F1B, the pipeline bubble, activations in flight; real `torch.distributed.pipelining` |
| 06 | ZeRO and FSDP | ZeRO-1/2/3 memory and communication, flat parameters and padding, wrap policies; real FSDP2 |
| 07 | Overlap and prefetch | overlapping communication with compute, forward/backward prefetch and its memory price |
| 08 | Activation memory | activations per layer, recomputation (checkpointing), offload, gradient accumulation |
| 09 | DeepSpeed and FSDP in practice | ZeRO stages ↔ FSDP strategies, DeepSpeed configs and memory estimators |
| 10 | Planning a training run | combining DP × TP × PP × ZeRO × recomputation into a plan that fits, with step time and MFU |

Chapters 01 and 02 are the foundation; after them, any order works.
""", r"""
## 课程地图

| # | 章节 | 你将学到 |
|---|---|---|
| 00 | 导论与环境 | 本地图、探索器与练习、环境检查 |
| 01 | 显存都去哪儿了 | 不同精度方案和优化器下每个参数占多少字节、在 meta 设备上统计参数量、实测参数/梯度/Adam 状态的真实字节数 |
| 02 | 集合通信 | 广播、规约、AllReduce（全规约，环形算法）、AllGather（全收集）、ReduceScatter（规约-分散）、All-to-All；通信量；α-β 代价模型；真实 gloo 进程 |
| 03 | 数据并行 | 数据并行为何等价于全批次训练、不均匀分片、损失取平均还是求和、采样器补齐、同步 BatchNorm、梯度分桶；真实 DDP |
| 04 | 张量并行 | 列并行与行并行线性层、Megatron 的 MLP 与注意力切分、序列并行；真实 DTensor |
| 05 | 流水线并行 | GPipe、1F1B、交错式 1F1B、流水线气泡、在途激活值；真实 `torch.distributed.pipelining` |
| 06 | ZeRO 与 FSDP | ZeRO-1/2/3 的显存与通信、扁平参数与填充、包装策略；真实 FSDP2 |
| 07 | 通信与计算重叠、预取 | 通信与计算重叠、前向/反向预取及其显存代价 |
| 08 | 激活显存与省显存技术 | 每层激活显存、重计算（激活检查点）、卸载、梯度累积 |
| 09 | DeepSpeed 与 FSDP 实战 | ZeRO 阶段与 FSDP 策略的对应、DeepSpeed 配置与显存估算器 |
| 10 | 规划一次大模型训练 | 组合数据并行 × 张量并行 × 流水线并行 × ZeRO × 重计算，得到放得下的方案，并估算步时和 MFU |

第 01、02 章是基础；之后各章可按任意顺序学习。
"""),
    pair(r"""
## How a chapter works

Every chapter has the same parts: learning objectives, an explanation with formulas and their sources, a
simulation with `distlearn`, a check against real PyTorch, an **explorer**, a **common misconception** box where
popular explanations go wrong, a summary, and **exercises**.

Prose comes in English and Chinese. To show only one language in widgets and messages, run
`distlearn.set_language("en")` or `distlearn.set_language("zh")` (`"both"` is the default).
""", r"""
## 每一章的结构

每章结构相同：学习目标、带公式及出处的讲解、用 `distlearn` 做的模拟、与真实 PyTorch 的对照、**探索器**、
在常见讲解出错之处给出的**常见误区**提示框、小结和**练习**。

正文为中英双语。若只想让控件和提示信息显示一种语言，运行 `distlearn.set_language("en")` 或
`distlearn.set_language("zh")`（默认是 `"both"`）。
"""),
    pair(r"""
## Environment check

The report below lists what this kernel runs on. Explorers need **ipywidgets 8** in the kernel's environment *and*
its JupyterLab front end, **jupyterlab_widgets 3**, in the environment that runs JupyterLab. With `make lab` both
are the course's `.venv`; on Binder both are set up for you. If the last line is not OK, the report prints the fix.
(Version numbers differ between machines, so this cell's output is not compared by the tests.)
""", r"""
## 环境检查

下面的报告列出本内核运行的环境。探索器需要内核所在环境中有 **ipywidgets 8**，*并且*运行 JupyterLab 的环境中有它的前端
扩展 **jupyterlab_widgets 3**。使用 `make lab` 时两者都是课程的 `.venv`；在 Binder 上也已为你配置好。若最后一行不是
“正常”，报告会打印修复方法。（版本号因机器而异，测试不比较这个单元格的输出。）
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.env import environment_report

report = environment_report()
print(report)
"""),
    pair(r"""
When the front end is missing, a slider shows up as plain text such as `IntSlider(value=8)`. This is what the
check says in that situation (simulated here, whatever your machine has):
""", r"""
缺少前端扩展时，滑块只会显示为 `IntSlider(value=8)` 这样的文字。下面是这种情况下检查给出的提示（此处为模拟，与你的机器
无关）：
"""),
    code("""
from distlearn.env import widgets_frontend_status

broken = widgets_frontend_status({"ipywidgets": "8.1.5", "jupyterlab_widgets": None}, extension_dirs=[])
print(broken.ok)
print(broken.fix)
"""),
    pair(r"""
## Try an explorer

An explorer is a few controls over a pure function `compute(...)`. Sliders update when you release them. This one
is chapter 01's memory explorer: pick a model, a precision recipe, the data-parallel degree `dp` and a ZeRO stage,
and see the bytes per GPU of parameters, gradients and optimizer states against a GPU's memory.
""", r"""
## 试用一个探索器

探索器是在纯函数 `compute(...)` 之上的一组控件。滑块在松开鼠标时才更新。这是第 01 章的显存探索器：选择模型、精度方案、
数据并行度 `dp` 和 ZeRO 阶段，看看每张 GPU 上参数、梯度和优化器状态各占多少字节，与 GPU 显存对比。
"""),
    code("""
# NBVAL_IGNORE_OUTPUT
from distlearn.widgets import memory

memory.explorer()
"""),
    pair(r"""
Every explorer's `compute` can also be called directly, which is handy in your own code. Llama 3 8B with
mixed-precision Adam on 8 data-parallel GPUs, ZeRO stage 3:
""", r"""
每个探索器的 `compute` 也可以直接调用，方便在你自己的代码中使用。Llama 3 8B、混合精度 Adam、8 路数据并行、ZeRO 阶段 3：
"""),
    code("""
r = memory.compute(model="llama3-8b", precision="mixed", optimizer="adam", dp=8, zero_stage=3, gpu="A100 80GB")
print(f"{r['num_params']:,} params, {r['per_param']:g} B/param -> {r['total_gb']:.2f} GB = {r['total_gib']:.2f} GiB per GPU")
"""),
    pair(r"""
## The seed code, and why each chapter has a "Common misconception" box

This course grew out of two **seed** documents, the kind of material many people learn from: seed A, numpy
simulations of data, tensor and pipeline parallelism plus a GPU-memory calculator; and seed B, notes on FSDP with
code (flat-parameter sharding, a communication simulation, a prefetch simulator, a memory grid, a framework
comparison). Every simulation in them is rebuilt correctly in `distlearn`, and a faithful copy of each seed
function is kept (`distlearn.seeds`, or `seed_*` in the chapter's module) so you can run it beside the correct
version. Where a seed was wrong, the chapter shows a box **Common misconception** with the seed's idea, the
correct version and why they differ. The seed mistakes, by number:

| # | the seed's mistake | chapter |
|---|---|---|
| 1 | mixed-precision Adam without fp32 master weights ("25 % saving") | 01 |
| 2 | a memory calculator with invented activation formulas, no master weights, GB and GiB mixed | 01, 08 |
| 3 | ZeRO/FSDP divided by the number of GPUs instead of the data-parallel degree | 01, 06 |
| 4 | data parallelism averaging per-shard means of uneven shards | 03 |
| 5 | tensor parallelism with the column split only and no communication | 04 |
| 6 | a pipeline that drops layers, backward = forward, GPipe only | 05 |
| 7 | an FSDP "all-gather" that repeats the rank's own shard | 02, 06 |
| 8 | flat-parameter all-gather that keeps the padding | 06 |
| 9 | a memory grid with invented constants for checkpointing and offload | 08 |
| 10 | a transformer block whose residual adds to the normalized tensor | 01 |
| 11 | `nn.TransformerDecoderLayer` used for a decoder-only model | 01, 06 |
| 12 | an out-of-date framework comparison without sources | 09 |
| 13 | "深度速度" as a translation of DeepSpeed (a product name) | 09 |
| 14 | a prefetch simulator with forward only, uniform units and no memory cost | 07 |
""", r"""
## 种子代码，以及每章为什么有“常见误区”提示框

本课程源自两份**种子**材料，也就是很多人学习时会读到的那类内容：种子 A 是用 numpy 写的数据并行、张量并行、流水线并行
模拟和一个显存计算器；种子 B 是带代码的 FSDP 笔记（扁平参数分片、通信模拟、预取模拟器、显存表格、框架对比）。其中
每个模拟都在 `distlearn` 中被正确地重写，并保留了每个种子函数的忠实副本（在 `distlearn.seeds` 中，或各章模块中的
`seed_*`），你可以把它和正确版本并排运行。凡是种子出错的地方，对应章节都有一个**常见误区**提示框：种子的想法、正确的
做法，以及二者为什么不同。种子中的错误按编号如下：

| # | 种子的错误 | 章节 |
|---|---|---|
| 1 | 混合精度 Adam 不保存 fp32 主权重（“节省 25 %”） | 01 |
| 2 | 显存计算器的激活值公式是编造的、缺少主权重、混用 GB 与 GiB | 01、08 |
| 3 | ZeRO/FSDP 除以 GPU 数量，而不是数据并行度 | 01、06 |
| 4 | 数据并行对大小不等的分片直接平均各分片的均值 | 03 |
| 5 | 张量并行只有按列切分，而且没有通信 | 04 |
| 6 | 流水线丢掉了部分层、反向耗时等于前向、只有 GPipe | 05 |
| 7 | FSDP 的“AllGather（全收集）”只是重复本 rank 自己的分片 | 02、06 |
| 8 | 扁平参数 AllGather 后保留了填充 | 06 |
| 9 | 显存表格用编造的常数表示检查点和卸载 | 08 |
| 10 | Transformer 块的残差加在了归一化之后的张量上 | 01 |
| 11 | 用 `nn.TransformerDecoderLayer` 搭建仅解码器模型 | 01、06 |
| 12 | 框架对比过时且没有出处 | 09 |
| 13 | 把 DeepSpeed（产品名）译成“深度速度” | 09 |
| 14 | 预取模拟器只有前向、单元大小相同、不计显存代价 | 07 |
"""),
    pair(r"""
## How exercises work

Exercises live in `exercises/NN_*.ipynb`. Each one is a function for you to complete, followed by a check cell
that runs hidden cases and prints ✓ or ✗ with a hint. A wrong answer raises `CheckFailed`, so you cannot miss it.
Here is chapter 01's first check, given the seed code's wrong belief (seed mistake 1) that mixed precision drops the fp32 copy
of the weights (answers are in `solutions/`):
""", r"""
## 练习如何使用

练习在 `exercises/NN_*.ipynb` 中。每道题是一个待你补全的函数，后面跟着一个检查单元格：它运行隐藏的测试用例，打印 ✓ 或
✗ 并给出提示。答错会抛出 `CheckFailed`，不会被忽略。下面用种子代码中“混合精度不需要 fp32 权重副本”的错误想法（种子错误 1）调用第 01
章的第一个检查（参考答案在 `solutions/` 中）：
"""),
    code("""
from distlearn import check

def wrong_bytes_per_param(precision, optimizer):
    return {"fp32": 4 + 4, "mixed": 2 + 2, "mixed-fp32-grads": 2 + 4}[precision] + {"adam": 8, "adam-8bit": 2, "sgd-momentum": 4, "sgd": 0}[optimizer]

try:
    check.ex01_bytes_per_param(wrong_bytes_per_param)
except check.CheckFailed:
    print("-> CheckFailed")
"""),
    pair(r"""
## Summary

- 11 chapters: memory, collectives, the three parallelisms, ZeRO/FSDP, overlap, activation memory, DeepSpeed and
  FSDP in practice, and planning a run.
- Explorers are controls over a tested `compute` function; exercises are functions checked by hidden cases.
- `environment_report()` tells you whether widgets will render and how to fix it if not.

Next: [01 · Where does the memory go?](01_memory.ipynb)
""", r"""
## 小结

- 11 章内容：显存、集合通信、三种并行、ZeRO/FSDP、重叠、激活显存、DeepSpeed 与 FSDP 实战，以及训练规划。
- 探索器是建立在经过测试的 `compute` 函数之上的控件；练习是由隐藏测试用例检查的函数。
- `environment_report()` 会告诉你控件能否正常显示，以及如何修复。

下一章：[01 · 显存都去哪儿了](01_memory.ipynb)
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "00_welcome.ipynb")
print("wrote notebooks/00_welcome.ipynb")
