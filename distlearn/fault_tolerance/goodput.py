"""Failure arithmetic for large training jobs: the job's mean time between failures (MTBF), the work a failure
destroys, the optimum checkpoint interval (Young 1974; Daly 2006) and goodput.

**Model** (Daly 2006). A synchronous job stops when *any* of its parts fails. Parts fail independently as
Poisson processes, so the job fails as one Poisson process whose rate is the sum of the parts' rates: the job's MTBF
is ``M = MTBF_part / N`` (:func:`job_mtbf_hours`). The job computes for an interval ``τ`` (``interval``), then
writes a checkpoint for ``δ`` (``checkpoint_time``); a failure loses everything since the last completed
checkpoint, and restarting (scheduling, loading the checkpoint) takes ``R`` (``restart_time``), during which
another failure may strike. Every time argument uses one unit of your choice (seconds, minutes, hours) and
results come back in the same unit; rates are per day.

**Formulas and their sources.**

- Young 1974 ("A first order approximation to the optimum checkpoint interval", *Comm. ACM* 17(9), 530–531):
  ``τ_Young = sqrt(2 δ M)`` (:func:`young_interval`). It is the exact minimum of the first-order waste
  ``δ/τ + τ/(2M)`` (:func:`goodput_first_order`): each checkpoint costs δ per τ of work, each failure costs half
  an interval on average.
- Daly 2006 ("A higher order estimate of the optimum checkpoint interval for restart dumps", *Future Generation
  Computer Systems* 22(3), 303–312): the complete model's expected wall time for ``T_s`` of work is
  ``T_w = M e^{R/M} (e^{(τ+δ)/M} − 1) T_s / τ`` (:func:`expected_wall_time`), so the goodput (useful time / wall
  time) is ``τ / (M e^{R/M} (e^{(τ+δ)/M} − 1))`` (:func:`goodput`). Daly's higher-order estimate of its optimum
  (the paper's closing result) is ``τ_Daly = sqrt(2δM) [1 + (1/3) sqrt(δ/(2M)) + (1/9) (δ/(2M))] − δ`` for
  ``δ < 2M`` and ``τ_Daly = M`` otherwise (:func:`daly_interval`); his Figures 3–5 quote 117, 57 and 9.1 minutes for
  R = 10 min, δ = 5 min and M = 24 h, 6 h, 15 min (a test checks them).
- The exact optimum of Daly's model solves ``e^{(τ+δ)/M} (1 − τ/M) = 1``, i.e. ``τ* = M (1 + W₀(−e^{−1−δ/M}))``
  with Lambert's W (:func:`optimal_interval`; Daly's paper lists the Lambert function among its keywords). Tests
  check it against a brute-force search and Daly's formula against it.
- Lost work: given a failure inside a segment of length ``L = τ + δ``, it strikes on average
  ``M − L / (e^{L/M} − 1)`` into the segment (≈ L/2 when L ≪ M; :func:`expected_lost_work`).

:func:`simulate_run` replays a whole run with random failures (numpy, seeded): an independent check of
:func:`expected_wall_time` that tests use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distlearn.core.validate import (checks, record, MAX_STEPS, DistlearnValueError, check_int, check_number, check_positive,
                                     check_seed)

HOURS_PER_DAY = 24.0


# ---------------------------------------------------------------- failure rates and MTBF
def job_failures_per_day(num_units: int, failures_per_unit_day: float) -> float:
    """Expected failures of the whole job per day: ``num_units × failures_per_unit_day`` (a sum of independent
    Poisson processes is a Poisson process with the summed rate). ``num_units``: GPUs or nodes (integer ≥ 1)."""
    n = check_int("num_units", num_units, minimum=1)
    rate = check_positive("failures_per_unit_day", failures_per_unit_day)
    return n * rate


def job_mtbf_hours(num_units: int, failures_per_unit_day: float) -> float:
    """The job's mean time between failures in hours: ``24 / (num_units × failures_per_unit_day)`` = the MTBF of
    one unit divided by the number of units."""
    return HOURS_PER_DAY / job_failures_per_day(num_units, failures_per_unit_day)


def rate_per_unit_day(failures: int, days: float, num_units: int) -> float:
    """Failures per unit-day observed when ``failures`` stopped a job of ``num_units`` units in ``days`` days."""
    f = check_int("failures", failures, minimum=1)
    d = check_positive("days", days)
    n = check_int("num_units", num_units, minimum=1)
    return f / (d * n)


# ---------------------------------------------------------------- checkpoint intervals
def _times(checkpoint_time, mtbf):
    return check_positive("checkpoint_time", checkpoint_time), check_positive("mtbf", mtbf)


def young_interval(checkpoint_time: float, mtbf: float) -> float:
    """Young 1974: ``sqrt(2 · checkpoint_time · mtbf)`` (same unit as the arguments)."""
    delta, m = _times(checkpoint_time, mtbf)
    return math.sqrt(2.0 * delta * m)


def daly_interval(checkpoint_time: float, mtbf: float) -> float:
    """Daly 2006's higher-order estimate: ``sqrt(2δM)·[1 + ⅓·sqrt(δ/2M) + (1/9)·(δ/2M)] − δ`` for δ < 2M,
    else ``M``."""
    delta, m = _times(checkpoint_time, mtbf)
    if delta >= 2.0 * m:
        return m
    x = delta / (2.0 * m)
    return math.sqrt(2.0 * delta * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def lambert_w0(x: float) -> float:
    """The principal branch W₀ of Lambert's W function (``w·e^w = x``, ``w ≥ −1``) for real ``x ≥ −1/e``.

    Halley's iteration from a branch-point series start near −1/e and ``log1p`` elsewhere; accurate to ~1e-15
    relative (tests check ``w·e^w = x``)."""
    x = check_number("x", x, minimum=-1.0 / math.e - 1e-15)
    if x == 0.0:
        return 0.0
    p2 = 2.0 * (math.e * x + 1.0)
    if p2 < 0.5:                         # near the branch point: w ≈ −1 + p − p²/3 + 11p³/72
        p = math.sqrt(max(p2, 0.0))
        w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p ** 3
    else:
        w = math.log1p(x) if x < 3.0 else math.log(x) - math.log(math.log(x))
    for _ in range(100):
        ew = math.exp(w)
        f = w * ew - x
        if f == 0.0:
            break
        wp1 = w + 1.0
        if wp1 == 0.0:
            break
        step = f / (ew * wp1 - (w + 2.0) * f / (2.0 * wp1))
        w -= step
        if abs(step) <= 1e-16 * (1.0 + abs(w)):
            break
    return w


def optimal_interval(checkpoint_time: float, mtbf: float) -> float:
    """The exact maximizer of :func:`goodput` (Daly's complete model): ``M·(1 + W₀(−e^{−1−δ/M}))``.

    It does not depend on the restart time (``e^{R/M}`` is a constant factor)."""
    delta, m = _times(checkpoint_time, mtbf)
    return m * (1.0 + lambert_w0(-math.exp(-1.0 - delta / m)))


# ---------------------------------------------------------------- lost work, wall time, goodput
def expected_lost_work(interval: float, checkpoint_time: float, mtbf: float) -> float:
    """Expected work lost by one failure: how far into a segment of length ``L = interval + checkpoint_time`` a
    failure strikes, given that it strikes there: ``M − L/(e^{L/M} − 1)`` (exponential failures; ≈ L/2 for
    L ≪ M). Add the restart time for the total cost of a failure."""
    tau = check_positive("interval", interval)
    delta = check_number("checkpoint_time", checkpoint_time, minimum=0.0)
    m = check_positive("mtbf", mtbf)
    seg = tau + delta
    return m - seg / math.expm1(seg / m)


def expected_wall_time(work: float, interval: float, checkpoint_time: float, restart_time: float,
                       mtbf: float) -> float:
    """Daly 2006's complete model: ``T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ`` for ``T_s = work`` of useful
    computation in segments of ``interval`` each followed by a checkpoint (same time unit everywhere)."""
    ts = check_positive("work", work)
    return ts / goodput(interval, checkpoint_time, restart_time, mtbf)


def goodput(interval: float, checkpoint_time: float, restart_time: float, mtbf: float) -> float:
    """Expected useful time / wall time in Daly's complete model: ``τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1))``, in (0, 1).
    Checkpoint writes, lost work and restarts are the waste."""
    tau = check_positive("interval", interval)
    delta = check_number("checkpoint_time", checkpoint_time, minimum=0.0)
    r = check_number("restart_time", restart_time, minimum=0.0)
    m = check_positive("mtbf", mtbf)
    return tau / (m * math.exp(r / m) * math.expm1((tau + delta) / m))


def goodput_first_order(interval: float, checkpoint_time: float, restart_time: float, mtbf: float) -> float:
    """First-order goodput ``1 − δ/τ − (τ/2 + R)/M``: per unit of work a checkpoint costs δ/τ, and failures
    (rate 1/M) each cost half an interval plus the restart (Young's two terms; the R/M term is ours, Young's model
    has no restart time, and it does not move the optimum). Its maximum is at exactly :func:`young_interval`. Can
    go negative where the first-order picture breaks down (τ or R comparable to M)."""
    tau = check_positive("interval", interval)
    delta = check_number("checkpoint_time", checkpoint_time, minimum=0.0)
    r = check_number("restart_time", restart_time, minimum=0.0)
    m = check_positive("mtbf", mtbf)
    return 1.0 - delta / tau - (tau / 2.0 + r) / m


@dataclass(frozen=True)
class IntervalPlan:
    """The optimum intervals and the goodput at each (all times in the caller's unit)."""

    mtbf: float
    young: float
    daly: float
    optimum: float
    goodput_young: float
    goodput_daly: float
    goodput_optimum: float


def plan(checkpoint_time: float, restart_time: float, mtbf: float) -> IntervalPlan:
    """Young's, Daly's and the exact optimum interval for one setting, with Daly-model goodput at each."""
    y, d, o = (young_interval(checkpoint_time, mtbf), daly_interval(checkpoint_time, mtbf),
               optimal_interval(checkpoint_time, mtbf))
    g = [goodput(t, checkpoint_time, restart_time, mtbf) for t in (y, d, o)]
    return IntervalPlan(mtbf, y, d, o, *g)


# ---------------------------------------------------------------- Monte Carlo replay of a run
@dataclass(frozen=True)
class SimulatedRun:
    """One replayed run. Times in the caller's unit; ``goodput = work / wall_time``."""

    work: float
    wall_time: float
    failures: int
    lost_work: float
    checkpoint_time: float
    restart_time: float

    @property
    def goodput(self) -> float:
        return self.work / self.wall_time


@checks(rng=record(np.random.Generator, "np.random.default_rng(0)"))
def simulate_run(work: float, interval: float, checkpoint_time: float, restart_time: float, mtbf: float,
                 rng: np.random.Generator) -> SimulatedRun:
    """Replay one run of Daly's model with exponential failures drawn from ``rng``.

    The run is ``ceil(work / interval)`` segments of ``interval`` of work plus one checkpoint of
    ``checkpoint_time`` (the last segment may be shorter). A failure inside a segment (checkpoint included) loses
    the segment so far; then a restart of ``restart_time`` follows, itself interrupted by any failure inside it.
    Failures are memoryless, so a fresh exponential time is drawn at the start of every attempt."""
    ts = check_positive("work", work)
    tau = check_positive("interval", interval)
    delta = check_number("checkpoint_time", checkpoint_time, minimum=0.0)
    r = check_number("restart_time", restart_time, minimum=0.0)
    m = check_positive("mtbf", mtbf)
    if ts / tau > 10_000_000:
        raise DistlearnValueError("interval", f"work / interval = {ts / tau:.3g} segments is too many to replay.",
                                  f"work / interval = {ts / tau:.3g} 个分段，太多，无法逐段模拟。")
    wall = lost = ckpt = restart = 0.0
    failures = 0
    done = 0.0
    while done < ts - 1e-12 * ts:
        seg_work = min(tau, ts - done)
        seg = seg_work + delta
        while True:
            t_fail = rng.exponential(m)
            if t_fail >= seg:
                wall += seg
                ckpt += delta
                done += seg_work
                break
            failures += 1
            wall += t_fail
            lost += t_fail
            while True:                        # restart; a failure during it means restarting again
                t_fail = rng.exponential(m)
                if t_fail >= r:
                    wall += r
                    restart += r
                    break
                failures += 1
                wall += t_fail
                restart += t_fail
    return SimulatedRun(ts, wall, failures, lost, ckpt, restart)


def simulate_goodput(work: float, interval: float, checkpoint_time: float, restart_time: float, mtbf: float,
                     runs: int = 200, seed: int = 0) -> tuple[float, float]:
    """Mean goodput (total work / total wall time) over ``runs`` replayed runs and its standard error
    (delta method over the runs' wall times). Deterministic for a given ``seed``."""
    n = check_int("runs", runs, minimum=2, maximum=MAX_STEPS)
    rng = np.random.default_rng(check_seed("seed", seed))
    walls = np.array([simulate_run(work, interval, checkpoint_time, restart_time, mtbf, rng).wall_time
                      for _ in range(n)])
    mean = walls.mean()
    g = work / mean
    return float(g), float(g * walls.std(ddof=1) / math.sqrt(n) / mean)
