"""Checkers for chapter 10 (context parallelism). Expected values come from :mod:`distlearn.context_parallel.simulation`,
whose ring attention the tests check against full attention, PyTorch autograd and PyTorch's own load balancer."""
from __future__ import annotations

import numpy as np

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.context_parallel.packed import document_ids, document_mask, packed_positions
from distlearn.context_parallel.simulation import (block_attention, layout_positions, merge_blocks, ring_overlap, work_matrix)


def _same_arrays(got, expected) -> bool:
    try:
        return len(got) == len(expected) and all(np.array_equal(np.asarray(g), e) for g, e in zip(got, expected))
    except TypeError:
        return False


def ex10_merge_blocks(fn) -> None:
    """``fn(out_a, lse_a, out_b, lse_b) -> (out, lse)``: merge the attention of the same queries over two blocks
    of keys, each normalised by its own softmax sum (``lse`` = log of that sum)."""
    cases = []
    for seed, (s_q, s_a, s_b, d) in enumerate([(3, 4, 5, 2), (1, 2, 2, 3), (4, 1, 6, 2), (2, 7, 1, 4)]):
        rng = np.random.default_rng(10 + seed)
        q, k, v = rng.standard_normal((1, 1, s_q, d)), rng.standard_normal((1, 1, s_a + s_b, d)), \
            rng.standard_normal((1, 1, s_a + s_b, d))
        a = block_attention(q, k[:, :, :s_a], v[:, :, :s_a])
        b = block_attention(q, k[:, :, s_a:], v[:, :, s_a:])
        args = (a.out[0, 0], a.lse[0, 0], b.out[0, 0], b.lse[0, 0])
        cases.append(Case(args=args, expected=merge_blocks(*args), rtol=1e-9, atol=1e-12,
                          hint_en="Averaging the two outputs ignores how much softmax mass each block holds. Each out "
                                  "was divided by its own block's sum e^lse: what share of the combined sum does each "
                                  "block have? Combine the log-sum-exps first (numpy has a function for log(e^x + e^y)), "
                                  "and mind the shapes: lse has no d axis.",
                          hint_zh="直接平均两个输出忽略了每块各占多少 softmax 质量。每个 out 都除以了它自己那一块的和 e^lse："
                                  "每块在合并后的总和中占多大份额？先合并两个 log-sum-exp（numpy 有计算 log(e^x + e^y) 的"
                                  "函数），并注意形状：lse 没有 d 这一维。"))
    # a huge score: the merge must not overflow (no exp of a raw lse)
    out_a, out_b = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    args = (out_a, np.array([800.0]), out_b, np.array([799.0]))
    cases.append(Case(args=args, expected=merge_blocks(*args), rtol=1e-9, atol=1e-12,
                      hint_en="e^800 overflows float64 (inf / inf = nan): never exponentiate a raw log-sum-exp, only "
                              "differences of log-sum-exps.",
                      hint_zh="e^800 在 float64 中会上溢（inf / inf = nan）：不要对 log-sum-exp 本身取指数，只对它们的差取指数。"))
    verify("ex10_merge_blocks", fn, cases)


def ex10_zigzag_positions(fn) -> None:
    """``fn(seq_len, cp) -> list of cp integer arrays``: the token positions rank r holds under the zig-zag layout
    (2·cp equal chunks; rank r holds chunk r, then chunk 2·cp − 1 − r)."""
    cases = []
    for s, cp in [(8, 2), (16, 4), (12, 3), (4, 1), (32, 2)]:
        cases.append(Case(args=(s, cp), expected=layout_positions(s, cp, "zigzag"), compare=_same_arrays,
                          hint_en="Check the chunk size (there are twice as many chunks as ranks), the order inside "
                                  "each rank (its early chunk first, then its late one) and the type: one integer array "
                                  "of positions per rank.",
                          hint_zh="检查块的大小（块数是 rank 数的两倍）、每个 rank 内部的顺序（先靠前的块，再靠后的块）以及"
                                  "类型：每个 rank 一个由位置组成的整数数组。"))
    verify("ex10_zigzag_positions", fn, cases)


