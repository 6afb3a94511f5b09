"""DiLoCo / local SGD: R replicas train alone for H inner steps, then meet in one all-reduce (chapter 13).

The algorithm (Douillard et al., "DiLoCo: Distributed Low-Communication Training of Language Models", 2023,
Algorithm 1; the same protocol as ``torchft/local_sgd.py`` class ``DiLoCo``):

1. every replica starts the round from the global weights θ;
2. it runs ``sync_every`` = H inner steps of its own optimizer (AdamW in the paper) on its own data shard; the
   inner optimizer's state stays with the replica from round to round;
3. the pseudo-gradient Δ_r = θ − θ_r (global minus local) is averaged over the R replicas by **one** all-reduce;
4. the outer optimizer (SGD with Nesterov momentum, lr 0.7, momentum 0.9 in the paper) steps θ with gradient mean Δ;
   every replica copies the new θ.

With H = 1, plain SGD inside and plain SGD outside with lr 1 and no momentum, one round is one step of synchronous
data parallelism: θ − mean_r(θ − (θ − η g_r)) = θ − η · mean_r g_r. :func:`simulate` and :func:`simulate_ddp` show
it, and :func:`distlearn.fault_tolerance.lab_diloco.lab_diloco` / ``lab_ddp`` do the same on real gloo processes (``torch.nn.parallel.
DistributedDataParallel`` for the baseline).

The task is small and deterministic: a student MLP 8 → 32 → 1 (tanh, float64, 321 parameters) fits a fixed
random teacher MLP on R data shards of 256 samples each; a step reads a batch of 16 rows of its replica's shard, in
order; the loss (mean squared error) is measured on 512 held-out samples. float64 so that a sum over 4 ranks in
gloo's order and a sum in one process agree to ~1e-15, and the equalities are tested with a tight tolerance.

Communication: one all-reduce of all P parameters (P · 8 bytes in float64) per synchronisation, every step for DDP
and every H steps for DiLoCo. :func:`bytes_per_step` gives the bytes each rank sends per inner step with a ring
all-reduce, 2(R−1)/R · P · b / H; the labs (:mod:`distlearn.fault_tolerance.lab_diloco`) count the bytes they hand to the all-reduce.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from distlearn.core.validate import check_int, check_seed
from distlearn.fault_tolerance.lab_task import (BATCH, INNER, SHARD, batch, check_arguments, flat_params,
                                                inner_optimizer, mse, outer_optimizer, set_grads)

# Douillard et al. 2023, §2 Algorithm 1 and §3 (experimental setup): inner AdamW, outer Nesterov SGD.
PAPER_OUTER_LR = 0.7
PAPER_OUTER_MOMENTUM = 0.9
PAPER_SYNC_EVERY = 500       # H: inner steps between synchronisations
PAPER_WORKERS = 8            # "DiLoCo on 8 workers performs as well as fully synchronous optimization while
PAPER_REDUCTION = 500        #  communicating 500 times less" (abstract)

IN, HIDDEN = 8, 32
EVAL = 512


def make_model(seed: int = 0) -> torch.nn.Sequential:
    """The student: Linear(8, 32) → tanh → Linear(32, 1), float64, initialised from ``seed`` (same on every rank)."""
    torch.manual_seed(check_seed("seed", seed))
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)).double()


def num_params() -> int:
    """P, the student's parameter count: 8·32 + 32 + 32·1 + 1 = 321."""
    return sum(p.numel() for p in make_model().parameters())


@dataclass(frozen=True)
class Data:
    """``shards[r]``: (x of shape (256, 8), y of shape (256, 1)) for replica r; ``eval``: 512 held-out pairs."""
    shards: list
    eval: tuple


def make_data(replicas: int, seed: int = 0) -> Data:
    """R shards drawn from one fixed teacher MLP (8 → 16 → 1, tanh, seed 1000 + ``seed``) plus noise σ = 0.05."""
    check_int("replicas", replicas, minimum=1, maximum=16)
    g = torch.Generator().manual_seed(1000 + check_seed("seed", seed))
    w1, w2 = torch.randn(IN, 16, generator=g, dtype=torch.float64), torch.randn(16, 1, generator=g, dtype=torch.float64)

    def draw(n):
        x = torch.randn(n, IN, generator=g, dtype=torch.float64)
        return x, torch.tanh(x @ w1) @ w2 / 4 + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)

    shards = [draw(SHARD) for _ in range(replicas)]
    return Data(shards, draw(EVAL))







