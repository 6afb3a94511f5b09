"""Overlap of communication and computation in FSDP / ZeRO-3: an event simulation of one step's timeline.

One rank runs two streams: a **compute** stream (forward of unit 0 … n−1, then backward of unit n−1 … 0) and one
**communication** channel that executes collectives one at a time in the order they were issued (all-gathers of
parameters and reduce-scatters of gradients share the same links). The rules follow PyTorch FSDP
(``torch/distributed/fsdp/_runtime_utils.py`` for FSDP1, ``_fully_shard/_fsdp_state.py`` for FSDP2):

- a unit's computation starts when its parameters are all-gathered and the previous computation has finished;
- with prefetch depth k, the all-gather for the computation k places ahead is issued when the current one starts
  (k = 0: issued only when the unit is reached). Backward all-gathers are never issued before the forward ends;
- after a unit's backward its gradient is reduce-scattered (issued at once; it waits its turn on the channel);
- ``max_inflight`` limits how many units may be unsharded at once (FSDP1's ``limit_all_gathers`` rate limiter keeps
  this at 2): an all-gather is issued only when fewer units than that are unsharded;
- memory: a unit's unsharded parameters exist from the issue of its all-gather until it is freed (end of its
  forward when ``reshard_after_forward``, else end of its backward); its unsharded gradient exists from the start of
  its backward until its reduce-scatter ends.

**What the depths stand for** (:data:`PREFETCH_MODES`). The simulator has one GPU and no CPU: "depth k" says when
an all-gather is *issued* relative to the computations. In real FSDP the CPU issues kernels asynchronously and the
all-gathers run on their own stream, so the default behaviour is depth 1, not 0:

- FSDP2 (torch 2.13, ``_fully_shard/_fsdp_param_group.py``): in **backward** a unit's pre-backward hook explicitly
  issues the all-gather of the unit that ran before it in forward (``_backward_prefetch``: depth 1). In
  **forward** there is no explicit prefetch: each unit's all-gather is issued by its pre-forward hook on the
  all-gather stream, and because the CPU runs ahead of the GPU it reaches unit i+1's hook while unit i still
  computes ("implicit forward prefetching"); the copy-in of the next all-gather waits for the previous one's
  copy-out, so at most one all-gather is ahead: depth 1. ``set_modules_to_forward_prefetch`` /
  ``set_modules_to_backward_prefetch`` prefetch further explicitly (depth ≥ 2);
- FSDP1 (``fully_sharded_data_parallel.py``): ``backward_prefetch=BACKWARD_PRE`` (depth 1 in backward) and
  ``forward_prefetch=False`` (forward overlap again by the CPU running ahead), ``limit_all_gathers=True`` (at most
  two units unsharded: ``max_inflight=2``);
- depth 0 — an all-gather issued only when its unit is reached — is the **CPU-bound worst case**: the CPU cannot
  run ahead (Python overhead larger than the GPU kernels, a host synchronization such as ``.item()`` in every
  unit), so each all-gather starts just when it is needed and nothing overlaps.

With uniform units, forward only, prefetch ≥ 1 and ``max_inflight`` ≥ 2 the total time is the seed's closed form
comm + compute + (n − 1)·max(comm, compute); without prefetch it is n·(comm + compute). Times in any unit (e.g. ms),
memory in bytes.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from distlearn.core.validate import (DistlearnValueError, array, check_bool, check_int, check_number, check_text, checks,
                                     record)
from distlearn.core.guard import read_only

__all__ = ["Op", "MemoryPoint", "MemoryParts", "OverlapResult", "PrefetchMode", "PREFETCH_MODES", "simulate", "uniform",
           "closed_form_forward", "issue_order", "fsdp2_issue_order", "issue_order_text"]


@dataclass(frozen=True)
class PrefetchMode:
    """A named setting of the simulator's prefetch: ``forward`` and ``backward`` depths, ``max_inflight`` (None =
    unlimited) and what it stands for in English and Chinese (module docstring)."""

    forward: int
    backward: int
    max_inflight: int | None
    en: str
    zh: str

    def __post_init__(self):
        """The depths as :func:`simulate` takes them (whole numbers ≥ 0; ``max_inflight`` None or ≥ 1), ``en`` and
        ``zh`` strings. Raises DistlearnValueError naming the field."""
        check_int("forward", self.forward, minimum=0)
        check_int("backward", self.backward, minimum=0)
        if self.max_inflight is not None:
            check_int("max_inflight", self.max_inflight, minimum=1)
        check_text("en", self.en)
        check_text("zh", self.zh)

    def kwargs(self) -> dict:
        """The keyword arguments of :func:`simulate` for this mode."""
        return {"forward_prefetch": self.forward, "backward_prefetch": self.backward,
                "max_inflight": self.max_inflight}


PREFETCH_MODES = read_only({
    "fsdp2_default": PrefetchMode(1, 1, None, "FSDP2 default: next all-gather issued ahead (backward: implicit "
                                  "prefetch; forward: the CPU running ahead)",
                                  "FSDP2 默认：提前发起下一次 AllGather（反向：隐式预取；前向：CPU 提前发射）"),
    "fsdp1_default": PrefetchMode(1, 1, 2, "FSDP1 default: BACKWARD_PRE, forward by the CPU running ahead, "
                                  "limit_all_gathers (2 units)",
                                  "FSDP1 默认：BACKWARD_PRE，前向靠 CPU 提前发射，limit_all_gathers（2 个单元）"),
    "cpu_bound": PrefetchMode(0, 0, None, "CPU-bound worst case: each all-gather issued only when its unit is "
                              "reached, nothing overlaps",
                              "CPU 瓶颈下的最坏情况：每次 AllGather 到该单元时才发起，完全不重叠"),
    "explicit_2": PrefetchMode(2, 2, None, "explicit prefetch two units ahead (set_modules_to_forward_prefetch / "
                               "set_modules_to_backward_prefetch)",
                               "显式预取两个单元（set_modules_to_forward_prefetch / set_modules_to_backward_prefetch）"),
})


@dataclass(frozen=True)
class Op:
    """One interval on the timeline: ``stream`` "compute" or "comm"; ``kind`` "forward", "backward",
    "all_gather" or "reduce_scatter"; ``phase`` "forward" or "backward"; ``unit`` index; ``issue`` (comm only:
    when it was issued), ``start``, ``end``."""

    stream: str
    kind: str
    phase: str
    unit: int
    start: float
    end: float
    issue: float | None = None


class MemoryPoint(NamedTuple):
    """Unsharded bytes alive (parameters + gradients) right after a change at ``time``."""

    time: float
    bytes: float


class MemoryParts(NamedTuple):
    """The same, split: unsharded ``param_bytes`` and unsharded ``grad_bytes`` after a change at ``time``."""

    time: float
    param_bytes: float
    grad_bytes: float


@dataclass
class OverlapResult:
    """Output of :func:`simulate`: ``ops`` (the timeline), ``total_time``, ``compute_time`` (busy time of the
    compute stream), ``comm_time`` (busy time of the channel), ``exposed_comm`` = total − compute (time the compute
    stream waits), ``memory`` (a :class:`MemoryPoint` after each change, in order) and ``peak_bytes`` (largest
    unsharded parameter + gradient bytes alive at once), ``peak_units`` (most units with unsharded parameters),
    ``memory_parts`` (a :class:`MemoryParts` after each change)."""

    ops: list[Op]
    total_time: float
    compute_time: float
    comm_time: float
    memory: list[MemoryPoint] = field(default_factory=list)
    peak_bytes: float = 0.0
    peak_units: int = 0
    memory_parts: list[MemoryParts] = field(default_factory=list)

    @property
    def exposed_comm(self) -> float:
        return self.total_time - self.compute_time

    def memory_curve(self, parts: bool = False):
        """(times, values) for a step plot: one point per distinct time (the level after all changes at that
        time), starting at (0, 0) and ending at ``total_time``. With ``parts`` the values are (params, grads)."""
        level: dict[float, tuple] = {0.0: (0.0, 0.0)}
        for t, p, g in self.memory_parts:
            level[t] = (p, g)
        times = sorted(level) + [self.total_time]
        vals = [level[t] for t in sorted(level)]
        vals.append(vals[-1])
        return times, (vals if parts else [p + g for p, g in vals])


def _times(name, values, n=None, allow_zero=True):
    vals = [check_number(f"{name}[{i}]", v, minimum=0, strict_min=not allow_zero) for i, v in enumerate(values)]
    if n is not None and len(vals) != n:
        raise DistlearnValueError(name, f"{name} needs one value per unit ({n}), got {len(vals)}.",
                                  f"{name} 需要每个单元一个值（共 {n} 个），收到 {len(vals)} 个。")
    return vals


# ---------------------------------------------------------------- the state of the event loop, by name
@dataclass(frozen=True)
class _Computation:
    """One entry of the compute sequence: forward of units 0 … n−1, then backward of n−1 … 0."""

    phase: str                 # "forward" or "backward"
    unit: int
    duration: float
    needs_all_gather: bool     # False for a backward when the unit stayed unsharded (reshard_after_forward=False)


@dataclass
class _Collective:
    """An issued collective: first waiting on the channel's queue, then running (``start`` set)."""

    kind: str                  # "all_gather" or "reduce_scatter"
    phase: str
    unit: int
    duration: float
    position: int              # the computation it gathers for (all-gather) or follows (reduce-scatter)
    issue: float
    start: float | None = None

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass
class _Running:
    """The computation running on the compute stream (its Op records ``end − duration`` as the start)."""

    position: int
    end: float


