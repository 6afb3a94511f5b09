"""The real pipeline (torch.distributed.pipelining over gloo) matches a single process: loss and gradients; uneven
micro-batches crash a multi-stage pipeline; a mean loss with scale_grads=True optimises the biased mean of
micro-batch means (as distlearn.pipeline_parallel.schedules.microbatch_loss predicts), the global-count loss the full-batch mean."""
import pytest
import torch

from distlearn.core import launch
from distlearn.pipeline_parallel import lab as L


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_pipeline_matches_single_process(world_size):
    results = launch.run(L.run_all, world_size, 4, 8, timeout=180)
    rows = L.summarize(results)
    assert [r["schedule"] for r in rows] == ["gpipe", "1f1b", "interleaved-1f1b"]
    assert [r["num_stages"] for r in rows] == [world_size, world_size, 2 * world_size]
    for r in rows:
        assert r["loss_diff"] < 1e-6 and r["max_grad_diff"] < 1e-6 and r["order_matches"], r
    # torch ran each rank's forwards and backwards in exactly the order distlearn.pipeline_parallel.schedules.stage_order predicts
    from distlearn.pipeline_parallel.schedules import stage_order
    for per_rank in zip(*results):
        for r in per_rank:
            v = 2 if r["schedule"] == "interleaved-1f1b" else 1
            assert r["order"] == stage_order(r["schedule"], r["rank"], world_size, 4, v), r["schedule"]
            # broken on purpose: the recorded order tells the schedules apart, so the check above can fail (the last
            # rank alternates F and B under 1F1B but runs all forwards first under GPipe; rank 0 cannot tell them
            # apart when m <= p: its warm-up then covers all but one forward; the interleaved order is not 1F1B's)
            if r["schedule"] == "1f1b" and r["rank"] == world_size - 1:
                assert r["order"] != stage_order("gpipe", world_size - 1, world_size, 4)
            if r["schedule"] == "interleaved-1f1b" and r["rank"] == 0:
                plain = [(k, j, 0) for k, j, _ in stage_order("1f1b", 0, 2 * world_size, 4)]
                last = stage_order("interleaved-1f1b", world_size - 1, world_size, 4, 2)   # a shorter warm-up
                assert r["order"] != plain and r["order"] != last
    # every block lives on exactly one stage
    for per_rank in zip(*results):
        blocks = sorted(b for r in per_rank for chunk in r["blocks"] for b in chunk)
        assert blocks == list(range(L.NUM_LAYERS))


def test_reference_gradients_are_not_trivial():
    loss, grads = L.single_process_reference(8)
    assert loss > 0 and all(float(g.abs().max()) > 1e-6 for g in grads)


def test_stage_slices_cover_every_block():
    for n in (1, 2, 3, 4, 8):
        s = L.stage_slices(n)
        assert s[0][0] == 0 and s[-1][1] == L.NUM_LAYERS and all(a[1] == b[0] for a, b in zip(s, s[1:]))


def _per_sample_losses(batch_size):
    x, y = L.make_batch(batch_size)
    with torch.no_grad():
        return L.per_sample_loss(L.build_model()(x), y).numpy()


@pytest.mark.slow
def test_loss_normalisation_on_the_real_pipeline():
    from distlearn.pipeline_parallel.schedules import microbatch_loss

    per_rank = launch.run(L.run_both_normalisations, 2, 4, 8, timeout=180)
    mean, glob = per_rank[-1]                                      # the last stage reports the losses
    losses, w = _per_sample_losses(8), L.sample_weights(8, 4).numpy()
    assert mean["loss"] == pytest.approx(microbatch_loss(losses, 4, weights=w, normalisation="mean"), abs=1e-12)
    assert glob["loss"] == pytest.approx(microbatch_loss(losses, 4, weights=w, normalisation="global"), abs=1e-12)
    assert glob["loss"] == pytest.approx(glob["ref_loss"], abs=1e-12)
    # broken on purpose: the engine's default is not the batch mean, so the "global" simulation would fail it
    assert abs(mean["loss"] - microbatch_loss(losses, 4, weights=w, normalisation="global")) > 1e-3
    for rank_results in per_rank:
        m, g = rank_results
        assert g["max_grad_diff"] < 1e-12                          # exact full-batch gradients
        assert m["max_grad_diff"] > 1e-3                           # the mean of means is another objective


