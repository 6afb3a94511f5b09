"""distlearn.pipeline_parallel.schedules against closed forms (Narayanan et al. 2021; Korthikanti et al. 2022), edge cases, seed."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlearn.pipeline_parallel import schedules as P
from distlearn.seeds import parallelism as seeds
from distlearn.core.validate import DistlearnValueError


# ------------------------------------------------------------------ partitioning and micro-batching
def test_partition_10_on_3():
    assert P.partition_layers(10, 3) == [4, 3, 3]
    assert P.partition_layers(32, 4) == [8, 8, 8, 8]
    assert P.partition_layers(30, 4) == [8, 8, 7, 7]


@given(st.integers(1, 64), st.integers(0, 200))
def test_partition_covers_every_layer(p, extra):
    n = p + extra
    sizes = P.partition_layers(n, p)
    assert len(sizes) == p and sum(sizes) == n and max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_partition_errors():
    with pytest.raises(DistlearnValueError):
        P.partition_layers(3, 4)
    with pytest.raises(DistlearnValueError):
        P.partition_layers(8, 0)


def test_seed_drops_layers():
    # the seed uses num_layers // num_stages = 7 layers per stage for 30 layers on 4 stages: 28 layers, 2 lost
    _, total, _ = seeds.seed_simulate_pipeline_parallelism(30, 4, 4)
    assert total == (4 + 4 - 1) * 2 * 7
    assert sum(P.partition_layers(30, 4)) == 30


def test_seed_agrees_with_gpipe_when_backward_equals_forward():
    # with bwd = fwd and divisible layers, the seed's GPipe is right: this isolates its mistakes to the others
    for m in [1, 4, 8, 16, 32]:
        _, total, bubble = seeds.seed_simulate_pipeline_parallelism(32, 4, m)
        r = P.simulate("gpipe", 4, m, fwd_time=8, bwd_time=8)
        assert total == pytest.approx(r.total_time) and bubble == pytest.approx(r.bubble_fraction)


def _brute_partition(costs, p):
    """All contiguous partitions: minimal bottleneck."""
    import itertools
    n = len(costs)
    best = math.inf
    for cuts in itertools.combinations(range(1, n), p - 1):
        b = [0, *cuts, n]
        best = min(best, max(sum(costs[b[i]:b[i + 1]]) for i in range(p)))
    return best


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=9), st.integers(1, 4))
def test_partition_by_cost_is_optimal(costs, p):
    if len(costs) < p:
        with pytest.raises(DistlearnValueError):
            P.partition_by_cost(costs, p)
        return
    sizes = P.partition_by_cost(costs, p)
    assert sum(sizes) == len(costs) and min(sizes) >= 1 and len(sizes) == p
    assert max(P.stage_costs(costs, sizes)) == pytest.approx(_brute_partition(costs, p))


def test_partition_by_cost_embedding_and_head():
    # embedding ≈ 2 layers and LM head ≈ 3 layers: the end stages get fewer transformer layers
    costs = [2.0] + [1.0] * 10 + [3.0]
    sizes = P.partition_by_cost(costs, 4)
    assert sizes[0] < sizes[1] and sizes[-1] < sizes[1]
    assert max(P.stage_costs(costs, sizes)) == 4.0


def test_microbatch_sizes_never_drop_samples():
    import torch
    assert P.microbatch_sizes(10, 4) == [3, 3, 2, 2]
    # torch.chunk returns fewer chunks than asked for: the trap the course warns about
    assert len(torch.chunk(torch.arange(6), 4)) == 3
    parts = P.split_microbatches(torch.arange(6), 4)
    assert [len(x) for x in parts] == [2, 2, 1, 1] and torch.equal(torch.cat(parts), torch.arange(6))
    with pytest.raises(DistlearnValueError):
        P.microbatch_sizes(3, 4)


def test_microbatch_sizes_are_torch_pipelining_splits():
    import torch
    from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks

    for batch, m in [(10, 4), (6, 4), (8, 4), (7, 3), (5, 5)]:
        chunks, _ = split_args_kwargs_into_chunks((torch.arange(batch),), {}, m)
        assert [len(c[0]) for c in chunks] == P.microbatch_sizes(batch, m)
        assert [len(c) for c in torch.tensor_split(torch.arange(batch), m)] == P.microbatch_sizes(batch, m)


def test_microbatch_loss_mean_of_means_is_biased():
    losses = np.arange(10.0)
    # 10 samples in [3, 3, 2, 2]: means 1, 4, 6.5, 8.5 → 5.0; the batch mean is 4.5
    assert P.microbatch_loss(losses, 4) == pytest.approx(5.0)
    assert P.microbatch_loss(losses, 4, normalisation="global") == pytest.approx(4.5)
    assert P.microbatch_loss(losses[:8], 4) == pytest.approx(losses[:8].mean())   # equal sizes, all counted
    w = np.array([1, 1, 1, 0, 1, 0, 1, 0.0])
    assert P.microbatch_loss(losses[:8], 4, weights=w) == pytest.approx((0.5 + 2 + 4 + 6) / 4)
    assert P.microbatch_loss(losses[:8], 4, weights=w, normalisation="global") == pytest.approx(13 / 5)
    with pytest.raises(DistlearnValueError, match="0/0"):
        P.microbatch_loss(losses[:8], 4, weights=[1, 1, 0, 0, 1, 1, 1, 1])
    with pytest.raises(DistlearnValueError, match="normalisation"):
        P.microbatch_loss(losses, 4, normalisation="sum")


@given(st.integers(1, 500), st.integers(1, 64))
def test_microbatch_sizes_property(batch, m):
    if m > batch:
        return
    sizes = P.microbatch_sizes(batch, m)
    assert len(sizes) == m and sum(sizes) == batch and max(sizes) - min(sizes) <= 1


# ------------------------------------------------------------------ schedules
def test_1f1b_order_by_hand():
    # p = 4, stage 0, m = 6: 3 warm-up forwards, 3 steady (F, B) pairs, 3 cool-down backwards
    want = ["F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "B3", "B4", "B5"]
    assert [f"{k}{j}" for k, j, _ in P.stage_order("1f1b", 0, 4, 6)] == want
    # last stage: no warm-up, strict alternation
    assert [f"{k}{j}" for k, j, _ in P.stage_order("1f1b", 3, 4, 3)] == ["F0", "B0", "F1", "B1", "F2", "B2"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(P.SCHEDULES), st.integers(1, 8), st.integers(1, 12), st.integers(1, 4))
def test_every_op_once_and_forward_before_backward(schedule, p, m, v):
    if schedule != "interleaved-1f1b":
        v = 1
    elif v > 1 and m % max(1, m // p):
        m = max(1, m // p) * (m // max(1, m // p))
    for s in range(p):
        order = P.stage_order(schedule, s, p, m, v)
        assert sorted(order) == sorted([(k, j, c) for k in "FB" for j in range(m) for c in range(v)])
        seen = set()
        for k, j, c in order:
            if k == "B":
                assert ("F", j, c) in seen
            seen.add((k, j, c))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 1), (1, 5), (4, 1), (4, 2), (4, 4), (4, 8), (8, 3), (5, 17)])
def test_gpipe_and_1f1b_closed_form(schedule, p, m):
    tf, tb = 1.0, 2.0
    r = P.simulate(schedule, p, m, fwd_time=tf, bwd_time=tb)
    assert r.total_time == pytest.approx((m + p - 1) * (tf + tb))
    assert r.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert r.bubble_ratio == pytest.approx((p - 1) / m)
    assert list(r.busy) == pytest.approx([m * (tf + tb)] * p)
    want_peak = [m] * p if schedule == "gpipe" else [min(p - s, m) for s in range(p)]
    assert list(r.peak_inflight) == want_peak


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10), st.integers(1, 30), st.floats(0.1, 5), st.floats(0.1, 5))
def test_gpipe_equals_1f1b_time_uniform(p, m, tf, tb):
    g = P.simulate("gpipe", p, m, fwd_time=tf, bwd_time=tb)
    o = P.simulate("1f1b", p, m, fwd_time=tf, bwd_time=tb)
    assert g.total_time == pytest.approx((m + p - 1) * (tf + tb)) == pytest.approx(o.total_time)
    assert max(o.peak_inflight) <= max(g.peak_inflight)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(1, 4))
def test_interleaved_closed_form_when_m_multiple_of_p(p, k, v):
    m = k * p
    r = P.simulate("interleaved-1f1b", p, m, num_chunks=v, fwd_time=1.0, bwd_time=2.0)
    c = P.closed_form("interleaved-1f1b", p, m, num_chunks=v)
    assert r.total_time - m * 3.0 == pytest.approx((p - 1) * 3.0 / v)
    assert r.bubble_fraction == pytest.approx(c["bubble_fraction"])
    assert r.bubble_ratio == pytest.approx((p - 1) / (v * m))
    assert np.allclose(r.peak_inflight, c["peak_inflight"])


def test_interleaved_stage0_memory_korthikanti():
    # Korthikanti et al. 2022 §4.2.3: with interleaving the first stage holds p(1 + (p − 1)/(p v)) micro-batches
    p, v = 8, 4
    r = P.simulate("interleaved-1f1b", p, 4 * p, num_chunks=v)
    assert r.peak_inflight[0] == pytest.approx(p * (1 + (p - 1) / (p * v)))


def test_interleaved_with_one_chunk_is_1f1b():
    for p, m in [(4, 8), (3, 7), (4, 2)]:
        a = P.simulate("interleaved-1f1b", p, m, num_chunks=1)
        b = P.simulate("1f1b", p, m)
        assert a.total_time == pytest.approx(b.total_time)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(P.SCHEDULES), st.integers(1, 9), st.integers(1, 20), st.integers(1, 4),
       st.floats(0, 2))
def test_never_deadlocks_and_bounds(schedule, p, m, v, comm):
    """Any p, m (m < p included), v, p2p time: finishes; total ≥ ideal; bubble fraction in [0, 1)."""
    if schedule != "interleaved-1f1b":
        v = 1
    elif v > 1 and m % max(1, m // p):  # torch's rule: m a multiple of max(1, m // p)
        with pytest.raises(DistlearnValueError):
            P.simulate(schedule, p, m, num_chunks=v)
        return
    r = P.simulate(schedule, p, m, num_chunks=v, p2p_time=comm)
    assert r.total_time >= r.ideal_time - 1e-9
    assert 0 <= r.bubble_fraction < 1
    # the critical path through one micro-batch: forward and backward through every stage, plus the hops
    hops = 2 * (p * v - 1) if p > 1 else 0
    assert r.total_time >= p * 3.0 + hops * comm - 1e-9
    ev = r.events
    assert len(ev) == 2 * m * v * p
    for s in range(p):  # a stage runs one op at a time
        st_ = sorted((e.start, e.end) for e in ev if e.stage == s)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(st_, st_[1:]))


def test_dependencies_hold_in_events():
    r = P.simulate("interleaved-1f1b", 4, 6, num_chunks=2, p2p_time=0.25, fwd_time=[1, 2, 1, 1],
                   bwd_time=[2, 3, 2, 2])
    t = {(e.kind, e.stage + 4 * e.chunk, e.microbatch): e for e in r.events}
    for (k, vs, j), e in t.items():
        if k == "F" and vs > 0:
            prev = t[("F", vs - 1, j)]
            assert e.start >= prev.end + 0.25 - 1e-9
        if k == "B":
            nxt = t[("B", vs + 1, j)] if vs < 7 else t[("F", vs, j)]
            assert e.start >= nxt.end + (0.25 if vs < 7 else 0) - 1e-9


def test_per_stage_costs_slowest_stage_dominates():
    # one slow stage: steady state runs at its pace; total ≈ m · (its f + b) + the others' fill/drain
    f, b = [1, 1, 3, 1], [2, 2, 6, 2]
    r = P.simulate("1f1b", 4, 32, fwd_time=f, bwd_time=b)
    assert r.ideal_time == 32 * 9
    lower = 32 * 9 + sum(f[:2]) + sum(b[:2])  # the slow stage cannot start before stages 0–1 forward, etc.
    assert r.total_time >= lower - 1e-9
    assert r.total_time <= lower + sum(f) + sum(b)


def test_p2p_time_gpipe_closed_form():
    # GPipe with p2p latency c: the first micro-batch crosses p − 1 links forward and p − 1 backward
    p, m, c = 4, 8, 0.5
    r = P.simulate("gpipe", p, m, p2p_time=c)
    assert r.total_time == pytest.approx((m + p - 1) * 3.0 + 2 * (p - 1) * c)


def test_bad_arguments():
    with pytest.raises(DistlearnValueError):
        P.simulate("pipedream", 4, 8)
    with pytest.raises(DistlearnValueError):
        P.simulate("1f1b", 4, 8, num_chunks=2)
    with pytest.raises(DistlearnValueError):
        P.simulate("1f1b", 4, 0)
    with pytest.raises(DistlearnValueError):
        P.simulate("1f1b", 4, 8, fwd_time=[1, 2])
    with pytest.raises(DistlearnValueError):
        P.simulate("1f1b", 4, 8, bwd_time=-1)


def test_microbatch_tradeoff():
    rows = P.microbatch_tradeoff(64, 4, [1, 4, 16, 64], overhead_per_microbatch=2.0, time_per_sample=0.5)
    fr = [r["bubble_fraction"] for r in rows]
    assert fr == sorted(fr, reverse=True)  # more micro-batches, smaller bubble
    for r in rows:
        m, bsz = r["num_microbatches"], r["micro_batch_size"]
        tf = 2.0 + 0.5 * bsz
        assert r["total_time"] == pytest.approx((m + 3) * 3 * tf)
        assert r["peak_activation_samples"] == pytest.approx(min(4, m) * bsz)
    # with a per-micro-batch overhead the best m is neither the smallest nor the largest
    times = [r["total_time"] for r in rows]
    assert min(times) < times[0] and min(times) < times[-1]


def _torch_interleaved_order(rank, p, m, v):
    """torch.distributed.pipelining's own ScheduleInterleaved1F1B order for one rank (no processes needed)."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B
    sched = object.__new__(ScheduleInterleaved1F1B)
    sched.n_local_stages, sched.pp_group_size, sched._n_microbatches = v, p, m
    sched.microbatches_per_round = m // max(1, m // p)
    ops = sched._calculate_single_rank_operations(rank)
    out = []
    for a in ops:
        if a is None:
            continue
        kind = "F" if str(a.computation_type).endswith("F") or "FORWARD" in str(a.computation_type) else "B"
        out.append((kind, a.microbatch_index, a.stage_index // p))
    return out


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 4, 3), (4, 2, 2), (3, 6, 2), (4, 12, 4), (2, 1, 2)])
def test_interleaved_order_matches_torch(p, m, v):
    for s in range(p):
        assert P.stage_order("interleaved-1f1b", s, p, m, v) == _torch_interleaved_order(s, p, m, v)


