"""Pipeline parallelism: layer partitioning, micro-batching, and an event simulation of pipeline schedules.

Three schedules, all with a flush at the end of every step (synchronous weight updates):

- ``"gpipe"`` (Huang et al. 2019): every stage runs the forward of all ``m`` micro-batches, then all backwards.
- ``"1f1b"`` (PipeDream-Flush, Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters", §2.2.1): stage ``s`` of ``p`` runs ``min(p − s − 1, m)`` warm-up forwards, then alternates one
  forward and one backward (steady phase), then drains the remaining backwards (cool-down).
- ``"interleaved-1f1b"`` (same paper, §2.2.2; Megatron-LM's ``forward_backward_pipelining_with_interleaving``):
  each stage holds ``v = num_chunks`` model chunks (stage ``s`` holds virtual stages ``s, s + p, …``); forwards go
  through the chunks in groups of ``p`` micro-batches; warm-up is ``2(p − s − 1) + (v − 1)p`` chunk-forwards.

Closed forms the simulation reproduces (uniform costs ``t_f``, ``t_b`` per micro-batch per stage, no p2p time):

- GPipe and 1F1B: total time ``(m + p − 1)(t_f + t_b)``; bubble fraction ``(p − 1)/(m + p − 1)``; the two are
  equal — 1F1B saves activation memory (peak ``min(p − s, m)`` micro-batches on stage ``s`` instead of ``m``), not
  time.
- Interleaved, ``m`` a multiple of ``p``: bubble time ``(p − 1)(t_f + t_b)/v`` (Narayanan et al. 2021, eq. in
  §2.2.2), i.e. the Megatron ratio ``t_bubble / t_ideal = (p − 1)/(v m)``.

Times are in arbitrary units (say ms); ``fwd_time`` is the forward of one micro-batch through all of a stage's
layers (with ``v`` chunks each chunk takes ``fwd_time / v``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from distlearn.core.validate import (DistlearnValueError, array, check_choice, check_divisible, check_int, check_number,
                                     check_positive, checks, each, whole)
from distlearn.pipeline_parallel import zero_bubble
from distlearn.pipeline_parallel.timeline import Event, PipelineResult, check_stage_args, per_stage_costs
from distlearn.pipeline_parallel.zero_bubble import ZERO_BUBBLE_SCHEDULES

__all__ = [
    "SCHEDULES", "partition_layers", "partition_by_cost", "stage_costs", "microbatch_sizes", "split_microbatches",
    "stage_order", "interleaved_group_size", "simulate", "closed_form", "microbatch_tradeoff",
    "reference_1f1b_order", "reference_1f1b",
    "microbatch_loss", "NORMALISATIONS", "peak_inflight_weighted",
]
__all__ += ["ALL_SCHEDULES"]

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
# with the schedules that split the backward into input- and weight-gradient passes (zero_bubble), all simulate runs
ALL_SCHEDULES = SCHEDULES + ZERO_BUBBLE_SCHEDULES
MAX_OPS = 20_000_000  # about 1 GB of working arrays


# ---------------------------------------------------------------------------------------------- partitioning
def partition_layers(num_layers: int, num_stages: int) -> list[int]:
    """Layers per stage when all layers cost the same: every layer placed once, sizes differ by at most one.

    The first ``num_layers % num_stages`` stages get one extra layer: 10 layers on 3 stages → ``[4, 3, 3]``.
    Returns a list of ``num_stages`` ints summing to ``num_layers``.

    Raises DistlearnValueError if ``num_layers < num_stages`` (a stage would be empty) or either is not an int ≥ 1.
    (The seed's ``num_layers // num_stages`` silently dropped the ``num_layers % num_stages`` remaining layers.)
    """
    num_stages = check_int("num_stages", num_stages, minimum=1)
    if isinstance(num_layers, int) and not isinstance(num_layers, bool) and 1 <= num_layers < num_stages:
        raise DistlearnValueError(
            "num_layers", f"num_layers must be ≥ num_stages = {num_stages}: every pipeline stage needs at least one "
                          f"layer; got {num_layers}. Use fewer stages.",
            f"num_layers 必须 ≥ num_stages = {num_stages}：每个流水线阶段至少需要一层；收到 {num_layers}。请减少阶段数。")
    num_layers = check_int("num_layers", num_layers, minimum=num_stages)
    base, extra = divmod(num_layers, num_stages)
    return [base + (1 if s < extra else 0) for s in range(num_stages)]


@checks(layer_costs=array("layers", min_size=0))
def partition_by_cost(layer_costs: Sequence[float], num_stages: int) -> list[int]:
    """Contiguous partition of layers with different costs that minimizes the most expensive stage.

    ``layer_costs``: cost of each layer in order (e.g. time or FLOPs; an embedding or LM head may cost several
    transformer layers). Returns layers per stage (each ≥ 1, summing to ``len(layer_costs)``). The pipeline's
    steady-state speed is set by its slowest stage, so the objective is ``max_s Σ cost(stage s)``; ties between
    optimal partitions are broken deterministically (the last stage as long as possible). Exact dynamic
    programme, O(num_stages · n²).

    Raises DistlearnValueError if there are fewer layers than stages or a cost is negative or not finite.
    """
    num_stages = check_int("num_stages", num_stages, minimum=1)
    costs = [check_number(f"layer_costs[{i}]", c, minimum=0) for i, c in enumerate(layer_costs)]
    n = len(costs)
    if n < num_stages:
        raise DistlearnValueError(
            "layer_costs", f"need at least num_stages = {num_stages} layers, got {n}: a stage would be empty.",
            f"层数至少要等于 num_stages = {num_stages}，收到 {n}：否则会有空的阶段。")
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    inf = float("inf")
    # best[k][i]: minimal bottleneck placing the first i layers on k stages; cut[k][i]: start of the k-th stage
    best = [[inf] * (n + 1) for _ in range(num_stages + 1)]
    cut = [[0] * (n + 1) for _ in range(num_stages + 1)]
    best[0][0] = 0.0
    for k in range(1, num_stages + 1):
        for i in range(k, n - (num_stages - k) + 1):
            for j in range(k - 1, i):  # last stage holds layers j..i-1
                val = max(best[k - 1][j], prefix[i] - prefix[j])
                if val < best[k][i] - 1e-12 * max(1.0, abs(val)):
                    best[k][i], cut[k][i] = val, j
    sizes, i = [], n
    for k in range(num_stages, 0, -1):
        j = cut[k][i]
        sizes.append(i - j)
        i = j
    return sizes[::-1]


@checks(layer_costs=array("layers", min_size=0), sizes=each(whole(minimum=0), min_len=0))
def stage_costs(layer_costs: Sequence[float], sizes: Sequence[int]) -> list[float]:
    """Sum of layer costs on each stage for a partition ``sizes`` (layers per stage, in order): a list of
    ``len(sizes)`` floats, in the unit of ``layer_costs`` (a list of finite numbers). Raises DistlearnValueError
    when ``sizes`` is not a list of whole numbers ≥ 0 summing to the number of layers."""
    if sum(sizes) != len(layer_costs):
        raise DistlearnValueError("sizes", f"sizes sum to {sum(sizes)}, but there are {len(layer_costs)} layers.",
                                  f"sizes 之和为 {sum(sizes)}，但共有 {len(layer_costs)} 层。")
    out, start = [], 0
    for n in sizes:
        out.append(float(sum(layer_costs[start:start + n])))
        start += n
    return out


# ---------------------------------------------------------------------------------------------- micro-batching
def microbatch_sizes(batch_size: int, num_microbatches: int) -> list[int]:
    """Sizes of ``num_microbatches`` micro-batches covering ``batch_size`` samples, differing by at most one.

    Exactly ``num_microbatches`` sizes, each ≥ 1, summing to ``batch_size``: 10 samples in 4 → ``[3, 3, 2, 2]``:
    the sizes of ``torch.tensor_split``, which ``torch.distributed.pipelining`` uses to split a batch
    (``microbatch.py``, ``_split_tensor``). (``torch.chunk`` is different: it makes chunks of ``ceil(batch/m)``
    and may return *fewer* than ``m`` chunks, e.g. 6 samples in 4 chunks → 3 chunks of 2.)

    Raises DistlearnValueError if ``num_microbatches > batch_size`` (an empty micro-batch).
    """
    num_microbatches = check_int("num_microbatches", num_microbatches, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=num_microbatches)
    base, extra = divmod(batch_size, num_microbatches)
    return [base + (1 if i < extra else 0) for i in range(num_microbatches)]


@checks(batch=array("... _", min_size=0, finite=False))
def split_microbatches(batch, num_microbatches: int) -> list:
    """Split a tensor or array along dim 0 into exactly ``num_microbatches`` pieces of :func:`microbatch_sizes`.

    Returns a list of views (torch tensors or numpy arrays, as given). Raises DistlearnValueError if ``batch`` is
    not an array or tensor with at least one axis, or there are fewer samples than micro-batches.
    """
    sizes = microbatch_sizes(len(batch), num_microbatches)
    out, start = [], 0
    for n in sizes:
        out.append(batch[start:start + n])
        start += n
    return out


NORMALISATIONS = ("mean", "global")


@checks(per_sample_losses=array(min_size=0), weights=array(min_size=0))
def microbatch_loss(per_sample_losses, num_microbatches: int, *, weights=None, normalisation: str = "mean") -> float:
    """The loss one pipeline step optimises when a batch is split into ``num_microbatches`` micro-batches of
    :func:`microbatch_sizes` (what ``torch.tensor_split`` gives, as ``torch.distributed.pipelining`` splits).

    ``per_sample_losses``: one loss per sample (length B); ``weights``: 1 for a sample that counts, 0 for one
    that does not (padding, ``ignore_index``); default all 1.

    - ``"mean"``: each micro-batch's mean over its counted samples, then the mean over the m micro-batches —
      what a mean-reduction ``loss_fn`` with ``scale_grads=True`` (torch's default: gradients divided by m)
      gives. It is the **mean of means**: biased when micro-batches differ in size or in counted samples.
    - ``"global"``: Σ wᵢ·lᵢ / Σ wᵢ over the whole batch, which the pipeline gets exactly with a ``loss_fn`` that
      sums and divides by the batch's count and ``scale_grads=False``.

    Raises DistlearnValueError for losses or weights that are not arrays of finite numbers, mismatched lengths, an
    unknown normalisation, or a micro-batch with no counted
    sample under ``"mean"`` (its mean is 0/0).
    """
    losses = np.asarray(per_sample_losses, dtype=float).ravel()
    w = np.ones_like(losses) if weights is None else np.asarray(weights, dtype=float).ravel()
    if len(w) != len(losses):
        raise DistlearnValueError("weights", f"weights needs one value per sample ({len(losses)}), got {len(w)}.",
                                  f"weights 需要每个样本一个值（共 {len(losses)} 个），收到 {len(w)} 个。")
    if normalisation not in NORMALISATIONS:
        raise DistlearnValueError("normalisation", f"normalisation must be one of {NORMALISATIONS}.",
                                  f"normalisation 必须是 {NORMALISATIONS} 之一。")
    sizes = microbatch_sizes(len(losses), num_microbatches)
    if normalisation == "global":
        return float((w * losses).sum() / w.sum())
    means, start = [], 0
    for n in sizes:
        ws = w[start:start + n]
        if ws.sum() == 0:
            raise DistlearnValueError("weights", "a micro-batch has no counted sample: its mean is 0/0.",
                                      "某个微批次没有计入的样本：它的均值是 0/0。")
        means.append(float((ws * losses[start:start + n]).sum() / ws.sum()))
        start += n
    return float(np.mean(means))


# ---------------------------------------------------------------------------------------------- schedules
def interleaved_group_size(num_stages: int, num_microbatches: int) -> int:
    """Micro-batches per round of the interleaved schedule, as ``torch.distributed.pipelining`` computes it.

    ``rounds = max(1, m // p)``, group ``g = m // rounds`` (``g = p`` when ``m`` is a multiple of ``p``; ``g = m``
    when ``m < p``). Raises DistlearnValueError when ``m`` is not a multiple of ``rounds`` (torch's
    ``ScheduleInterleaved1F1B`` refuses it too; with uneven groups the order can deadlock).
    """
    p, m = check_int("num_stages", num_stages), check_int("num_microbatches", num_microbatches)
    rounds = max(1, m // p)
    if m % rounds:
        raise DistlearnValueError(
            "num_microbatches",
            f"interleaved-1f1b needs num_microbatches = {m} to be a multiple of max(1, m // num_stages) = {rounds} "
            f"(e.g. m < p, or m a multiple of p = {p}).",
            f"interleaved-1f1b 要求 num_microbatches = {m} 是 max(1, m // num_stages) = {rounds} 的倍数"
            f"（例如 m < p，或 m 是 p = {p} 的倍数）。")
    return m // rounds


def _sequence(schedule: str, m: int, p: int, v: int, backward: bool) -> tuple[np.ndarray, np.ndarray]:
    """(chunks, microbatches) of the forwards (or backwards) in the order every stage runs them.

    GPipe and 1F1B: micro-batches 0, 1, …, m − 1. Interleaved (Megatron's and torch's order): rounds of ``g``
    micro-batches (:func:`interleaved_group_size`); within a round all of them go through chunk 0, then chunk 1,
    … (backwards: chunk v − 1 first).
    """
    if schedule != "interleaved-1f1b":
        return np.zeros(m, dtype=np.int64), np.arange(m, dtype=np.int64)
    g = interleaved_group_size(p, m)
    k = np.arange(m * v, dtype=np.int64)
    round_, within = np.divmod(k, g * v)  # each round: g micro-batches through chunk 0, then chunk 1, …
    chunk = within // g
    return (v - 1 - chunk if backward else chunk), round_ * g + within % g


def _warmup(schedule: str, stage, p: int, m: int, v: int):
    """Warm-up forwards on ``stage`` (an int or an array of stages)."""
    if schedule == "gpipe":
        return np.full_like(np.asarray(stage), m)  # all forwards first
    if schedule == "1f1b":
        return np.minimum(p - np.asarray(stage) - 1, m)
    g = interleaved_group_size(p, m)
    return np.minimum(2 * (p - np.asarray(stage) - 1) + (v - 1) * g, m * v)


def _orders(schedule: str, p: int, m: int, v: int, stages=None):
    """Arrays ``kind`` (0 F, 1 B), ``microbatch``, ``chunk`` of shape (len(stages), 2·m·v): each stage's ops in order.

    With ``N = m·v`` forwards and ``w`` warm-up forwards, forward ``q`` sits at position ``q`` (``q < w``) or
    ``2q − w``; backward ``r`` at ``w + 2r + 1`` (steady phase, ``r < N − w``) or ``N + r`` (cool-down).
    """
    stages = np.arange(p) if stages is None else np.asarray(stages)
    if schedule == "interleaved-1f1b" and v == 1:
        schedule = "1f1b"  # one chunk per stage: interleaving is plain 1F1B
    fc, fm = _sequence(schedule, m, p, v, backward=False)
    bc, bm = _sequence(schedule, m, p, v, backward=True)
    N = m * v
    w = _warmup(schedule, stages, p, m, v)[:, None]
    q = np.arange(N)[None, :]
    pos_f = np.where(q < w, q, 2 * q - w)
    pos_b = np.where(q < N - w, w + 2 * q + 1, N + q)
    rows = np.arange(len(stages))[:, None]
    kind = np.empty((len(stages), 2 * N), dtype=np.int8)
    mb = np.empty((len(stages), 2 * N), dtype=np.int64)
    ch = np.empty((len(stages), 2 * N), dtype=np.int64)
    kind[rows, pos_f], mb[rows, pos_f], ch[rows, pos_f] = 0, fm[None, :], fc[None, :]
    kind[rows, pos_b], mb[rows, pos_b], ch[rows, pos_b] = 1, bm[None, :], bc[None, :]
    return kind, mb, ch


def stage_order(schedule: str, stage: int, num_stages: int, num_microbatches: int,
                num_chunks: int = 1) -> list[tuple[str, int, int]]:
    """The order in which stage ``stage`` runs its operations: a list of ``(kind, microbatch, chunk)``.

    ``kind`` is ``"F"`` or ``"B"``; ``chunk`` is 0 unless ``schedule == "interleaved-1f1b"``. For ``"1f1b"`` on
    stage ``s``: ``w = min(p − s − 1, m)`` warm-up forwards, then ``m − w`` pairs (F, B), then ``w`` backwards.
    GPipe: all forwards, then all backwards (micro-batch 0 first, as ``torch.distributed.pipelining`` does).
    Interleaved: ``w = min(2(p − s − 1) + (v − 1)g, m·v)`` warm-up chunk-forwards, in Megatron's order, with
    ``g`` micro-batches per round (``g = p`` when ``m`` is a multiple of ``p``; see :func:`interleaved_group_size`).
    Split-backward schedules (:data:`ZERO_BUBBLE_SCHEDULES`, :mod:`distlearn.pipeline_parallel.zero_bubble`) also have ``"I"``
    (input gradient) and ``"W"`` (weight gradient); an overlapped F&B block is listed as its forward followed by
    its full backward ``"B"``, the order in which torch runs it.
    Raises DistlearnValueError for an unknown schedule or out-of-range numbers.
    """
    if schedule in ZERO_BUBBLE_SCHEDULES:
        out = []
        for op in zero_bubble.rank_ops(schedule, stage, num_stages, num_microbatches, num_chunks):
            if op.kind == "F&B":
                out += [("F", op.microbatch, op.chunk), ("B", op.bwd_microbatch, op.bwd_chunk)]
            else:
                out.append((op.kind, op.microbatch, op.chunk))
        return out
    schedule, p, m, v = _check_args(schedule, num_stages, num_microbatches, num_chunks)
    s = check_int("stage", stage, minimum=0, maximum=p - 1)
    kind, mb, ch = _orders(schedule, p, m, v, [s])
    return [("FB"[k], int(j), int(c)) for k, j, c in zip(kind[0], mb[0], ch[0])]


@checks(chunk_weights=each(array("chunks")))
def peak_inflight_weighted(schedule: str, num_stages: int, num_microbatches: int,
                           chunk_weights: Sequence[Sequence[float]], stages: Sequence[int] | None = None
                           ) -> np.ndarray:
    """Per stage, the largest sum of ``chunk_weights`` alive at once when every chunk's forward keeps its weight
    until that chunk's backward frees it, in the order of :func:`stage_order` (Megatron's and torch's order).

    ``chunk_weights[s][c]`` is what one micro-batch's forward through chunk ``c`` of stage ``s`` keeps for
    backward, e.g. its number of layers (the result is then in layer-micro-batches) or its activation bytes; the
    number of chunks ``v`` is ``len(chunk_weights[s])`` (the same for every stage; ``v > 1`` only for
    ``"interleaved-1f1b"``). With equal weights ``w`` it is ``w · v · peak_inflight`` of :func:`simulate`; with
    unequal chunks (Llama 3 §3.3.2: the first chunk of the first stage holds only the embedding) it counts what
    the closed form cannot: which chunks the warm-up forwards went through. Returns an array of ``num_stages``
    floats (only for ``stages`` when given, in their order). Raises DistlearnValueError for bad arguments or rows
    of the wrong length.
    """
    p = check_int("num_stages", num_stages, minimum=1, maximum=4096)
    if len(chunk_weights) != p:
        raise DistlearnValueError("chunk_weights", f"chunk_weights needs one row per stage ({p}); got "
                                                   f"{len(chunk_weights)}.",
                                  f"chunk_weights 需要每个阶段一行（{p} 行）；收到 {len(chunk_weights)} 行。")
    v = len(chunk_weights[0])
    if any(len(row) != v for row in chunk_weights):
        raise DistlearnValueError("chunk_weights", "every stage needs the same number of chunks.",
                                  "每个阶段的分块数必须相同。")
    schedule, p, m, v = _check_args(schedule, p, num_microbatches, v)
    weights = np.array([[check_number("chunk_weights", float(w), minimum=0) for w in row] for row in chunk_weights])
    rows = np.arange(p) if stages is None else np.array([check_int("stages", x, minimum=0, maximum=p - 1)
                                                            for x in stages], dtype=np.int64)
    kind, _, ch = _orders(schedule, p, m, v, rows)
    w = np.take_along_axis(weights[rows], ch, axis=1)
    return np.cumsum(np.where(kind == 0, w, -w), axis=1).max(axis=1)


def _check_args(schedule, num_stages, num_microbatches, num_chunks):
    schedule = check_choice("schedule", schedule, SCHEDULES)
    p = check_int("num_stages", num_stages, minimum=1, maximum=4096)
    m = check_int("num_microbatches", num_microbatches, minimum=1, maximum=1 << 20)
    v = check_int("num_chunks", num_chunks, minimum=1, maximum=64)
    if v > 1 and schedule != "interleaved-1f1b":
        raise DistlearnValueError(
            "num_chunks", f"num_chunks = {v} > 1 needs schedule='interleaved-1f1b' (got {schedule!r}).",
            f"num_chunks = {v} > 1 需要 schedule='interleaved-1f1b'（收到 {schedule!r}）。")
    return schedule, p, m, v


# ---------------------------------------------------------------------------------------------- simulation
def simulate(schedule: str, num_stages: int, num_microbatches: int, *, fwd_time=1.0, bwd_time=2.0,
             num_chunks: int = 1, p2p_time: float = 0.0, **split) -> PipelineResult:
    """Event simulation of one training step of a pipeline schedule.

    Parameters
    - ``schedule``: ``"gpipe"``, ``"1f1b"`` or ``"interleaved-1f1b"``; or a split-backward schedule of
      :data:`ZERO_BUBBLE_SCHEDULES`, simulated by :func:`distlearn.pipeline_parallel.zero_bubble.simulate`, which also takes
      ``wgrad_time`` (the weight-gradient part of ``bwd_time``, default half), ``overlap_time`` (an F&B block,
      default ``fwd_time + bwd_time``) and ``w_memory`` (share of activations kept from I to W, default 1).
    - ``num_stages`` ``p`` ≥ 1, ``num_microbatches`` ``m`` ≥ 1 (``m < p`` is allowed: a mostly idle pipeline).
    - ``fwd_time``, ``bwd_time``: time of one micro-batch's forward / backward through one stage (all its chunks);
      a number, or a sequence of ``p`` numbers when stages differ. Backward is about twice the forward in a
      transformer (it computes gradients for activations and for weights), hence the default 2.0.
    - ``num_chunks`` ``v``: model chunks per stage, only for ``"interleaved-1f1b"``; a chunk's op takes ``1/v``.
    - ``p2p_time`` ≥ 0: latency of sending an activation (or its gradient) to the neighbouring stage; the sender
      does not wait for it (communication overlaps compute), the receiver cannot start before it arrives.

    Each stage runs its ops in the order of :func:`stage_order`; an op starts when the stage is free and its input
    has arrived: forward of virtual stage ``k`` needs the forward of ``k − 1``, backward of ``k`` needs the
    backward of ``k + 1`` (the last virtual stage's backward needs its own forward).

    Returns a :class:`~distlearn.pipeline_parallel.timeline.PipelineResult`. Raises DistlearnValueError for bad
    arguments; RuntimeError if the schedule deadlocks (never hangs).
    """
    if schedule in ZERO_BUBBLE_SCHEDULES:
        return zero_bubble.simulate(schedule, num_stages, num_microbatches, fwd_time=fwd_time, bwd_time=bwd_time,
                                    num_chunks=num_chunks, p2p_time=p2p_time, **split)
    if split:
        raise DistlearnValueError(
            "schedule", f"{', '.join(sorted(split))} only apply to split-backward schedules {ZERO_BUBBLE_SCHEDULES}; "
                        f"{schedule!r} runs each backward whole.",
            f"{', '.join(sorted(split))} 只用于拆分反向的调度 {ZERO_BUBBLE_SCHEDULES}；{schedule!r} 的反向是整体执行的。")
    schedule, p, m, v = _check_args(schedule, num_stages, num_microbatches, num_chunks)
    f = per_stage_costs("fwd_time", fwd_time, p)
    b = per_stage_costs("bwd_time", bwd_time, p)
    comm = check_number("p2p_time", p2p_time, minimum=0)
    n = 2 * m * v  # ops per stage
    V = p * v  # virtual stages
    if p * n > MAX_OPS:
        raise DistlearnValueError(
            "num_microbatches", f"2 · num_stages · num_microbatches · num_chunks = {p * n:,} operations is more than "
            f"this simulator handles ({MAX_OPS:,}).",
            f"2 · num_stages · num_microbatches · num_chunks = {p * n:,} 个操作，超过了本模拟器的上限（{MAX_OPS:,}）。")

    kind, mb, ch = _orders(schedule, p, m, v)  # ops of each stage in order, shape (p, n)
    stage_idx = np.arange(p)[:, None]
    vstage = ch * p + stage_idx
    is_b = kind.astype(bool)
    # where each op sits: padded flat index s·(n + 1) + k (slot n of each stage is a sentinel, see _run)
    op_key = (is_b * V + vstage) * m + mb
    pos = np.empty(2 * V * m, dtype=np.int64)
    pos[op_key] = stage_idx * (n + 1) + np.arange(n)
    # the op each one waits for: forward of virtual stage k waits for the forward of k − 1, backward of k for the
    # backward of k + 1; the first forward and the last virtual stage's backward (which follows its own forward on
    # the same stage, earlier in the order) wait for nothing (-1)
    dep_v = np.where(is_b, vstage + 1, vstage - 1)
    no_dep = np.where(is_b, dep_v == V, dep_v < 0)
    dep = pos[(is_b * V + np.clip(dep_v, 0, V - 1)) * m + mb]
    dep[no_dep] = -1
    delay = None
    if comm > 0:
        delay = np.where(no_dep | (dep // (n + 1) == stage_idx), 0.0, comm)
    dur = np.where(is_b, b[:, None] / v, f[:, None] / v)

    end = _run(dep, delay, dur, p, n)
    start = end - dur.ravel()
    total = float(end.max())
    busy = m * (f + b)
    bubble_fraction = max(0.0, 1.0 - float(busy.sum()) / (p * total))  # max: rounding when there is no bubble
    ideal = float(busy.max())
    delta = np.where(kind == 0, 1, -1)
    peak_chunks = np.cumsum(delta, axis=1).max(axis=1)
    span = end.reshape(p, n).max(axis=1) - start.reshape(p, n).min(axis=1)
    return PipelineResult(
        schedule=schedule, num_stages=p, num_microbatches=m, num_chunks=v, total_time=total, busy=busy,
        bubble_fraction=bubble_fraction, ideal_time=ideal, bubble_ratio=max(0.0, (total - ideal) / ideal),
        peak_inflight=peak_chunks / v, peak_inflight_chunks=peak_chunks,
        ev_stage=np.repeat(np.arange(p), n), ev_kind=kind.ravel(), ev_microbatch=mb.ravel(), ev_chunk=ch.ravel(),
        ev_start=start, ev_end=end, span_idle=np.maximum(span - busy, 0.0))


def _run(dep: np.ndarray, delay, dur: np.ndarray, p: int, n: int) -> np.ndarray:
    """End times of ``p`` stages each running ``n`` ops in order; arrays of shape (p, n); returns shape (p·n,).

    ``dep[s, k]`` is the padded index ``s'·(n + 1) + k'`` of the op that op (s, k) waits for, or −1. Op (s, k)
    starts at ``max(end of op (s, k − 1), end[dep] + delay)`` and ends ``dur`` later. Each round, every stage whose
    next op has its input runs it (vectorized over stages); a round in which no stage can run while ops remain is
    a deadlock, reported instead of looping forever.
    """
    size = p * (n + 1) + 2
    never, zero = size - 2, size - 1  # slots that never end / ended at time 0
    # a sentinel op after each stage's last op waits for `never`: a finished stage idles there
    dep_p = np.full((p, n + 1), never, dtype=np.int64)
    dep_p[:, :n] = np.where(dep < 0, zero, dep)
    dep_p = np.append(dep_p.ravel(), [never, zero])
    dur_p = np.zeros((p, n + 1))
    dur_p[:, :n] = dur
    dur_p = dur_p.ravel()
    if delay is not None:
        delay_p = np.zeros((p, n + 1))
        delay_p[:, :n] = delay
        delay_p = delay_p.ravel()
    end = np.full(size, np.inf)
    end[zero] = 0.0
    clock = np.zeros(p)
    ptr = np.arange(p) * (n + 1)
    done = ptr + n
    inf = np.inf
    last = ptr.copy()
    it = 0
    while True:
        t = end[dep_p[ptr]]
        if delay is not None:
            t += delay_p[ptr]
        np.maximum(t, clock, out=t)  # inf where the input has not arrived
        t += dur_p[ptr]
        end[ptr] = t
        ok = t < inf
        np.copyto(clock, t, where=ok)
        ptr += ok
        it += 1
        if it % 32 == 0 or it > n:
            if (ptr == done).all():
                break
            if (ptr == last).all():
                raise RuntimeError("pipeline schedule deadlocked / 流水线调度死锁")
            last = ptr.copy()
    return end[:-2].reshape(p, n + 1)[:, :n].ravel()


# ---------------------------------------------------------------------------------------------- readable reference
def reference_1f1b_order(stage: int, num_stages: int, num_microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B order of one stage written as its three loops: warm-up, steady, cool-down.

    The same structure as Megatron-LM's ``forward_backward_pipelining_without_interleaving`` and picotron's
    ``train_step_pipeline_1f1b``. Returns ``[("F", 0), ("F", 1), ("B", 0), …]``: kind and micro-batch. The fast
    :func:`stage_order` computes the same list with array arithmetic (a test checks that they agree).
    """
    stage, p, m = check_stage_args(stage, num_stages, num_microbatches)  # or a clear error / 否则给出清楚的错误
    warmup = min(p - stage - 1, m)    # forwards before the first backward comes back / 第一个反向传回前的前向数
    steady = m - warmup               # rounds of one forward + one backward / “一前一反”的轮数
    order, next_f, next_b = [], 0, 0
    for _ in range(warmup):           # warm-up: forwards only / 预热期：只做前向
        order.append(("F", next_f))
        next_f += 1
    for _ in range(steady):           # steady: one forward, then the oldest backward / 稳定期：一个前向，再做最早的反向
        order.append(("F", next_f))
        next_f += 1
        order.append(("B", next_b))
        next_b += 1
    for _ in range(warmup):           # cool-down: the backwards still owed / 收尾期：做完还欠着的反向
        order.append(("B", next_b))
        next_b += 1
    return order


def reference_1f1b(num_stages: int, num_microbatches: int, *, fwd_time=1.0, bwd_time=2.0,
                   p2p_time: float = 0.0) -> list[Event]:
    """One 1F1B step, simulated with plain loops: the readable reference for :func:`simulate` ``("1f1b", …)``.

    Every stage runs :func:`reference_1f1b_order`. An op starts when its stage is free and its input has arrived:
    the forward of micro-batch j on stage s needs stage s − 1's forward of j, its backward needs stage s + 1's
    backward of j (the last stage's backward needs its own forward); an input from another stage arrives
    ``p2p_time`` after it was computed. ``fwd_time``/``bwd_time``: one number or one per stage. Returns every op
    as an :class:`~distlearn.pipeline_parallel.timeline.Event`, sorted by stage then start (the same list as
    ``simulate("1f1b", …).events``). Raises DistlearnValueError for bad arguments.
    """
    _, p, m, _ = _check_args("1f1b", num_stages, num_microbatches, 1)
    fwd, bwd = per_stage_costs("fwd_time", fwd_time, p), per_stage_costs("bwd_time", bwd_time, p)
    comm = check_number("p2p_time", p2p_time, minimum=0)
    orders = [reference_1f1b_order(s, p, m) for s in range(p)]
    finished: dict[tuple[str, int, int], float] = {}   # (kind, stage, micro-batch) -> end time / 结束时间
    free_at = [0.0] * p                                # when each stage is free again / 各阶段何时空闲
    next_op = [0] * p
    events = []
    while any(next_op[s] < 2 * m for s in range(p)):
        ran = False
        for s in range(p):                             # next op of each stage, if its input is there / 输入到了就执行
            if next_op[s] == 2 * m:
                continue
            kind, j = orders[s][next_op[s]]
            if kind == "F":
                needs = ("F", s - 1, j) if s > 0 else None
            else:
                needs = ("B", s + 1, j) if s < p - 1 else ("F", s, j)
            if needs is not None and needs not in finished:
                continue                               # waiting for the neighbour / 等待相邻阶段
            arrives = 0.0 if needs is None else finished[needs] + (comm if needs[1] != s else 0.0)
            start = max(free_at[s], arrives)
            end = start + (fwd[s] if kind == "F" else bwd[s])
            finished[(kind, s, j)] = free_at[s] = end
            events.append(Event(s, kind, j, 0, float(start), float(end)))
            next_op[s] += 1
            ran = True
        if not ran:
            raise RuntimeError("pipeline schedule deadlocked / 流水线调度死锁")
    return sorted(events, key=lambda e: (e.stage, e.start))


# ---------------------------------------------------------------------------------------------- closed forms
def closed_form(schedule: str, num_stages: int, num_microbatches: int, *, fwd_time: float = 1.0,
                bwd_time: float = 2.0, num_chunks: int = 1) -> dict:
    """Textbook formulas (uniform costs, no p2p time), to compare with :func:`simulate`.

    Returns ``total_time``, ``bubble_time``, ``bubble_fraction`` (idle share) and ``bubble_ratio``
    (``t_bubble / t_ideal``), and ``peak_inflight`` per stage:
    - GPipe / 1F1B: ``t_bubble = (p − 1)(t_f + t_b)``, total ``(m + p − 1)(t_f + t_b)``, fraction
      ``(p − 1)/(m + p − 1)``; peak ``m`` (GPipe) or ``min(p − s, m)`` (1F1B) micro-batches on stage ``s``.
    - interleaved (valid when ``m`` is a multiple of ``p``): ``t_bubble = (p − 1)(t_f + t_b)/v``; peak
      activations on stage ``s`` ``(min(2(p − s − 1) + (v − 1)g, m v − 1) + 1)/v`` micro-batches (on stage 0,
      ``p + (p − 1)/v``: Korthikanti et al. 2022, §4.2.3).
    Source: Narayanan et al. 2021, §2.2.
    """
    schedule, p, m, v = _check_args(schedule, num_stages, num_microbatches, num_chunks)
    tf = check_number("fwd_time", fwd_time, minimum=0, strict_min=True)
    tb = check_number("bwd_time", bwd_time, minimum=0, strict_min=True)
    ideal = m * (tf + tb)
    bubble = (p - 1) * (tf + tb) / v
    total = ideal + bubble
    if schedule == "gpipe":
        peak = [float(m)] * p
    elif schedule == "1f1b":
        peak = [float(min(p - s, m)) for s in range(p)]
    elif v == 1:
        peak = [float(min(p - s, m)) for s in range(p)]
    else:
        g = interleaved_group_size(p, m)
        peak = [(min(2 * (p - s - 1) + (v - 1) * g, m * v - 1) + 1) / v for s in range(p)]
    return {"total_time": total, "bubble_time": bubble, "bubble_fraction": bubble / total,
            "bubble_ratio": bubble / ideal, "peak_inflight": peak}


@checks(num_microbatches_options=each(whole(minimum=1)))
def microbatch_tradeoff(global_batch: int, num_stages: int, num_microbatches_options: Sequence[int], *,
                        schedule: str = "1f1b", time_per_sample: float = 1.0, overhead_per_microbatch: float = 4.0,
                        bwd_ratio: float = 2.0) -> list[dict]:
    """Micro-batch size vs number at a fixed ``global_batch`` (per pipeline), with a simple cost model.

    A micro-batch of ``b`` samples takes ``t_f(b) = overhead_per_microbatch + b · time_per_sample`` in forward
    (small micro-batches use the hardware badly: fixed kernel-launch and weight-read costs; an assumption of this
    model, not a measurement) and ``bwd_ratio · t_f(b)`` in backward. Each option ``m`` must divide
    ``global_batch``. Returns one dict per option: ``num_microbatches``, ``micro_batch_size``, ``total_time``,
    ``bubble_fraction`` (from :func:`simulate`) and ``peak_activation_samples`` on stage 0 (samples whose
    activations are alive: ``peak_inflight[0] · b``).
    """
    global_batch = check_int("global_batch", global_batch, minimum=1)
    rows = []
    for m in num_microbatches_options:
        m = check_int("num_microbatches", m, minimum=1, maximum=global_batch)
        check_divisible("global_batch", global_batch, "num_microbatches", m)
        b = global_batch // m
        tf = (check_number("overhead_per_microbatch", overhead_per_microbatch, minimum=0)
              + b * check_positive("time_per_sample", time_per_sample))
        r = simulate(schedule, num_stages, m, fwd_time=tf, bwd_time=check_positive("bwd_ratio", bwd_ratio) * tf)
        rows.append({"num_microbatches": m, "micro_batch_size": b, "total_time": r.total_time,
                     "bubble_fraction": r.bubble_fraction, "peak_activation_samples": float(r.peak_inflight[0] * b)})
    return rows
