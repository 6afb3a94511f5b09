"""Builds solutions/07_overlap_prefetch.ipynb. Run: .venv/bin/python scripts/notebooks/07_overlap_prefetch_solutions.py, then
.venv/bin/python -m distlearn.course execute solutions/07_overlap_prefetch.ipynb and make exercises."""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "solutions"

cells = [
    pair(r"""
# 07 · Exercises: overlap and prefetch

Complete each function, then run the check cell under it. Chapter: `notebooks/07_overlap_prefetch.ipynb`.
""", r"""
# 07 · 练习：通信与计算重叠、预取

补全每个函数，然后运行其下方的检查单元格。对应章节：`notebooks/07_overlap_prefetch.ipynb`。
"""),
    code("from distlearn import check"),
    pair(r"""
## Exercise 1 · Forward time with prefetch

`num_units` identical units, each computing for `compute` and all-gathered in `comm`. With prefetch (the next
all-gather issued when the current unit starts computing), how long does the forward pass take?
""", r"""
## 练习 1 · 有预取时的前向时间

`num_units` 个相同的单元，每个计算耗时 `compute`，AllGather 耗时 `comm`。有预取时（当前单元开始计算时发起下一次
AllGather），前向需要多长时间？
"""),
    code("""
def prefetch_time(num_units, compute, comm):
    ### BEGIN SOLUTION
    return comm + compute + (num_units - 1) * max(comm, compute)
    ### END SOLUTION
"""),
    code("check.ex07_prefetch_time(prefetch_time)"),
    pair(r"""
## Exercise 2 · The memory price of prefetching

In the forward pass with prefetch depth `depth` (0 = none) and at most `limit` units unsharded at once (`None` =
no limit), how many units' parameters are unsharded at the same time, at most? There are `num_units` units and
each is freed after its forward.
""", r"""
## 练习 2 · 预取的显存代价

前向中预取深度为 `depth`（0 = 不预取），同时最多 `limit` 个单元未分片（`None` = 不限）。同一时刻最多有多少个单元
的参数处于未分片状态？共有 `num_units` 个单元，每个单元在其前向之后释放。
"""),
    code("""
def peak_units(num_units, depth, limit):
    ### BEGIN SOLUTION
    peak = min(depth + 1, num_units)
    return peak if limit is None else min(peak, limit)
    ### END SOLUTION
"""),
    code("check.ex07_peak_units(peak_units)"),
    pair(r"""
## Exercise 3 · A step with no overlap

Lists give, per unit, the forward and backward compute times and the all-gather and reduce-scatter times. Under
`FULL_SHARD` with no overlap at all (no prefetch, each collective waits for the previous work), how long is one
step?
""", r"""
## 练习 3 · 完全不重叠的一步

列表按单元给出前向、反向计算时间以及 AllGather、ReduceScatter 时间。在 `FULL_SHARD` 下完全没有重叠（不预取，每个
集合通信都等前面的工作结束）时，一步需要多长时间？
"""),
    code("""
def serial_step_time(forward, backward, all_gather, reduce_scatter):
    ### BEGIN SOLUTION
    return sum(forward) + sum(backward) + 2 * sum(all_gather) + sum(reduce_scatter)
    ### END SOLUTION
"""),
    code("check.ex07_serial_step_time(serial_step_time)"),
]

nbformat.write(new_notebook(cells), HERE / "07_overlap_prefetch.ipynb")
print("wrote", HERE / "07_overlap_prefetch.ipynb")
