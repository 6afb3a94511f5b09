"""Chapter 13's arithmetic against its sources: Young 1974's interval, Daly 2006's higher-order interval (and the
values of his Figures 3–5), a brute-force optimum of the expected goodput, Lambert's W, a Monte Carlo replay of
failures, the Llama 3 figures; and the exact-resume rule against the real resume experiment."""
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn.core import check
from distlearn.fault_tolerance import goodput as ft, resume
from distlearn.core.validate import DistlearnValueError


# ---------------------------------------------------------------- MTBF
def test_job_mtbf_is_unit_mtbf_over_n():
    assert ft.job_mtbf_hours(1, 1 / 365) == pytest.approx(365 * 24)
    assert ft.job_mtbf_hours(1000, 1 / 365) == pytest.approx(365 * 24 / 1000)
    assert ft.job_failures_per_day(16384, 1e-3) == pytest.approx(16.384)


def test_llama3_figures():
    # Dubey et al. 2024, §3.3.4: 419 unexpected interruptions in a 54-day snapshot on 16,384 H100 GPUs
    rate = ft.rate_per_unit_day(419, 54, 16384)
    assert rate * 54 * 16384 == pytest.approx(419)
    assert ft.job_mtbf_hours(16384, rate) == pytest.approx(54 * 24 / 419)   # 3.09 h (our arithmetic, not a quote)
    assert 3.0 < ft.job_mtbf_hours(16384, rate) < 3.2


# ---------------------------------------------------------------- Young and Daly
def _golden_max(f, lo, hi, iters=200):
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    for _ in range(iters):
        if f(c) > f(d):
            b, d = d, c
            c = b - g * (b - a)
        else:
            a, c = c, d
            d = a + g * (b - a)
    return (a + b) / 2


def _brute_force_optimum(delta, m, r=0.0):
    """Dense log grid, then golden-section refinement around the best grid point."""
    taus = np.geomspace(1e-6 * m, 10 * m, 20001)
    vals = [ft.goodput(float(t), delta, r, m) for t in taus]
    i = int(np.argmax(vals))
    return _golden_max(lambda t: ft.goodput(t, delta, r, m), float(taus[max(i - 1, 0)]), float(taus[i + 1]))


def test_young_is_the_formula_and_the_first_order_optimum():
    assert ft.young_interval(5, 1440) == pytest.approx(120.0)   # sqrt(2·5·1440)
    for delta, m in [(5, 1440), (0.05, 185.6), (1, 10)]:
        best = _golden_max(lambda t: ft.goodput_first_order(t, delta, 0.0, m), 1e-6, 10 * m)
        assert best == pytest.approx(ft.young_interval(delta, m), rel=1e-7)


def _daly_as_printed(delta, m):
    """Daly 2006's higher-order estimate as the paper writes it:
    τ_opt = sqrt(2δM)[1 + (1/3)(δ/2M)^{1/2} + (1/9)(δ/2M)] − δ for δ < 2M, τ_opt = M for δ ≥ 2M."""
    if delta < 2 * m:
        return (2 * delta * m) ** 0.5 * (1 + (1 / 3) * (delta / (2 * m)) ** 0.5 + (1 / 9) * (delta / (2 * m))) - delta
    return m


@pytest.mark.parametrize("delta, m", [(5, 1440), (5, 360), (5, 15), (1, 1), (3, 1), (0.01, 100)])
def test_daly_matches_the_paper_form(delta, m):
    assert ft.daly_interval(delta, m) == pytest.approx(_daly_as_printed(delta, m), rel=1e-12)


def test_daly_figures_3_to_5():
    # Daly 2006, Figs. 3–5: R = 10 min, δ = 5 min; M = 24 h → 117 min, M = 6 h → 57 min, M = 15 min → 9.1 min
    assert round(ft.daly_interval(5, 24 * 60)) == 117
    assert round(ft.daly_interval(5, 6 * 60)) == 57
    assert round(ft.daly_interval(5, 15), 1) == 9.1


