"""Chapter 15 (post-training and generation): the KV-cache formulas against a real KV cache built with torch, the
decode and prefill rooflines against their closed forms, the generation layouts' limits, the resharding counts
against interval arithmetic and against the bytes a real gloo run sends, and a deliberate break of each simulation
caught by its real-engine check."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.core.hardware import get_gpu
from distlearn.core.models import MLA, MOE_PRESETS, PRESETS, ModelConfig, build_model
from distlearn.core.validate import DistlearnValueError
from distlearn.post_training import generation as G, kv_cache, resharding as R

ALL = {**PRESETS, **MOE_PRESETS}
TINY = {
    "mha-gpt": ModelConfig("tiny-mha", "gpt", 97, 48, 2, 4, 96, 64),
    "gqa": ModelConfig("tiny-gqa", "llama", 97, 64, 3, 8, 128, 64, num_kv_heads=2),
    "mqa": ModelConfig("tiny-mqa", "llama", 97, 64, 2, 8, 128, 64, num_kv_heads=1),
    "mla": ModelConfig("tiny-mla", "llama", 97, 64, 2, 4, 128, 64,
                       mla=MLA(q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)),
    "moe-mla": ModelConfig("tiny-moe-mla", "llama", 97, 64, 2, 4, 128, 64, num_experts=4, experts_per_token=2,
                           expert_ffn_hidden_size=32, first_dense_layers=1, router="sigmoid",
                           mla=MLA(q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                   v_head_dim=8)),
}


# ---------------------------------------------------------------------------------------------- the KV cache
def test_kv_bytes_match_the_published_shapes():
    # Llama 3 8B: 2 · 32 layers · 8 KV heads · 128 · 2 bytes; DeepSeek-V3: (512 + 64) · 61 · 2 (DeepSeek-V2 Table 1)
    assert G.kv_bytes_per_token(PRESETS["llama3-8b"]) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert G.kv_bytes_per_token(MOE_PRESETS["deepseek-v3"]) == (512 + 64) * 61 * 2 == 70_272
    assert G.kv_bytes_per_token(PRESETS["llama2-7b"]) == 2 * 32 * 32 * 128 * 2      # MHA: every head cached
    assert G.kv_bytes(PRESETS["llama3-70b"], 8192, batch=4) == 4 * 8192 * 2 * 80 * 8 * 128 * 2


@pytest.mark.parametrize("name", sorted(ALL))
def test_reference_loop_equals_the_formula(name):
    for b in (1, 2, 4):
        assert G.reference_kv_bytes_per_token(ALL[name], b) == G.kv_bytes_per_token(ALL[name], b)


def cache_matches(config: ModelConfig, dtype=torch.float32, batch=3, prompt=5, new=4) -> tuple[bool, float]:
    """Generate with a real cache; (measured bytes == kv_bytes(formula), largest logit difference vs one full
    forward)."""
    torch.manual_seed(0)
    model = build_model(config, "cpu").to(dtype).eval()
    run = kv_cache.generate(model, torch.randint(0, config.vocab_size, (batch, prompt)), new_tokens=new)
    cached = prompt + new - 1
    return run.cache_bytes == G.kv_bytes(config, cached, batch, kv_bytes=dtype.itemsize), run.max_diff


@pytest.mark.parametrize("kind", sorted(TINY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_formula_equals_a_real_kv_cache(kind, dtype):
    equal, diff = cache_matches(TINY[kind], dtype)
    assert equal
    assert diff < (1e-5 if dtype == torch.float32 else 0.1)   # the cache is a working one: logits of a full forward


def test_a_broken_kv_formula_is_caught_by_the_real_cache(monkeypatch):
    """The deliberate break: count the query heads instead of the KV heads (the MHA formula on a GQA model)."""
    assert cache_matches(TINY["gqa"])[0]
    real = G.kv_dims.unchecked

    def broken(model):
        cached, attended = real(model)
        return (2 * model.num_heads * model.head_dim if model.mla is None else cached), attended
    monkeypatch.setattr(G, "kv_dims", broken)
    assert not cache_matches(TINY["gqa"])[0]
    assert cache_matches(TINY["mha-gpt"])[0]          # on MHA the two agree, so the GQA model is the one to test


def test_a_cache_is_refused_beyond_the_context():
    model = build_model(TINY["gqa"], "cpu")
    with pytest.raises(DistlearnValueError):
        kv_cache.generate(model, torch.zeros(1, 60, dtype=torch.long), new_tokens=8)
    with pytest.raises(DistlearnValueError):
        kv_cache.generate(model, torch.zeros(1, 4), new_tokens=2)


# ---------------------------------------------------------------------------------------------- rooflines
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_decode_intensity_is_the_batch_for_a_dense_model_without_cache(name):
    m = PRESETS[name]
    for b in (1, 7, 64):
        step = G.decode_step(m, "h100-80gb", b, 0)
        assert step.intensity == pytest.approx(b, rel=1e-12)
        n = m.active_parameters(include_embedding=False)
        assert G.decode_intensity(n, b, 0, 0) == pytest.approx(step.intensity, rel=1e-12)


def test_decode_with_cache_follows_the_closed_form():
    m = PRESETS["llama3-8b"]
    n, kv = m.active_parameters(include_embedding=False), G.kv_bytes_per_token(m)
    for b, t in [(1, 1024), (64, 8192), (256, 4096)]:
        step = G.decode_step(m, "h100-80gb", b, t)
        assert step.bytes == n * 2 + b * t * kv
        assert step.flops == 2 * n * b + 2 * b * t * m.num_layers * m.num_heads * 2 * m.head_dim
        assert step.time == max(step.flops / 989e12, step.bytes / 3350e9)
    # the ceiling 2N / (T·k) as the batch grows (weight FLOPs only)
    assert G.decode_intensity(n, 10**9, 8192, kv) == pytest.approx(2 * n / (8192 * kv), rel=1e-3)
    # with attention's FLOPs (decode_step), the ceiling gains n_heads / n_kv_heads FLOPs per byte of cache (GQA)
    huge = G.decode_step(m, "h100-80gb", 10**6, 8192)
    assert huge.intensity == pytest.approx(2 * n / (8192 * kv) + m.num_heads / m.kv_heads, rel=1e-3)


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100-80gb", "h200", "b200"])
def test_critical_batch_is_where_decode_turns_compute_bound(gpu):
    g = get_gpu(gpu)
    b = G.critical_batch(gpu)
    assert b == pytest.approx(g.peak_flops / g.hbm_bw)
    m = PRESETS["llama3-8b"]
    assert G.decode_step(m, gpu, math.floor(b), 0).bound == "memory"
    assert G.decode_step(m, gpu, math.ceil(b) + 1, 0).bound == "compute"
    assert round(G.critical_batch("h100-80gb")) == 295


def test_prefill_is_compute_bound_and_counts_causal_attention():
    m = PRESETS["llama3-8b"]
    p = G.prefill(m, "h100-80gb", 1, 2048)
    n = m.active_parameters(include_embedding=False)
    assert p.flops == 2 * n * 2048 + 2048**2 * m.num_layers * m.num_heads * 2 * m.head_dim
    assert p.bound == "compute" and p.intensity > 1000


def test_experts_touched_matches_a_monte_carlo():
    rng = np.random.default_rng(0)
    for e, k, tokens in [(8, 2, 3), (256, 8, 16), (256, 8, 1)]:
        draws = [len({x for _ in range(tokens) for x in rng.choice(e, k, replace=False)}) for _ in range(3000)]
        assert G.experts_touched(e, k, tokens) == pytest.approx(np.mean(draws), rel=0.02)
    assert G.experts_touched(256, 8, 1) == 8


# ---------------------------------------------------------------------------------------------- layouts
def test_one_gpu_layout_is_the_decode_step():
    m = PRESETS["llama3-70b"]
    L = G.generation_layout(m, "h100-80gb", 64, 4096)
    step = G.decode_step(m, "h100-80gb", 64, 4096)
    assert L.comm_time == 0 and L.compute_time == pytest.approx(step.time, rel=1e-12)
    assert L.weight_bytes == m.num_parameters() * 2 and L.kv_bytes == G.kv_bytes(m, 4096, 64)


def test_tensor_parallelism_divides_weights_and_splits_kv_heads_only_up_to_their_number():
    m = PRESETS["llama3-70b"]   # 8 KV heads
    one = G.generation_layout(m, batch=64, context_len=4096)
    for tp in (2, 4, 8, 16):
        L = G.generation_layout(m, batch=64, context_len=4096, tp=tp)
        assert L.weight_bytes == pytest.approx(one.weight_bytes / tp)
        assert L.kv_bytes == pytest.approx(one.kv_bytes / min(tp, 8))
    ds = MOE_PRESETS["deepseek-v3"]   # MLA: the latent is copied on every TP rank
    assert G.generation_layout(ds, "h200", 64, 4096, tp=8).kv_bytes == G.kv_bytes(ds, 4096, 64)


def test_pipeline_parallelism_does_not_cut_the_latency_of_a_bandwidth_bound_token():
    m = PRESETS["llama3-8b"]
    one = G.generation_layout(m, batch=8, context_len=0)
    pp = G.generation_layout(m, batch=8, context_len=0, pp=4)
    assert pp.compute_time == pytest.approx(one.compute_time, rel=1e-12)
    assert pp.weight_bytes == pytest.approx(one.weight_bytes / 4)
    assert G.generation_layout(m, batch=8, context_len=0, tp=4).compute_time == pytest.approx(one.compute_time / 4)


def test_layout_refuses_impossible_splits():
    with pytest.raises(DistlearnValueError):
        G.generation_layout(PRESETS["llama3-8b"], ep=2)                  # dense model
    with pytest.raises(DistlearnValueError):
        G.generation_layout(PRESETS["llama3-8b"], batch=6, pp=4)         # micro-batches
    with pytest.raises(DistlearnValueError):
        G.generation_layout(MOE_PRESETS["deepseek-v3"], ep=3, batch=3)   # 256 experts


# ---------------------------------------------------------------------------------------------- resharding
layouts = st.sampled_from([(n, tp) for n in (1, 2, 4, 8, 16) for tp in (1, 2, 4, 8, 16) if n % tp == 0])


@settings(max_examples=200, deadline=None)
@given(layouts, st.sampled_from(R.KINDS), st.integers(1, 4), st.integers(1, 4), st.data())
def test_interval_counts_equal_the_closed_forms(layout, kind, a, b, data):
    n, tp = layout
    w = R.Weight("w", n * tp * a, n * tp * b, kind)
    rank = data.draw(st.integers(0, n - 1))
    assert R.received(w, n, tp, rank) == R.closed_form_received(w, n, tp, rank)
    assert R.all_gather_received(w, n, rank) == (n - 1) * w.elements // n


@settings(max_examples=100, deadline=None)
@given(layouts, st.sampled_from(R.KINDS), st.integers(1, 37), st.integers(1, 37))
def test_what_is_sent_is_what_is_received_for_any_sizes(layout, kind, rows, cols):
    n, tp = layout
    w = R.Weight("w", rows, cols, kind)
    assert sum(R.sent(w, n, tp, r) for r in range(n)) == sum(R.received(w, n, tp, r) for r in range(n))
    for r in range(n):   # after the exchange each rank holds exactly what it needs / 交换后每个 rank 恰好拿到所需
        need = R.needed(w, n, tp, r)
        got = sum(p.elements for s in range(n) for p in R.plan([w], n, tp, s) if p.dest == r)
        assert got == R.received(w, n, tp, r) <= (need[0][1] - need[0][0]) * (need[1][1] - need[1][0])


@pytest.mark.parametrize("name", ["llama2-7b", "llama3-8b", "llama3-70b", "llama3.1-405b"])
def test_model_weights_add_up_to_the_parameter_count(name):
    m = PRESETS[name]
    assert sum(w.count * w.elements for w in R.model_weights(m)) == m.num_parameters()


def test_at_scale_direct_resharding_saves_about_tp():
    m = PRESETS["llama3-70b"]
    for n, tp in [(64, 8), (64, 4), (16, 2)]:
        t = R.reshard_traffic(m, n, tp)
        assert t.all_gather == pytest.approx(m.num_parameters() * 2 * (n - 1) / n, rel=1e-3)
        assert tp * 0.9 < t.saving < tp * 1.1
    assert R.reshard_traffic(m, 8, 8).saving > 8        # tp = N: the column weights do not move at all


# ---------------------------------------------------------------------------------------------- the real lab
def closed_form_matches(runs, closed_form=R.closed_form_received) -> bool:
    from distlearn.post_training.lab_reshard import block_weights

    return all(r["received"]["direct"] == sum(closed_form(w, n, tp, r["rank"]) for w in block_weights())
               for (n, tp), ranks in runs.items() for r in ranks)


@pytest.fixture(scope="module")
def lab_runs():
    from distlearn.core import launch
    from distlearn.post_training.lab_reshard import reshard_check

    return {(n, tp): launch.run(reshard_check, n, tp, timeout=180) for n, tp in ((2, 1), (2, 2), (4, 2), (4, 4))}


@pytest.mark.slow
def test_the_lab_reshards_to_the_full_weights_on_2_and_4_processes(lab_runs):
    from distlearn.post_training.lab_reshard import block_weights

    for (n, tp), ranks in lab_runs.items():
        for r in ranks:
            assert r["equal"] == {"direct": True, "all_gather": True, "dtensor": True}
            assert r["received"]["direct"] == sum(R.received(w, n, tp, r["rank"]) for w in block_weights())
            assert r["sent"]["direct"] == sum(R.sent(w, n, tp, r["rank"]) for w in block_weights())
            assert r["received"]["all_gather"] == sum(R.all_gather_received(w, n, r["rank"]) for w in block_weights())
    assert closed_form_matches(lab_runs)


@pytest.mark.slow
def test_a_broken_closed_form_is_caught_by_the_lab(lab_runs):
    """The deliberate break: row-parallel weights counted as if each rank needed the whole weight (the /tp lost)."""
    def broken(w, n, tp, rank):
        if w.kind == "row":
            return (n - 1) / n * w.elements
        return R.closed_form_received(w, n, tp, rank)
    assert closed_form_matches(lab_runs) and not closed_form_matches(lab_runs, broken)


# ---------------------------------------------------------------------------------------------- the prose
def test_the_chapter_quotes_the_numbers_the_package_computes():
    """Each number the chapter's English and Chinese prose states, computed again (a change of a formula or a preset
    that moves one of them fails here, not silently in the text)."""
    from authoring.paths import ROOT

    text = (ROOT / "notebooks" / "15_post_training.md").read_text(encoding="utf-8")
    flat = " ".join(text.split())
    m8, m70, ds = PRESETS["llama3-8b"], PRESETS["llama3-70b"], MOE_PRESETS["deepseek-v3"]
    b1, b64 = G.decode_step(m8, "h100-80gb", 1, 1024), G.decode_step(m8, "h100-80gb", 64, 1024)
    long = G.decode_step(m8, "h100-80gb", 256, 8192)
    tp8, pp8 = (G.generation_layout(m70, "h100-80gb", 64, 4096, tp=8),
                G.generation_layout(m70, "h100-80gb", 64, 4096, pp=8))
    ds8, ds16 = G.generation_layout(ds, "h200", 256, 4096, tp=8), G.generation_layout(ds, "h200", 256, 4096, tp=16)
    t = R.reshard_traffic(m70, 64, 8)
    expected = {
        "about 220 tokens per second": round(1 / b1.time, -1) == 220,
        "A batch of 64 makes 9,085": f"{64 / b64.time:,.0f}" == "9,085",
        "only 1.6 times the step time": f"{b64.time / b1.time:.1f}" == "1.6",
        "reaches only 17 FLOPs per byte, and a step takes 87 ms": (f"{long.intensity:.0f}", f"{long.time * 1e3:.0f}")
        == ("17", "87"),
        "9.0 ms per token with tp = 8 but 44.7 ms with pp = 8": (f"{tp8.latency * 1e3:.1f}", f"{pp8.latency * 1e3:.1f}")
        == ("9.0", "44.7"),
        "take 0.65 ms of the 9.0": f"{tp8.comm_time * 1e3:.2f}" == "0.65",
        "about 4 µs at NVLink speed. An α of a few microseconds is as large, and a token runs 160 of them": (
            round(tp8.comm_time / (2 * m70.num_layers) * 1e6), 2 * m70.num_layers) == (4, 160),
        "the weights alone, 168 GB per GPU, do not fit": f"{ds8.weight_bytes / 1e9:.0f}" == "168" and not ds8.fits,
        "the whole latent cache, 73.7 GB": f"{ds16.kv_bytes / 1e9:.1f}" == "73.7" and not ds16.fits,
        "the all-gather brings 139 GB into every GPU": f"{t.all_gather / 1e9:.0f}" == "139",
        "The direct way brings 17.5 GB": f"{t.direct / 1e9:.1f}" == "17.5",
        "0.35 s instead of 2.8 s": (f"{t.direct / 50e9:.2f}", f"{t.all_gather / 50e9:.1f}") == ("0.35", "2.8"),
        "68.6 KiB per token": f"{G.kv_bytes_per_token(ds) / 2**10:.1f}" == "68.6",
        "295 on an H100": round(G.critical_batch("h100-80gb")) == 295,
        "n_heads / n_kv_heads FLOPs per byte of cache, 4 for Llama 3 8B": m8.num_heads // m8.kv_heads == 4,
        "14 + 4 ≈ 18 FLOPs per byte for Llama 3 8B at 8,192 tokens": (
            round(2 * m8.active_parameters(include_embedding=False) / (8192 * G.kv_bytes_per_token(m8))),
            round(G.decode_step(m8, "h100-80gb", 10**6, 8192).intensity)) == (14, 18),
        "about 242 FLOPs per byte of cache, above an H200's ridge of 206": (
            round(2 * ds.num_heads * G.kv_dims(ds)[1] / (2 * G.kv_dims(ds)[0])), round(G.critical_batch("h200")))
        == (242, 206),
    }
    for phrase, holds in expected.items():
        assert phrase in flat, phrase
        assert holds, phrase
    zh = {"每秒约生成 220 个词元", "每秒生成 9,085 个", "每步要 87 毫秒", "每个词元 9.0 毫秒", "44.7 毫秒", "0.65 毫秒", "约 4 微秒", "要做 160 次",
          "168 GB", "共 73.7 GB", "送进 139 GB", "只送 17.5 GB", "0.35 秒", "2.8 秒", "68.6 KiB",
          "14 + 4 ≈ 18", "约 242 次运算", "拐点 206"}
    assert all(z in text.replace("\n", "") for z in zh), [z for z in zh if z not in text.replace("\n", "")]


def test_the_h200_roofline_aside_quotes_the_stored_run():
    """The aside's numbers come from the stored H200 run (distlearn/post_training/h200_roofline.json), in both
    languages, and the run has the roofline's shape: flat time while memory-bound, then growing with B."""
    import re

    from authoring.paths import ROOT
    from distlearn.post_training import measured as M

    s = M.h200_summary(96, 512)
    peak_bw, peak_flops = 4.8e12, 989e12                      # H200 datasheet (the course's preset)
    quoted = {f"{s.seconds_min * 1e6:.0f}–{s.seconds_max * 1e6:.0f}", f"{s.bandwidth_min / 1e12:.1f}–"
              f"{s.bandwidth_max / 1e12:.1f} TB/s", f"{100 * s.bandwidth_min / peak_bw:.0f}–"
              f"{100 * s.bandwidth_max / peak_bw:.0f}%", f"{round(s.flops_min / 1e13) * 10}–"
              f"{round(s.flops_max / 1e13) * 10} TFLOP/s", f"{100 * s.flops_min / peak_flops:.0f}–"
              f"{100 * s.flops_max / peak_flops:.0f}%",
              f"{s.flops_median / 1e12:.0f}/{s.bandwidth_median / 1e12:.2f} ≈ {s.knee:.0f}"}
    md = (ROOT / "notebooks" / "15_post_training.md").read_text(encoding="utf-8")
    en = md[md.index("the roofline measured on one H200"):]
    zh = md[md.index("在一块 H200 上实测的屋顶线"):]
    for text in (en[:1500], zh[:1000]):
        for q in quoted:
            assert q in re.sub(r"\s+", " ", text), q
    rows = M.h200_rows()
    flat = [r.seconds for r in rows if r.tokens <= 96]
    assert max(flat) < 1.1 * min(flat)                          # memory-bound: B does not change the time
    big = [r for r in rows if r.tokens >= 512]
    assert all(b.seconds > a.seconds * 1.5 for a, b in zip(big, big[1:]))   # compute-bound: time grows with B
