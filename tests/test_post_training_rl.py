"""Chapter 15's RL systems part: the placement timeline (event simulation against its closed forms and hand counts),
the explorer's speed, the RL lab on real gloo processes (equal to its one-process reference, deterministic, both
placements learn, log-probs equal when synced, a skipped sync caught) and the exercise checkers."""
from __future__ import annotations

import time

import matplotlib
import pytest
from hypothesis import given, settings, strategies as st

matplotlib.use("Agg")

from distlearn.core.check import CheckFailed  # noqa: E402
from distlearn.core.validate import DistlearnValueError  # noqa: E402
from distlearn.post_training import check as rl_check  # noqa: E402
from distlearn.post_training.lab_rl import (logprob_mismatch, make_policy, policy_loss, sample,  # noqa: E402
                                            sequence_logprobs, train_reference)
from distlearn.post_training.rl_timeline import (PLACEMENTS, RLSetup, compare, overheads, policy_lag,  # noqa: E402
                                                 simulate, steady_step_time)


# ------------------------------------------------------------------ the timeline
@st.composite
def setups(draw):
    gpus = draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    return RLSetup(params_billion=draw(st.sampled_from([0.5, 7.0, 70.0, 405.0])), gpus=gpus,
                   gen_gpus=draw(st.integers(1, gpus - 1)), gen_seconds=draw(st.floats(0.5, 200)),
                   train_seconds=draw(st.floats(0.5, 200)), score_seconds=draw(st.sampled_from([0.0, 1.0, 7.5])),
                   gen_efficiency=draw(st.floats(0.5, 2.0)), gen_tp=draw(st.sampled_from([1, 2])),
                   offload=draw(st.booleans()), network_gbs=draw(st.sampled_from([1.0, 12.5, 50.0])),
                   staleness=draw(st.integers(0, 6)))


@settings(max_examples=300, deadline=None)
@given(setups())
def test_simulation_reaches_the_closed_form_steady_state(setup):
    for placement in PLACEMENTS:
        r = simulate(setup, placement)
        assert r.step_time == pytest.approx(steady_step_time(setup, placement), rel=1e-9)
        assert r.policy_lag == policy_lag(setup, placement)
        assert max(r.lags) <= setup.staleness if placement == "disaggregated" else max(r.lags) == 0


@settings(max_examples=100, deadline=None)
@given(setups())
def test_every_batch_respects_the_staleness_bound_and_pools_never_overlap_themselves(setup):
    r = simulate(setup, "disaggregated")
    for pool in ("generator", "trainer"):
        bars = sorted((p.start, p.end) for p in r.phases if p.pool == pool)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(bars, bars[1:]))
    for p in r.phases:
        if p.kind == "generate":
            assert p.step - p.version <= setup.staleness
        if p.kind == "train":  # a batch is trained only after it is generated and scored / 先生成、打分，再训练
            made = max(q.end for q in r.phases if q.step == p.step and q.kind in ("generate", "score"))
            assert p.start >= made - 1e-9


def test_overheads_by_hand():
    o = overheads(RLSetup())  # 7B, 16 GPUs, generation TP 2, offload, 450 / 25 / 50 GB/s
    assert o.reshard_bytes == pytest.approx(2 * 7e9 * (1 / 2 - 1 / 16))      # 6.125 GB
    assert o.offload_bytes == pytest.approx(2 * 12 * 7e9 / 16)                # 10.5 GB
    assert o.broadcast_bytes == pytest.approx(14e9)
    assert (o.reshard, o.offload, o.broadcast) == pytest.approx((6.125 / 450, 10.5 / 25, 14 / 50))
    assert overheads(RLSetup(offload=False)).offload == 0


def test_the_chapter_quotes_verls_full_gather_reshard():
    """verl's FSDP backend gathers every weight whole: 2Ψ·(N − 1)/N bytes per GPU, the figure the aside quotes."""
    from authoring.paths import ROOT

    s = RLSetup()
    full = 2 * s.params_billion * 1e9 * (s.gpus - 1) / s.gpus
    assert full > overheads(s).reshard_bytes          # more than the direct reshard / 比直接重新分片多
    text = " ".join((ROOT / "notebooks" / "15_post_training.md").read_text(encoding="utf-8").split())
    en = f"{full / 1e9:.1f} GB per GPU here, {full / (s.nvlink_gbs * 1e9):.3f} s over NVLink"
    zh = f"每块 GPU {full / 1e9:.1f} GB，走 NVLink 要 {full / (s.nvlink_gbs * 1e9):.3f} 秒"
    assert en in text and zh in text, (en, zh)



