"""distlearn.precision.block_scaled against independent sources: torch's own float8 casts (bit for bit, uint8 views),
torch's float8_e8m0fnu cast, torch's reference FP4 E2M1 encoder and its float4_e2m1fn_x2 packing, the OCP MX v1.0
E2M1 table, torch-based FP8 block scaling (distlearn.precision.scaling), and torchao's MX / NVFP4 algorithms as read
(torchao/prototype/mx_formats/mx_tensor.py ``to_mx`` FLOOR; nvfp4_tensor.py ``nvfp4_quantize``) on examples worked
out by hand."""
import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError
from distlearn.precision import block_scaled as B
from distlearn.precision import scaling as P

TORCH_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _torch_codes(x: np.ndarray, fmt: str) -> np.ndarray:
    top = B.ELEMENTS[fmt][3]
    t = torch.from_numpy(np.clip(np.asarray(x, np.float32), -top, top))
    return t.to(TORCH_FP8[fmt]).view(torch.uint8).numpy()


def _midpoints(fmt: str) -> np.ndarray:
    """Every representable value and every midpoint between neighbours (the ties), both signs."""
    vals = np.unique(np.abs(B.decode(np.arange(256, dtype=np.uint8), fmt)))
    vals = vals[np.isfinite(vals)]
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids, np.nextafter(mids.astype(np.float32), np.float32(0)),
                          np.nextafter(mids.astype(np.float32), np.float32(np.inf))]).astype(np.float32)
    return np.concatenate([pts, -pts])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_encode_equals_torch_bit_for_bit(fmt):
    rng = np.random.default_rng(1)
    wide = (rng.standard_normal(100_000) * np.exp(rng.uniform(-25, 14, 100_000))).astype(np.float32)
    x = np.concatenate([wide, _midpoints(fmt), np.array([0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38], np.float32)])
    np.testing.assert_array_equal(B.encode(x, fmt), _torch_codes(x, fmt))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_decode_equals_torch(fmt):
    codes = np.arange(256, dtype=np.uint8)
    theirs = torch.from_numpy(codes).view(TORCH_FP8[fmt]).to(torch.float64).numpy()
    np.testing.assert_array_equal(B.decode(codes, fmt), theirs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=64),
       st.sampled_from(["e4m3", "e5m2"]))
def test_fp8_encode_property_torch(values, fmt):
    x = np.array(values, np.float32)
    np.testing.assert_array_equal(B.encode(x, fmt), _torch_codes(x, fmt))


def test_e8m0_codes_equal_torch_cast():
    """The MX scale 2**k, k in [−127, 127], cast by torch to float8_e8m0fnu: the same byte as ours, and torch's
    decoding of every code but 255 (NaN) is 2**(code − 127)."""
    k = np.arange(-127, 128)
    theirs = torch.from_numpy(np.ldexp(1.0, k).astype(np.float32)).to(torch.float8_e8m0fnu).view(torch.uint8).numpy()
    np.testing.assert_array_equal(B.e8m0_code(k), theirs)
    back = torch.arange(255, dtype=torch.uint8).view(torch.float8_e8m0fnu).to(torch.float64).numpy()
    np.testing.assert_array_equal(back, np.ldexp(1.0, np.arange(255) - 127))
    assert math.isnan(float(torch.tensor([255], dtype=torch.uint8).view(torch.float8_e8m0fnu).float()))


def test_mx_scales_from_real_blocks_equal_torch_e8m0():
    x = (np.random.default_rng(2).standard_normal((16, 256)) * np.logspace(-30, 30, 256)).astype(np.float32)
    for fmt in ("e4m3", "e5m2", "e2m1"):
        q = B.quantize_mx(x, fmt)
        theirs = torch.from_numpy(q.multiplier.astype(np.float32)).to(torch.float8_e8m0fnu).view(torch.uint8)
        np.testing.assert_array_equal(q.scale_codes, theirs.numpy())


def _torch_fp4_reference():
    """torch's own E2M1 encoder and its packing, compiled from torch/testing/_internal/common_quantized.py (the
    module needs expecttest to import, which the course does not install)."""
    import torch.testing._internal as internal

    path = Path(internal.__file__).parent / "common_quantized.py"
    tree = ast.parse(path.read_text())
    keep = {"_n_ones", "_f32_to_floatx_unpacked", "_floatx_unpacked_to_f32", "pack_uint4", "down_size"}
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in keep]
    body += [n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id in ("EBITS_F32", "MBITS_F32", "F32_EXP_BIAS")
        for tgt in n.targets for t in ast.walk(tgt))]
    ns = {"torch": torch, "Tensor": torch.Tensor}
    exec(compile(ast.Module(body=sorted(body, key=lambda n: n.lineno), type_ignores=[]), str(path), "exec"), ns)
    return ns


