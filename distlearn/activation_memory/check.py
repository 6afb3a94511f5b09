"""Checkers for chapter 08 (activation memory). Expected values come from distlearn.memory.formulas / distlearn.activation_memory.formulas,
which the tests check against Korthikanti et al. 2022 and Narayanan et al. 2021."""
from __future__ import annotations

from distlearn.activation_memory.formulas import (inflight_microbatches, layer_activation_bytes, offload_step_time, offload_traffic, recompute_flops)
from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.memory.formulas import activation_bytes_per_layer
from distlearn.core.models import ModelConfig


def ex08_layer_activation_bytes(fn):
    """``fn(seq_len, micro_batch_size, hidden_size, num_heads)`` → bytes per layer, no parallelism, no recompute."""
    shapes = [(2048, 1, 12288, 96), (4096, 2, 4096, 32), (1024, 8, 768, 12), (16, 1, 8, 2)]
    cases = [Case(args=sh, expected=activation_bytes_per_layer(seq_len=sh[0], micro_batch_size=sh[1],
                                                              hidden_size=sh[2], num_heads=sh[3]),
                  rtol=1e-9, hint_en="Korthikanti's count is already in bytes (16-bit tensors, 1-byte dropout masks): "
                                     "don't multiply it by a dtype size. And does your count grow with s², as the "
                                     "stored attention scores do?",
                  hint_zh="Korthikanti 的统计本身就是字节数（16 位张量、1 字节 dropout 掩码）：不要再乘以数据类型的字节数。"
                          "另外，你的结果会像存下的注意力分数那样随 s² 增长吗？") for sh in shapes]
    verify("ex08_layer_activation_bytes", fn, cases)


def ex08_inflight_1f1b(fn):
    """``fn(pp, num_microbatches, stage)`` → micro-batches whose activations stage ``stage`` holds under 1F1B."""
    cases = [Case(args=(p, m, s), expected=inflight_microbatches("1f1b", p, m, s),
                  hint_en="Stage s runs pp − s forwards before its first backward — but never more than m.",
                  hint_zh="第 s 个阶段在第一次反向之前执行 pp − s 次前向——但不会超过 m。")
             for p, m, s in [(4, 8, 0), (4, 8, 3), (4, 2, 0), (8, 16, 5), (1, 4, 0), (6, 3, 1)]]
    verify("ex08_inflight_1f1b", fn, cases)


def ex08_selective_overhead(fn):
    """``fn(seq_len, hidden_size, num_layers, vocab_size)`` → extra FLOPs of selective recomputation / model FLOPs
    for a GPT (f = 4h, micro-batch 1)."""
    shapes = [(2048, 12288, 96, 50257), (1024, 768, 12, 50257), (8192, 4096, 32, 32000), (4096, 1024, 24, 50257)]
    cases = []
    for s, h, L, V in shapes:
        cfg = ModelConfig("x", "gpt", V, h, L, 8, 4 * h, s)
        cases.append(Case(args=(s, h, L, V), expected=recompute_flops(cfg, seq_len=s, micro_batch_size=1,
                                                                     recompute="selective")["overhead"],
                          rtol=1e-6, hint_en="The extra work is one more forward of QKᵀ and ·V in every layer. "
                                             "Divide by the whole step: backward costs two forwards, and the LM head "
                                             "(an s × h by h × V matmul) is part of the step too.",
                          hint_zh="多出的只是每一层再做一次 QKᵀ 与 ·V 的前向。要除以整步的计算量：反向相当于两次前向，"
                                  "而输出层的矩阵乘法（s × h 乘 h × V）也属于这一步。"))
    verify("ex08_selective_overhead", fn, cases)


def ex08_offload_seconds(fn):
    """``fn(num_params, dp, pcie_gb_per_s)`` → seconds per step of PCIe traffic for ZeRO-2 + optimizer offload."""
    cases = [Case(args=(n, dp, bw), expected=offload_traffic(n, dp=dp, zero_stage=2, offload_optimizer=True,
                                                             pcie_gb_per_s=bw)["pcie_s"], rtol=1e-9,
                  hint_en="Each rank sends its 16-bit gradient shard down and gets 16-bit parameters back: 4 B/param "
                          "of Ψ/dp; GB/s means 1e9 bytes per second.",
                  hint_zh="每个 rank 把 16 位梯度分片传到 CPU，再取回 16 位参数：Ψ/dp 个参数每个 4 字节；GB/s 指每秒 1e9 字节。")
             for n, dp, bw in [(7_000_000_000, 8, 25.0), (70_000_000_000, 64, 32.0), (1_000_000, 1, 10.0)]]
    verify("ex08_offload_seconds", fn, cases)


def ex08_llama_layer_bytes(fn):
    """``fn(seq_len, micro_batch_size, hidden_size, num_heads, num_kv_heads, ffn_hidden_size)`` → bytes per Llama
    layer with flash attention (16-bit, no parallelism, no recomputation)."""
    shapes = [(8192, 1, 4096, 32, 8, 14336), (4096, 2, 4096, 32, 32, 11008), (8192, 1, 8192, 64, 8, 28672),
              (16, 3, 8, 2, 1, 24)]
    cases = [Case(args=sh, expected=layer_activation_bytes(seq_len=sh[0], micro_batch_size=sh[1], hidden_size=sh[2],
                                                           num_heads=sh[3], arch="llama", num_kv_heads=sh[4],
                                                           ffn_hidden_size=sh[5], attention="flash"),
                  rtol=1e-9,
                  hint_en="Check three things. Flash attention keeps no s × s scores, only an fp32 log-sum-exp per "
                          "head and token. With grouped-query attention K and V have num_kv_heads heads, not "
                          "num_heads. SwiGLU's backward needs more than one f-wide tensor: list what it saves.",
                  hint_zh="检查三件事。Flash attention 不保存 s × s 的注意力分数，只为每个头、每个 token 保存一个 fp32 的 "
                          "log-sum-exp。分组查询注意力中 K 和 V 只有 num_kv_heads 个头，而不是 num_heads 个。SwiGLU 的"
                          "反向需要不止一个宽度为 f 的张量：列出它保存了哪些。") for sh in shapes]
    verify("ex08_llama_layer_bytes", fn, cases)


