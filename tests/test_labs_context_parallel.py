"""Real context parallelism on gloo (distlearn.labs.context_parallel): ring attention over batch_isend_irecv and
Ulysses over all_to_all_single equal single-process scaled_dot_product_attention in outputs and gradients, and the
real engine equals the simulation (while a broken simulation does not). The chapter runs 2 and 4 ranks; these tests
run 3 ranks (an odd ring, 6 query / 3 K/V heads) and 1 rank, the memory of the lab block against the formula, and
the lab under torchrun."""
import os
import subprocess
import sys

import numpy as np
import pytest

from distlearn import context_parallel as C, launch
from distlearn.activation_measure import extra_terms, measure_block
from distlearn.course import ROOT
from distlearn.labs.context_parallel import MEMORY_SHAPE as M, cp_check, cp_memory, lab_config

pytestmark = pytest.mark.slow
TOL = 1e-12


@pytest.fixture(scope="module")
def three():
    # seq 24: divisible by 2·3 (zig-zag); 6 query heads and 3 K/V heads split over 3 ranks for Ulysses
    return launch.run(cp_check, 3, False, 24, 1, 6, 3, 4, 1, False, timeout=300)


def test_three_ranks_equal_single_process(three):
    for r in three:
        for case, e in r["attention"].items():
            assert max(e["out_err"], e["dq_err"], e["dk_err"], e["dv_err"]) < TOL, (r["rank"], case)
        for case, e in r["block"].items():
            assert max(e.values()) < TOL, (r["rank"], case)


def test_three_ranks_bytes_equal_the_formula(three):
    for (var, lay, causal), e in three[0]["attention"].items():
        kw = dict(seq_len=24, num_heads=6, num_kv_heads=3, head_dim=4, cp=3, micro_batch_size=1, dtype_bytes=8,
                  grad_bytes=8)
        variant = "ring" if var == "ring" else "all-to-all"
        assert e["fwd_bytes"] == C.cp_comm_bytes(variant, **kw).bytes_per_rank
        assert e["bwd_bytes"] == C.cp_comm_bytes(variant, **kw, pass_="backward").bytes_per_rank


def test_real_engine_equals_simulation_and_broken_simulation_is_caught(three):
    q, k, v, _ = three[0]["inputs"]
    for layout in ("contiguous", "zigzag", "striped"):
        for causal in (False, True):
            sim = C.ring_attention_forward(q, k, v, 3, causal=causal, layout=layout)
            bad = C.ring_attention_forward(q, k, v, 3, causal=causal, layout=layout, merge=C.averaging_merge)
            for r in three:
                lab = r["attention"][("ring", layout, causal)]["out"]
                assert np.abs(lab - sim.local[r["rank"]].out).max() < TOL
            assert max(np.abs(r["attention"][("ring", layout, causal)]["out"] - bad.local[r["rank"]].out).max()
                       for r in three) > 1e-3
    u = C.ulysses_attention(q, k, v, 3, causal=True)
    pos = C.layout_positions(24, 3, "contiguous")
    for r in three:
        assert np.abs(r["attention"][("ulysses", "contiguous", True)]["out"] - u.out[:, :, pos[r["rank"]]]).max() < TOL


def test_memory_of_the_lab_block_equals_formula_exactly():
    """cp = 1 (the chapter measures 2 and 4): the lab block keeps chapter 08's unsharded Llama block, which is the
    formula plus the RMSNorm 1/rms rows; Ulysses on 4 ranks keeps the formula plus its two named extras."""
    lab, h, a, kv = lab_config(), M["hidden"], M["heads"], M["kv_heads"]

    def formula(cp):
        return C.cp_layer_activation_bytes(lab, seq_len=M["seq_len"], cp=cp) + extra_terms(
            seq_len=M["seq_len"] // cp, micro_batch_size=1, arch="llama", attention="flash")["total"]

    one = launch.run(cp_memory, 1)[0]["total"]
    base = measure_block(seq_len=M["seq_len"], micro_batch_size=1, hidden_size=h, num_heads=a, dtype="bf16",
                         arch="llama", num_kv_heads=kv, ffn_hidden_size=M["ffn"], attention="flash").total
    assert one == base == formula(1)
    uly = launch.run(cp_memory, 4, M["seq_len"], 1, h, a, kv, M["ffn"], "ulysses", "contiguous")
    extra = C.ulysses_extra_bytes(seq_len=M["seq_len"], num_heads=a, num_kv_heads=kv, head_dim=h // a, cp=4)
    assert extra["kv_replication"] > 0 and extra["output_copy"] > 0
    assert all(r["total"] == formula(4) + extra["total"] for r in uly)


def test_torchrun_runs_the_lab():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "-m", "distlearn.labs.context_parallel"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ring zigzag causal=True: world_size=2" in out.stdout and "block ulysses contiguous" in out.stdout
