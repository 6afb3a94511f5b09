"""Real DTensor tensor parallelism on gloo: equal to the unsharded model (outputs, input and weight gradients, one
SGD step), its local shards equal the shards that distlearn.tensor_parallel.simulation simulates (weights and gradients), the
collectives CommDebugMode counts equal the simulation's (and a wrong simulation is caught), Partial LayerNorm
gradients are checked unreduced, and the saved activations of PyTorch's sequence-parallel plan are measured."""
import os
import subprocess
import sys

import numpy as np
import pytest

from distlearn.core import launch
from distlearn.tensor_parallel import simulation as T
from authoring.paths import ROOT
from distlearn.tensor_parallel.lab import attention_without_shared_input, tp_check

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[2, 4])
def results(request):
    return launch.run(tp_check, request.param, timeout=180)


def test_dtensor_equals_unsharded(results):
    for r in results:
        for block in ("mlp", "attention", "sp_block"):
            assert r[block]["out_err"] < 1e-12, (r["rank"], block)
            assert r[block]["grad_err"] < 1e-12, (r["rank"], block)
            assert r[block]["x_grad_err"] < 1e-12, (r["rank"], block)   # the f operator's backward all-reduce
            assert r[block]["step_err"] < 1e-12, (r["rank"], block)


def _sims(results):
    tp = len(results)
    x, g = results[0]["x"], results[0]["grad_out"]
    f = results[0]["mlp"]["full"]
    mlp = T.megatron_mlp(x, f["fc1.weight"].T, f["fc1.bias"], f["fc2.weight"].T, f["fc2.bias"], g, tp)
    f = results[0]["attention"]["full"]
    att = T.parallel_attention(x, *[f[f"{n}.weight"].T for n in "qkvo"], 4, g, tp)
    f = results[0]["sp_block"]["full"]
    sp = {scheme: T.sequence_parallel_mlp_block(x, f["ln.weight"], f["ln.bias"], f["mlp.fc1.weight"].T,
                                                f["mlp.fc1.bias"], f["mlp.fc2.weight"].T, f["mlp.fc2.bias"], g, tp,
                                                scheme=scheme) for scheme in T.SP_SCHEMES}
    return mlp, att, sp


def test_collectives_counted_by_commdebugmode_equal_simulation(results):
    mlp, att, sp = _sims(results)
    for r in results:
        assert r["mlp"]["comm"] == T.comm_counts(mlp.comm) == {"forward": {"all_reduce": 1},
                                                               "backward": {"all_reduce": 1}}
        assert r["attention"]["comm"] == T.comm_counts(att.comm)
        assert r["sp_block"]["comm"] == T.comm_counts(sp["pytorch"].comm)
        # broken on purpose: Megatron's scheme (re-gather, LN/bias all-reduce in backward) is not what torch runs
        assert r["sp_block"]["comm"] != T.comm_counts(sp["megatron"].comm)


def test_partial_layernorm_grads_are_checked_unreduced(results):
    _, _, sp = _sims(results)
    for rank, r in enumerate(results):
        blk = r["sp_block"]
        assert blk["grad_placements"]["ln.weight"] == blk["grad_placements"]["ln.bias"] == "(Partial(sum),)"
        assert blk["grad_placements"]["mlp.fc2.bias"] == "(Replicate(),)"   # from the all-gathered dY
        for scheme in T.SP_SCHEMES:   # both schemes compute the same per-rank share before reducing
            np.testing.assert_allclose(blk["local_grads"]["ln.weight"],
                                       sp[scheme].local[rank]["grad_gamma_partial"], atol=1e-12)
            np.testing.assert_allclose(blk["local_grads"]["ln.bias"],
                                       sp[scheme].local[rank]["grad_beta_partial"], atol=1e-12)
        assert blk["partial_vs_full"] > 1e-3          # a check without the reduction would fail
        assert blk["reduced_err"] < 1e-12 and blk["reduce_comm"] == {"all_reduce": 2}
        assert blk["comm"]["step"] == {"all_reduce": 2}   # in training the optimizer step reduces them


def test_sequence_parallel_layer_saves_gathered_inputs(results):
    tp = len(results)
    s, b, h = results[0]["x"].shape
    for r in results:
        lay = r["sp_layer"]
        assert lay["out_err"] < 1e-12
        kw = dict(tp=tp, gathered_bytes=2 * s * b * h * 8, replicated_bytes=s * s)   # QKV + fc1 inputs; bool mask
        assert lay["saved_bytes"] == T.sp_saved_bytes(lay["ref_saved_bytes"], scheme="pytorch", **kw)
        assert lay["saved_bytes"] != T.sp_saved_bytes(lay["ref_saved_bytes"], scheme="megatron", **kw)
        gathered = [shape for _, shape, placement in lay["saved"] if placement == "(Replicate(),)"]
        assert gathered == [(s * b, h)] * 2          # the all-gathered LN outputs, whole on every rank


