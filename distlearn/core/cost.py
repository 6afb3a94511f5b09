"""α-β cost models of collectives, and algorithm vs bus bandwidth as nccl-tests defines them.

The α-β (Hockney) model: sending ``m`` bytes between two ranks takes ``α + m·β`` seconds, with ``α`` the latency
(seconds per message) and ``β = 1 / bandwidth`` (seconds per byte). A collective algorithm is a sequence of steps;
its time is ``k_α·α + k_β·M·β`` where ``M`` is the message size in bytes. Reduction compute (γ) is left out.

Formulas (n ranks; Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations in
MPICH", Int. J. HPC Appl. 19(1), section 4; Patarasuk & Yuan 2009 for the ring all-reduce):

=========================================  ===========================  ====================
algorithm                                  latency term                 bandwidth term
=========================================  ===========================  ====================
ring all-reduce                            2(n−1)·α                     2(n−1)/n · M·β
ring all-gather / ring reduce-scatter      (n−1)·α                      (n−1)/n · M·β
recursive-doubling all-reduce              log₂n·α                      log₂n · M·β
Rabenseifner all-reduce (halving+doubling) 2·log₂n·α                    2(n−1)/n · M·β
tree all-reduce (binomial reduce + bcast)  2⌈log₂n⌉·α                   2⌈log₂n⌉ · M·β
binomial-tree broadcast                    ⌈log₂n⌉·α                    ⌈log₂n⌉ · M·β
pipelined chain broadcast, k chunks        (n−1+k−1)·α                  (n−1+k−1)/k · M·β
=========================================  ===========================  ====================

The binomial trees take ⌈log₂n⌉ steps for any n. Recursive doubling and Rabenseifner's algorithm pair ranks by
XOR, which needs a power of two; for other n, Thakur et al. (§4, all-reduce) and MPICH
(``allreduce_intra_recursive_doubling.c``, ``allreduce_intra_reduce_scatter_allgather.c``) first fold the
r = n − p′ extra ranks into a neighbour (p′ = 2^⌊log₂n⌋: one step sending the whole message), run the algorithm on
p′ ranks, and send the result back (one more whole-message step). Recursive doubling then takes ⌊log₂n⌋ + 2 steps
of M bytes, one more than ⌈log₂n⌉; Rabenseifner's takes (2⌊log₂n⌋ + 2)·α and (2 + 2(p′−1)/p′)·M·β (MPICH's comment
writes (p−1)/p; the halving and doubling run on p′ ranks). :func:`coefficients` counts these steps.

Bandwidths reported by nccl-tests (NVIDIA/nccl-tests, ``doc/PERFORMANCE.md``): the *algorithm bandwidth* is
``algbw = S / t`` (``S`` = the operation's data size: the all-reduce buffer, the all-gather output, the
reduce-scatter input); the *bus bandwidth* ``busbw = algbw × factor`` with factor ``2(n−1)/n`` for all-reduce,
``(n−1)/n`` for all-gather, reduce-scatter and all-to-all, and ``1`` for broadcast and reduce. The factor is the
least data each rank must move with *any* algorithm built from point-to-point transfers (ring, tree or other), so
busbw is the per-rank bandwidth the measured time implies against that bound: comparable with the speed of the
hardware bottleneck (NVLink, PCIe, network) whatever n and whatever algorithm NCCL picked; an algorithm that is not
bandwidth-optimal shows up as a lower busbw. nccl-tests applies the same ``2(n−1)/n`` to every all-reduce, in-network
reduction (NVLink SHARP ``NCCL_ALGO=NVLS`` / ``NVLSTREE``, InfiniBand SHARP) included (``src/all_reduce.cu``,
``AllReduceGetBw``, master at NCCL_TESTS_VERSION 2.19.6): there the switch does the additions, the point-to-point
bound no longer applies, and the reported busbw is no longer capped by the link speed. The ``(n−1)/(n+1)`` factor
sometimes quoted for in-network reduction exists only in an unmerged pull request (NVIDIA/nccl-tests#239), so this
module does not offer it.

One α-β line may not fit measured times from kilobytes to tens of megabytes: small messages are dominated by a
per-call cost and can stay in the CPU caches, large ones stream from memory. :func:`fit_alpha_beta` fits one line;
:func:`fit_two_regime` fits one line to the small messages and one to the large (at least three sizes each: a line
passes through any two points), splitting where the worst relative error over all points is smallest;
:func:`compare_fits` says at each size which of the two is closer to the measurement, and
:meth:`FitComparison.too_noisy` whether the times are too noisy for either fit to mean anything.

Units: seconds, bytes, bytes per second (GB/s = 1e9 B/s).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distlearn.core.validate import DistlearnValueError, check_array, check_choice, check_int, check_number, check_record

ALGORITHMS = ("ring_all_reduce", "ring_all_gather", "ring_reduce_scatter", "recursive_doubling_all_reduce",
              "rabenseifner_all_reduce", "tree_all_reduce", "tree_broadcast", "chain_broadcast")

BUSBW_FACTOR_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")


def coefficients(algorithm: str, world_size: int, num_chunks: int = 1) -> tuple[float, float]:
    """``(k_α, k_β)`` such that time = k_α·α + k_β·M·β for ``algorithm`` on ``world_size`` ranks (table above;
    recursive doubling and Rabenseifner's algorithm with the two extra steps of Thakur et al. when world_size is
    not a power of two, e.g. 5 ranks: recursive doubling (4, 4), Rabenseifner (6, 3.5)).

    ``num_chunks`` only matters for ``chain_broadcast``. Raises DistlearnValueError for bad arguments."""
    check_choice("algorithm", algorithm, ALGORITHMS)
    n = check_int("world_size", world_size, minimum=1)
    k = check_int("num_chunks", num_chunks, minimum=1)
    if n == 1:
        return 0.0, 0.0
    lg = math.ceil(math.log2(n))                     # binomial trees: ⌈log₂n⌉ steps for any n / 二项树：任何 n 都是 ⌈log₂n⌉ 步
    pof2 = 1 << (n.bit_length() - 1)                  # p′, the largest power of two ≤ n / p′：不超过 n 的最大 2 的幂
    fold = 0 if pof2 == n else 2                     # fold the extra ranks in, send the result back / 先并入多出的 rank，最后送回结果
    lg2 = pof2.bit_length() - 1                      # ⌊log₂n⌋
    return {
        "ring_all_reduce": (2 * (n - 1), 2 * (n - 1) / n),
        "ring_all_gather": (n - 1, (n - 1) / n),
        "ring_reduce_scatter": (n - 1, (n - 1) / n),
        "recursive_doubling_all_reduce": (lg2 + fold, lg2 + fold),
        "rabenseifner_all_reduce": (2 * lg2 + fold, 2 * (pof2 - 1) / pof2 + fold),
        "tree_all_reduce": (2 * lg, 2 * lg),
        "tree_broadcast": (lg, lg),
        "chain_broadcast": (n - 1 + k - 1, (n - 1 + k - 1) / k),
    }[algorithm]


def collective_time(algorithm: str, nbytes: float, world_size: int, *, alpha: float, bandwidth: float,
                    num_chunks: int = 1) -> float:
    """α-β time in seconds of ``algorithm`` moving a message of ``nbytes`` bytes.

    ``alpha``: latency per message in seconds (≥ 0); ``bandwidth``: bytes per second of one link (> 0).
    Example: ring all-reduce of 1 GB on 8 ranks at 100 GB/s with α = 0 takes 2·7/8·1e9/1e11 = 17.5 ms."""
    nbytes = check_number("nbytes", nbytes, minimum=0)
    alpha = check_number("alpha", alpha, minimum=0)
    bandwidth = check_number("bandwidth", bandwidth, minimum=0, strict_min=True)
    ka, kb = coefficients(algorithm, world_size, num_chunks)
    return ka * alpha + kb * nbytes / bandwidth


def busbw_factor(operation: str, world_size: int) -> float:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth (doc/PERFORMANCE.md; ``*GetBw`` in src/*.cu).

    nccl-tests uses the same factor whatever algorithm NCCL runs, in-network reduction (NVLS, SHARP) included."""
    check_choice("operation", operation, BUSBW_FACTOR_OPS)
    n = check_int("world_size", world_size, minimum=1)
    if operation == "all_reduce":
        return 2 * (n - 1) / n
    if operation in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth S / t in bytes per second (nccl-tests)."""
    nbytes = check_number("nbytes", nbytes, minimum=0)
    seconds = check_number("seconds", seconds, minimum=0, strict_min=True)
    return nbytes / seconds


def busbw(operation: str, nbytes: float, seconds: float, world_size: int) -> float:
    """Bus bandwidth = algbw × :func:`busbw_factor` in bytes per second (nccl-tests)."""
    return algbw(nbytes, seconds) * busbw_factor(operation, world_size)


@dataclass
class AlphaBetaFit:
    """A fitted α-β model: ``alpha`` seconds per message, ``bandwidth`` bytes/s per link (1/β; ``math.inf`` for a
    flat line, times that did not grow with size).

    ``alpha_clipped``: the fit wanted a negative α (a line through the points would cross the time axis below 0), so
    α was held at 0 and only β fitted; such an α says nothing about the machine's latency."""

    algorithm: str
    world_size: int
    alpha: float
    bandwidth: float
    alpha_clipped: bool = False

    def predict(self, nbytes) -> np.ndarray:
        """Predicted seconds for each size in ``nbytes``."""
        ka, kb = coefficients(self.algorithm, self.world_size)
        return ka * self.alpha + kb * np.asarray(nbytes, dtype=float) / self.bandwidth


