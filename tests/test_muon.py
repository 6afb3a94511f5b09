"""Muon (distlearn.zero_fsdp.muon and lab_muon): numpy against torch, Newton–Schulz against the SVD, the shardwise
misconception, the two sharded forms on real FSDP2 gloo ranks against one process, the closed-form costs against
the collectives, FLOPs and tensors the lab measures, and the bf16 stagnation rule against torch's own rounding.

Deliberate break: the "local" form (Newton–Schulz on each rank's rows) runs through the same comparison and must
fail it; a wrong traffic form must fail the count."""
import math

import numpy as np
import pytest
import torch

from distlearn.core import launch
from distlearn.core.validate import DistlearnValueError
from distlearn.zero_fsdp import lab_muon
from distlearn.zero_fsdp import muon as M

SHAPES = [(16, 16), (40, 16), (16, 40), (5, 3), (64, 64), (1, 7)]
# Muon matrices after 4 steps: the forms differ from one process only by the order of fp32 sums in the gradient
# reduce-scatter (≈ 1e-7 relative); Newton–Schulz in fp32 passes that on (numpy vs torch: ≤ 1e-6 in the update),
# and each step moves a weight by lr · 0.2·√max(A, B) ≈ 1.3e-2 times it. 4 steps: ≲ 1e-7; measured 6e-8.
TOL_MUON = 1e-6
# AdamW's parameters: the same, except the two attention key biases, whose exact gradient is 0 (a bias on every key
# adds the same q·b to every score of a query, which softmax ignores): their fp32 gradient is rounding noise, and
# AdamW divides it by its own size, so it moves them by ±lr per step in a direction set by noise.
NOISE_ONLY = ("blocks.0.attn.k.bias", "blocks.1.attn.k.bias")
TOL_ADAMW = 1e-6


def test_numpy_equals_torch():
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        g = rng.standard_normal(shape)
        np.testing.assert_allclose(M.newton_schulz_torch(torch.tensor(g, dtype=torch.float32)).numpy(),
                                   M.newton_schulz(g), atol=5e-6)
        np.testing.assert_allclose(M.newton_schulz_torch(torch.tensor(g)).numpy(), M.newton_schulz(g), atol=1e-12)


def test_singular_values_follow_the_polynomial():
    """Built from chosen singular values (not from the code under test): NS(U Σ Vᵀ) = U p⁵(Σ/‖Σ‖) Vᵀ."""
    rng = np.random.default_rng(1)
    for rows, cols in [(8, 8), (12, 5), (5, 12)]:
        k = min(rows, cols)
        u, _ = np.linalg.qr(rng.standard_normal((rows, k)))
        v, _ = np.linalg.qr(rng.standard_normal((cols, k)))
        sigma = np.geomspace(0.003, 1.0, k) * 7.0
        g = u @ np.diag(sigma) @ v.T
        a, b, c = 3.4445, -4.7750, 2.0315
        s = sigma / (np.linalg.norm(sigma) + 1e-7)
        for _ in range(5):
            s = a * s + b * s ** 3 + c * s ** 5
        np.testing.assert_allclose(M.newton_schulz(g), u @ np.diag(s) @ v.T, atol=1e-12)
        np.testing.assert_allclose(M.ns_polynomial(sigma / (np.linalg.norm(sigma) + 1e-7)), s, rtol=1e-14)


def test_the_true_range_is_not_one():
    rng = np.random.default_rng(2)
    lows, highs = [], []
    for shape in [(16, 16), (40, 16), (64, 64), (256, 1024), (100, 30)]:
        g = rng.standard_normal(shape)
        sv = np.linalg.svd(M.newton_schulz(g), compute_uv=False)
        lows.append(sv.min())
        highs.append(sv.max())
        smin = np.linalg.svd(g, compute_uv=False).min() / np.linalg.norm(g)
        band = M.ns_output_range(smin)
        assert band.low - 1e-9 <= sv.min() and sv.max() <= band.high + 1e-9
    assert 0.68 < min(lows) and 1.15 < max(highs) < 1.21    # Gaussian matrices: 0.68 to 1.16 (square ones), not 1
    r = M.ns_output_range(0.01)
    assert r.low == pytest.approx(0.6818, abs=1e-4) and r.high == pytest.approx(1.1344, abs=1e-4)
    assert M.ns_output_range(0.002).high == pytest.approx(1.2024, abs=1e-4)   # smaller inputs overshoot to 1.20
    assert M.ns_polynomial(1e-4) < 0.05                                      # and tiny ones are not raised at all


