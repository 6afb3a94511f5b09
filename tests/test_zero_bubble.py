"""Split-backward pipeline schedules (distlearn.pipeline_parallel.zero_bubble, chapter 05): orders against torch 2.13's own schedules,
timelines against the closed forms of Qi et al. 2023 and DeepSeek-V3 (Table 2), memory counts, and bad input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlearn.pipeline_parallel import schedules as P, zero_bubble as Z
from distlearn.core.validate import DistlearnValueError

TORCH = {"zb-h1": "ScheduleInterleavedZeroBubble", "interleaved-zb": "ScheduleInterleavedZeroBubble",
         "zbv": "ScheduleZBVZeroBubble", "dualpipev": "ScheduleDualPipeV"}
KIND = {"FORWARD": "F", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W", "FULL_BACKWARD": "B"}


def torch_order(schedule, rank, p, m, v):
    """torch.distributed.pipelining's own order for one rank, without processes: (kind, micro-batch, chunk)."""
    import torch.distributed.pipelining.schedules as S

    cls = getattr(S, TORCH[schedule])
    sched = object.__new__(cls)
    local = {"zb-h1": 1, "interleaved-zb": v}.get(schedule, 2)
    sched.pp_group_size, sched._n_microbatches, sched.n_local_stages = p, m, local
    sched.num_stages = sched._num_stages = p * local
    if cls.__name__ == "ScheduleInterleavedZeroBubble":
        sched.number_of_rounds = max(1, m // p)
        sched.microbatches_per_round = m // sched.number_of_rounds
    out = []
    for a in sched._calculate_single_rank_operations(rank):
        if a is None:
            continue
        for x in a.sub_actions or [a]:
            chunk = x.stage_index // p if local != 2 or schedule == "interleaved-zb" else int(x.stage_index != rank)
            out.append((KIND[x.computation_type.name], x.microbatch_index, chunk))
    return out


def _cases():
    out = []
    for p in range(1, 6):
        for m in range(1, 13):
            out.append(("zb-h1", p, m, 1))
            out.append(("zbv", p, m, 1))
            for v in (2, 3):
                if m % max(1, m // p) == 0:
                    out.append(("interleaved-zb", p, m, v))
            if m >= 2 * p:
                out.append(("dualpipev", p, m, 1))
    return out


@pytest.mark.parametrize("schedule,p,m,v", _cases())
def test_order_equals_torch(schedule, p, m, v):
    for r in range(p):
        assert P.stage_order(schedule, r, p, m, v) == torch_order(schedule, r, p, m, v)


def test_order_comparison_can_fail():
    """Break the ZB-H1 order (no W delay) once: torch's order no longer matches."""
    right = Z._zb1p_ops

    def no_delay(rank, p, m, v):
        return right(0, p, m, v) if rank == 0 else right(rank, p, m, v)[::-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Z, "_zb1p_ops", no_delay)
        assert P.stage_order("zb-h1", 1, 4, 8) != torch_order("zb-h1", 1, 4, 8, 1)
    assert P.stage_order("zb-h1", 1, 4, 8) == torch_order("zb-h1", 1, 4, 8, 1)


@settings(max_examples=150, deadline=None)
@given(p=st.integers(1, 9), m=st.integers(1, 24))
def test_zb_h1_reference_equals_rank_ops(p, m):
    for s in range(p):
        assert Z.reference_zb_h1_order(s, p, m) == [(op.kind, op.microbatch) for op in Z.rank_ops("zb-h1", s, p, m)]


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2", "interleaved-zb", "zbv", "dualpipev", "dualpipe"])
@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 12), (6, 12), (8, 16)])
def test_every_op_once_and_dependencies(schedule, p, m):
    v = 2 if schedule == "interleaved-zb" else 1
    r = P.simulate(schedule, p, m, num_chunks=v, fwd_time=1.0, bwd_time=2.5, wgrad_time=1.0, p2p_time=0.1)
    ops = {}
    for e in r.events:
        ops.setdefault((e.stage, e.chunk, e.kind), []).append(e.microbatch)
    copies = Z.chunks_per_rank(schedule, v)
    for rank in range(p):
        for c in range(copies):
            fwd = sorted(ops.get((rank, c, "F"), []) + [
                mb for (s, ch, k), mbs in ops.items() if (s, ch, k) == (rank, c, "F&B") for mb in mbs])
            n = m // 2 if schedule == "dualpipe" else m
            assert len(fwd) == n
    # busy time = m (t_f + t_b) on every rank: every micro-batch's work done once
    assert np.allclose(r.busy, m * 3.5)
    # inputs arrive before use: each op starts after the one it needs, with the p2p latency across ranks
    end = {}
    for e in sorted(r.events, key=lambda e: e.start):
        assert e.start >= 0
        end[(e.stage, e.chunk, e.kind, e.microbatch)] = e.end
    assert r.total_time == pytest.approx(max(end.values()))


