"""distlearn.zero_fsdp.simulation against independent sources: torch.chunk, FSDP1's own FlatParamHandle._get_shard and
_recursive_wrap, closed-form parameter counts, unsharded training, the ZeRO paper's 2Ψ / 3Ψ."""
import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.zero_fsdp import simulation as fsdp
from distlearn.seeds import functions as seed_functions, parallelism as seeds
from distlearn.overlap_prefetch import timeline as overlap
from distlearn.core.comm import VirtualCluster
from distlearn.memory.formulas import model_state_bytes
from distlearn.core.models import PRESETS, build_model
from distlearn.core.validate import DistlearnValueError


# ---------------------------------------------------------------- flat parameters
@pytest.mark.parametrize("n,ws,shard,pad", [(10, 4, 3, [0, 0, 0, 2]), (5, 4, 2, [0, 0, 1, 2]), (8, 4, 2, [0] * 4),
                                            (1, 3, 1, [0, 1, 1])])
def test_padding_examples(n, ws, shard, pad):
    f = fsdp.flatten_and_shard([np.arange(1.0, n + 1)], ws)
    assert f.shard_size == shard and f.padding == pad
    assert all(s.shape == (shard,) for s in f.shards)
    if n == 5:
        assert np.all(f.shards[3] == 0)  # rank 3 holds only padding


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), ws=st.integers(1, 16))
def test_chunk_sizes_match_torch_chunk(n, ws):
    real = [c.numel() for c in torch.chunk(torch.empty(n), ws)] if n else []
    assert fsdp.chunk_sizes(n, ws) == real + [0] * (ws - len(real))


@settings(max_examples=40, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3), min_size=1, max_size=4),
       ws=st.integers(1, 8))
def test_shards_equal_fsdp1_get_shard_and_gather_restores(shapes, ws):
    from torch.distributed.fsdp._flat_param import FlatParamHandle

    rng = np.random.default_rng(0)
    params = [rng.standard_normal(s) for s in shapes]
    f = fsdp.flatten_and_shard(params, ws)
    flat = torch.cat([torch.as_tensor(p).reshape(-1) for p in params])
    for r in range(ws):
        shard, numel_to_pad = FlatParamHandle._get_shard(flat, r, ws)
        np.testing.assert_array_equal(f.shards[r], shard.numpy())
        assert f.padding[r] == numel_to_pad
    back = f.gather()
    assert [b.shape for b in back] == [np.shape(p) for p in params]
    for b, p in zip(back, params):
        np.testing.assert_array_equal(b, p)


def test_seed_flat_param_shard_keeps_padding():
    params = [torch.randn(100), torch.randn(200), torch.randn(301)]
    shards = [seeds.SeedFlatParamShard(params, 2, r) for r in range(2)]
    full = shards[0].all_gather([s.shard for s in shards])
    assert full.numel() == 602 and full[-1].item() == 0.0         # padded, one flat vector
    ours = fsdp.flatten_and_shard(params, 2)
    back = ours.gather([s.shard.numpy() for s in shards])           # same shards, padding dropped, shapes back
    assert [b.shape for b in back] == [(100,), (200,), (301,)]
    np.testing.assert_array_equal(back[2], params[2].numpy())


def test_gather_too_short_raises():
    with pytest.raises(DistlearnValueError):
        fsdp.gather_flat([np.zeros(2)], [(3,)])


# ---------------------------------------------------------------- FSDP2 per-parameter sharding
@pytest.mark.parametrize("shape", [(5, 3), (61, 16), (16,), (1, 4), (40,)])
@pytest.mark.parametrize("ws", [1, 2, 4, 8])
def test_fsdp2_local_shape_matches_torch_chunk(shape, ws):
    t = torch.empty(shape)
    chunks = list(torch.chunk(t, ws, dim=0))
    for r in range(ws):
        expected = tuple(chunks[r].shape) if r < len(chunks) else (0,) + shape[1:]
        assert fsdp.fsdp2_local_shape(shape, ws, r) == expected


def test_fsdp2_local_numel_sums_to_model():
    m = build_model(PRESETS["gpt2-small"])
    assert sum(fsdp.fsdp2_local_numel(m, 4, r) for r in range(4)) == 124_439_808


# ---------------------------------------------------------------- units and wrap policies
def _torch_wrapped(model, policy):
    import torch.distributed.fsdp.wrap as W

    names = {id(mod): n for n, mod in model.named_modules()}
    rec = []
    W._recursive_wrap(model, policy, lambda mod, **kw: rec.append(names[id(mod)]) or mod, set(), set(),
                      only_wrap_children=True)
    return rec