def test_scales():
    q, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((40, 16)))   # orthonormal columns: σ = 1
    rms = np.sqrt(np.mean(q ** 2))
    assert rms == pytest.approx(1 / math.sqrt(40))
    assert rms * M.update_scale(40, 16) == pytest.approx(0.2)                  # Moonlight: AdamW's RMS 0.2
    assert M.update_scale(40, 16, "keller") == pytest.approx(math.sqrt(2.5))
    assert M.update_scale(16, 40, "keller") == 1.0 and M.update_scale(3, 3, "none") == 1.0


def test_numpy_update_equals_the_lab_step():
    rng = np.random.default_rng(4)
    w, g, m = (rng.standard_normal((40, 16)) for _ in range(3))
    want = M.muon_update(g, m)
    p = torch.nn.Parameter(torch.tensor(w))
    p.grad = torch.tensor(g)
    mom = [torch.tensor(m)]
    lab_muon.muon_step([p], mom, lr=0.1, weight_decay=0.0)
    np.testing.assert_allclose(mom[0].numpy(), want.momentum, atol=1e-14)
    np.testing.assert_allclose(p.detach().numpy(), w - 0.1 * want.update, atol=1e-12)


def test_shardwise_is_not_the_whole():
    rng = np.random.default_rng(5)
    for shape in [(16, 16), (40, 16), (16, 40)]:
        g = rng.standard_normal(shape)
        whole = M.newton_schulz(g)
        np.testing.assert_allclose(M.shardwise_newton_schulz(g, 1), whole, atol=1e-15)
        for ws in (2, 4):
            wrong = M.shardwise_newton_schulz(g, ws)
            assert np.linalg.norm(wrong - whole) / np.linalg.norm(whole) > 0.2   # measured 0.28 to 0.9
    assert M.shardwise_newton_schulz(np.ones((5, 3)), 4).shape == (5, 3)      # an empty shard stays empty


def test_flops_equal_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    for shape in SHAPES:
        with FlopCounterMode(display=False) as fc:
            M.newton_schulz_torch(torch.randn(shape))
        assert fc.get_total_flops() == M.ns_flops(*shape)


def test_traffic_closed_forms_small():
    # 5 rows on 4 ranks: chunks of 2 padded rows; matrix 0 is owned by rank 0
    t = M.step_traffic([(5, 3)], 4, 0, "owner")
    assert t.elements == {"gather": 24, "scatter": 24} and t.sent == 3 * 6
    assert M.step_traffic([(5, 3)], 4, 1, "owner") == M.MuonTraffic({}, 6)
    assert M.step_traffic([(5, 3)], 4, 2, "all_gather") == M.MuonTraffic({"all_gather": 24}, 18)
    assert M.step_traffic([(5, 3)], 1, 0, "all_gather") == M.MuonTraffic({}, 0)
    total = lambda form: sum(M.step_traffic([(8, 4)] * 3, 4, r, form).sent for r in range(4))  # noqa: E731
    assert total("all_gather") == 3 * 3 * 4 * 8 and total("owner") == 3 * 2 * 3 * 8       # W/2 = 2 times less
    assert M.compute_per_rank([(4, 4)] * 3, 2, "owner") == [2 * M.ns_flops(4, 4), M.ns_flops(4, 4)]


def test_bf16_rule_equals_torch_rounding():
    rng = np.random.default_rng(6)
    ws = torch.tensor(rng.standard_normal(200) * 10.0 ** rng.integers(-3, 3, 200), dtype=torch.bfloat16)
    ws = torch.cat([ws, torch.tensor([1.0, -1.0, 2.0, 0.5, 1.0078125, 3.0], dtype=torch.bfloat16)])
    for w in ws.tolist():
        ulp = M.bf16_ulp(w)
        for k in range(-9, 10):
            delta = k * ulp / 8                                   # exact in fp32, around both ulp/2 ties
            got = (torch.tensor(w, dtype=torch.float32) + delta).to(torch.bfloat16).item() == w
            assert M.bf16_stagnates(w, delta) == got, (w, delta)
    assert M.bf16_ulp(1.0) == 2 ** -7
    assert torch.tensor(0.999, dtype=torch.bfloat16).item() == 1.0               # β₂ = 0.999 is 1 in bf16


def test_bf16_stagnation_demo():
    w16, w32 = torch.tensor(1.0, dtype=torch.bfloat16), torch.tensor(1.0)
    for _ in range(1000):
        w16 -= 1e-3
        w32 -= 1e-3
    assert w16.item() == 1.0 and abs(w32.item()) < 1e-4
    assert M.bf16_stagnates(1.0, -1e-3) and not M.bf16_stagnates(1.0, -3e-3)


