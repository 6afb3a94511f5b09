"""distlearn.overlap_prefetch.timeline: closed forms (the seed's), serial limits, stream invariants, memory price of prefetching."""
import pytest
from hypothesis import given, settings, strategies as st

from distlearn.overlap_prefetch import timeline as overlap
from distlearn.seeds import parallelism as seeds
from distlearn.core.validate import DistlearnValueError

times = st.floats(0.01, 10.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 30), f=times, g=times, k=st.integers(1, 4),
       limit=st.one_of(st.none(), st.integers(2, 6)))
def test_uniform_forward_prefetch_closed_form(n, f, g, k, limit):
    r = overlap.uniform(n, f, g, include_backward=False, forward_prefetch=k, max_inflight=limit)
    assert r.total_time == pytest.approx(g + f + (n - 1) * max(g, f), rel=1e-12)
    assert r.total_time == pytest.approx(overlap.closed_form_forward(n, f, g), rel=1e-12)
    assert r.peak_units == min(k + 1, n, limit or 99)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), f=times, g=times)
def test_seed_prefetch_simulator_agrees(n, f, g):
    seed = seeds.SeedPrefetchSimulator(n, compute_time=f, comm_time=g)
    assert overlap.uniform(n, f, g, include_backward=False).total_time == pytest.approx(seed.run_with_prefetch())
    no = overlap.uniform(n, f, g, include_backward=False, forward_prefetch=0)
    assert no.total_time == pytest.approx(seed.run_without_prefetch())
    assert no.peak_units == 1


@settings(max_examples=40, deadline=None)
@given(fw=st.lists(times, min_size=1, max_size=12), data=st.data())
def test_no_prefetch_or_limit_one_is_serial(fw, data):
    n = len(fw)
    ag = data.draw(st.lists(times, min_size=n, max_size=n))
    bw = data.draw(st.lists(times, min_size=n, max_size=n))
    rs = data.draw(st.lists(times, min_size=n, max_size=n))
    serial = sum(fw) + sum(bw) + 2 * sum(ag) + sum(rs)
    r0 = overlap.simulate(fw, ag, backward=bw, reduce_scatter=rs, forward_prefetch=0, backward_prefetch=0)
    assert r0.total_time == pytest.approx(serial)
    r1 = overlap.simulate(fw, ag, backward=bw, reduce_scatter=rs, max_inflight=1)
    # limit 1: no all-gather overlaps compute, only reduce-scatters can overlap the next all-gather's wait
    assert r1.total_time <= serial + 1e-9 and r1.peak_units == 1
    rp = overlap.simulate(fw, ag, backward=bw, reduce_scatter=rs, forward_prefetch=2, backward_prefetch=2)
    assert max(sum(fw) + sum(bw), r0.comm_time) - 1e-9 <= rp.total_time <= serial + 1e-9
    _check_invariants(rp, n)


def _check_invariants(r, n):
    for stream in ("compute", "comm"):
        ops = sorted((o for o in r.ops if o.stream == stream), key=lambda o: o.start)
        for a, b in zip(ops, ops[1:]):
            assert a.end <= b.start + 1e-9           # one op at a time per stream
    ag_end = {(o.phase, o.unit): o.end for o in r.ops if o.kind == "all_gather"}
    for o in r.ops:
        if o.stream == "compute" and (o.phase, o.unit) in ag_end:
            assert o.start >= ag_end[(o.phase, o.unit)] - 1e-9  # compute waits for its parameters
        if o.kind == "reduce_scatter":
            bwd_end = next(c.end for c in r.ops if c.kind == "backward" and c.unit == o.unit)
            assert o.start >= bwd_end - 1e-9
    assert r.memory[-1][1] == pytest.approx(0.0)  # everything unsharded is freed by the end
    assert sum(o.kind == "reduce_scatter" for o in r.ops) == n


def test_backward_prefetch_and_overlap_of_reduce_scatter():
    n, f, g = 8, 1.0, 0.5
    no = overlap.uniform(n, f, g, forward_prefetch=0, backward_prefetch=0)
    yes = overlap.uniform(n, f, g)
    assert no.total_time == pytest.approx(n * (f + 2 * f + 3 * g))
    # compute-bound (f > g, b + ... > ag + rs): with prefetch only the first all-gather and last reduce-scatter
    # are exposed in each phase
    assert yes.total_time == pytest.approx(3 * n * f + g + g + g)
    assert yes.peak_units == 2 and no.peak_units == 1
    assert yes.peak_bytes > no.peak_bytes        # the memory price of prefetching


