"""Whole-model activation memory, recompute FLOPs, offload traffic and the seed-b grid, against closed forms and the
paper's terms."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from distlearn.activation_memory import formulas as A
from distlearn.seeds import activations as seeds
from distlearn.memory.formulas import activation_bytes_per_layer, model_state_bytes, GB
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError

GPT3 = PRESETS["gpt3-175b"]


@given(s=st.integers(1, 4096), b=st.integers(1, 8), heads=st.sampled_from([1, 2, 4, 8, 16]),
       hd=st.integers(1, 64), tp=st.sampled_from([1, 2, 4]), sp=st.booleans(),
       rc=st.sampled_from(["none", "selective", "full"]))
@settings(max_examples=200, deadline=None)
def test_dtype_aware_formula_equals_contract_at_16_bit(s, b, heads, hd, tp, sp, rc):
    if heads % tp:
        return
    kw = dict(seq_len=s, micro_batch_size=b, hidden_size=heads * hd, num_heads=heads, tp=tp, sequence_parallel=sp,
              recompute=rc)
    assert math.isclose(A.layer_activation_bytes(**kw), activation_bytes_per_layer(**kw), rel_tol=1e-12)


def test_terms_sum_to_korthikanti_and_gpt3_check_value():
    t = A.layer_activation_terms(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
    assert t["total"] == activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
    assert t["total"] / 2**20 == 2736
    # without dropout: 32 sbh + 2 a s^2 b at 16 bit (masks and the dropped copy of the probabilities vanish)
    t0 = A.layer_activation_terms(seq_len=16, micro_batch_size=2, hidden_size=8, num_heads=2, dropout=False)
    assert t0["total"] == 32 * 16 * 2 * 8 + 2 * 2 * 16 * 16 * 2
    # fp32 tensors, 1-byte masks: the dtype-aware closed form agrees term by term
    t4 = A.layer_activation_terms(seq_len=16, micro_batch_size=2, hidden_size=8, num_heads=2, activation_bytes=4)
    assert t4["total"] == A.layer_activation_bytes(seq_len=16, micro_batch_size=2, hidden_size=8, num_heads=2,
                                                   activation_bytes=4)


def test_layers_on_stage_cover_every_layer():
    for L in range(1, 40):
        for pp in range(1, L + 1):
            counts = [A.layers_on_stage(L, pp, s) for s in range(pp)]
            assert sum(counts) == L and max(counts) - min(counts) <= 1
    with pytest.raises(DistlearnValueError):
        A.layers_on_stage(4, 5, 0)


def test_inflight_closed_forms():
    assert [A.inflight_microbatches("1f1b", 4, 8, s) for s in range(4)] == [4, 3, 2, 1]
    assert [A.inflight_microbatches("1f1b", 4, 2, s) for s in range(4)] == [2, 2, 2, 1]
    assert [A.inflight_microbatches("gpipe", 4, 8, s) for s in range(4)] == [8] * 4
    assert A.inflight_microbatches("none", 1, 16, 0) == 1
    with pytest.raises(DistlearnValueError):
        A.inflight_microbatches("none", 2, 4, 0)


def test_inflight_matches_pipeline_simulation():
    from distlearn.pipeline_parallel import schedules as pipeline

    for sched in ("gpipe", "1f1b"):
        for p, m in [(2, 4), (4, 8), (4, 2), (3, 7)]:
            r = pipeline.simulate(sched, p, m)
            assert list(r.peak_inflight) == [A.inflight_microbatches(sched, p, m, s) for s in range(p)]


def test_model_activations_gpt3_terms():
    s, b = 2048, 1
    act = A.model_activation_bytes(GPT3, seq_len=s, micro_batch_size=b)
    sbh = s * b * GPT3.hidden_size
    assert act.layers == 96 * 2736 * 2**20
    assert act.embedding == sbh and act.head == 4 * sbh
    assert act.logits == 4 * s * b * GPT3.vocab_size
    # Korthikanti §4.3: with p = 1 the extra terms are sbh (embedding dropout) + 4 sbh + 4 s b V
    assert act.total == act.layers + 5 * sbh + 4 * s * b * GPT3.vocab_size
    # 1F1B first stage keeps p micro-batches of L/p layers: the same as all layers of one micro-batch
    pp = A.model_activation_bytes(GPT3, seq_len=s, micro_batch_size=b, pp=8, num_microbatches=16, tp=8,
                                  sequence_parallel=True)
    one = A.model_activation_bytes(GPT3, seq_len=s, micro_batch_size=b, tp=8, sequence_parallel=True)
    assert pp.layers == one.layers and pp.logits == 0 and pp.inflight == 8
    last = A.model_activation_bytes(GPT3, seq_len=s, micro_batch_size=b, pp=8, stage=7, num_microbatches=16, tp=8,
                                    sequence_parallel=True)
    assert last.inflight == 1 and last.logits == 4 * s * b * GPT3.vocab_size / 8 and last.embedding == 0


def test_full_recompute_keeps_inputs_plus_one_layer():
    act = A.model_activation_bytes(GPT3, seq_len=2048, micro_batch_size=1, recompute="full")
    assert act.layers == 96 * 2 * 2048 * 12288
    assert act.working == 2736 * 2**20


def test_gradient_accumulation():
    assert A.gradient_accumulation_steps(1024, 2, 64) == 8
    with pytest.raises(DistlearnValueError):
        A.gradient_accumulation_steps(1000, 3, 8)
    # activations depend on the micro-batch, not on the number of accumulation steps
    a1 = A.model_activation_bytes(GPT3, seq_len=2048, micro_batch_size=1, num_microbatches=1).total
    a8 = A.model_activation_bytes(GPT3, seq_len=2048, micro_batch_size=1, num_microbatches=8).total
    assert a1 == a8


def test_recompute_flops():
    h, s = 12288, 2048
    f = A.layer_forward_flops(seq_len=s, micro_batch_size=1, hidden_size=h)
    assert f["linear"] == 24 * s * h * h and f["attention"] == 4 * s * s * h
    r = A.recompute_flops(GPT3, seq_len=s, micro_batch_size=1, recompute="full")
    # Korthikanti et al. 2022, App. A: model FLOPs 72 B s l h^2 (1 + s/6h + V/12hl) per iteration
    L, V = GPT3.num_layers, GPT3.vocab_size
    assert math.isclose(r["model"], 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L)), rel_tol=1e-12)
    # Narayanan et al. 2021, §5.1, with full recomputation: 96 B s l h^2 (1 + s/6h + V/16lh)
    assert math.isclose(r["model"] + r["extra"], 96 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)),
                        rel_tol=1e-12)
    assert math.isclose(r["extra"], L * (24 * s * h * h + 4 * s * s * h))
    assert 0.32 < r["overhead"] < 1 / 3
    sel = A.recompute_flops(GPT3, seq_len=s, micro_batch_size=1, recompute="selective")
    assert math.isclose(sel["extra"], L * 4 * s * s * h) and sel["overhead"] < 0.01
    assert A.recompute_flops(GPT3, seq_len=s, micro_batch_size=1)["extra"] == 0


def test_offload_traffic():
    n = 10**9
    t = A.offload_traffic(n, dp=8, zero_stage=2, offload_optimizer=True, pcie_gb_per_s=25)
    assert t["pcie_bytes"] == 4 * n / 8 and math.isclose(t["pcie_s"], 4 * n / 8 / 25e9)
    t3 = A.offload_traffic(n, dp=8, zero_stage=3, offload_optimizer=True, offload_params=True, nvme=True,
                           nvme_gb_per_s=5)
    assert t3["pcie_bytes"] == (2 + 4) * n / 8 and t3["nvme_bytes"] == 24 * n / 8
    assert math.isclose(t3["nvme_s"], 24 * n / 8 / 5e9)
    t4 = A.offload_traffic(n, dp=8, zero_stage=3, offload_optimizer=False, offload_params=True, recompute_full=True)
    assert t4["pcie_bytes"] == (3 * 2 + 2) * n / 8 and t4["nvme_bytes"] == 0
    with pytest.raises(DistlearnValueError):
        A.offload_traffic(n, zero_stage=2, offload_params=True)


def test_seed_grid_reproduces_seed_and_corrects_it():
    cfg = PRESETS["llama2-70b"]
    rows = seeds.seed_grid(cfg)
    assert len(rows) == 8
    # the seed's own numbers (its formula evaluated by hand)
    base16, base8 = 70e9 * 16 / 8 / 1e9, 70e9 * 8 / 8 / 1e9
    act = 2048 * 4096 * 128 * 8 / 1e9
    assert math.isclose(rows[0]["seed_gb"], base16 + act)
    assert math.isclose(rows[7]["seed_gb"], base8 + 0.1 * act - 0.3 * base8)
    n = cfg.num_parameters()
    for r in rows:
        real = r["real"]
        states = model_state_bytes(n, dp=8, zero_stage=3, precision="mixed" if r["bf16"] else "fp32",
                                   offload_optimizer=r["offload"])
        assert real["params"] + real["grads"] + real["optimizer"] == states.total
        assert math.isclose(r["real_gb"], real["total"] / GB)
    # mistake 9: bf16 model states are 16 B/param like fp32, not 8
    no_off = [r for r in rows if not r["offload"] and not r["ckpt"]]
    assert no_off[0]["real"]["optimizer"] + no_off[0]["real"]["params"] + no_off[0]["real"]["grads"] == \
        no_off[1]["real"]["optimizer"] + no_off[1]["real"]["params"] + no_off[1]["real"]["grads"]


def test_seed_activation_parts():
    # seed-a: 4 s b h bytes per layer undercounts Korthikanti's 34 s b h + 5 a s^2 b
    seed = seeds.seed_activation_bytes(7, 2, 2048, 1, hidden_dim=4096, num_layers=32)
    real = 32 * activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden_size=4096, num_heads=32)
    assert seed == 2048 * 4096 * 2 * 4 * 32 and real / seed > 10
    assert seeds.seed_activation_bytes(7) == 7e9 * 2 * 0.5


def test_explorer_compute_adds_up():
    from distlearn.activation_memory import explorer as w

    r = w.compute(model="llama2-7b", seq_len=4096, micro_batch_size=2, tp=2, sequence_parallel=True,
                  recompute="selective", dp=8, zero_stage=3, offload="optimizer", gpu_gb=80)
    cfg = PRESETS["llama2-7b"]
    states = model_state_bytes(cfg.num_parameters() // 2, dp=8, zero_stage=3, offload_optimizer=True)
    act = A.model_activation_bytes(cfg, seq_len=4096, micro_batch_size=2, tp=2, sequence_parallel=True,
                                   recompute="selective")
    assert r["parts"]["optimizer"] == 0 and r["cpu_bytes"] == states.cpu_total
    assert math.isclose(r["total"], states.total + act.total)
    assert math.isclose(r["overhead"], A.recompute_flops(cfg, seq_len=4096, micro_batch_size=2, tp=2,
                                                         recompute="selective")["overhead"])
    assert "error" in w.compute(model="gpt2-xl", tp=2)


def test_layers_on_stage_matches_pipeline_partition():
    from distlearn.pipeline_parallel import schedules as pipeline

    for L, p in [(10, 4), (7, 3), (80, 6), (96, 8)]:
        assert list(pipeline.partition_layers(L, p)) == [A.layers_on_stage(L, p, s) for s in range(p)]


def test_seed_grid_figure_stacks_real_parts():
    import matplotlib
    matplotlib.use("Agg")
    from distlearn.activation_memory.plots import seed_grid_figure

    rows = seeds.seed_grid(PRESETS["llama2-70b"])
    fig, ax = seed_grid_figure(rows)
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 4 * len(rows)                       # seed bar + three stacked parts per row
    assert heights[: len(rows)] == pytest.approx([r["seed_gb"] for r in rows])
    tops = [sum(heights[len(rows) * k + i] for k in (1, 2, 3)) for i in range(len(rows))]
    assert tops == pytest.approx([r["real_gb"] for r in rows])


def test_offload_step_time_includes_the_cpu_adam_step():
    """Issue 13, item 12: the CPU Adam step over the offloaded shards is in the time model, and dominates."""
    n = PRESETS["llama2-70b"].num_parameters()
    t = A.offload_step_time(n, dp=8, ranks_per_host=8, pcie_gb_per_s=25, host_memory_gb_per_s=200)
    assert t["host_params"] == 8 * n / 8
    assert t["cpu_adam_s"] == pytest.approx(n / A.CPU_ADAM_PARAMS_PER_S)
    assert A.CPU_ADAM_PARAMS_PER_S == pytest.approx(11.6e9 / 8.2)          # DeepSpeed PR #735
    assert t["pcie_s"] == pytest.approx(4 * n / 8 / 25e9)
    assert t["total_s"] == pytest.approx(t["pcie_s"] + t["cpu_adam_s"])
    assert t["cpu_adam_s"] > 10 * t["pcie_s"]                               # PCIe alone misses most of it
    assert t["roofline_s"] == pytest.approx(28 * n / 200e9) and t["roofline_s"] < t["cpu_adam_s"]
    # DeepSpeed 0.19.8 sends fp32 gradients: 4 + 2 B/param instead of the paper's 2 + 2
    assert A.offload_traffic(n, dp=8, grad_bytes=4)["pcie_bytes"] == 6 * n / 8
    with pytest.raises(DistlearnValueError):
        A.offload_step_time(n, dp=8, zero_stage=0)


def test_cpu_adam_bytes_per_param_from_deepspeed_source():
    """28 B/param: Step_1 of DeepSpeed's cpu_adam reads params, grads, exp_avg, exp_avg_sq and writes three back."""
    import pathlib
    import re
    ds = pytest.importorskip("deepspeed")
    src = (pathlib.Path(ds.__file__).parent / "ops/csrc/adam/cpu_adam_impl.cpp").read_text()
    body = src[src.index("void Adam_Optimizer::Step_1"):src.index("void Adam_Optimizer::Step_4")]
    reads = set(re.findall(r"= \(?float\)?\s*(\w+)\[k\]|= (_exp_avg\w*)\[k\]", body))
    writes = set(re.findall(r"(\w+)\[k\] = ", body))
    assert writes == {"_params", "_exp_avg", "_exp_avg_sq"}
    assert {r for pair in reads for r in pair if r} == {"grads", "_params", "_exp_avg", "_exp_avg_sq"}
    assert A.CPU_ADAM_BYTES_PER_PARAM == 4 * (4 + 3)


def test_explorer_attention_choice():
    from distlearn.activation_memory import explorer as w

    cfg = PRESETS["llama2-7b"]
    for att in ("flash", "materialised"):
        r = w.compute(model="llama2-7b", seq_len=4096, attention=att)
        act = A.model_activation_bytes(cfg, seq_len=4096, micro_batch_size=1, attention=att)
        assert r["parts"]["activations"] + r["parts"]["logits"] == pytest.approx(act.total)
    assert w.compute(attention="default")["total"] == w.compute(attention="flash")["total"]
    assert w.compute(attention="materialised")["total"] > w.compute(attention="flash")["total"]


def test_explorer_refuses_gpt_sequences_beyond_learned_positions():
    """GPT presets have learned position embeddings (GPT-3: 2048): a longer sequence cannot run."""
    from distlearn.activation_memory import explorer

    assert "error" in explorer.compute(model="gpt3-175b", seq_len=4096, tp=8)
    assert "error" not in explorer.compute(model="gpt3-175b", seq_len=2048, tp=8)
    assert "error" not in explorer.compute(model="llama2-7b", seq_len=32768)     # rotary: longer contexts exist