def fit_alpha_beta(nbytes, seconds, world_size: int, algorithm: str = "ring_all_reduce") -> AlphaBetaFit:
    """Least-squares fit of ``seconds ≈ k_α·α + k_β·nbytes·β`` with α ≥ 0 and β ≥ 0 to measured times.

    ``nbytes``, ``seconds``: 1-D sequences of equal length ≥ 2 (bytes, seconds). The fit minimizes relative error
    (each row divided by its time) so that small and large messages count alike. When the best line has α < 0,
    the constrained optimum lies on α = 0: β is then fitted alone and ``alpha_clipped`` is set. When the times do
    not grow with size (β ≤ 0), β is held at 0 and α fitted alone: ``bandwidth`` is then ``math.inf``, a flat line.
    Raises DistlearnValueError."""
    x, t = check_array("nbytes", nbytes, ndim=1), check_array("seconds", seconds, ndim=1)
    if x.ndim != 1 or x.shape != t.shape or len(x) < 2 or np.any(t <= 0) or np.any(x < 0):
        raise DistlearnValueError("seconds", "need ≥ 2 (nbytes, seconds) pairs with positive times.",
                                  "至少需要 2 组 (nbytes, seconds)，且时间为正。")
    n = check_int("world_size", world_size, minimum=2)
    ka, kb = coefficients(algorithm, n)
    A = np.stack([np.full_like(x, ka), kb * x], axis=1) / t[:, None]
    ones = np.ones_like(t)
    (alpha, beta), *_ = np.linalg.lstsq(A, ones, rcond=None)
    clipped = False
    if alpha < 0:          # a convex quadratic: the optimum over α ≥ 0 is then on α = 0; refit β alone
        alpha, clipped = 0.0, True
        beta = float(A[:, 1] @ ones / (A[:, 1] @ A[:, 1])) if np.any(A[:, 1]) else 0.0
    if beta <= 0:          # times that do not grow with size: β = 0 (bandwidth ∞), α fitted alone
        beta, clipped = 0.0, False
        alpha = float(A[:, 0] @ ones / (A[:, 0] @ A[:, 0]))
    return AlphaBetaFit(algorithm, n, float(alpha), math.inf if beta == 0 else float(1.0 / beta), clipped)