@pytest.mark.parametrize("p,m", [(2, 2), (3, 5), (4, 4), (4, 8), (4, 16), (6, 9), (8, 32)])
@pytest.mark.parametrize("tf,tb,tw", [(1, 2, 1), (1, 2.5, 0.5), (2, 3, 1), (1, 1.5, 0.75)])
def test_zb_h1_closed_form_where_it_holds(p, m, tf, tb, tw):
    """Qi et al. 2023 Table 2: (p − 1)(t_f + t_I − t_W) with t_I = t_b − t_W, when t_W ≤ t_f, t_I and m ≥ p."""
    r = P.simulate("zb-h1", p, m, fwd_time=tf, bwd_time=tb, wgrad_time=tw)
    c = Z.closed_form("zb-h1", p, m, fwd_time=tf, bwd_time=tb, wgrad_time=tw)
    assert c["exact"]
    assert r.span_idle.max() == pytest.approx(c["bubble_time"])
    assert r.total_time - m * (tf + tb) == pytest.approx(c["bubble_time"])   # stage 0 starts first and ends last
    assert r.peak_inflight.tolist() == [c["peak_inflight"]] * p              # every stage holds p, as 1F1B stage 0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 18), st.sampled_from([0.25, 0.5, 1, 1.5, 2, 3]),
       st.sampled_from([0.25, 0.5, 1, 1.5, 2, 3]), st.sampled_from([0.25, 0.5, 1, 1.5, 2, 3]))
def test_zb_h1_closed_form_exact_iff_condition(p, m, tf, ti, tw):
    r = P.simulate("zb-h1", p, m, fwd_time=tf, bwd_time=ti + tw, wgrad_time=tw)
    c = Z.closed_form("zb-h1", p, m, fwd_time=tf, bwd_time=ti + tw, wgrad_time=tw)
    assert np.isclose(r.total_time - m * (tf + ti + tw), c["bubble_time"]) == c["exact"] or p == 1


def test_one_f_one_b_closed_form_split_notation():
    """1F1B's bubble (p − 1)(t_f + t_b) is Qi et al.'s (p − 1)(T_F + T_B + T_W): span idle of stage 0."""
    for p, m in [(4, 8), (6, 12)]:
        r = P.simulate("1f1b", p, m, fwd_time=1, bwd_time=2)
        assert r.span_idle[0] == pytest.approx(Z.closed_form("1f1b", p, m)["bubble_time"])


@pytest.mark.parametrize("p,m", [(2, 3), (3, 8), (4, 8), (4, 16), (6, 12), (8, 24)])
def test_zb_h2_zero_bubble_at_equal_costs(p, m):
    r = P.simulate("zb-h2", p, m, fwd_time=1, bwd_time=2, wgrad_time=1)
    c = Z.closed_form("zb-h2", p, m)
    assert c["exact"] and c["bubble_time"] == 0
    assert r.span_idle.max() == pytest.approx(0.0, abs=1e-12)
    assert r.peak_inflight[0] == c["peak_inflight"] == 2 * p - 1
    # with a flush the step still pays the start-up stagger (p − 1) t_f
    assert r.total_time - 3 * m == pytest.approx(p - 1)


def test_zb_h2_memory_limit_is_respected():
    for limit in (2, 4, 7):
        orders = Z.greedy_orders(4, 12, 1.0, 1.2, 0.8, memory_limit=limit)
        for order in orders:
            held = peak = 0
            for op in order:
                held += (op.kind == "F") - (op.kind == "W")
                peak = max(peak, held)
            assert peak <= limit