@pytest.mark.parametrize("x", [-1 / math.e, -0.367, -0.3, -1e-3, -1e-12, 1e-9, 0.5, 1.0, math.e, 10.0, 1e5])
def test_lambert_w0(x):
    w = ft.lambert_w0(x)
    assert w >= -1.0
    assert w * math.exp(w) == pytest.approx(x, rel=1e-12, abs=1e-15)


def test_lambert_w0_known_values():
    assert ft.lambert_w0(0.0) == 0.0
    assert ft.lambert_w0(math.e) == pytest.approx(1.0, rel=1e-14)
    assert ft.lambert_w0(-1 / math.e) == pytest.approx(-1.0, abs=1e-7)
    assert ft.lambert_w0(-math.log(2) / 2) == pytest.approx(-math.log(2), rel=1e-13)   # W(−ln2/2) = −ln 2


@pytest.mark.parametrize("delta, m, r", [(5, 1440, 10), (5, 360, 10), (5, 15, 10), (0.05, 185.6, 10),
                                         (1, 1, 0), (0.3, 1, 2)])
def test_exact_optimum_is_the_brute_force_optimum(delta, m, r):
    opt = ft.optimal_interval(delta, m)
    assert opt == pytest.approx(_brute_force_optimum(delta, m, r), rel=1e-6)
    assert math.exp((opt + delta) / m) * (1 - opt / m) == pytest.approx(1.0, rel=1e-12)   # first-order condition


@pytest.mark.parametrize("xi, bound", [(1e-4, 1e-7), (1e-3, 1e-6), (1e-2, 2e-5), (0.1, 1e-3), (1.0, 0.02)])
def test_daly_is_close_to_the_exact_optimum_and_young_overshoots(xi, bound):
    m = 1.0
    opt = ft.optimal_interval(xi * m, m)
    assert abs(ft.daly_interval(xi * m, m) - opt) / opt < bound
    assert ft.young_interval(xi * m, m) > opt


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 1.5), st.floats(0.0, 2.0))
def test_goodput_is_highest_at_the_optimum(xi, r):
    m = 1.0
    p = ft.plan(xi, r, m)
    assert p.goodput_optimum >= max(p.goodput_young, p.goodput_daly) - 1e-15
    for factor in (0.5, 0.9, 1.1, 2.0):
        assert ft.goodput(p.optimum * factor, xi, r, m) <= p.goodput_optimum + 1e-15


# ---------------------------------------------------------------- the complete model against a replay
def test_goodput_is_daly_wall_time_typed_from_the_paper():
    # T_w = M e^{R/M} (e^{(τ+δ)/M} − 1) T_s/τ
    ts, tau, delta, r, m = 500 * 60, 117, 5, 10, 24 * 60
    tw = m * math.exp(r / m) * (math.exp((tau + delta) / m) - 1) * ts / tau
    assert ft.expected_wall_time(ts, tau, delta, r, m) == pytest.approx(tw, rel=1e-12)
    assert ft.goodput(tau, delta, r, m) == pytest.approx(ts / tw, rel=1e-12)


@pytest.mark.parametrize("tau, delta, r, m", [(1.0, 0.1, 0.2, 3.0), (0.3, 0.05, 0.1, 1.0), (2.0, 0.5, 0.0, 1.0)])
def test_monte_carlo_agrees_with_the_model(tau, delta, r, m):
    work = 100 * tau                                   # whole segments, as in Daly's model
    g, se = ft.simulate_goodput(work, tau, delta, r, m, runs=200, seed=1)
    assert abs(g - ft.goodput(tau, delta, r, m)) < 4 * se
    assert se < 0.02