def test_gpipe_unequal_stages_by_hand():
    """30 layers on 4 stages (8, 8, 7, 7), forward 1 and backward 2 per layer, m = 8 (the notebook's example).

    By hand: stages 0–1 take 8 per forward, so F_j leaves stage 1 at 8(j + 2) and reaches the end of stage 3 at
    8(j + 2) + 14; the last forward ends at 86. Stage 3 then runs 8 backwards of 14 (B_0 ends at 100), stage 2
    follows 14 later, stage 1 (16 each) starts at 114 and stage 0 (16 each) at 130: 130 + 8 · 16 = 258.
    """
    sizes = P.partition_layers(30, 4)
    r = P.simulate("gpipe", 4, 8, fwd_time=sizes, bwd_time=[2 * n for n in sizes])
    assert r.total_time == 258
    assert r.bubble_fraction == pytest.approx(1 - 8 * 3 * 30 / (4 * 258))


def test_1f1b_exposes_p2p_latency_more_than_gpipe():
    g = P.simulate("gpipe", 4, 8, p2p_time=0.1).total_time
    o = P.simulate("1f1b", 4, 8, p2p_time=0.1).total_time
    assert o > g > 33


def test_microbatch_tradeoff_best_is_in_between_notebook_case():
    rows = P.microbatch_tradeoff(64, 4, [1, 2, 4, 8, 16, 32, 64])
    best = min(rows, key=lambda r: r["total_time"])
    assert best["num_microbatches"] == 8
    # closed form with t_f = 4 + b: (m + p − 1) · 3 · (4 + b)
    for r in rows:
        assert r["total_time"] == pytest.approx((r["num_microbatches"] + 3) * 3 * (4 + r["micro_batch_size"]))