def test_without_input_grad_the_f_backward_all_reduce_never_runs():
    """The old lab: x without requires_grad. Torch then skips ∂L/∂X, so the f operator's backward all-reduce that
    the simulation (and Megatron) has does not run — the count check catches such a lab."""
    r = launch.run(tp_check, 2, 8, 2, 16, 64, 4, 0, False, timeout=180)[0]
    mlp, _, _ = _sims([r, r])
    assert r["mlp"]["comm"] == {"forward": {"all_reduce": 1}}
    assert r["mlp"]["comm"] != T.comm_counts(mlp.comm)


def test_three_colwise_linears_on_a_plain_input_all_reduce_three_times():
    """Q, K, V as three ColwiseParallel linears fed a plain tensor: each converts the input, and each conversion's
    backward all-reduces its share of ∂L/∂X. The lab's PrepareModuleInput makes it one, as Megatron's f."""
    r = launch.run(attention_without_shared_input, 2, timeout=180)[0]
    assert r == {"forward": {"all_reduce": 1}, "backward": {"all_reduce": 3}}


def test_simulated_mlp_shards_equal_real_local_shards(results):
    tp = len(results)
    full, x, g = results[0]["mlp"]["full"], results[0]["x"], results[0]["grad_out"]
    sim = T.megatron_mlp(x, full["fc1.weight"].T, full["fc1.bias"], full["fc2.weight"].T, full["fc2.bias"], g, tp)
    for rank, r in enumerate(results):
        loc, lg = r["mlp"]["local"], r["mlp"]["local_grads"]
        s = sim.local[rank]
        np.testing.assert_array_equal(loc["fc1.weight"], s["w1"].T)    # ColwiseParallel: Shard(0) of weight
        np.testing.assert_array_equal(loc["fc1.bias"], s["b1"])
        np.testing.assert_array_equal(loc["fc2.weight"], s["w2"].T)    # RowwiseParallel: Shard(1) of weight
        np.testing.assert_array_equal(loc["fc2.bias"], full["fc2.bias"])  # replicated
        np.testing.assert_allclose(lg["fc1.weight"], s["grad_w1"].T, atol=1e-12)
        np.testing.assert_allclose(lg["fc1.bias"], s["grad_b1"], atol=1e-12)
        np.testing.assert_allclose(lg["fc2.weight"], s["grad_w2"].T, atol=1e-12)


def test_simulated_attention_shards_equal_real_local_shards(results):
    tp = len(results)
    full, x, g = results[0]["attention"]["full"], results[0]["x"], results[0]["grad_out"]
    ws = [full[f"{n}.weight"].T for n in "qkvo"]
    sim = T.parallel_attention(x, *ws, 4, g, tp)
    for rank, r in enumerate(results):
        for n in "qkvo":
            np.testing.assert_array_equal(r["attention"]["local"][f"{n}.weight"], sim.local[rank][f"w{n}"].T)
            np.testing.assert_allclose(r["attention"]["local_grads"][f"{n}.weight"],
                                       sim.local[rank][f"grad_w{n}"].T, atol=1e-12)


def test_local_parameter_count_matches_formula(results):
    tp = len(results)
    h, f = 16, 64
    mlp = (h * f + f) // tp + f * h // tp + h  # fc1 sharded, fc2 weight sharded, fc2 bias replicated
    for r in results:
        assert r["mlp"]["local_numel"] == mlp
        assert r["attention"]["local_numel"] == 4 * h * h // tp
    w = T.layer_weight_bytes(hidden_size=h, tp=tp, ffn_hidden_size=f, dtype_bytes=1)
    # the formula's layer = QKV (3h² + 3h) + O (h² + h) + MLP + 2 LayerNorms (4h); the lab has no attention biases
    assert w["params_per_rank"] == mlp + 4 * h * h // tp + 3 * h // tp + h + 4 * h


def test_torchrun_runs_the_lab():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "-m", "distlearn.tensor_parallel.lab"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mlp: world_size=2" in out.stdout and "attention: world_size=2" in out.stdout