def test_reshard_after_forward_false_is_zero2():
    r = overlap.uniform(5, 1.0, 0.4, reshard_after_forward=False)
    kinds = [o.kind for o in r.ops if o.stream == "comm"]
    assert kinds.count("all_gather") == 5 and kinds.count("reduce_scatter") == 5
    assert r.peak_units == 5                     # every unit stays unsharded from forward to backward
    full = overlap.uniform(5, 1.0, 0.4)
    assert sum(k == "all_gather" for k in (o.kind for o in full.ops)) == 10


def test_unit_bytes_memory_peak():
    sizes = [1.0, 5.0, 2.0, 7.0, 1.0]
    r = overlap.simulate([1] * 5, [1] * 5, unit_bytes=sizes, include_backward=False, forward_prefetch=1)
    assert r.peak_bytes == 9.0                   # units 2 and 3 alive together
    r = overlap.simulate([1] * 5, [1] * 5, unit_bytes=sizes, include_backward=False, forward_prefetch=0)
    assert r.peak_bytes == 7.0


@pytest.mark.parametrize("kwargs", [dict(forward=[1, 2], all_gather=[1]), dict(forward=[-1], all_gather=[1]),
                                    dict(forward=[1], all_gather=[1], max_inflight=0),
                                    dict(forward=[], all_gather=[]),
                                    dict(forward=[1], all_gather=[1], forward_prefetch=-1)])
def test_bad_input(kwargs):
    with pytest.raises(DistlearnValueError):
        overlap.simulate(**kwargs)


@settings(max_examples=60, deadline=None)
@given(fw=st.lists(times, min_size=1, max_size=15), data=st.data(), k=st.integers(0, 4))
def test_forward_matches_independent_recurrence(fw, data, k):
    """Forward only, no limit: AG_i is issued when F_{i-k} starts (k ≥ 1) or F_{i-1} ends (k = 0), runs after
    AG_{i-1}; F_i starts after F_{i-1} and AG_i. A plain recurrence, written independently of the event loop."""
    n = len(fw)
    ag = data.draw(st.lists(times, min_size=n, max_size=n))
    f_start, f_end, ag_end = [0.0] * n, [0.0] * n, [0.0] * n
    for i in range(n):
        if k == 0:
            issue = f_end[i - 1] if i else 0.0
        else:
            issue = f_start[i - k] if i - k >= 0 else 0.0
        ag_end[i] = max(issue, ag_end[i - 1] if i else 0.0) + ag[i]
        f_start[i] = max(f_end[i - 1] if i else 0.0, ag_end[i])
        f_end[i] = f_start[i] + fw[i]
    r = overlap.simulate(fw, ag, include_backward=False, forward_prefetch=k)
    assert r.total_time == pytest.approx(f_end[-1], rel=1e-12, abs=1e-12)


def test_chapter_nonuniform_example_by_hand():
    """Chapter 07's 8-unit example (unit 4's all-gather 2.4, the others 0.3, forward 1 each), derived by hand.

    Depth 1: unit 4's all-gather starts with unit 3's compute at 3.3 and ends at 5.7, then 4 computes remain:
    9.7. Depth 3: it starts with unit 1's compute at 1.3 and ends at 3.7 < 4.3, so nothing waits after unit 0:
    0.3 + 8 = 8.3, with units 1, 2, 3 and 4 (sizes 1 + 1 + 1 + 4 = 7) alive at once. A limit of 2 keeps at
    most units 3 and 4 (1 + 4 = 5) and delays the big all-gather as at depth 1: 9.7."""
    fw, ag, size = [1.0] * 8, [0.3] * 4 + [2.4] + [0.3] * 3, [1, 1, 1, 1, 4, 1, 1, 1]
    run = lambda depth, limit=None: overlap.simulate(fw, ag, unit_bytes=size, include_backward=False,
                                                     forward_prefetch=depth, max_inflight=limit)
    assert run(1).total_time == pytest.approx(9.7)
    assert (run(3).total_time, run(3).peak_bytes) == (pytest.approx(8.3), pytest.approx(7))
    assert (run(3, 2).total_time, run(3, 2).peak_bytes) == (pytest.approx(9.7), pytest.approx(5))


