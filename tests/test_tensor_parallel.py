"""Tensor parallelism (chapter 04): every sharded computation equals the unsharded one, checked against PyTorch
autograd (an independent implementation), and every byte count against the ring closed forms."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from distlearn.tensor_parallel import simulation as T
from distlearn.seeds import parallelism as seeds
from distlearn.core.comm import VirtualCluster
from distlearn.tensor_parallel.lab import MLP, Attention
from distlearn.core.validate import DistlearnValueError

TPS = [1, 2, 4, 8]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _mlp_params(rng, h, f):
    return (rng.standard_normal((h, f)) / np.sqrt(h), rng.standard_normal(f),
            rng.standard_normal((f, h)) / np.sqrt(f), rng.standard_normal(h))


def _torch_mlp(x, w1, b1, w2, b2, g):
    m = MLP(w1.shape[0], w1.shape[1]).double()
    with torch.no_grad():
        m.fc1.weight.copy_(torch.from_numpy(w1.T)); m.fc1.bias.copy_(torch.from_numpy(b1))
        m.fc2.weight.copy_(torch.from_numpy(w2.T)); m.fc2.bias.copy_(torch.from_numpy(b2))
    xt = torch.from_numpy(x).requires_grad_()
    y = m(xt)
    (y * torch.from_numpy(g)).sum().backward()
    return y.detach().numpy(), {"w1": m.fc1.weight.grad.numpy().T, "b1": m.fc1.bias.grad.numpy(),
                                "w2": m.fc2.weight.grad.numpy().T, "b2": m.fc2.bias.grad.numpy(),
                                "x": xt.grad.numpy()}


def _assert_grads(got, want, keys, tol=1e-10):
    for k in keys:
        np.testing.assert_allclose(got[k], want[k], rtol=tol, atol=tol, err_msg=k)


# ---------------------------------------------------------------- the seed and its correction
def test_seed_column_only_and_counts_nothing():
    rng = _rng()
    x, w = rng.standard_normal((4, 32)), rng.standard_normal((32, 16))
    out, err = seeds.seed_simulate_tensor_parallelism(x, w, 4)
    assert err < 1e-12 and out.shape == (4, 16)
    # the seed's concatenation applied to a row split is simply wrong: partial sums must be added
    parts = [xs @ ws for xs, ws in zip(np.split(x, 4, axis=1), np.split(w, 4, axis=0))]
    assert np.abs(np.concatenate(parts, -1)[:, :16] - x @ w).max() > 1e-3
    assert np.allclose(sum(parts), x @ w)
    src = seeds.seed_source()
    assert src.startswith("def seed_simulate_tensor_parallelism(input_data, weight_matrix, num_gpus):")
    assert "np.concatenate(partial_results, axis=-1)" in src and "Do not use" not in src


@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("split", ["column", "row"])
def test_corrected_simulation(tp, split):
    rng = _rng(tp)
    x, w = rng.standard_normal((4, 32)), rng.standard_normal((32, 16))
    r = T.simulate_tensor_parallelism(x, w, tp, split=split)
    assert r["max_error"] < 1e-12
    out_bytes = 4 * 16 * 8
    factor = (tp - 1) / tp * (1 if split == "column" else 2)
    assert r["bytes_sent_per_rank"] == round(factor * out_bytes)
    assert r["collective"] == ("none" if tp == 1 else {"column": "all_gather", "row": "all_reduce"}[split])


# ---------------------------------------------------------------- column / row layers, forward and backward
@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from(TPS), lead=st.integers(1, 5), k_in=st.integers(1, 3), k_out=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_column_then_row_linear_layers(tp, lead, k_in, k_out, seed):
    rng = _rng(seed)
    d_in, d_out = k_in * tp, k_out * tp
    x = rng.standard_normal((lead, d_in))
    w, b = rng.standard_normal((d_in, d_out)), rng.standard_normal(d_out)
    g = rng.standard_normal((lead, d_out))
    cl = VirtualCluster(tp)
    # column-parallel with gathered output
    ws, bs = T.shard_columns(w, tp), T.shard_columns(b, tp)
    y = T.column_parallel_forward(cl, [x] * tp, ws, bs, gather_output=True)
    for yr in y:
        np.testing.assert_allclose(yr, x @ w + b, atol=1e-10)
    gx, gw, gb = T.column_parallel_backward(cl, [x] * tp, ws, T.shard_columns(g, tp))
    np.testing.assert_allclose(np.concatenate(gw, -1), x.T @ g, atol=1e-10)
    np.testing.assert_allclose(np.concatenate(gb), g.sum(0), atol=1e-10)
    for gxr in gx:
        np.testing.assert_allclose(gxr, g @ w.T, atol=1e-10)
    # row-parallel on split input
    w2 = rng.standard_normal((d_out, d_in))
    g2 = rng.standard_normal((lead, d_in))
    log = []
    y2 = T.row_parallel_forward(cl, T.shard_columns(x @ w, tp), T.shard_rows(w2, tp), log=log)
    for yr in y2:
        np.testing.assert_allclose(yr, x @ w @ w2, atol=1e-9)
    assert [c.op for c in log] == ["all_reduce"]
    assert log[0].bytes_per_rank == round(2 * (tp - 1) / tp * lead * d_in * 8)
    gx2, gw2, _ = T.row_parallel_backward(cl, T.shard_columns(x @ w, tp), T.shard_rows(w2, tp), [g2] * tp)
    np.testing.assert_allclose(np.concatenate(gw2, 0), (x @ w).T @ g2, atol=1e-9)
    np.testing.assert_allclose(np.concatenate(gx2, -1), g2 @ w2.T, atol=1e-9)


# ---------------------------------------------------------------- Megatron MLP
@pytest.mark.parametrize("tp", TPS)
def test_megatron_mlp_equals_torch_autograd(tp):
    rng = _rng(tp)
    s, b, h, f = 8, 2, 16, 64
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    params = _mlp_params(rng, h, f)
    want_y, want = _torch_mlp(x, *params, g)
    ref_y, ref = T.reference_mlp(x, *params, g)
    np.testing.assert_allclose(ref_y, want_y, atol=1e-12)
    _assert_grads(ref, want, want)
    r = T.megatron_mlp(x, *params, g, tp)
    np.testing.assert_allclose(r.output, want_y, atol=1e-12)
    _assert_grads(r.grads, want, want)
    # exactly one all-reduce forward (g) and one backward (f), each 2(t-1)/t of s*b*h float64 values
    assert [(c.op, c.phase) for c in r.comm] == [("all_reduce", "forward"), ("all_reduce", "backward")]
    assert r.bytes_by_phase() == {"forward": round(2 * (tp - 1) / tp * s * b * h * 8)} | {
        "backward": round(2 * (tp - 1) / tp * s * b * h * 8)}
    assert (r.bytes_sent == r.bytes_sent[0]).all() and r.bytes_sent[0] == sum(c.bytes_per_rank for c in r.comm)
    # each rank holds 1/tp of each weight matrix
    assert r.local[0]["w1"].shape == (h, f // tp) and r.local[0]["w2"].shape == (f // tp, h)


@settings(max_examples=15, deadline=None)
@given(tp=st.sampled_from(TPS), s=st.integers(1, 6), h=st.integers(1, 8), k=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_megatron_mlp_property(tp, s, h, k, seed):
    rng = _rng(seed)
    f = k * tp
    x, g = rng.standard_normal((s, 1, h)), rng.standard_normal((s, 1, h))
    params = _mlp_params(rng, h, f)
    want_y, want = T.reference_mlp(x, *params, g)
    r = T.megatron_mlp(x, *params, g, tp)
    np.testing.assert_allclose(r.output, want_y, atol=1e-10)
    _assert_grads(r.grads, want, want)


# ---------------------------------------------------------------- attention split by heads
def _torch_attention(x, ws, heads, g):
    m = Attention(x.shape[-1], heads).double()
    with torch.no_grad():
        for lin, w in zip((m.q, m.k, m.v, m.o), ws):
            lin.weight.copy_(torch.from_numpy(w.T))
    xt = torch.from_numpy(x).requires_grad_()
    y = m(xt)
    (y * torch.from_numpy(g)).sum().backward()
    return y.detach().numpy(), {**{k: lin.weight.grad.numpy().T for k, lin in
                                   zip(("wq", "wk", "wv", "wo"), (m.q, m.k, m.v, m.o))}, "x": xt.grad.numpy()}


@pytest.mark.parametrize("tp", TPS)
def test_attention_split_by_heads_equals_torch(tp):
    rng = _rng(10 + tp)
    s, b, h, heads = 6, 2, 32, 8
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    ws = [rng.standard_normal((h, h)) / np.sqrt(h) for _ in range(4)]
    want_y, want = _torch_attention(x, ws, heads, g)
    r = T.parallel_attention(x, *ws, heads, g, tp)
    np.testing.assert_allclose(r.output, want_y, atol=1e-12)
    _assert_grads(r.grads, want, want)
    assert [(c.op, c.phase) for c in r.comm] == [("all_reduce", "forward"), ("all_reduce", "backward")]
    assert r.local[0]["wq"].shape == (h, h // tp) and r.local[0]["wo"].shape == (h // tp, h)


@settings(max_examples=15, deadline=None)
@given(tp=st.sampled_from(TPS), heads_per_rank=st.integers(1, 2), head_dim=st.integers(1, 4),
       s=st.integers(1, 5), b=st.integers(1, 2), causal=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_attention_property(tp, heads_per_rank, head_dim, s, b, causal, seed):
    rng = _rng(seed)
    heads = heads_per_rank * tp
    h = heads * head_dim
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    ws = [rng.standard_normal((h, h)) / np.sqrt(h) for _ in range(4)]
    want_y, want = T.reference_attention(x, *ws, heads, g, causal=causal)
    r = T.parallel_attention(x, *ws, heads, g, tp, causal=causal)
    np.testing.assert_allclose(r.output, want_y, atol=1e-10)
    _assert_grads(r.grads, want, want)


# ---------------------------------------------------------------- sequence parallelism
def _torch_block(x, gamma, beta, params, g):
    m = MLP(params[0].shape[0], params[0].shape[1]).double()
    with torch.no_grad():
        m.fc1.weight.copy_(torch.from_numpy(params[0].T)); m.fc1.bias.copy_(torch.from_numpy(params[1]))
        m.fc2.weight.copy_(torch.from_numpy(params[2].T)); m.fc2.bias.copy_(torch.from_numpy(params[3]))
    gt, bt = torch.from_numpy(gamma).requires_grad_(), torch.from_numpy(beta).requires_grad_()
    xt = torch.from_numpy(x).requires_grad_()
    y = xt + m(F.layer_norm(xt, (x.shape[-1],), gt, bt, eps=T.EPS))
    (y * torch.from_numpy(g)).sum().backward()
    return y.detach().numpy(), {"w1": m.fc1.weight.grad.numpy().T, "b1": m.fc1.bias.grad.numpy(),
                                "w2": m.fc2.weight.grad.numpy().T, "b2": m.fc2.bias.grad.numpy(),
                                "gamma": gt.grad.numpy(), "beta": bt.grad.numpy(), "x": xt.grad.numpy()}


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp", TPS)
def test_sequence_parallel_block_equals_torch_and_closed_form(tp, sp):
    rng = _rng(20 + tp)
    s, b, h, f = 16, 2, 8, 32
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    gamma, beta = 1 + 0.1 * rng.standard_normal(h), 0.1 * rng.standard_normal(h)
    params = _mlp_params(rng, h, f)
    want_y, want = _torch_block(x, gamma, beta, params, g)
    r = T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, tp, sequence_parallel=sp)
    np.testing.assert_allclose(r.output, want_y, atol=1e-11)
    _assert_grads(r.grads, want, want, tol=1e-10)
    if sp:  # each rank keeps only its sequence shard outside the tensor-parallel region
        assert r.local[0]["x"].shape == (s // tp, b, h) and r.local[0]["output"].shape == (s // tp, b, h)
    if tp > 1:
        closed = T.block_comm(seq_len=s, micro_batch_size=b, hidden_size=h, tp=tp, sequence_parallel=sp,
                              dtype_bytes=8, layernorm_grad_allreduce=sp)
        assert [(c.op, c.phase, c.bytes_per_rank) for c in r.comm] == [
            (c.op, c.phase, c.bytes_per_rank) for c in closed]


@settings(max_examples=15, deadline=None)
@given(tp=st.sampled_from(TPS), k=st.integers(1, 3), b=st.integers(1, 2), h=st.integers(2, 6),
       sp=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_sequence_parallel_block_property(tp, k, b, h, sp, seed):
    rng = _rng(seed)
    s, f = k * tp, 2 * tp
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    gamma, beta = 1 + 0.1 * rng.standard_normal(h), 0.1 * rng.standard_normal(h)
    params = _mlp_params(rng, h, f)
    want_y, want = T.reference_mlp_block(x, gamma, beta, *params, g)
    r = T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, tp, sequence_parallel=sp)
    np.testing.assert_allclose(r.output, want_y, atol=1e-10)
    _assert_grads(r.grads, want, want, tol=1e-9)


@pytest.mark.parametrize("tp", TPS)
def test_pytorch_sequence_parallel_scheme_equals_torch(tp):
    """PyTorch's scheme: same numbers, no re-gather, fc2's bias needs no collective, LN grads reduced at the step."""
    rng = _rng(40 + tp)
    s, b, h, f = 16, 2, 8, 32
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    gamma, beta = 1 + 0.1 * rng.standard_normal(h), 0.1 * rng.standard_normal(h)
    params = _mlp_params(rng, h, f)
    want_y, want = _torch_block(x, gamma, beta, params, g)
    r = T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, tp, scheme="pytorch")
    np.testing.assert_allclose(r.output, want_y, atol=1e-11)
    _assert_grads(r.grads, want, want, tol=1e-10)
    # each rank's LayerNorm share sums to the full gradient (what Partial(sum) means)
    np.testing.assert_allclose(sum(loc["grad_gamma_partial"] for loc in r.local), want["gamma"], atol=1e-10)
    if tp > 1:
        assert T.comm_counts(r.comm) == {"forward": {"all_gather": 1, "reduce_scatter": 1},
                                         "backward": {"all_gather": 1, "reduce_scatter": 1},
                                         "step": {"all_reduce": 2}}
        closed = T.block_comm(seq_len=s, micro_batch_size=b, hidden_size=h, tp=tp, sequence_parallel=True,
                              dtype_bytes=8, regather_in_backward=False)
        assert [(c.op, c.bytes_per_rank) for c in r.comm if c.phase != "step"] == [
            (c.op, c.bytes_per_rank) for c in closed]
        assert r.bytes_by_phase()["step"] == 2 * round(2 * (tp - 1) / tp * h * 8)
    with pytest.raises(DistlearnValueError, match="scheme"):
        T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, tp, scheme="deepspeed")


def test_activation_memory_of_the_two_sequence_parallel_schemes():
    # PyTorch's plan keeps the all-gathered QKV and fc1 inputs (2 × 2 sbh in 16-bit) whole: sbh(4 + 30/t + 5as/ht)
    sbh = 2048 * 1 * 12288
    kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96, sequence_parallel=True)
    for t in (1, 2, 4, 8):
        attn = 5 * 96 * 2048 / (12288 * t)
        assert T.layer_activation_bytes(**kw, tp=t) == pytest.approx(sbh * (34 / t + attn))
        assert T.layer_activation_bytes(**kw, tp=t, sp_scheme="pytorch") == pytest.approx(sbh * (4 + 30 / t + attn))
    assert T.sp_saved_bytes(1000, tp=4, gathered_bytes=200, replicated_bytes=8, scheme="megatron") == 256
    assert T.sp_saved_bytes(1000, tp=4, gathered_bytes=200, replicated_bytes=8, scheme="pytorch") == 406
    with pytest.raises(DistlearnValueError, match="sp_scheme"):
        T.layer_activation_bytes(**kw, tp=2, sp_scheme="nvidia")


def test_sp_moves_the_same_bytes_as_all_reduce():
    kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, tp=8)
    plain = T.layer_comm_bytes(**kw)
    sp = T.layer_comm_bytes(**kw, sequence_parallel=True, regather_in_backward=False)
    assert plain["total"] == sp["total"] == round(8 * 7 / 8 * 2048 * 12288 * 2)
    assert plain["num_collectives"] == 4 and sp["num_collectives"] == 8
    regather = T.layer_comm_bytes(**kw, sequence_parallel=True)
    assert regather["total"] - sp["total"] == round(2 * 7 / 8 * 2048 * 12288 * 2)
    assert T.layer_comm_bytes(**{**kw, "tp": 1})["total"] == 0


def test_activation_saving_of_sequence_parallelism():
    # Korthikanti et al. 2022, Table 2, GPT-3 175B (a = 96, s = 2048, h = 12288), t = 8:
    # tensor parallel 10 + 24/8 + 5·96·2048/(12288·8) = 23 sbh; with SP 34/8 + 10 = 14.25 sbh
    sbh = 2048 * 1 * 12288
    kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96, tp=8)
    assert T.layer_activation_bytes(**kw) == pytest.approx(23 * sbh)
    assert T.layer_activation_bytes(**kw, sequence_parallel=True) == pytest.approx(14.25 * sbh)


def test_layer_weight_bytes_against_torch_modules():
    h, f = 64, 256
    layer = torch.nn.ModuleList([torch.nn.LayerNorm(h), torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h),
                                 torch.nn.LayerNorm(h), torch.nn.Linear(h, f), torch.nn.Linear(f, h)])
    n = sum(p.numel() for p in layer.parameters())
    assert T.layer_weight_bytes(hidden_size=h, tp=1, ffn_hidden_size=f, dtype_bytes=4)["total"] == 4 * n
    w = T.layer_weight_bytes(hidden_size=h, tp=4, ffn_hidden_size=f)
    assert w["replicated"] == 2 * 6 * h
    assert w["sharded"] == 2 * (n - 6 * h) // 4


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("call, names", [
    (lambda: T.megatron_mlp(np.ones((2, 1, 4)), np.ones((4, 6)), np.ones(6), np.ones((6, 4)), np.ones(4),
                            np.ones((2, 1, 4)), 4), ["ffn_hidden_size = 6", "tp = 4"]),
    (lambda: T.parallel_attention(np.ones((2, 1, 12)), *[np.ones((12, 12))] * 4, 6, np.ones((2, 1, 12)), 4),
     ["num_heads = 6", "tp = 4"]),
    (lambda: T.sequence_parallel_mlp_block(np.ones((6, 1, 4)), np.ones(4), np.ones(4), np.ones((4, 8)), np.ones(8),
                                           np.ones((8, 4)), np.ones(4), np.ones((6, 1, 4)), 4), ["seq_len = 6"]),
    (lambda: T.layer_weight_bytes(hidden_size=4096, tp=3), ["hidden_size = 4096", "tp = 3"]),
    (lambda: T.simulate_tensor_parallelism(np.ones((2, 4)), np.ones((4, 6)), 4), ["d_out = 6"]),
])
def test_bad_shapes_raise_bilingual_errors(call, names):
    with pytest.raises(DistlearnValueError) as info:
        call()
    msg = str(info.value)
    for name in names:
        assert name in msg
    assert "不能被" in msg or "整除" in msg


def test_mismatched_shapes_are_named():
    x = np.ones((4, 1, 8))
    # checked at the boundary (distlearn.core.validate.checks): the axes named, with the sizes x and w1 fixed
    with pytest.raises(DistlearnValueError, match=r"w2 must be an array of shape \(f, h\) = \(16, 8\); got shape "
                                                  r"\(8, 16\)"):
        T.megatron_mlp(x, np.ones((8, 16)), np.ones(16), np.ones((8, 16)), np.ones(8), x, 2)
    with pytest.raises(DistlearnValueError, match="grad_out"):
        T.parallel_attention(x, *[np.ones((8, 8))] * 4, 2, np.ones((4, 2, 8)), 2)
    with pytest.raises(DistlearnValueError, match="gamma"):
        T.sequence_parallel_mlp_block(x, np.ones(4), np.ones(8), np.ones((8, 16)), np.ones(16), np.ones((16, 8)),
                                      np.ones(8), x, 2)


def test_tp_must_be_a_positive_integer():
    with pytest.raises(DistlearnValueError):
        T.shard_columns(np.ones((2, 4)), 0)
    with pytest.raises(DistlearnValueError):
        T.shard_rows(np.ones((4, 2)), 2.0)


# ---------------------------------------------------------------- explorer
def test_explorer_compute_matches_the_closed_forms():
    from distlearn.tensor_parallel import explorer as w
    r = w.compute(tp=8, hidden_size=12288, seq_len=2048, micro_batch_size=1, sequence_parallel=True)
    sbh = 2048 * 12288
    assert r["num_heads"] == 96
    assert r["activations"] == pytest.approx(14.25 * sbh) and r["activations_no_sp"] == pytest.approx(23 * sbh)
    # weights: (12h² + 7h)/8 sharded (QKV, fc1 with biases; O, fc2 weights) + 6h replicated, bf16
    h = 12288
    assert r["weights"] == 2 * ((12 * h * h + 7 * h) // 8 + 6 * h)
    assert "error" in w.compute(tp=16, hidden_size=1024)  # 8 heads over 16 ranks
    assert "num_heads = 8" in w.compute(tp=16, hidden_size=1024)["error"]
    pt = w.compute(tp=8, hidden_size=12288, seq_len=2048, micro_batch_size=1, sp_scheme="pytorch")
    assert pt["activations"] == pytest.approx((4 + 30 / 8 + 10) * sbh)   # all-gathered inputs saved whole
    assert pt["comm"] < r["comm"]                                         # but no backward re-gather


def test_every_comm_label_has_chinese():
    """Every label and phase a simulation writes renders in both languages (the notebook prints them)."""
    rng = _rng(7)
    s, b, h, f = 8, 1, 8, 32
    x, g = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    gamma, beta = np.ones(h), np.zeros(h)
    params = _mlp_params(rng, h, f)
    records = []
    for sp in (False, True):
        records += T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, 2, sequence_parallel=sp).comm
    records += T.sequence_parallel_mlp_block(x, gamma, beta, *params, g, 2, scheme="pytorch").comm
    for sp in (False, True):
        records += T.block_comm(seq_len=s, micro_batch_size=b, hidden_size=h, tp=2, sequence_parallel=sp,
                                dtype_bytes=8, layernorm_grad_allreduce=sp)
    seen = {c.label for c in records}
    assert {"g forward: all-gather sequence", "re-gather LN output for dW1"} <= seen
    for c in records:
        assert c.label_text() == f"{c.label} / {T.LABELS_ZH[c.label]}"
        assert c.phase_text() in ("forward / 前向", "backward / 反向", "step / 优化器更新")
    assert set(T.LABELS_ZH) >= seen