def test_e2m1_table_is_the_ocp_table():
    """OCP MX v1.0 §5.3.3: E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 for codes 0–7, sign in bit 3."""
    vals = B.decode(np.arange(16, dtype=np.uint8), "e2m1")
    assert vals[:8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6] == list(B.E2M1_VALUES)
    assert (vals[8:] == -vals[:8]).all()


def test_e2m1_equals_torch_reference_encoder_and_packing():
    ref = _torch_fp4_reference()
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-7, 7, 20_000), rng.standard_normal(2000) * 1e-3,
                        np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -2.5, -5.0, 6.0, -6.0, 0.0])]).astype(np.float32)
    clamped = np.clip(x, -6, 6)
    theirs = ref["_f32_to_floatx_unpacked"](torch.from_numpy(clamped), 2, 1).numpy()
    nonzero = B.decode(theirs, "e2m1") != 0
    ours = B.encode(x, "e2m1")
    # torch's reference drops the sign of values rounded to 0; ours keeps it (0x8 = −0), as the fp8 casts do
    np.testing.assert_array_equal(ours[nonzero], theirs[nonzero])
    np.testing.assert_array_equal(ours[~nonzero] & 7, 0)
    np.testing.assert_array_equal(B.decode(theirs, "e2m1"),
                                  ref["_floatx_unpacked_to_f32"](torch.from_numpy(theirs), 2, 1).numpy())
    # packing: two codes per byte, the first in the low nibble, viewable as torch.float4_e2m1fn_x2
    codes = theirs[:2000].reshape(10, 200)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    torch_packed = ref["pack_uint4"](torch.from_numpy(codes))
    np.testing.assert_array_equal(packed, torch_packed.numpy())
    view = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
    assert view.shape == (10, 100) and view.element_size() == 1


def test_mxfp8_block_by_hand_as_torchao_floor():
    """One 32-element block, worked out by hand with torchao's to_mx (FLOOR) rule:
    amax = 1000 = 1.953 · 2**9 → k = 9 − 8 = 1, X = 2, E8M0 code 128; 1000 / 2 = 500 > 448 → saturates to 448
    (code 0x7E), so the outlier comes back as 896; 1 / 2 = 0.5 = 2**−1 → code 0x30; 3.3 / 2 = 1.65 → 1.625
    (E4M3 spacing 0.125 in [1, 2)) → code 0x3D, back 3.25; 0.0 → 0."""
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [1000.0, 1.0, 3.3, -1.0]
    q = B.quantize_mx(x, "e4m3")
    assert q.scale_codes.tolist() == [[128]] and q.multiplier.tolist() == [[2.0]]
    assert q.codes[0, :5].tolist() == [0x7E, 0x30, 0x3D, 0xB0, 0x00]
    assert q.dequantize()[0, :4].tolist() == [896.0, 1.0, 3.25, -1.0]
    rc = B.quantize_mx(x, "e4m3", rule="rceil")     # ceil(log2(1000 / 448)) = 2: no saturation
    assert rc.scale_codes.tolist() == [[129]] and rc.dequantize()[0, 0] == 1024.0   # 250 → 256 in E4M3


def test_mx_scale_rule_matches_spec_formula():
    amax = np.array([1.0, 3.0, 448.0, 1000.0, 2.0 ** -140, 0.0, 6.0], np.float32)
    assert B.mx_scale_exponent(amax, "e4m3").tolist() == [-8, -7, 0, 1, -127, -127, -6]
    assert B.mx_scale_exponent(amax, "e2m1").tolist() == [-2, -1, 6, 7, -127, -127, 0]
    assert B.mx_scale_exponent_rceil(np.array([448.0, 449.0, 6.0, 0.0], np.float32), "e4m3").tolist() == [0, 1, -6, -127]