def test_issue_order_shows_the_prefetch_depth():
    short = lambda r: [f"{k[0] if k in ('forward', 'backward') else k[:2]}{u}" for k, u in overlap.issue_order(r)]
    fwd = dict(include_backward=False)
    assert short(overlap.uniform(3, 1.0, 0.5, forward_prefetch=0, **fwd)) == ["al0", "f0", "al1", "f1", "al2", "f2"]
    assert short(overlap.uniform(3, 1.0, 0.5, forward_prefetch=1, **fwd)) == ["al0", "al1", "f0", "al2", "f1", "f2"]
    assert short(overlap.uniform(3, 1.0, 0.5, forward_prefetch=2, **fwd)) == ["al0", "al1", "al2", "f0", "f1", "f2"]
    # a reduce-scatter is issued when its backward ends, before the next unit's prefetch and computation
    full = short(overlap.uniform(2, 1.0, 0.5))
    assert full[-5:] == ["al0", "b1", "re1", "b0", "re0"]


def test_prefetch_defaults_are_the_engines_defaults_not_depth_zero():
    """Depth 1 is what FSDP2 and FSDP1 do by default (read from torch 2.13); depth 0 is the CPU-bound worst case."""
    import inspect

    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group, _fsdp_state

    from distlearn.overlap_prefetch import explorer as view

    sig = inspect.signature(overlap.simulate).parameters
    fsdp2 = overlap.PREFETCH_MODES["fsdp2_default"]
    assert (sig["forward_prefetch"].default, sig["backward_prefetch"].default) == (fsdp2.forward, fsdp2.backward) == (1, 1)
    assert overlap.PREFETCH_MODES["cpu_bound"].kwargs()["forward_prefetch"] == 0
    # FSDP2: implicit backward prefetch of the previous unit in forward order, explicit lists only when set
    assert "_backward_prefetch" in inspect.getsource(_fsdp_param_group.FSDPParamGroup.pre_backward)
    assert "default_prefetch = len(self._states_to_backward_prefetch) == 0" in inspect.getsource(_fsdp_state)
    # FSDP1 defaults
    p = inspect.signature(FullyShardedDataParallel.__init__).parameters
    assert p["backward_prefetch"].default == BackwardPrefetch.BACKWARD_PRE
    assert p["forward_prefetch"].default is False and p["limit_all_gathers"].default is True
    assert overlap.PREFETCH_MODES["fsdp1_default"].max_inflight == 2
    # the explorer labels depth 0 as the worst case and starts at the engines' default
    assert "CPU-bound" in view.DEPTH_LABELS[0][0] and "default" in view.DEPTH_LABELS[1][0]
    assert view.controls()["depth"].value == 1
    r0 = overlap.uniform(6, 1.0, 0.6, **overlap.PREFETCH_MODES["cpu_bound"].kwargs())
    r1 = overlap.uniform(6, 1.0, 0.6, **fsdp2.kwargs())
    assert r0.exposed_comm > r1.exposed_comm


# ---------------------------------------------------------------- issue 32: the order check names every unit
def _wrong_unit(result, a, b):
    """The same simulation with the units of the forward all-gathers for units ``a`` and ``b`` swapped: a simulator
    that prefetched the wrong unit. Kinds, times and computations are untouched."""
    from dataclasses import replace

    swap = {a: b, b: a}
    return overlap.OverlapResult(
        [replace(o, unit=swap.get(o.unit, o.unit)) if (o.kind, o.phase) == ("all_gather", "forward") else o
         for o in result.ops], result.total_time, result.compute_time, result.comm_time)


