"""Checkers for chapter 02 (collective communication). Expected values come from numpy computed directly and
from :mod:`distlearn.core.comm` / :mod:`distlearn.core.cost`, which tests/test_comm.py checks against closed forms,
and from :mod:`distlearn.core.topology` (the two-level all-reduce), which tests/test_topology.py checks."""
from __future__ import annotations

import numpy as np

from distlearn.core import cost
from distlearn.core.check import Case, Why, difference, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.core.comm import VirtualCluster, ring_bytes_per_rank
from distlearn.core.topology import Topology, collective_cost
from distlearn.core.guard import read_only


def _halving_doubling_case(n: int, length: int, seed: int) -> Case:
    """A case calling ``fn(cluster, arrays)`` on a fresh cluster of ``n`` ranks (a power of two, ``length`` a
    multiple of n); passes if every rank gets the sum, only send/recv were used, and every rank sent what
    Rabenseifner's algorithm sends: 2(n−1)/n × the message in at most 2·log₂n messages (:func:`distlearn.core.cost.coefficients`,
    Thakur, Rabenseifner & Gropp 2005)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(-20, 20, size=length).astype(np.float64) for _ in range(n)]
    cluster = VirtualCluster(n)
    total = np.sum(arrays, axis=0)
    k_alpha, k_beta = cost.coefficients("rabenseifner_all_reduce", n)
    want_messages, want_bytes = int(k_alpha), round(k_beta * length * 8)

    def compare(got, _expected):
        """The first thing wrong: the result's form, a rank's sums, the cluster's own collectives, bytes, messages."""
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
        if any(b != want_bytes for b in sent):
            r = next(i for i, b in enumerate(sent) if b != want_bytes)
            return Why(f"every rank got the right sums, but rank {r} sent {sent[r]} bytes instead of {want_bytes} "
                       f"(all ranks: {sent})",
                       f"每个 rank 的求和结果都正确，但 rank {r} 发送了 {sent[r]} 字节，应为 {want_bytes}"
                       f"（各 rank：{sent}）")
        messages = [int(m) for m in cluster.messages_sent]
        if any(m > want_messages for m in messages):   # fewer, with these bytes, is no worse
            r = next(i for i, m in enumerate(messages) if m > want_messages)
            return Why(f"right sums and right bytes, but rank {r} sent {messages[r]} messages, more than the "
                       f"{want_messages} = 2·log₂{n} of halving-doubling (all ranks: {messages}): each message "
                       f"costs a latency α",
                       f"求和与字节数都正确，但 rank {r} 发送了 {messages[r]} 条消息，多于递归减半-递归倍增的 "
                       f"{want_messages} = 2·log₂{n} 条（各 rank：{messages}）：每条消息都要付出一次延迟 α")
        return True

    return Case(args=(cluster, [a.copy() for a in arrays]), expected=[total] * n, compare=compare,
                hint_en="Pair rank r with rank r XOR d for d = n/2, n/4, …, 1: the two partners split the part they "
                        "are working on into halves, each sends the other one message with the half it gives away "
                        "and adds the half it receives. After log₂n steps each rank owns 1/n of the sum; then undo "
                        "the steps in reverse order, each partner sending the other the part it completed.",
                hint_zh="让 rank r 与 rank r XOR d 配对，d 依次取 n/2、n/4、…、1：两个伙伴把当前负责的那部分一分为二，"
                        "各自把让出的一半用一条消息发给对方，并把收到的一半累加到自己的数据上。log₂n 步之后，每个 rank "
                        "持有总和的 1/n；然后按相反顺序重走这些步，伙伴之间互相发送各自已完成的部分。")


def ex02_halving_doubling_all_reduce(fn):
    """``halving_doubling_all_reduce(cluster, arrays)`` → list of per-rank sums, using only cluster.send /
    cluster.recv, with Rabenseifner's traffic (2(n−1)/n × the message in 2·log₂n messages per rank)."""
    cases = [_halving_doubling_case(n, length, seed) for n, length, seed in
             [(2, 8, 0), (4, 8, 1), (4, 12, 2), (8, 16, 3), (1, 4, 4), (8, 64, 5), (16, 32, 6)]]
    verify("ex02_halving_doubling_all_reduce", fn, cases)


def ex02_all_reduce_bytes(fn):
    """``all_reduce_bytes(nbytes, world_size)`` → bytes each rank sends in a ring all-reduce."""
    cases = [Case(args=(m, n), expected=ring_bytes_per_rank("all_reduce", m, n), rtol=1e-12,
                  hint_en="A ring all-reduce is a reduce-scatter followed by an all-gather: count the steps of "
                          "each phase on n ranks and what share of the message one step sends. Counted one phase "
                          "only, or a whole message per step? A single rank sends nothing.",
                  hint_zh="环形 AllReduce 由 ReduceScatter 和 AllGather 两部分组成：数一数 n 个 rank 时每一部分"
                          "有几步、每一步发送消息的几分之几。是不是只算了其中一部分，或者每一步都发了整条消息？"
                          "只有一个 rank 时什么也不用发。")
             for m, n in [(14e9, 8), (1e6, 2), (4e6, 1), (1e9, 1024), (3e3, 3)]]
    verify("ex02_all_reduce_bytes", fn, cases)