def ex08_offload_step_seconds(fn):
    """``fn(num_params, dp, ranks_per_host, pcie_gb_per_s, cpu_adam_params_per_s)`` → seconds ZeRO-2 + optimizer
    offload adds per step: PCIe (4 B/param of the shard) + CPU Adam over the host's shards."""
    cases = [Case(args=(n, dp, r, bw, rate),
                  expected=offload_step_time(n, dp=dp, ranks_per_host=r, pcie_gb_per_s=bw,
                                             cpu_adam_params_per_s=rate)["total_s"], rtol=1e-9,
                  hint_en="PCIe: 4·(Ψ/dp) bytes at pcie_gb_per_s·1e9 B/s; CPU: the host updates ranks_per_host shards "
                          "of Ψ/dp parameters at cpu_adam_params_per_s.",
                  hint_zh="PCIe：4·(Ψ/dp) 字节，带宽 pcie_gb_per_s·1e9 B/s；CPU：主机以 cpu_adam_params_per_s 的速率更新 "
                          "ranks_per_host 个分片，每个 Ψ/dp 个参数。")
             for n, dp, r, bw, rate in [(70_000_000_000, 8, 8, 25.0, 1.4e9), (7_000_000_000, 16, 8, 32.0, 3e9),
                                        (1_000_000, 1, 1, 10.0, 1e8)]]
    verify("ex08_offload_step_seconds", fn, cases)


def ex08_block_scales(fn):
    """``fn(x, tile)`` → the fp32 scales of 1 × ``tile`` E4M3 block scaling, shape (rows, cols // tile)."""
    import torch

    from distlearn.precision.scaling import outlier_activations, quantize_blockwise

    cases = []
    for rows, cols, tile, outlier in [(4, 256, 128, 1000.0), (8, 512, 128, 1.0), (2, 64, 32, 50.0),
                                      (3, 96, 96, 7.0)]:
        x = outlier_activations(rows, cols, outlier=outlier, outlier_channel=3)
        cases.append(Case(args=(x, tile), expected=quantize_blockwise(x, (1, tile)).scale, rtol=1e-6,
                          hint_en="Cut each row into tiles of `tile` columns; a tile's scale is 448 / (its largest "
                                  "|value|) so that its amax lands on E4M3's max.",
                          hint_zh="把每一行切成每块 `tile` 列；每块的缩放因子是 448 /（块内最大的 |值|），使块的 amax "
                                  "恰好落在 E4M3 的最大值上。"))
    zero = torch.zeros(2, 128)
    zero[1, 5] = 2.0
    cases.append(Case(args=(zero, 64), expected=quantize_blockwise(zero, (1, 64)).scale, rtol=1e-6,
                      hint_en="An all-zero tile has nothing to fit: its scale is 1 (not 448 / 0).",
                      hint_zh="全零的块不需要缩放：它的缩放因子是 1（而不是 448 / 0）。"))
    verify("ex08_block_scales", fn, cases)


def ex08_mx_exponents(fn):
    """``fn(x, block_size)`` → the unbiased E8M0 exponents k of MXFP8 (E4M3 elements) per 1 × ``block_size`` block,
    integers of shape (rows, cols // block_size): ``floor(log2(amax)) − 8`` clamped to [−127, 127] (OCP MX v1.0;
    :func:`distlearn.precision.block_scaled.mx_scale_exponent`, which the tests check against torch's E8M0 cast)."""
    import numpy as np

    from distlearn.precision.block_scaled import mx_scale_exponent

    def expected(x, n):
        return mx_scale_exponent(np.abs(x).reshape(x.shape[0], -1, n).max(axis=-1))

    rng = np.random.default_rng(8)
    cases = []
    for rows, cols, n, spread in [(4, 128, 32, 10.0), (2, 64, 16, 40.0), (3, 96, 32, 1.0), (1, 1024, 1024, 5.0)]:
        x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-spread, spread, (rows, cols)))).astype(np.float32)
        cases.append(Case(args=(x, n), expected=expected(x, n), atol=0, rtol=0,
                          hint_en="Take the largest |value| of each block, then the exponent of the largest power "
                                  "of two not above it, minus E4M3's top exponent.",
                          hint_zh="先取每个分块最大的 |值|，再取不超过它的最大 2 的幂的指数，减去 E4M3 最大的指数。"))
    edge = np.zeros((2, 64), np.float32)
    edge[0, :3] = [1000.0, 256.0, -3.0]
    edge[0, 32] = 256.0
    edge[1, 40] = 2.0 ** -140
    cases.append(Case(args=(edge, 32), expected=expected(edge, 32), atol=0, rtol=0,
                      hint_en="A block whose amax is exactly a power of two keeps that power (256 → k = 0); an "
                              "all-zero block and a tiny one are clamped to −127, E8M0's smallest exponent.",
                      hint_zh="amax 恰好是 2 的幂时就取这个幂（256 → k = 0）；全零的分块和极小的分块都限制为 −127，"
                              "即 E8M0 最小的指数。"))
    verify("ex08_mx_exponents", fn, cases)
