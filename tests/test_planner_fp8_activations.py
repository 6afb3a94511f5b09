"""The planner's activations under an FP8 recipe (issue 38): each layer as fp8_activation_table counts it (linear
inputs cached in FP8, Transformer Engine and DeepSeek-V3 §3.3.3), so chapter 08's table and chapter 14's planner
agree, and checked here against a closed form written from the TE rules, not from the table."""
import pytest

from distlearn.activation_memory.formulas import config_layer_bytes
from distlearn.core.hardware import make_cluster
from distlearn.core.models import get_preset
from distlearn.planning.setting import make_setting
from distlearn.precision import fp8_recipes as R


def _setting(precision, swiglu="unfused"):
    return make_setting(get_preset("llama3-70b"), make_cluster("h100-80gb", 64), 64, 8192, precision,
                        attention="flash", swiglu=swiglu)


@pytest.mark.parametrize("swiglu", ["unfused", "fused"])
@pytest.mark.parametrize("tp,sp", [(1, False), (8, True), (4, False)])
def test_te_fp8_layer_keeps_its_linear_inputs_in_fp8(tp, sp, swiglu):
    """A Llama layer with flash attention under te-fp8, in units of s·b·h/t values (h = 8192, f = 28672 = 3.5h, 8 of
    64 heads for K and V): the norms' inputs 2 × 2 B (sp-split), the QKV and MLP inputs 1 B each (FP8, sp-split),
    q 2 B, k and v 2 B × 8/64 each, the attention output O 2 B plus its FP8 copy for the output projection 1 B, the
    SwiGLU tensors in bf16 (unfused: silu input, silu output and up output, 3 × 2 B × 3.5; fused: its input,
    2 × 2 B × 3.5) and the down projection's input in FP8 (1 B × 3.5), and the fp32 log-sum-exp (4 B per head and
    token). bf16 keeps the same tensors at 2 B each, so te-fp8 saves exactly 1 B × (2 + 3.5) units per layer."""
    s, h, a, k, f = 8192, 8192, 64, 8, 28672
    units = s * h / tp                       # values of s·b·h/t, b = 1
    swiglu_units = (3 if swiglu == "unfused" else 2) * 2 * f / h
    # the norms' inputs and the QKV / MLP inputs are split across the tp ranks only with sequence parallelism
    closed = s * h / (tp if sp else 1) * (2 * 2 + 1 + 1) + units * (2 + 2 * 2 * k / a + 2 + 1 + swiglu_units + f / h) + 4 * a * s / tp
    st = _setting("te-fp8", swiglu)
    assert st.act(1, tp, sp, "none") == pytest.approx(closed, rel=1e-12)
    bf16 = config_layer_bytes(st.model, seq_len=s, micro_batch_size=1, tp=tp, sequence_parallel=sp, recompute="none",
                              attention="flash", swiglu=swiglu)
    saved = (s * h / (tp if sp else 1)) * 2 + units * f / h   # qkv + MLP inputs (sp-split) + down input
    assert bf16 - st.act(1, tp, sp, "none") == pytest.approx(saved - units, rel=1e-12)  # minus O's FP8 copy


def test_every_recipe_follows_its_activation_rules():
    """te-fp32-params caches what te-fp8 caches; torchao and bf16 keep the bf16 layer; the planner's setting gives
    the same bytes as config_layer_fp8_bytes for each FP8 recipe, and a bad recipe is a bilingual error."""
    kw = dict(seq_len=8192, micro_batch_size=1, tp=8, sequence_parallel=True, recompute="none", attention="flash")
    m = get_preset("llama3-70b")
    base = config_layer_bytes(m, **kw)
    assert R.config_layer_fp8_bytes(m, "te-fp32-params", **kw) == R.config_layer_fp8_bytes(m, "te-fp8", **kw) < base
    assert R.config_layer_fp8_bytes(m, "torchao-fsdp2-float8", **kw) == R.config_layer_fp8_bytes(m, "bf16-mixed", **kw)
    assert R.config_layer_fp8_bytes(m, "bf16-mixed", **kw) == pytest.approx(base, rel=1e-12)
    assert R.config_layer_fp8_bytes(m, "deepseek-v3", **kw) < R.config_layer_fp8_bytes(m, "te-fp8", **kw)
    for recipe in ("te-fp8", "te-fp32-params", "deepseek-v3", "torchao-fsdp2-float8"):
        assert _setting(recipe).act(1, 8, True, "none") == R.config_layer_fp8_bytes(m, recipe, **kw)
    from distlearn.core.validate import DistlearnValueError
    with pytest.raises(DistlearnValueError, match="recipe"):
        R.config_layer_fp8_bytes(m, "fp8-everything", **kw)
