"""Checkers for chapter 13 (fault tolerance). Expected values come from :mod:`distlearn.fault_tolerance` (tested
against Young 1974, Daly 2006's figures, a brute-force optimum and a Monte Carlo replay) and
:func:`distlearn.resume.required_state` (tested against the real resume experiment for every setup)."""
from __future__ import annotations

import itertools

from ..check import Case, verify
from ..fault_tolerance import daly_interval, goodput, job_mtbf_hours, young_interval
from ..resume import OPTIMIZERS, required_state


def ex13_job_mtbf(fn):
    """``fn(num_gpus, failures_per_gpu_day)`` → the job's MTBF in hours."""
    hint_en = ("Any GPU failing stops the job: the job fails num_gpus × failures_per_gpu_day times per day, so its "
               "MTBF is 24 h divided by that.")
    hint_zh = "任何一块 GPU 出故障都会让作业停下：作业每天故障 num_gpus × failures_per_gpu_day 次，MTBF 就是 24 小时除以它。"
    cases = [Case((n, r), expected=job_mtbf_hours(n, r), rtol=1e-9, hint_en=hint_en, hint_zh=hint_zh)
             for n, r in [(16384, 419 / (54 * 16384)), (8, 1e-3), (1, 0.01), (1024, 2e-4), (100_000, 5e-4)]]
    verify("ex13_job_mtbf", fn, cases)


def ex13_young_daly(fn):
    """``fn(checkpoint_time, mtbf)`` → ``(young, daly)`` intervals in the same unit."""
    hint_en = ("Young: sqrt(2·δ·M). Daly (δ < 2M): sqrt(2δM)·(1 + sqrt(δ/2M)/3 + (δ/2M)/9) − δ; for δ ≥ 2M "
               "Daly's interval is M itself.")
    hint_zh = ("Young：sqrt(2·δ·M)。Daly（δ < 2M）：sqrt(2δM)·(1 + sqrt(δ/2M)/3 + (δ/2M)/9) − δ；δ ≥ 2M 时 Daly 的"
               "间隔就是 M。")
    cases = [Case((d, m), expected=(young_interval(d, m), daly_interval(d, m)), rtol=1e-9,
                  hint_en=hint_en, hint_zh=hint_zh)
             for d, m in [(5, 1440), (5, 360), (5, 15), (1, 185.6), (0.05, 185.6), (30, 10), (20, 10)]]
    verify("ex13_young_daly", fn, cases)


def ex13_goodput(fn):
    """``fn(interval, checkpoint_time, restart_time, mtbf)`` → expected goodput in Daly's complete model."""
    hint_en = ("Goodput = τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)): every segment of τ + δ is retried until no failure "
               "hits it, and every failure costs a restart that can fail too.")
    hint_zh = ("有效训练时间占比 = τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1))：每段 τ + δ 会一直重试直到没有故障打断，每次故障"
               "都要重启一次，而重启本身也可能被故障打断。")
    cases = [Case(args, expected=goodput(*args), rtol=1e-9, hint_en=hint_en, hint_zh=hint_zh)
             for args in [(18.6, 1.0, 10.0, 185.6), (60, 1.0, 10.0, 185.6), (117, 5, 10, 1440), (9.1, 5, 10, 15),
                          (30, 0.0, 0.0, 1000.0), (4.2, 0.05, 10, 185.6)]]
    verify("ex13_goodput", fn, cases)


def _same_set(got, expected):
    try:
        return set(got) == expected and len(set(got)) == len(list(got))
    except TypeError:
        return False


def ex13_state_to_save(fn):
    """``fn(optimizer, dropout, lr_schedule, full_batch)`` → the set of items (among "model", "optimizer",
    "sampler", "rng", "step") a checkpoint must hold for an exact resume."""
    cases = [Case((opt, drop, sched, full), expected=required_state(opt, drop, sched, full), compare=_same_set,
                  hint_en="Ask of each item: does the next step read it? Plain SGD has no optimizer state; without "
                          "dropout nothing draws from the RNG; a constant learning rate does not need the step; "
                          "full-batch steps do not need the sampler. The model is always needed.",
                  hint_zh="逐项问：下一步会用到它吗？普通 SGD 没有优化器状态；没有 dropout 就不从随机数生成器取数；"
                          "学习率不变就不需要步数；每步用全部数据就不需要采样器状态。模型总是需要的。")
             for opt, drop, sched, full in itertools.product(OPTIMIZERS, (True, False), (True, False), (False, True))
             if (opt, drop, sched, full) in {("adamw", True, True, False), ("sgd", False, False, True),
                                             ("momentum", False, True, False), ("sgd", True, False, False),
                                             ("adamw", False, False, True), ("momentum", True, True, True),
                                             ("sgd", False, True, False)}]
    verify("ex13_state_to_save", fn, cases)
