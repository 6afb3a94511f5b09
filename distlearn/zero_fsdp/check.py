"""Checkers for chapter 06 (ZeRO and FSDP). Expected values come from distlearn.zero_fsdp.simulation / distlearn.memory.formulas, which the
tests check against PyTorch's FSDP code and the ZeRO paper."""
from __future__ import annotations

import numpy as np

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.zero_fsdp.simulation import chunk_sizes, flatten_and_shard, step_traffic
from distlearn.memory.formulas import model_state_bytes


def ex06_fsdp2_rows(fn):
    """``fn(dim0, world_size)`` → list of ``world_size`` ints: the rows of a parameter with ``dim0`` rows that each
    rank's FSDP2 local shard holds (``to_local().shape[0]``; ``torch.chunk`` on dim 0, empty past the last chunk)."""
    cases = [Case((d0, ws), expected=chunk_sizes(d0, ws),
                  hint_en="FSDP2 cuts dim 0 exactly as torch.chunk does. Print torch.chunk(torch.arange(6), 4): how "
                          "many pieces come back, and how long is each?",
                  hint_zh="FSDP2 对第 0 维的切法与 torch.chunk 完全相同。打印 torch.chunk(torch.arange(6), 4) 看看："
                          "返回了几块，每块多长？")
             for d0, ws in [(10, 4), (5, 4), (6, 4), (8, 4), (3, 8), (4096, 3), (1, 2), (50257, 8)]]
    verify("ex06_fsdp2_rows", fn, cases)


def _padding(shapes, ws) -> dict:
    """The expected answer of :func:`ex06_padding_elements`: padding elements (a count, independent of dtype). FSDP1's
    through :func:`flatten_and_shard` on one-byte zeros: float64 zeros made GPT-2's (50257, 768) embedding case cost
    ~6 s of CPU per check (0.9 GB written), int8 ~0.1 s."""
    numels = [int(np.prod(s)) for s in shapes]
    fsdp1 = sum(flatten_and_shard([np.zeros(n, dtype=np.int8) for n in numels], ws).padding)
    fsdp2 = sum((ws * chunk_sizes(s[0], ws)[0] - s[0]) * int(np.prod(s[1:])) for s in shapes)
    return {"fsdp1": fsdp1, "fsdp2": fsdp2}


def ex06_padding_elements(fn):
    """``fn(shapes, world_size)`` → ``{"fsdp1": int, "fsdp2": int}``: the zero elements padding adds over all ranks
    when FSDP1 flattens the parameters of ``shapes`` into one flat parameter, and when FSDP2 shards each on dim 0
    (each rank's shard is padded to the first chunk's shape, ``padded_sharded_param_size`` in ``_fsdp_param.py``)."""
    cases = [Case((shapes, ws), expected=_padding(shapes, ws),
                  hint_en="Both pad every rank's piece to the size of the first torch.chunk piece. FSDP1 has one "
                          "piece list for the whole flat vector; FSDP2 one per parameter, and a padded row of a "
                          "(d0, d1) weight holds d1 elements.",
                  hint_zh="两者都把每个 rank 的那一块填充到 torch.chunk 第一块的大小。FSDP1 对整个扁平向量只切一次；"
                          "FSDP2 对每个参数各切一次，而 (d0, d1) 权重的一行填充包含 d1 个元素。")
             for shapes, ws in [([(5, 3)], 4), ([(6, 4), (6,)], 4), ([(768, 768), (768,), (3072, 768)], 8),
                                ([(50257, 768)], 8), ([(7,)], 1), ([(3, 2), (1,)], 3), ([(10, 10)], 4)]]
    verify("ex06_padding_elements", fn, cases)


