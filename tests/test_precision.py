"""distlearn.precision.scaling against independent sources: torch.finfo and torch's own decoding of every bit pattern,
torch's bf16 cast, torch's float8 casts, and the real torch.amp.GradScaler on the CPU."""
import math
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.precision import scaling as P
from distlearn.core.validate import DistlearnValueError


@pytest.mark.parametrize("name", [n for n, f in P.FORMATS.items() if f.torch_dtype])
def test_formats_equal_torch_finfo(name):
    cmp = P.finfo_comparison(P.FORMATS[name])
    assert cmp["equal"], cmp


def test_published_values():
    """Micikevicius et al. 2022 Table 1 and IEEE 754: the numbers every FP8 paper prints."""
    e4, e5, h, b = (P.FORMATS[k] for k in ("e4m3", "e5m2", "fp16", "bf16"))
    assert (e4.max, e4.smallest_normal, e4.smallest_subnormal) == (448, 2 ** -6, 2 ** -9)
    assert (e5.max, e5.smallest_normal, e5.smallest_subnormal) == (57344, 2 ** -14, 2 ** -16)
    assert (h.max, h.smallest_subnormal, b.eps) == (65504, 2 ** -24, 2 ** -7)
    tf = P.FORMATS["tf32"]
    assert tf.dtype() is None and P.finfo_comparison(tf)["equal"] is None
    assert (tf.bits, tf.nbytes, tf.eps, tf.smallest_normal) == (19, 4, 2 ** -10, torch.finfo(torch.float32).tiny)


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "fp16", "bf16"])
def test_reference_decode_equals_torch_for_every_bit_pattern(name):
    f = P.FORMATS[name]
    ours = torch.tensor(P.decode_all(f), dtype=torch.float64)
    theirs = P.torch_decode_all(f)
    assert bool(((ours == theirs) | (ours.isnan() & theirs.isnan())).all())


def test_e4m3_has_no_infinity_and_one_nan_pattern_per_sign():
    vals = P.decode_all(P.FORMATS["e4m3"])
    assert not any(math.isinf(v) for v in vals)
    assert [i for i, v in enumerate(vals) if math.isnan(v)] == [0x7F, 0xFF]
    e5 = P.decode_all(P.FORMATS["e5m2"])
    assert sum(math.isinf(v) for v in e5) == 2


def test_decode_can_fail():
    """Break the E4M3 rule (treat it as IEEE-like): the check against torch catches it."""
    wrong = P.FloatFormat("e4m3", 4, 3, finite_only=False, torch_dtype="float8_e4m3fn")
    assert not P.finfo_comparison(wrong)["equal"]
    assert wrong.max == 240


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=50))
@settings(max_examples=60, deadline=None)
def test_round_mantissa_7_bits_is_torch_bf16(values):
    x = torch.tensor(values, dtype=torch.float32)
    assert torch.equal(P.round_mantissa(x, 7), x.to(torch.bfloat16).float())


def test_tf32_rounding_keeps_10_bits():
    x = torch.randn(1000) * 100
    r = P.round_mantissa(x, 10)
    assert bool(((r.view(torch.int32) & (2 ** 13 - 1)) == 0).all())
    assert float(((r - x).abs() / x.abs()).max()) <= 2 ** -11
    assert torch.equal(P.round_mantissa(x, 23), x)


def test_casts_saturate_like_the_recipes():
    big = torch.tensor([1e6, -1e6, 500.0])
    one = torch.tensor(1.0)
    assert P.cast_saturated(big, one, "e4m3").float().tolist() == [448, -448, 448]
    assert P.cast_saturated(big, one, "e5m2").float().tolist() == [57344, -57344, 512]
    assert torch.isinf(torch.tensor([1e6]).to(torch.float8_e5m2).float()).all()   # why the clamp is needed


@given(rows=st.sampled_from([1, 2, 4]), cols=st.sampled_from([4, 8, 16]), br=st.sampled_from([1, 2]),
       bc=st.sampled_from([2, 4]), fmt=st.sampled_from(P.FP8_FORMATS), seed=st.integers(0, 1000))