@dataclass
class _Memory:
    """Unsharded bytes and units alive on the rank, their peaks, and the record of every change."""

    total: float = 0.0
    param_bytes: float = 0.0
    grad_bytes: float = 0.0
    units: int = 0             # units whose parameters are unsharded
    peak_bytes: float = 0.0
    peak_units: int = 0
    points: list[MemoryPoint] = field(default_factory=list)
    parts: list[MemoryParts] = field(default_factory=list)

    def change(self, time: float, delta_bytes: float, delta_units: int = 0, grad: bool = False) -> None:
        self.total += delta_bytes
        if grad:
            self.grad_bytes += delta_bytes
        else:
            self.param_bytes += delta_bytes
        self.units += delta_units
        self.peak_bytes, self.peak_units = max(self.peak_bytes, self.total), max(self.peak_units, self.units)
        self.points.append(MemoryPoint(time, self.total))
        self.parts.append(MemoryParts(time, self.param_bytes, self.grad_bytes))


@dataclass
class _State:
    """Everything the event loop changes."""

    sequence: list[_Computation]
    started: list            # start time of each computation, None until it starts
    ended: list              # end time of each computation, None until it ends
    gathered: list[bool]     # its parameters are all-gathered (True at once when it needs none)
    time: float = 0.0
    next_compute: int = 0    # position of the next computation to start
    next_gather: int = 0     # index into the positions that need an all-gather
    limited: int = 0         # unsharded units counted by the rate limiter (max_inflight)
    waiting: deque = field(default_factory=deque)   # issued _Collective's, in issue order
    channel: _Collective | None = None               # the collective running
    computing: _Running | None = None                # the computation running
    ops: list[Op] = field(default_factory=list)
    memory: _Memory = field(default_factory=_Memory)