def test_boundaries():
    with pytest.raises(DistlearnValueError):
        M.newton_schulz(np.ones(4))
    with pytest.raises(DistlearnValueError):
        M.step_traffic([(4, 4)], 2, 2, "owner")
    with pytest.raises(DistlearnValueError):
        M.muon_update(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(DistlearnValueError):
        M.bf16_ulp(0.0)


def _max_diff(result, ref, names):
    return max((result["params"][n] - ref["params"][n]).abs().max().item() for n in names)


def check_against_reference(result, ref):
    """Raise AssertionError unless ``result`` reproduces one-process Muon within the stated tolerances."""
    muon_names = [n for n, p in ref["params"].items() if p.ndim == 2 and n not in lab_muon.ADAMW_NAMES]
    others = [n for n in ref["params"] if n not in muon_names and n not in NOISE_ONLY]
    assert len(muon_names) == 12
    assert _max_diff(result, ref, muon_names) < TOL_MUON, _max_diff(result, ref, muon_names)
    assert _max_diff(result, ref, others) < TOL_ADAMW
    assert result["losses"] == pytest.approx(ref["losses"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_sharded_forms_on_fsdp2(world_size):
    ref = lab_muon.train_reference()
    res = launch.run(lab_muon.all_forms, world_size, timeout=300)
    assert ref["flops"] == sum(M.ns_flops(*s) for s in ref["muon_shapes"])
    for rank, r in enumerate(res):
        for form in ("all_gather", "owner"):
            got = r[form]
            check_against_reference(got, ref)
            want = M.step_traffic(got["muon_shapes"], world_size, rank, form)
            assert got["elements"] == want.elements
            assert got["flops"] == M.compute_per_rank(got["muon_shapes"], world_size, form)[rank]
            assert got["state_bytes"] == M.optimizer_state_bytes(got["muon_shapes"], got["adamw_shapes"],
                                                                 world_size, rank)
        other = "owner" if form == "all_gather" else "all_gather"
        assert r["owner"]["elements"] != M.step_traffic(r["owner"]["muon_shapes"], world_size, rank, other).elements
        # the deliberate break: Newton–Schulz on each rank's rows alone fails the same comparison
        with pytest.raises(AssertionError):
            check_against_reference(r["local"], ref)
        assert _max_diff(r["local"], ref, ["blocks.0.mlp.up.weight"]) > 1e-3


def _sent_by_hand(shapes, ws, rank, form):                 # written from the lab's collectives, not from muon.py
    total = 0
    for i, (rows, cols) in enumerate(shapes):
        shard = -(-rows // ws) * cols
        if ws == 1:
            continue
        if form == "all_gather":
            total += (ws - 1) * shard
        else:
            total += (ws - 1) * shard if i % ws == rank else shard
    return total


def test_traffic_checker_accepts_a_hand_answer_and_rejects_wrong_ones(capsys):
    from distlearn.core.check import CheckFailed
    from distlearn.zero_fsdp import check as ch06

    ch06.ex06_muon_traffic(_sent_by_hand)
    assert capsys.readouterr().out.startswith("✓")
    def unpadded(shapes, ws, rank, form):                   # rows / W instead of ⌈rows / W⌉
        if ws == 1:
            return 0
        return sum(((ws - 1) if form == "all_gather" or i % ws == rank else 1) * rows * cols // ws
                   for i, (rows, cols) in enumerate(shapes))

    everyone_scatters = lambda s, ws, r, f: _sent_by_hand(s, ws, r, "all_gather")  # noqa: E731
    for wrong in (unpadded, everyone_scatters):
        with pytest.raises(CheckFailed):
            ch06.ex06_muon_traffic(wrong)


def test_split_counts_every_parameter():
    """The split's shapes add up to the course's own parameter count, and the tiny GPT's split is the lab's."""
    from distlearn.core.models import build_model, get_preset
    from distlearn.zero_fsdp.lab import tiny_config

    for name in ("llama3-8b", "llama2-7b"):
        cfg = get_preset(name)
        s = M.split_parameters(cfg)
        assert sum(math.prod(x) for x in s.muon + s.adamw) == cfg.num_parameters()
    model = build_model(tiny_config())
    muon, adamw = lab_muon.split_parameters(model)
    s = M.split_parameters(tiny_config())
    assert [tuple(p.shape) for _, p in muon] == s.muon
    assert sorted(tuple(p.shape) for _, p in adamw) == sorted(s.adamw)