@pytest.mark.parametrize("p,m", [(2, 4), (3, 6), (4, 8), (4, 16), (6, 12), (8, 16)])
def test_zbv_zero_bubble_at_equal_costs(p, m):
    """torch's ScheduleZBVZeroBubble docstring: zero bubble iff t_f = t_I = t_W; activations like 1F1B (p)."""
    r = P.simulate("zbv", p, m, fwd_time=1, bwd_time=2, wgrad_time=1)
    c = Z.closed_form("zbv", p, m)
    assert c["exact"] and r.span_idle.max() == pytest.approx(0.0, abs=1e-12)
    assert r.peak_inflight.tolist() == [float(p)] * p
    unequal = P.simulate("zbv", p, m, fwd_time=1, bwd_time=2.5, wgrad_time=0.5)
    assert unequal.span_idle.max() > 0.1


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 16), (6, 12), (6, 24), (8, 16), (8, 32)])
def test_dualpipe_closed_form_deepseek_table(p, m):
    """DeepSeek-V3 Table 2: bubble (PP/2 − 1)(F&B + B − 3W), activations PP + 1, parameters 2×."""
    r = P.simulate("dualpipe", p, m, fwd_time=1, bwd_time=2, wgrad_time=1)
    c = Z.closed_form("dualpipe", p, m)
    assert c["exact"]
    assert r.span_idle.max() == pytest.approx(c["bubble_time"])
    assert r.peak_inflight.tolist() == [float(p + 1)] * p and r.param_copies == c["param_copies"] == 2.0
    assert Z.closed_form("zb-h1", p, m)["bubble_time"] == (p - 1) * 1  # ZB1P: (PP − 1)(F + B − 2W), B full


def test_dualpipe_closed_form_check_can_fail():
    """Break DualPipe once (all backwards full, nothing deferred): the table's bubble is missed."""
    right = Z._dualpipe_ops

    def no_split(rank, p, m):
        ops = right(rank, p, m)
        return [Z.Op("B", o.chunk, o.microbatch) if o.kind == "I" else o for o in ops if o.kind != "W"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Z, "_dualpipe_ops", no_split)
        r = P.simulate("dualpipe", 8, 16, fwd_time=1, bwd_time=2, wgrad_time=1)
    assert r.span_idle.max() != pytest.approx(Z.closed_form("dualpipe", 8, 16)["bubble_time"])


def test_dualpipev_holds_half_a_chunk_more_than_zbv():
    for p in (2, 4, 8):
        assert P.simulate("dualpipev", p, 2 * p).peak_inflight.tolist() == [p + 0.5] * p


def test_deferred_w_memory():
    """Deferring W: 1F1B's later stages hold p − s micro-batches, ZB-H1's all hold p when W keeps everything
    (torch: retain_graph), and less when only w_memory of a micro-batch stays from I to W."""
    p, m = 4, 8
    one = P.simulate("1f1b", p, m).peak_inflight.tolist()
    zb = P.simulate("zb-h1", p, m).peak_inflight.tolist()
    half = P.simulate("zb-h1", p, m, w_memory=0.5).peak_inflight.tolist()
    assert one == [4, 3, 2, 1] and zb == [4, 4, 4, 4]
    assert half[0] == pytest.approx(4.0) and half[-1] < zb[-1]


def test_torch_keeps_the_graph_until_w():
    """The default w_memory = 1 follows torch: stage_backward_input computes input gradients with retain_graph."""
    import inspect

    from torch.distributed.pipelining import _backward

    assert "retain_graph=True" in inspect.getsource(_backward.stage_backward_input)


def test_interleaved_zb_with_one_chunk_is_zb_h1():
    assert P.stage_order("interleaved-zb", 2, 4, 8, 1) == P.stage_order("zb-h1", 2, 4, 8)


def test_gantt_and_explorer_draw_split_schedules():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from distlearn.pipeline_parallel import plots as PP
    from distlearn.pipeline_parallel import explorer as W

    for schedule in Z.ZERO_BUBBLE_SCHEDULES:
        out = W.compute(schedule=schedule, num_stages=4, num_microbatches=8)
        assert "error" not in out, out
        PP.gantt(out["result"])
        plt.close("all")
    assert "error" in W.compute(schedule="dualpipe", num_stages=3, num_microbatches=8)