def relative_errors(fit, nbytes, seconds) -> np.ndarray:
    """(predicted − measured) / measured for each point, for any fit with ``predict`` (an :class:`AlphaBetaFit` or
    a :class:`TwoRegimeFit`). ``nbytes``, ``seconds``: 1-D arrays of one length, the times > 0. Raises
    DistlearnValueError."""
    check_record("fit", fit, (AlphaBetaFit, TwoRegimeFit), "fit_alpha_beta(nbytes, seconds, world_size)")
    x, t = check_array("nbytes", nbytes, ndim=1), check_array("seconds", seconds, ndim=1)
    if x.shape != t.shape or np.any(t <= 0):
        raise DistlearnValueError("seconds", f"seconds must be positive times, one per size in nbytes ({len(x)}); "
                                             f"got {len(t)} values.",
                                  f"seconds 必须是正的时间，与 nbytes 的 {len(x)} 个大小一一对应；收到 {len(t)} 个值。")
    return (np.asarray(fit.predict(x), dtype=float) - t) / t


@dataclass
class TwoRegimeFit:
    """Two α-β lines: ``small`` for messages below ``breakpoint`` bytes, ``large`` from it on."""

    small: AlphaBetaFit
    large: AlphaBetaFit
    breakpoint: float

    def predict(self, nbytes) -> np.ndarray:
        """Predicted seconds for each size in ``nbytes``."""
        x = np.asarray(nbytes, dtype=float)
        return np.where(x < self.breakpoint, self.small.predict(x), self.large.predict(x))


