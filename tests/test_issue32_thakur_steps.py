"""Issue 32, fourth audit (chapter 02): the step counts of recursive doubling and Rabenseifner's all-reduce when n is
not a power of two. Thakur, Rabenseifner & Gropp 2005, §4, and MPICH (src/mpi/coll/allreduce/
allreduce_intra_recursive_doubling.c, allreduce_intra_reduce_scatter_allgather.c, whose comment gives the cost
(2·floor(lgp)+2)·alpha) fold the r = n − p′ extra ranks into a neighbour first, run the algorithm on p′ = 2^⌊log₂n⌋
ranks, and send the result back at the end: two more steps, not ⌈log₂n⌉ rounding. The algorithms are run here
step by step on numpy vectors, the sums checked, and the steps and the bytes of the longest message of each step
counted — independently of :mod:`distlearn.core.cost`, which must agree, and so must chapter 02's prose."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from distlearn.core import cost

ROOT = Path(__file__).resolve().parents[1]


def _fold(vals, rem):
    """The first step for n not a power of two: even ranks < 2·rem send their vector to rank + 1 (MPICH)."""
    for r in range(0, 2 * rem, 2):
        vals[r + 1] = vals[r + 1] + vals[r]
    return [r for r in range(len(vals)) if not (r < 2 * rem and r % 2 == 0)]   # the p′ ranks that go on


def run(algorithm, n, length=None, seed=0):
    """Run ``algorithm`` ("recursive_doubling" or "rabenseifner") on n ranks; return (steps, Σ over steps of the
    largest message of the step in units of the whole message M), after checking every rank has the sum."""
    pof2 = 1 << (n.bit_length() - 1)
    length = length or 4 * pof2
    rng = np.random.default_rng(seed)
    vals = [rng.integers(-9, 9, length).astype(float) for _ in range(n)]
    total = np.sum(vals, axis=0)
    rem, steps, volume = n - pof2, 0, 0.0
    live = list(range(n))
    if rem:
        live = _fold(vals, rem)
        steps, volume = 1, 1.0
    assert len(live) == pof2
    if algorithm == "recursive_doubling":
        mask = 1
        while mask < pof2:
            vals = _exchange_whole(vals, live, mask)
            steps, volume, mask = steps + 1, volume + 1.0, mask * 2
    else:
        # reduce-scatter by recursive halving: partners at distance pof2/2, pof2/4, …; each keeps half its part
        part = {i: (0, length) for i in range(pof2)}
        mask = pof2 // 2
        while mask >= 1:
            new = {}
            for i in range(pof2):
                j = i ^ mask
                lo, hi = part[i]
                mid = (lo + hi) // 2
                new[i] = (lo, mid) if i < j else (mid, hi)
            snapshot = [v.copy() for v in vals]
            for i in range(pof2):
                j = i ^ mask
                lo, hi = new[i]
                vals[live[i]][lo:hi] = snapshot[live[i]][lo:hi] + snapshot[live[j]][lo:hi]
            steps += 1
            volume += (part[0][1] - part[0][0]) / 2 / length
            part, mask = new, mask // 2
        # all-gather by recursive doubling: the parts grow back in reverse order
        mask = 1
        while mask < pof2:
            snapshot = [v.copy() for v in vals]
            for i in range(pof2):
                j = i ^ mask
                lo, hi = part[j]
                vals[live[i]][lo:hi] = snapshot[live[j]][lo:hi]
            size = part[0][1] - part[0][0]
            part = {i: (min(part[i][0], part[i ^ mask][0]), max(part[i][1], part[i ^ mask][1])) for i in range(pof2)}
            steps += 1
            volume += size / length
            mask *= 2
    if rem:
        for r in range(0, 2 * rem, 2):
            vals[r] = vals[r + 1].copy()
        steps, volume = steps + 1, volume + 1.0
    for r in range(n):
        np.testing.assert_array_equal(vals[r], total)
    return steps, volume


def _exchange_whole(vals, live, mask):
    snapshot = [v.copy() for v in vals]
    for i in range(len(live)):
        vals[live[i]] = snapshot[live[i]] + snapshot[live[i ^ mask]]
    return vals


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 64, 100])
def test_cost_counts_the_steps_thakur_et_al_run(n):
    floor_lg = n.bit_length() - 1
    steps, volume = run("recursive_doubling", n)
    assert cost.coefficients("recursive_doubling_all_reduce", n) == (steps, pytest.approx(volume))
    assert steps == (math.ceil(math.log2(n)) if n & (n - 1) == 0 else floor_lg + 2)
    steps, volume = run("rabenseifner", n)
    assert cost.coefficients("rabenseifner_all_reduce", n) == (steps, pytest.approx(volume))
    assert steps == 2 * floor_lg + (0 if n & (n - 1) == 0 else 2)       # MPICH: (2·floor(lgp)+2)·alpha


def test_not_a_power_of_two_costs_one_step_more_than_rounding_up():
    for n in (3, 5, 6, 7, 9, 100):
        assert cost.coefficients("recursive_doubling_all_reduce", n)[0] == math.ceil(math.log2(n)) + 1
        assert cost.coefficients("tree_broadcast", n)[0] == math.ceil(math.log2(n))    # binomial: any n


def test_chapter02_says_what_the_code_counts():
    text = (ROOT / "notebooks" / "02_collectives.md").read_text(encoding="utf-8")
    en = re.search(r"<summary><b>Under the hood</b>: when n is not a power of two</summary>(.*?)</details>", text, re.S)
    zh = re.search(r"<summary><b>深入一步</b>：n 不是 2 的幂时</summary>(.*?)</details>", text, re.S)
    assert en and zh
    for aside in (en.group(1), zh.group(1)):
        assert "⌊log₂ n⌋ + 2" in aside and "2⌊log₂ n⌋ + 2" in aside and "⌈log₂ n⌉" in aside
    assert "rounds" not in en.group(1) and "向上取整" not in zh.group(1)