@pytest.mark.parametrize("min_num_params", [int(1e8), int(1e7), int(5e6), int(1e6), 10_000])
def test_size_policy_matches_torch_recursive_wrap(min_num_params):
    import torch.distributed.fsdp.wrap as W

    m = build_model(PRESETS["gpt2-small"])
    units = fsdp.wrap_units(m, "size", min_num_params=min_num_params)
    expected = _torch_wrapped(m, functools.partial(W.size_based_auto_wrap_policy, min_num_params=min_num_params))
    assert [u.name for u in units[:-1]] == expected
    assert sum(u.numel for u in units) == 124_439_808


def test_module_policy_matches_torch_and_closed_form():
    import torch.distributed.fsdp.wrap as W
    from distlearn.core.models import Block

    cfg = PRESETS["llama2-7b"]
    m = build_model(cfg)
    units = fsdp.wrap_units(m, "module")
    assert [u.name for u in units[:-1]] == _torch_wrapped(m, W.ModuleWrapPolicy({Block}))
    assert [u.numel for u in units[:-1]] == [cfg.layer_parameters()] * 32
    assert units[-1].numel == cfg.num_parameters() - 32 * cfg.layer_parameters()
    assert units[0].shard_numel(8) == -(-cfg.layer_parameters() // 8)
    rows = fsdp.unit_table(units, 8)
    assert rows[-1]["name"] == "(root)" and rows[0]["unsharded_bytes"] == 2 * cfg.layer_parameters()


def test_peak_unsharded_matches_overlap_simulation():
    m = build_model(PRESETS["gpt2-small"].with_(num_layers=4))
    units = fsdp.wrap_units(m, "size", min_num_params=1_000_000)
    inner = [u.numel for u in units[:-1]]
    for k in range(4):
        sim = overlap.simulate([1.0] * len(inner), [0.5] * len(inner), unit_bytes=[2.0 * x for x in inner],
                               include_backward=False, forward_prefetch=k)
        assert fsdp.peak_unsharded_bytes(units, 2, prefetch=k) == sim.peak_bytes + 2 * units[-1].numel
    # the peak does not shrink with more GPUs: it has no world_size at all; the shards do
    assert fsdp.unit_table(units, 64)[1]["shard_numel"] < fsdp.unit_table(units, 8)[1]["shard_numel"]


def test_tied_split_detected():
    m = build_model(PRESETS["gpt2-small"])
    assert fsdp.tied_parameter_splits(m, fsdp.wrap_units(m, "module")) == []
    split = fsdp.tied_parameter_splits(m, fsdp.wrap_units(m, "size", min_num_params=int(1e7)))
    assert len(split) == 1 and sorted(split[0]["names"]) == ["embed.weight", "lm_head.weight"]
    assert split[0]["units"] == ["embed", "lm_head"] and split[0]["owner"] == "embed"
    untied = build_model(PRESETS["llama2-7b"])
    assert fsdp.tied_parameter_splits(untied, fsdp.wrap_units(untied, "size", min_num_params=int(1e7))) == []


def test_bad_policy():
    with pytest.raises(DistlearnValueError):
        fsdp.wrap_units(build_model(PRESETS["gpt2-small"]), "layers")


# ---------------------------------------------------------------- the sharded step
def _data(widths, ws, steps, per_rank=(3, 3, 3, 3), seed=1):
    rng = np.random.default_rng(seed)
    xs = [[rng.standard_normal((per_rank[r], widths[0])) for r in range(ws)] for _ in range(steps)]
    ys = [[rng.standard_normal((per_rank[r], widths[-1])) for r in range(ws)] for _ in range(steps)]
    return xs, ys


@pytest.mark.parametrize("ws", [1, 2, 3, 4])
def test_sharded_training_equals_unsharded(ws):
    widths, steps = [5, 7, 3, 2], 5
    model = fsdp.MLPUnits(widths, seed=0)
    xs, ys = _data(widths, ws, steps)
    cluster = VirtualCluster(ws)
    trainer = fsdp.ShardedTrainer(model, cluster, lr=1e-2)
    losses = [trainer.step(xs[t], ys[t]) for t in range(steps)]
    ref_losses, ref_params = fsdp.train_unsharded(model, xs, ys, steps, lr=1e-2)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-13, atol=0)
    for unit, ref in zip(trainer.full_params(), ref_params):
        for a, b in zip(unit, ref):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
    assert not np.allclose(ref_params[0][0], model.params[0][0])  # training moved the parameters
    # traffic: 2 all-gathers + 1 reduce-scatter of every padded unit per step (3Ψ), float64
    padded = sum(f.padded_numel for f in trainer.flat)
    assert cluster.bytes_sent[0] == pytest.approx(steps * 3 * (ws - 1) / ws * padded * 8, abs=steps * 3 * 3)
    kinds = [k for (_, _, k, _) in trainer.log[: 3 * len(widths)]]
    assert kinds[:3] == ["all_gather"] * 3 and kinds[3:5] == ["all_gather", "reduce_scatter"]


