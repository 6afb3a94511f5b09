"""What a pipeline simulation returns, shared by both simulators: the operation kinds, one :class:`Event` per
operation, the :class:`PipelineResult` of a step, and the per-stage costs both read from their arguments.

:mod:`distlearn.pipeline_parallel.schedules` (GPipe, 1F1B, interleaved 1F1B) and
:mod:`distlearn.pipeline_parallel.zero_bubble` (the split-backward schedules) both build their results here, so
neither imports the other for them: ``schedules`` hands the split-backward schedules to ``zero_bubble``, and
``zero_bubble`` imports only this module (the import graph stays acyclic: ``tests/test_layout.py``).

Times are in the units of ``fwd_time`` (arbitrary, say ms).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from distlearn.core.validate import DistlearnValueError, check_int, check_number, check_text

__all__ = ["KINDS", "Event", "PipelineResult", "per_stage_costs"]

KINDS = ("F", "B", "I", "W", "F&B")  # PipelineResult.ev_kind codes 0..4


class Event(NamedTuple):
    """One operation on the timeline: ``kind`` one of :data:`KINDS` ("F" or "B" outside the split-backward
    schedules), on ``stage``, for ``microbatch`` and model ``chunk``, from ``start`` to ``end``."""

    stage: int
    kind: str
    microbatch: int
    chunk: int
    start: float
    end: float


@dataclass
class PipelineResult:
    """What :func:`distlearn.pipeline_parallel.schedules.simulate` returns. Times in the units of ``fwd_time``;
    arrays of ``busy``, ``peak_inflight``, ``peak_inflight_chunks`` and ``span_idle`` have shape (num_stages,), the
    ``ev_*`` arrays one entry per operation.

    - ``total_time``: from the first forward's start to the last backward's end (one training step, no optimizer).
    - ``busy``: per-stage compute time, ``m · (t_f,s + t_b,s)``.
    - ``bubble_fraction``: idle share of all stage-time, ``1 − Σ busy / (p · total_time)``.
    - ``ideal_time``: ``m · max_s (t_f,s + t_b,s)``, the time of the busiest stage with no bubble at all.
    - ``bubble_ratio``: the Megatron ratio ``t_bubble / t_ideal = (total_time − ideal_time) / ideal_time``.
    - ``peak_inflight``: per stage, the most micro-batches whose activations are alive at once, in units of one
      micro-batch's activations for the whole stage (with ``v`` chunks, one chunk's activations count ``1/v``).
    - ``peak_inflight_chunks``: the same as a count of (micro-batch, chunk) pairs.
    - arrays ``ev_stage, ev_kind (0 = F, 1 = B, 2 = I, 3 = W, 4 = F&B: see KINDS), ev_microbatch, ev_chunk,
      ev_start, ev_end``; ``events`` lists them as :class:`Event`.
    - split-backward schedules only (:mod:`distlearn.pipeline_parallel.zero_bubble`): ``span_idle`` (per stage, idle time between
      its first and last operation), ``ev_bwd_microbatch`` (the backward's micro-batch of an F&B block, else −1),
      ``param_copies`` (parameters per rank in units of one stage: 2 for DualPipe).
    """

    schedule: str
    num_stages: int
    num_microbatches: int
    num_chunks: int
    total_time: float
    busy: np.ndarray
    bubble_fraction: float
    ideal_time: float
    bubble_ratio: float
    peak_inflight: np.ndarray
    peak_inflight_chunks: np.ndarray
    ev_stage: np.ndarray = field(repr=False)
    ev_kind: np.ndarray = field(repr=False)
    ev_microbatch: np.ndarray = field(repr=False)
    ev_chunk: np.ndarray = field(repr=False)
    ev_start: np.ndarray = field(repr=False)
    ev_end: np.ndarray = field(repr=False)
    span_idle: np.ndarray | None = None
    ev_bwd_microbatch: np.ndarray | None = field(default=None, repr=False)
    param_copies: float = 1.0

    @property
    def bubble_time(self) -> float:
        """``total_time − ideal_time``."""
        return self.total_time - self.ideal_time

    @property
    def events(self) -> list[Event]:
        """Every operation as an :class:`Event`, sorted by stage then start time."""
        idx = np.lexsort((self.ev_start, self.ev_stage))
        return [Event(int(self.ev_stage[i]), KINDS[self.ev_kind[i]], int(self.ev_microbatch[i]),
                      int(self.ev_chunk[i]), float(self.ev_start[i]), float(self.ev_end[i])) for i in idx]


def per_stage_costs(name: str, value, p: int) -> np.ndarray:
    """``value`` as an array of shape (p,) of costs > 0 per stage, in the units of ``fwd_time``: one number for
    every stage, or a sequence of ``p`` numbers. ``name`` names the argument in the error. Raises
    DistlearnValueError for a non-positive or non-finite cost, or a sequence whose length is not ``p`` (1 ≤ p ≤
    4096, the stages :func:`check_stage_args` allows)."""
    name = check_text("name", name)
    p = check_int("p", p, maximum=4096)
    if np.ndim(value) == 0:
        return np.full(p, check_number(name, value, minimum=0, strict_min=True))
    vals = list(value)
    if len(vals) != p:
        raise DistlearnValueError(name, f"{name} must be one number or {p} numbers (one per stage), got {len(vals)}.",
                                  f"{name} 必须是一个数或 {p} 个数（每个阶段一个），收到 {len(vals)} 个。")
    return np.array([check_number(f"{name}[{i}]", x, minimum=0, strict_min=True) for i, x in enumerate(vals)])


def check_stage_args(stage: int, num_stages: int, num_microbatches: int) -> tuple[int, int, int]:
    """``(stage, num_stages, num_microbatches)`` as ints if ``1 ≤ num_stages ≤ 4096``, ``1 ≤ num_microbatches ≤
    100,000`` and ``0 ≤ stage < num_stages``; raises DistlearnValueError naming the parameter otherwise. The
    readable per-stage orders call it first, so their loops stay plain arithmetic."""
    from distlearn.core.validate import MAX_STEPS, check_int

    p = check_int("num_stages", num_stages, maximum=4096)
    m = check_int("num_microbatches", num_microbatches, maximum=MAX_STEPS)
    return check_int("stage", stage, minimum=0, maximum=p - 1), p, m
