"""Checkers for chapter 02 (collective communication). Expected values come from numpy computed directly and
from :mod:`distlearn.comm` / :mod:`distlearn.cost`, which tests/test_comm.py checks against closed forms."""
from __future__ import annotations

import numpy as np

from .. import cost
from ..check import Case, Why, difference, verify
from ..comm import VirtualCluster, ring_bytes_per_rank


def _ring_case(n: int, length: int, seed: int) -> Case:
    """A case calling ``fn(cluster, arrays)`` on a fresh cluster; passes if every rank gets the sum and every
    rank sent exactly what the ring sends (chunks split like np.array_split)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(-20, 20, size=length).astype(np.float64) for _ in range(n)]
    cluster = VirtualCluster(n)
    total = np.sum(arrays, axis=0)
    sizes = [len(c) * 8 for c in np.array_split(np.zeros(length), n)]
    want_bytes = [0 if n == 1 else 2 * length * 8 - sizes[r] - sizes[(r + 1) % n] for r in range(n)]

    def compare(got, _expected):
        """The first thing wrong: the result's form, a rank's sums, the cluster's own collectives, the traffic."""
        if not isinstance(got, (list, tuple)) or len(got) != n:
            return Why(f"returned {type(got).__name__} of length {len(got) if hasattr(got, '__len__') else '?'}, "
                       f"expected a list of {n} arrays (one per rank)",
                       f"返回了长度为 {len(got) if hasattr(got, '__len__') else '?'} 的 {type(got).__name__}，"
                       f"应为 {n} 个数组的列表（每个 rank 一个）")
        for r, g in enumerate(got):
            why = difference(g, total, rtol=0, atol=0)
            if why is not None:
                return why.within(f"rank {r}'s result", f"rank {r} 的结果")
        if cluster.steps:  # filled only by the cluster's own collectives
            return Why("the sums are right, but they come from the cluster's own collective: use only "
                       "cluster.send and cluster.recv",
                       "求和结果正确，但用的是集群自带的集合通信：只能用 cluster.send 和 cluster.recv")
        sent = [int(b) for b in cluster.bytes_sent]
        if sent != want_bytes:
            r = next(i for i, (a, b) in enumerate(zip(sent, want_bytes)) if a != b)
            return Why(f"every rank got the right sums, but the traffic is not a ring's: rank {r} sent {sent[r]} "
                       f"bytes instead of {want_bytes[r]} (all ranks: {sent})",
                       f"每个 rank 的求和结果都正确，但通信量不是环形算法的：rank {r} 发送了 {sent[r]} 字节，"
                       f"应为 {want_bytes[r]}（各 rank：{sent}）")
        return True

    return Case(args=(cluster, [a.copy() for a in arrays]), expected=[total] * n, compare=compare,
                hint_en="in a ring every message goes to the next rank (r → r+1): n−1 reduce-scatter steps "
                        "(each rank passes one chunk on and adds the chunk it receives), then n−1 all-gather steps "
                        "(each rank passes a finished chunk on). Chunks as np.array_split cuts them; only "
                        "cluster.send and cluster.recv.",
                hint_zh="环形算法中每条消息都发给下一个 rank（r → r+1）：先做 n−1 步 ReduceScatter（每个 rank 传出一块，"
                        "并把收到的一块累加），再做 n−1 步 AllGather（每个 rank 传出一块已完成的数据）。数据块按 "
                        "np.array_split 切分；只用 cluster.send 和 cluster.recv。")


def ex02_ring_all_reduce(fn):
    """``ring_all_reduce(cluster, arrays)`` → list of per-rank sums, using only cluster.send / cluster.recv."""
    cases = [_ring_case(n, length, seed) for n, length, seed in
             [(2, 8, 0), (4, 8, 1), (3, 10, 2), (5, 7, 3), (1, 4, 4), (4, 3, 5), (8, 64, 6)]]
    verify("ex02_ring_all_reduce", fn, cases)


def ex02_all_reduce_bytes(fn):
    """``all_reduce_bytes(nbytes, world_size)`` → bytes each rank sends in a ring all-reduce."""
    cases = [Case(args=(m, n), expected=ring_bytes_per_rank("all_reduce", m, n), rtol=1e-12,
                  hint_en="2(n−1)/n × the message: n−1 reduce-scatter steps and n−1 all-gather steps, each "
                          "sending 1/n of it. 0 for one rank.",
                  hint_zh="2(n−1)/n × 消息大小：n−1 步 ReduceScatter 加 n−1 步 AllGather，每步发送 1/n。"
                          "只有一个 rank 时为 0。")
             for m, n in [(14e9, 8), (1e6, 2), (4e6, 1), (1e9, 1024), (3e3, 3)]]
    verify("ex02_all_reduce_bytes", fn, cases)


def ex02_bus_bandwidth(fn):
    """``bus_bandwidth(nbytes, seconds, world_size)`` → all-reduce bus bandwidth in bytes/s (nccl-tests)."""
    cases = [Case(args=(m, t, n), expected=cost.busbw("all_reduce", m, t, n), rtol=1e-12,
                  hint_en="algbw = nbytes / seconds; busbw = algbw × 2(n−1)/n (nccl-tests doc/PERFORMANCE.md).",
                  hint_zh="算法带宽 algbw = nbytes / seconds；总线带宽 busbw = algbw × 2(n−1)/n"
                          "（nccl-tests 的 doc/PERFORMANCE.md）。")
             for m, t, n in [(1e9, 0.01, 8), (2**30, 0.5, 2), (1e6, 1e-3, 1), (8e6, 2e-3, 16)]]
    verify("ex02_bus_bandwidth", fn, cases)


def ex02_ring_time(fn):
    """``ring_all_reduce_time(nbytes, world_size, alpha, bandwidth)`` → seconds (α-β model)."""
    cases = [Case(args=(m, n, a, b), expected=cost.collective_time("ring_all_reduce", m, n, alpha=a, bandwidth=b),
                  rtol=1e-12,
                  hint_en="2(n−1) messages, each costing α, plus 2(n−1)/n × nbytes / bandwidth.",
                  hint_zh="2(n−1) 条消息，每条花费 α，再加 2(n−1)/n × nbytes / bandwidth。")
             for m, n, a, b in [(1e9, 8, 1e-5, 1e11), (1e3, 64, 5e-6, 1e10), (1e6, 2, 0.0, 1e9), (5e5, 1, 1e-5, 1e9)]]
    verify("ex02_ring_time", fn, cases)
