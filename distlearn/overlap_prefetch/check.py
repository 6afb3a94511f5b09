"""Checkers for chapter 07 (overlap and prefetch). Expected values come from distlearn.overlap_prefetch.timeline's event simulation,
which the tests check against the closed forms."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.overlap_prefetch.timeline import simulate, uniform


def ex07_prefetch_time(fn):
    """``fn(num_units, compute, comm)`` → forward time of uniform units with prefetch."""
    cases = [Case((n, f, g), expected=uniform(n, f, g, include_backward=False).total_time, rtol=1e-9,
                  hint_en="Draw two rows for 3 units, all-gathers above and computations below. Unit i computes "
                          "once its all-gather is done and unit i − 1 has finished; the channel runs one "
                          "all-gather at a time. Then try comm much smaller than compute, and much larger: which "
                          "row sets the pace, and which pieces stay uncovered at the two ends?",
                  hint_zh="画出 3 个单元的两行时间线：上面一行是 AllGather，下面一行是计算。单元 i 要等自己的 "
                          "AllGather 完成、并且单元 i − 1 算完，才能开始计算；通信通道一次只执行一个 AllGather。"
                          "再分别试试 comm 远小于 compute 和远大于 compute：哪一行决定了节奏？两端各有哪一段没有被"
                          "遮住？")
             for n, f, g in [(12, 0.1, 0.08), (5, 1.0, 3.0), (1, 2.0, 1.0), (8, 1.0, 1.0), (3, 0.5, 0.75)]]
    verify("ex07_prefetch_time", fn, cases)


def ex07_peak_units(fn):
    """``fn(num_units, depth, limit)`` → most units unsharded at once in the forward (limit None = unlimited)."""
    cases = [Case((n, k, lim), expected=uniform(n, 1.0, 0.5, include_backward=False, forward_prefetch=k,
                                                max_inflight=lim).peak_units,
                  hint_en="The unit computing plus the ones already prefetched, capped by the number of units "
                          "and by the limit.",
                  hint_zh="正在计算的单元加上已预取的单元，不超过单元总数，也不超过限制。")
             for n, k, lim in [(10, 1, None), (10, 3, None), (10, 3, 2), (2, 4, None), (6, 0, None), (6, 2, 1)]]
    verify("ex07_peak_units", fn, cases)


def ex07_serial_step_time(fn):
    """``fn(forward, backward, all_gather, reduce_scatter)`` (lists per unit) → FULL_SHARD step time with no
    overlap at all."""
    cases = []
    for fw, bw, ag, rs in [([1, 1, 1], [2, 2, 2], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
                           ([1, 2], [2, 4], [3, 1], [1, 1]), ([0.25], [0.5], [0.25], [0.5])]:
        r = simulate(fw, ag, backward=bw, reduce_scatter=rs, forward_prefetch=0, backward_prefetch=0)
        cases.append(Case((fw, bw, ag, rs), expected=r.total_time, rtol=1e-9,
                          hint_en="Every unit is all-gathered twice (forward and backward) and reduce-scattered "
                                  "once; with no overlap everything adds up.",
                          hint_zh="每个单元 AllGather 两次（前向和反向）、ReduceScatter 一次；没有重叠时全部相加。"))
    verify("ex07_serial_step_time", fn, cases)
