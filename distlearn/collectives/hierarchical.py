"""The two-level (hierarchical) all-reduce, simulated with real numbers on :class:`distlearn.core.comm.VirtualCluster`
rings (chapter 02, "Where the bytes travel").

``n = d·k`` ranks sit in ``d`` NVLink domains of ``k`` (rank ``r`` in domain ``r // k`` at local index ``r % k``):

1. a ring **reduce-scatter inside** each domain: local rank ``i`` ends with chunk ``i`` (M/k bytes) summed over its
   domain; it sends (k−1)/k·M bytes over NVLink;
2. a ring **all-reduce across** domains among the ``d`` ranks of the same local index (one rail each): chunk ``i``
   summed over all n ranks; 2(d−1)/d·M/k bytes over the network;
3. a ring **all-gather inside** each domain: every rank gets all k chunks; (k−1)/k·M bytes over NVLink.

The sum is the same as one flat all-reduce over n ranks: integers exactly, floats to rounding (the additions run in
another order). The byte counts come from the rings' own traffic counters, not from the formulas, so the tests can
hold them against :func:`distlearn.core.topology.collective_cost`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distlearn.core.comm import VirtualCluster
from distlearn.core.validate import DistlearnValueError, check_array, check_int


@dataclass
class HierarchicalRun:
    """The result of :func:`simulate_hierarchical_all_reduce`: ``outputs`` (one array per rank, the input's shape),
    ``bytes_per_level`` (``{"reduce_scatter inside", "all_reduce across", "all_gather inside"}`` → int64 array of
    the bytes each rank sent in that stage), ``domains`` (d) and ``per_domain`` (k)."""

    outputs: list
    bytes_per_level: dict
    domains: int
    per_domain: int


def simulate_hierarchical_all_reduce(arrays, gpus_per_domain: int) -> HierarchicalRun:
    """Sum ``arrays`` (one 1-D array per rank, equal lengths divisible by ``gpus_per_domain``) with the three stages
    above. ``gpus_per_domain`` (k) must divide the number of ranks. Raises DistlearnValueError otherwise."""
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise DistlearnValueError("arrays", "arrays must be a non-empty list with one array per rank.",
                                  "arrays 必须是非空列表，每个 rank 一个数组。")
    for a in arrays:
        check_array("arrays", a)                      # real, finite numbers (NaN refused) / 实数且有限
    xs = [np.asarray(a) for a in arrays]
    n = len(xs)
    k = check_int("gpus_per_domain", gpus_per_domain, minimum=1, maximum=n)
    if n % k:
        raise DistlearnValueError("gpus_per_domain", f"gpus_per_domain = {k} must divide the {n} ranks.",
                                  f"gpus_per_domain = {k} 必须整除 rank 数 {n}。")
    if any(x.ndim != 1 or x.shape != xs[0].shape for x in xs) or xs[0].size % k:
        raise DistlearnValueError("arrays", f"arrays must be 1-D, of equal length, divisible by {k}.",
                                  f"arrays 必须是一维、等长，且长度能被 {k} 整除。")
    d = n // k
    levels = {name: np.zeros(n, dtype=np.int64)
              for name in ("reduce_scatter inside", "all_reduce across", "all_gather inside")}
    inside, across = VirtualCluster(k), VirtualCluster(d)
    shards = [None] * n
    for dom in range(d):                                   # 1. reduce-scatter inside each domain / 域内 ReduceScatter
        ranks = list(range(dom * k, (dom + 1) * k))
        inside.reset_traffic()
        for r, s in zip(ranks, inside.reduce_scatter([xs[r] for r in ranks])):
            shards[r] = s
        levels["reduce_scatter inside"][ranks] = inside.bytes_sent
    for i in range(k):                                     # 2. all-reduce across domains, one rail each / 跨域 AllReduce，每条轨道一组
        ranks = list(range(i, n, k))
        across.reset_traffic()
        for r, s in zip(ranks, across.all_reduce([shards[r] for r in ranks])):
            shards[r] = s
        levels["all_reduce across"][ranks] = across.bytes_sent
    outputs = [None] * n
    for dom in range(d):                                   # 3. all-gather inside each domain / 域内 AllGather
        ranks = list(range(dom * k, (dom + 1) * k))
        inside.reset_traffic()
        for r, full in zip(ranks, inside.all_gather([shards[r] for r in ranks])):
            outputs[r] = full
        levels["all_gather inside"][ranks] = inside.bytes_sent
    return HierarchicalRun(outputs, levels, d, k)