@pytest.mark.parametrize("kwargs", [
    dict(schedule="zbv", num_stages=4, num_microbatches=8, num_chunks=3),
    dict(schedule="dualpipe", num_stages=3, num_microbatches=6),
    dict(schedule="dualpipev", num_stages=4, num_microbatches=7),
    dict(schedule="interleaved-zb", num_stages=4, num_microbatches=9, num_chunks=2),
    dict(schedule="zb-h1", num_stages=4, num_microbatches=8, bwd_time=2.0, wgrad_time=2.0),
    dict(schedule="zb-h1", num_stages=4, num_microbatches=8, w_memory=1.5),
    dict(schedule="1f1b", num_stages=4, num_microbatches=8, wgrad_time=1.0),
])
def test_bad_arguments(kwargs):
    with pytest.raises(DistlearnValueError):
        P.simulate(**kwargs)


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1", "zb-h2", "zbv", "dualpipe"])
def test_every_closed_form_cites_its_source_in_both_languages(schedule):
    from authoring import lang_audit as A

    c = Z.closed_form(schedule, 4, 8)
    assert A.readable(c["source"], "en") and A.english_words(c["source"])
    assert A.readable(c["source_zh"], "zh") and A.CJK.search(c["source_zh"])
    import re

    def years(s):
        return sorted(re.findall(r"\b20[0-9]{2}\b", s))

    assert years(c["source"]) == years(c["source_zh"])  # the same papers cited in both


# ---------------------------------------------------------------- step after step: the optimizer step (issue 32 item 6)
STEP_CASES = [(p, m, t) for p in (2, 3, 4, 6, 8) for m in (2 * p - 1, 2 * p, 3 * p) for t in (1.0, 0.5, 2.0)]


@pytest.mark.parametrize("p,m,t", STEP_CASES)
def test_zb_h2_fills_the_bubble_into_throughput_only_without_optimizer_sync(p, m, t):
    """Equal costs t: ZB-H2's per-rank bubble is zero (Qi et al. 2023, Table 2), yet with a synchronous optimizer
    step every step lasts m·3t + (p − 1)t, ZB-H1's length at these costs; with the post-validation of §4 the
    parallelograms fit into each other and a step takes m·3t."""
    kw = dict(fwd_time=t, bwd_time=2 * t, wgrad_time=t)
    sync = Z.simulate_steps("zb-h2", p, m, 4, optimizer_sync=True, **kw)
    free = Z.simulate_steps("zb-h2", p, m, 4, optimizer_sync=False, **kw)
    for simulated, sync_flag in ((sync, True), (free, False)):
        c = Z.step_time_closed_form("zb-h2", p, m, optimizer_sync=sync_flag, **kw)
        assert c["exact"]
        assert simulated["steady_step"] == pytest.approx(c["step_time"], abs=1e-9)
    assert sync["steady_step"] == pytest.approx(3 * m * t + (p - 1) * t, abs=1e-9)
    assert free["steady_step"] == pytest.approx(3 * m * t, abs=1e-9)
    # a synchronous step is exactly one step of simulate(), repeated
    one = P.simulate("zb-h2", p, m, **kw)
    assert sync["step_ends"] == pytest.approx([(k + 1) * one.total_time for k in range(4)], abs=1e-9)
    assert sync["first_step"] == free["first_step"] == pytest.approx(one.total_time)
    zb_h1 = Z.step_time_closed_form("zb-h1", p, m, optimizer_sync=True, **kw)["step_time"]
    assert sync["steady_step"] == pytest.approx(zb_h1, abs=1e-9)