def fit_two_regime(nbytes, seconds, world_size: int, algorithm: str = "ring_all_reduce",
                   min_points: int = 3) -> TwoRegimeFit:
    """Fit :func:`fit_alpha_beta` separately to the smaller and the larger messages.

    The sizes are sorted; every split leaving at least ``min_points`` (≥ 3) distinct sizes on each side is tried,
    and the one with the smallest worst relative error over all points wins; ``breakpoint`` is the geometric mean
    of the two sizes around the split. Two points per side are refused: a line (α, β) passes through any two
    points exactly, so such a segment shows 0 % error whatever the machine does, and its α and β mean nothing.
    Needs ≥ 2·min_points distinct sizes. Raises DistlearnValueError otherwise."""
    x, t = check_array("nbytes", nbytes, ndim=1), check_array("seconds", seconds, ndim=1)
    if not isinstance(min_points, (int, np.integer)) or isinstance(min_points, bool) or min_points < 3:
        raise DistlearnValueError(
            "min_points", f"min_points must be an integer ≥ 3, got {min_points!r}: a line passes exactly through "
                          "any two points, so a two-point segment says nothing about the machine.",
            f"min_points 必须是不小于 3 的整数，收到的是 {min_points!r}：任意两个点都恰好落在一条直线上，"
            "只有两个点的一段说明不了机器的任何性质。")
    k_min = int(min_points)
    distinct = len(np.unique(x)) if x.ndim == 1 else 0
    if x.ndim != 1 or x.shape != t.shape or distinct < 2 * k_min:
        raise DistlearnValueError(
            "nbytes", f"need at least {2 * k_min} distinct message sizes for two regimes of {k_min} points each, "
                      f"got {distinct}.",
            f"两段拟合每段至少 {k_min} 个点，共需至少 {2 * k_min} 个不同的消息大小，实际只有 {distinct} 个。")
    order = np.argsort(x, kind="stable")
    x, t = x[order], t[order]
    best = None
    for k in range(1, len(x)):
        if x[k - 1] == x[k] or len(np.unique(x[:k])) < k_min or len(np.unique(x[k:])) < k_min:
            continue
        small = fit_alpha_beta(x[:k], t[:k], world_size, algorithm)
        large = fit_alpha_beta(x[k:], t[k:], world_size, algorithm)
        fit = TwoRegimeFit(small, large, float(np.sqrt(x[k - 1] * x[k])))
        worst = float(np.max(np.abs(relative_errors(fit, x, t))))
        if best is None or worst < best[0]:
            best = (worst, fit)
    return best[1]


