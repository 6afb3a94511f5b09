"""Checkers for chapter 02 (collective communication). Expected values come from numpy computed directly and
from :mod:`distlearn.comm` / :mod:`distlearn.cost`, which tests/test_comm.py checks against closed forms."""
from __future__ import annotations

import numpy as np

from .. import cost
from ..check import Case, verify
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
        ok = (isinstance(got, (list, tuple)) and len(got) == n
              and all(np.asarray(g).shape == total.shape and np.array_equal(g, total) for g in got))
        # cluster.steps is filled only by the cluster's own collectives: the answer must use send/recv
        return ok and list(cluster.bytes_sent) == want_bytes and not cluster.steps

    return Case(args=(cluster, [a.copy() for a in arrays]),
                expected=f"[np.sum(arrays, axis=0)] * {n}; cluster.bytes_sent == {want_bytes}", compare=compare,
                hint_en="split each array into n chunks with np.array_split; n−1 reduce-scatter steps (rank r sends "
                        "chunk (r−s−1) mod n to r+1 with cluster.send, r+1 receives with cluster.recv and adds), "
                        "then n−1 all-gather steps (rank r forwards chunk (r−s) mod n). Every message goes r → r+1; "
                        "don't call the cluster's own all_reduce.",
                hint_zh="用 np.array_split 把每个数组切成 n 块；先做 n−1 步 ReduceScatter（第 s 步 rank r 用 "
                        "cluster.send 把第 (r−s−1) mod n 块发给 r+1，r+1 用 cluster.recv 接收并相加），再做 n−1 步 "
                        "AllGather（rank r 转发第 (r−s) mod n 块）。每条消息都是 r → r+1；"
                        "不要调用集群自带的 all_reduce。")


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
