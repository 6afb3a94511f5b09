"""Checkers for chapter 10 (context parallelism). Expected values come from :mod:`distlearn.context_parallel`,
whose ring attention the tests check against full attention, PyTorch autograd and PyTorch's own load balancer."""
from __future__ import annotations

import numpy as np

from ..check import Case, verify
from ..context_parallel import block_attention, layout_positions, merge_blocks, ring_overlap, work_matrix


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
                          hint_en="The new log-sum-exp is log(e^lse_a + e^lse_b) (np.logaddexp). Each block's out is "
                                  "divided by its own sum, so weight it by its share: out = e^(lse_a − lse)·out_a + "
                                  "e^(lse_b − lse)·out_b (lse[..., None] to broadcast over d).",
                          hint_zh="新的 log-sum-exp 是 log(e^lse_a + e^lse_b)（np.logaddexp）。每块的 out 已经除以它自己的"
                                  "和，所以要按它所占的份额加权：out = e^(lse_a − lse)·out_a + e^(lse_b − lse)·out_b"
                                  "（用 lse[..., None] 沿 d 广播）。"))
    # a huge score: the merge must not overflow (no exp of a raw lse)
    out_a, out_b = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    args = (out_a, np.array([800.0]), out_b, np.array([799.0]))
    cases.append(Case(args=args, expected=merge_blocks(*args), rtol=1e-9, atol=1e-12,
                      hint_en="Do not compute e^lse directly (e^800 overflows): subtract the new lse first.",
                      hint_zh="不要直接计算 e^lse（e^800 会上溢）：先减去新的 lse。"))
    verify("ex10_merge_blocks", fn, cases)


def ex10_zigzag_positions(fn) -> None:
    """``fn(seq_len, cp) -> list of cp integer arrays``: the token positions rank r holds under the zig-zag layout
    (2·cp equal chunks; rank r holds chunk r, then chunk 2·cp − 1 − r)."""
    cases = []
    for s, cp in [(8, 2), (16, 4), (12, 3), (4, 1), (32, 2)]:
        cases.append(Case(args=(s, cp), expected=layout_positions(s, cp, "zigzag"), compare=_same_arrays,
                          hint_en="Cut the sequence into 2·cp chunks of s/(2·cp) tokens. Rank r takes chunk r and "
                                  "chunk 2·cp − 1 − r, in that order; return one array per rank.",
                          hint_zh="把序列切成 2·cp 块，每块 s/(2·cp) 个词元。rank r 依次取第 r 块和第 2·cp − 1 − r 块；"
                                  "每个 rank 返回一个数组。"))
    verify("ex10_zigzag_positions", fn, cases)


def ex10_causal_work(fn) -> None:
    """``fn(seq_len, cp, layout) -> per-rank work``: how many (query, key) pairs each rank computes over the
    whole ring under the causal mask, for ``layout`` ``"contiguous"`` or ``"zigzag"`` (a list or array of cp
    integers)."""
    cases = []
    for s, cp, layout in [(8, 2, "contiguous"), (8, 2, "zigzag"), (16, 4, "contiguous"), (16, 4, "zigzag"),
                          (24, 3, "zigzag"), (6, 1, "contiguous")]:
        cases.append(Case(args=(s, cp, layout), expected=work_matrix(s, cp, layout).sum(axis=1), rtol=0,
                          hint_en="Query i attends to keys 0..i. A chunk of c queries attends fully (c² pairs) to "
                                  "an earlier chunk, c(c+1)/2 pairs to itself, nothing to a later chunk; add over the "
                                  "chunks the rank holds.",
                          hint_zh="查询 i 只关注键 0..i。c 个查询组成的块对更早的块全部关注（c² 对），对自身关注 c(c+1)/2 "
                                  "对，对更晚的块不关注；把该 rank 持有的各块加起来。"))
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
                          hint_en="Compute: 4·c²·d·a FLOPs at `flops` per second. Transfer: K and V of the block, "
                                  "2·c·d·kv values of 2 bytes, at `bandwidth` bytes per second. Hidden if compute "
                                  "time ≥ transfer time.",
                          hint_zh="计算：4·c²·d·a FLOPs，每秒 `flops`。传输：这一块的 K 和 V，共 2·c·d·kv 个 2 字节的数，"
                                  "每秒 `bandwidth` 字节。计算时间 ≥ 传输时间时即被隐藏。"))
    verify("ex10_ring_hidden", fn, cases)