@checks(forward=array("_", min_size=0), all_gather=array("_", min_size=0), backward=array("_", min_size=0),
        reduce_scatter=array("_", min_size=0), unit_bytes=array("_", min_size=0))
def simulate(forward, all_gather, *, backward=None, reduce_scatter=None, unit_bytes=None,
             forward_prefetch: int = 1, backward_prefetch: int = 1, max_inflight: int | None = None,
             reshard_after_forward: bool = True, include_backward: bool = True) -> OverlapResult:
    """Simulate one FSDP step of ``n`` units on one rank.

    Parameters (lists with one entry per unit, in forward order)
    ----------
    forward : forward compute time of each unit (≥ 0).
    all_gather : all-gather time of each unit's parameters (≥ 0).
    backward : backward compute times (default 2 × forward).
    reduce_scatter : reduce-scatter time of each unit's gradients (default = all_gather).
    unit_bytes : unsharded parameter bytes of each unit (default 1 each, so memory counts units); the gradient of a
        unit has the same size.
    forward_prefetch, backward_prefetch : prefetch depth k ≥ 0 (see module doc); the default 1 is what FSDP2 and
        FSDP1 do by default, 0 the CPU-bound worst case (:data:`PREFETCH_MODES`).
    max_inflight : most units unsharded at once (≥ 1, default unlimited); FSDP1's limit_all_gathers uses 2.
    reshard_after_forward : True = FULL_SHARD / ZeRO-3 (all-gather again in backward); False = SHARD_GRAD_OP /
        ZeRO-2 (units stay unsharded from forward to backward; no backward all-gather).
    include_backward : False simulates the forward pass only (the seed's PrefetchSimulator).

    Returns an :class:`OverlapResult`. Raises DistlearnValueError for negative times, mismatched lengths or bad
    depths/limits.
    """
    fwd = _times("forward", forward)
    n = len(fwd)
    if n == 0:
        raise DistlearnValueError("forward", "need at least one unit.", "至少需要一个单元。")
    ag = _times("all_gather", all_gather, n)
    bwd = _times("backward", backward, n) if backward is not None else [2 * f for f in fwd]
    rs = _times("reduce_scatter", reduce_scatter, n) if reduce_scatter is not None else list(ag)
    size = _times("unit_bytes", unit_bytes, n) if unit_bytes is not None else [1.0] * n
    kf = check_int("forward_prefetch", forward_prefetch, minimum=0)
    kb = check_int("backward_prefetch", backward_prefetch, minimum=0)
    limit = float("inf") if max_inflight is None else check_int("max_inflight", max_inflight, minimum=1)
    reshard_after_forward = check_bool("reshard_after_forward", reshard_after_forward)
    include_backward = check_bool("include_backward", include_backward)

    seq = [_Computation("forward", i, fwd[i], True) for i in range(n)]
    if include_backward:
        seq += [_Computation("backward", i, bwd[i], reshard_after_forward) for i in reversed(range(n))]
    P = len(seq)
    st = _State(seq, [None] * P, [None] * P, [not c.needs_all_gather for c in seq])
    gather_positions = [p for p in range(P) if seq[p].needs_all_gather]
    mem = st.memory

    def triggered(p) -> bool:
        """May the all-gather for computation ``p`` be issued now (prefetch rule)?"""
        k = kf if seq[p].phase == "forward" else kb
        if seq[p].phase == "backward" and st.ended[n - 1] is None:
            return False                       # backward all-gathers wait for the end of the forward
        if k == 0:
            return p == 0 or st.ended[p - 1] is not None
        return p - k < 0 or st.started[p - k] is not None

    def issue_and_start() -> bool:
        """Issue every all-gather allowed now, start the channel and the compute stream if they can; True if
        anything happened (then try again: one start can allow another)."""
        progress = False
        while (st.next_gather < len(gather_positions) and triggered(gather_positions[st.next_gather])
               and st.limited < limit):
            c = seq[gather_positions[st.next_gather]]
            st.waiting.append(_Collective("all_gather", c.phase, c.unit, ag[c.unit],
                                          gather_positions[st.next_gather], st.time))
            st.limited += 1
            mem.change(st.time, size[c.unit], 1)
            st.next_gather += 1
            progress = True
        if st.channel is None and st.waiting:
            st.channel = st.waiting.popleft()
            st.channel.start = st.time
            progress = True
        if st.computing is None and st.next_compute < P and st.gathered[st.next_compute]:
            p, c = st.next_compute, seq[st.next_compute]
            st.started[p] = st.time
            st.computing = _Running(p, st.time + c.duration)
            if c.phase == "backward":
                mem.change(st.time, size[c.unit], grad=True)  # unsharded gradient buffer
            st.next_compute += 1
            progress = True
        return progress

    def finish_computation() -> None:
        """The running computation ends: free its unit's parameters (maybe), issue its reduce-scatter."""
        run, c = st.computing, seq[st.computing.position]
        st.ended[run.position] = st.time
        st.ops.append(Op("compute", c.phase, c.phase, c.unit, st.time - c.duration, st.time))
        if c.phase == "forward":
            if reshard_after_forward or not include_backward:
                mem.change(st.time, -size[c.unit], -1)
            st.limited -= 1                   # resharded, or kept for backward and no longer rate-limited
        else:
            mem.change(st.time, -size[c.unit], -1)
            if reshard_after_forward:
                st.limited -= 1
            st.waiting.append(_Collective("reduce_scatter", "backward", c.unit, rs[c.unit], run.position, st.time))
        st.computing = None

    def finish_collective() -> None:
        """The running collective ends: parameters ready (all-gather) or unsharded gradient freed."""
        op = st.channel
        st.ops.append(Op("comm", op.kind, op.phase, op.unit, op.start, op.end, op.issue))
        if op.kind == "all_gather":
            st.gathered[op.position] = True
        else:
            mem.change(st.time, -size[op.unit], grad=True)   # gradient shard kept, unsharded gradient freed
        st.channel = None

    while st.next_compute < P or st.computing is not None or st.channel is not None or st.waiting:
        while issue_and_start():
            pass
        if st.computing is None and st.channel is None:
            if st.next_compute < P:              # cannot happen with limit ≥ 1; guard against an endless loop
                raise RuntimeError("overlap simulation stalled / 重叠模拟停滞")
            break
        st.time = min(x.end for x in (st.computing, st.channel) if x is not None)
        if st.computing is not None and st.computing.end == st.time:
            finish_computation()
        if st.channel is not None and st.channel.end == st.time:
            finish_collective()
    compute_time = sum(o.end - o.start for o in st.ops if o.stream == "compute")
    comm_time = sum(o.end - o.start for o in st.ops if o.stream == "comm")
    return OverlapResult(sorted(st.ops, key=lambda o: (o.start, o.stream)), st.time, compute_time, comm_time,
                         mem.points, mem.peak_bytes, mem.peak_units, mem.parts)