@pytest.mark.slow
def test_uneven_microbatches_crash_two_stages_and_bias_one():
    from distlearn.pipeline_parallel.schedules import microbatch_loss

    with pytest.raises(launch.WorkerError, match="size of tensor a \\(3\\) must match the size of tensor b \\(2\\)"):
        launch.run(L.run_uneven, 2, 10, 4, timeout=120)
    one = launch.run(L.run_uneven, 1, 10, 4, timeout=120)[0]    # one stage: no receive buffers, it runs
    assert one["split"] == [3, 3, 2, 2]
    assert one["loss"] == pytest.approx(microbatch_loss(_per_sample_losses(10), 4), abs=1e-12)
    assert abs(one["loss"] - one["ref_loss"]) > 1e-4 and one["max_grad_diff"] > 1e-4


# ------------------------------------------------------------------------- the global-count loss with data parallelism
def _flat(grads: dict, names) -> torch.Tensor:
    return torch.cat([grads[n].flatten() for n in names])


@pytest.mark.slow
def test_global_count_loss_under_data_parallel_averaging():
    """Issue 32 item 3. Sum over counted samples / N of the whole batch, with DDP's or FSDP2's default averaging,
    leaves the gradient at the full-batch gradient / dp; summing instead (FSDP2 ``set_gradient_divide_factor(1.0)``)
    or a loss dp times larger gives it exactly. Here dp = 3, one stage (the chapter runs dp = 2 × 2 stages and
    ``test_chapter05_stored_dp_run`` checks what it printed). A DDP comm hook that sums counts micro-batch 0 dp
    times inside torch's pipelining: its metadata forward leaves DDP expecting a backward, so DDP reduces micro-batch
    0 on its own first."""
    dp, m, batch = 3, 4, 24
    per_rank = launch.run(L.run_dp_modes, dp, L.DP_MODES, dp, m, batch, timeout=240)
    weights = L.sample_weights(batch, dp * m)
    n = float(weights.sum())
    names = L.stage_names(1, 0)
    full = _flat(L.masked_reference_grads(batch, weights, n), names)
    first_mbs = [L.dp_rows(batch, dp, d).start + j for d in range(dp) for j in range(batch // (dp * m))]
    mb0 = _flat(L.masked_reference_grads(batch, weights, n, rows=first_mbs), names)
    assert [r["num_counted"] for r in per_rank[0]] == [n] * len(L.DP_MODES)
    assert sum(r[0]["num_counted_local"] for r in per_rank) == n
    assert len({r[0]["num_counted_local"] for r in per_rank}) > 1      # the replicas count different numbers
    for rank_results in per_rank:
        by_mode = {r["mode"]: r for r in rank_results}
        for mode in ("fsdp", "ddp"):                                       # the default averaging: mean / dp
            g = by_mode[mode]["grad"]
            assert torch.allclose(by_mode[mode]["ref"], full, rtol=0, atol=0)
            assert torch.allclose(g, full / dp, rtol=1e-12, atol=1e-15), mode
            assert not torch.allclose(g, full, rtol=1e-3, atol=1e-6)
            assert by_mode[mode]["scale"] == pytest.approx(1 / dp, abs=1e-12)
        for mode in ("fsdp-sum", "fsdp-loss-x-dp", "ddp-loss-x-dp"):      # the fixes: the full-batch gradient
            assert torch.allclose(by_mode[mode]["grad"], full, rtol=1e-12, atol=1e-15), mode
            assert by_mode[mode]["scale"] == pytest.approx(1.0, abs=1e-12)
        g = by_mode["ddp-sum"]["grad"]                                     # micro-batch 0 counted dp times
        assert torch.allclose(g, full + (dp - 1) * mb0, rtol=1e-12, atol=1e-15)
        assert not torch.allclose(g, full, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_ddp_inside_the_pipeline_fails_on_the_second_step_fsdp2_does_not():
    """What the chapter's aside says of torch 2.13: DDP inside ``torch.distributed.pipelining`` stops on the
    second step (its bucket rebuild finds every gradient recorded twice); FSDP2 gives the same exact gradient on
    the second step as on the first."""
    with pytest.raises(launch.WorkerError, match="rebuilt parameter indices size is not same"):
        launch.run(L.run_dp_normalisation, 2, "ddp", 2, 4, 16, 2, timeout=120)
    again = launch.run(L.run_dp_normalisation, 2, "fsdp-sum", 2, 4, 16, 2, timeout=120)
    for r in again:
        assert torch.allclose(r["grad"], r["ref"], rtol=1e-12, atol=1e-15)


def test_fsdp2_names_the_divide_factor_as_the_chapter_does():
    """The chapter names ``set_gradient_divide_factor`` (torch 2.13) and calls ``set_reduce_scatter_divide_factor``
    its deprecated older name."""
    from torch.distributed.fsdp import FSDPModule

    assert callable(FSDPModule.set_gradient_divide_factor)
    assert "set_gradient_divide_factor" in getattr(FSDPModule.set_reduce_scatter_divide_factor, "__deprecated__", "")


# what chapter 05 prints for each data-parallel setting: (s of stage 0, s of stage 1, = full, = full / dp)
DP_TABLE = {"FSDP2, defaults: average": ("0.500", "0.500", "✗", "✓"),
            "FSDP2, set_gradient_divide_factor(1.0)": ("1.000", "1.000", "✓", "✗"),
            "FSDP2, loss divided by N / dp": ("1.000", "1.000", "✓", "✗"),
            "DDP, defaults: average": ("0.500", "0.500", "✗", "✓"),
            "DDP, loss divided by N / dp": ("1.000", "1.000", "✓", "✗"),
            "DDP, a communication hook that sums": (None, None, "✗", "✗")}


def _check_dp_table(text: str) -> None:
    """Chapter 05's stored run of ``lab.run_dp_modes`` (2 stages × dp 2, 16 samples): the count it printed is the
    one :func:`L.sample_weights` gives, and every setting's row says what the tests above establish at dp = 3."""
    import re

    weights = L.sample_weights(16, 8)
    local = [float(weights[L.dp_rows(16, 2, d)].sum()) for d in range(2)]
    assert f"N = {sum(local):g} counted samples in the whole batch ({local[0]:g} + {local[1]:g} on" in text
    for label, (s0, s1, full, over_dp) in DP_TABLE.items():
        rows = [line for line in text.splitlines() if line.startswith(label + " / ")]
        assert len(rows) == 1, label
        m = re.search(r"([0-9.]+) / ([0-9.]+)\s+([✓✗])\s+([✓✗])\s*$", rows[0])
        assert m, rows[0]
        assert (m[3], m[4]) == (full, over_dp), label
        if s0 is None:                                   # micro-batch 0 counted twice: more than the full gradient
            assert float(m[1]) > 1.01 and float(m[2]) > 1.01, label
        else:
            assert (m[1], m[2]) == (s0, s1), label


def test_chapter05_stored_dp_run():
    """Issue 32 item 3, what the chapter shows: with the default averaging the gradient is exactly half the
    full-batch gradient (dp = 2), with each fix exactly the full-batch gradient. Fed a broken copy, the check fails."""
    from stored_outputs import stored_text

    text = stored_text("05_pipeline_parallel", "lab.run_dp_modes")
    _check_dp_table(text)
    broken = [text.replace("0.500 / 0.500", "1.000 / 1.000", 1),
              text.replace("N = 9 counted", "N = 8 counted"),
              text.replace("✓                    ✗", "✓                    ✓", 1)]
    for copy in broken:
        assert copy != text
        with pytest.raises(AssertionError):
            _check_dp_table(copy)


def test_chapter05_says_how_to_turn_the_averaging_off_in_both_languages():
    """The sentence on dividing by the whole batch's count no longer stops at the all-reduce of N: both languages
    say that DDP and FSDP average again and name the three ways out."""
    from pathlib import Path

    src = (Path(__file__).resolve().parent.parent / "notebooks" / "05_pipeline_parallel.md").read_text()
    en = src[src.index("### With data parallelism, the wrapper averages again"):]
    en = en[:en.index('+++ {"tags": ["lang-zh"]}')]
    zh = src[src.index("### 有数据并行时，包装器还会再求一次平均"):]
    zh = zh[:zh.index("```{code-cell}")]
    for text in (en, zh):
        for needed in ("set_gradient_divide_factor(1.0)", "calculate_per_token_loss", r"$N/\mathrm{dp}$", "DDP",
                       "FSDP"):
            assert needed in text, needed
    assert "divided by dp" in en and "整批梯度除以 dp" in zh


# ------------------------------------------------------------------ the hand-written 1F1B (lab_1f1b)
@pytest.fixture(scope="module", params=[(2, 4, 8), (4, 8, 16)], ids=["p2-m4", "p4-m8"])
def one_f_one_b(request):
    from distlearn.pipeline_parallel.lab_1f1b import run_1f1b_check

    p, m, batch = request.param
    return launch.run(run_1f1b_check, p, m, batch, timeout=180)


@pytest.mark.slow
def test_hand_written_1f1b_equals_one_process(one_f_one_b):
    """The last stage's loss is the full-batch loss; every stage's gradients are the full-batch gradients."""
    last = one_f_one_b[-1]
    assert last["loss"] == pytest.approx(last["ref_loss"], abs=1e-12)
    assert all(r["loss"] is None for r in one_f_one_b[:-1])
    for r in one_f_one_b:
        assert r["grad_vs_one"] < 1e-12, r
        assert r["num_params"] == 2 * L.NUM_LAYERS // r["world_size"]


@pytest.mark.slow
def test_hand_written_1f1b_equals_torch_schedule1f1b(one_f_one_b):
    for r in one_f_one_b:
        assert r["grad_vs_torch"] < 1e-12, r


@pytest.mark.slow
def test_hand_written_1f1b_order_equals_simulation_and_torch(one_f_one_b):
    """Each rank ran its forwards and backwards in the order of the simulation's stage_order, which is torch's."""
    from distlearn.pipeline_parallel.schedules import stage_order

    for r in one_f_one_b:
        p, s, m = r["world_size"], r["rank"], r["num_microbatches"]
        assert r["order"] == [(k, j) for k, j, _ in stage_order("1f1b", s, p, m)], r
        assert r["order"] == r["torch_order"], r
        assert r["order"] != [(k, j) for k, j, _ in stage_order("gpipe", s, p, m)]   # not all forwards first


@pytest.mark.slow
def test_hand_written_1f1b_keeps_p_minus_s_microbatches(one_f_one_b):
    """Peak micro-batches in flight on stage s: p − s (m ≥ p), as the simulation says; GPipe would keep m."""
    from distlearn.pipeline_parallel.schedules import simulate

    p, m = one_f_one_b[0]["world_size"], one_f_one_b[0]["num_microbatches"]
    sim = simulate("1f1b", p, m).peak_inflight
    assert [r["peak_inflight"] for r in one_f_one_b] == [p - s for s in range(p)] == [int(v) for v in sim]
    assert max(r["peak_inflight"] for r in one_f_one_b) < m


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["warmup_too_long", "newest_first", "loss_not_over_m", "backward_first"])
def test_hand_written_1f1b_checks_catch_each_break(broken):
    """Broken on purpose (lab_1f1b.BREAKS): one warm-up forward too many changes the order and keeps p − s + 1
    micro-batches; backward on the newest micro-batch pairs a gradient with the wrong activation; a loss not divided
    by m gives m times the gradients; backward before forward in the steady loop fails on the last stage, which has
    nothing to differentiate yet."""
    from distlearn.pipeline_parallel.lab_1f1b import run_1f1b_check
    from distlearn.pipeline_parallel.schedules import stage_order

    if broken == "backward_first":
        with pytest.raises(launch.WorkerError, match="pop from empty list"):
            launch.run(run_1f1b_check, 2, 4, 8, broken, timeout=120)
        return
    res = launch.run(run_1f1b_check, 2, 4, 8, broken, timeout=120)
    if broken == "warmup_too_long":
        assert res[0]["order"] != [(k, j) for k, j, _ in stage_order("1f1b", 0, 2, 4)]
        assert res[0]["order"] != res[0]["torch_order"] and res[0]["peak_inflight"] == 3
    else:
        assert max(r["grad_vs_one"] for r in res) > 1e-6 and max(r["grad_vs_torch"] for r in res) > 1e-6
    if broken == "loss_not_over_m":
        assert res[-1]["loss"] == pytest.approx(4 * res[-1]["ref_loss"])