def test_too_large_is_refused_not_swapped():
    with pytest.raises(DistlearnValueError):
        P.simulate("interleaved-1f1b", 4096, 4096, num_chunks=4)


def test_interleaved_exercise_cases_are_torch_orders():
    # the ch05 checker's expected orders are torch's own ScheduleInterleaved1F1B orders, case by case
    from distlearn.pipeline_parallel.check import INTERLEAVED_CASES
    for s, p, m, v in INTERLEAVED_CASES:
        assert P.stage_order("interleaved-1f1b", s, p, m, v) == _torch_interleaved_order(s, p, m, v)
    # and they are not the plain 1F1B order (the answer the chapter prints): the exercise asks for something new
    assert all([(k, j) for k, j, _ in P.stage_order("interleaved-1f1b", s, p, m, v)]
               != [(k, j) for k, j in P.reference_1f1b_order(s, p, m)] for s, p, m, v in INTERLEAVED_CASES)


def test_figure_titles_state_the_costs_and_the_bubble_definition():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from distlearn.pipeline_parallel import plots as PP

    for schedule, v in (("1f1b", 1), ("interleaved-1f1b", 2)):
        ax = PP.gantt(P.simulate(schedule, 4, 8, num_chunks=v, fwd_time=1.5, bwd_time=3.0))
        title = ax.get_title()
        assert "t_f = 1.5, t_b = 3" in title and "idle share" in title, title
        # each shade of an interleaved schedule's chunks has its legend entry, in the colour drawn
        legend = {t.get_text(): h.get_facecolor() for t, h in zip(ax.get_legend().get_texts(),
                                                                   ax.get_legend().legend_handles)}
        chunks = [k for k in legend if k.startswith("model chunk")]
        assert len(chunks) == (v if v > 1 else 0), legend
        drawn = {tuple(np.round(c[:3], 3)) for c in ax.collections[-1].get_facecolors()}
        assert all(tuple(np.round(legend[k][:3], 3)) in drawn for k in chunks), (legend, drawn)
        plt.close(ax.figure)
    # unequal stages: no single t_f, t_b to state, so the caption states none rather than stage 0's
    uneven = P.simulate("1f1b", 4, 8, fwd_time=[1, 2, 1, 1], bwd_time=[2, 4, 2, 2])
    assert PP.cost_label(uneven) == ""
    ax = PP.bubble_vs_microbatches(4, [1, 2, 4])
    assert "idle share" in ax.get_title() and "t_f = 1, t_b = 2" in ax.get_title()
    plt.close(ax.figure)