def test_fsdp2_issue_order_names_every_collective_by_its_unit():
    """What the real FSDP2 lab records for 2 blocks, forward prefetch 1, written down from FSDP2's hooks
    (``_fully_shard/_fsdp_state.py``): the root's all-gather first, block 1's prefetch issued before block 0
    computes, backward all-gathers of blocks 1 and 0 (prefetch 1), each reduce-scatter after its block's backward,
    the root's reduce-scatter last."""
    sim = overlap.fsdp2_issue_order(overlap.uniform(2, 1.0, 0.5, forward_prefetch=1))
    assert sim == [("all_gather", ""), ("all_gather", "blocks.0"), ("all_gather", "blocks.1"),
                   ("forward", "blocks.0"), ("forward", "blocks.1"),
                   ("all_gather", "blocks.1"), ("all_gather", "blocks.0"), ("backward", "blocks.1"),
                   ("reduce_scatter", "blocks.1"), ("backward", "blocks.0"), ("reduce_scatter", "blocks.0"),
                   ("reduce_scatter", "")]
    assert overlap.issue_order_text(sim) == "AGR AG0 AG1 F0 F1 AG1 AG0 B1 RS1 B0 RS0 RSR"
    assert overlap.issue_order_text([("all_gather", None)]) == "AG?"
    named = overlap.fsdp2_issue_order(overlap.uniform(2, 1.0, 0.5), unit_names=["layers.0", "layers.1"], root="m")
    assert named[0] == ("all_gather", "m") and ("forward", "layers.1") in named and named[-1] == ("reduce_scatter", "m")
    with pytest.raises(DistlearnValueError, match="unit_names"):
        overlap.fsdp2_issue_order(overlap.uniform(2, 1.0, 0.5), unit_names=["a"])


def test_a_simulation_that_prefetches_the_wrong_unit_fails_the_order_check():
    """Broken on purpose: swap which unit two forward all-gathers gather. The check on (kind, unit) per event fails;
    the chapter's old check, which named only the computations, passes the broken simulation."""
    good = overlap.uniform(4, 1.0, 0.5, forward_prefetch=2)
    bad = _wrong_unit(good, 2, 3)
    assert overlap.fsdp2_issue_order(bad) != overlap.fsdp2_issue_order(good)
    old = lambda r: [(k, u if k in ("forward", "backward") else None) for k, u in overlap.issue_order(r)]
    assert old(bad) == old(good)


def test_prefetch_time_hint_guides_without_the_formula(capsys):
    """Issue 32 item 14: the hint after a wrong try (here the no-prefetch answer) must not state the closed form
    comm + compute + (n − 1)·max(comm, compute), in words or symbols, in either language."""
    from distlearn.core.check import CheckFailed
    from distlearn.core.i18n import get_language, set_language
    from distlearn.overlap_prefetch import check

    before = get_language()
    set_language("both")
    try:
        with pytest.raises(CheckFailed):
            check.ex07_prefetch_time(lambda n, compute, comm: n * (compute + comm))
    finally:
        set_language(before)
    out = capsys.readouterr().out
    hint = out[out.index("Hint:"):]
    assert "提示：" in hint
    leaked = ["max", "slower", "larger of", "greater of", "exposed", "n − 1", "n - 1", "(n", "num_units",
              "comm + compute", "compute + comm", "in between each unit",
              "较慢", "较大的", "取两者", "无法被隐藏", "中间每个单元"]
    assert not [s for s in leaked if s in hint], hint


def test_chapter07_stored_fsdp2_run_matches_the_simulation_unit_by_unit():
    """The stored run of chapter 07's real-FSDP2 cell: for every setting it printed, the real issue order, every
    collective with its unit, is the simulation's, written out again here from overlap.fsdp2_issue_order."""
    import re

    from stored_outputs import stored_text

    text = stored_text("07_overlap_prefetch", "lab.issue_orders")
    settings_ = re.findall(r"forward prefetch (\d), backward prefetch (\d), reshard_after_forward=(True|False)", text)
    real = re.findall(r"real FSDP2[^:]*: (.*)", text)
    assert len(settings_) == len(real) == 5
    for (kf, kb, reshard), line in zip(settings_, real):
        sim = overlap.fsdp2_issue_order(overlap.uniform(4, 1.0, 0.5, forward_prefetch=int(kf),
                                                        backward_prefetch=int(kb),
                                                        reshard_after_forward=reshard == "True"))
        assert line.strip() == overlap.issue_order_text(sim), (kf, kb, reshard)
        assert "AGR" in line and "AG3" in line and "RS0" in line and "?" not in line