def test_monte_carlo_catches_a_wrong_model():
    """The replay can tell a wrong formula: forgetting that restarts fail too (no e^{R/M}) is rejected."""
    tau, delta, r, m = 0.5, 0.05, 1.0, 1.0
    g, se = ft.simulate_goodput(100 * tau, tau, delta, r, m, runs=300, seed=2)
    wrong = tau / (m * math.expm1((tau + delta) / m) + r * math.expm1((tau + delta) / m))
    assert abs(g - ft.goodput(tau, delta, r, m)) < 4 * se
    assert abs(g - wrong) > 8 * se


def test_expected_lost_work_against_truncated_exponential():
    rng = np.random.default_rng(3)
    m, seg = 2.0, 1.5
    t = rng.exponential(m, 2_000_000)
    t = t[t < seg]
    assert ft.expected_lost_work(seg - 0.25, 0.25, m) == pytest.approx(t.mean(), rel=3e-3)
    assert ft.expected_lost_work(1e-3, 0.0, 1e3) == pytest.approx(0.5e-3, rel=1e-5)   # ≈ half the segment


@pytest.mark.parametrize("m", [1e2, 1e3, 1e4])
def test_first_order_is_the_small_ratio_limit(m):
    """The two models differ at second order in the small ratios τ/M and δ/τ (here δ/τ = 1e-3)."""
    diff = abs(ft.goodput_first_order(1.0, 1e-3, 1e-3, m) - ft.goodput(1.0, 1e-3, 1e-3, m))
    assert diff < 3 * ((1 / m) ** 2 + 1e-3 ** 2)


def test_llama3_worked_example_is_consistent_with_the_reported_90_percent():
    """With the MTBF from the paper's interruption count, a 14 B/param checkpoint (our assumption) of Llama 3.1 405B at the 2 TB/s Tectonic throughput the
    paper gives (§3.3.1) and a 10-minute restart (an assumption), the optimum goodput is near the paper's
    "higher than 90% effective training time"."""
    from distlearn.memory.formulas import model_state_bytes
    from distlearn.core.models import PRESETS

    psi = PRESETS["llama3.1-405b"].num_parameters()
    s = model_state_bytes(psi)
    delta_s = (s.params + s.optimizer) / 2e12
    assert delta_s == pytest.approx(14 * psi / 2e12)
    m_s = ft.job_mtbf_hours(16384, ft.rate_per_unit_day(419, 54, 16384)) * 3600
    p = ft.plan(delta_s, 600.0, m_s)
    assert 0.90 < p.goodput_optimum < 0.95


@pytest.mark.parametrize("call", [lambda: ft.young_interval(0, 1), lambda: ft.daly_interval(1, -1),
                                  lambda: ft.goodput(-1, 1, 1, 1), lambda: ft.job_mtbf_hours(0, 1e-3),
                                  lambda: ft.rate_per_unit_day(0, 1, 1), lambda: ft.goodput(1, 1, -1, 1)])
def test_bad_input_is_bilingual(call):
    with pytest.raises(DistlearnValueError) as info:
        call()
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(info.value))


# ---------------------------------------------------------------- exact resume
@pytest.mark.parametrize("setup", [resume.Setup(*s) for s in itertools.product(
    resume.OPTIMIZERS, (False, True), (False, True), (False, True))])
def test_required_state_is_what_the_experiment_needs(setup):
    """For every setup, omitting an item changes the losses after the restart exactly when the rule says the item
    is required, and restoring everything reproduces the uninterrupted run bit for bit."""
    need = resume.required_state(setup.optimizer, setup.dropout, setup.lr_schedule, setup.full_batch)
    full, *omitted = resume.omission_table(setup)
    assert full.exact and full.max_abs_diff == 0.0 and full.first_diff is None
    assert [r.omit for r in omitted] == [("model",), ("optimizer",), ("sampler",), ("sampler.generator",), ("rng",),
                                         ("step",)]
    for r in omitted:
        item = r.omit[0].split(".")[0]                  # "sampler.generator" is needed when the sampler is
        assert (not r.exact) == (item in need), (setup, r.omit, r.max_abs_diff)


