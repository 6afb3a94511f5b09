"""Checkers for chapter 13 (fault tolerance). Expected values come from :mod:`distlearn.fault_tolerance.goodput` (tested
against Young 1974, Daly 2006's figures, a brute-force optimum and a Monte Carlo replay) and
:func:`distlearn.fault_tolerance.resume.required_state` (tested against the real resume experiment for every setup). DiLoCo's outer step (:func:`ex13_outer_step`): torch's own
``torch.optim.SGD(nesterov=True)``."""
from __future__ import annotations

import itertools

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.fault_tolerance.goodput import daly_interval, goodput, job_mtbf_hours, young_interval
from distlearn.fault_tolerance.resume import OPTIMIZERS, required_state


def ex13_job_mtbf(fn):
    """``fn(num_gpus, failures_per_gpu_day)`` → the job's MTBF in hours."""
    hint_en = ("Any GPU failing stops the job, so the job fails as often as all its GPUs together. How many failures "
               "is that per day? An MTBF is time per failure, and the answer is in hours, not days.")
    hint_zh = ("任何一块 GPU 出故障都会让作业停下，所以作业的故障次数是所有 GPU 的故障次数之和。每天一共多少次？MTBF 是平均每次故障"
               "之间的时间，而且要以小时为单位，不是天。")
    cases = [Case((n, r), expected=job_mtbf_hours(n, r), rtol=1e-9, hint_en=hint_en, hint_zh=hint_zh)
             for n, r in [(16384, 419 / (54 * 16384)), (8, 1e-3), (1, 0.01), (1024, 2e-4), (100_000, 5e-4)]]
    verify("ex13_job_mtbf", fn, cases)


def ex13_young_daly(fn):
    """``fn(checkpoint_time, mtbf)`` → ``(young, daly)`` intervals in the same unit."""
    series_en = ("Check Young first: the 2 under the root. Then Daly with x = δ/(2M): the bracket is 1 + √x/3 + x/9 "
                 "(the 1/9 multiplies x itself, not √x), it multiplies Young's value, and δ is subtracted at the end.")
    series_zh = ("先检查 Young：根号里的 2。再看 Daly，记 x = δ/(2M)：方括号是 1 + √x/3 + x/9（1/9 乘的是 x 本身，不是 √x），"
                 "它乘以 Young 的值，最后再减去 δ。")
    branch_en = ("Here the checkpoint takes at least twice the MTBF (δ ≥ 2M; δ = 2M counts): Daly's series does not "
                 "apply there. What does the exercise say his interval is then?")
    branch_zh = "这里检查点耗时至少是 MTBF 的两倍（δ ≥ 2M，δ = 2M 也算）：Daly 的级数在这里不适用。题目说这时他的间隔是多少？"
    cases = [Case((d, m), expected=(young_interval(d, m), daly_interval(d, m)), rtol=1e-9,
                  hint_en=branch_en if d >= 2 * m else series_en, hint_zh=branch_zh if d >= 2 * m else series_zh)
             for d, m in [(5, 1440), (5, 360), (5, 15), (1, 185.6), (0.05, 185.6), (30, 10), (20, 10)]]
    verify("ex13_young_daly", fn, cases)


def ex13_goodput(fn):
    """``fn(interval, checkpoint_time, restart_time, mtbf)`` → expected goodput in Daly's complete model."""
    hint_en = ("Three things to check: the exponent is (τ + δ)/M, because a failure during the checkpoint loses the "
               "segment too; the factor e^{R/M} is there because a restart can fail as well; and the result is the "
               "useful fraction of the wall time (between 0 and 1), not the waste. For small τ/M it is close to "
               "1 − δ/τ − (τ/2 + R)/M.")
    hint_zh = ("检查三点：指数是 (τ + δ)/M，因为写检查点时出故障也会丢掉整段；因子 e^{R/M} 来自重启本身也可能出故障；结果是"
               "墙钟时间中有用的那部分比例（在 0 和 1 之间），不是浪费的比例。τ/M 很小时它接近 1 − δ/τ − (τ/2 + R)/M。")
    cases = [Case(args, expected=goodput(*args), rtol=1e-9, hint_en=hint_en, hint_zh=hint_zh)
             for args in [(18.6, 1.0, 10.0, 185.6), (60, 1.0, 10.0, 185.6), (117, 5, 10, 1440), (9.1, 5, 10, 15),
                          (30, 0.0, 0.0, 1000.0), (4.2, 0.05, 10, 185.6)]]
    verify("ex13_goodput", fn, cases)


def _same_set(got, expected):
    try:
        return set(got) == expected and len(set(got)) == len(list(got))
    except TypeError:
        return False


_STATE_HINT_EN = ("Ask of each item in turn: would the step after the restart read it? Does this optimizer carry "
                  "anything from one step to the next? Does anything in the step draw random numbers? Does the "
                  "learning rate depend on how many steps were done? Does the next batch depend on where the run was "
                  "in the data? Return a set, each item once.")
_STATE_HINT_ZH = ("逐项问：重启后的下一步会读取它吗？这个优化器会把什么从一步带到下一步吗？这一步里有没有东西要取随机数？学习率"
                  "取决于已经走了多少步吗？下一个批次取决于训练在数据中走到了哪里吗？返回一个集合，每项只出现一次。")


