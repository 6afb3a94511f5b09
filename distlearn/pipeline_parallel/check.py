"""Exercise checkers for chapter 05 (pipeline parallelism). Expected values come from :mod:`distlearn.pipeline_parallel.schedules`,
which tests check against the closed forms of Narayanan et al. 2021 and torch's own schedules."""
from __future__ import annotations

from fractions import Fraction

from distlearn.core.check import Case, Why, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.pipeline_parallel.schedules import partition_layers, simulate, stage_order


def ex05_bubble_fraction(fn) -> None:
    """``fn(num_stages, num_microbatches)`` → idle share of a GPipe / 1F1B step with uniform costs."""
    hint = ("The bubble fraction is the idle share of the whole step (idle plus busy time), not idle over busy. "
            "Draw the schedule for p stages and m micro-batches, count the slots one stage waits and the slots "
            "the step lasts; t_f and t_b cancel.",
            "气泡率是空闲时间占整个步骤（空闲加计算）的比例，而不是空闲时间与计算时间之比。画出 p 个阶段、m 个"
            "微批次的调度图，数一数一个阶段等待了几格、整个步骤共几格；t_f 和 t_b 会约掉。")
    cases = [Case(args=(p, m), expected=float(Fraction(p - 1, m + p - 1)), rtol=1e-9, atol=1e-12,
                  hint_en=hint[0], hint_zh=hint[1])
             for p, m in [(4, 8), (1, 5), (8, 1), (4, 2), (16, 64)]]
    verify("ex05_bubble_fraction", fn, cases)


def _order_compare(got, expected):
    """Compare an order with the expected one and name the first position that differs, in both languages."""
    try:
        ops = [(str(k), int(j), int(c)) for k, j, c in got]
    except (TypeError, ValueError):
        return Why("return a list of tuples (kind, microbatch, chunk), e.g. [(\"F\", 0, 0), (\"F\", 1, 0), …]",
                   "请返回由 (kind, microbatch, chunk) 元组组成的列表，例如 [(\"F\", 0, 0), (\"F\", 1, 0), …]")
    for i, (a, b) in enumerate(zip(ops, expected)):
        if a != b:
            return Why(f"operation {i}: you have {a}, torch runs {b}", f"第 {i} 个操作：你给出 {a}，torch 执行的是 {b}")
    if len(ops) != len(expected):
        return Why(f"{len(ops)} operations, expected {len(expected)} (every chunk runs F and B of every micro-batch)",
                   f"共 {len(ops)} 个操作，应为 {len(expected)} 个（每个模型块对每个微批次各做一次 F 和 B）")
    return True


# (stage, num_stages, num_microbatches, num_chunks): first and last rank, m = p and m = 2p, v = 2, 3, 4, and rank 0
# of (4, 4, 2), whose warm-up 2(p − 1) + (v − 1)p = 10 is capped at the m·v = 8 forwards it has
INTERLEAVED_CASES = ((0, 4, 8, 2), (3, 4, 8, 2), (1, 2, 4, 3), (0, 4, 4, 2), (2, 3, 6, 2), (1, 4, 8, 4))


def ex05_interleaved_order(fn) -> None:
    """``fn(stage, num_stages, num_microbatches, num_chunks)`` → the interleaved 1F1B order of rank ``stage`` as
    ``[("F", microbatch, chunk), …]``, for ``num_microbatches`` a multiple of ``num_stages``. Expected orders:
    :func:`distlearn.pipeline_parallel.schedules.stage_order`, which ``tests/test_pipeline.py`` compares with torch's own
    ``ScheduleInterleaved1F1B`` (``_calculate_single_rank_operations``)."""
    cases = []
    for s, p, m, v in INTERLEAVED_CASES:
        cases.append(Case(args=(s, p, m, v), expected=stage_order("interleaved-1f1b", s, p, m, v),
                          compare=_order_compare,
                          hint_en="Forwards: rounds of p micro-batches, chunk 0 then 1 … v − 1; backwards: the same "
                                  "rounds, chunk v − 1 first. Warm-up on rank s: min(2(p − s − 1) + (v − 1)·p, m·v) "
                                  "chunk-forwards, then one F and one B in turn, then the remaining Bs.",
                          hint_zh="前向：每轮 p 个微批次，依次经过模型块 0、1 … v − 1；反向：同样分轮，但从模型块 v − 1 "
                                  "开始。rank s 的预热：min(2(p − s − 1) + (v − 1)·p, m·v) 个模型块前向，然后 F、B "
                                  "交替，最后做完剩下的反向。"))
    verify("ex05_interleaved_order", fn, cases)