def test_resume_restores_the_samplers_shuffle_generator():
    """After a crash in epoch 1, the restarted run's epoch-2 permutation is the third one the shuffle generator
    draws, as torch.randperm draws it from a generator seeded seed + 1; a restart that leaves the generator as built
    fresh draws the second one again (the permutation of epoch 1)."""
    seed, per_epoch = 0, resume.NUM_SAMPLES // resume.BATCH
    g = torch.Generator().manual_seed(seed + 1)
    perms = [torch.randperm(resume.NUM_SAMPLES, generator=g) for _ in range(3)]
    first = resume.Trainer(resume.Setup(), seed)
    for _ in range(per_epoch + 1):                      # crash after the first step of epoch 1
        first.train_step()
    assert first.epoch == 1 and torch.equal(first.order, perms[1])
    checkpoint = first.state()
    for sampler_generator, expected in ((True, perms[2]), (False, perms[1])):
        again = resume.Trainer(resume.Setup(), seed)
        again.load(checkpoint, sampler_generator=sampler_generator)
        assert torch.equal(again.order, perms[1])
        for _ in range(per_epoch):                      # into epoch 2
            again.train_step()
        assert again.epoch == 2 and torch.equal(again.order, expected), sampler_generator


def test_default_crash_shows_the_sampler_generator_is_needed():
    """The chapter's defaults crash inside epoch 1 and cross the epoch-2 boundary after the restart. What the forward
    reads (model, this epoch's batch, dropout masks) shows at the first step after the restart; what only the update
    reads (optimizer state, the step's learning rate) one step later, since a step's loss is taken before its
    update; the sampler's shuffle generator alone only at the first step of epoch 2, and then at every step."""
    per_epoch = resume.NUM_SAMPLES // resume.BATCH
    results = {r.omit: r for r in resume.omission_table()}
    crash_at = len(results[()].reference) - len(results[()].resumed)
    steps = len(results[()].reference)
    assert per_epoch < crash_at < 2 * per_epoch < steps
    expected = {"model": crash_at + 1, "sampler": crash_at + 1, "rng": crash_at + 1,
                "optimizer": crash_at + 2, "step": crash_at + 2, "sampler.generator": 2 * per_epoch + 1}
    assert {k[0]: r.first_diff for k, r in results.items() if k} == expected
    r = results[("sampler.generator",)]
    same = [a == b for a, b in zip(r.resumed, r.reference[crash_at:])]
    assert same == [True] * (2 * per_epoch - crash_at) + [False] * (steps - 2 * per_epoch)
    assert not r.exact and r.max_abs_diff > 0.1


def test_forgetting_the_samplers_shuffle_generator_is_caught(monkeypatch):
    """Issue 32, item 7: a restore that brings back the sampler's epoch, position and order but not its shuffle
    generator must change the losses after the restart. The crash comes one step into the second epoch, so the
    generator has drawn two permutations; with the old crash (step 5 of a 6-batch epoch) a fresh generator was in
    the same state and deleting its restore passed every check."""
    full = resume.resume_experiment(resume.Setup("sgd", dropout=False, lr_schedule=False, full_batch=False))
    assert full.exact
    load = resume.Trainer.load

    def load_without_generator(self, state, items=resume.ITEMS, sampler_generator=True):
        generator = self.gen.get_state()
        load(self, state, items, sampler_generator)
        self.gen.set_state(generator)  # the restore of the shuffle generator, deleted

    monkeypatch.setattr(resume.Trainer, "load", load_without_generator)
    broken = resume.resume_experiment(resume.Setup("sgd", dropout=False, lr_schedule=False, full_batch=False))
    assert not broken.exact and broken.max_abs_diff > 1e-3, broken.max_abs_diff
    # the first step that differs is the first step of the third epoch (6 batches per epoch)
    first = next(i for i, (a, b) in enumerate(zip(broken.resumed, broken.reference[7:])) if a != b)
    assert 7 + first + 1 == 13


