"""Chapter 11: mixture-of-experts parameter counts, routing, load balancing, expert parallelism.

Independent sources: the published configs and totals (Mixtral: Jiang et al. 2024 and Mistral's release; DeepSeek-V3
report and README_WEIGHTS.md), the meta-device torch modules, DeepSpeed's gating code (``deepspeed.moe.sharded_moe``),
PyTorch autograd (saved tensors), and the real expert-parallel lab on gloo (slow tests at the end).
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.experts import simulation as X
from distlearn.core.hardware import get_gpu
from distlearn.memory.formulas import model_state_bytes
from distlearn.core.models import MLA, MOE_PRESETS, ModelConfig, build_model, count_parameters, get_moe_preset
from distlearn.core.moe import MoE, route as torch_route
from distlearn.core.validate import DistlearnValueError

MIXTRAL, DSV3 = MOE_PRESETS["mixtral-8x7b"], MOE_PRESETS["deepseek-v3"]


# ---------------------------------------------------------------- parameter counts vs the published configs
def test_mixtral_count_written_out_from_its_config():
    h, layers, f, e, k, v, kv = 4096, 32, 14336, 8, 2, 32000, 8 * 128
    attention = h * h + 2 * h * kv + h * h
    layer = attention + e * 3 * h * f + e * h + 2 * h          # experts, router, two RMSNorms
    total = 2 * v * h + layers * layer + h                     # untied embedding and head, final norm
    active = total - layers * (e - k) * 3 * h * f
    assert MIXTRAL.num_parameters() == MIXTRAL.main_parameters() == total == 46_702_792_704
    assert MIXTRAL.active_parameters() == active == 12_879_925_248
    assert round(total / 1e9, 1) == 46.7 and round(active / 1e9, 1) == 12.9   # Mistral's release: 46.7 B / 12.9 B
    assert round(total / 1e9) == 47 and round(active / 1e9) == 13             # the paper's abstract: 47 B / 13 B
    assert round(MIXTRAL.active_parameters(include_embedding=False) / 1e9, 1) == 12.7  # not Mistral's convention


def test_deepseek_v3_count_written_out_from_its_config():
    h, v, n = 7168, 129280, 128
    mla = (h * 1536 + 1536 + 1536 * n * (128 + 64)                      # q_a_proj, q_a_layernorm, q_b_proj
           + h * (512 + 64) + 512 + 512 * n * (128 + 128)                # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
           + n * 128 * h)                                                # o_proj
    expert = 3 * h * 2048
    dense_layer = mla + 3 * h * 18432 + 2 * h
    moe_layer = mla + 256 * expert + expert + 256 * h + 2 * h            # routed, shared, router, norms
    main = 2 * v * h + 3 * dense_layer + 58 * moe_layer + h
    mtp = moe_layer + 2 * h * h + 3 * h                                  # block, eh_proj, enorm, hnorm, its norm
    assert DSV3.attention_parameters() == mla == 187_107_328
    assert DSV3.main_parameters() == main == 671_026_404_352
    assert round(main / 1e9) == 671                                      # "671B total parameters"
    assert DSV3.mtp_module_parameters() == mtp == 11_610_067_968         # README_WEIGHTS: "11.5B unique"
    assert round((mtp - 2 * h * h) / 1e9, 1) == 11.5                     # … which matches without eh_proj,
    mtp_active = mtp - 2 * h * h - (256 - 8) * expert + 2 * v * h        # as does "2.4B" activated (with emb + head)
    assert round(mtp_active / 1e9, 1) == 2.4 and round((mtp_active + 2 * h * h) / 1e9, 1) == 2.5
    assert DSV3.num_parameters() == main + mtp
    active = main - 58 * (256 - 8) * expert
    assert DSV3.active_parameters() == active == 37_552_282_624
    assert DSV3.active_parameters(include_embedding=False) == active - v * h
    assert round((active - v * h) / 1e9) == 37                           # "37B activated for each token"
    # on the hub the MTP module stores its own copies of the embedding and the head: 685 B with the FP8 scales
    assert round((main + mtp + 2 * v * h) / 1e9, 2) == 684.49


def test_hub_685b_counts_the_fp8_block_scales():
    """The hub's 685 B: 684.49 B stored weights (main + MTP with its own embedding and head copies) + one fp32 scale
    per 128 × 128 block of every FP8 linear weight (README_WEIGHTS.md: attention, dense and expert FFNs; the
    router, embeddings and norms stay in 16 bits)."""
    h, b = 7168, lambda out, inp: math.ceil(out / 128) * math.ceil(inp / 128)
    mla = b(1536, h) + b(128 * 192, 1536) + b(576, h) + b(128 * 256, 512) + b(h, 128 * 128)
    expert = 2 * b(2048, h) + b(h, 2048)
    dense, moe = mla + 2 * b(18432, h) + b(h, 18432), mla + 257 * expert
    scales = 3 * dense + 59 * moe + b(h, 2 * h)                      # 58 MoE layers + the MTP block, eh_proj
    stored = DSV3.num_parameters() + 2 * DSV3.vocab_size * h
    assert 0.03e9 < scales < 0.05e9                                  # "about 0.04 B"
    assert round(stored / 1e9) == 684 and round((stored + scales) / 1e9) == 685


def test_meta_module_counts_and_active_parameters_agree():
    for c in (MIXTRAL, DSV3):
        model = build_model(c)
        assert count_parameters(model) == c.num_parameters()
        experts = sum(b.mlp.experts.w_gate.numel() * 3 for b in model.blocks if isinstance(b.mlp, MoE))
        unused = experts * (c.num_experts - c.experts_per_token) // c.num_experts
        mtp = sum(p.numel() for p in model.mtp.parameters())
        assert count_parameters(model) - unused - mtp == c.active_parameters()
        assert [isinstance(b.mlp, MoE) for b in model.blocks] == [c.is_moe_layer(i) for i in range(c.num_layers)]
        assert experts == X.routed_expert_parameters(c.with_(num_mtp_modules=0))
    assert DSV3.num_moe_layers == 58 and MIXTRAL.num_moe_layers == 32


def test_moe_layer_choice_and_errors():
    c = DSV3.with_(num_layers=10, first_dense_layers=2, moe_layer_freq=2, num_mtp_modules=0)
    assert [c.is_moe_layer(i) for i in range(10)] == [False, False, True, False, True, False, True, False, True, False]
    with pytest.raises(DistlearnValueError, match="layer"):
        DSV3.layer_parameters()                          # dense and MoE layers differ: the index is needed
    assert MIXTRAL.layer_parameters() == MIXTRAL.layer_parameters(5)
    for bad in (dict(experts_per_token=9), dict(arch="gpt"), dict(num_experts=0), dict(first_dense_layers=33)):
        with pytest.raises(DistlearnValueError):
            MIXTRAL.with_(**bad)
    with pytest.raises(DistlearnValueError, match="mixtral-8x7b"):
        get_moe_preset("mixtral")


def _tiny(**kw):
    base = dict(num_experts=8, experts_per_token=2, num_shared_experts=1, expert_ffn_hidden_size=16,
                first_dense_layers=1, router="sigmoid", num_mtp_modules=1,
                mla=MLA(q_lora_rank=16, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6))
    return ModelConfig("tiny-moe", "llama", 50, 32, 3, 4, 64, 16, **{**base, **kw})


def test_tiny_moe_model_runs_and_counts():
    torch.manual_seed(0)
    c = _tiny()
    model = build_model(c, device="cpu")
    tokens = torch.randint(0, 50, (2, 7))
    assert model(tokens).shape == (2, 7, 50)
    assert [t.shape for t in model.mtp_logits(tokens)] == [(2, 6, 50)]
    assert count_parameters(model) == c.num_parameters()
    lite = build_model(_tiny(mla=MLA(None, 8, 8, 4, 6)))                # DeepSeek-V2-Lite style: no query rank
    assert count_parameters(lite) == _tiny(mla=MLA(None, 8, 8, 4, 6)).num_parameters()


def test_mtp_module_concatenates_the_embedding_first():
    """The released DeepSeek-V3 weights expect eh_proj(cat([enorm(emb), hnorm(h)])) (vLLM's deepseek_mtp.py): with
    the columns of eh_proj that read the hidden state zeroed, the output no longer depends on h."""
    torch.manual_seed(4)
    c = _tiny()
    mtp = build_model(c, device="cpu").mtp[0].double()
    with torch.no_grad():
        mtp.eh_proj.weight[:, c.hidden_size:] = 0
    emb = torch.randn(2, 5, c.hidden_size, dtype=torch.float64)
    h1, h2 = (torch.randn(2, 5, c.hidden_size, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(mtp(h1, emb), mtp(h2, emb), rtol=0, atol=0)
    assert not torch.allclose(mtp(h1, emb), mtp(h1, emb + 1))


def test_mla_equals_deepseeks_naive_attention():
    """The MLA forward against DeepSeek's 'naive' inference path (einsums over the un-absorbed keys and values)."""
    torch.manual_seed(1)
    c = _tiny()
    attn = build_model(c, device="cpu").blocks[0].attn.double()
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    m, n = c.mla, c.num_heads
    q = attn.q_b_proj(attn.q_a_layernorm(attn.q_a_proj(x))).view(2, 5, n, m.qk_head_dim)
    kv, k_pe = attn.kv_a_proj_with_mqa(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
    kv = attn.kv_b_proj(attn.kv_a_layernorm(kv)).view(2, 5, n, m.qk_nope_head_dim + m.v_head_dim)
    k_nope, v = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
    k = torch.cat([k_nope, k_pe.unsqueeze(2).expand(-1, -1, n, -1)], dim=-1)
    scores = torch.einsum("bshd,bthd->bsht", q, k) / math.sqrt(m.qk_head_dim)
    scores = scores + torch.triu(torch.full((5, 5), float("-inf"), dtype=torch.float64), 1)[None, :, None, :]
    out = attn.o_proj(torch.einsum("bsht,bthd->bshd", scores.softmax(-1), v).flatten(2))
    torch.testing.assert_close(attn(x), out, rtol=1e-12, atol=1e-12)


def test_moe_module_equals_dense_computation():
    """Every expert on every token, combined with a dense (T, E) weight matrix: the same as the routed loop."""
    torch.manual_seed(2)
    moe = MoE(6, 2, 8, 12, num_shared_experts=1).double()
    x = torch.randn(20, 8, dtype=torch.float64)
    for cf in (None, 0.8):
        r = moe.route(x, cf)
        dense = torch.zeros(20, 6, dtype=torch.float64).scatter_add(1, r.index, r.weights)
        all_experts = torch.stack([moe.experts.expert(e, x) for e in range(6)], 1)        # (T, E, h)
        expected = (dense[:, :, None] * all_experts).sum(1) + moe.shared_experts(x)
        torch.testing.assert_close(moe(x, cf), expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- routing
def test_capacity_formula():
    assert X.capacity(1.25, 2, 4096, 8) == 1280
    assert X.capacity(1.0, 1, 10, 4) == 3 and X.capacity(1.0, 1, 10, 4, min_capacity=4) == 4
    with pytest.raises(DistlearnValueError):
        X.capacity(0.0, 1, 10, 4)


def test_capacity_keeps_at_most_c_per_group_and_drops_the_excess():
    logits = X.router_logits(96, 8, skew=1.5, seed=3)
    r = X.route(logits, 2, capacity_factor=1.0, tokens_per_group=32)
    assert r.capacity == 8
    for g in range(3):
        block = X.Routing(r.index[32 * g:32 * (g + 1)], r.weights[32 * g:32 * (g + 1)], r.kept[32 * g:32 * (g + 1)],
                          r.probs, r.capacity, 32)
        assert block.kept_load.max() <= 8
        assert block.dropped == np.maximum(block.load - 8, 0).sum()
    assert np.all(r.weights[~r.kept] == 0) and r.dropped > 0
    free = X.route(logits, 2)
    np.testing.assert_array_equal(free.index, r.index)                      # capacity never changes the choice
    np.testing.assert_allclose(r.weights[r.kept], free.weights[r.kept])   # … nor the kept weights
    np.testing.assert_allclose(free.weights.sum(1), 1.0)


def test_choice_priority_keeps_first_choices_first():
    logits = np.array([[5.0, 4, 0], [0, 5, 4], [4, 5, 0], [0, 4, 5]])    # every expert wanted twice or thrice
    r = X.route(logits, 2, capacity_factor=0.5)                            # C = ceil(0.5·2·4/3) = 2
    assert r.capacity == 2
    # first choices 0, 1, 1, 2 all fit; second choices 1 (full), 2, 0, 1 (full) → two dropped
    np.testing.assert_array_equal(r.kept, [[True, False], [True, True], [True, True], [True, False]])
    token_order = X.route(logits, 2, capacity_factor=0.5, priority="token")
    np.testing.assert_array_equal(token_order.kept, [[True, True], [True, True], [False, True], [True, False]])


scores = st.sampled_from(["softmax", "sigmoid"])


@settings(max_examples=60, deadline=None)
@given(t=st.integers(1, 24), e=st.sampled_from([4, 8, 12]), k=st.integers(1, 3), score=scores,
       cf=st.one_of(st.none(), st.sampled_from([0.5, 1.0, 1.25, 2.0])), group=st.sampled_from([None, 4]),
       groups=st.sampled_from([(1, 1), (4, 2)]), seed=st.integers(0, 10_000))
def test_numpy_routing_equals_the_torch_module_routing(t, e, k, score, cf, group, groups, seed):
    logits = X.router_logits(t, e, skew=0.7, seed=seed)
    bias = np.random.default_rng(seed).normal(0, 0.3, e) if score == "sigmoid" else None
    ng, gpt = groups if score == "sigmoid" and k <= groups[1] * e // groups[0] else (1, 1)
    kw = dict(score=score, scale=2.5 if score == "sigmoid" else 1.0, num_groups=ng, groups_per_token=gpt,
              capacity_factor=cf, tokens_per_group=group)
    a = X.route(logits, k, bias=bias, **kw)
    b = torch_route(torch.tensor(logits), k, bias=None if bias is None else torch.tensor(bias), **kw)
    np.testing.assert_array_equal(a.index, b.index.numpy())
    np.testing.assert_array_equal(a.kept, b.kept.numpy())
    np.testing.assert_allclose(a.weights, b.weights.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.probs, b.probs.numpy(), rtol=1e-12)


def test_routing_equals_deepspeed_gating():
    """DeepSpeed's topkgating (drop_policy='position') and top2gating (no 2nd-expert sampling) renormalize the kept
    gates: route(priority=…, renormalize_kept=True) reproduces their combine weights and their l_aux."""
    pytest.importorskip("deepspeed")
    from deepspeed.moe.sharded_moe import top2gating, topkgating

    for seed in range(4):
        for t, e, k, cf in [(40, 8, 2, 1.0), (33, 8, 3, 0.75), (25, 4, 1, 1.0), (64, 16, 4, 1.5)]:
            logits = X.router_logits(t, e, skew=1.0, seed=seed)
            l_aux, combine, _, _ = topkgating(torch.tensor(logits), k, cf, 0, drop_policy="position")
            r = X.route(logits, k, capacity_factor=cf, priority="token", renormalize_kept=True)
            dense = np.zeros((t, e))
            np.put_along_axis(dense, r.index, r.weights, axis=1)
            np.testing.assert_allclose(combine.sum(-1).numpy(), dense, atol=1e-12)
            assert combine.shape[-1] == r.capacity
            assert math.isclose(l_aux.item(), X.aux_loss(r.probs, r.index), rel_tol=1e-6)   # DeepSpeed: fp32 mask
        logits = X.router_logits(40, 8, skew=1.0, seed=seed).astype(np.float32)
        l_aux, combine, _, _ = top2gating(torch.tensor(logits), 1.0, 0, top2_2nd_expert_sampling=False)
        r = X.route(logits, 2, capacity_factor=1.0, renormalize_kept=True)
        dense = np.zeros((40, 8))
        np.put_along_axis(dense, r.index, r.weights, axis=1)
        np.testing.assert_allclose(combine.sum(-1).numpy(), dense, atol=1e-6)
        assert math.isclose(l_aux.item(), X.aux_loss(r.probs, r.index, first_choice_only=True), rel_tol=1e-5)


def test_bias_needs_the_sigmoid_router_and_one_value_per_expert():
    logits = X.router_logits(6, 4, seed=0)
    with pytest.raises(DistlearnValueError, match="bias"):
        X.route(logits, 2, bias=np.zeros(4))                              # softmax would silently ignore it
    with pytest.raises(DistlearnValueError, match="bias"):
        X.route(logits, 2, score="sigmoid", bias=np.zeros(3))


def test_sigmoid_routing_follows_deepseek_v3():
    logits = X.router_logits(50, 16, seed=4)
    bias = np.linspace(1.0, -1.0, 16)                    # a large bias changes which experts are chosen …
    r = X.route(logits, 4, score="sigmoid", bias=bias, scale=2.5)
    s = 1 / (1 + np.exp(-logits))
    expected_index = np.argsort(-(s + bias), axis=1)[:, :4]
    np.testing.assert_array_equal(r.index, expected_index)
    chosen = np.take_along_axis(s, expected_index, 1)     # … but the weights are the unbiased affinities
    np.testing.assert_allclose(r.weights, 2.5 * chosen / chosen.sum(1, keepdims=True))
    np.testing.assert_allclose(r.probs, s / s.sum(1, keepdims=True))


def test_node_limited_routing_uses_at_most_m_groups():
    logits = X.router_logits(200, 32, seed=5)
    r = X.route(logits, 8, score="sigmoid", num_groups=8, groups_per_token=4)
    groups = r.index // 4
    assert max(len(set(row)) for row in groups) <= 4
    s = 1 / (1 + np.exp(-logits))
    for t in range(0, 200, 37):                                            # brute force for a few tokens
        g = s[t].reshape(8, 4)
        best = np.argsort(-np.sort(g, 1)[:, -2:].sum(1))[:4]
        allowed = np.concatenate([np.arange(4 * b, 4 * b + 4) for b in best])
        top = allowed[np.argsort(-s[t, allowed])[:8]]
        assert set(top) == set(r.index[t])
    np.testing.assert_array_equal(X.nodes_per_token(r, 4), [len(set(row)) for row in groups])
    free = X.route(logits, 8, score="sigmoid")
    assert X.nodes_per_token(free, 4).mean() > 4.5 > X.nodes_per_token(r, 4).mean()
    dropped = X.Routing(np.array([[0, 5], [1, 2]]), np.ones((2, 2)), np.array([[False, True], [False, False]]),
                        np.full((2, 8), 1 / 8), 1, 2)
    np.testing.assert_array_equal(X.nodes_per_token(dropped, 4), [1, 0])
    with pytest.raises(DistlearnValueError, match="k = 8"):
        X.route(X.router_logits(4, 8), 8, score="sigmoid", num_groups=8, groups_per_token=4)


def test_router_logits_skew():
    free = X.route(X.router_logits(20_000, 8, seed=6), 1).load / 20_000
    skewed = X.route(X.router_logits(20_000, 8, skew=1.5, seed=6), 1).load / 20_000
    assert np.abs(free - 1 / 8).max() < 0.01                               # uniform
    assert np.all(np.diff(skewed) < 0) and skewed[0] > 3 * skewed[-1]      # Zipf-like
    np.testing.assert_array_equal(X.router_logits(5, 4, seed=1), X.router_logits(5, 4, seed=1))


# ---------------------------------------------------------------- load balancing
def test_aux_loss_bounds_and_switch_formula():
    e, t = 8, 800
    uniform = np.full((t, e), 1 / e)
    balanced = np.arange(t)[:, None] % e
    assert math.isclose(X.aux_loss(uniform, balanced), 1.0)
    collapsed = np.zeros((t, e))
    collapsed[:, 3] = 1.0
    assert math.isclose(X.aux_loss(collapsed, np.full((t, 1), 3)), e)
    r = X.route(X.router_logits(t, e, skew=1.0, seed=7), 2)
    f = np.bincount(r.index.ravel(), minlength=e) / (2 * t)
    assert math.isclose(X.aux_loss(r.probs, r.index), e * np.sum(f * r.probs.mean(0)))
    assert X.aux_loss(r.probs, r.index) > 1.0


def test_bias_update_rule_and_balancing():
    np.testing.assert_allclose(X.update_bias(np.zeros(4), [8, 2, 5, 5], 0.1), [-0.1, 0.1, 0.0, 0.0])
    on = X.simulate_bias_balancing(num_experts=16, k=2, num_tokens=512, steps=150, gamma=0.02, skew=1.0)
    off = X.simulate_bias_balancing(num_experts=16, k=2, num_tokens=512, steps=150, gamma=0.0, skew=1.0)
    assert on.max_over_mean[0] == off.max_over_mean[0] > 2.5               # the same skewed start
    assert on.max_over_mean[-20:].mean() < 1.4 < off.max_over_mean[-20:].mean()
    assert on.weights_unbiased and off.weights_unbiased
    assert np.all(off.bias == 0) and on.bias[-1, 0] < 0 < on.bias[-1, -1]   # popular expert pushed down


# ---------------------------------------------------------------- expert parallelism
def test_split_sizes_by_hand():
    # 4 experts on 2 ranks (rank 0: experts 0, 1; rank 1: experts 2, 3)
    routings = [X.Routing(np.array([[0, 2], [3, 1], [2, 3]]), np.ones((3, 2)),
                          np.array([[True, True], [True, False], [True, True]]), np.full((3, 4), .25), None, 3),
                X.Routing(np.array([[1, 0]]), np.ones((1, 2)), np.ones((1, 2), bool), np.full((1, 4), .25), None, 1)]
    s = X.split_sizes(routings, 4, 2)
    np.testing.assert_array_equal(s.send, [[1, 4], [2, 0]])
    assert s.input_split_sizes(0) == [1, 4] and s.output_split_sizes(0) == [1, 2]
    assert s.input_split_sizes(1) == [2, 0] and s.output_split_sizes(1) == [4, 0]
    with pytest.raises(DistlearnValueError):
        X.split_sizes(routings, 4, 3)


@pytest.mark.parametrize("ep, cf, shared", [(1, None, 0), (2, None, 16), (4, 1.0, 0), (4, 0.5, 16), (8, 1.25, 16)])
def test_simulated_expert_parallel_equals_one_process(ep, cf, shared):
    w = X.MoEWeights.random(8, 12, 20, shared_ffn=shared, seed=ep)
    rng = np.random.default_rng(ep)
    xs = [rng.standard_normal((10, 12)) for _ in range(ep)]
    res = X.simulate_expert_parallel(xs, w, 2, capacity_factor=cf)
    for x, y in zip(xs, res.outputs):
        r = X.route(x @ w.router.T, 2, capacity_factor=cf)
        np.testing.assert_allclose(y, X.moe_forward(x, w, r), rtol=1e-12, atol=1e-13)
    off = res.splits.send.sum(1) - np.diag(res.splits.send) + res.splits.send.sum(0) - np.diag(res.splits.send)
    np.testing.assert_array_equal(res.bytes_sent, off * 12 * 8)
    np.testing.assert_array_equal(res.received, res.splits.send.sum(0))


def test_layer_cost_closed_forms():
    c = X.ep_layer_cost(tokens_per_gpu=4096, hidden_size=7168, expert_ffn_hidden_size=2048, k=8, ep=8)
    assert c.dispatch_bytes == c.combine_bytes == 4096 * 8 * 7 / 8 * 7168 * 2
    assert c.forward_flops == 6 * 4096 * 8 * 7168 * 2048 and c.intra_node_share == 1.0
    gpu = get_gpu("h100-80gb")
    # forward ratio = 2·(ep − 1)/ep·b·F / (6·f·W): independent of the tokens and of h
    assert math.isclose(X.comm_compute_ratio(c, gpu), 2 * 7 / 8 * 2 * gpu.peak_flops / (6 * 2048 * gpu.nvlink_bw))
    wide = X.ep_layer_cost(tokens_per_gpu=4096, hidden_size=7168, expert_ffn_hidden_size=2048, k=8, ep=64)
    assert math.isclose(wide.intra_node_share, 7 / 63)
    assert math.isclose(X.all_to_all_seconds(wide.forward_bytes, wide, gpu), wide.forward_bytes * 56 / 63 / gpu.network_bw)
    one = X.ep_layer_cost(tokens_per_gpu=10, hidden_size=4, expert_ffn_hidden_size=4, k=1, ep=1)
    assert one.forward_bytes == 0 and one.inter_node_share == 0
    tp = X.tp_ffn_layer_cost(tokens=4096, hidden_size=4096, ffn_hidden_size=14336, tp=8)
    assert math.isclose(X.comm_compute_ratio(tp, gpu), 2 * 7 * 2 * gpu.peak_flops / (6 * 14336 * gpu.nvlink_bw))
    assert X.straggler_factor([4, 4, 4, 4]) == 1.0 and X.straggler_factor([8, 4, 2, 2]) == 2.0
    np.testing.assert_array_equal(X.gpu_loads([1, 2, 3, 4, 5, 6], 3), [3, 7, 11])


def test_ep_model_states():
    for c in (MIXTRAL, DSV3):
        experts = X.routed_expert_parameters(c)
        one = X.ep_model_state_bytes(c, ep=1, dp=1, zero_stage=0)
        assert one.total == model_state_bytes(c.num_parameters()).total     # no parallelism: 16 B per parameter
        s = X.ep_model_state_bytes(c, ep=8, dp=64, zero_stage=1)
        assert s.dense == model_state_bytes(c.num_parameters() - experts, dp=64, zero_stage=1).total
        assert s.experts == model_state_bytes(experts // 8, dp=8, zero_stage=1).total
        assert s.expert_params * 8 == experts
    assert X.routed_expert_parameters(DSV3) == 59 * 256 * 3 * 7168 * 2048   # 58 MoE layers + the MTP block
    for bad in (dict(ep=3, dp=3), dict(ep=8, dp=12)):
        with pytest.raises(DistlearnValueError):
            X.ep_model_state_bytes(MIXTRAL, **bad)


@pytest.mark.parametrize("dtype, nbytes", [(torch.bfloat16, 2), (torch.float32, 4)])
def test_routed_activation_bytes_equal_what_autograd_saves(dtype, nbytes):
    from distlearn.activation_memory.measure import saved_tensor_bytes

    torch.manual_seed(3)
    moe = MoE(8, 2, 32, 48).to(dtype)
    x = torch.randn(64, 32, dtype=dtype, requires_grad=True)
    r = moe.route(x.detach(), 1.0)
    w = r.weights.detach().clone().requires_grad_()

    def experts_only(x, w):
        y = torch.zeros_like(x)
        for e in range(8):
            rows, slot = torch.where((r.index == e) & r.kept)
            y = y.index_add(0, rows, w[rows, slot, None] * moe.experts.expert(e, x[rows]))
        return y

    _, saved = saved_tensor_bytes(experts_only, x, w, exclude=[*moe.parameters(), x, w])
    rows = int(r.kept.sum())
    assert saved.total == X.routed_activation_bytes(received_rows=rows, hidden_size=32, expert_ffn_hidden_size=48,
                                                    dtype_bytes=nbytes)


def test_router_spec_and_reference_route():
    assert X.router_spec(DSV3) == X.RouterSpec("sigmoid", 8, True, 2.5, 8, 4)
    assert X.router_spec(MIXTRAL) == X.RouterSpec("softmax", 2)
    with pytest.raises(DistlearnValueError):
        X.router_spec(MIXTRAL.with_(num_experts=0, experts_per_token=0))


# ---------------------------------------------------------------- the real lab (processes on gloo)
@pytest.fixture(scope="module")
def lab3():
    """3 ranks (the chapter runs 2 and 4) with 6 experts, and the sigmoid router on 2 ranks."""
    from distlearn.core import launch
    from distlearn.experts.lab import demo

    return (launch.run(demo, 3, 1.0, dict(num_experts=6, tokens_per_rank=12), timeout=180),
            launch.run(demo, 2, 0.75, dict(router="sigmoid", num_shared=0), timeout=180))


@pytest.mark.slow
def test_lab_expert_parallel_equals_one_process(lab3):
    for results in lab3:
        for name in ("dropless", "capacity"):
            for r in results:
                v = r[name]
                for key in ("out_err", "input_grad_err", "expert_grad_err", "router_grad_err", "shared_grad_err"):
                    assert v[key] < 1e-12, (name, r["rank"], key, v[key])
            sent = np.array([r[name]["input_split_sizes"] for r in results])
            got = np.array([r[name]["output_split_sizes"] for r in results])
            np.testing.assert_array_equal(got, sent.T)                    # what j receives from i = what i sends j
        assert sum(r["capacity"]["dropped"] for r in results) > 0
        assert sum(r["dropless"]["dropped"] for r in results) == 0


@pytest.mark.slow
def test_lab_equals_simulation_and_a_broken_simulation_is_caught(lab3):
    results = lab3[0]
    w = X.MoEWeights(**results[0]["capacity"]["weights"])
    xs = [r["capacity"]["x"] for r in results]
    good = X.simulate_expert_parallel(xs, w, 2, capacity_factor=1.0)
    broken = X.simulate_expert_parallel(xs, w, 2)                # forgets the capacity limit
    for rank, r in enumerate(results):
        np.testing.assert_allclose(good.outputs[rank], r["capacity"]["y"], atol=1e-12)
        assert good.splits.input_split_sizes(rank) == r["capacity"]["input_split_sizes"]
        wrong = np.abs(broken.outputs[rank] - r["capacity"]["y"]).max(axis=1) > 1e-12
        np.testing.assert_array_equal(wrong, ~good.routings[rank].kept.all(axis=1))   # exactly the dropped tokens
        assert wrong.any() == (r["capacity"]["dropped"] > 0)


@pytest.mark.slow
def test_torchrun_runs_the_lab():
    import os
    import subprocess
    import sys

    from authoring.paths import ROOT

    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "-m", "distlearn.experts.lab"], cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "dropless: world_size=2" in out.stdout and "capacity: world_size=2" in out.stdout


# ---------------------------------------------------------------- the exercises' checkers catch typical mistakes
def test_checkers_reject_typical_mistakes_with_a_pointed_hint(capsys):
    from distlearn.core import check
    from distlearn.core.check import CheckFailed

    def route_token_order(logits, k, cf):                  # a token's k choices together, not choice-major
        r = X.route(logits, k, capacity_factor=cf, priority="token")
        return r.index, r.weights, r.kept

    def route_no_renorm(logits, k, cf):                    # Switch's weights where Mixtral's are asked for
        r = X.route(logits, k, capacity_factor=cf, normalize=False)
        return r.index, r.weights, r.kept

    def aux_over_tokens(probs, index):                     # f_i over T instead of T·k
        return X.aux_loss(probs, index) * index.shape[1]

    for fn, checker, hint in [(route_token_order, check.ex11_route_with_capacity, "all first choices"),
                              (route_no_renorm, check.ex11_route_with_capacity, "Nothing is dropped in this case"),
                              (aux_over_tokens, check.ex11_aux_loss, "Σ f_i = 1")]:
        with pytest.raises(CheckFailed):
            checker(fn)
        assert hint in capsys.readouterr().out


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.data())
def test_top_k_is_the_stable_full_sort(t, e, data):
    """route's O(T·E) top-k equals numpy's stable argsort, ties (small integers, −inf of node-limited routing)
    and NaN (which argpartition ranks first, the sort last) included; its group scores (partition) equal the sorted top-2 sums."""
    k = data.draw(st.integers(1, e))
    values = data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, -np.inf, 0.5, -3.25, np.nan]), min_size=t * e,
                                max_size=t * e))
    x = np.array(values).reshape(t, e)
    # the body (route calls it unchecked) ranks NaN as the stable sort does; the public top_k refuses NaN (issue 33)
    assert (X.top_k.unchecked(x, k) == np.argsort(-x, axis=1, kind="stable")[:, :k]).all()
    if np.isnan(x).any():
        with pytest.raises(DistlearnValueError, match="NaN"):
            X.top_k(x, k)
    else:
        assert (X.top_k(x, k) == np.argsort(-x, axis=1, kind="stable")[:, :k]).all()
    z = np.random.default_rng(t * 100 + e).standard_normal((t, e))
    assert (X.top_k(z, k) == np.argsort(-z, axis=1, kind="stable")[:, :k]).all()
    for groups in [g for g in (1, 2, 4, 8) if e % g == 0]:
        gs = z.reshape(t, groups, e // groups)
        want = -np.sort(-gs, axis=2)[:, :, :2].sum(axis=2)
        best = np.argsort(-want, axis=1, kind="stable")[:, :1]
        allowed = np.isfinite(X.limit_groups(z, groups, 1)).reshape(t, groups, -1).all(axis=2)
        assert (np.argmax(allowed, axis=1) == best[:, 0]).all()