_TIE = {"reduce_scatter": 0, "all_gather": 1, "forward": 2, "backward": 2}


RESULT = record(OverlapResult, "simulate([1.0, 1.0], [0.5, 0.5])")


@checks(result=RESULT)
def issue_order(result: OverlapResult) -> list[tuple[str, int]]:
    """The order in which one rank's CPU *issues* work: collectives at their ``issue`` time, computations at their
    start, as ``(kind, unit)`` pairs. This is what prefetch changes (the sequence of collectives alone is the same
    for every forward prefetch depth). At equal times a reduce-scatter comes first (issued in the post-backward of
    the unit that just finished), then all-gathers (issued in the pre-forward / pre-backward hook of the unit about
    to run, before its computation), then the computation — the order of FSDP2's hooks
    (``_fully_shard/_fsdp_state.py``)."""
    events = [(o.issue if o.stream == "comm" else o.start, _TIE[o.kind], o.kind, o.unit) for o in result.ops]
    return [(kind, unit) for _, _, kind, unit in sorted(events, key=lambda e: (e[0], e[1]))]


@checks(result=RESULT)
def fsdp2_issue_order(result: OverlapResult, unit_names=None, root: str = "") -> list[tuple[str, str]]:
    """:func:`issue_order` as a real FSDP2 run records it (``distlearn.zero_fsdp.lab.issue_order``): every event,
    collectives included, named by the module FQN of its unit, ``unit_names[i]`` (default ``"blocks.i"``), and the
    simulated units wrapped by a root unit named ``root`` (FQN ``""``), which the simulation leaves out: its
    all-gather comes first (issued in the root's pre-forward, before any block) and its reduce-scatter last (issued
    in the final post-backward callback: ``_fully_shard/_fsdp_state.py``). The root is left at FSDP2's default,
    which keeps it unsharded from forward to backward, so it has no backward all-gather. Raises
    DistlearnValueError when ``root`` is not a string or ``unit_names`` has not one name per unit."""
    check_text("root", root)
    units = sorted({o.unit for o in result.ops})
    names = [f"blocks.{i}" for i in range(len(units))] if unit_names is None else list(unit_names)
    if len(names) != len(units):
        raise DistlearnValueError("unit_names", f"unit_names needs one name per unit ({len(units)}), got "
                                  f"{len(names)}.", f"unit_names 需要每个单元一个名字（共 {len(units)} 个），"
                                  f"收到 {len(names)} 个。")
    body = [(kind, names[unit]) for kind, unit in issue_order(result)]
    return [("all_gather", root)] + body + [("reduce_scatter", root)]