def ex02_bus_bandwidth(fn):
    """``bus_bandwidth(nbytes, seconds, world_size)`` → all-reduce bus bandwidth in bytes/s (nccl-tests)."""
    cases = [Case(args=(m, t, n), expected=cost.busbw("all_reduce", m, t, n), rtol=1e-12,
                  hint_en="Start from the algorithm bandwidth, nbytes / seconds. Bus bandwidth rescales it to what "
                          "each rank's link really carried in a ring all-reduce: how many n-ths of the data does "
                          "a rank send in the reduce-scatter, and how many in the all-gather? With one rank, "
                          "nothing moves (nccl-tests doc/PERFORMANCE.md).",
                  hint_zh="先算算法带宽 nbytes / seconds。总线带宽把它换算成环形 AllReduce 中每个 rank 的链路实际"
                          "传输的量：ReduceScatter 阶段一个 rank 发送几份 1/n 的数据？AllGather 阶段又发送几份？只有"
                          "一个 rank 时什么也不传（nccl-tests 的 doc/PERFORMANCE.md）。")
             for m, t, n in [(1e9, 0.01, 8), (2**30, 0.5, 2), (1e6, 1e-3, 1), (8e6, 2e-3, 16)]]
    verify("ex02_bus_bandwidth", fn, cases)


def ex02_ring_time(fn):
    """``ring_all_reduce_time(nbytes, world_size, alpha, bandwidth)`` → seconds (α-β model)."""
    cases = [Case(args=(m, n, a, b), expected=cost.collective_time("ring_all_reduce", m, n, alpha=a, bandwidth=b),
                  rtol=1e-12,
                  hint_en="Count the ring's steps: the reduce-scatter and the all-gather each take one step per "
                          "other rank. Every step pays the latency α once and sends one n-th of the data over "
                          "the bandwidth. Add up both phases.",
                  hint_zh="数一数环上的步数：ReduceScatter 和 AllGather 各需要的步数等于其他 rank 的个数。每一步付一次"
                          "延迟 α，并以该带宽发送 1/n 的数据。把两个阶段加起来。")
             for m, n, a, b in [(1e9, 8, 1e-5, 1e11), (1e3, 64, 5e-6, 1e10), (1e6, 2, 0.0, 1e9), (5e5, 1, 1e-5, 1e9)]]
    verify("ex02_ring_time", fn, cases)


def _hierarchical_seconds(nbytes, per_domain, domains, intra_bw, network_bw, alpha_intra, alpha_network) -> float:
    """The expected answer: :func:`distlearn.core.topology.collective_cost` of a hierarchical all-reduce on a
    topology of ``domains`` domains of ``per_domain`` GPUs with these bandwidths (bytes/s) and latencies (s)."""
    topo = Topology("exercise", per_domain, intra_bw, network_bw, gpus_per_host=per_domain,
                    nics_per_host=per_domain, alpha_intra=alpha_intra, alpha_network=alpha_network)
    return collective_cost(topo, "all_reduce", nbytes, per_domain * domains, per_domain=per_domain,
                           algorithm="hierarchical").seconds


#: Hidden cases of :func:`ex02_hierarchical_time`: (nbytes, per_domain, domains, intra_bw, network_bw, alpha_intra,
#: alpha_network); H100 (450 / 50 GB/s) and GB200 NVL72 (900 GB/s, 72 per domain) figures, one GPU per domain, one
#: domain, one GPU.
HIERARCHICAL_CASES = read_only([(14e9, 8, 2, 450e9, 50e9, 0.0, 0.0), (1e9, 8, 8, 450e9, 50e9, 2e-6, 1e-5),
                      (6e8, 4, 3, 900e9, 50e9, 3e-6, 2e-5), (1e6, 1, 4, 450e9, 50e9, 1e-6, 1e-5),
                      (1e6, 8, 1, 450e9, 50e9, 1e-6, 1e-5), (2e9, 72, 2, 900e9, 50e9, 1e-6, 1e-5),
                      (5e5, 1, 1, 450e9, 50e9, 1e-6, 1e-5)])


def ex02_hierarchical_time(fn):
    """``hierarchical_all_reduce_time(nbytes, per_domain, domains, intra_bw, network_bw, alpha_intra,
    alpha_network)`` → seconds of the two-level all-reduce (α-β model): a ring reduce-scatter inside each domain, a
    ring all-reduce across domains among the GPUs of one rail, a ring all-gather inside (chapter 02, "Where the bytes
    travel"; expected values from :func:`distlearn.core.topology.collective_cost`)."""
    cases = [Case(args=args, expected=_hierarchical_seconds(*args), rtol=1e-12,
                  hint_en="Time the three steps one by one, each on its own link, and add them. Steps 1 and 3 run "
                          "among the GPUs of one domain over the fast link: how many ring steps does each take, and "
                          "what share of the message does one step send? Step 2 runs among the GPUs of one rail over "
                          "the network, on what each GPU kept after step 1, not on the whole message. With one GPU "
                          "per domain, or one domain, some steps have nothing to do.",
                  hint_zh="把三步逐一计时，每一步用它自己的链路，最后相加。第 1 步和第 3 步在一个域内的 GPU 之间、经高速"
                          "链路进行：各需要几步环上的传输，每一步发送消息的几分之几？第 2 步在同一条轨道上的 GPU 之间、"
                          "经网络进行，处理的是第 1 步之后每块 GPU 留下的那一份，而不是整条消息。每个域只有一块 GPU，"
                          "或者只有一个域时，有的步骤无事可做。")
             for args in HIERARCHICAL_CASES]
    verify("ex02_hierarchical_time", fn, cases)