def test_interleaved_stage0_memory_needs_enough_microbatches():
    # ch05: p + (p − 1)/v on stage 0 needs m ≥ 2p; with m = p the warm-up is capped at the m·v forwards there are
    assert P.simulate("interleaved-1f1b", 4, 8, num_chunks=2).peak_inflight[0] == pytest.approx(4 + 3 / 2)
    assert P.simulate("interleaved-1f1b", 4, 4, num_chunks=2).peak_inflight[0] == pytest.approx(4)
    assert P.closed_form("interleaved-1f1b", 4, 4, num_chunks=2)["peak_inflight"][0] == pytest.approx(4)


def test_gantt_cost_label_of_split_backward_schedules():
    """The caption reads the costs back from the events: I + W for split-backward schedules, none where an F&B block
    hides the parts (it crashed on schedules without B events)."""
    from distlearn.pipeline_parallel.plots import cost_label
    simulate = P.simulate

    assert cost_label(simulate("1f1b", 4, 8, fwd_time=1.0, bwd_time=2.0)) == "t_f = 1, t_b = 2"
    r = simulate("zb-h1", 4, 8, fwd_time=1.0, bwd_time=2.0, wgrad_time=0.5)
    assert cost_label(r) == "t_f = 1, t_b = 2 (I 1.5 + W 0.5)"
    assert cost_label(simulate("dualpipev", 4, 8, fwd_time=1.0, bwd_time=2.0, wgrad_time=0.5)) == ""
