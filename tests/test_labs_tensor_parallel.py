"""Real DTensor tensor parallelism on gloo: equal to the unsharded model, and its local shards equal the shards
that distlearn.tensor_parallel simulates (weights and gradients)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from distlearn import launch, tensor_parallel as T
from distlearn.course import ROOT
from distlearn.labs.tensor_parallel import tp_check

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[2, 4])
def results(request):
    return launch.run(tp_check, request.param, timeout=180)


def test_dtensor_equals_unsharded(results):
    for r in results:
        for block in ("mlp", "attention", "sp_block"):
            assert r[block]["out_err"] < 1e-12, (r["rank"], block)
            assert r[block]["grad_err"] < 1e-12, (r["rank"], block)


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
                          "-m", "distlearn.labs.tensor_parallel"], cwd=ROOT, env=env, capture_output=True,
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