def _valid_partition(n, p):
    """Any split of ``n`` layers into ``p`` stages of ≥ 1 layer whose sizes differ by at most one is right; the
    reason a wrong one fails is named in both languages."""
    def compare(got, _expected):
        try:
            sizes = [int(x) for x in got]
            whole = all(float(x) == int(x) for x in got)
        except (TypeError, ValueError):
            return Why(f"return a list of {p} ints (layers per stage)", f"请返回 {p} 个整数组成的列表（每个阶段的层数）")
        if not whole:
            return Why("layer counts must be whole numbers", "层数必须是整数")
        if len(sizes) != p:
            return Why(f"{len(sizes)} stages, expected {p}", f"共 {len(sizes)} 个阶段，应为 {p} 个")
        if sum(sizes) != n:
            return Why(f"the sizes sum to {sum(sizes)}, but there are {n} layers to place",
                       f"各阶段层数之和为 {sum(sizes)}，但一共有 {n} 层要分配")
        if min(sizes) < 1:
            return Why("a stage has no layer", "有阶段一层也没有")
        if max(sizes) - min(sizes) > 1:
            return Why(f"stages hold {min(sizes)} to {max(sizes)} layers: they differ by more than one",
                       f"各阶段分到 {min(sizes)} 到 {max(sizes)} 层：相差超过一层")
        return True
    return compare


def ex05_partition_layers(fn) -> None:
    """``fn(num_layers, num_stages)`` → layers per stage: all layers placed, sizes differ by at most one."""
    cases = [Case(args=(n, p), expected=partition_layers(n, p), compare=_valid_partition(n, p),
                  hint_en="Every layer must be placed, and no two stages may differ by more than one layer. "
                          "What does integer division leave over, and where can those layers go without breaking "
                          "the second rule?",
                  hint_zh="每一层都要分配出去，且任意两个阶段的层数最多相差一层。整数除法会余下几层？"
                          "这些层放在哪里才不违反第二条？")
             for n, p in [(10, 3), (32, 4), (30, 4), (5, 5), (7, 2), (100, 7)]]
    verify("ex05_partition_layers", fn, cases)


def ex05_peak_activations(fn) -> None:
    """``fn(schedule, stage, num_stages, num_microbatches, num_chunks)`` → most micro-batches whose activations rank
    ``stage`` holds at once (one chunk of one micro-batch counts 1/v), for ``"gpipe"``, ``"1f1b"`` and
    ``"interleaved-1f1b"``. Expected values: the event simulation's live-activation count
    (:func:`distlearn.pipeline_parallel.schedules.simulate`), which tests compare with the closed forms and Korthikanti et al. 2022,
    §4.2.3."""
    cases = []
    for sch, s, p, m, v in [("gpipe", 0, 4, 8, 1), ("1f1b", 0, 4, 8, 1), ("1f1b", 3, 4, 8, 1), ("1f1b", 0, 4, 2, 1),
                            ("gpipe", 2, 4, 2, 1), ("1f1b", 1, 8, 32, 1), ("interleaved-1f1b", 0, 4, 8, 2),
                            ("interleaved-1f1b", 3, 4, 8, 2), ("interleaved-1f1b", 1, 8, 32, 4),
                            ("interleaved-1f1b", 0, 4, 4, 2)]:
        want = float(simulate(sch, p, m, num_chunks=v).peak_inflight[s])
        cases.append(Case(args=(sch, s, p, m, v), expected=want, rtol=1e-9,
                          hint_en="GPipe keeps every micro-batch until the backward starts; 1F1B at most p − s "
                                  "(never more than m); interleaved: the warm-up chunk-forwards plus one, at most "
                                  "m·v, divided by v.",
                          hint_zh="GPipe 要保留所有微批次直到反向开始；1F1B 最多保留 p − s 个（且不超过 m）；交错调度："
                                  "预热的模型块前向数加一（不超过 m·v），再除以 v。"))
    verify("ex05_peak_activations", fn, cases)


def ex05_zb_h1_bubble(fn) -> None:
    """``fn(num_stages, fwd_time, bwd_time, wgrad_time)`` → the worst stage's idle time (between its first and last
    operation) under ZB-H1, where the closed form of Qi et al. 2023 holds; expected from the event simulation, which
    the tests check against that closed form."""
    from distlearn.pipeline_parallel.zero_bubble import simulate as zb_simulate

    cases = []
    for p, f, b, w in [(4, 1.0, 2.0, 1.0), (8, 1.0, 2.0, 0.5), (2, 1.0, 3.0, 1.0), (1, 1.0, 2.0, 1.0),
                       (6, 2.0, 3.0, 1.0)]:
        want = float(zb_simulate("zb-h1", p, 2 * p, fwd_time=f, bwd_time=b, wgrad_time=w).span_idle.max())
        cases.append(Case(args=(p, f, b, w), expected=want, rtol=1e-9, atol=1e-9,
                          hint_en="Start from the idle time of 1F1B's worst stage. Which part of the backward "
                                  "does the previous stage wait for, and which part can wait until later, in time "
                                  "that would otherwise be idle? Draw 2 stages and 4 micro-batches with F, I and W "
                                  "as separate boxes, read off the first stage's idle time, then draw 3 stages: "
                                  "what does each extra stage add?",
                          hint_zh="从 1F1B 中最差阶段的空闲时间出发。反向中的哪一部分是前一个阶段在等的？哪一部分可以"
                                  "推迟，放进原本空闲的时间里？画出 2 个阶段、4 个微批次的调度，F、I、W 各画成单独的"
                                  "方块，读出第一个阶段的空闲时间；再画 3 个阶段：每多一个阶段，空闲时间增加多少？"))
    verify("ex05_zb_h1_bubble", fn, cases)
