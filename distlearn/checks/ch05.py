"""Exercise checkers for chapter 05 (pipeline parallelism). Expected values come from :mod:`distlearn.pipeline`,
which tests check against the closed forms of Narayanan et al. 2021 and torch's own schedules."""
from __future__ import annotations

from fractions import Fraction

from ..check import Case, verify
from ..pipeline import partition_layers, simulate, stage_order


def ex05_bubble_fraction(fn) -> None:
    """``fn(num_stages, num_microbatches)`` → idle share of a GPipe / 1F1B step with uniform costs."""
    hint = ("Idle time is (p − 1)(t_f + t_b) per stage out of (m + p − 1)(t_f + t_b).",
            "每个阶段的空闲时间是 (p − 1)(t_f + t_b)，总时间是 (m + p − 1)(t_f + t_b)。")
    cases = [Case(args=(p, m), expected=float(Fraction(p - 1, m + p - 1)), rtol=1e-9, atol=1e-12,
                  hint_en=hint[0], hint_zh=hint[1])
             for p, m in [(4, 8), (1, 5), (8, 1), (4, 2), (16, 64)]]
    verify("ex05_bubble_fraction", fn, cases)


def ex05_one_f_one_b_order(fn) -> None:
    """``fn(stage, num_stages, num_microbatches)`` → 1F1B (PipeDream-Flush) order of that stage, e.g. ``["F0",
    "F1", "B0", …]``."""
    cases = []
    for s, p, m in [(0, 4, 6), (3, 4, 3), (1, 4, 2), (0, 1, 3), (2, 4, 8), (0, 3, 1)]:
        want = [f"{k}{j}" for k, j, _ in stage_order("1f1b", s, p, m)]
        cases.append(Case(args=(s, p, m), expected=want,
                          hint_en="Warm-up: min(p − s − 1, m) forwards; then alternate F, B; then the remaining Bs.",
                          hint_zh="预热：min(p − s − 1, m) 个前向；然后 F、B 交替；最后做完剩下的反向。"))
    verify("ex05_one_f_one_b_order", fn, cases)


def _valid_partition(n, p):
    def compare(got, _expected):
        try:
            sizes = [int(x) for x in got]
        except (TypeError, ValueError):
            return False
        return (len(sizes) == p and sum(sizes) == n and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
                and all(float(x) == int(x) for x in got))
    return compare


def ex05_partition_layers(fn) -> None:
    """``fn(num_layers, num_stages)`` → layers per stage: all layers placed, sizes differ by at most one."""
    cases = [Case(args=(n, p), expected=partition_layers(n, p), compare=_valid_partition(n, p),
                  hint_en="num_layers // num_stages drops the remainder: give one extra layer to r = n % p stages.",
                  hint_zh="num_layers // num_stages 会丢掉余数：给 r = n % p 个阶段各多分一层。")
             for n, p in [(10, 3), (32, 4), (30, 4), (5, 5), (7, 2), (100, 7)]]
    verify("ex05_partition_layers", fn, cases)


def ex05_peak_activations(fn) -> None:
    """``fn(schedule, stage, num_stages, num_microbatches)`` → most micro-batches whose activations stage ``stage``
    holds at once, for ``"gpipe"`` or ``"1f1b"``."""
    cases = []
    for sch, s, p, m in [("gpipe", 0, 4, 8), ("1f1b", 0, 4, 8), ("1f1b", 3, 4, 8), ("1f1b", 0, 4, 2),
                         ("gpipe", 2, 4, 2), ("1f1b", 1, 8, 32)]:
        want = int(simulate(sch, p, m).peak_inflight[s])
        cases.append(Case(args=(sch, s, p, m), expected=want,
                          hint_en="GPipe keeps every micro-batch until the backward starts; 1F1B at most p − s "
                                  "(never more than m).",
                          hint_zh="GPipe 要保留所有微批次直到反向开始；1F1B 最多保留 p − s 个（且不超过 m）。"))
    verify("ex05_peak_activations", fn, cases)


def ex05_zb_h1_bubble(fn) -> None:
    """``fn(num_stages, fwd_time, bwd_time, wgrad_time)`` → the worst stage's idle time (between its first and last
    operation) under ZB-H1, where the closed form of Qi et al. 2023 holds; expected from the event simulation, which
    the tests check against that closed form."""
    from ..zero_bubble import simulate as zb_simulate

    cases = []
    for p, f, b, w in [(4, 1.0, 2.0, 1.0), (8, 1.0, 2.0, 0.5), (2, 1.0, 3.0, 1.0), (1, 1.0, 2.0, 1.0),
                       (6, 2.0, 3.0, 1.0)]:
        want = float(zb_simulate("zb-h1", p, 2 * p, fwd_time=f, bwd_time=b, wgrad_time=w).span_idle.max())
        cases.append(Case(args=(p, f, b, w), expected=want, rtol=1e-9, atol=1e-9,
                          hint_en="1F1B idles (p − 1)(t_f + t_b); ZB-H1 fills part of each gap with a weight-gradient "
                                  "pass: (p − 1)(t_f + t_I − t_W), with t_I = t_b − t_W.",
                          hint_zh="1F1B 空闲 (p − 1)(t_f + t_b)；ZB-H1 用权重梯度填充每段空闲的一部分："
                                  "(p − 1)(t_f + t_I − t_W)，其中 t_I = t_b − t_W。"))
    verify("ex05_zb_h1_bubble", fn, cases)