def test_sequence_parallel_block_equals_simulation(results):
    tp = len(results)
    full, x, g = results[0]["sp_block"]["full"], results[0]["x"], results[0]["grad_out"]
    sim = T.sequence_parallel_mlp_block(x, full["ln.weight"], full["ln.bias"], full["mlp.fc1.weight"].T,
                                        full["mlp.fc1.bias"], full["mlp.fc2.weight"].T, full["mlp.fc2.bias"], g,
                                        tp, sequence_parallel=True)
    for rank, r in enumerate(results):
        blk = r["sp_block"]
        assert blk["out_err"] < 1e-12 and blk["grad_err"] < 1e-12
        assert blk["out_shape"] == sim.local[rank]["output"].shape == (x.shape[0] // tp,) + x.shape[1:]
        np.testing.assert_array_equal(blk["local"]["mlp.fc1.weight"], sim.local[rank]["w1"].T)
        np.testing.assert_allclose(blk["local_grads"]["mlp.fc1.weight"], sim.local[rank]["grad_w1"].T, atol=1e-12)
        np.testing.assert_allclose(blk["local_grads"]["mlp.fc2.weight"], sim.local[rank]["grad_w2"].T, atol=1e-12)


def test_simulation_equals_dtensor_value_by_value_for_every_block(results):
    """Issue 32, item 8: the chapter compares the simulation's numbers with DTensor's for the attention and the
    sequence-parallel block too, not only collective counts; a simulated attention without the causal mask (or an
    SP block that skipped the LayerNorm) fails."""
    from distlearn.tensor_parallel import lab

    tp = len(results)
    sims = lab.simulate_blocks(results[0], tp)
    agree = lab.agreement_with_simulation(results, sims)
    assert all(all(v.values()) for v in agree.values()), agree
    f = results[0]["attention"]["full"]
    sims["attention"] = T.parallel_attention(results[0]["x"], *[f[f"{n}.weight"].T for n in "qkvo"], 4,
                                             results[0]["grad_out"], tp, causal=False)
    broken = lab.agreement_with_simulation(results, sims)["attention"]
    assert not any(broken.values()), broken
    f = results[0]["sp_block"]["full"]
    sims["sp_block"] = T.sequence_parallel_mlp_block(  # the LayerNorm's gain doubled: a wrong simulation
        results[0]["x"], 2 * f["ln.weight"], f["ln.bias"], f["mlp.fc1.weight"].T, f["mlp.fc1.bias"],
        f["mlp.fc2.weight"].T, f["mlp.fc2.bias"], results[0]["grad_out"], tp, scheme="pytorch")
    assert not lab.agreement_with_simulation(results, sims)["sp_block"]["output"]


# ------------------------------------------------------------------ the hand-written f and g (lab_fg)
@pytest.fixture(scope="module", params=[2, 4])
def fg_results(request):
    from distlearn.tensor_parallel.lab_fg import fg_check

    return launch.run(fg_check, request.param, timeout=180)


def test_hand_written_fg_mlp_equals_one_process(fg_results):
    """Output, ∂L/∂X and every local gradient shard of the column → GeLU → row MLP built on f and g equal the
    unsharded MLP's (float64). Without f's backward all-reduce ∂L/∂X is one rank's share only, and this fails."""
    for r in fg_results:
        assert r["out_vs_one"] < 1e-12, r
        assert r["x_grad_vs_one"] < 1e-12, r
        assert r["grad_vs_one"] < 1e-12, r
        assert r["grad_norm"] > 1.0   # the gradients are not trivially zero


def test_hand_written_fg_mlp_equals_dtensor(fg_results):
    """The same numbers as PyTorch's engine: ColwiseParallel / RowwiseParallel on a DeviceMesh, same weights."""
    for r in fg_results:
        assert r["out_vs_dtensor"] < 1e-12, r
        assert r["x_grad_vs_dtensor"] < 1e-12, r
        assert r["grad_vs_dtensor"] < 1e-12, r


def test_hand_written_fg_runs_one_all_reduce_each_way_as_dtensor_does(fg_results):
    """Shoeybi et al. 2019, §3: one all-reduce in forward (g), one in backward (f); DTensor runs the same."""
    for r in fg_results:
        assert r["comm"] == {"forward": {"all_reduce": 1}, "backward": {"all_reduce": 1}}, r["comm"]
        assert r["dtensor_comm"] == r["comm"]


def test_hand_written_fg_shards_are_one_tp_th(fg_results):
    t = len(fg_results)
    for r in fg_results:
        assert r["shapes"] == {"fc1.weight": (64 // t, 16), "fc1.bias": (64 // t,), "fc2.weight": (16, 64 // t),
                               "fc2.bias": (16,)}


@pytest.mark.parametrize("broken", ["no_f_all_reduce", "no_g_all_reduce", "bias_before_g"])
def test_hand_written_fg_checks_catch_each_break(broken):
    """Broken on purpose (in the workers only): f without its backward all-reduce leaves ∂L/∂X one rank's share
    and no backward collective; g without its forward all-reduce leaves the output a partial sum; the row bias
    added before g is summed t times. Each is caught against one process and against DTensor."""
    from distlearn.tensor_parallel.lab_fg import fg_check

    res = launch.run(fg_check, 2, 8, 2, 16, 64, 0, broken, timeout=180)
    for r in res:
        if broken == "no_f_all_reduce":
            assert r["x_grad_vs_one"] > 1e-3 and r["x_grad_vs_dtensor"] > 1e-3
            assert r["comm"]["backward"] == {} != r["dtensor_comm"]["backward"]
        else:
            assert r["out_vs_one"] > 1e-3 and r["out_vs_dtensor"] > 1e-3
        if broken == "no_g_all_reduce":
            assert r["comm"]["forward"] == {} != r["dtensor_comm"]["forward"]
