"""Tests written for the mutants that survived the first ``make mutants`` run (issue 32): each fails on the mistake
named in its docstring (authoring/mutants.toml) and checks the value against an independent source."""
from __future__ import annotations

import numpy as np
import pytest
import torch


def test_the_fsdp_simulations_adam_is_torchs_adam():
    """Mutant: the second moment accumulates g instead of g². Source: torch.optim.Adam itself."""
    from distlearn.zero_fsdp.simulation import _Adam  # noqa: PLC2701  (the optimizer of the sharded trainer)

    rng = np.random.default_rng(0)
    p0, grads = rng.standard_normal(6), [rng.standard_normal(6) for _ in range(4)]
    ours, p = _Adam(6, lr=0.01), p0.copy()
    ref = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.Adam([ref], lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    for g in grads:
        p = ours.step(p, g)
        ref.grad = torch.tensor(g)
        opt.step()
    assert np.allclose(p, ref.detach().numpy(), rtol=0, atol=1e-12)


def test_the_last_stage_keeps_its_head_activations_for_every_microbatch_in_flight():
    """Mutant: the output head's activations not multiplied by the micro-batches in flight. Under GPipe the last
    stage holds all m micro-batches (Huang et al. 2019), so its head term is m times one micro-batch's."""
    from distlearn.activation_memory.formulas import model_activation_bytes
    from distlearn.core.models import get_preset

    cfg = get_preset("gpt2-small")
    kw = dict(seq_len=1024, micro_batch_size=1, pp=2, stage=1, schedule="gpipe")
    one = model_activation_bytes(cfg, num_microbatches=1, **kw)
    four = model_activation_bytes(cfg, num_microbatches=4, **kw)
    assert one.head > 0 and four.head == pytest.approx(4 * one.head)
    assert four.inflight == 4


def test_fsdp2_shards_over_dp_times_cp():
    """Mutant: ZeRO-2/3 shards over dp only. torchtitan (and the chapter) shard the parameters over the dp·cp
    ranks; the ranks of one tp·pp slice together hold each stage's shards exactly once."""
    from distlearn.nd_parallel import simulation as nd

    cfg = nd.TOY_MODEL
    layout = nd.Layout(pp=1, dp=2, cp=2, tp=1, zero_stage=3, micro_batch_size=1, num_microbatches=1)
    per_rank = [nd.stage_parameters(cfg, layout, r) for r in range(layout.world_size)]
    whole = nd.stage_parameters(cfg, nd.Layout(pp=1, dp=1, cp=1, tp=1, zero_stage=0, micro_batch_size=1,
                                               num_microbatches=1), 0)
    assert sum(per_rank) == whole                      # dp·cp = 4 shards, each element once
    assert max(per_rank) <= -(-whole // 4) + 64 * 8    # about a quarter each (torch.chunk rounding)


def test_block_wise_scales_honour_the_margin_like_per_tensor_scales():
    """Mutant: the tile-by-tile reference ignores ``margin``. Source: Transformer Engine's formula
    fp8_max / amax / 2**margin, which :func:`scale_from_amax` implements and the vectorised version uses."""
    from distlearn.precision import scaling as S

    x = S.outlier_activations(4, 256, seed=3)
    for margin in (0, 2):
        fast, slow = S.quantize_blockwise(x, (1, 128), margin=margin), S.reference_quantize_blockwise(x, (1, 128),
                                                                                                      margin=margin)
        assert torch.equal(fast.scale, slow.scale), margin
        tile_amax = x[0, :128].abs().max()
        assert torch.allclose(slow.scale[0, 0], S.scale_from_amax(tile_amax, "e4m3", margin))


def test_deepseek_fp8_activation_tiles_carry_a_4_byte_scale_per_128_elements():
    """Mutant: the 1×128 tile scale counted as 16-bit. DeepSeek-V3 §3.3.2: FP8 values with one fp32 scale per
    1×128 tile, so 1 + 4/128 bytes per element."""
    from distlearn.precision.fp8_recipes import fp8_activation_table

    rows = {t.name: t for t in fp8_activation_table("deepseek-v3", seq_len=512, micro_batch_size=1, hidden_size=1024,
                                                    num_heads=8)}
    t = rows["qkv_input"]
    assert t.fp8_bytes == pytest.approx(t.bf16_bytes / 2 * (1 + 4 / 128))


def test_the_seeds_closed_form_without_prefetch_is_serial():
    """Mutant: without prefetch the closed form overlaps. Without prefetch every unit waits for its own
    all-gather: n·(comm + compute), which the event simulation with prefetch off reproduces."""
    from distlearn.overlap_prefetch import timeline as T

    assert T.closed_form_forward(5, 2.0, 1.5, prefetch=False) == 5 * 3.5
    sim = T.uniform(5, 2.0, 1.5, forward_prefetch=0, include_backward=False)
    assert sim.total_time == pytest.approx(T.closed_form_forward(5, 2.0, 1.5, prefetch=False))


def test_exposed_communication_is_total_minus_compute():
    """Mutant: exposed communication computed against the communication time. With comm hidden entirely
    (compute ≫ comm, prefetch on), only the first all-gather is exposed."""
    from distlearn.overlap_prefetch import timeline as T

    r = T.uniform(4, 3.0, 1.0, include_backward=False)
    assert r.exposed_comm == pytest.approx(r.total_time - r.compute_time)
    assert r.exposed_comm == pytest.approx(1.0)        # the first unit's all-gather, nothing else
