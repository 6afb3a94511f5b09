"""torch 2.13's zero-bubble schedules (ZB-H1, interleaved ZB, ZB-V, DualPipeV) on gloo match one process (loss and
gradients) and run each rank's F / I / W / B in exactly the order of distlearn.pipeline_parallel.schedules.stage_order. The chapter
runs 2 ranks; this test runs 4."""
import pytest

from distlearn.core import launch
from distlearn.pipeline_parallel import zero_bubble as Z
from distlearn.pipeline_parallel import lab_zero_bubble as L


@pytest.mark.slow
def test_zero_bubble_schedules_match_single_process_on_4_ranks():
    results = launch.run(L.run_all, 4, 8, 16, timeout=240)
    rows = L.summarize(results)
    assert [r["schedule"] for r in rows] == list(L.SCHEDULES)
    assert [r["num_stages"] for r in rows] == [4, 8, 8, 8]
    assert rows[2]["stages_of_rank0"] == [0, 7]            # V placement: first and last stage on rank 0
    for r in rows:
        assert r["loss_diff"] < 1e-12 and r["max_grad_diff"] < 1e-12 and r["order_matches"], r
    kinds = {k for per_rank in results for r in per_rank for k, _, _ in r["order"]}
    assert kinds == {"F", "I", "W", "B"}                    # DualPipeV runs full backwards too
    # the order check can fail: with the ZB-H1 weight passes not delayed, torch's recorded order no longer matches
    right = Z._zb1p_ops
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Z, "_zb1p_ops", lambda rank, p, m, v: right(0 if rank else rank, p, m, v) if v == 1
                   else right(rank, p, m, v))
        assert not L.summarize(results)[0]["order_matches"]


def test_stage_placement():
    assert L.stages_of("zb-h1", 1, 4) == [1]
    assert L.stages_of("interleaved-zb", 1, 4) == [1, 5]
    assert L.stages_of("zbv", 1, 4) == [1, 6] == L.stages_of("dualpipev", 1, 4)


def test_torchrun_entry_gives_dualpipev_enough_microbatches(monkeypatch):
    """``torchrun --nproc-per-node 4 -m distlearn.pipeline_parallel.lab_zero_bubble`` once asked DualPipeV for 4
    microbatches on 8 stages (PyTorch refuses): the entry passes 2·world_size microbatches of 2 samples."""
    import distlearn.pipeline_parallel.lab_zero_bubble as L

    seen = []
    monkeypatch.setattr(L, "run_all", lambda rank, ws, nmb, batch: seen.append((ws, nmb, batch)) or [])
    for ws in (2, 4, 8):
        L.torchrun_entry(0, ws)
    assert seen == [(2, 4, 8), (4, 8, 16), (8, 16, 32)]
