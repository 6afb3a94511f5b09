"""Context parallelism (chapter 10): the simulation against independent sources — full attention, PyTorch autograd
through scaled_dot_product_attention, PyTorch's own _SDPAMerger and _HeadTailLoadBalancer, brute-force counting,
the papers' closed forms — and the explorer, checkers, GPU-script guard and chapter prose."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from distlearn.context_parallel import simulation as C
from distlearn.activation_memory.formulas import layer_activation_table, layer_shape
from authoring.paths import ROOT
from distlearn.core.hardware import GPUS
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError

TOL = 1e-12   # float64: the ring and the unsharded attention differ by rounding only (~1e-15 here)


def _qkv(seed, b, a, kv, s, d):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, a, s, d)), rng.standard_normal((b, kv, s, d)), rng.standard_normal((b, kv, s, d))


def _divides(s, cp, layout):
    return s % (2 * cp if layout == "zigzag" else cp) == 0


# ---------------------------------------------------------------- online softmax
def test_merge_equals_pytorch_sdpa_merger():
    from torch.distributed.tensor.experimental._context_parallel._attention import _SDPAMerger

    q, k, v = _qkv(1, 2, 3, 3, 10, 4)
    parts = [C.block_attention(q[:, :, :6], k[:, :, i:j], v[:, :, i:j]) for i, j in ((0, 3), (3, 7), (7, 10))]
    merger = _SDPAMerger(convert_to_f32=False, seq_dim=2)
    out, lse = parts[0].out, parts[0].lse
    for p in parts:
        merger.step(torch.tensor(p.out), torch.tensor(p.lse), False)
    for p in parts[1:]:
        out, lse = C.merge_blocks(out, lse, p.out, p.lse)
    t_out, t_lse = merger.results()
    np.testing.assert_allclose(out, t_out.numpy(), atol=TOL)
    np.testing.assert_allclose(lse, t_lse.numpy(), atol=TOL)
    full = C.full_attention(q[:, :, :6], k, v)      # 6 queries, all 10 keys
    assert np.abs(out - full.out).max() < TOL and np.abs(lse - full.lse).max() < TOL


def test_merge_handles_empty_blocks_and_huge_scores():
    out, lse = C.merge_blocks(np.ones((2, 3)), np.array([-np.inf, 2.0]), np.full((2, 3), 5.0), np.array([1.0, -np.inf]))
    np.testing.assert_array_equal(out, [[5.0] * 3, [1.0] * 3])
    np.testing.assert_array_equal(lse, [1.0, 2.0])
    out, lse = C.merge_blocks(np.zeros((1, 1)), np.array([1000.0]), np.ones((1, 1)), np.array([1000.0]))
    assert np.isfinite(out).all() and out[0, 0] == pytest.approx(0.5) and lse[0] == pytest.approx(1000 + np.log(2))
    both_empty = C.merge_blocks(np.zeros((1, 2)), np.array([-np.inf]), np.zeros((1, 2)), np.array([-np.inf]))
    assert np.array_equal(both_empty[0], np.zeros((1, 2))) and both_empty[1][0] == -np.inf


def test_averaging_merge_is_caught():
    q, k, v = _qkv(2, 1, 2, 2, 16, 4)
    broken = C.ring_attention_forward(q, k, v, 4, causal=True, layout="zigzag", merge=C.averaging_merge)
    assert np.abs(broken.out - C.full_attention(q, k, v, causal=True).out).max() > 1e-2


def test_block_attention_fully_masked_rows():
    q, k, v = _qkv(3, 1, 1, 1, 3, 2)
    mask = np.array([[False, False, False], [True, False, False], [True, True, True]])
    p = C.block_attention(q, k, v, mask=mask)
    assert p.lse[0, 0, 0] == -np.inf and np.array_equal(p.out[0, 0, 0], [0.0, 0.0])
    assert np.allclose(p.out[0, 0, 1], v[0, 0, 0])


# ---------------------------------------------------------------- ring attention forward / backward
@settings(max_examples=60, deadline=None)
@given(cp=st.integers(1, 6), layout=st.sampled_from(C.LAYOUTS), causal=st.booleans(), groups=st.sampled_from([1, 2]),
       chunks=st.integers(1, 3), seed=st.integers(0, 1000))
def test_ring_forward_equals_full_attention(cp, layout, causal, groups, chunks, seed):
    s = chunks * (2 * cp if layout == "zigzag" else cp)
    q, k, v = _qkv(seed, 1, 2 * groups, 2, s, 4)
    f = C.ring_attention_forward(q, k, v, cp, causal=causal, layout=layout)
    ref = C.full_attention(q, k, v, causal=causal)
    assert np.abs(f.out - ref.out).max() < TOL and np.abs(f.lse - ref.lse).max() < TOL
    assert f.work.sum() == (s * (s + 1) // 2 if causal else s * s)
    assert np.array_equal(f.source[:, 0], np.arange(cp))
    block = 2 * (s // cp) * 2 * 4 * 8                       # K and V of the block, float64
    assert list(f.bytes_sent) == [(cp - 1) * block] * cp


@pytest.mark.parametrize("cp,layout", [(1, "contiguous"), (2, "zigzag"), (3, "striped"), (4, "zigzag"),
                                       (5, "contiguous"), (8, "striped")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv", [4, 1])
def test_ring_backward_equals_pytorch_autograd(cp, layout, causal, kv):
    s = 2 * cp * 2 if layout == "zigzag" else cp * 3
    q, k, v = _qkv(7, 2, 4, kv, s, 8)
    dout = np.random.default_rng(8).standard_normal(q.shape)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True).backward(torch.tensor(dout))
    g = C.ring_attention_backward(q, k, v, dout, cp, causal=causal, layout=layout)
    for got, want in ((g.dq, tq.grad), (g.dk, tk.grad), (g.dv, tv.grad)):
        assert np.abs(got - want.numpy()).max() < TOL
    block = 2 * (s // cp) * 2 * kv * 8 * 8
    assert list(g.kv_bytes) == [(cp - 1) * block] * cp
    assert list(g.grad_bytes) == [(cp if cp > 1 else 0) * block] * cp


def test_ring_matches_comm_formula_both_passes():
    q, k, v = _qkv(4, 2, 4, 2, 24, 8)
    for cp in (2, 3, 4, 6):
        kw = dict(seq_len=24, num_heads=4, num_kv_heads=2, head_dim=8, cp=cp, micro_batch_size=2, dtype_bytes=8,
                  grad_bytes=8)
        f = C.ring_attention_forward(q, k, v, cp, layout="contiguous")
        g = C.ring_attention_backward(q, k, v, q, cp, forward=f)
        assert f.bytes_sent[0] == C.cp_comm_bytes("ring", **kw).bytes_per_rank
        assert g.bytes_sent[0] == C.cp_comm_bytes("ring", **kw, pass_="backward").bytes_per_rank


def test_bad_shapes_and_layouts_are_refused_in_both_languages():
    q, k, v = _qkv(5, 1, 3, 2, 8, 4)
    with pytest.raises(DistlearnValueError, match="kv dividing"):
        C.ring_attention_forward(q, k, v, 2)
    q, k, v = _qkv(5, 1, 2, 2, 10, 4)
    with pytest.raises(DistlearnValueError, match="2·cp") as e:
        C.ring_attention_forward(q, k, v, 3, layout="zigzag")
    assert "整除" in str(e.value)


# ---------------------------------------------------------------- layouts and work
@pytest.mark.parametrize("s,cp", [(16, 2), (24, 3), (64, 4), (131072, 16), (96, 8)])
def test_zigzag_equals_pytorch_head_tail_load_balancer(s, cp):
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import _HeadTailLoadBalancer

    order = _HeadTailLoadBalancer(s, cp, "cpu")._generate_indices()[0].numpy()
    assert np.array_equal(np.concatenate(C.layout_positions(s, cp, "zigzag")), order)


@pytest.mark.parametrize("layout", C.LAYOUTS)
def test_layouts_partition_the_sequence(layout):
    pos = C.layout_positions(48, 4, layout)
    assert sorted(np.concatenate(pos).tolist()) == list(range(48)) and all(len(p) == 12 for p in pos)


@pytest.mark.parametrize("layout", C.LAYOUTS)
@pytest.mark.parametrize("cp", [1, 2, 3, 4, 6, 8])
def test_work_matrix_closed_form_equals_counting(layout, cp):
    s = 48
    if not _divides(s, cp, layout):
        pytest.skip("layout does not divide")
    pos, w = C.layout_positions(s, cp, layout), C.work_matrix(s, cp, layout)
    counted = np.array([[C.causal_mask(pos[r], pos[(r - t) % cp]).sum() for t in range(cp)] for r in range(cp)])
    assert np.array_equal(w, counted) and w.sum() == s * (s + 1) // 2
    assert np.array_equal(C.work_matrix(s, cp, layout, causal=False), np.full((cp, cp), (s // cp) ** 2))


@pytest.mark.parametrize("cp", [2, 4, 8, 16, 32])
def test_contiguous_last_rank_does_2cp_minus_1_over_cp_and_zigzag_is_exact(cp):
    s = 1 << 17
    cont, zig = (C.work_matrix(s, cp, lay).sum(axis=1) for lay in ("contiguous", "zigzag"))
    c = s // cp
    assert cont[-1] == c * (c + 1) // 2 + (cp - 1) * c * c                       # closed form, last rank
    assert cont[-1] / cont.mean() == pytest.approx((2 * cp - 1) / cp, rel=1e-4)   # → 2 as cp grows
    h = s // (2 * cp)
    assert (zig == (2 * cp - 1) * h * h + h * (h + 1)).all()                      # every rank the same
    stripe = C.work_matrix(s, cp, "striped").sum(axis=1)
    assert stripe.max() / stripe.mean() < 1 + cp / s * 2                          # within one diagonal


# ---------------------------------------------------------------- Ulysses
@pytest.mark.parametrize("cp,kv", [(1, 2), (2, 2), (4, 2), (8, 2), (2, 8), (4, 4), (8, 8), (8, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_ulysses_equals_full_attention_and_its_bytes(cp, kv, causal):
    q, k, v = _qkv(9, 2, 8, kv, 16, 4)
    u, ref = C.ulysses_attention(q, k, v, cp, causal=causal), C.full_attention(q, k, v, causal=causal)
    assert np.abs(u.out - ref.out).max() < TOL and np.abs(u.lse - ref.lse).max() < TOL
    formula = C.cp_comm_bytes("all-to-all", seq_len=16, num_heads=8, num_kv_heads=kv, head_dim=4, cp=cp,
                              micro_batch_size=2, dtype_bytes=8).bytes_per_rank
    assert list(u.bytes_sent) == [formula] * cp
    assert u.heads.kv_replication == max(1, cp // kv)


def test_ulysses_head_limits_follow_deepspeed():
    with pytest.raises(DistlearnValueError, match="cp ≤ 8"):
        C.ulysses_heads(32, 8, 16, tp=4)
    with pytest.raises(DistlearnValueError, match="K/V heads"):
        C.ulysses_heads(12, 6, 4)                               # 6 % 4 and 4 % 6 both non-zero
    assert C.ulysses_heads(32, 8, 32) == C.UlyssesHeads(1, 1, 4)
    assert C.max_ulysses_cp(32, 8) == 32 and C.max_ulysses_cp(32, 8, tp=8) == 4
    assert C.max_ulysses_cp(128, 8, tp=8) == 16 and C.ulysses_heads(128, 8, 16, 8).kv_replication == 16


def test_ulysses_volume_is_the_papers_4Nh_over_P_for_mha():
    s, a, d = 131072, 32, 128
    for cp in (2, 4, 8, 16, 32):
        got = C.cp_comm_bytes("all-to-all", seq_len=s, num_heads=a, num_kv_heads=a, head_dim=d, cp=cp).bytes_per_rank
        assert got == pytest.approx(4 * s * a * d * 2 / cp * (cp - 1) / cp)       # Jacobs et al. §3.2, ×(P−1)/P
        ring = C.cp_comm_bytes("ring", seq_len=s, num_heads=a, num_kv_heads=a, head_dim=d, cp=cp).bytes_per_rank
        assert ring == (cp - 1) / cp * 2 * s * a * d * 2
        ag = C.cp_comm_bytes("all-gather", seq_len=s, num_heads=a, num_kv_heads=8, head_dim=d, cp=cp)
        assert ag.bytes_per_rank == C.cp_comm_bytes("ring", seq_len=s, num_heads=a, num_kv_heads=8, head_dim=d,
                                                    cp=cp).bytes_per_rank and not ag.overlapped


# ---------------------------------------------------------------- time
def test_ring_timeline_by_hand():
    tl = C.ring_timeline(np.array([[1.0, 0.0], [1.0, 1.0]]), 0.5)      # contiguous causal, cp = 2
    assert tl.makespan == 2.0 and tl.compute_only == 2.0 and tl.exposed_comm == 0.0 and tl.imbalance == 0.5
    tl = C.ring_timeline(np.ones((2, 2)), 3.0)                          # the block arrives at 3, compute ends at 4
    assert tl.makespan == 4.0 and tl.exposed_comm == 2.0
    bwd = C.ring_timeline(np.ones((2, 2)), 0.0, grad_comm_s=0.5)        # the last dK/dV hop home is exposed
    assert bwd.makespan == pytest.approx(2.5) and bwd.exposed_comm == pytest.approx(0.5)
    with pytest.raises(DistlearnValueError):
        C.ring_timeline(np.ones((2, 3)), 1.0)


def test_overlap_condition_is_liu_et_al():
    a100 = GPUS["a100-80gb"]
    mha = C.ring_overlap(tokens_per_rank=1024, num_heads=32, num_kv_heads=32, head_dim=128, flops=a100.peak_flops,
                         bandwidth=a100.nvlink_bw)
    assert mha["min_tokens"] == pytest.approx(1040)          # Table 2: A100 NVLink, minimal block size 1.0e3
    assert not mha["hidden"]
    gqa = C.ring_overlap(tokens_per_rank=1024, num_heads=32, num_kv_heads=8, head_dim=128, flops=a100.peak_flops,
                         bandwidth=a100.nvlink_bw, work_fraction=0.5)
    assert gqa["min_tokens"] == pytest.approx(520) and gqa["hidden"]
    assert gqa["compute_s"] == pytest.approx(4 * 1024 ** 2 * 128 * 32 * 0.5 / a100.peak_flops)


def test_attention_cost_compute_halves_with_zigzag_and_ulysses_is_balanced():
    kw = dict(seq_len=131072, num_heads=32, num_kv_heads=8, head_dim=128, cp=8, flops=989e12, bandwidth=50e9)
    cont, zig = (C.attention_cost("ring", layout=lay, **kw) for lay in ("contiguous", "zigzag"))
    assert cont.compute_s / zig.compute_s == pytest.approx(1.875, rel=1e-3)
    uly = C.attention_cost("all-to-all", **kw)
    assert uly.compute_s == pytest.approx(zig.compute_s, rel=1e-3) and uly.exposed_s == uly.comm_s
    total_flops = C.attention_flops(131072 * 131073 // 2, num_heads=32, head_dim=128)
    assert uly.compute_s == pytest.approx(total_flops / 8 / 989e12)
    bwd = C.attention_cost("ring", layout="zigzag", pass_="backward", **kw)
    assert bwd.compute_s == pytest.approx(2.5 * zig.compute_s)


# ---------------------------------------------------------------- memory
def test_cp_divides_every_term_of_the_flash_table():
    cfg = PRESETS["llama3-8b"]
    full = {t.name: t.nbytes for t in layer_activation_table(seq_len=131072, micro_batch_size=1, **layer_shape(cfg),
                                                             attention="flash")}
    for cp in (2, 4, 16):
        part = {t.name: t.nbytes for t in C.cp_layer_activation_table(cfg, seq_len=131072, cp=cp)}
        assert part.keys() == full.keys() and all(part[n] * cp == full[n] for n in full)
    with pytest.raises(DistlearnValueError, match="flash"):
        C.cp_layer_activation_table(cfg, seq_len=8192, cp=2, attention="materialised")


def test_llama3_table4_row_multiplies_out():
    r = C.LLAMA3_405B_LONG_CONTEXT
    assert r["tp"] * r["cp"] * r["pp"] * r["dp"] == r["gpus"] == 16384
    assert r["dp"] * r["batch_size_per_dp"] * r["seq_len"] == 16 * 2 ** 20        # "16M" tokens per batch
    big = PRESETS["llama3.1-405b"]
    m = C.cp_model_activation_bytes(big, seq_len=r["seq_len"], cp=r["cp"], micro_batch_size=1, tp=8,
                                    sequence_parallel=True, pp=16, stage=0, num_microbatches=16)
    assert m.layers_on_stage == 8 and m.inflight == 16
    assert m.total == pytest.approx(C.cp_model_activation_bytes(big, seq_len=r["seq_len"], cp=1, micro_batch_size=1,
                                                                tp=8, sequence_parallel=True, pp=16, stage=0,
                                                                num_microbatches=16).total / 16)


def test_ulysses_extra_bytes_terms():
    e = C.ulysses_extra_bytes(seq_len=256, num_heads=4, num_kv_heads=2, head_dim=16, cp=4)
    assert e == {"output_copy": 64 * 64 * 2, "kv_replication": 2 * 64 * 16 * 2 * 2, "total": 16384}
    assert C.ulysses_extra_bytes(seq_len=256, num_heads=4, num_kv_heads=2, head_dim=16, cp=2)["kv_replication"] == 0


def test_buffers():
    kw = dict(seq_len=1024, num_heads=8, num_kv_heads=2, head_dim=16, cp=4)
    assert C.attention_buffer_bytes("ring", **kw) == 2 * 2 * 256 * 2 * 16 * 2
    assert C.attention_buffer_bytes("all-gather", **kw) == 2 * 1024 * 2 * 16 * 2
    assert C.attention_buffer_bytes("ring", **{**kw, "cp": 1}) == 0


# ---------------------------------------------------------------- lab helpers that need no processes
def test_lab_positions_equal_simulation_positions():
    from distlearn.context_parallel.lab import layout_positions as lab_positions

    for layout in C.LAYOUTS:
        for cp in (1, 2, 4):
            got = lab_positions(32, cp, layout).numpy()
            assert all(np.array_equal(g, p) for g, p in zip(got, C.layout_positions(32, cp, layout)))


def test_lab_config_prices_like_a_model():
    from distlearn.context_parallel.lab import lab_config

    cfg = lab_config()
    assert C.cp_layer_activation_bytes(cfg, seq_len=256) == 561152    # + 2 048 B of 1/rms = 563 200 measured


# ---------------------------------------------------------------- the GPU script's guard
def test_gpu_check_imports_and_explains_itself_without_cuda():
    import distlearn.context_parallel.lab_gpu_check as g

    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("GPUs present: the guard does not apply")
    assert "2 GPUs" in g.gpu_problem() and "2 块 GPU" in g.gpu_problem()
    out = subprocess.run([sys.executable, "-m", "distlearn.context_parallel.lab_gpu_check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 2
    assert "needs CUDA and at least 2 GPUs" in out.stderr and "需要 CUDA" in out.stderr
    assert "torchrun --nproc-per-node 2 -m distlearn.context_parallel.lab_gpu_check" in out.stderr


# ---------------------------------------------------------------- checkers
def test_checkers_accept_the_package_and_reject_wrong_answers():
    from distlearn.core import check
    from distlearn.core.check import CheckFailed

    check.ex10_merge_blocks(lambda oa, la, ob, lb: C.merge_blocks(oa, la, ob, lb))
    check.ex10_zigzag_positions(lambda s, cp: C.layout_positions(s, cp, "zigzag"))
    check.ex10_causal_work(lambda s, cp, lay: C.work_matrix(s, cp, lay).sum(axis=1))
    check.ex10_ring_hidden(lambda *a: C.ring_overlap(tokens_per_rank=a[0], num_heads=a[1], num_kv_heads=a[2],
                                                      head_dim=a[3], flops=a[4], bandwidth=a[5])["hidden"])
    for fn, name in ((lambda oa, la, ob, lb: C.averaging_merge(oa, la, ob, lb), "ex10_merge_blocks"),
                     (lambda s, cp: C.layout_positions(s, cp, "contiguous"), "ex10_zigzag_positions"),
                     (lambda s, cp, lay: [s * (s + 1) // 2 // cp] * cp, "ex10_causal_work"),
                     (lambda *a: True, "ex10_ring_hidden")):
        with pytest.raises(CheckFailed):
            getattr(check, name)(fn)


# ---------------------------------------------------------------- the chapter's prose numbers
def test_chapter_prose_numbers():
    md = (ROOT / "notebooks" / "10_context_parallel.md").read_text(encoding="utf-8")
    cfg = PRESETS["llama3-8b"]
    stored = C.cp_layer_activation_bytes(cfg, seq_len=131072, attention="materialised")
    flash = C.cp_layer_activation_bytes(cfg, seq_len=131072)
    tpsp = C.cp_layer_activation_bytes(cfg, seq_len=131072, tp=8, sequence_parallel=True)
    assert round(stored / 1e9, -2) == 1100 and "1,100 GB" in md
    assert round(flash / 1e9) == 22 and "keeps 22 GB" in md
    assert f"{tpsp / 1e9:.2f}" == "2.75" and f"{32 * tpsp / 1e9:.0f}" == "88" and "88 GB" in md
    big, r = PRESETS["llama3.1-405b"], C.LLAMA3_405B_LONG_CONTEXT
    kw = dict(seq_len=r["seq_len"], micro_batch_size=1, tp=8, sequence_parallel=True, pp=16, stage=0,
              num_microbatches=16)
    assert f"{C.cp_model_activation_bytes(big, cp=1, **kw).total / 1e12:.1f}" == "1.3" and "1.3 TB" in md
    assert f"{C.cp_model_activation_bytes(big, cp=16, **kw).total / 1e9:.0f}" == "82" and "82 GB" in md
    need = C.ring_overlap(tokens_per_rank=1, num_heads=32, num_kv_heads=8, head_dim=128, flops=989e12,
                          bandwidth=50e9, work_fraction=0.5)["min_tokens"]
    assert f"{need:,.0f}" == "9,890" and "9,890" in md
    assert re.search(r"1\.88× for cp = 8", md) and f"{15 / 8:.2f}" == "1.88"


def test_chapter_prose_audit_numbers():
    """Numbers the audit put in the prose, recomputed: the contiguous causal ring is 94 % (not 100 %) of the unmasked
    one; Ulysses beats the ring's exposed time only at cp = 32; the 405B stage's activations (82 GB = 76.6 GiB) plus
    its bf16 weights exceed an H100's 80 GiB = 85.9 GB; the Ulysses table's last column is in bytes."""
    md = (ROOT / "notebooks" / "10_context_parallel.md").read_text(encoding="utf-8")
    kw = dict(seq_len=131072, num_heads=32, num_kv_heads=8, head_dim=128, cp=8, flops=989e12, bandwidth=1e30)
    cont = C.attention_cost("ring", layout="contiguous", **kw).total_s
    unmasked = C.attention_cost("ring", layout="contiguous", causal=False, **kw).total_s
    assert f"{cont / unmasked:.0%}" == "94%" and cont / unmasked == pytest.approx(15 / 16, rel=1e-4)
    assert f"{cont * 1e3:.2f} ms against {unmasked * 1e3:.2f} ms" == "33.35 ms against 35.58 ms"
    assert "33.35 ms against 35.58 ms" in md and "as slow as attention without a mask." not in md
    net = dict(seq_len=131072, num_heads=32, num_kv_heads=8, head_dim=128, flops=989e12, bandwidth=50e9,
               layout="zigzag")
    uly, ring = (C.attention_cost(v, cp=32, **net).exposed_s for v in ("all-to-all", "ring"))
    assert f"{uly * 1e3:.2f} against {ring * 1e3:.2f} ms" == "2.60 against 6.09 ms" and "2.60 against 6.09 ms" in md
    assert C.attention_cost("all-to-all", cp=16, **net).exposed_s > C.attention_cost("ring", cp=16, **net).exposed_s
    assert "from cp = 32 on" not in md                                    # Ulysses cannot go beyond 32 heads
    big = PRESETS["llama3.1-405b"]
    m = C.cp_model_activation_bytes(big, seq_len=131072, cp=16, micro_batch_size=1, tp=8, sequence_parallel=True,
                                    pp=16, stage=0, num_microbatches=16)
    weights = (8 * big.layer_parameters() + big.embedding_parameters()) / 8 * 2
    assert f"{m.total / 2**30:.1f}" == "76.6" and m.total < 80 * 2**30     # the activations alone would fit
    assert f"{weights / 1e9:.1f}" == "6.9" and f"{(m.total + weights) / 1e9:.0f}" == "89"
    assert m.total + weights > 80 * 2**30 and f"{80 * 2**30 / 1e9:.1f}" == "85.9"
    assert all(x in md for x in ("76.6 GiB", "6.9 GB", "89 GB", "85.9 GB (80 GiB)"))
    assert "still above the\nH100's 80 GB" not in md
    assert '"4shp/cp"' in md and '"4sh/cp"' not in md


def test_gpu_check_verdict_uses_relative_tolerances_and_needs_the_broken_case_caught():
    import distlearn.context_parallel.lab_gpu_check as g

    good = dict(dtype="bfloat16", same_shards=True, ours_vs_sdpa=1e-2, torch_vs_sdpa=1e-2, ours_vs_torch=2e-2)
    assert g.verdict(good)
    assert not g.verdict({**good, "ours_vs_torch": 0.05})                  # beyond 3e-2 relative
    assert not g.verdict({**good, "same_shards": False})                   # PyTorch's layout is not our zig-zag
    broken = dict(good, dtype="float32", broken=True)
    assert not g.verdict(broken | {"ours_vs_torch": 5e-5})                 # a broken case that passes: not caught
    assert g.verdict(broken | {"ours_vs_torch": 0.3})
    assert g._max_err(torch.tensor([10.0, 0.0]), torch.tensor([10.0, 0.1])) == pytest.approx(0.01)


def test_lab_ring_backward_waits_for_the_gradient_hop_only_after_computing(monkeypatch):
    """The lab's backward posts the dK/dV hop and waits for it only after the next block's gradients are computed —
    the overlap ring_timeline (and PyTorch's _templated_ring_attention_backward) assume. Recorded in one process with
    a stand-in exchange (cp = 2, the 'neighbour' echoes the buffer; only the order of events is checked)."""
    import distlearn.context_parallel.lab as lab

    events = []

    class Req:
        def __init__(self, tag):
            self.tag = tag

        def wait(self):
            events.append(("wait", self.tag))

    def exchange(send, recv, group, traffic):
        recv.copy_(send)
        events.append(("post", len(events)))
        return [Req(len(events) - 1)]

    real_block = lab._block_backward

    def block(*a):
        events.append(("compute", None))
        return real_block(*a)

    monkeypatch.setattr(lab, "_exchange", exchange)
    monkeypatch.setattr(lab, "_block_backward", block)
    monkeypatch.setattr(lab.dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(lab.dist, "get_world_size", lambda group=None: 2)
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True) for _ in range(2))
    pos = lab.layout_positions(8, 2, "contiguous")
    out = lab.RingAttention.apply(q, k, v, pos, False, None, None)
    events.clear()
    out.backward(torch.ones_like(out))
    # backward, cp = 2: post K/V (0), compute block 0, post dK/dV (2), wait K/V, compute block 1, wait dK/dV, ...
    kinds = [e[0] for e in events]
    assert kinds[:4] == ["post", "compute", "post", "wait"]
    first_grad_post = events[2][1]
    wait_at = events.index(("wait", first_grad_post))
    assert events.index(("compute", None), 2) < wait_at          # block 1 computed before the dK/dV hop is awaited


def test_explorer_refuses_nvlink_beyond_one_node():
    """NVLink connects the GPUs of one node (8 H100s): tp × cp = 16 over NVLink is not a machine that exists."""
    from distlearn.context_parallel import explorer as w

    assert "error" in w.compute(cp=16, link="nvlink") and "error" in w.compute(cp=4, tp=4, link="nvlink")
    assert "NVLink" in w.compute(cp=16, link="nvlink")["error"]
    assert "error" not in w.compute(cp=8, link="nvlink") and "error" not in w.compute(cp=64, link="network")
    assert "error" not in w.compute(gpu="v100-32gb", cp=16, link="nvlink")      # DGX-2: 16 GPUs on NVSwitch


def test_figures_state_their_setup():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from distlearn.context_parallel.plots import ring_gantt, work_bars

    ax = work_bars({"zigzag": np.ones(4)}, setup=("s = 64, causal", "s = 64，因果"))
    assert "s = 64, causal" in ax.get_title()
    tl = C.ring_timeline(np.ones((2, 2)), 0.5)
    ax = ring_gantt(tl, setup=("H100, 50 GB/s", "H100，50 GB/s"))
    assert "H100, 50 GB/s" in ax.get_title()
    plt.close("all")


@pytest.mark.parametrize("lang", ["en", "zh", "both"])
def test_ring_timeline_titles_side_by_side_do_not_overlap(lang):
    """Issue 34: the chapter's two ring timelines (contiguous, zig-zag) side by side printed their long titles over
    each other (11 × 3 inches, as in the notebook). ring_gantt now breaks each title line to its axes' width."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from distlearn.context_parallel.plots import ring_gantt
    from distlearn.core.hardware import GPUS
    from distlearn.core.i18n import get_language, set_language

    h100, old = GPUS["h100-80gb"], get_language()
    set_language(lang)
    try:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3), layout="constrained")
        for ax, lay in zip(axes, ("contiguous", "zigzag")):
            c = C.attention_cost("ring", seq_len=131072, num_heads=32, num_kv_heads=8, head_dim=128, cp=4,
                                 flops=h100.peak_flops, bandwidth=h100.network_bw, layout=lay)
            ring_gantt(c.timeline, ax=ax, setup=(f"Llama 3 8B, s = 131,072, cp = 4, {lay}, forward, H100 989 TFLOP/s, 50 GB/s",
                                                f"Llama 3 8B，s = 131,072，cp = 4，{lay}（之字形），前向，H100 989 TFLOP/s，50 GB/s"))
        fig.canvas.draw()
        left, right = (ax.title.get_window_extent(fig.canvas.get_renderer()) for ax in axes)
        assert left.x1 < right.x0, (left, right)
        text = axes[0].get_title().replace("\n", " ")
        assert ("Ring steps" in text) == (lang != "zh") and ("环形各步" in text) == (lang != "en")
        assert "H100 989" in text and "50 GB/s" in text        # broken into lines, nothing lost
    finally:
        set_language(old)
        plt.close("all")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ring_diagram_draws_in_the_readers_language(lang):
    """The chapter's picture of ring attention: one panel per step, ranks as boxes, K/V blocks coloured by origin,
    arrows for the messages; every label in the reader's language."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from distlearn.context_parallel.plots import ring_diagram
    from distlearn.core.i18n import get_language, set_language

    old = get_language()
    set_language(lang)
    try:
        fig = ring_diagram(4)
        fig.canvas.draw()
        texts = [fig._suptitle.get_text(), fig._supxlabel.get_text()]
        texts += [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]
        words = " ".join(texts)
        assert len(fig.axes) == 4 and sum(len(ax.patches) for ax in fig.axes) == 4 * 4 * 3
        assert sum(1 for ax in fig.axes for c in ax.get_children() if type(c).__name__ == "Annotation") == 3 * 4
        cjk = re.search(r"[\u4e00-\u9fff]", words)
        if lang == "en":
            assert "step 3" in words and "Ring attention" in words and not cjk, words
        else:
            assert "第 3 步" in words and "环形注意力" in words and "step" not in words and "Ring" not in words, words
        held = [t.get_text() for t in fig.axes[1].texts if t.get_text().startswith("K/V")]
        assert held == ["K/V3", "K/V0", "K/V1", "K/V2"]       # step 1: rank r holds the block of rank r − 1
    finally:
        set_language(old)
        plt.close("all")


def _ulysses_texts(fig):
    """The labels of the Ulysses picture outside its cells (title, panel headers, all-to-all names, ranks, note)."""
    ax = fig.axes[0]
    return [t for t in [fig._suptitle] + ax.texts if t.get_text() and not t.get_text().isdigit()]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ulysses_diagram_draws_in_the_readers_language(lang):
    """Chapter 10's picture of DeepSpeed-Ulysses: every label in the reader's language, and no label over another."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from authoring import lang_audit as A
    from distlearn.context_parallel.plots import ulysses_diagram
    from i18n_helpers import language, overlapping_labels

    with language(lang):
        fig = ulysses_diagram(4, 8)
        fig.canvas.draw()
        texts = _ulysses_texts(fig)
        words = [t.get_text() for t in texts]
    try:
        for w in words:
            for line in w.split("\n"):
                assert A.readable(line, lang), line
        joined = " ".join(words)
        cjk = re.search(r"[\u4e00-\u9fff]", joined)
        if lang == "en":
            assert not cjk and "all-to-all" in joined and "Head shards" in joined and "a/cp = 2 heads" in joined
        else:
            assert "头分片" in joined and "a/cp = 2 个头" in joined and "AllToAll" in joined
            assert "all-to-all" not in joined and "shards" not in joined and "heads" not in joined
        assert sum(w.startswith("rank ") for w in words) == 4
        assert overlapping_labels(texts, tol=0) == []
    finally:
        plt.close(fig)