def ex10_causal_work(fn) -> None:
    """``fn(seq_len, cp, layout) -> per-rank work``: how many (query, key) pairs each rank computes over the
    whole ring under the causal mask, for ``layout`` ``"contiguous"`` or ``"zigzag"`` (a list or array of cp
    integers)."""
    cases = []
    for s, cp, layout in [(8, 2, "contiguous"), (8, 2, "zigzag"), (16, 4, "contiguous"), (16, 4, "zigzag"),
                          (24, 3, "zigzag"), (6, 1, "contiguous")]:
        cases.append(Case(args=(s, cp, layout), expected=work_matrix(s, cp, layout).sum(axis=1), rtol=0,
                          hint_en="Equal tokens are not equal work. Count per query: how many keys may the query at "
                                  "position i attend to (itself included)? Then add that up over the positions this "
                                  "rank holds in the given layout.",
                          hint_zh="相同的词元数并不意味着相同的工作量。按查询来数：位置 i 上的查询能关注多少个键（包括它自己）？"
                                  "再对该 rank 在给定切分方式下持有的所有位置求和。"))
    verify("ex10_causal_work", fn, cases)


def ex10_ring_hidden(fn) -> None:
    """``fn(tokens_per_rank, num_heads, num_kv_heads, head_dim, flops, bandwidth) -> bool``: is the transfer of
    one K/V block (bf16) hidden behind the attention of the rank's queries over that block (no mask)?"""
    cases = []
    for c, a, kv, d, f, bw in [(2048, 32, 32, 128, 989e12, 450e9), (1024, 32, 32, 128, 989e12, 450e9),
                               (1024, 32, 8, 128, 989e12, 450e9), (8192, 32, 8, 128, 989e12, 50e9),
                               (2048, 64, 8, 128, 989e12, 50e9), (1000, 16, 16, 64, 312e12, 300e9),
                               (1100, 16, 16, 64, 312e12, 300e9)]:
        expected = ring_overlap(tokens_per_rank=c, num_heads=a, num_kv_heads=kv, head_dim=d, flops=f,
                                bandwidth=bw)["hidden"]
        cases.append(Case(args=(c, a, kv, d, f, bw), expected=expected,
                          hint_en="Compare two times in seconds. What crosses the link is the block's K and V — both "
                                  "tensors, for the K/V heads only (grouped-query attention has fewer of them than "
                                  "query heads), in bytes, not values. Hidden means the compute takes at least as long.",
                          hint_zh="比较两个以秒为单位的时间。通过链路的是这一块的 K 和 V——两个张量都要算，且只算 K/V 头（分组"
                                  "查询注意力的 K/V 头比查询头少），单位是字节而不是数值个数。计算耗时不少于传输时即被隐藏。"))
    verify("ex10_ring_hidden", fn, cases)


def _same_mask(got, expected) -> bool:
    try:
        got = np.asarray(got)
        return got.shape == expected.shape and got.dtype == bool and bool((got == expected).all())
    except (TypeError, ValueError):
        return False


def ex10_document_mask(fn) -> None:
    """``fn(q_pos, k_pos, documents) -> bool array (len(q_pos), len(k_pos))``: the mask of a query chunk over a key
    chunk of a packed sequence, from the GLOBAL positions of both chunks and the document id of every position of
    the whole sequence: True where the key is not later than the query and in the same document."""
    cases = []
    for lengths, cp, layout, q_rank, k_rank in [((3, 5), 2, "contiguous", 1, 0), ((3, 5), 2, "contiguous", 1, 1),
                                                 ((24, 8, 16, 16), 2, "zigzag", 0, 1),
                                                 ((24, 8, 16, 16), 4, "zigzag", 3, 0),
                                                 ((24, 8, 16, 16), 4, "document-zigzag", 2, 1),
                                                 ((6, 6), 3, "zigzag", 2, 2), ((1, 1, 2), 2, "contiguous", 0, 1)]:
        docs = document_ids(lengths)
        pos = packed_positions(lengths, cp, layout)
        args = (pos[q_rank], pos[k_rank], docs)
        cases.append(Case(args=args, expected=document_mask(*args), compare=_same_mask,
                          hint_en="Use the positions you are given, not 0 … n−1: a chunk may start in the middle of "
                                  "the sequence, or hold two separate pieces (zig-zag). Two tests for every pair: is "
                                  "the key's position at most the query's, and is documents[key position] equal to "
                                  "documents[query position]? Return a bool array, one row per query.",
                          hint_zh="用给定的位置，不要用 0 … n−1：一个片段可能从序列中间开始，也可能由两段组成（之字形切分）。"
                                  "每一对都要判断两件事：键的位置是否不晚于查询的位置；documents[键的位置] 是否等于 "
                                  "documents[查询的位置]。返回布尔数组，每个查询一行。"))
    verify("ex10_document_mask", fn, cases)