@dataclass
class FitComparison:
    """One α-β line against two regimes on the same measured times (:func:`compare_fits`).

    ``err_one``, ``err_two``: (predicted − measured) / measured per size, sizes in ascending order; ``closer``: per
    size ``"one"``, ``"two"`` or ``"tie"`` (the two |errors| within ``tie`` of each other)."""

    nbytes: np.ndarray
    one: AlphaBetaFit
    two: TwoRegimeFit
    err_one: np.ndarray
    err_two: np.ndarray
    closer: tuple
    seconds: np.ndarray

    def too_noisy(self, drop: float = 0.20, max_error: float = 0.30) -> tuple[str, str] | None:
        """Why these times are too noisy to fit, as (English, Chinese), or ``None`` when they are not.

        Too noisy when a larger message was timed faster than any smaller one by more than ``drop`` (a fraction: an
        all-reduce never gets cheaper with size, so such a drop is a wait for the scheduler or another process,
        not the machine), or when even the better of the two fits misses some size by more than ``max_error``
        (neither one line nor two regimes describes the points). Raises DistlearnValueError."""
        drop = check_number("drop", drop, minimum=0.0, maximum=1.0)
        max_error = check_number("max_error", max_error, minimum=0.0, strict_min=True)
        en, zh = [], []
        t = self.seconds
        for i in range(1, len(t)):
            j = int(np.argmax(t[:i]))          # the slowest smaller size: a gradual fall adds up against it
            fall = 1.0 - t[i] / t[j]
            if fall > drop:
                en.append(f"{_size(self.nbytes[i])} took {t[i] * 1e3:.3f} ms, {fall:.0%} less than "
                          f"{_size(self.nbytes[j])} ({t[j] * 1e3:.3f} ms)")
                zh.append(f"{_size(self.nbytes[i])} 用时 {t[i] * 1e3:.3f} ms，比 {_size(self.nbytes[j])}"
                          f"（{t[j] * 1e3:.3f} ms）少 {fall:.0%}")
        worst = min(self.worst_one, self.worst_two)
        if worst > max_error:
            en.append(f"even the better fit misses a size by {worst:.0%} (more than {max_error:.0%})")
            zh.append(f"即使较好的拟合，在某个大小上也差了 {worst:.0%}（超过 {max_error:.0%}）")
        if not en:
            return None
        return "; ".join(en), "；".join(zh)

    def verdict(self, drop: float = 0.20, max_error: float = 0.30) -> tuple[str, str]:
        """One line for the reader, (English, Chinese): "too noisy to fit: …" with the reasons of
        :meth:`too_noisy`, or "clean enough to fit: …" with the checks that passed."""
        noisy = self.too_noisy(drop, max_error)
        if noisy is not None:
            return (f"too noisy to fit: {noisy[0]}. The α and bandwidths above describe the noise, not the "
                    "machine; rerun on an idle machine.",
                    f"噪声太大，无法拟合：{noisy[1]}。上面的 α 和带宽反映的是噪声，而不是机器；请在空闲的机器上重新运行。")
        worst = min(self.worst_one, self.worst_two)
        return (f"clean enough to fit: no size was timed more than {drop:.0%} faster than any smaller one, and the "
                f"better fit misses no size by more than {worst:.0%} (limit {max_error:.0%}).",
                f"数据足够干净，可以拟合：没有哪个大小比任何更小的消息快 {drop:.0%} 以上，较好的拟合在每个大小上的误差都不超过 "
                f"{worst:.0%}（上限 {max_error:.0%}）。")

    @property
    def worst_one(self) -> float:
        """Largest |relative error| of the single line."""
        return float(np.max(np.abs(self.err_one)))

    @property
    def worst_two(self) -> float:
        """Largest |relative error| of the two regimes."""
        return float(np.max(np.abs(self.err_two)))

    @property
    def bandwidth_ratio(self) -> float:
        """Bandwidth of the small-message line over that of the large-message line (1: the same bandwidth; ``inf``
        when only the small-message line is flat, ``nan`` when both are)."""
        return self.two.small.bandwidth / self.two.large.bandwidth

    def count(self, which: str) -> int:
        """At how many sizes ``which`` (``"one"``, ``"two"``, ``"tie"``) is closer."""
        return sum(c == which for c in self.closer)

    def regimes(self, min_ratio: float = 1.5, max_error: float = 0.30) -> tuple[str, str, str]:
        """Chapter 02's rule for believing a second regime, applied: ``(kind, English, Chinese)``.

        ``kind`` is ``"noisy"`` when :meth:`too_noisy` finds the times too noisy (no verdict); ``"two"`` when the two regimes are closer at more than half of the sizes (ties count against
        them) and their bandwidths differ by more than ``min_ratio`` either way (a flat side, ratio ``inf``,
        counts as differing); ``"unclear"`` when that rule fails but one line misses some size by more than
        ``max_error`` while the two regimes miss none by that much (one line does not describe the times, yet
        the rule cannot confirm a second regime); else ``"one"``: one line is as good. Raises
        DistlearnValueError for ``min_ratio`` < 1 or ``max_error`` ≤ 0."""
        min_ratio = check_number("min_ratio", min_ratio, minimum=1.0)
        max_error = check_number("max_error", max_error, minimum=0.0, strict_min=True)
        if self.too_noisy(max_error=max_error) is not None:
            return ("noisy", "no verdict on regimes: the times are too noisy to fit (the line above).",
                    "不判断分段：这些时间噪声太大，无法拟合（见上一行）。")
        n, wins, r = len(self.closer), self.count("two"), self.bandwidth_ratio
        differ = bool(np.isinf(r) or (np.isfinite(r) and (r > min_ratio or r < 1.0 / min_ratio)))
        shown = "∞" if np.isinf(r) else f"{r:.2f}"
        if wins * 2 > n and differ:
            return ("two",
                    f"two regimes: closer at {wins} of {n} sizes and bandwidths {shown}× apart (more than "
                    f"{min_ratio:g}×); believe the second regime.",
                    f"两段：在 {n} 个大小中的 {wins} 个上更接近，带宽相差 {shown} 倍（超过 {min_ratio:g} 倍）；"
                    f"可以相信第二段。")
        if self.worst_one > max_error and self.worst_two <= max_error:
            return ("unclear",
                    f"unclear: two regimes are closer at only {wins} of {n} sizes, so the rule does not confirm "
                    f"them; but one line misses some size by {self.worst_one:.0%} (more than {max_error:.0%}) and "
                    f"two regimes by at most {self.worst_two:.0%}, so one line does not describe these times "
                    f"either. Time more sizes.",
                    f"无法判断：两段只在 {n} 个大小中的 {wins} 个上更接近，规则不能确认第二段；但一条直线在某个大小上"
                    f"误差达 {self.worst_one:.0%}（超过 {max_error:.0%}），两段最多 {self.worst_two:.0%}，"
                    f"所以一条直线也描述不了这些时间。请多测几种大小。")
        why_en = (f"two regimes are closer at only {wins} of {n} sizes" if wins * 2 <= n
                  else f"the two regimes' bandwidths are only {shown}× apart (not more than {min_ratio:g}×)")
        why_zh = (f"两段只在 {n} 个大小中的 {wins} 个上更接近" if wins * 2 <= n
                  else f"两段的带宽只相差 {shown} 倍（不超过 {min_ratio:g} 倍）")
        return ("one", f"one line is as good: {why_en}.", f"一条直线就够了：{why_zh}。")


