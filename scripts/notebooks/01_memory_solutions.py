"""Builds solutions/01_memory.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/01_memory_solutions.py, then
.venv/bin/python -m distlearn.course execute solutions/01_memory.ipynb and python -m distlearn.course build-exercises"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "solutions"

cells = [
    pair(r"""
# 01 · Exercises: where does the memory go?

Complete each function, then run the check cell below it: it runs hidden cases and prints ✓ or ✗ with a hint.
Units are bytes (GB = 10⁹ bytes). Recipe names as in the chapter: precision `"fp32"`, `"mixed"` (16-bit weights
and gradients, fp32 master weights in the optimizer), `"mixed-fp32-grads"` (16-bit weights, fp32 gradients, fp32
master weights); optimizer `"adam"` (two fp32 moments), `"adam-8bit"` (two 1-byte states), `"sgd-momentum"`
(one fp32 buffer), `"sgd"` (no state).
""", r"""
# 01 · 练习：显存都去哪儿了

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例，打印 ✓ 或 ✗ 并给出提示。单位为字节（GB = 10⁹ 字节）。
方案名称与正文相同：精度 `"fp32"`、`"mixed"`（16 位权重和梯度，优化器中保留 fp32 主权重）、`"mixed-fp32-grads"`
（16 位权重、fp32 梯度、fp32 主权重）；优化器 `"adam"`（两个 fp32 动量）、`"adam-8bit"`（两个 1 字节状态）、
`"sgd-momentum"`（一个 fp32 缓冲区）、`"sgd"`（没有状态）。
"""),
    code("""
from distlearn import check
"""),
    pair(r"""
## Exercise 1: bytes per parameter

Return the model-state bytes per parameter (weights + gradients + optimizer state, master weights included) of a
recipe, e.g. `bytes_per_param("fp32", "adam") == 16`.
""", r"""
## 练习 1：每个参数的字节数

返回某个方案下每个参数的模型状态字节数（权重 + 梯度 + 优化器状态，包括主权重），例如
`bytes_per_param("fp32", "adam") == 16`。
"""),
    code("""
def bytes_per_param(precision, optimizer):
    ### BEGIN SOLUTION
    weights, grads, master = {"fp32": (4, 4, 0), "mixed": (2, 2, 4), "mixed-fp32-grads": (2, 4, 4)}[precision]
    state = {"adam": 8, "adam-8bit": 2, "sgd-momentum": 4, "sgd": 0}[optimizer]
    return weights + grads + master + state
    ### END SOLUTION
"""),
    code("""
check.ex01_bytes_per_param(bytes_per_param)
"""),
    pair(r"""
## Exercise 2: ZeRO model states per GPU

Mixed-precision Adam (2 + 2 + 12 bytes per parameter). Return the bytes per GPU of model states for `num_params`
parameters, data-parallel degree `dp` and ZeRO stage `zero_stage` (0: nothing sharded; 1: optimizer states; 2: and
gradients; 3: and parameters). Check value: ZeRO's Figure 1, Ψ = 7.5e9, dp = 64, stage 2 → 16.6 GB.
""", r"""
## 练习 2：每张 GPU 上 ZeRO 的模型状态

混合精度 Adam（每参数 2 + 2 + 12 字节）。对 `num_params` 个参数、数据并行度 `dp` 和 ZeRO 阶段 `zero_stage`（0：不分片；
1：分片优化器状态；2：再分片梯度；3：再分片参数），返回每张 GPU 上模型状态的字节数。验算：ZeRO 论文图 1，Ψ = 7.5e9，
dp = 64，阶段 2 → 16.6 GB。
"""),
    code("""
def zero_model_states(num_params, dp, zero_stage):
    ### BEGIN SOLUTION
    params, grads, optimizer = 2 * num_params, 2 * num_params, 12 * num_params
    if zero_stage >= 1:
        optimizer /= dp
    if zero_stage >= 2:
        grads /= dp
    if zero_stage >= 3:
        params /= dp
    return params + grads + optimizer
    ### END SOLUTION

"""),
    code("""
check.ex01_zero_model_states(zero_model_states)
"""),
    pair(r"""
## Exercise 3: parameters of one Llama layer

A Llama layer has grouped-query attention (Q and O: h × h; K and V: h × (num_kv_heads · h / num_heads)), a
SwiGLU MLP (gate, up, down: three h × f matrices) and two RMSNorms (h weights each), and no biases. Return its
number of parameters. Check value: Llama 2 7B (h = 4096, f = 11008, 32 heads, 32 K/V heads) → 202,383,360.
""", r"""
## 练习 3：一层 Llama 的参数量

一层 Llama 包括分组查询注意力（Q 和 O：h × h；K 和 V：h × (num_kv_heads · h / num_heads)）、SwiGLU MLP（gate、up、
down：三个 h × f 矩阵）和两个 RMSNorm（各 h 个权重），没有偏置。返回它的参数量。验算：Llama 2 7B（h = 4096，f = 11008，
32 个头，32 个 K/V 头）→ 202,383,360。
"""),
    code("""
def llama_layer_params(hidden_size, ffn_hidden_size, num_heads, num_kv_heads):
    ### BEGIN SOLUTION
    h, f = hidden_size, ffn_hidden_size
    kv_dim = num_kv_heads * (h // num_heads)
    return 2 * h * h + 2 * h * kv_dim + 3 * h * f + 2 * h
    ### END SOLUTION

"""),
    code("""
check.ex01_llama_layer_params(llama_layer_params)
"""),
    pair(r"""
## Exercise 4: ZeRO under tensor parallelism

`num_gpus` GPUs run tensor parallelism of degree `tp` inside data parallelism. Each GPU holds `num_params // tp`
parameters, and ZeRO shards them over the data-parallel degree. Return the bytes per GPU with mixed-precision Adam
(you may call your `zero_model_states`). Check: 8B parameters, 8 GPUs, tp = 8, ZeRO-3 → 16 GB (ZeRO saves nothing).
""", r"""
## 练习 4：张量并行下的 ZeRO

`num_gpus` 张 GPU 在数据并行之内做并行度为 `tp` 的张量并行。每张 GPU 持有 `num_params // tp` 个参数，ZeRO 在数据并行度上
对它们分片。返回混合精度 Adam 下每张 GPU 的字节数（可以调用你的 `zero_model_states`）。验算：80 亿参数、8 张 GPU、
tp = 8、ZeRO-3 → 16 GB（ZeRO 什么也没省）。
"""),
    code("""
def zero_with_tp(num_params, num_gpus, tp, zero_stage):
    ### BEGIN SOLUTION
    dp = num_gpus // tp
    return zero_model_states(num_params // tp, dp, zero_stage)
    ### END SOLUTION

"""),
    code("""
check.ex01_zero_with_tp(zero_with_tp)
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "01_memory.ipynb")
print("wrote solutions/01_memory.ipynb")
