"""Fault-tolerant replica groups, the arithmetic side (chapter 13): who is in the quorum at each step, and a
one-process replay of a run with those quora.

The protocol (the course's own, after torchft's ``Manager``; the real processes are in
:mod:`distlearn.fault_tolerance.lab_replicas`): R replica groups train the same model with data parallelism
*between* groups. Before every step each live group reports to a coordinator (torchft: the *lighthouse*). The
coordinator waits for the groups that are alive, drops the ones that died, and announces the step's **quorum**:
its members, a quorum id that changes whenever the membership changes (the members then build a new process group),
the groups that must **heal** (a replacement that just started) and the live peer they copy the model and optimizer
state from. The members all-reduce their gradients and divide by the number of members: while a group is missing,
the global batch shrinks from R·16 to (R − 1)·16 samples, and the mean gradient is taken over fewer samples.

:func:`plan_timeline` gives the quora of one run with one group killed before ``kill_step`` and its replacement
joining at ``rejoin_step``; :func:`replay` trains one model in one process through any sequence of quora. The real
run must end with every group holding the replay's weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from distlearn.core.validate import DistlearnValueError, check_int, check_number, check_seed
from distlearn.fault_tolerance.diloco import make_data, make_model
from distlearn.fault_tolerance.lab_task import batch, flat_params, mse, set_grads

LR = 0.01          # AdamW's learning rate in the lab and the replay / 实验和重放中 AdamW 的学习率


@dataclass(frozen=True)
class Quorum:
    """One step's quorum: ``members`` (sorted group ids that compute and all-reduce this step), ``quorum_id``
    (changes when the members change), ``heal`` (groups that first copy the state from ``source``), ``dead``
    (groups not alive at this step). The global batch is 16 · len(members) samples."""
    step: int
    members: tuple
    quorum_id: int
    heal: tuple = ()
    source: int | None = None
    dead: tuple = ()


def plan_timeline(groups: int = 3, steps: int = 12, kill_group: int = 1, kill_step: int = 4,
                  rejoin_step: int = 8) -> list[Quorum]:
    """The quora of a run of ``steps`` steps with ``groups`` replica groups, where group ``kill_group`` dies before
    step ``kill_step`` and its replacement joins, and heals from the lowest-numbered live group, at
    ``rejoin_step``. Raises a bilingual ValueError for a kill or rejoin outside the run (0 < kill_step <
    rejoin_step ≤ steps; a rejoin at ``steps`` means never)."""
    g = check_int("groups", groups, minimum=2, maximum=8)
    n = check_int("steps", steps, minimum=2, maximum=1000)
    k = check_int("kill_group", kill_group, minimum=0, maximum=g - 1)
    ks = check_int("kill_step", kill_step, minimum=1, maximum=n - 1)
    rs = check_int("rejoin_step", rejoin_step, minimum=ks + 1, maximum=n)
    out, qid, prev = [], 0, None
    for s in range(n):
        dead = (k,) if ks <= s < rs else ()
        members = tuple(x for x in range(g) if x not in dead)
        if members != prev:
            qid, prev = qid + 1, members
        heal = (k,) if s == rs else ()
        out.append(Quorum(s, members, qid, heal, min(m for m in members if m not in heal) if heal else None, dead))
    return out


def replay(timeline: list[Quorum], groups: int | None = None, seed: int = 0, lr: float = LR) -> torch.Tensor:
    """Train one model in one process through ``timeline``: at each step, the mean of the gradients of the members'
    batches (16 rows of each member's shard, as in the lab), then one AdamW step. Returns the weights as one
    float64 vector of 321 values. ``groups``: the number of data shards (default: one more than the largest id)."""
    if not isinstance(timeline, (list, tuple)) or not timeline or not all(isinstance(q, Quorum) for q in timeline):
        raise DistlearnValueError("timeline", "timeline must be a non-empty list of Quorum records, e.g. "
                                  "plan_timeline().", "timeline 必须是由 Quorum 记录组成的非空列表，例如 plan_timeline()。")
    top = max(max(q.members) for q in timeline) + 1
    groups = top if groups is None else check_int("groups", groups, minimum=top, maximum=8)
    data = make_data(groups, check_seed("seed", seed))
    model = make_model(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=check_number("lr", lr, minimum=0, maximum=10, strict_min=True),
                            weight_decay=0.0)
    for q in timeline:
        grads = []
        for m in q.members:
            model.zero_grad()
            mse(model, batch(data.shards[m], q.step)).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        set_grads(model, torch.stack(grads).mean(0))
        opt.step()
    return flat_params(model)