@settings(max_examples=40, deadline=None)
def test_reference_block_quantize_equals_fast(rows, cols, br, bc, fmt, seed):
    if rows % br or cols % bc:
        return
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * torch.exp2(torch.randint(-10, 10, (rows, cols), generator=g).float())
    x[0, 0] = 0.0
    fast, ref = P.quantize_blockwise(x, (br, bc), fmt), P.reference_quantize_blockwise(x, (br, bc), fmt)
    assert torch.equal(fast.scale, ref.scale)
    assert torch.equal(fast.data.float(), ref.data.float())


def test_block_amax_lands_on_fp8_max_and_blocks_must_tile():
    x = P.outlier_activations(8, 256, outlier=1000.0)
    q = P.quantize_blockwise(x, (1, 128))
    tiles = q.data.float().reshape(8, 2, 128).abs().amax(dim=2)
    assert torch.allclose(tiles, torch.full_like(tiles, 448.0))
    assert q.scale.shape == (8, 2) and q.scale_bytes == 64
    with pytest.raises(DistlearnValueError):
        P.quantize_blockwise(x, (1, 100))


def test_square_weight_blocks_make_the_transpose_exact():
    """128×128 blocks: quantising Wᵀ gives exactly (quantised W)ᵀ, so one FP8 copy serves Fprop and Dgrad;
    1×128 activation tiles do not (DeepSeek re-tiles them 128×1 for the backward)."""
    w = P.gaussian_weights(256, 256)
    q, qt = P.quantize_blockwise(w, (128, 128)), P.quantize_blockwise(w.T.contiguous(), (128, 128))
    assert torch.equal(q.dequantize().T, qt.dequantize())
    x = P.outlier_activations(256, 256, outlier=50.0)
    a, at = P.quantize_blockwise(x, (1, 128)), P.quantize_blockwise(x.T.contiguous(), (1, 128))
    assert not torch.equal(a.dequantize().T, at.dequantize())


def test_block_scaling_keeps_the_error_low_with_an_outlier():
    w = P.gaussian_weights()
    plain = P.outlier_activations(outlier=1.0)
    base = P.gemm_error(plain, w, "tensorwise")
    assert 0.01 < base.rel_error < 0.06            # E4M3's 3 mantissa bits: a few per cent
    assert P.gemm_error(plain, w, "bf16").rel_error < 0.005
    x = P.outlier_activations(outlier=1e5)
    tw = P.gemm_error(x, w, "tensorwise", exclude_channels=(7,))
    bw = P.gemm_error(x, w, "blockwise", exclude_channels=(7,))
    assert tw.underflow > 0.5 and bw.underflow < 0.05
    assert tw.rest_error > 0.3 and bw.rest_error < 0.08
    assert bw.rest_error < tw.rest_error / 5


def test_delayed_scaling_uses_the_history_and_saturates_on_a_spike():
    steps = P.compare_scaling_over_steps(P.drifting_tensors(), history_len=16)
    assert steps[0].delayed_scale == 1.0
    for prev, cur in zip(steps, steps[1:]):   # scale from the max of the history so far (margin 0)
        assert cur.delayed_scale == pytest.approx(448 / max(s.amax for s in steps[:cur.step]), rel=1e-6)
    spike = steps[8]
    assert spike.saturated > 0.5 and spike.delayed_error > 0.5 and spike.current_error < 0.05
    short = P.compare_scaling_over_steps(P.drifting_tensors(), history_len=1)
    assert short[10].delayed_scale == pytest.approx(448 / steps[9].amax, rel=1e-6)   # most recent only
    assert steps[10].delayed_scale == pytest.approx(448 / steps[8].amax, rel=1e-6)   # the spike stays in the window


def test_delayed_scaler_margin():
    s = P.DelayedScaler("e4m3", 4, margin=2)
    s.quantize(torch.tensor([2.0, -1.0]))
    assert s.scale == pytest.approx(448 / 2 / 4)


# ---------------------------------------------------------------- loss scaling vs torch.amp.GradScaler
def _torch_update(scale, tracker, found_inf, cfg):
    s, t = torch.tensor(scale, dtype=torch.float32), torch.tensor(tracker, dtype=torch.int32)
    torch._amp_update_scale_(s, t, torch.tensor(float(found_inf)), cfg.growth_factor, cfg.backoff_factor,
                             cfg.growth_interval)
    return float(s), int(t)


