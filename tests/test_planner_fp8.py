"""The planner under an FP8 recipe (issue 38). Activations: each layer as fp8_activation_table counts it (linear
inputs cached in FP8, Transformer Engine and DeepSeek-V3 §3.3.3), so chapter 08's table and chapter 14's planner
agree, checked against a closed form written from the TE rules, not from the table. Model states and traffic of
megatron-fp8-cs (FP8 primary weights, bf16 gradients: Megatron-Bridge's FP8 recipes of 2025–26)."""
import pytest

from distlearn.activation_memory.formulas import config_layer_bytes
from distlearn.core.hardware import make_cluster
from distlearn.core.models import get_preset
from distlearn.planning.setting import Plan, make_setting
from distlearn.planning.step_time import dp_seconds
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
    assert R.config_layer_fp8_bytes(m, "megatron-fp8-cs", **kw) == R.config_layer_fp8_bytes(m, "te-fp8", **kw)
    for recipe in ("te-fp8", "te-fp32-params", "megatron-fp8-cs", "deepseek-v3", "torchao-fsdp2-float8"):
        assert _setting(recipe).act(1, 8, True, "none") == R.config_layer_fp8_bytes(m, recipe, **kw)
    from distlearn.core.validate import DistlearnValueError
    with pytest.raises(DistlearnValueError, match="recipe"):
        R.config_layer_fp8_bytes(m, "fp8-everything", **kw)


def test_megatron_fp8_cs_keeps_and_moves_its_own_bytes():
    """megatron-fp8-cs: the FP8 parameter (E4M3, 1 B) and TE's transposed copy (1 B), bf16 gradients (2 B), fp32
    master weights and Adam moments (3 × 4 B) = 16 B per parameter, from the formats' bits; the planner's
    data-parallel collectives move 1 B per parameter in the all-gather and 2 B in the reduce-scatter, so with every
    collective exposed (pp = 2, after the flush) a step's data-parallel seconds are half te-fp8's (2 B and 4 B), plus
    the same per-message latency."""
    from distlearn.precision.formats import FORMATS
    e4m3, bf16, fp32 = (FORMATS[k].nbytes for k in ("e4m3", "bf16", "fp32"))
    assert R.bytes_per_param("megatron-fp8-cs") == {"params": e4m3, "fp8_weights": e4m3, "grads": bf16,
                                                    "optimizer": 3 * fp32, "total": 16}
    assert R.get_recipe("megatron-fp8-cs").gemm == "fp8"

    def setting(precision):
        return make_setting(get_preset("llama3-70b"), make_cluster("h100-80gb", 512), 512, 8192, precision,
                            attention="flash")
    cs, te = setting("megatron-fp8-cs"), setting("te-fp8")
    assert (cs.per["params"], cs.per["grads"]) == (1, 2) and (te.per["params"], te.per["grads"]) == (2, 4)
    plan = Plan(dp=32, tp=8, pp=2, zero_stage=1, micro_batch_size=1, num_microbatches=16, sequence_parallel=True)
    assert 0.5 < dp_seconds(cs, plan) / dp_seconds(te, plan) < 0.53
    psi = 10 ** 9
    states = R.recipe_state_bytes("megatron-fp8-cs", psi, dp=64, zero_stage=1)
    assert (states.params, states.fp8_weights, states.grads, states.optimizer) == (psi, psi, 2 * psi, 12 * psi / 64)


def test_blackwell_keeps_one_fp8_buffer_per_weight():
    """Transformer Engine keeps a transposed FP8 copy of each weight only where FP8 GEMMs take the TN layout alone
    (Hopper); on a B200 or GB200 one buffer serves both layouts (TE utils.py is_non_tn_fp8_gemm_supported: compute
    capability 10.x). The recipes lose exactly that byte there, and the planner's per-GPU model states follow the
    GPU: the same plan on a B200 keeps one byte less per parameter of the stage than on an H100 (the two presets
    differ in nothing else the states read). Fails if the planner counts Hopper's copy on every GPU."""
    from distlearn.precision.formats import FORMATS
    e4m3 = FORMATS["e4m3"].nbytes
    for recipe in ("te-fp8", "te-fp32-params", "megatron-fp8-cs"):
        hopper, blackwell = R.bytes_per_param(recipe), R.bytes_per_param(recipe, fp8_transpose=False)
        assert hopper["fp8_weights"] - blackwell["fp8_weights"] == e4m3
        assert hopper["total"] - blackwell["total"] == e4m3
        assert {k: v for k, v in hopper.items() if k not in ("fp8_weights", "total")} == \
            {k: v for k, v in blackwell.items() if k not in ("fp8_weights", "total")}
    for recipe in ("bf16-mixed", "deepseek-v3", "torchao-fsdp2-float8"):  # no TE transposed copy to drop
        assert R.bytes_per_param(recipe) == R.bytes_per_param(recipe, fp8_transpose=False)
    assert R.bytes_per_param("megatron-fp8-cs", fp8_transpose=False)["total"] == 15
    assert [R.fp8_transpose_kept(g) for g in ("h100-80gb", "h200", "h800", "a100-80gb", "b200", "gb200-nvl72",
                                               "GB200-NVL72-64")] == [True] * 4 + [False] * 3
    with pytest.raises(Exception, match="gpu_name"):
        R.fp8_transpose_kept(None)
    with pytest.raises(Exception, match="fp8_transpose"):
        R.bytes_per_param("te-fp8", fp8_transpose="no")

    model = get_preset("llama3-70b")
    plan = Plan(dp=8, tp=8, pp=2, zero_stage=1, micro_batch_size=1, num_microbatches=16, sequence_parallel=True)
    for recipe in ("te-fp8", "megatron-fp8-cs"):
        st = {g: make_setting(model, make_cluster(g, 128), 128, 8192, recipe, attention="flash")
              for g in ("h100-80gb", "b200")}
        stage_params = st["b200"].stage_sums(0, 40).dense_params / 8  # a 40-layer stage's dense weights per GPU
        hopper, blackwell = (st[g].states(stage_params, 8, 1) for g in ("h100-80gb", "b200"))
        assert hopper.params - blackwell.params == pytest.approx(stage_params * e4m3)
        assert (hopper.grads, hopper.optimizer) == (blackwell.grads, blackwell.optimizer)
