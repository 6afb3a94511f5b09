"""Builds solutions/06_zero_fsdp.ipynb. Run: .venv/bin/python scripts/notebooks/06_zero_fsdp_solutions.py, then
.venv/bin/python -m distlearn.course execute solutions/06_zero_fsdp.ipynb and make exercises."""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "solutions"

cells = [
    pair(r"""
# 06 · Exercises: ZeRO and FSDP

Complete each function, then run the check cell under it: it runs hidden cases and explains what is wrong.
Chapter: `notebooks/06_zero_fsdp.ipynb`.
""", r"""
# 06 · 练习：ZeRO 与 FSDP

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例并说明哪里不对。
对应章节：`notebooks/06_zero_fsdp.ipynb`。
"""),
    code("""
import math
import numpy as np
from distlearn import check
"""),
    pair(r"""
## Exercise 1 · Shard a flat parameter with padding

Given a 1-D array `flat` of N elements and `world_size`, return the list of `world_size` shards FSDP1 keeps: each
of length ⌈N / world_size⌉, in rank order, the last ones right-padded with zeros (a rank past the end holds only
zeros). Example: 5 elements on 4 ranks → `[1, 2], [3, 4], [5, 0], [0, 0]`.
""", r"""
## 练习 1 · 带填充地切分扁平参数

给定有 N 个元素的一维数组 `flat` 和 `world_size`，返回 FSDP1 保存的 `world_size` 个分片组成的列表：每个分片长度为
⌈N / world_size⌉，按 rank 顺序排列，最后几个分片右侧用 0 填充（超出末尾的 rank 只有 0）。例：5 个元素分到 4 个
rank → `[1, 2], [3, 4], [5, 0], [0, 0]`。
"""),
    code("""
def shard_with_padding(flat, world_size):
    ### BEGIN SOLUTION
    size = math.ceil(len(flat) / world_size)
    shards = []
    for r in range(world_size):
        piece = np.zeros(size, dtype=np.asarray(flat).dtype)
        chunk = flat[r * size:(r + 1) * size]
        piece[:len(chunk)] = chunk
        shards.append(piece)
    return shards
    ### END SOLUTION
"""),
    code("check.ex06_shard_with_padding(shard_with_padding)"),
    pair(r"""
## Exercise 2 · Gather the parameters back

Given the shards (in rank order) and the list of original parameter `shapes`, return the parameters as arrays of
those shapes. Drop the padding.
""", r"""
## 练习 2 · 把参数收集回来

给定按 rank 顺序排列的分片和原始参数形状列表 `shapes`，返回具有这些形状的参数数组。去掉填充。
"""),
    code("""
def gather_params(shards, shapes):
    ### BEGIN SOLUTION
    flat = np.concatenate(shards)
    params, start = [], 0
    for shape in shapes:
        n = int(np.prod(shape))
        params.append(flat[start:start + n].reshape(shape))
        start += n
    return params
    ### END SOLUTION
"""),
    code("check.ex06_gather_params(gather_params)"),
    pair(r"""
## Exercise 3 · Bytes a rank sends per ZeRO-3 step

Ψ = `num_params` parameters, `world_size` data-parallel ranks, `bytes_per_elem` bytes per element communicated
(2 for bf16). With the ring algorithm an all-gather or a reduce-scatter of Ψ elements makes each rank send
(n − 1)/n · Ψ elements. How many bytes does one rank send in one ZeRO-3 step?
""", r"""
## 练习 3 · ZeRO-3 每步每个 rank 发送的字节数

Ψ = `num_params` 个参数，`world_size` 个数据并行 rank，每个通信元素 `bytes_per_elem` 字节（bf16 为 2）。使用环形
算法时，对 Ψ 个元素做一次 AllGather 或 ReduceScatter，每个 rank 发送 (n − 1)/n · Ψ 个元素。ZeRO-3 的一步中，
每个 rank 发送多少字节？
"""),
    code("""
def zero3_bytes_per_step(num_params, world_size, bytes_per_elem):
    ### BEGIN SOLUTION
    return 3 * (world_size - 1) / world_size * num_params * bytes_per_elem
    ### END SOLUTION
"""),
    code("check.ex06_zero3_bytes_per_step(zero3_bytes_per_step)"),
    pair(r"""
## Exercise 4 · Model-state bytes per GPU

Mixed-precision Adam: 2 bytes of parameters, 2 of gradients, 12 of optimizer state per parameter. Return the bytes
per GPU for ZeRO stage `zero_stage` (0–3) over `dp` data-parallel ranks (stage 1 shards the optimizer state,
stage 2 also the gradients, stage 3 also the parameters).
""", r"""
## 练习 4 · 每张 GPU 的模型状态字节数

混合精度 Adam：每个参数有 2 字节参数、2 字节梯度、12 字节优化器状态。返回 ZeRO 阶段 `zero_stage`（0–3）在 `dp`
个数据并行 rank 上每张 GPU 的字节数（阶段 1 分片优化器状态，阶段 2 再分片梯度，阶段 3 再分片参数）。
"""),
    code("""
def model_states_per_gpu(num_params, dp, zero_stage):
    ### BEGIN SOLUTION
    params = 2 * num_params / (dp if zero_stage >= 3 else 1)
    grads = 2 * num_params / (dp if zero_stage >= 2 else 1)
    optim = 12 * num_params / (dp if zero_stage >= 1 else 1)
    return params + grads + optim
    ### END SOLUTION
"""),
    code("check.ex06_model_states_per_gpu(model_states_per_gpu)"),
]

nbformat.write(new_notebook(cells), HERE / "06_zero_fsdp.ipynb")
print("wrote", HERE / "06_zero_fsdp.ipynb")
