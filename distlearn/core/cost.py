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
recursive-doubling all-reduce              ⌈log₂n⌉·α                    ⌈log₂n⌉ · M·β
Rabenseifner all-reduce (halving+doubling) 2⌈log₂n⌉·α                   2(n−1)/n · M·β
tree all-reduce (binomial reduce + bcast)  2⌈log₂n⌉·α                   2⌈log₂n⌉ · M·β
binomial-tree broadcast                    ⌈log₂n⌉·α                    ⌈log₂n⌉ · M·β
pipelined chain broadcast, k chunks        (n−1+k−1)·α                  (n−1+k−1)/k · M·β
=========================================  ===========================  ====================

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

One α-β line rarely fits measured times from kilobytes to tens of megabytes: small messages are dominated by a
per-call cost and stay in the CPU caches, large ones stream from memory. :func:`fit_alpha_beta` fits one line;
:func:`fit_two_regime` fits one line to the small messages and one to the large, splitting where the worst
relative error over all points is smallest.

Units: seconds, bytes, bytes per second (GB/s = 1e9 B/s).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_number

ALGORITHMS = ("ring_all_reduce", "ring_all_gather", "ring_reduce_scatter", "recursive_doubling_all_reduce",
              "rabenseifner_all_reduce", "tree_all_reduce", "tree_broadcast", "chain_broadcast")

BUSBW_FACTOR_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")


def coefficients(algorithm: str, world_size: int, num_chunks: int = 1) -> tuple[float, float]:
    """``(k_α, k_β)`` such that time = k_α·α + k_β·M·β for ``algorithm`` on ``world_size`` ranks (table above).

    ``num_chunks`` only matters for ``chain_broadcast``. Raises DistlearnValueError for bad arguments."""
    check_choice("algorithm", algorithm, ALGORITHMS)
    n = check_int("world_size", world_size, minimum=1)
    k = check_int("num_chunks", num_chunks, minimum=1)
    if n == 1:
        return 0.0, 0.0
    lg = math.ceil(math.log2(n))
    return {
        "ring_all_reduce": (2 * (n - 1), 2 * (n - 1) / n),
        "ring_all_gather": (n - 1, (n - 1) / n),
        "ring_reduce_scatter": (n - 1, (n - 1) / n),
        "recursive_doubling_all_reduce": (lg, lg),
        "rabenseifner_all_reduce": (2 * lg, 2 * (n - 1) / n),
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
    """A fitted α-β model: ``alpha`` seconds per message, ``bandwidth`` bytes/s per link (1/β)."""

    algorithm: str
    world_size: int
    alpha: float
    bandwidth: float

    def predict(self, nbytes) -> np.ndarray:
        """Predicted seconds for each size in ``nbytes``."""
        ka, kb = coefficients(self.algorithm, self.world_size)
        return ka * self.alpha + kb * np.asarray(nbytes, dtype=float) / self.bandwidth


def fit_alpha_beta(nbytes, seconds, world_size: int, algorithm: str = "ring_all_reduce") -> AlphaBetaFit:
    """Least-squares fit of ``seconds ≈ k_α·α + k_β·nbytes·β`` (α, β ≥ 0) to measured times.

    ``nbytes``, ``seconds``: 1-D sequences of equal length ≥ 2 (bytes, seconds). The fit minimizes relative error
    (each row divided by its time) so that small and large messages count alike. Raises DistlearnValueError."""
    x = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if x.ndim != 1 or x.shape != t.shape or len(x) < 2 or np.any(t <= 0) or np.any(x < 0):
        raise DistlearnValueError("seconds", "need ≥ 2 (nbytes, seconds) pairs with positive times.",
                                  "至少需要 2 组 (nbytes, seconds)，且时间为正。")
    n = check_int("world_size", world_size, minimum=2)
    ka, kb = coefficients(algorithm, n)
    A = np.stack([np.full_like(x, ka), kb * x], axis=1) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    alpha, beta = max(alpha, 0.0), max(beta, 1e-30)
    return AlphaBetaFit(algorithm, n, float(alpha), float(1.0 / beta))


def relative_errors(fit, nbytes, seconds) -> np.ndarray:
    """(predicted − measured) / measured for each point, for any fit with ``predict``."""
    t = np.asarray(seconds, dtype=float)
    return (np.asarray(fit.predict(nbytes), dtype=float) - t) / t


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

    The sizes are sorted; every split leaving at least ``min_points`` (≥ 3) points on each side is tried, and the
    one with the smallest worst relative error over all points wins; ``breakpoint`` is the geometric mean of the
    two sizes around the split. At least 3 points per side: a line through 2 points fits them exactly whatever they
    are, so a 2-point segment would report 0 % error and a meaningless α (issue 32, item 5). Needs ≥ 2·min_points
    points. Raises DistlearnValueError otherwise."""
    x = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    k_min = check_int("min_points", min_points, minimum=3)
    if x.ndim != 1 or x.shape != t.shape or len(x) < 2 * k_min:
        raise DistlearnValueError(
            "nbytes", f"nbytes: two regimes need at least {2 * k_min} (nbytes, seconds) pairs, {k_min} on each "
                      f"side of the split (a line through 2 points fits anything); got {len(x)}.",
            f"nbytes：两段拟合至少需要 {2 * k_min} 组 (nbytes, seconds)，分界两侧各 {k_min} 组（过两点的直线总能完全拟合）；"
            f"收到 {len(x)} 组。")
    order = np.argsort(x)
    x, t = x[order], t[order]
    best = None
    for k in range(k_min, len(x) - k_min + 1):
        if x[k - 1] == x[k]:
            continue
        small = fit_alpha_beta(x[:k], t[:k], world_size, algorithm)
        large = fit_alpha_beta(x[k:], t[k:], world_size, algorithm)
        fit = TwoRegimeFit(small, large, float(np.sqrt(x[k - 1] * x[k])))
        worst = float(np.max(np.abs(relative_errors(fit, x, t))))
        if best is None or worst < best[0]:
            best = (worst, fit)
    if best is None:
        raise DistlearnValueError("nbytes", f"nbytes: need at least {k_min} distinct sizes on each side of a split.",
                                  f"nbytes：分界两侧都至少需要 {k_min} 个不同的消息大小。")
    return best[1]