def test_sharded_training_uneven_batches():
    widths = [4, 3, 2]
    model = fsdp.MLPUnits(widths, seed=3)
    xs, ys = _data(widths, 3, 3, per_rank=(1, 4, 2))
    trainer = fsdp.ShardedTrainer(model, VirtualCluster(3))
    losses = [trainer.step(xs[t], ys[t]) for t in range(3)]
    ref, _ = fsdp.train_unsharded(model, xs, ys, 3)
    np.testing.assert_allclose(losses, ref, rtol=1e-13)


def test_seed_fake_all_gather_is_wrong():
    f = fsdp.flatten_and_shard([np.arange(8.0)], 4)
    fake = seeds.seed_fake_all_gather(f.shards[0], 4)
    real = VirtualCluster(4).all_gather(f.shards)[0]
    assert fake.shape == real.shape and not np.array_equal(fake, real)
    np.testing.assert_array_equal(real, np.arange(8.0))
    sim = seeds.SeedFSDPCommunicationSim(1000, 4, 0)
    assert np.array_equal(sim.forward_step()[:250], sim.forward_step()[250:500])  # copies of its own shard
    assert np.all(sim.backward_step() == 1.0)
    assert seeds.SeedFSDPCommunicationSim(1001, 4, 0).shard_size * 4 == 1000      # one element lost


# ---------------------------------------------------------------- ZeRO stages
def test_zero_table_memory_and_comm():
    psi, dp = 7_500_000_000, 64
    rows = fsdp.zero_stage_table(psi, dp)
    # ZeRO paper Figure 1: 120, 31.4, 16.6, 1.9 GB per GPU
    assert [round(r["total"] / 1e9, 1) for r in rows] == [120.0, 31.4, 16.6, 1.9]
    assert [r["comm_psi"] for r in rows] == [2, 2, 2, 3]
    assert "FULL_SHARD" in rows[3]["fsdp"] and "SHARD_GRAD_OP" in rows[2]["fsdp"] and "NO_SHARD" in rows[0]["fsdp"]
    for r in rows:  # the Chinese names the same strategy
        assert r["fsdp"].split()[0] == r["fsdp_zh"].split("（")[0] and any("\u4e00" <= ch <= "\u9fff" or ch == "（"
                                                                         for ch in r["fsdp_zh"])


@pytest.mark.parametrize("ws", [2, 4, 8])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_step_traffic_measured_equals_formula(stage, ws):
    psi = 4096
    row = fsdp.zero_stage_table(psi, ws)[stage]
    assert fsdp.step_traffic(stage, psi, ws) == pytest.approx(row["sent_bytes_per_rank"])


def test_seed_calc_memory():
    assert seed_functions.seed_calc_memory(7, 8, "ddp") == pytest.approx(112.0)
    assert seed_functions.seed_calc_memory(7, 8, "fsdp") == pytest.approx(14.0)
    ours = model_state_bytes(7_000_000_000, dp=8, zero_stage=3, precision="fp32").total / 1e9
    assert ours == pytest.approx(seed_functions.seed_calc_memory(7, 8, "fsdp"))
    # with tp = 8 on the same 8 GPUs dp = 1: ZeRO-3 saves nothing against Ψ / tp (seed mistake 3)
    per_tp = model_state_bytes(7_000_000_000 // 8, dp=1, zero_stage=3, precision="fp32").total / 1e9
    assert per_tp == pytest.approx(14.0) and per_tp == model_state_bytes(7_000_000_000 // 8, dp=1).total * 1.0 / 1e9


# ---------------------------------------------------------------- the chapter's explorer
def test_zero_fsdp_explorer_units_and_floor():
    from distlearn.zero_fsdp import explorer as zero_fsdp

    cfg = PRESETS["llama2-7b"]
    units = fsdp.wrap_units(build_model(cfg), "module")
    root, sizes = zero_fsdp.block_units("llama2-7b", 1)
    assert sizes == [u.numel for u in units[:-1]] and root == units[-1].numel
    r8, r64 = (zero_fsdp.compute("llama2-7b", dp, 3, 1, 1) for dp in (8, 64))
    assert r8["sharded"] == model_state_bytes(cfg.num_parameters(), dp=8, zero_stage=3).total
    # the transient part (root + prefetched units + their gradients) does not shrink with dp
    assert r8["transient_peak"] == r64["transient_peak"] > 2 * root
    assert r64["sharded"] < r8["sharded"]
    assert zero_fsdp.compute("llama2-7b", 8, 0, 1, 1)["transient_peak"] == 0
