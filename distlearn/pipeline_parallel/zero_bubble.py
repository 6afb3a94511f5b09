"""Pipeline schedules that split the backward pass (chapter 05): ZB-H1, ZB-H2, interleaved zero bubble, ZB-V and
DualPipe / DualPipeV, in the event simulation of :func:`distlearn.pipeline_parallel.schedules.simulate`.

The backward of a micro-batch through a stage does two jobs (Qi et al. 2023, *Zero Bubble Pipeline Parallelism*,
§2): the **input gradient** ∂L/∂x, which the previous stage waits for, and the **weight gradient** ∂L/∂W, which
nobody waits for until the optimizer step. We write

- ``I`` for the input-gradient pass (Qi et al. call it *B*, torch ``BACKWARD_INPUT`` / ``I``),
- ``W`` for the weight-gradient pass,
- ``B`` for the whole backward (I and W together, torch ``FULL_BACKWARD``), as in the rest of chapter 05,
- ``F&B`` for a forward and a full backward of two different micro-batches run as one overlapped block
  (DualPipe, DeepSeek-AI 2024, *DeepSeek-V3 Technical Report*, §3.2.1).

Costs per micro-batch and pipeline rank (all of the rank's layers): ``t_f``, the full backward ``t_b`` and its
weight part ``t_W`` (so ``t_I = t_b − t_W``); a rank holding two model chunks runs each chunk op in half the time.

Schedules (``schedule`` names of :func:`distlearn.pipeline_parallel.schedules.simulate`):

- ``"zb-h1"`` (Qi et al. §2.1): 1F1B with I in place of B; the first W on stage s waits s steady-state steps, so
  every stage holds at most p micro-batches — the same as 1F1B's stage 0 — and the W passes fill the tail.
  ``torch.distributed.pipelining.schedules.ScheduleInterleavedZeroBubble`` with one stage per rank runs exactly
  this order (tests compare them).
- ``"interleaved-zb"``: the same idea with ``v`` chunks per rank (torch's ``ScheduleInterleavedZeroBubble``,
  "ZB1P"; warm-up (v − 1)·g + p − 1 − s chunk-forwards).
- ``"zb-h2"`` (Qi et al. §2.2): more warm-up forwards, up to 2p − 1 micro-batches held, to fill the bubble before
  the first backward too. We build it with a greedy list scheduler under that memory limit (I first, then F if
  the limit allows, else W), the rule of the paper's automatic scheduling (§3) with the limit 2p − 1;
  :func:`greedy_orders`.
- ``"zbv"`` (Qi et al. §6; torch ``ScheduleZBVZeroBubble``): two chunks per rank placed in a "V": chunk 0 of
  rank r is stage r, chunk 1 is stage 2p − 1 − r, so the last rank holds stages p − 1 and p and the loss returns
  to rank 0.
- ``"dualpipev"`` (torch ``ScheduleDualPipeV``, DualPipe "cut in half"): the V placement with DualPipe's steps,
  overlapped F&B blocks in the middle; needs m ≥ 2p.
- ``"dualpipe"`` (DeepSeek-V3 §3.2.1; ``deepseek-ai/DualPipe``): two pipelines in opposite directions, each
  rank holding stage r of one and stage p − 1 − r of the other (two copies of the parameters); half the
  micro-batches enter at rank 0, half at rank p − 1; p and m even, m ≥ 2p.

Closed forms (:func:`closed_form`), where "bubble" is the worst rank's idle time between its first and its last
operation — how both papers count it (a flush adds the start-up stagger on top):

- 1F1B: (p − 1)(t_f + t_b); ZB-H1: (p − 1)(t_f + t_I − t_W) (Qi et al. Table 2, their T_B = our t_I), exact in
  the simulation when t_W ≤ t_f, t_W ≤ t_I and m ≥ p; ZB-H2: (p − 1)(t_f + t_I − 2t_W), zero when the three costs
  are equal, with 2p − 1 micro-batches held;
- ZB-V: zero when t_f = t_I = t_W (torch's ``ScheduleZBVZeroBubble`` docstring; the authors' repository
  README: bubble rate 0, activation memory 1× 1F1B);
- DualPipe: (p/2 − 1)(t_F&B + t_b − 3t_W), parameters 2×, activations p + 1 micro-batch-chunks (DeepSeek-V3,
  Table 2, where B is the full backward); the simulation agrees exactly when t_f = t_I = t_W and
  t_F&B = t_f + t_b.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from distlearn.core.validate import DistlearnValueError, check_bool, check_choice, check_int, check_number
from distlearn.pipeline_parallel.timeline import KINDS, PipelineResult, check_stage_args, per_stage_costs

__all__ = ["ZERO_BUBBLE_SCHEDULES", "Op", "chunks_per_rank", "virtual_stage", "rank_ops", "greedy_orders",
           "simulate", "simulate_steps", "closed_form", "step_time_closed_form", "reference_zb_h1_order",
           "check_costs"]

# the schedule names this module simulates (distlearn.pipeline_parallel.schedules.simulate hands them over)
ZERO_BUBBLE_SCHEDULES = ("zb-h1", "zb-h2", "interleaved-zb", "zbv", "dualpipev", "dualpipe")
_CODE = {k: i for i, k in enumerate(KINDS)}
MAX_OPS = 400_000
MAX_GREEDY_STEPS = 4_000_000   # greedy_orders: 3·p²·m steps, a few seconds


class Op(NamedTuple):
    """One operation of a rank: ``kind`` in :data:`KINDS`, on the rank's model ``chunk``, for ``microbatch``.

    For ``"F&B"`` the forward is (``chunk``, ``microbatch``) and the full backward (``bwd_chunk``,
    ``bwd_microbatch``)."""

    kind: str
    chunk: int
    microbatch: int
    bwd_chunk: int = -1
    bwd_microbatch: int = -1


# ---------------------------------------------------------------------------------------------- layout
def chunks_per_rank(schedule: str, num_chunks: int = 1) -> int:
    """Model chunks each rank holds: 1 (ZB-H1, ZB-H2), ``num_chunks`` (interleaved-zb), 2 (ZB-V, DualPipeV,
    DualPipe: for DualPipe the two chunks are whole stages of the two pipelines). Raises DistlearnValueError for
    an unknown schedule or a chunk count below 1."""
    check_choice("schedule", schedule, ZERO_BUBBLE_SCHEDULES)
    num_chunks = check_int("num_chunks", num_chunks)
    if schedule in ("zb-h1", "zb-h2"):
        return 1
    if schedule == "interleaved-zb":
        return num_chunks
    return 2


def time_divisor(schedule: str, num_chunks: int = 1) -> int:
    """How many chunk ops make one micro-batch's pass through a rank: a chunk op takes ``t / divisor``. DualPipe's
    chunks are whole stages of two different pipelines, each micro-batch visits one of them: divisor 1."""
    per_rank = chunks_per_rank(schedule, num_chunks)   # validates both
    return 1 if schedule == "dualpipe" else per_rank


def virtual_stage(schedule: str, rank: int, chunk: int, num_ranks: int) -> int:
    """Index of the pipeline stage that ``chunk`` of ``rank`` runs.

    Looped placement (ZB-H1, ZB-H2, interleaved-zb): ``chunk·p + rank``. V placement (ZB-V, DualPipeV):
    chunk 0 → ``rank``, chunk 1 → ``2p − 1 − rank``. DualPipe: chunk 0 is stage ``rank`` of the first pipeline
    (indices 0…p − 1), chunk 1 stage ``p − 1 − rank`` of the second one, numbered ``p + (p − 1 − rank)``.
    Raises DistlearnValueError for an unknown schedule, ``num_ranks`` outside [1, 256], ``rank`` outside
    [0, num_ranks − 1] or ``chunk`` outside the rank's chunks ([0, 7] looped, 0 or 1 for the V and DualPipe
    placements)."""
    schedule = check_choice("schedule", schedule, ZERO_BUBBLE_SCHEDULES)
    p = check_int("num_ranks", num_ranks, minimum=1, maximum=256)
    rank = check_int("rank", rank, minimum=0, maximum=p - 1)
    looped = schedule in ("zb-h1", "zb-h2", "interleaved-zb")
    chunk = check_int("chunk", chunk, minimum=0, maximum=7 if looped else 1)
    return _virtual_stage(schedule, rank, chunk, p)


def _virtual_stage(schedule: str, rank: int, chunk: int, p: int) -> int:
    """:func:`virtual_stage` without the checks, for the event loop (its arguments come from validated orders)."""
    if schedule in ("zb-h1", "zb-h2", "interleaved-zb"):
        return chunk * p + rank
    return rank if chunk == 0 else 2 * p - 1 - rank


def _pipelines(schedule: str, p: int, v: int) -> tuple[set, set, int]:
    """(first stages, last stages, number of stages) of the pipeline(s)."""
    if schedule == "dualpipe":
        return {0, p}, {p - 1, 2 * p - 1}, 2 * p
    n = p * chunks_per_rank(schedule, v)
    return {0}, {n - 1}, n


def _rank_of(schedule: str, p: int, v: int) -> dict:
    n = _pipelines(schedule, p, v)[2]
    out = {}
    for r in range(p):
        for c in range(chunks_per_rank(schedule, v)):
            out[_virtual_stage(schedule, r, c, p)] = r
    assert len(out) == n
    return out


# ---------------------------------------------------------------------------------------------- orders
def _check(schedule, p, m, v):
    schedule = check_choice("schedule", schedule, ZERO_BUBBLE_SCHEDULES)
    p = check_int("num_stages", p, minimum=1, maximum=256)
    m = check_int("num_microbatches", m, minimum=1, maximum=4096)
    v = check_int("num_chunks", v, minimum=1, maximum=8)
    if v > 1 and schedule != "interleaved-zb":
        raise DistlearnValueError(
            "num_chunks", f"num_chunks = {v} applies to 'interleaved-zb' only; {schedule!r} has a fixed layout "
                          f"({chunks_per_rank(schedule)} chunk(s) per rank).",
            f"num_chunks = {v} 只用于 'interleaved-zb'；{schedule!r} 的布局是固定的（每个 rank "
            f"{chunks_per_rank(schedule)} 个模型块）。")
    if schedule == "interleaved-zb":
        rounds = max(1, m // p)
        if m % rounds:
            raise DistlearnValueError(
                "num_microbatches", f"interleaved-zb needs num_microbatches = {m} to be a multiple of "
                                    f"max(1, m // p) = {rounds}, as torch's ScheduleInterleavedZeroBubble does.",
                f"interleaved-zb 要求 num_microbatches = {m} 是 max(1, m // p) = {rounds} 的倍数"
                f"（与 torch 的 ScheduleInterleavedZeroBubble 相同）。")
    if schedule in ("dualpipe", "dualpipev") and m < 2 * p:
        raise DistlearnValueError(
            "num_microbatches", f"{schedule} needs num_microbatches ≥ 2·num_stages = {2 * p}; got {m}.",
            f"{schedule} 要求 num_microbatches ≥ 2·num_stages = {2 * p}；收到 {m}。")
    if schedule == "dualpipe" and (p % 2 or m % 2):
        raise DistlearnValueError(
            "num_stages", f"dualpipe needs an even number of ranks and of micro-batches (half of them go each way); "
                          f"got num_stages = {p}, num_microbatches = {m}.",
            f"dualpipe 要求 rank 数和微批次数都是偶数（两个方向各一半）；收到 num_stages = {p}，"
            f"num_microbatches = {m}。")
    return schedule, p, m, v


def reference_zb_h1_order(stage: int, num_stages: int, num_microbatches: int) -> list[tuple[str, int]]:
    """ZB-H1 on one stage written as loops (the readable reference for :func:`rank_ops` ``("zb-h1", …)``).

    Warm-up: ``p − s − 1`` forwards, as in 1F1B. Steady: one forward and one input-gradient pass I per step; the
    weight-gradient pass W of the oldest micro-batch joins from the step ``s`` on (stage s delays its W by s
    steps: every stage then holds up to p micro-batches). Cool-down: the remaining I passes, each with a W once
    past the delay; then the Ws still owed. Returns ``[("F", 0), …, ("I", 0), ("W", 0), …]``.
    """
    s, p, m = check_stage_args(stage, num_stages, num_microbatches)  # or a clear error / 否则给出清楚的错误
    warmup = min(p - s - 1, m)
    order, f, i, owed = [], 0, 0, []   # owed: micro-batches whose W is still to do / 还欠着 W 的微批次
    for _ in range(warmup):            # warm-up: forwards only / 预热期：只做前向
        order.append(("F", f))
        f += 1
    for step in range(m - warmup):     # steady: F, I, and from step s on one W / 稳定期：F、I，第 s 步起再加一个 W
        order.append(("F", f))
        f += 1
        order.append(("I", i))
        owed.append(i)
        i += 1
        if step >= s:
            order.append(("W", owed.pop(0)))
    for step in range(warmup):         # cool-down: the remaining I (and W) / 收尾期：剩下的 I（和 W）
        order.append(("I", i))
        owed.append(i)
        i += 1
        if m - warmup + step >= s:
            order.append(("W", owed.pop(0)))
    order += [("W", j) for j in owed]  # the Ws still owed fill the tail / 还欠的 W 填满尾部
    return order


def _zb1p_ops(rank: int, p: int, m: int, v: int) -> list[Op]:
    """ZB-H1 (v = 1) and interleaved zero bubble (v > 1), in torch's ``ScheduleInterleavedZeroBubble`` order:
    warm-up ``(v − 1)·g + p − 1 − rank`` chunk-forwards (``g`` micro-batches per round), then F, I and — from
    steady step ``rank`` on — the W of the oldest pending I; cool-down I (and W); then the remaining Ws."""
    rounds = max(1, m // p)
    g = m // rounds
    total = m * v
    warmup = min((v - 1) * g + (p - 1 - rank), total)
    fwd_mb, bwd_mb = [0] * v, [0] * v
    ops, owed = [], []

    def forward(q):
        c = (q // g) % v
        ops.append(Op("F", c, fwd_mb[c]))
        fwd_mb[c] += 1

    def input_grad(r):
        c = v - 1 - (r // g) % v
        ops.append(Op("I", c, bwd_mb[c]))
        owed.append((c, bwd_mb[c]))
        bwd_mb[c] += 1

    for q in range(warmup):
        forward(q)
    for r in range(total):
        if warmup + r < total:
            forward(warmup + r)
        input_grad(r)
        if r >= rank:
            ops.append(Op("W", *owed.pop(0)))
    ops += [Op("W", c, j) for c, j in owed]
    return ops


def _zbv_ops(rank: int, p: int, m: int) -> list[Op]:
    """ZB-V in torch's ``ScheduleZBVZeroBubble`` order (chunk 0 = stage rank, chunk 1 = stage 2p − 1 − rank).

    Phases, with n = max(2p − 1, m) micro-batches planned and those ≥ m left out at the end:
    2(p − r) − 1 forwards of chunk 0; r pairs (F chunk 1, F chunk 0); p − r triples (F, I, W of chunk 1); steady
    steps (F chunk 0 while any remain; I, W chunk 0; F, I, W chunk 1) until both chunks have done n forwards;
    cool-down r pairs (I chunk 0, I chunk 1), p − r pairs (I chunk 0, W chunk 0); then the Ws still owed, chunk 1
    first."""
    n = max(2 * p - 1, m)
    f, i, w = [0, 0], [0, 0], [0, 0]
    ops = []

    def add(kind, c):
        counter = {"F": f, "I": i, "W": w}[kind]
        ops.append(Op(kind, c, counter[c]))
        counter[c] += 1

    for _ in range(2 * (p - rank) - 1):
        add("F", 0)
    for _ in range(rank):
        add("F", 1)
        add("F", 0)
    for _ in range(p - rank):
        add("F", 1)
        add("I", 1)
        add("W", 1)
    while f[1] < f[0] or f[0] < n:
        if f[0] < n:
            add("F", 0)
        add("I", 0)
        add("W", 0)
        add("F", 1)
        add("I", 1)
        add("W", 1)
    for _ in range(rank):
        add("I", 0)
        add("I", 1)
    for _ in range(p - rank):
        add("I", 0)
        add("W", 0)
    while w[1] < i[1]:
        add("W", 1)
    while w[0] < i[0]:
        add("W", 0)
    return [op for op in ops if op.microbatch < m]


def _dualpipev_ops(rank: int, p: int, m: int) -> list[Op]:
    """DualPipeV in torch's ``ScheduleDualPipeV`` order (V placement; torch runs an F&B block as its forward
    followed by its full backward). Steps for rank r: 2(p − r − 1) F chunk 0; r + 1 pairs F chunk 0, F chunk 1;
    p − r − 1 × (I chunk 1, the oldest deferred W, F chunk 1); m − 2p + r + 1 × (F&B: F chunk 0 with B chunk 1 —
    on the last rank the first one not overlapped —, then F&B: F chunk 1 with B chunk 0); p − r − 1 × (B chunk 1,
    F&B F chunk 1 / B chunk 0); r + 1 × (backward chunk 1, backward chunk 0), switching from B to I half way;
    p − r − 1 × (W, backward chunk 0); r + 1 × W."""
    f, b = [0, 0], [0, 0]
    ops, owed = [], []

    def fwd(c):
        ops.append(Op("F", c, f[c]))
        f[c] += 1

    def bwd(c, split):
        ops.append(Op("I" if split else "B", c, b[c]))
        if split:
            owed.append((c, b[c]))
        b[c] += 1

    def weight():
        if owed:
            ops.append(Op("W", *owed.pop(0)))

    def overlapped(fc, bc):
        ops.append(Op("F&B", fc, f[fc], bc, b[bc]))
        f[fc] += 1
        b[bc] += 1

    for _ in range(2 * (p - rank - 1)):
        fwd(0)
    for _ in range(rank + 1):
        fwd(0)
        fwd(1)
    for _ in range(p - rank - 1):
        bwd(1, True)
        weight()
        fwd(1)
    for k in range(m - 2 * p + rank + 1):
        if k == 0 and rank == p - 1:
            fwd(0)
            bwd(1, False)
        else:
            overlapped(0, 1)
        overlapped(1, 0)
    for _ in range(p - rank - 1):
        bwd(1, False)
        overlapped(1, 0)
    split = False
    half = (rank + 1) // 2
    for k in range(rank + 1):
        if k == half and rank % 2 == 1:
            split = True
        bwd(1, split)
        if k == half and rank % 2 == 0:
            split = True
        bwd(0, split)
    for _ in range(p - rank - 1):
        weight()
        bwd(0, split)
    for _ in range(rank + 1):
        weight()
    return ops


def _dualpipe_ops(rank: int, p: int, m: int) -> list[Op]:
    """DualPipe in DeepSeek's order (``deepseek-ai/DualPipe``, ``dualpipe.py``, steps 1–8), m micro-batches, half
    each way. Chunk 0 is this rank's stage of the pipeline that starts at rank 0, chunk 1 its stage of the one that
    starts at rank p − 1; micro-batch j of the second pipeline is numbered m/2 + j. Ranks in the second half swap
    the roles of "phase 0" and "phase 1", and every rank counts its position from the nearer end (h = min(r,
    p − 1 − r)). F&B blocks run a forward of one phase with the full backward of the other."""
    half_p, half_m = p // 2, m // 2
    h = min(rank, p - 1 - rank)
    second = rank >= half_p
    middle = rank in (half_p - 1, half_p)
    f, b = [0, 0], [0, 0]
    ops, owed = [], []

    def chunk(phase):
        return phase ^ int(second)

    def mb(c, j):
        return j if c == 0 else half_m + j

    def fwd(phase):
        c = chunk(phase)
        ops.append(Op("F", c, mb(c, f[c])))
        f[c] += 1

    def bwd(phase, split=False):
        c = chunk(phase)
        ops.append(Op("I" if split else "B", c, mb(c, b[c])))
        if split:
            owed.append((c, mb(c, b[c])))
        b[c] += 1

    def weight():
        ops.append(Op("W", *owed.pop(0)))

    def overlapped(f_phase, b_phase):
        fc, bc = chunk(f_phase), chunk(b_phase)
        ops.append(Op("F&B", fc, mb(fc, f[fc]), bc, mb(bc, b[bc])))
        f[fc] += 1
        b[bc] += 1

    for _ in range((half_p - h - 1) * 2):        # step 1: nF0
        fwd(0)
    for _ in range(h + 1):                       # step 2: nF0F1
        fwd(0)
        fwd(1)
    for _ in range(half_p - h - 1):              # step 3: nB1W1F1, zero bubble
        bwd(1, True)
        weight()
        fwd(1)
    for k in range(half_m - p + h + 1):          # step 4: nF0B1F1B0
        if k == 0 and middle:
            fwd(0)
            bwd(1)
        else:
            overlapped(0, 1)
        overlapped(1, 0)
    for _ in range(half_p - h - 1):              # step 5: nB1F1B0
        bwd(1)
        overlapped(1, 0)
    split, n6 = False, h + 1                     # step 6: nB1B0, the second half with split backwards
    for k in range(n6):
        if k == n6 // 2 and h % 2 == 1:
            split = True
        bwd(1, split)
        if k == n6 // 2 and h % 2 == 0:
            split = True
        bwd(0, split)
    for _ in range(half_p - h - 1):              # step 7: nWB0
        weight()
        bwd(0, True)
    for _ in range(h + 1):                       # step 8: nW
        weight()
    return ops


def rank_ops(schedule: str, rank: int, num_stages: int, num_microbatches: int, num_chunks: int = 1) -> list[Op]:
    """The operations rank ``rank`` of ``num_stages`` runs, in order, as :class:`Op` records.

    ``"zb-h2"`` depends on the costs: here it is built with t_f = t_I = t_W (see :func:`greedy_orders`).
    Raises DistlearnValueError for an unknown schedule or numbers a schedule does not accept."""
    schedule, p, m, v = _check(schedule, num_stages, num_microbatches, num_chunks)
    r = check_int("stage", rank, minimum=0, maximum=p - 1)
    if schedule == "zb-h2":
        return greedy_orders(p, m, 1.0, 1.0, 1.0)[r]
    return _orders(schedule, p, m, v)[r]


def _orders(schedule, p, m, v, costs=None) -> list[list[Op]]:
    if schedule in ("zb-h1", "interleaved-zb"):
        return [_zb1p_ops(r, p, m, v if schedule == "interleaved-zb" else 1) for r in range(p)]
    if schedule == "zbv":
        return [_zbv_ops(r, p, m) for r in range(p)]
    if schedule == "dualpipev":
        return [_dualpipev_ops(r, p, m) for r in range(p)]
    if schedule == "dualpipe":
        return [_dualpipe_ops(r, p, m) for r in range(p)]
    f, i, w = costs if costs is not None else (1.0, 1.0, 1.0)
    return greedy_orders(p, m, float(np.mean(f)), float(np.mean(i)), float(np.mean(w)))


def greedy_orders(num_stages: int, num_microbatches: int, fwd_time: float, input_time: float, wgrad_time: float,
                  memory_limit: int | None = None) -> list[list[Op]]:
    """ZB-H2-style orders from a greedy list scheduler with a memory limit (default 2p − 1 micro-batches).

    Whenever a stage is free it runs, among the operations whose input is there: the oldest input-gradient pass I
    (the previous stage waits for it), else the next forward F if fewer than ``memory_limit`` micro-batches are
    held (forward done, W not yet), else the oldest pending W — W is always ready, so a stage never idles while it
    owes one. Nothing ready: it waits for the first I or F to arrive. This is the rule of Qi et al. 2023 §3
    (automatic scheduling) with the ZB-H2 memory limit. One pipeline, one chunk per stage; costs are the same on
    every stage. Returns one list of :class:`Op` per stage.

    Raises DistlearnValueError for stages outside [1, 256], micro-batches outside [1, 4096] (the bounds of
    :func:`simulate`), costs that are not finite numbers > 0, or more than :data:`MAX_GREEDY_STEPS` scheduler
    steps (3·p·m operations, each choosing among the p stages: 3·p²·m)."""
    p = check_int("num_stages", num_stages, minimum=1, maximum=256)
    m = check_int("num_microbatches", num_microbatches, minimum=1, maximum=4096)
    fwd_time = check_number("fwd_time", fwd_time, minimum=0, strict_min=True)
    input_time = check_number("input_time", input_time, minimum=0, strict_min=True)
    wgrad_time = check_number("wgrad_time", wgrad_time, minimum=0, strict_min=True)
    if 3 * p * p * m > MAX_GREEDY_STEPS:
        raise DistlearnValueError(
            "num_microbatches", f"num_stages = {p} and num_microbatches = {m} make 3·p²·m = {3 * p * p * m:,} "
                                f"greedy scheduler steps: more than this scheduler handles ({MAX_GREEDY_STEPS:,}).",
            f"num_stages = {p}、num_microbatches = {m} 需要 3·p²·m = {3 * p * p * m:,} 步贪心调度，"
            f"超过了本调度器的上限（{MAX_GREEDY_STEPS:,}）。")
    limit = 2 * p - 1 if memory_limit is None else check_int("memory_limit", memory_limit, minimum=1)
    dur = {"F": fwd_time, "I": input_time, "W": wgrad_time}
    f_end, i_end = {}, {}
    nf, ni = [0] * p, [0] * p
    owed = [[] for _ in range(p)]
    free = [0.0] * p
    held = [0] * p
    orders: list[list[Op]] = [[] for _ in range(p)]
    for _ in range(3 * p * m):
        best = None
        for s in range(p):
            cands = []   # (start time, priority, kind, micro-batch)
            j = ni[s]
            if j < m:
                ready = f_end.get((s, j)) if s == p - 1 else i_end.get((s + 1, j))
                if ready is not None:
                    cands.append((max(free[s], ready), 0, "I", j))
            j = nf[s]
            if j < m and held[s] < limit:
                ready = 0.0 if s == 0 else f_end.get((s - 1, j))
                if ready is not None:
                    cands.append((max(free[s], ready), 1, "F", j))
            if owed[s]:
                cands.append((free[s], 2, "W", owed[s][0]))
            if not cands:
                continue
            now = [c for c in cands if c[0] <= free[s]]
            pick = min(now, key=lambda c: c[1]) if now else min(cands)
            if best is None or (pick[0], s) < (best[1][0], best[0]):
                best = (s, pick)
        s, (start, _, kind, j) = best
        end = start + dur[kind]
        free[s] = end
        if kind == "F":
            f_end[(s, j)] = end
            nf[s] += 1
            held[s] += 1
        elif kind == "I":
            i_end[(s, j)] = end
            ni[s] += 1
            owed[s].append(j)
        else:
            owed[s].pop(0)
            held[s] -= 1
        orders[s].append(Op(kind, 0, j))
    return orders


# ---------------------------------------------------------------------------------------------- simulation
def check_costs(fwd_time, bwd_time, wgrad_time, overlap_time, p):
    """Per-rank arrays (t_f, t_b, t_W, t_F&B): t_W defaults to t_b / 2 and must be below t_b; t_F&B defaults to
    t_f + t_b. Raises DistlearnValueError."""
    f = per_stage_costs("fwd_time", fwd_time, p)
    b = per_stage_costs("bwd_time", bwd_time, p)
    w = b / 2 if wgrad_time is None else per_stage_costs("wgrad_time", wgrad_time, p)
    if np.any(w >= b):
        raise DistlearnValueError(
            "wgrad_time", "wgrad_time is the weight-gradient part of the backward: it must be smaller than bwd_time "
                          f"(got {w.tolist()} vs {b.tolist()}).",
            f"wgrad_time 是反向中计算权重梯度的部分：必须小于 bwd_time（收到 {w.tolist()} 与 {b.tolist()}）。")
    fb = f + b if overlap_time is None else per_stage_costs("overlap_time", overlap_time, p)
    return f, b, w, fb


def simulate(schedule: str, num_stages: int, num_microbatches: int, *, fwd_time=1.0, bwd_time=2.0,
             wgrad_time=None, overlap_time=None, num_chunks: int = 1, p2p_time: float = 0.0,
             w_memory: float = 1.0):
    """Event simulation of one step of a split-backward schedule; returns a
    :class:`~distlearn.pipeline_parallel.timeline.PipelineResult`.

    Each rank runs :func:`rank_ops` in order; an operation starts when the rank is free and its inputs have
    arrived: F of stage k needs F of stage k − 1 (nothing on a first stage); I or B of stage k needs I (or B) of
    stage k + 1, and on a last stage its own F; W needs its own I. F&B needs both inputs and ends both at once.
    An input from another rank arrives ``p2p_time`` after it was computed. Durations: ``t / d`` with
    d = :func:`time_divisor` (the F&B block: ``overlap_time / d``).

    Memory (``peak_inflight``, in micro-batches of this rank's activations): F adds ``1/d``; B frees it; I frees
    ``(1 − w_memory)/d`` and W the remaining ``w_memory/d`` — ``w_memory`` is the share of a micro-batch's
    activations still alive between its I and its W. torch keeps the whole graph until W (``stage_backward_input``
    calls ``autograd.grad(…, retain_graph=True)``), hence the default 1.0.

    ``span_idle`` (per rank): idle time between the rank's first and last operation — the bubble of the closed
    forms. Raises DistlearnValueError for bad arguments, RuntimeError if the order deadlocks.
    """
    schedule, p, m, v = _check(schedule, num_stages, num_microbatches, num_chunks)
    f, b, w, fb = check_costs(fwd_time, bwd_time, wgrad_time, overlap_time, p)
    comm = check_number("p2p_time", p2p_time, minimum=0)
    keep = check_number("w_memory", w_memory, minimum=0, maximum=1)
    d = time_divisor(schedule, v)
    if 3 * p * m * chunks_per_rank(schedule, v) > MAX_OPS:
        raise DistlearnValueError(
            "num_microbatches", f"about {3 * p * m * chunks_per_rank(schedule, v):,} operations: more than this "
                                f"simulator handles ({MAX_OPS:,}).",
            f"约 {3 * p * m * chunks_per_rank(schedule, v):,} 个操作，超过了本模拟器的上限（{MAX_OPS:,}）。")
    orders = _orders(schedule, p, m, v, costs=(f, b - w, w))
    first, last, _ = _pipelines(schedule, p, v)
    rank_of = _rank_of(schedule, p, v)
    dur = {"F": f / d, "B": b / d, "I": (b - w) / d, "W": w / d, "F&B": fb / d}
    ev = _run(schedule, orders, p, first, last, rank_of, dur, comm)
    kinds, chunks, mbs, bmbs, starts, ends, ranks = (np.array(x) for x in zip(*ev))
    total = float(ends.max())
    busy = np.bincount(ranks, weights=ends - starts, minlength=p)
    span = np.array([ends[ranks == r].max() - starts[ranks == r].min() for r in range(p)])
    peak_chunks, peak = _peaks(orders, keep, d)
    ideal = float(busy.max())
    return PipelineResult(
        schedule=schedule, num_stages=p, num_microbatches=m, num_chunks=chunks_per_rank(schedule, v),
        total_time=total, busy=busy, bubble_fraction=max(0.0, 1.0 - float(busy.sum()) / (p * total)),
        ideal_time=ideal, bubble_ratio=max(0.0, (total - ideal) / ideal), peak_inflight=peak,
        peak_inflight_chunks=peak_chunks, ev_stage=ranks, ev_kind=kinds, ev_microbatch=mbs, ev_chunk=chunks,
        ev_start=starts, ev_end=ends, span_idle=np.maximum(span - busy, 0.0), ev_bwd_microbatch=bmbs,
        param_copies=2.0 if schedule == "dualpipe" else 1.0)


def _run(schedule, orders, p, first, last, rank_of, dur, comm, step_of=None):
    """Run the orders; returns events (kind code, chunk, micro-batch, backward micro-batch, start, end, rank).

    ``step_of`` (optional, one list per rank, parallel to ``orders``): the training step of each operation. An
    operation of step k > 0 then starts only once every operation of step k − 1, on every rank, has ended — a
    synchronous optimizer step between them (taking no time)."""
    done: dict = {}   # ("F" | "I", stage, micro-batch) -> end time; a B ends both its I and W
    ptr, free = [0] * p, [0.0] * p
    events = []
    remaining = sum(len(o) for o in orders)
    if step_of is not None:
        steps = 1 + max(max(x) for x in step_of)
        left = [sum(x.count(k) for x in step_of) for k in range(steps)]   # operations of each step not yet run
        step_end = [0.0] * steps

    def need(kind, stage, j):
        if kind == "F":
            return None if stage in first else ("F", stage - 1, j)
        if kind in ("I", "B"):
            return ("F", stage, j) if stage in last else ("I", stage + 1, j)
        return ("I", stage, j)            # W after its own I

    while remaining:
        progressed = False
        for r in range(p):
            order = orders[r]
            while ptr[r] < len(order):
                op = order[ptr[r]]
                if op.kind == "F&B":
                    parts = [("F", _virtual_stage(schedule, r, op.chunk, p), op.microbatch),
                             ("B", _virtual_stage(schedule, r, op.bwd_chunk, p), op.bwd_microbatch)]
                else:
                    parts = [(op.kind, _virtual_stage(schedule, r, op.chunk, p), op.microbatch)]
                needs = [need(*x) for x in parts]
                if any(n is not None and n not in done for n in needs):
                    break
                k = step_of[r][ptr[r]] if step_of is not None else 0
                if k and left[k - 1]:
                    break                 # the optimizer step waits for every rank / 优化器更新要等所有 rank
                start = max(free[r], step_end[k - 1]) if k else free[r]
                for n in needs:
                    if n is not None:
                        start = max(start, done[n] + (comm if rank_of[n[1]] != r else 0.0))
                end = start + float(dur[op.kind][r])
                free[r] = end
                for kind, stage, j in parts:
                    done[("I" if kind == "B" else kind, stage, j)] = end
                events.append((_CODE[op.kind], op.chunk, op.microbatch, op.bwd_microbatch, start, end, r))
                if step_of is not None:
                    left[k] -= 1
                    step_end[k] = max(step_end[k], end)
                ptr[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked / 流水线调度死锁")
    return events


def simulate_steps(schedule: str, num_stages: int, num_microbatches: int, num_steps: int = 4, *,
                   optimizer_sync: bool = True, fwd_time=1.0, bwd_time=2.0, wgrad_time=None, overlap_time=None,
                   num_chunks: int = 1, p2p_time: float = 0.0) -> dict:
    """Event simulation of ``num_steps`` training steps in a row, each one :func:`simulate`'s step (same orders,
    the micro-batches renumbered per step), with the optimizer step between them taking no time.

    - ``optimizer_sync=True``: the optimizer step is synchronous across the pipeline — a global gradient norm for
      clipping, a NaN/INF check — so no rank starts step k before **every** rank has finished step k − 1.
    - ``optimizer_sync=False``: each rank updates its own stage as soon as its own last W is done and goes on; the
      global checks are validated afterwards and rolled back in the rare step that needs it (Qi et al. 2023, §4,
      "optimizer post-validation"). A rank's next step then waits only for its own previous operations and for
      its inputs.

    Returns ``{"step_ends"``: the time each step's last operation ends, ``"total_time"``, ``"first_step"`` (the
    first step's end), ``"steady_step"`` (the time per step once running: ``(T_n − T_1)/(n − 1)``, or the first
    step's when ``num_steps`` is 1), ``"result"`` (the :class:`PipelineResult` of the whole run)}.
    """
    schedule, p, m, v = _check(schedule, num_stages, num_microbatches, num_chunks)
    n = check_int("num_steps", num_steps, minimum=1, maximum=64)
    optimizer_sync = check_bool("optimizer_sync", optimizer_sync)
    if 3 * p * m * n * chunks_per_rank(schedule, v) > MAX_OPS:
        raise DistlearnValueError(
            "num_steps", f"about {3 * p * m * n * chunks_per_rank(schedule, v):,} operations: more than this "
                         f"simulator handles ({MAX_OPS:,}).",
            f"约 {3 * p * m * n * chunks_per_rank(schedule, v):,} 个操作，超过了本模拟器的上限（{MAX_OPS:,}）。")
    f, b, w, fb = check_costs(fwd_time, bwd_time, wgrad_time, overlap_time, p)
    comm = check_number("p2p_time", p2p_time, minimum=0)
    d = time_divisor(schedule, v)
    one = _orders(schedule, p, m, v, costs=(f, b - w, w))
    orders = [[op._replace(microbatch=op.microbatch + k * m,
                           bwd_microbatch=op.bwd_microbatch + k * m if op.bwd_microbatch >= 0 else -1)
               for k in range(n) for op in order] for order in one]
    step_of = [[k for k in range(n) for _ in order] for order in one]
    first, last, _ = _pipelines(schedule, p, v)
    dur = {"F": f / d, "B": b / d, "I": (b - w) / d, "W": w / d, "F&B": fb / d}
    ev = _run(schedule, orders, p, first, last, _rank_of(schedule, p, v), dur, comm,
              step_of=step_of if optimizer_sync else None)
    kinds, chunks, mbs, bmbs, starts, ends, ranks = (np.array(x) for x in zip(*ev))
    step = mbs // m
    ends_by_step = [float(ends[step == k].max()) for k in range(n)]
    busy = np.bincount(ranks, weights=ends - starts, minlength=p)
    total = float(ends.max())
    span = np.array([ends[ranks == r].max() - starts[ranks == r].min() for r in range(p)])
    peak_chunks, peak = _peaks(orders, 1.0, d)
    result = PipelineResult(
        schedule=schedule, num_stages=p, num_microbatches=m * n, num_chunks=chunks_per_rank(schedule, v),
        total_time=total, busy=busy, bubble_fraction=max(0.0, 1.0 - float(busy.sum()) / (p * total)),
        ideal_time=float(busy.max()), bubble_ratio=max(0.0, (total - float(busy.max())) / float(busy.max())),
        peak_inflight=peak, peak_inflight_chunks=peak_chunks, ev_stage=ranks, ev_kind=kinds, ev_microbatch=mbs,
        ev_chunk=chunks, ev_start=starts, ev_end=ends, span_idle=np.maximum(span - busy, 0.0),
        ev_bwd_microbatch=bmbs, param_copies=2.0 if schedule == "dualpipe" else 1.0)
    steady = (ends_by_step[-1] - ends_by_step[0]) / (n - 1) if n > 1 else ends_by_step[0]
    return {"step_ends": ends_by_step, "total_time": total, "first_step": ends_by_step[0], "steady_step": steady,
            "result": result}


def _peaks(orders, keep: float, d: int):
    """Per rank: the most (chunk, micro-batch) pairs held at once (forward done, backward not finished: W for a
    split backward) and the peak activations in micro-batches (``w_memory`` = ``keep`` of a chunk alive between
    its I and W)."""
    counts, units = [], []
    for order in orders:
        held = pk = 0
        mem = pk_mem = 0.0
        for op in order:
            if op.kind in ("F", "F&B"):
                held += 1
                mem += 1.0 / d
                pk, pk_mem = max(pk, held), max(pk_mem, mem)
            if op.kind in ("B", "F&B", "W"):
                held -= 1
            if op.kind in ("B", "F&B"):
                mem -= 1.0 / d
            elif op.kind == "I":
                mem -= (1.0 - keep) / d
            elif op.kind == "W":
                mem -= keep / d
        counts.append(pk)
        units.append(round(pk_mem, 12))
    return np.array(counts), np.array(units)


# ---------------------------------------------------------------------------------------------- closed forms
def closed_form(schedule: str, num_stages: int, num_microbatches: int, *, fwd_time: float = 1.0,
                bwd_time: float = 2.0, wgrad_time: float | None = None, overlap_time: float | None = None) -> dict:
    """Published closed forms, uniform costs, no p2p time: ``bubble_time`` (the worst rank's idle time between
    its first and last operation), ``exact`` (whether the simulation reproduces it exactly for these costs — the
    conditions the tests establish), ``peak_inflight`` (micro-batches of activations on the worst rank, W
    deferred with its activations kept), ``param_copies``, ``source`` (the citation; ``source_zh``: the same in
    Chinese).

    - ``"1f1b"``: (p − 1)(t_f + t_b); peak p. Narayanan et al. 2021 §2.2; Qi et al. 2023 Table 2.
    - ``"zb-h1"``: (p − 1)(t_f + t_I − t_W); peak p; exact when t_W ≤ t_f, t_W ≤ t_I and m ≥ p. Qi et al. 2023
      Table 2 (their T_B is our t_I); DeepSeek-V3 Table 2 writes it (PP − 1)(F + B − 2W) with B the full backward.
    - ``"zb-h2"``: (p − 1)(t_f + t_I − 2t_W); peak 2p − 1; exact at t_f = t_I = t_W (zero). Qi et al. 2023.
    - ``"zbv"``: 0 at t_f = t_I = t_W (torch ``ScheduleZBVZeroBubble`` docstring; sail-sg README); peak p.
    - ``"dualpipe"``: (p/2 − 1)(t_F&B + t_b − 3t_W) with chunk times (each rank's chunk is a whole stage); peak
      p + 1 chunks; parameters 2×. DeepSeek-V3 Table 2; exact at t_f = t_I = t_W with t_F&B = t_f + t_b.
    Raises DistlearnValueError for another schedule or bad numbers.
    """
    schedule = check_choice("schedule", schedule, ("1f1b", "zb-h1", "zb-h2", "zbv", "dualpipe"))
    p = check_int("num_stages", num_stages, minimum=1)
    m = check_int("num_microbatches", num_microbatches, minimum=1)
    f, b, w, fb = (float(x[0]) for x in check_costs(fwd_time, bwd_time, wgrad_time, overlap_time, 1))
    i = b - w
    equal = np.isclose(f, i) and np.isclose(i, w)
    if schedule == "1f1b":
        return {"bubble_time": (p - 1) * (f + b), "exact": m >= p, "peak_inflight": float(min(p, m)),
                "param_copies": 1.0, "source": "Narayanan et al. 2021 §2.2; Qi et al. 2023 Table 2",
                "source_zh": "Narayanan 等 2021，§2.2；Qi 等 2023，表 2"}
    if schedule == "zb-h1":
        return {"bubble_time": (p - 1) * (f + i - w), "exact": bool(w <= f and w <= i and m >= p),
                "peak_inflight": float(min(p, m)), "param_copies": 1.0, "source": "Qi et al. 2023, Table 2",
                "source_zh": "Qi 等 2023，表 2"}
    if schedule == "zb-h2":
        return {"bubble_time": max(0.0, (p - 1) * (f + i - 2 * w)), "exact": bool(equal and m >= 2 * p - 1),
                "peak_inflight": float(min(2 * p - 1, m)), "param_copies": 1.0, "source": "Qi et al. 2023, Table 2",
                "source_zh": "Qi 等 2023，表 2"}
    if schedule == "zbv":
        return {"bubble_time": 0.0 if equal else float("nan"), "exact": bool(equal and m >= 2 * p),
                "peak_inflight": float(p), "param_copies": 1.0,
                "source": "torch ScheduleZBVZeroBubble docstring; sail-sg/zero-bubble-pipeline-parallelism README",
                "source_zh": "torch ScheduleZBVZeroBubble 的文档字符串；"
                             "sail-sg/zero-bubble-pipeline-parallelism 的 README"}
    return {"bubble_time": (p / 2 - 1) * (fb + b - 3 * w), "exact": bool(equal and np.isclose(fb, f + b)),
            "peak_inflight": float(p + 1), "param_copies": 2.0, "source": "DeepSeek-V3 Technical Report, Table 2",
            "source_zh": "DeepSeek-V3 技术报告，表 2"}


def step_time_closed_form(schedule: str, num_stages: int, num_microbatches: int, *, optimizer_sync: bool,
                          fwd_time: float = 1.0, bwd_time: float = 2.0, wgrad_time: float | None = None) -> dict:
    """Time per training step, once training runs step after step, for ZB-H1 and ZB-H2 (uniform costs, no p2p
    time): ``{"step_time", "exact"`` (whether :func:`simulate_steps` reproduces it exactly: the condition of
    :func:`closed_form`), ``"source"``, ``"source_zh"}``.

    Each rank computes for m(t_f + t_b) per step, and the bubble of :func:`closed_form` (Qi et al. 2023,
    Table 2) is its idle time between its first and last operation. Its steps then follow each other with no gap
    when the optimizer step needs nothing from the other ranks (Qi et al. §4, post-validation):

    - ZB-H1: m(t_f + t_b) + (p − 1)(t_f + t_I − t_W), with or without a synchronous optimizer step: rank 0 starts
      the step first and finishes with the last rank, so its span already is the whole step;
    - ZB-H2 without synchronisation: m(t_f + t_b) + (p − 1)(t_f + t_I − 2t_W), m(t_f + t_b) at equal costs;
    - ZB-H2 with a synchronous optimizer step: the same plus (p − 1)·t_f, the start-up stagger (the last stage's
      first input arrives after p − 1 forwards) that the parallelogram's slanted edges add to the step.
    """
    schedule = check_choice("schedule", schedule, ("zb-h1", "zb-h2"))
    optimizer_sync = check_bool("optimizer_sync", optimizer_sync)
    c = closed_form(schedule, num_stages, num_microbatches, fwd_time=fwd_time, bwd_time=bwd_time,
                    wgrad_time=wgrad_time)
    p, m = int(num_stages), int(num_microbatches)
    f, b, _, _ = (float(x[0]) for x in check_costs(fwd_time, bwd_time, wgrad_time, None, 1))
    t = m * (f + b) + c["bubble_time"]
    if schedule == "zb-h2" and optimizer_sync:
        t += (p - 1) * f
    return {"step_time": t, "exact": c["exact"],
            "source": "Qi et al. 2023, Table 2 (bubble) and §4 (optimizer post-validation)",
            "source_zh": "Qi 等 2023，表 2（气泡）和 §4（优化器事后验证）"}
