"""Checkers for chapter 04 (tensor parallelism). Expected values come from :mod:`distlearn.tensor_parallel.simulation` and
:mod:`distlearn.memory.formulas`, which the tests check against PyTorch autograd and the closed forms."""
from __future__ import annotations

import numpy as np

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.memory.formulas import activation_bytes_per_layer
from distlearn.tensor_parallel.simulation import layer_comm_bytes


def _ring_all_reduce_bytes_rank0(num_elements: int, itemsize: int, world_size: int) -> int:
    """Bytes rank 0 sends in a ring all-reduce of ``num_elements`` split like ``np.array_split``: it sends every
    chunk but chunk 1 in the reduce-scatter phase and every chunk but chunk 0 in the all-gather phase, i.e.
    2·M − |c0| − |c1| bytes (2(n−1)/n·M when n divides the message)."""
    if world_size == 1:
        return 0
    sizes = [len(c) for c in np.array_split(np.arange(num_elements), world_size)]
    return (2 * num_elements - sizes[0] - sizes[1]) * itemsize


_PARTS = (("the output", "输出"), ("bytes sent by rank 0", "rank 0 发送的字节数"))
_PARTS_GRAD = (("grad_x", "grad_x"), ("bytes sent by rank 0", "rank 0 发送的字节数"))


def ex04_row_parallel_forward(fn) -> None:
    """``fn(x, w, tp) -> (output, bytes_sent_per_rank)``: split x by columns and w by rows over ``tp`` ranks of a
    VirtualCluster, multiply locally, all-reduce the partial sums."""
    cases = []
    for seed, (m, k, n, tp) in enumerate([(3, 8, 5, 2), (2, 12, 4, 4), (4, 8, 3, 8), (2, 6, 6, 1), (5, 6, 2, 3)]):
        rng = np.random.default_rng(seed)
        # small integers stored as float64: every product and sum is exact, so the expected output shows no
        # rounding noise when a failing case is printed
        x, w = rng.integers(-4, 5, (m, k)).astype(float), rng.integers(-4, 5, (k, n)).astype(float)
        expected = (x @ w, _ring_all_reduce_bytes_rank0(m * n, 8, tp))
        cases.append(Case(args=(x, w, tp), expected=expected, rtol=1e-9, atol=1e-12, parts=_PARTS,
                          hint_en="Rank r multiplies x[:, its block of columns] by w[its block of rows]; the partial "
                                  "products must be summed with cluster.all_reduce (not concatenated). Return the "
                                  "output and cluster.bytes_sent[0].",
                          hint_zh="第 r 个 rank 用 x 的第 r 块列乘以 w 的第 r 块行；各部分积要用 cluster.all_reduce 求和"
                                  "（而不是拼接）。返回输出和 cluster.bytes_sent[0]。"))
    verify("ex04_row_parallel_forward", fn, cases)


def ex04_layer_comm_bytes(fn) -> None:
    """``fn(seq_len, micro_batch_size, hidden_size, tp, dtype_bytes)``: bytes one rank sends per transformer layer
    (forward + backward, no sequence parallelism, ring all-reduce)."""
    cases = []
    for s, b, h, tp, nb in [(2048, 1, 12288, 8, 2), (1024, 4, 4096, 2, 2), (4096, 1, 8192, 4, 4),
                            (512, 2, 1024, 1, 2), (2048, 8, 5120, 8, 2)]:
        expected = layer_comm_bytes(seq_len=s, micro_batch_size=b, hidden_size=h, tp=tp, dtype_bytes=nb)["total"]
        cases.append(Case(args=(s, b, h, tp, nb), expected=expected, rtol=1e-9,
                          hint_en="Count first: how many blocks does a layer have, and how many all-reduces does "
                                  "each run in forward and in backward? Then the size of one (the activation "
                                  "tensor, in bytes), and what share of it a ring all-reduce sends per rank "
                                  "(chapter 02). With tp = 1 nothing is sent.",
                          hint_zh="先数一数：一层有几个块？每个块在前向和反向各做几次 AllReduce？再算一次 AllReduce "
                                  "的数据量（激活张量的字节数），以及环形 AllReduce 每个 rank 发送其中的多少（第 02 章）。"
                                  "tp = 1 时不通信。"))
    verify("ex04_layer_comm_bytes", fn, cases)


def ex04_sp_activation_saving(fn) -> None:
    """``fn(seq_len, micro_batch_size, hidden_size, num_heads, tp)``: activation bytes per layer per GPU that
    sequence parallelism saves (Korthikanti et al. 2022, Table 2)."""
    cases = []
    for s, b, h, a, tp in [(2048, 1, 12288, 96, 8), (2048, 1, 4096, 32, 4), (4096, 2, 8192, 64, 2),
                           (1024, 1, 1024, 16, 1), (2048, 4, 5120, 40, 8)]:
        kw = dict(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, tp=tp)
        expected = activation_bytes_per_layer(**kw) - activation_bytes_per_layer(**kw, sequence_parallel=True)
        cases.append(Case(args=(s, b, h, a, tp), expected=expected, rtol=1e-9,
                          hint_en="Table 2 has a row for tensor parallelism and one for tensor plus sequence "
                                  "parallelism. Which activations of a layer are already split over the t ranks "
                                  "without SP, and which are kept whole on every rank (think of LayerNorm, dropout "
                                  "and the residual)? SP splits those too: the saving is what they cost, minus "
                                  "what they cost split t ways.",
                          hint_zh="表 2 中有一行是张量并行，一行是张量并行加序列并行。没有序列并行时，一层的哪些激活值"
                                  "已经分到 t 个 rank 上，哪些在每个 rank 上都完整保存（想想 LayerNorm、dropout 和残差）？"
                                  "序列并行把后者也切分了：节省的就是它们原来的大小减去切成 t 份后的大小。"))
    verify("ex04_sp_activation_saving", fn, cases)


def ex04_column_parallel_grad_input(fn) -> None:
    """``fn(grad_out, w, tp) -> (grad_x, bytes_sent_per_rank)``: the input gradient of a column-parallel layer
    ``y = x @ w``: rank r holds columns ``w_r`` and ``grad_out_r``; the partial products are all-reduced (the
    backward of f)."""
    cases = []
    for seed, (m, k, n, tp) in enumerate([(3, 5, 8, 2), (2, 4, 12, 4), (4, 3, 8, 8), (2, 6, 6, 1), (5, 2, 6, 3)]):
        rng = np.random.default_rng(100 + seed)
        g, w = rng.integers(-4, 5, (m, n)).astype(float), rng.integers(-4, 5, (k, n)).astype(float)
        expected = (g @ w.T, _ring_all_reduce_bytes_rank0(m * k, 8, tp))
        cases.append(Case(args=(g, w, tp), expected=expected, rtol=1e-9, atol=1e-12, parts=_PARTS_GRAD,
                          hint_en="Rank r holds grad_out[:, block r] and w[:, block r]; its grad_out_r @ w_r.T has "
                                  "the full shape of x but is only a partial sum: all-reduce it.",
                          hint_zh="第 r 个 rank 持有 grad_out 的第 r 块列和 w 的第 r 块列；它的 grad_out_r @ w_r.T 形状与 x "
                                  "相同，但只是部分和：需要 AllReduce。"))
    verify("ex04_column_parallel_grad_input", fn, cases)