@pytest.mark.parametrize("cp, heads", [(4, 8), (2, 2), (4, 4), (8, 16)])
def test_ulysses_diagram_shows_what_the_all_to_all_does(cp, heads):
    """What each rank holds in the three panels is Jacobs et al. 2023's re-sharding: before and after, rank r has
    token block r of every head; in between, all token blocks of heads r·a/cp … (r+1)·a/cp − 1, the heads
    ulysses_heads gives each rank. Every pair of ranks exchanges one message in each all-to-all, coloured by the
    token block it carries."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex
    from distlearn.context_parallel.plots import RANK_COLORS, ulysses_diagram

    fig = ulysses_diagram(cp, heads)
    try:
        ax = fig.axes[0]
        held = {}
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith("cell:"):
                _, panel, r, h, blk = map(lambda x: int(x) if x.isdigit() else x, gid.split(":"))
                held.setdefault((panel, r), []).append((h, blk))
                assert to_hex(patch.get_facecolor()) == to_hex(RANK_COLORS[blk]).lower()
        g = C.ulysses_heads(heads, heads, cp).q_heads
        assert g == heads // cp
        for r in range(cp):
            seq = sorted((h, r) for h in range(heads))
            assert sorted(held[(0, r)]) == seq and sorted(held[(2, r)]) == seq
            assert sorted(held[(1, r)]) == sorted((h, t) for h in range(r * g, (r + 1) * g) for t in range(cp))
        arrows = {a.get_gid(): a for a in ax.texts if (a.get_gid() or "").startswith("a2a:")}
        assert len(arrows) == 2 * cp * cp
        for src in range(cp):
            for dst in range(cp):
                assert to_hex(arrows[f"a2a:0:{src}:{dst}"].arrow_patch.get_edgecolor()) == RANK_COLORS[src].lower()
                assert to_hex(arrows[f"a2a:1:{src}:{dst}"].arrow_patch.get_edgecolor()) == RANK_COLORS[dst].lower()
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kw", [dict(cp=1), dict(cp=9), dict(cp=4, num_heads=6), dict(num_heads=17),
                                dict(cp=4.0)])
def test_ulysses_diagram_refuses_what_it_cannot_draw(kw):
    from distlearn.context_parallel.plots import ulysses_diagram

    with pytest.raises(DistlearnValueError):
        ulysses_diagram(**kw)


def test_chapter_draws_ulysses_before_its_formula():
    """Issue 34: section 6 draws ulysses_diagram before its three steps and its byte formula, in both languages."""
    md = (ROOT / "notebooks" / "10_context_parallel.md").read_text(encoding="utf-8")
    picture = md.index("ulysses_diagram(4")
    assert md.index("## 6. All-to-all instead of a ring") < md.index("## 6. 用 AllToAll 代替环") < picture
    assert picture < md.index("$$\\text{Ulysses: }") and picture < md.index("$$\\text{Ulysses：}")
    assert picture < md.index("1. Before attention") and picture < md.index("1. 注意力之前")


def test_chapter_prints_the_ring_loop_before_running_it():
    """Issue 34: the hand-written ring attention on real processes was only described in prose. The chapter now
    prints RingAttention.forward right before the lab runs, with its comments in the reader's language."""
    from distlearn.context_parallel.lab import RingAttention
    from distlearn.core.i18n import get_language, set_language, source

    md = (ROOT / "notebooks" / "10_context_parallel.md").read_text(encoding="utf-8")
    listing, run = md.find("source(RingAttention.forward)"), md.find("launch.run(cp_check")
    assert 0 < listing < run
    old = get_language()
    try:
        for lang in ("en", "zh"):
            set_language(lang)
            comments = re.findall(r"#\s*(.*)", source(RingAttention.forward))
            assert len(comments) >= 5
            cjk = [bool(re.search(r"[\u4e00-\u9fff]", c)) for c in comments]
            assert all(cjk) if lang == "zh" else not any(cjk), comments
    finally:
        set_language(old)


def test_overlap_assumptions_are_stated():
    md = (ROOT / "notebooks" / "10_context_parallel.md").read_text(encoding="utf-8")
    assert "no latency term" in md and "NCCL's kernels occupy a few SMs" in md and "no contention" in md
    assert "不计延迟" in md and "没有争用" in md