def ex13_state_to_save(fn):
    """``fn(optimizer, dropout, lr_schedule, full_batch)`` → the set of items (among "model", "optimizer",
    "sampler", "rng", "step") a checkpoint must hold for an exact resume."""
    cases = [Case((opt, drop, sched, full), expected=required_state(opt, drop, sched, full), compare=_same_set,
                  hint_en=_STATE_HINT_EN, hint_zh=_STATE_HINT_ZH)
             for opt, drop, sched, full in itertools.product(OPTIMIZERS, (True, False), (True, False), (False, True))
             if (opt, drop, sched, full) in {("adamw", True, True, False), ("sgd", False, False, True),
                                             ("momentum", False, True, False), ("sgd", True, False, False),
                                             ("adamw", False, False, True), ("momentum", True, True, True),
                                             ("sgd", False, True, False)}]
    verify("ex13_state_to_save", fn, cases)


def _torch_outer_step(global_params, local_params, momentum_buffer, lr, momentum):
    """The expected answer, from torch itself: set the mean pseudo-gradient as ``.grad`` and let
    ``torch.optim.SGD(nesterov=True)`` take one step from the given momentum buffer (the path of ``torchft``'s
    DiLoCo). Returns (new parameters, new buffer) as float64 arrays."""
    import numpy as np
    import torch

    theta = torch.nn.Parameter(torch.tensor(global_params, dtype=torch.float64))
    theta.grad = (theta.detach() - torch.tensor(np.asarray(local_params), dtype=torch.float64)).mean(0)
    opt = torch.optim.SGD([theta], lr=lr, momentum=momentum, nesterov=True)
    opt.state[theta]["momentum_buffer"] = torch.tensor(momentum_buffer, dtype=torch.float64)
    opt.step()
    return theta.detach().numpy().copy(), opt.state[theta]["momentum_buffer"].numpy().copy()


def ex13_outer_step(fn):
    """``fn(global_params, local_params, momentum_buffer, lr, momentum)`` → ``(new_params, new_buffer)``: DiLoCo's
    outer step. ``global_params`` and ``momentum_buffer``: arrays of shape (P,); ``local_params``: shape (R, P)."""
    import numpy as np

    hint_en = ("Three steps, in this order. The pseudo-gradient of replica r is global − local (not local − global), "
               "and it is averaged over the replicas. The buffer becomes momentum · buffer + that average. Nesterov then "
               "steps along the average plus momentum · the new buffer, times lr. Return both arrays.")
    hint_zh = ("按顺序分三步。副本 r 的伪梯度是全局减本地（不是本地减全局），再对所有副本取平均。缓冲区变成 momentum · 缓冲区 + 这个平均值。"
               "Nesterov 沿着“平均值 + momentum · 新缓冲区”走一步，乘以 lr。两个数组都要返回。")
    rng = np.random.default_rng(13)
    cases = []
    for r, p, lr, mu, fresh in [(4, 6, 0.7, 0.9, True), (4, 6, 0.7, 0.9, False), (2, 3, 1.0, 0.5, True),
                                (8, 5, 0.5, 0.5, False), (1, 4, 0.7, 0.9, False)]:
        g = rng.standard_normal(p)
        local = g + 0.1 * rng.standard_normal((r, p))
        buf = np.zeros(p) if fresh else rng.standard_normal(p)
        cases.append(Case((g, local, buf, lr, mu), expected=_torch_outer_step(g, local, buf, lr, mu), rtol=1e-9,
                          atol=1e-12, hint_en=hint_en, hint_zh=hint_zh))
    verify("ex13_outer_step", fn, cases)


def ex13_quorum_plan(fn):
    """``fn(groups, steps, kill_group, kill_step, rejoin_step)`` → one ``(members, global_batch)`` pair per step:
    the sorted tuple of live group ids and 16 · their number. Expected: :func:`distlearn.fault_tolerance.replicas.
    plan_timeline`, whose quora the real lab's coordinator reproduces (tests/test_replica_groups.py)."""
    from distlearn.fault_tolerance.replicas import plan_timeline

    hint_en = ("Walk the steps one by one. The killed group is missing from step kill_step on (it dies *before* that "
               "step) and is back at rejoin_step (it heals, then computes in that very step). rejoin_step = steps "
               "means it never returns. Members as a sorted tuple; the batch is 16 samples per member.")
    hint_zh = ("逐步往下走。被杀掉的组从第 kill_step 步起缺席（它死在这一步*之前*），在第 rejoin_step 步回来（先恢复状态，"
               "再参与这一步的计算）。rejoin_step = steps 表示它再也不回来。成员写成排好序的元组；每个成员贡献 16 个样本。")

    def _pairs(got):
        try:
            return [(tuple(m), b) for m, b in got]
        except (TypeError, ValueError):
            return got

    cases = [Case(args, expected=[(q.members, 16 * len(q.members)) for q in plan_timeline(*args)],
                  compare=lambda got, exp: _pairs(got) == exp, hint_en=hint_en, hint_zh=hint_zh)
             for args in [(3, 12, 1, 4, 8), (2, 5, 0, 1, 5), (4, 8, 3, 2, 3), (3, 6, 2, 5, 6), (5, 10, 0, 3, 9)]]
    verify("ex13_quorum_plan", fn, cases)
