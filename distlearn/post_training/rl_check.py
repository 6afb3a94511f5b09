"""Checkers for chapter 15's RL exercises. Expected values come from
:func:`distlearn.post_training.rl_timeline.simulate` (the event simulation, which the tests check against the closed
forms) and from :func:`distlearn.post_training.lab_rl.policy_loss` (the lab's loss)."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # noqa: F401 — CheckFailed: what a wrong answer raises
from distlearn.post_training.lab_rl import policy_loss
from distlearn.post_training.rl_timeline import RLSetup, simulate


def _setup_for(gen_seconds, train_seconds, gpus, gen_gpus, sync_seconds, staleness) -> RLSetup:
    """A setup whose weight broadcast takes ``sync_seconds`` (1B parameters = 2 GB over 2 / sync GB/s), no scoring,
    no offload, generation on one GPU per replica."""
    return RLSetup(params_billion=1.0, gpus=gpus, gen_gpus=gen_gpus, gen_seconds=gen_seconds,
                   train_seconds=train_seconds, score_seconds=0.0, gen_tp=1, offload=False,
                   network_gbs=2.0 / sync_seconds, staleness=staleness)


def ex15_disaggregated_step_time(fn):
    """``fn(gen_seconds, train_seconds, gpus, gen_gpus, sync_seconds, staleness)`` → steady step time (s) of the
    disaggregated placement: generation and training take ``gen_seconds`` and ``train_seconds`` on all ``gpus``
    GPUs and scale linearly with the pool size; the weight broadcast takes ``sync_seconds``; no scoring."""
    cases = []
    for args in [(80, 20, 16, 12, 0.5, 0), (80, 20, 16, 12, 0.5, 1), (60, 40, 8, 4, 2.0, 1), (50, 50, 8, 2, 1.0, 3),
                 (90, 10, 10, 9, 0.25, 2), (30, 70, 32, 8, 4.0, 0)]:
        expected = simulate(_setup_for(*args), "disaggregated").step_time
        cases.append(Case(args, expected=expected, rtol=1e-9,
                          hint_en="First the time of each pool: gen_seconds · gpus / gen_gpus for the generator, "
                                  "train_seconds · gpus / (gpus − gen_gpus) for the trainer. With staleness 0 the "
                                  "pools take turns; with staleness ≥ 1 they overlap, and the broadcast needs both.",
                          hint_zh="先算两个池各自的时间：生成池 gen_seconds · gpus / gen_gpus，训练池 "
                                  "train_seconds · gpus / (gpus − gen_gpus)。staleness 为 0 时两个池轮流工作；"
                                  "staleness ≥ 1 时二者重叠，而权重广播需要两个池同时参与。"))
    verify("ex15_disaggregated_step_time", fn, cases)


def ex15_policy_lag(fn):
    """``fn(gen_pool_seconds, train_pool_seconds, staleness)`` → the steady policy lag (versions) of the
    disaggregated placement: the generator pool needs ``gen_pool_seconds`` per batch, the trainer pool
    ``train_pool_seconds`` per update (broadcast 0.5 s)."""
    cases = []
    for g, t, k in [(90, 60, 0), (90, 60, 1), (90, 60, 3), (40, 60, 1), (40, 60, 3), (40, 60, 5), (60, 60, 2)]:
        setup = _setup_for(g / 2, t / 2, 2, 1, 0.5, k)       # one GPU per pool: the pool times are g and t
        cases.append(Case((g, t, k), expected=simulate(setup, "disaggregated").policy_lag,
                          hint_en="Batch i is trained by update i; its lag is i minus the version it was generated "
                                  "with. Which pool waits for the other? A fast generator runs ahead until the "
                                  "staleness bound stops it; a slow one is never ahead by more than one batch.",
                          hint_zh="批次 i 由第 i 次更新来训练；它的滞后是 i 减去生成它时所用的权重版本。哪个池在等"
                                  "另一个？生成池快时会一直往前跑，直到被陈旧度上限挡住；生成池慢时最多只领先一个批次。"))
    verify("ex15_policy_lag", fn, cases)


def ex15_clipped_loss(fn):
    """``fn(logp_train, logp_gen, adv, eps)`` (torch tensors (B, L), (B, L), (B,); eps a float) → the PPO clipped
    loss as a Python float: − mean over tokens of min(ρ·A, clip(ρ, 1 − eps, 1 + eps)·A), ρ = exp(logp_train −
    logp_gen)."""
    import torch

    cases = []
    for seed, b, n, eps, shift in [(0, 4, 3, 0.2, 0.0), (1, 6, 5, 0.2, 0.3), (2, 3, 2, 0.1, -0.5), (3, 8, 4, 0.3, 1.0)]:
        g = torch.Generator().manual_seed(seed)
        logp_gen = -torch.rand(b, n, generator=g) * 3
        logp_train = logp_gen + shift * torch.randn(b, n, generator=g)
        adv = torch.randn(b, generator=g)
        expected = policy_loss(logp_train, logp_gen, adv, eps)[0].item()
        cases.append(Case((logp_train, logp_gen, adv, eps), expected=expected, rtol=1e-5, atol=1e-6,
                          hint_en="ρ is per token; A is per sequence, so broadcast it over the L tokens "
                                  "(adv[:, None]). Take the smaller of the two products, then the mean, then the "
                                  "minus sign.",
                          hint_zh="ρ 按 token 计算；A 按序列给出，要在 L 个 token 上广播（adv[:, None]）。"
                                  "两个乘积取较小者，再取均值，最后加负号。"))
    verify("ex15_clipped_loss", fn, cases)