def test_nvfp4_by_hand_as_torchao():
    """Two 16-element blocks, by hand with torchao's nvfp4_quantize (per-tensor scale): tensor amax 6 →
    ts = 6 / 2688; block 1 amax 6 → 6/6/ts = 448 → E4M3 448 (code 0x7E); values 6, 3, 1, 0.4, 0.25 (a tie between
    0 and 0.5 → 0), 2.5 (a tie between 2 and 3 → 2, the even code 4). Block 2 amax 0.6 → 0.1/ts = 44.8 → E4M3
    rounds to 44 (spacing 4 in [32, 64)), so 0.6 / (44·ts) = 6.1 saturates at 6."""
    x = np.zeros((1, 32), np.float32)
    x[0, :6] = [6.0, 3.0, 1.0, 0.4, 0.25, 2.5]
    x[0, 16:18] = [0.6, -0.3]
    q = B.quantize_nvfp4(x)
    assert q.tensor_scale == float(np.float32(6.0) / np.float32(2688.0))
    assert B.decode(q.scale_codes, "e4m3").tolist() == [[448.0, 44.0]]
    assert q.codes[0, :6].tolist() == [7, 5, 2, 1, 0, 4]
    assert B.decode(q.codes[0, 16:18], "e2m1").tolist() == [6.0, -3.0]
    assert np.allclose(q.dequantize()[0, 16:18], [6 * 44 * q.tensor_scale, -3 * 44 * q.tensor_scale])


@pytest.mark.parametrize("block", [(1, 128), (128, 128), (4, 32)])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_blocks_equal_torch_scaling_module(block, fmt):
    x = P.outlier_activations(128, 256, outlier=3000.0)
    ours = B.quantize_fp8(x.numpy(), fmt, block)
    theirs = P.quantize_blockwise(x, block, fmt)
    np.testing.assert_array_equal(ours.codes, theirs.data.view(torch.uint8).numpy())
    np.testing.assert_array_equal(ours.fp32_scale, theirs.scale.numpy())
    np.testing.assert_array_equal(ours.dequantize().astype(np.float32), theirs.dequantize().numpy())
    per_tensor = B.quantize_fp8(x.numpy(), fmt, None)
    np.testing.assert_array_equal(per_tensor.codes, P.quantize_tensorwise(x, fmt).data.view(torch.uint8).numpy())


block_values = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=32), min_size=32,
                        max_size=32)


@settings(max_examples=150, deadline=None)
@given(block_values)
def test_mx_rceil_error_bound(values):
    """E4M3 rounds to a relative half-ulp, 2**−4, for normal elements; below, at most half a subnormal step,
    X · 2**−10. (RCEIL is not idempotent: a block maximum that rounds down can pick a smaller scale next time.)"""
    x = np.array([values], np.float32)
    q = B.quantize_mx(x, "e4m3", rule="rceil")
    d = q.dequantize()
    X = q.multiplier[0, 0]
    assert (np.abs(d - x) <= np.maximum(2.0 ** -4 * np.abs(x), X * 2.0 ** -10) * (1 + 1e-12)).all()
    assert (np.sign(d) * np.sign(x) >= 0).all()


@settings(max_examples=100, deadline=None)
@given(block_values)
def test_mx_floor_scale_puts_amax_in_the_top_binade(values):
    x = np.array([values], np.float32)
    amax = float(np.abs(x).max())
    q = B.quantize_mx(x, "e4m3")
    if amax >= 2.0 ** -100:
        assert 256 <= amax / q.multiplier[0, 0] < 512   # [2**emax, 2**(emax + 1)): above 448 it saturates
    assert np.abs(q.dequantize()).max() <= max(amax, 0) * (1 + 2.0 ** -4)
    again = B.quantize_mx(q.dequantize().astype(np.float32), "e4m3")    # FLOOR is idempotent: same scale, same codes
    np.testing.assert_array_equal(again.codes, q.codes)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32), min_size=16, max_size=16))
def test_nvfp4_round_trip_bounds(values):
    """NVFP4 error: E2M1's half-step is at most 1/4 of the element's magnitude range; per element,
    |x̂ − x| ≤ 0.25 · total scale · 2 (the step near 6 is 2) and zero stays zero."""
    x = np.array([values], np.float32)
    q = B.quantize_nvfp4(x)
    d = q.dequantize()
    total = q.multiplier[0, 0]
    assert (np.abs(d - x) <= 1.0 * total + 1e-6 * np.abs(x)).all()
    assert (d[x == 0] == 0).all()


def test_bits_per_element_from_quantised_tensors():
    x = np.random.default_rng(4).standard_normal((32, 512)).astype(np.float32)
    assert B.quantize_mx(x).bits_per_element == B.bits_per_element("mxfp8") == 8 + 8 / 32
    assert B.quantize_nvfp4(x).bits_per_element == B.bits_per_element("nvfp4", numel=x.size) == 4 + 8 / 16 + 32 / x.size
    assert B.quantize_fp8(x, "e4m3", (1, 128)).bits_per_element == B.bits_per_element("fp8-1x128") == 8.25
    assert B.bits_per_element("fp8-128x128") == 8 + 32 / 16384