def ex06_zero3_bytes_per_step(fn):
    """``fn(num_params, world_size, bytes_per_elem, num_microbatches)`` → bytes one rank sends per ZeRO-3 optimizer
    step of ``num_microbatches`` micro-batches (ring algorithm)."""
    hint_en = ("Every micro-batch: two all-gathers (forward, backward) and one reduce-scatter, each (n−1)/n × Ψ "
               "elements of bytes_per_elem bytes.")
    hint_zh = ("每个微批次：两次 AllGather（前向、反向）加一次 ReduceScatter，每次 (n−1)/n × Ψ 个元素，"
               "每个元素 bytes_per_elem 字节。")
    cases = [Case((psi, ws, 2, m), expected=float(step_traffic(3, psi, ws, num_microbatches=m)), rtol=1e-9,
                  hint_en=hint_en, hint_zh=hint_zh)
             for psi, ws, m in [(4096, 2, 1), (4096, 4, 1), (65536, 8, 1), (1024, 1, 1), (4096, 4, 3), (4096, 2, 8)]]
    # 3 · 4 · (7/8) · 7e9 · 2 bytes for 4 micro-batches, in integers so the expected value is exact
    cases.append(Case((7_000_000_000, 8, 2, 4), expected=float(3 * 4 * 7 * 7_000_000_000 * 2 // 8), rtol=1e-9,
                      hint_en=hint_en, hint_zh=hint_zh))
    verify("ex06_zero3_bytes_per_step", fn, cases)


def ex06_model_states_per_gpu(fn):
    """``fn(num_params, dp, zero_stage)`` → model-state bytes per GPU, mixed-precision Adam (2 + 2 + 12)."""
    cases = [Case((psi, dp, s), expected=model_state_bytes(psi, dp=dp, zero_stage=s).total, rtol=1e-9,
                  hint_en="Each parameter costs 16 bytes: 2 (params, sharded at stage 3) + 2 (grads, stage ≥ 2) "
                          "+ 12 (optimizer, stage ≥ 1); shard over dp.",
                  hint_zh="每参数 16 字节：2（参数，阶段 3 分片）+ 2（梯度，阶段 ≥ 2）+ 12（优化器，阶段 ≥ 1）；按 dp 分片。")
             for psi, dp, s in [(7_500_000_000, 64, 0), (7_500_000_000, 64, 1), (7_500_000_000, 64, 2),
                                (7_500_000_000, 64, 3), (1000, 1, 3), (1_000_000, 10, 2)]]
    verify("ex06_model_states_per_gpu", fn, cases)


def ex06_muon_traffic(fn):
    """``fn(shapes, world_size, rank, form)`` → elements rank ``rank`` sends to other ranks in one sharded Muon step
    (``form`` "all_gather" or "owner"; matrix i's owner is i mod world_size; every shard padded to ⌈rows/W⌉ rows).
    Expected: :func:`distlearn.zero_fsdp.muon.step_traffic` ``.sent``, which tests/test_muon.py checks against the
    collectives the gloo lab issues."""
    from distlearn.zero_fsdp.muon import step_traffic

    hint_en = ("A ring all-gather makes each rank send its padded shard to the W − 1 others, for every matrix. In the "
               "owner form a rank sends its shard once to each matrix's owner, except for the matrices it owns: there "
               "it scatters the W − 1 other shards. A shard has ⌈rows/W⌉ · cols elements.")
    hint_zh = ("环形 AllGather 中，每个矩阵都要由每个 rank 把自己填充后的分片发给其余 W − 1 个 rank。持有者形式中，"
               "rank 把自己的分片发给每个矩阵的持有者一次；对自己持有的矩阵，则把其余 W − 1 个分片分发出去。"
               "一个分片有 ⌈rows/W⌉ · cols 个元素。")
    cases = [Case((shapes, ws, r, form), expected=step_traffic(shapes, ws, r, form).sent, hint_en=hint_en,
                  hint_zh=hint_zh)
             for shapes, ws, r, form in [([(8, 4)], 2, 0, "all_gather"), ([(8, 4)], 2, 1, "owner"),
                                         ([(8, 4)] * 3, 4, 0, "owner"), ([(8, 4)] * 3, 4, 3, "owner"),
                                         ([(5, 3)], 4, 2, "all_gather"), ([(5, 3), (40, 16)], 4, 1, "owner"),
                                         ([(4096, 4096), (14336, 4096)], 8, 1, "owner"),
                                         ([(4096, 4096), (1024, 4096)], 8, 7, "all_gather"), ([(6, 6)], 1, 0, "owner")]]
    verify("ex06_muon_traffic", fn, cases)
