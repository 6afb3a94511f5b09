"""Real context parallelism on gloo (distlearn.context_parallel.lab): ring attention over batch_isend_irecv and
Ulysses over all_to_all_single equal single-process scaled_dot_product_attention in outputs and gradients, and the
real engine equals the simulation (while a broken simulation does not). The chapter runs 2 and 4 ranks; these tests
run 3 ranks (an odd ring, 6 query / 3 K/V heads) and 1 rank, the memory of the lab block against the formula, and
the lab under torchrun."""
import os
import subprocess
import sys

import numpy as np
import pytest

from distlearn.context_parallel import simulation as C
from distlearn.core import launch
from distlearn.activation_memory.measure import extra_terms, measure_block
from authoring.paths import ROOT
from distlearn.context_parallel.lab import MEMORY_SHAPE as M, cp_check, cp_memory, lab_config

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
                          "-m", "distlearn.context_parallel.lab"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ring zigzag causal=True: world_size=2" in out.stdout and "block ulysses contiguous" in out.stdout


# ---------------------------------------------------------------- PyTorch's own ring attention, on gloo
TORCH_CASES = (("alltoall", "float64", True), ("allgather", "float64", True), ("allgather", "bfloat16", True),
               ("alltoall", "float64", False))


@pytest.fixture(scope="module")
def torch_ring_runs():
    """Every case on 3 ranks (an odd ring) in one launch: {case: per-rank results}."""
    from distlearn.context_parallel.lab import torch_ring_checks

    by_rank = launch.run(torch_ring_checks, 3, TORCH_CASES, 24, 2, 4, timeout=300)
    return {case: [r[i] for r in by_rank] for i, case in enumerate(TORCH_CASES)}


def _torch_ring(runs, rotate, dtype, load_balance=True):
    return runs[(rotate, dtype, load_balance)]


def test_pytorch_ring_equals_sdpa_and_the_lab_and_sends_what_the_chapter_says(torch_ring_runs):
    """PyTorch 2.13's _templated_ring_attention(_backward) with the CPU kernel, 3 ranks (odd ring), float64: equal to
    single-process SDPA and to the lab's RingAttention; what it sends per rank is the ring's K/V (cp − 1 hops) and
    cp dK/dV hops — for "alltoall" as point-to-point permutes, for "allgather" one all-gather each pass."""
    for rotate in ("alltoall", "allgather"):
        res = _torch_ring(torch_ring_runs, rotate, "float64")
        for r in res:
            assert max(r[x] for x in ("out_err", "dq_err", "dk_err", "dv_err", "lab_err")) < TOL, (rotate, r)
        r = res[0]
        block = r["block_bytes"]
        assert block == 2 * 8 * 2 * 4 * 8                                   # K and V of 8 tokens, 2 heads, d = 4
        kw = dict(seq_len=24, num_heads=2, num_kv_heads=2, head_dim=4, cp=3, dtype_bytes=8, grad_bytes=8)
        fwd, bwd = sum(b for _, b, _ in r["fwd"]), sum(b for _, b, _ in r["bwd"])
        assert fwd == C.cp_comm_bytes("ring", **kw).bytes_per_rank == C.cp_comm_bytes("all-gather", **kw).bytes_per_rank
        assert bwd == C.cp_comm_bytes("ring", **kw, pass_="backward").bytes_per_rank     # dK/dV ride the ring
        grads = [c for c in r["bwd"] if c[0] == "permute"][-3:]
        assert len(grads) == 3 and all(b == block for _, b, _ in grads)
        kinds = [c[0] for c in r["fwd"]]
        assert kinds == (["permute"] * 2 if rotate == "alltoall" else ["all_gather"])


def test_pytorch_ring_sends_float32_gradients_for_bf16(torch_ring_runs):
    """convert_to_f32 (PyTorch's default): the travelling dK/dV are float32 — TORCH_GRAD_BYTES = 4 — while K/V go
    in bf16."""
    r = _torch_ring(torch_ring_runs, "allgather", "bfloat16")[0]
    assert [c[2] for c in r["fwd"]] == ["bfloat16"]
    grads = [c for c in r["bwd"] if c[0] == "permute"]
    assert len(grads) == 3 and all(dt == "float32" and b == r["block_bytes"] * C.TORCH_GRAD_BYTES // 2
                                   for _, b, dt in grads)
    assert r["out_err"] < 3e-2 and r["lab_err"] < 3e-2


def test_pytorch_ring_comparison_can_fail(torch_ring_runs):
    """Break it on purpose: PyTorch's ring without its load balancer on head-tail shards skips the wrong blocks."""
    res = _torch_ring(torch_ring_runs, "alltoall", "float64", load_balance=False)
    assert max(r["out_err"] for r in res) > 0.1 and max(r["lab_err"] for r in res) > 0.1