_SHORT = {"all_gather": "AG", "reduce_scatter": "RS", "forward": "F", "backward": "B"}


def _check_events(events) -> None:
    """DistlearnValueError unless ``events`` is a list of ``(kind, module FQN)`` pairs: kind one of all_gather,
    reduce_scatter, forward, backward; the FQN a string or None."""
    ok = isinstance(events, (list, tuple))
    bad = events
    for event in events if ok else ():
        if not (isinstance(event, (list, tuple)) and len(event) == 2 and event[0] in _SHORT
                and (event[1] is None or isinstance(event[1], str))):
            ok, bad = False, event
            break
    if not ok:
        shown = repr(bad) if len(repr(bad)) <= 60 else repr(bad)[:57] + "..."
        kinds = ", ".join(_SHORT)
        raise DistlearnValueError(
            "events", f"events must be a list of (kind, module name) pairs, kind one of {kinds}, e.g. "
                      f"[('all_gather', 'blocks.0'), ('forward', 'blocks.0')]; got {shown}.",
            f"events 必须是 (kind, 模块名) 二元组的列表，kind 取 {kinds} 之一，例如 "
            f"[('all_gather', 'blocks.0'), ('forward', 'blocks.0')]；收到 {shown}。")


def issue_order_text(events) -> str:
    """One line for an issue order of ``(kind, module FQN)`` events (:func:`fsdp2_issue_order` or the real run):
    AG / RS / F / B for all-gather, reduce-scatter, forward, backward, followed by the last part of the FQN (the
    block's number) or R for the root (``""``); ``?`` for a collective of no known unit (None). Raises
    DistlearnValueError when ``events`` is not a list of such pairs."""
    _check_events(events)

    def unit(fqn):
        return "?" if fqn is None else "R" if fqn == "" else fqn.rsplit(".", 1)[-1]
    return " ".join(_SHORT[kind] + unit(fqn) for kind, fqn in events)


def uniform(num_units: int, compute: float, comm: float, **kwargs) -> OverlapResult:
    """:func:`simulate` with ``num_units`` identical units: forward ``compute``, all-gather ``comm`` (backward
    2 × compute and reduce-scatter = comm unless given in ``kwargs``)."""
    n = check_int("num_units", num_units, minimum=1, maximum=10_000)
    return simulate([compute] * n, [comm] * n, **kwargs)


def closed_form_forward(num_units: int, compute: float, comm: float, prefetch: bool = True) -> float:
    """The seed's closed form for the forward pass with uniform units: comm + compute + (n − 1)·max(comm, compute)
    with prefetch, n·(comm + compute) without."""
    prefetch = check_bool("prefetch", prefetch)
    n = check_int("num_units", num_units, minimum=1)
    compute, comm = check_number("compute", compute, minimum=0), check_number("comm", comm, minimum=0)
    if not prefetch:
        return n * (comm + compute)
    return comm + compute + (n - 1) * max(comm, compute)