def compare_fits(nbytes, seconds, world_size: int, algorithm: str = "ring_all_reduce", tie: float = 0.01,
                 min_points: int = 3) -> FitComparison:
    """Fit one α-β line (:func:`fit_alpha_beta`) and two regimes (:func:`fit_two_regime`) to the same times, and
    say at each size which one is closer to the measurement. ``tie``: |errors| closer than this (a fraction,
    0.01 = one percentage point) count as a tie. The two regimes have twice the parameters, so they usually
    lower the errors somewhat even on one-regime data; :meth:`FitComparison.regimes` applies chapter 02's rule
    (closer at most sizes, bandwidths more than 1.5× apart). Raises DistlearnValueError."""
    tie = check_number("tie", tie, minimum=0.0)
    x, t = check_array("nbytes", nbytes, ndim=1), check_array("seconds", seconds, ndim=1)
    two = fit_two_regime(x, t, world_size, algorithm, min_points)
    one = fit_alpha_beta(x, t, world_size, algorithm)
    order = np.argsort(x, kind="stable")
    x, t = x[order], t[order]
    e1, e2 = relative_errors(one, x, t), relative_errors(two, x, t)
    closer = tuple("tie" if abs(abs(a) - abs(b)) <= tie else "one" if abs(a) < abs(b) else "two"
                   for a, b in zip(e1, e2))
    return FitComparison(x, one, two, e1, e2, closer, t)


def _size(nbytes: float) -> str:
    """4096 → '4 KiB', 67108864 → '64 MiB' (binary units, as the sizes chapter 02 times)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"