def test_default_numbers_by_hand():
    s = RLSetup()
    col, dis = simulate(s, "colocated"), simulate(s, "disaggregated")
    assert col.step_time == pytest.approx(80 + 1 + 20 + 6.125 / 450 + 10.5 / 25)
    g, t = 80 * 16 / 12 + 1, 20 * 16 / 4
    assert dis.step_time == pytest.approx(g + t + 0.28)
    assert dis.idle == pytest.approx({"generator": 1 - (g - 1) / (g + t + 0.28), "trainer": 1 - t / (g + t + 0.28)})
    assert dis.idle_overall == pytest.approx(1 - 100 / (g + t + 0.28))        # work is conserved / 总计算量不变
    asyn = simulate(RLSetup(staleness=1), "disaggregated")
    assert asyn.step_time == pytest.approx(max(g, t) + 0.28) and asyn.policy_lag == 1
    # the trainer is the slower pool: the generator runs ahead by k / 训练池更慢：生成池领先 k 个版本
    slow_trainer = RLSetup(gen_gpus=14, staleness=3)
    assert simulate(slow_trainer, "disaggregated").policy_lag == 3
    assert simulate(slow_trainer, "disaggregated").step_time == pytest.approx(20 * 16 / 2 + 0.28)


def test_disaggregated_is_not_always_faster():
    # the misconception: with equal per-GPU speed, a pool split that cannot match 80/20 exactly loses
    assert compare(RLSetup(staleness=1)).faster == "colocated"
    # synchronous disaggregation idles each pool while the other works / 同步分离时两个池轮流空闲
    assert compare(RLSetup(staleness=0, gen_efficiency=1.5)).faster == "colocated"
    # a dedicated generator 1.3x faster per GPU, asynchronous: disaggregated wins / 独立生成池更快且异步：分离更快
    assert compare(RLSetup(staleness=1, gen_efficiency=1.3)).faster == "disaggregated"
    # ... unless the weights are huge and the network slow / ……除非权重很大而网络很慢
    assert compare(RLSetup(params_billion=671, network_gbs=3.125, staleness=1, gen_efficiency=1.3,
                           offload=False)).faster == "colocated"


def test_bad_setups_are_refused_with_the_parameter_named():
    for kwargs, param in [({"gen_gpus": 16}, "gen_gpus"), ({"gen_tp": 3}, "gen_tp"), ({"staleness": -1}, "staleness"),
                          ({"gen_seconds": 0}, "gen_seconds"), ({"offload": "no"}, "offload")]:
        with pytest.raises(DistlearnValueError) as err:
            RLSetup(**kwargs)
        assert err.value.param == param
    with pytest.raises(DistlearnValueError):
        simulate(RLSetup(), "hybrid")
    with pytest.raises(DistlearnValueError):
        simulate({"gpus": 8}, "colocated")


def test_explorer_compute_is_fast_and_covers_both_placements():
    from distlearn.post_training import explorer

    explorer.compute()
    start = time.perf_counter()
    res = explorer.compute(params_billion=671, gpus=256, pool_share=0.9, staleness=4)
    assert time.perf_counter() - start < 0.05
    assert res["comparison"].disaggregated.policy_lag == 4


# ------------------------------------------------------------------ the lab's pieces, in one process
def test_trainer_and_generator_log_probs_agree_when_synced_and_differ_in_bf16():
    policy = make_policy(3)
    tokens, logp_gen = sample(policy, 32, seed=5)
    assert float((sequence_logprobs(policy, tokens).detach() - logp_gen).abs().max()) < 1e-6
    tokens, logp_bf16 = sample(policy, 32, seed=5, dtype="bfloat16")
    gap = float((sequence_logprobs(policy, tokens).detach() - logp_bf16).abs().max())
    assert 1e-4 < gap < 0.2


def test_the_clip_acts_only_away_from_ratio_one():
    import torch

    logp = -torch.ones(2, 3)
    adv = torch.tensor([1.0, -1.0])
    loss, ratio, acts = policy_loss(logp, logp, adv)
    assert acts == 0 and torch.equal(ratio, torch.ones(2, 3)) and float(loss) == 0.0
    _, _, acts = policy_loss(logp + 0.5, logp, adv)          # ρ = e^0.5 > 1.2: clipped where A > 0
    assert acts == 0.5


def test_reference_is_deterministic_and_stale_rollouts_still_learn():
    a, b = train_reference(30), train_reference(30)
    assert a.rewards == b.rewards and bool((a.final == b.final).all())
    stale = train_reference(30, staleness=2)
    assert a.rewards[-1] >= 0.95 and stale.rewards[-1] >= 0.9 > stale.rewards[10]
    assert sum(stale.rewards) < sum(a.rewards)                # staleness costs reward early on / 陈旧让前期奖励更低
    assert logprob_mismatch(a) == [] and max(stale.clipped) > 0