@given(scale=st.sampled_from([1.0, 2.0 ** 16, 2.0 ** 126, 3.0e38, 0.75]), tracker=st.integers(0, 5),
       found_inf=st.booleans(), interval=st.integers(1, 6), growth=st.sampled_from([2.0, 1.5, 4.0]),
       backoff=st.sampled_from([0.5, 0.25, 0.9]))
@settings(max_examples=150, deadline=None)
def test_update_scale_equals_amp_update_scale(scale, tracker, found_inf, interval, growth, backoff):
    cfg = P.ScalerConfig(growth_factor=growth, backoff_factor=backoff, growth_interval=interval)
    tracker = min(tracker, interval - 1)
    assert P.update_scale(scale, tracker, found_inf, cfg) == _torch_update(scale, tracker, found_inf, cfg)


@given(pattern=st.lists(st.booleans(), min_size=1, max_size=40), interval=st.integers(1, 5))
@settings(max_examples=25, deadline=None)
def test_scale_sequence_equals_gradscaler_on_crafted_infs(pattern, interval):
    cfg = P.ScalerConfig(growth_interval=interval)
    assert P.scale_sequence(pattern, cfg)[:-1] == P.run_gradscaler(None, cfg, inf_steps=pattern)


def test_default_gradscaler_on_a_long_pattern():
    """GradScaler's defaults (65536, ×2, ×0.5, 2000): growth after 2000 clean steps, back-off on inf."""
    pattern = [False] * 4600
    for t in (10, 2500, 2501):
        pattern[t] = True
    seq = P.scale_sequence(pattern)
    assert seq[:-1] == P.run_gradscaler(None, inf_steps=pattern)
    assert seq[11] == 2.0 ** 15 and seq[2011] == 2.0 ** 16 and seq[2502] == 2.0 ** 14 and seq[4502] == 2.0 ** 15


def test_a_wrong_rule_is_caught():
    """Break the rule once (keep the tracker on inf): the comparison with GradScaler fails."""
    cfg = P.ScalerConfig(growth_interval=3)
    pattern = [False, False, True, False, False, False, False]

    def wrong(found):
        scale, tracker, out = cfg.init_scale, 0, []
        for inf in found:
            out.append(scale)
            if inf:
                scale *= cfg.backoff_factor          # bug: tracker not reset
            else:
                tracker += 1
                if tracker == cfg.growth_interval:
                    scale, tracker = scale * cfg.growth_factor, 0
        return out
    assert wrong(pattern) != P.run_gradscaler(None, cfg, inf_steps=pattern)
    assert P.scale_sequence(pattern, cfg)[:-1] == P.run_gradscaler(None, cfg, inf_steps=pattern)


def test_simulated_run_equals_real_gradscaler_and_scaling_rescues_the_gradients():
    spikes = {40: 2.0 ** 20, 90: 2.0 ** 20}
    cfg = P.ScalerConfig(growth_interval=30)
    run = P.simulate_loss_scaling(P.gradient_stream(150, size=256, log2_median=-26, spikes=spikes), cfg)
    real = P.run_gradscaler(P.gradient_stream(150, size=256, log2_median=-26, spikes=spikes), cfg)
    assert run.scales == real
    assert [t for t, s in enumerate(run.skipped) if s] == [40, 90]
    plain = P.simulate_loss_scaling(P.gradient_stream(150, size=256, log2_median=-26, spikes=spikes), None)
    assert plain.mean_underflow > 0.5 and run.mean_underflow < 0.01
    # fp16 itself: the true share of |g| below half the smallest subnormal, from the log-normal's CDF
    z = (math.log2(2 ** -25) + 26) / 3
    assert plain.mean_underflow == pytest.approx(0.5 * (1 + math.erf(z / math.sqrt(2))), abs=0.05)


def test_validation():
    with pytest.raises(DistlearnValueError):
        P.ScalerConfig(backoff_factor=1.0)
    with pytest.raises(DistlearnValueError):
        P.get_format("fp4")
    with pytest.raises(DistlearnValueError):
        P.round_mantissa(torch.ones(1), 24)