def test_resume_experiment_validates():
    with pytest.raises(DistlearnValueError):
        resume.resume_experiment(omit=("weights",))
    with pytest.raises(DistlearnValueError):
        resume.resume_experiment(omit=("generator",))
    with pytest.raises(DistlearnValueError):
        resume.resume_experiment(steps=5, crash_at=5)
    with pytest.raises(DistlearnValueError):
        resume.Setup(optimizer="lion")


# ---------------------------------------------------------------- exercises: pass on answers, fail on mistakes
def test_checkers_accept_correct_answers(capsys):
    check.ex13_job_mtbf(lambda n, r: 24 / (n * r))
    check.ex13_young_daly(lambda d, m: (math.sqrt(2 * d * m), _daly_as_printed(d, m)))
    check.ex13_goodput(lambda t, d, r, m: t / (m * math.exp(r / m) * (math.exp((t + d) / m) - 1)))
    check.ex13_state_to_save(lambda *a: list(resume.required_state(*a)))
    assert capsys.readouterr().out.count("✓ ex13_") == 8   # both languages


@pytest.mark.parametrize("name, wrong", [
    ("ex13_job_mtbf", lambda n, r: 1 / (n * r)),                                  # days, not hours
    ("ex13_young_daly", lambda d, m: (math.sqrt(2 * d * m),) * 2),                # Daly = Young
    ("ex13_young_daly", lambda d, m: (math.sqrt(2 * d * m), _daly_as_printed(d, m) + d)),   # forgot − δ
    ("ex13_goodput", lambda t, d, r, m: 1 - d / t - (t / 2 + r) / m),            # first order only
    ("ex13_state_to_save", lambda *a: {"model", "optimizer"}),                    # the classic omission
    ("ex13_state_to_save", lambda *a: set(resume.ITEMS)),                         # always everything
])
def test_checkers_reject_mistakes(name, wrong, capsys):
    with pytest.raises(check.CheckFailed):
        getattr(check, name)(wrong)


# ---------------------------------------------------------------- the numbers chapter 13's prose quotes
def test_chapter_13_quoted_numbers():
    rate = ft.rate_per_unit_day(419, 54, 16384)
    assert f"{rate:.3e}" == "4.736e-04" and round(1 / rate / 365, 1) == 5.8
    assert round(ft.job_mtbf_hours(131072, rate) * 60) == 23                      # "every 23 minutes"
    assert abs(ft.daly_interval(5, 15) / ft.optimal_interval(5, 15) - 1) < 0.003  # "within 0.3 %"
    assert round(100 * (ft.young_interval(5, 15) / ft.optimal_interval(5, 15) - 1)) == 34
    assert round(100 * (ft.young_interval(5, 360) / ft.optimal_interval(5, 360) - 1)) == 6
    assert round(100 * (ft.young_interval(5, 1440) / ft.optimal_interval(5, 1440) - 1)) == 3
    for xi in np.linspace(1e-4, 1 / 3, 50):                                      # "as long as δ ≤ M/3"
        assert abs(ft.daly_interval(xi, 1.0) / ft.optimal_interval(xi, 1.0) - 1) < 0.003
    assert round(ft.optimal_interval(2, 60), 1) == 14.2 and round(ft.young_interval(2, 60), 1) == 15.5
    first = [ft.goodput(t, 2, 10, 60) - ft.goodput_first_order(t, 2, 10, 60) for t in (5, 14.2, 30, 60)]
    assert round(100 * min(first)) == 7 and round(100 * max(first)) == 18         # "off by 7 to 18 points"
    from distlearn.memory.formulas import model_state_bytes
    from distlearn.core.models import PRESETS
    s = model_state_bytes(PRESETS["llama3.1-405b"].num_parameters())
    delta, r, m = (s.params + s.optimizer) / 2e12, 600.0, ft.job_mtbf_hours(16384, rate) * 3600
    p = ft.plan(delta, r, m)
    assert round(100 * p.goodput_optimum, 1) == 92.6 and round(p.optimum / 60, 1) == 4.2
    assert round(100 * ft.goodput(3600, delta, r, m), 1) == 80.2                 # hourly: 12 points lost
    assert round(100 * (p.goodput_optimum - ft.goodput(3600, delta, r, m))) == 12
    m512 = ft.job_mtbf_hours(512, rate) * 3600
    assert round(ft.optimal_interval(delta, m512) / 60, 1) == 23.7
    assert 5.5 < ft.optimal_interval(delta, m512) / p.optimum < 6                 # "almost six times"
    assert round(100 * r / m, 1) == 5.4 and round(100 * 60 / m, 1) == 0.5


