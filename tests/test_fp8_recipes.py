"""distlearn.precision.fp8_recipes against its sources: the quoted sentences (in the module), the Ultra-Scale Playbook's
totals rebuilt tensor by tensor, Megatron's 18 B, and the activation table of distlearn.activation_memory.formulas; the FP8 peaks
of distlearn.core.hardware against the datasheets."""
import pytest

from distlearn.precision import fp8_recipes as R
from distlearn.core import hardware
from distlearn.activation_memory.formulas import layer_activation_terms, layer_shape
from distlearn.memory.formulas import bytes_per_param as memory_bytes_per_param, model_state_bytes
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError

DOC = " ".join(R.__doc__.split())

# The source sentences, as printed in the report / docs / Playbook (whitespace-normalised in the module docstring).
QUOTES = {
    "deepseek-v3": ["We adopt the BF16 data format instead of FP32 to track the first and second moments in the AdamW",
                    "the master weights (stored by the optimizer) and gradients (used for batch size accumulation) "
                    "are still retained in FP32",
                    "for weights, we group and scale elements on a 128x128 block basis",
                    "4 + 4 + 1 + 2 + 2 + 2 = 15"],
    "te-fp8": ["during FP8 training, it allows caching of the FP8 versions of the weights",
               "Hopper only supports TN GEMMs for FP8", "Weight with column-wise usage is needed for dgrad GEMM",
               "with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()"],
    "te-fp32-params": ["FP32 | FP32 | FP32 + FP32 | 4 + 4 + 4 + 4 = 16 bytes"],
    "torchao-fsdp2-float8": ["We cast high precision weights (1/N on each rank) into float8, and perform float8 "
                             "all-gather to save bandwidth", "preventing unsharded fp8 weights from being saved for "
                             "backward"],
    "bf16-mixed": ["bf16 param, fp32 grads"],
}


@pytest.mark.parametrize("key", list(QUOTES))
def test_sources_are_quoted(key):
    for q in QUOTES[key]:
        assert q in DOC, q


def test_per_tensor_totals_follow_the_sources():
    ds = R.get_recipe("deepseek-v3")
    by_name = {t.name_en: t for t in ds.tensors}
    assert by_name["AdamW first moment, bf16"].dtype == "bf16" == by_name["AdamW second moment, bf16"].dtype
    assert by_name["fp32 master weights"].dtype == "fp32" == by_name["fp32 gradients (accumulation)"].dtype
    assert R.bytes_per_param("deepseek-v3")["total"] == pytest.approx(4 + 4 + 2 + 2 + 1 + 4 / 128 ** 2)
    assert R.bytes_per_param("bf16-mixed")["total"] == memory_bytes_per_param("mixed-fp32-grads", "adam")["total"] == 18
    assert R.bytes_per_param("te-fp8") == {"params": 2, "grads": 4, "optimizer": 12, "fp8_weights": 2, "total": 20}
    assert R.bytes_per_param("torchao-fsdp2-float8")["total"] == 16
    assert R.bytes_per_param("te-fp32-params")["total"] == 18


@pytest.mark.parametrize("key", [k for k, r in R.RECIPES.items() if r.playbook_total is not None])
def test_playbook_totals_rebuilt_tensor_by_tensor(key):
    r = R.get_recipe(key)
    assert r.playbook_sum() == r.playbook_total


def test_fp8_copies_are_per_replica():
    psi = 8_000_000_000
    te = R.recipe_state_bytes("te-fp8", psi, dp=64, zero_stage=1)
    assert te.fp8_weights == 2 * psi and te.optimizer == 12 * psi / 64
    base = R.recipe_state_bytes("bf16-mixed", psi, dp=64, zero_stage=1)
    ref = model_state_bytes(psi, dp=64, zero_stage=1, precision="mixed-fp32-grads")
    assert (base.params, base.grads, base.optimizer) == (ref.params, ref.grads, ref.optimizer)
    ao = R.recipe_state_bytes("torchao-fsdp2-float8", psi, dp=8, zero_stage=3)
    assert ao.total == 16 * psi / 8


def test_activation_table_matches_the_baseline_and_changes_only_linear_inputs():
    c = PRESETS["llama3-8b"]
    kw = dict(seq_len=4096, micro_batch_size=1, attention="flash", **layer_shape(c))
    base = layer_activation_terms(**kw)
    for recipe in R.ACTIVATION_RECIPES:
        table = R.fp8_activation_table(recipe, **kw)
        assert sum(t.bf16_bytes for t in table) == base["total"]
    te = {t.name: t for t in R.fp8_activation_table("te-fp8", **kw)}
    sbh = 4096 * c.hidden_size
    assert te["qkv_input"].fp8_bytes == sbh and te["mlp_input"].fp8_bytes == sbh
    assert te["out_proj_input"].fp8_bytes == 3 * sbh          # bf16 O stays + the FP8 copy
    assert te["norm_inputs"].fp8_bytes == te["norm_inputs"].bf16_bytes
    ao = R.fp8_activation_table("torchao-fsdp2-float8", **kw)
    assert all(t.fp8_bytes == t.bf16_bytes for t in ao)
    ds = {t.name: t for t in R.fp8_activation_table("deepseek-v3", **kw)}
    assert ds["down_proj_input"].fp8_bytes == 0 and ds["silu_output"].fp8_bytes == 0
    assert ds["out_proj_input"].fp8_bytes == pytest.approx(sbh * (1.5 + 4 / 128))


def test_communication_items():
    ag = [c for c in R.COMMUNICATION if c.collective == "all_gather"]
    assert {(c.fp8_bytes, c.baseline_bytes) for c in ag} == {(1, 2), (1, 4)}
    rs = [c for c in R.COMMUNICATION if c.collective == "reduce_scatter"]
    assert all(c.fp8_bytes == c.baseline_bytes for c in rs)


def test_fp8_peak_is_the_dense_half_of_the_sparse_datasheet_figure():
    for name in ("h100-80gb", "h200"):
        assert hardware.peak_flops(name, "fp8") == 3958e12 / 2
        assert hardware.peak_flops(name, "fp8") == pytest.approx(2 * hardware.peak_flops(name, "bf16"), rel=1e-3)
    for name in ("a100-80gb", "v100-32gb"):
        with pytest.raises(DistlearnValueError):
            hardware.peak_flops(name, "fp8")


def test_unknown_names():
    with pytest.raises(DistlearnValueError):
        R.bytes_per_param("fp4")
    with pytest.raises(DistlearnValueError):
        R.fp8_activation_table("te-fp32-params", seq_len=8, micro_batch_size=1, hidden_size=8, num_heads=2)


def test_peak_flops_fp32_reads_main_field():
    assert hardware.peak_flops("a100-80gb", "fp32") == hardware.GPUS["a100-80gb"].peak_flops_fp32 == 156e12
    with pytest.raises(DistlearnValueError):
        hardware.peak_flops(hardware.GPUS["h100-80gb"].with_(peak_flops_fp32=None), "fp32")