@pytest.mark.parametrize("f,b,w", [(1.0, 2.0, 1.0), (1.0, 2.5, 0.5), (2.0, 3.0, 1.0), (1.5, 2.0, 0.8)])
@pytest.mark.parametrize("p,m", [(2, 4), (3, 6), (4, 8), (6, 12), (4, 5)])
def test_zb_h1_gains_nothing_from_skipping_the_sync(f, b, w, p, m):
    """ZB-H1's rank 0 starts the step first and ends it last: with or without a synchronous optimizer step, a
    step takes m(t_f + t_b) + (p − 1)(t_f + t_I − t_W) (Qi et al. 2023, Table 2)."""
    kw = dict(fwd_time=f, bwd_time=b, wgrad_time=w)
    for sync in (True, False):
        c = Z.step_time_closed_form("zb-h1", p, m, optimizer_sync=sync, **kw)
        assert c["exact"]
        got = Z.simulate_steps("zb-h1", p, m, 3, optimizer_sync=sync, **kw)["steady_step"]
        assert got == pytest.approx(m * (f + b) + (p - 1) * (f + (b - w) - w), abs=1e-9)
        assert got == pytest.approx(c["step_time"], abs=1e-9)


def test_steps_keep_every_dependency_and_the_sync_barrier():
    """In the multi-step run every operation keeps its inputs (as in one step), and with a synchronous optimizer
    step no operation of step k starts before every operation of step k − 1 has ended; without it some do."""
    for sync in (True, False):
        out = Z.simulate_steps("zb-h2", 4, 8, 3, optimizer_sync=sync, fwd_time=1, bwd_time=2, wgrad_time=1)
        r = out["result"]
        step = r.ev_microbatch // 8
        first_start = [r.ev_start[step == k].min() for k in range(3)]
        overlaps = [first_start[k] < out["step_ends"][k - 1] - 1e-12 for k in (1, 2)]
        assert not any(overlaps) if sync else all(overlaps)
        for rank in range(4):
            s = r.ev_start[r.ev_stage == rank]
            e = r.ev_end[r.ev_stage == rank]
            assert np.all(s[1:] >= e[:-1] - 1e-12)          # one operation at a time on a rank
        assert len(r.ev_kind) == 3 * 3 * 8 * 4                 # F, I and W of 8 micro-batches, 4 ranks, 3 steps


def test_step_time_closed_form_cites_the_paper_in_both_languages():
    from authoring import lang_audit as A

    c = Z.step_time_closed_form("zb-h2", 4, 8, optimizer_sync=False, fwd_time=1, bwd_time=2, wgrad_time=1)
    assert "§4" in c["source"] and "§4" in c["source_zh"] and "Qi" in c["source"] and "Qi" in c["source_zh"]
    assert A.readable(c["source_zh"], "zh") and A.CJK.search(c["source_zh"])
    with pytest.raises(DistlearnValueError):
        Z.step_time_closed_form("zbv", 4, 8, optimizer_sync=False)
    with pytest.raises(DistlearnValueError):
        Z.simulate_steps("zb-h2", 4, 8, 0)


def test_chapter05_stored_step_table():
    """What chapter 05 prints for 4 steps in a row (p = 4, m = 8, equal costs): ZB-H2 takes 27 per step with a
    synchronous optimizer step, 24 with post-validation; ZB-H1 27 either way; every row equals the closed form."""
    import re
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stored_outputs import stored_text

    text = stored_text("05_pipeline_parallel", "Z.simulate_steps")
    kw = dict(fwd_time=1.0, bwd_time=2.0, wgrad_time=1.0)
    want = {("ZB-H1 / ZB-H1", "synchronous"): ("27, 54, 81, 108", 27),
            ("ZB-H1 / ZB-H1", "post-validation"): ("27, 54, 81, 108", 27),
            ("ZB-H2 (greedy", "synchronous"): ("27, 54, 81, 108", 27),
            ("ZB-H2 (greedy", "post-validation"): ("27, 51, 75, 99", 24)}
    for (name, sync), (ends, per_step) in want.items():
        rows = [line for line in text.splitlines() if line.startswith(name) and f" {sync} / " in line]
        assert len(rows) == 1, (name, sync)
        m = re.search(r"([0-9, ]+?)\s{2,}([0-9.]+)\s+([0-9.]+)\s*$", rows[0])
        assert m and m[1].strip() == ends and float(m[2]) == float(m[3]) == per_step, rows[0]
        sch = "zb-h1" if name.startswith("ZB-H1") else "zb-h2"
        cf = Z.step_time_closed_form(sch, 4, 8, optimizer_sync=sync == "synchronous", **kw)
        assert cf["step_time"] == per_step