# ---------------------------------------------------------------- the chapter's picture (issue 34)
def test_timeline_lays_out_checkpoints_failures_lost_work_and_restarts():
    """The timeline of the chapter's picture: a failure turns everything since the last completed checkpoint into
    lost work (a half-written checkpoint included) and costs R; the pieces tile the wall time without gaps."""
    from distlearn.fault_tolerance.plots import tally, timeline

    clean = timeline(16, 4, 1, 2)
    assert [p.kind for p in clean] == ["work", "checkpoint"] * 4
    assert tally(clean)["goodput"] == pytest.approx(4 / 5)                      # τ / (τ + δ) without failures
    hit = timeline(16, 4, 1, 2, (12.5, 24.0))
    assert all(a.end == pytest.approx(b.start) for a, b in zip(hit, hit[1:]))    # no gaps / 没有空隙
    lost = [p for p in hit if p.kind == "lost"]
    assert [(p.start, p.end) for p in lost] == [(10.0, 12.5), (19.5, 24.0)]     # the second one hits the checkpoint
    t = tally(hit)
    assert (t["work"], t["checkpoint"], t["lost"], t["restart"], t["wall"]) == (16, 4, 7, 4, 31)
    assert t["work"] + t["checkpoint"] + t["lost"] + t["restart"] == t["wall"]
    assert timeline(8, 4, 1, 2, (12.5, 20.0)) == timeline(8, 4, 1, 2)          # failures after the end are ignored


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_timeline_diagram_draws_in_the_readers_language(lang):
    """Issue 34: chapter 13 had no picture of its core idea. timeline_diagram draws a failure-free run and one hit by
    two failures as bars over wall time, one bar per piece (its kind as gid), and every label in the reader's
    language."""
    import re

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from authoring import lang_audit as A
    from distlearn.core import i18n
    from distlearn.fault_tolerance.plots import timeline, timeline_diagram

    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        fig = timeline_diagram()
        fig.canvas.draw()
        ax = fig.axes[0]
        bars = [p for p in ax.patches if p.get_gid()]
        assert len(bars) == len(timeline(16, 4, 1, 2)) + len(timeline(16, 4, 1, 2, (12.5, 24.0)))
        assert sum(p.get_width() for p in bars if p.get_gid() == "lost") == pytest.approx(7.0)
        texts = [ax.get_title(), ax.get_xlabel()] + [t.get_text() for t in ax.get_yticklabels()]
        texts += [t.get_text() for t in ax.texts] + [t.get_text() for t in fig.legends[0].get_texts()]
        words = " ".join(texts)
        for t in texts:
            assert A.readable(t, lang), t
        if lang == "en":
            assert not re.search(r"[\u4e00-\u9fff]", words)
            assert "lost work" in words and "failure" in words and "goodput 52%" in words, words
        else:
            assert "丢失的计算" in words and "故障" in words and "有效训练时间占比 52%" in words, words
            assert not re.search(r"\b(lost|failure|goodput|restart|checkpoint)\b", words), words
    finally:
        i18n.set_language(old)
        plt.close("all")