def test_small_blocks_help_with_an_outlier():
    x = B.outlier_tensor(outlier=1e5)
    for scheme in ("fp8-1x128", "mxfp8", "nvfp4"):
        errs = [B.error_point(x, scheme, n).others_error for n in (16, 32, 128, 1024)]
        assert errs == sorted(errs), (scheme, errs)
    assert B.error_point(x, "nvfp4", 1024).flushed == 1.0      # one NVFP4 scale per row: the row is lost
    assert B.error_point(x, "fp8-tensor").others_error > 3 * B.error_point(x, "fp8-1x128", 32).others_error


def test_layer_bytes_against_the_model_config():
    cfg = PRESETS["llama3-8b"]
    params = cfg.attention_parameters() + cfg.mlp_parameters()
    lb = {r.key: B.layer_bytes(r.key, hidden_size=cfg.hidden_size, ffn_hidden_size=cfg.ffn_hidden_size,
                               num_heads=cfg.num_heads, num_kv_heads=cfg.kv_heads) for r in B.FORMAT_RECIPES}
    assert lb["bf16"].weights == lb["bf16"].all_gather == 2 * params
    assert lb["torchao-float8"].all_gather == params + 4 * 7                  # FP8 all-gather: 1 B + a scale per tensor
    assert lb["te-hybrid"].all_gather == 2 * params                           # TE quantises after the bf16 gather
    assert lb["mxfp8"].weights == params * 8.25 / 8
    assert lb["nvfp4"].weights == pytest.approx(params * 4.5 / 8 + 4 * 7)
    assert lb["deepseek-v3"].activations == 8192 * (3 * 4096 + 14336) * (1 + 4 / 128)


@pytest.mark.parametrize("call, param", [
    (lambda: B.encode([float("nan")]), "x"),
    (lambda: B.encode([1.0], "e3m4"), "fmt"),
    (lambda: B.quantize_mx(np.ones(32)), "x"),
    (lambda: B.quantize_mx(np.ones((2, 48))), "block"),
    (lambda: B.quantize_mx(np.ones((2, 32)), rule="round"), "rule"),
    (lambda: B.quantize_nvfp4(np.ones((2, 32)), block_size=0), "block[1]"),
    (lambda: B.quantize(np.ones((2, 32)), "mxfp6"), "scheme"),
    (lambda: B.decode(np.array([300]), "e4m3"), "codes"),
    (lambda: B.e8m0_code(np.array([128])), "exponent"),
    (lambda: B.outlier_tensor(outlier=0.5), "outlier"),
    (lambda: B.layer_bytes("fp16"), "recipe"),
    (lambda: B.encode([1e39]), "x"),
])
def test_bad_input_names_the_parameter(call, param):
    with pytest.raises(DistlearnValueError) as e:
        call()
    assert e.value.param == param and e.value.zh and e.value.en


def _reference_accumulate(row, bits, every):
    """One dot product, term by term, with Python floats and math.frexp (independent of the vectorised code)."""
    total, part = 0.0, 0.0
    for k, v in enumerate(row):
        f, e = math.frexp(part + v)
        part = math.ldexp(round(math.ldexp(f, bits + 1)), e - bits - 1)   # round(): ties to even, as np.round
        if every and (k + 1) % every == 0:
            total, part = total + part, 0.0
    return total + part


def test_accumulate_against_a_term_by_term_reference():
    rng = np.random.default_rng(5)
    p = rng.standard_normal((3, 300))
    for bits, every in ((13, None), (13, 128), (5, 7), (52, None)):
        ours = B.accumulate(p, bits, every)
        assert ours.tolist() == [_reference_accumulate(r, bits, every) for r in p]
    assert B.accumulate(p, 52).tolist() == [math.fsum([]) + sum(r.tolist(), 0.0) for r in p]   # fp64 sequential


def test_fp32_promotion_every_128_cuts_the_accumulation_error():
    rng = np.random.default_rng(0)
    p = np.abs(rng.standard_normal((32, 4096))) * np.abs(rng.standard_normal((32, 4096)))
    exact = p.sum(axis=1)
    never = np.abs(B.accumulate(p, 13) - exact) / exact
    promoted = np.abs(B.accumulate(p, 13, 128) - exact) / exact
    assert np.median(never) > 50 * np.median(promoted)
