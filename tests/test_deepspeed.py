"""distlearn.deepspeed_fsdp.deepspeed against DeepSpeed's own code: estimator formulas vs DeepSpeed's functions and printed
tables, configs parsed by DeepSpeedConfig, and the comparison table's code-checkable claims."""
import re

import pytest

pytest.importorskip("deepspeed")

from distlearn.deepspeed_fsdp import deepspeed as D  # noqa: E402
from distlearn.memory.formulas import model_state_bytes  # noqa: E402
from distlearn.core.models import PRESETS, build_model  # noqa: E402
from distlearn.core.validate import DistlearnValueError  # noqa: E402
from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as ds_z3  # noqa: E402
from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as ds_z2  # noqa: E402

SIZES = [1, 7, 124_439_808, 6_738_415_616, 70_000_000_000, 405_000_000_000]
LAYOUTS = [(1, 1), (8, 1), (8, 4), (4, 16), (3, 5)]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("gpn,nodes", LAYOUTS)
def test_zero2_formula_equals_deepspeed(n, gpn, nodes):
    for off in (True, False):
        assert D.zero2_model_states_mem_needs(n, gpn, nodes, off) == ds_z2(n, gpn, nodes, off)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("gpn,nodes", LAYOUTS)
def test_zero3_formula_equals_deepspeed(n, gpn, nodes):
    largest = max(1, n // 37)
    for off in (True, False):
        for off_p in (True, False):
            for zi in (True, False):
                assert D.zero3_model_states_mem_needs(n, largest, gpn, nodes, off, off_p, zi) == \
                    ds_z3(n, largest, gpn, nodes, off, off_p, zi)


def _numbers(text):
    return [float(x) for x in re.findall(r"([\d.]+)GB", text)]


def test_printed_numbers_helper():
    assert D.printed_numbers(" 12.50GB |   0.49GB | x") == [12.5, 0.49]


@pytest.mark.parametrize("stage", [2, 3])
def test_printed_tables_match(stage):
    n, largest = 6_738_415_616, 131_072_000
    printed = D.deepspeed_estimate_output(n, largest, zero_stage=stage, num_gpus_per_node=8, num_nodes=2)
    ours = D.format_rows(D.estimator_rows(n, largest, zero_stage=stage, num_gpus_per_node=8, num_nodes=2))
    assert _numbers(printed) == _numbers(ours) and len(_numbers(ours)) == (4 if stage == 2 else 12)


def test_estimator_vs_zero_paper():
    n, g = 10**9, 8
    _, gpu = D.zero2_model_states_mem_needs(n, g, 1, cpu_offload=False)
    paper = model_state_bytes(n, dp=g, zero_stage=2)        # 2Ψ + (2 + 12)Ψ/N
    assert gpu - paper.total == pytest.approx(4 * n / g, abs=1)   # DeepSpeed also keeps fp32 gradients of the shard
    _, gpu3, largest = D.zero3_model_states_mem_needs(n, 10**7, g, 1, cpu_offload=False)
    assert gpu3 == 4 * 10**7 + int(18 * n / g) and largest == 4 * 10**7


def test_largest_layer_matches_deepspeed_model_to_params():
    from deepspeed.runtime.zero.stage3 import model_to_params

    cfg = PRESETS["gpt2-small"].with_(vocab_size=100, hidden_size=16, num_heads=2, ffn_hidden_size=64,
                                      num_layers=2, max_seq_len=8)
    model = build_model(cfg, device="cpu")
    total, largest = model_to_params(model)
    assert D.largest_layer_params(model) == largest == cfg.vocab_size * cfg.hidden_size   # the tied embedding
    assert total == cfg.num_parameters()


def test_config_parsed_by_deepspeed():
    cfg = D.deepspeed_config(micro_batch_size=2, gradient_accumulation_steps=4, dp=8, zero_stage=3,
                             offload_optimizer="cpu", offload_params="cpu", precision="bf16")
    ds = D.validate_config(cfg, dp=8)
    assert ds.train_batch_size == 64 == 2 * 4 * 8
    assert ds.zero_optimization_stage == 3 and ds.bfloat16_config.enabled
    assert ds.zero_config.offload_optimizer.device == "cpu" and ds.zero_config.offload_param.device == "cpu"
    with pytest.raises(AssertionError, match="train_batch_size"):
        D.validate_config(cfg, dp=4)     # DeepSpeed's own batch-size identity check
    fp16 = D.validate_config(D.deepspeed_config(micro_batch_size=1, zero_stage=1, precision="fp16"))
    assert fp16.float16_config.enabled and fp16.zero_optimization_stage == 1
    nvme = D.deepspeed_config(micro_batch_size=1, zero_stage=3, offload_optimizer="nvme", nvme_path="/local_nvme")
    assert D.validate_config(nvme).zero_config.offload_optimizer.device == "nvme"


def test_config_rejects_impossible_plans():
    with pytest.raises(DistlearnValueError):
        D.deepspeed_config(micro_batch_size=1, zero_stage=2, offload_params="cpu")
    with pytest.raises(DistlearnValueError):
        D.deepspeed_config(micro_batch_size=1, zero_stage=2, offload_optimizer="nvme", nvme_path="/x")
    with pytest.raises(DistlearnValueError):
        D.deepspeed_config(micro_batch_size=1, zero_stage=3, offload_optimizer="nvme")


def test_claims_hold_for_installed_versions():
    assert D.installed_versions() == {"torch": D.TORCH_VERSION, "deepspeed": D.DEEPSPEED_VERSION}
    assert all(D.verify_claims().values()), D.verify_claims()
    for c in D.COMPARISON:
        assert c.source and c.version and c.en and any("\u4e00" <= ch <= "\u9fff" for ch in c.zh), c
    rows = D.comparison_table("zh")
    assert len(rows) == len(D.FEATURES) and all(len(r) == 1 + len(D.FRAMEWORKS) for r in rows)


def test_deepspeed_never_translated():
    import distlearn.deepspeed_fsdp.deepspeed as mod
    import inspect
    text = inspect.getsource(mod)
    assert text.count("深度速度") == 1   # only where the docstring names the mistranslation


@pytest.mark.parametrize("arch", ["gpt", "llama"])
@pytest.mark.parametrize("vocab", [10, 300])
def test_largest_layer_of_config_matches_deepspeed(arch, vocab):
    from deepspeed.runtime.zero.stage3 import model_to_params

    base = PRESETS["gpt2-small" if arch == "gpt" else "llama2-70b"]
    cfg = base.with_(vocab_size=vocab, hidden_size=16, num_heads=4, num_kv_heads=None if arch == "gpt" else 2,
                     ffn_hidden_size=40, num_layers=1, max_seq_len=12)
    _, largest = model_to_params(build_model(cfg, device="cpu"))
    assert D.largest_layer_params_of_config(cfg) == largest


def test_estimator_explorer_matches_deepspeed():
    from distlearn.deepspeed_fsdp import explorer as w

    r = w.compute(model="llama2-7b", gpus_per_node=8, num_nodes=2, zero_stage=3, offload="optimizer")
    n, largest = PRESETS["llama2-7b"].num_parameters(), PRESETS["llama2-7b"].vocab_size * 4096
    assert (r["ds_cpu"], r["ds_gpu"], r["largest_layer_params"] * 4) == ds_z3(n, largest, 8, 2, True, False, True)
    assert r["paper_gpu"] == model_state_bytes(n, dp=16, zero_stage=3, offload_optimizer=True).total
    assert "error" in w.compute(zero_stage=2, offload="optimizer+params")