# ------------------------------------------------------------------ the lab on real processes
@pytest.mark.slow
def test_lab_equals_reference_learns_and_catches_a_skipped_sync():
    import torch

    from distlearn.core import launch
    from distlearn.post_training.lab_rl import lab_rl

    synced = launch.run(lab_rl, 2, 30, 0)
    ref = train_reference(30)
    assert synced[0].rewards == ref.rewards and torch.equal(synced[0].final, ref.final)
    assert synced[1] == list(range(30))                       # the generator used version i at step i
    assert logprob_mismatch(synced[0]) == [] and synced[0].rewards[-1] >= 0.95
    stale = launch.run(lab_rl, 3, 30, 2)                      # two generators, 2-step stale / 两个生成器，陈旧 2 步
    assert stale[0].rewards == train_reference(30, staleness=2, generators=2).rewards
    assert stale[1] == stale[2] == [0, 0, 0] + list(range(1, 28))
    # the deliberate break: the weight broadcast skipped / 故意的错误：跳过权重广播
    broken = launch.run(lab_rl, 2, 30, 0, 64, 0.05, 0, "float32", False)
    assert logprob_mismatch(broken[0]) == list(range(1, 30))
    assert max(broken[0].rewards[-5:]) < 0.5


@pytest.mark.slow
def test_colocated_lab_on_four_ranks_matches_the_reference():
    import torch

    from distlearn.core import launch
    from distlearn.post_training.lab_rl import lab_rl_colocated

    runs = launch.run(lab_rl_colocated, 4, 20)
    ref = train_reference(20, generators=4)
    for run in runs:                                          # every rank ends with the same weights / 各 rank 权重相同
        assert torch.allclose(run.final, ref.final, atol=1e-4, rtol=0)
    assert max(abs(a - b) for a, b in zip(runs[0].rewards, ref.rewards)) < 1e-6
    assert max(runs[0].logprob_gap) < 1e-6 and runs[0].rewards[-1] >= 0.95


# ------------------------------------------------------------------ the checkers
def test_checkers_accept_the_solutions_and_refuse_wrong_answers(capsys):
    def step(gen, train, gpus, gen_gpus, sync, k):
        g, t = gen * gpus / gen_gpus, train * gpus / (gpus - gen_gpus)
        return (g + t if k == 0 else max(g, t)) + sync

    def lag(g, t, k):
        return 0 if k == 0 else (1 if g >= t else k)

    def loss(lp, lg, adv, eps):
        import torch

        r = torch.exp(lp - lg)
        a = adv[:, None]
        return -torch.minimum(r * a, torch.clamp(r, 1 - eps, 1 + eps) * a).mean().item()

    rl_check.ex15_disaggregated_step_time(step)
    rl_check.ex15_policy_lag(lag)
    rl_check.ex15_clipped_loss(loss)
    with pytest.raises(CheckFailed):
        rl_check.ex15_disaggregated_step_time(lambda gen, train, gpus, gen_gpus, sync, k:
                                              max(gen * gpus / gen_gpus, train * gpus / (gpus - gen_gpus)) + sync)
    with pytest.raises(CheckFailed):
        rl_check.ex15_policy_lag(lambda g, t, k: k)
    with pytest.raises(CheckFailed):
        rl_check.ex15_clipped_loss(lambda lp, lg, adv, eps: -(torch_exp(lp - lg) * adv[:, None]).mean().item())
    capsys.readouterr()
    with pytest.raises(CheckFailed):  # the exercise asks for a Python float, not a 0-d tensor holding the right value
        rl_check.ex15_clipped_loss(lambda lp, lg, adv, eps: torch_tensor(loss(lp, lg, adv, eps)))
    assert "return a Python float" in capsys.readouterr().out


def torch_exp(x):
    import torch

    return torch.exp(x)


def torch_tensor(x):
    import torch

    return torch.tensor(x)


def test_torchrun_entry_splits_the_batch_evenly(monkeypatch):
    """``torchrun --nproc-per-node 4 -m distlearn.post_training.lab_rl`` once asked 3 generators to split 64 rollouts
    (refused): the entry takes the largest batch ≤ 64 they split evenly."""
    import distlearn.post_training.lab_rl as L

    seen = []
    monkeypatch.setattr(L, "lab_rl", lambda rank, ws, steps, k, batch: seen.append((ws, batch)))
    for ws in (2, 3, 4, 8):
        L.torchrun_entry(0, ws)
    assert seen == [(2, 64), (3, 64), (4, 63), (8, 63)]