@dataclass
class Run:
    """A training run: ``eval_steps[i]`` inner steps done when ``eval_loss[i]`` was measured on the held-out set
    (global weights; step 0 = before training), ``sent_bytes[i]`` bytes handed to all-reduces by one replica by
    then; ``final``: the global weights as one float64 vector of P values."""
    eval_steps: list = field(default_factory=list)
    eval_loss: list = field(default_factory=list)
    sent_bytes: list = field(default_factory=list)
    final: torch.Tensor | None = None

    def record(self, step, model, data, sent):
        with torch.no_grad():
            self.eval_loss.append(mse(model, data.eval).item())
        self.eval_steps.append(step)
        self.sent_bytes.append(sent)



# ---------------------------------------------------------------- one process, R replicas in turn

def simulate(replicas: int = 4, sync_every: int = 5, steps: int = 200, inner: str = "adamw", inner_lr: float = 0.01,
             outer_lr: float = PAPER_OUTER_LR, outer_momentum: float = PAPER_OUTER_MOMENTUM, seed: int = 0) -> Run:
    """DiLoCo with R = ``replicas`` replicas run one after another in this process; ``steps`` inner steps in all
    (a multiple of ``sync_every`` = H). Returns a :class:`Run` evaluated after every synchronisation. Raises a
    bilingual ValueError naming the parameter for a value out of range."""
    check_arguments(replicas, sync_every, steps, inner, inner_lr, outer_lr, outer_momentum, seed)
    data = make_data(replicas, seed)
    glob = make_model(seed)                                          # θ, the global weights / 全局权重 θ
    outer = outer_optimizer(glob.parameters(), outer_lr, outer_momentum)
    local = [make_model(seed) for _ in range(replicas)]              # θ_r, one copy per replica / 每个副本一份
    inner_opts = [inner_optimizer(m, inner, inner_lr) for m in local]     # kept across rounds / 跨轮保留
    run, sent, nbytes = Run(), 0, 8 * num_params()
    run.record(0, glob, data, sent)
    for rnd in range(steps // sync_every):
        for r in range(replicas):                                    # H inner steps, alone / 各自走 H 步
            for h in range(sync_every):
                inner_opts[r].zero_grad()
                mse(local[r], batch(data.shards[r], rnd * sync_every + h)).backward()
                inner_opts[r].step()
        delta = torch.stack([flat_params(glob) - flat_params(m) for m in local]).mean(0)   # mean pseudo-gradient / 平均伪梯度
        set_grads(glob, delta)
        outer.step()                                                 # outer Nesterov step / 外层 Nesterov 一步
        for m in local:
            m.load_state_dict(glob.state_dict())                     # everyone restarts from θ / 都从 θ 重新出发
        sent += nbytes
        run.record((rnd + 1) * sync_every, glob, data, sent)
    run.final = flat_params(glob)
    return run



def simulate_ddp(replicas: int = 4, steps: int = 200, optimizer: str = "adamw", lr: float = 0.01,
                 seed: int = 0, eval_every: int = 1) -> Run:
    """Synchronous data parallelism in one process: each step every replica takes the gradient of its own batch, the
    R gradients are averaged (what DDP's all-reduce computes) and one ``optimizer`` step updates the one model.
    Evaluated every ``eval_every`` steps. Same data and initial weights as :func:`simulate`."""
    check_arguments(replicas, eval_every, steps, optimizer, lr, 1.0, 0.0, seed)
    data = make_data(replicas, seed)
    model = make_model(seed)
    opt = inner_optimizer(model, optimizer, lr)
    run, sent, nbytes = Run(), 0, 8 * num_params()
    run.record(0, model, data, sent)
    for step in range(steps):
        grads = []
        for r in range(replicas):
            model.zero_grad()
            mse(model, batch(data.shards[r], step)).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        set_grads(model, torch.stack(grads).mean(0))                # the all-reduce / 即 all-reduce
        opt.step()
        sent += nbytes
        if (step + 1) % eval_every == 0:
            run.record(step + 1, model, data, sent)
    run.final = flat_params(model)
    return run


def bytes_per_step(num_params: int, bytes_per_value: int, replicas: int, sync_every: int = 1) -> float:
    """Bytes one rank sends per inner step with a ring all-reduce of all parameters every ``sync_every`` = H steps:
    2(R−1)/R · P · b / H (H = 1: DDP). Example: 1e9 parameters in bf16 (b = 2) on R = 8: DDP 3.5e9 bytes (3.5 GB)
    per step; DiLoCo with H = 500: 7e6 bytes (7 MB)."""
    from distlearn.core.comm import ring_bytes_per_rank

    p = check_int("num_params", num_params, minimum=1)
    b = check_int("bytes_per_value", bytes_per_value, minimum=1, maximum=8)
    h = check_int("sync_every", sync_every, minimum=1)
    return ring_bytes_per_rank("all_reduce", p * b, check_int("replicas", replicas, minimum=1)) / h
