"""A real RL loop on CPU: one trainer process and one or more generator processes (gloo), the weights sent from the
trainer to the generators after every update.

**The task.** A policy writes a sequence of ``LENGTH`` tokens from a vocabulary of ``VOCAB``, one token at a time;
the reward is the fraction of positions that match :data:`TARGET`. A random policy scores 1/8; a trained one, 1.
The policy (:class:`Policy`) is a two-layer MLP over (previous token, position): 584 parameters.

**The algorithm** (GRPO-style, Shao et al. 2024, arXiv 2402.03300, with one group per step): the generators sample
``batch`` sequences and the log-probabilities of the tokens they drew; the trainer scores them, normalises the
rewards inside the batch (advantage A = (r − mean) / (std + 1e-6)), recomputes the log-probabilities of the same
tokens with its own weights, and takes one Adam step on the PPO clipped objective (Schulman et al. 2017, eq. 7)
with the importance ratio ρ = exp(log π_trainer − log π_generator) per token:

    loss = − mean over tokens of min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A),   ε = 0.2.

When the generator's weights are the trainer's, ρ = 1 and the clip never acts: the objective is REINFORCE with a
group baseline. When they differ (rollouts k versions stale, a generator in bf16, a weight sync skipped), ρ ≠ 1:
the trainer corrects by ρ, and the clip stops the gradient of tokens whose ρ left [1 − ε, 1 + ε] on the side their
advantage pushes toward (above 1 + ε with A > 0, below 1 − ε with A < 0).

**The processes.** Rank 0 trains; ranks 1 … W − 1 generate ``batch / (W − 1)`` sequences each. Step i: each
generator samples with weights version max(0, i − k) (version v = after v updates; k = ``staleness``) and sends its
tokens and log-probs to rank 0 (``send`` / ``recv``); rank 0 trains and **broadcasts** the new flat weights (version
i + 1) to every rank. The steps run in lock-step: the lab reproduces *which weights* an asynchronous generator uses,
not the timing (that is :mod:`distlearn.post_training.rl_timeline`). :func:`train_reference` runs the same algorithm
in one process; the lab must equal it bit for bit (tests/test_post_training_rl.py).

Run it with :func:`distlearn.core.launch.run`, e.g. ``launch.run(lab_rl, 2, 40, 0)``, or ``torchrun
--nproc-per-node 2 -m distlearn.post_training.lab_rl``.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core.validate import DistlearnValueError, check_bool, check_choice, check_int, check_number, check_seed

__all__ = ["VOCAB", "LENGTH", "HIDDEN", "TARGET", "CLIP", "Policy", "RLRun", "make_policy", "sample",
           "sequence_logprobs", "reward", "advantages", "policy_loss", "check_arguments", "train_reference",
           "lab_rl", "lab_rl_colocated", "logprob_mismatch"]

VOCAB = 8                                               # tokens 0 … 7 / 词表大小
LENGTH = 6                                              # tokens per sequence / 每条序列的 token 数
HIDDEN = 24                                             # hidden width of the policy / 策略网络的隐藏层宽度
TARGET = tuple((3 * t + 1) % VOCAB for t in range(LENGTH))   # (1, 4, 7, 2, 5, 0)
CLIP = 0.2                                              # PPO's ε (Schulman et al. 2017) / PPO 的裁剪系数 ε
BOS = VOCAB                                             # the "previous token" of position 0 / 第 0 个位置的“前一个 token”
DTYPES = ("float32", "bfloat16")


def _torch():
    import torch

    return torch


def Policy():  # noqa: N802 — a factory that reads like the class it builds / 像类一样读的工厂函数
    """The policy network: one-hot(previous token or BOS, VOCAB + 1) ⊕ one-hot(position, LENGTH) → Linear(15, 24) →
    tanh → Linear(24, 8) logits. Use :func:`make_policy` for a seeded one."""
    torch = _torch()
    return torch.nn.Sequential(torch.nn.Linear(VOCAB + 1 + LENGTH, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, VOCAB))


def make_policy(seed: int = 0):
    """A :func:`Policy` initialised from ``seed`` (torch's default init). Raises DistlearnValueError."""
    torch = _torch()
    check_seed("seed", seed)
    torch.manual_seed(seed)
    return Policy()


def _features(prev, position: int):
    """Inputs of one position: prev (B,) int64 → (B, VOCAB + 1 + LENGTH) float32."""
    torch = _torch()
    x = torch.zeros(prev.shape[0], VOCAB + 1 + LENGTH)
    x[torch.arange(prev.shape[0]), prev] = 1.0
    x[:, VOCAB + 1 + position] = 1.0
    return x


def sample(policy, batch: int, seed: int, dtype: str = "float32"):
    """What a generator does: draw ``batch`` sequences token by token from ``policy`` (run in ``dtype``, as an
    inference engine may) with a ``torch.Generator`` seeded by ``seed``. Returns (tokens (batch, LENGTH) int64,
    log-probs (batch, LENGTH) float32 of the drawn tokens under the policy as run). Raises DistlearnValueError."""
    torch = _torch()
    batch = check_int("batch", batch, minimum=1, maximum=4096)
    check_seed("seed", seed)
    check_choice("dtype", dtype, DTYPES)
    gen = torch.Generator().manual_seed(seed)
    model = policy if dtype == "float32" else _cast(policy, torch.bfloat16)
    prev = torch.full((batch,), BOS, dtype=torch.long)
    tokens, logps = [], []
    with torch.no_grad():
        for t in range(LENGTH):
            logits = model(_features(prev, t).to(next(model.parameters()).dtype)).float()
            logp = torch.log_softmax(logits, dim=-1)
            tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
            tokens.append(tok)
            logps.append(logp.gather(1, tok[:, None]).squeeze(1))
            prev = tok
    return torch.stack(tokens, 1), torch.stack(logps, 1)


def _cast(policy, dtype):
    import copy

    return copy.deepcopy(policy).to(dtype)


def sequence_logprobs(policy, tokens):
    """What the trainer does: log-probs (B, LENGTH) of ``tokens`` (B, LENGTH) under ``policy`` in fp32, all positions
    in one forward pass of B·LENGTH rows (teacher forcing), with gradients."""
    torch = _torch()
    b = tokens.shape[0]
    prev = torch.cat([torch.full((b, 1), BOS, dtype=torch.long), tokens[:, :-1]], 1)
    x = torch.cat([_features(prev[:, t], t) for t in range(LENGTH)], 0)          # (LENGTH·B, 15)
    logp = torch.log_softmax(policy(x), dim=-1).view(LENGTH, b, VOCAB)
    return logp.gather(2, tokens.T[:, :, None]).squeeze(2).T                     # (B, LENGTH)


def reward(tokens):
    """Fraction of positions equal to :data:`TARGET`: (B, LENGTH) → (B,) float32 in [0, 1]."""
    torch = _torch()
    return (tokens == torch.tensor(TARGET)).float().mean(1)


def advantages(rewards):
    """Group-normalised advantages (GRPO): (r − mean) / (std + 1e-6) over the batch, (B,) → (B,)."""
    return (rewards - rewards.mean()) / (rewards.std() + 1e-6)


def policy_loss(logp_train, logp_gen, adv, clip: float = CLIP):
    """The PPO clipped loss with ρ = exp(logp_train − logp_gen) per token (both (B, LENGTH); adv (B,)). Returns
    (loss, ρ detached, fraction of tokens where the clip acts: ρ outside [1 − clip, 1 + clip] on the side that
    matters for the sign of A)."""
    torch = _torch()
    ratio = torch.exp(logp_train - logp_gen)
    a = adv[:, None]
    unclipped, clipped = ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a
    loss = -torch.minimum(unclipped, clipped).mean()
    acts = (clipped < unclipped).float().mean().item()
    return loss, ratio.detach(), acts


@dataclass(frozen=True)
class RLRun:
    """One training run. Per step: ``rewards`` (mean reward of the batch), ``logprob_gap`` (max |log π_trainer −
    log π_generator| over the batch's tokens), ``ratio_dev`` (mean |ρ − 1|), ``clipped`` (fraction of tokens the
    clip acts on), ``versions`` (the weight version each batch was generated with). ``final``: the trainer's weights
    as one flat fp32 tensor. ``staleness``, ``generator_dtype``, ``sync`` as run."""

    rewards: tuple[float, ...]
    logprob_gap: tuple[float, ...]
    ratio_dev: tuple[float, ...]
    clipped: tuple[float, ...]
    versions: tuple[int, ...]
    final: object
    staleness: int
    generator_dtype: str
    sync: bool


def check_arguments(world_size: int, steps: int, staleness: int, batch: int, lr: float, seed: int,
                    generator_dtype: str, sync: bool) -> None:
    """Refuse bad lab arguments (DistlearnValueError): world_size 2 … 8 (one trainer, the rest generators), steps
    1 … 2,000, staleness 0 … 16, batch 2 … 4,096 and divisible by the number of generators, lr in (0, 1], seed,
    generator_dtype one of ("float32", "bfloat16"), sync a bool."""
    check_int("world_size", world_size, minimum=2, maximum=8)
    check_int("steps", steps, minimum=1, maximum=2000)
    check_int("staleness", staleness, minimum=0, maximum=16)
    check_int("batch", batch, minimum=2, maximum=4096)
    if batch % (world_size - 1):
        raise DistlearnValueError("batch", f"batch = {batch} must divide among the {world_size - 1} generators.",
                                  f"batch = {batch} 必须能平均分给 {world_size - 1} 个生成器。")
    check_number("lr", lr, minimum=0, maximum=1, strict_min=True)
    check_seed("seed", seed)
    check_choice("generator_dtype", generator_dtype, DTYPES)
    check_bool("sync", sync)


def _sample_seed(seed: int, step: int, generator: int) -> int:
    """The sampling seed of generator ``generator`` (0-based) at ``step``: the same in the lab and the reference."""
    return (seed * 1_000_003 + step * 64 + generator) % (2 ** 32)


def _train_step(policy, opt, tokens, logp_gen):
    """One update on a batch; returns (mean reward, max |Δ log-prob|, mean |ρ − 1|, clipped fraction)."""
    torch = _torch()
    r = reward(tokens)
    logp_train = sequence_logprobs(policy, tokens)
    loss, ratio, acts = policy_loss(logp_train, logp_gen, advantages(r))
    opt.zero_grad()
    loss.backward()
    opt.step()
    gap = (logp_train.detach() - logp_gen).abs().max().item()
    return r.mean().item(), gap, (ratio - 1).abs().mean().item(), acts


def _flat(policy):
    torch = _torch()
    return torch.cat([p.detach().reshape(-1) for p in policy.parameters()])


def _load_flat(policy, flat) -> None:
    torch = _torch()
    torch.nn.utils.vector_to_parameters(flat.clone(), policy.parameters())


def train_reference(steps: int = 40, staleness: int = 0, batch: int = 64, lr: float = 0.05, seed: int = 0,
                    generator_dtype: str = "float32", sync: bool = True, generators: int = 1) -> RLRun:
    """The same algorithm as :func:`lab_rl` in one process, for ``generators`` generators (1 … 7): every batch
    generated with weights version max(0, i − staleness) (version 0 forever when ``sync`` is False). Returns an
    :class:`RLRun`. Raises DistlearnValueError."""
    torch = _torch()
    generators = check_int("generators", generators, minimum=1, maximum=7)
    check_arguments(generators + 1, steps, staleness, batch, lr, seed, generator_dtype, sync)
    policy = make_policy(seed)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    history = [_flat(policy)]
    gen_policy = make_policy(seed)
    out = {"rewards": [], "gap": [], "dev": [], "clip": [], "versions": []}
    for i in range(steps):
        version = max(0, i - staleness) if sync else 0
        _load_flat(gen_policy, history[version])
        parts = [sample(gen_policy, batch // generators, _sample_seed(seed, i, g), generator_dtype)
                 for g in range(generators)]
        tokens = torch.cat([p[0] for p in parts])
        logp_gen = torch.cat([p[1] for p in parts])
        for key, value in zip(("rewards", "gap", "dev", "clip"), _train_step(policy, opt, tokens, logp_gen)):
            out[key].append(value)
        out["versions"].append(version)
        history.append(_flat(policy))
    return RLRun(tuple(out["rewards"]), tuple(out["gap"]), tuple(out["dev"]), tuple(out["clip"]),
                 tuple(out["versions"]), _flat(policy), staleness, generator_dtype, sync)


def lab_rl(rank: int, world_size: int, steps: int = 40, staleness: int = 0, batch: int = 64, lr: float = 0.05,
           seed: int = 0, generator_dtype: str = "float32", sync: bool = True):
    """One process of the RL loop (run it with :func:`distlearn.core.launch.run`): rank 0 the trainer, ranks 1 …
    W − 1 the generators. Per step i: each generator samples batch / (W − 1) sequences with weights version
    max(0, i − staleness) and sends tokens (int64) and log-probs (fp32) to rank 0; rank 0 trains on them and
    broadcasts its new flat weights (fp32, 4 bytes × 584 parameters) to every rank — unless ``sync`` is False,
    the deliberate break: then nothing is sent and the generators keep version 0.
    Returns the :class:`RLRun` on rank 0 and, on a generator, the list of versions it used."""
    import torch.distributed as dist

    torch = _torch()
    check_arguments(world_size, steps, staleness, batch, lr, seed, generator_dtype, sync)
    policy = make_policy(seed)
    flat = _flat(policy)
    dist.broadcast(flat, src=0)                       # version 0: everyone starts from rank 0's weights / 版本 0
    _load_flat(policy, flat)
    per = batch // (world_size - 1)
    if rank == 0:
        opt = torch.optim.Adam(policy.parameters(), lr=lr)
        out = {"rewards": [], "gap": [], "dev": [], "clip": [], "versions": []}
        for i in range(steps):
            tokens, logps = [], []
            for g in range(1, world_size):            # the generators' rollouts / 各生成器的采样结果
                tok, lp = torch.empty(per, LENGTH, dtype=torch.long), torch.empty(per, LENGTH)
                dist.recv(tok, src=g)
                dist.recv(lp, src=g)
                tokens.append(tok)
                logps.append(lp)
            for key, value in zip(("rewards", "gap", "dev", "clip"),
                                  _train_step(policy, opt, torch.cat(tokens), torch.cat(logps))):
                out[key].append(value)
            out["versions"].append(max(0, i - staleness) if sync else 0)
            if sync:
                dist.broadcast(_flat(policy), src=0)  # version i + 1 to every generator / 把版本 i + 1 发给生成器
        return RLRun(tuple(out["rewards"]), tuple(out["gap"]), tuple(out["dev"]), tuple(out["clip"]),
                     tuple(out["versions"]), _flat(policy), staleness, generator_dtype, sync)
    history, used = [flat], []
    for i in range(steps):
        version = max(0, i - staleness) if sync else 0
        _load_flat(policy, history[version])
        tok, lp = sample(policy, per, _sample_seed(seed, i, rank - 1), generator_dtype)
        dist.send(tok, dst=0)
        dist.send(lp, dst=0)
        used.append(version)
        if sync:
            new = torch.empty_like(flat)
            dist.broadcast(new, src=0)                # receive version i + 1 / 接收版本 i + 1
            history.append(new)
    return used


def lab_rl_colocated(rank: int, world_size: int, steps: int = 40, batch: int = 64, lr: float = 0.05, seed: int = 0):
    """The colocated placement on real processes (run it with :func:`distlearn.core.launch.run`): every rank both
    generates and trains. For training each rank keeps one shard of the flat fp32 weights (584 parameters padded to
    a multiple of W) and Adam's state for it, as FSDP does. Per step: ``all_gather_single`` rebuilds the full
    weights on every rank (the reshard to the generation layout: here full replicas); each rank samples
    batch / W sequences with the seed a generator of that index would use; the rewards are all-gathered so that
    the advantages are normalised over the whole batch; each rank computes the gradient of its tokens' loss, and
    ``reduce_scatter_single`` sums the gradients into the shards (divided by W: the mean over all tokens); Adam steps
    on the shard. No weight broadcast is needed: generator and trainer are the same weights.

    Mathematically this is :func:`train_reference` with ``generators=world_size`` and staleness 0; the sums run in
    another order, so the numbers agree to rounding (tests/test_post_training_rl.py). Returns the :class:`RLRun` on
    every rank (rank 0's is the one to read)."""
    import torch.distributed as dist

    torch = _torch()
    check_int("world_size", world_size, minimum=1, maximum=8)
    check_arguments(world_size + 1, steps, 0, batch, lr, seed, "float32", True)
    policy = make_policy(seed)
    flat = _flat(policy)
    per_shard = -(-flat.numel() // world_size)
    padded = torch.zeros(per_shard * world_size)
    padded[:flat.numel()] = flat
    shard = torch.nn.Parameter(padded[rank * per_shard:(rank + 1) * per_shard].clone())
    opt = torch.optim.Adam([shard], lr=lr)
    per = batch // world_size
    out = {"rewards": [], "gap": [], "dev": [], "clip": []}
    for i in range(steps):
        full = torch.empty(per_shard * world_size)
        dist.all_gather_single(full, shard.detach())          # training shards -> full weights / 分片 -> 完整权重
        _load_flat(policy, full[:flat.numel()])
        tokens, logp_gen = sample(policy, per, _sample_seed(seed, i, rank))
        r = reward(tokens)
        everyone = torch.empty(per * world_size)
        dist.all_gather_single(everyone, r)                   # the whole batch's rewards / 整个批次的奖励
        adv = advantages(everyone)[rank * per:(rank + 1) * per]
        policy.zero_grad()
        logp_train = sequence_logprobs(policy, tokens)
        loss, ratio, acts = policy_loss(logp_train, logp_gen, adv)
        loss.backward()
        grad = torch.zeros(per_shard * world_size)
        grad[:flat.numel()] = torch.cat([p.grad.reshape(-1) for p in policy.parameters()])
        shard.grad = torch.empty(per_shard)
        dist.reduce_scatter_single(shard.grad, grad)               # sum the gradients into the shards / 梯度求和到分片
        shard.grad /= world_size
        opt.step()
        stats = torch.tensor([(logp_train.detach() - logp_gen).abs().max().item(), (ratio - 1).abs().mean().item(),
                              acts])
        dist.all_reduce(stats[:1], op=dist.ReduceOp.MAX)
        dist.all_reduce(stats[1:])
        out["rewards"].append(everyone.mean().item())
        out["gap"].append(stats[0].item())
        out["dev"].append(stats[1].item() / world_size)
        out["clip"].append(stats[2].item() / world_size)
    full = torch.empty(per_shard * world_size)
    dist.all_gather_single(full, shard.detach())
    return RLRun(tuple(out["rewards"]), tuple(out["gap"]), tuple(out["dev"]), tuple(out["clip"]), tuple(range(steps)),
                 full[:flat.numel()].clone(), 0, "float32", True)


def logprob_mismatch(run: RLRun, tol: float = 1e-5) -> list[int]:
    """The steps of ``run`` whose largest |log π_trainer − log π_generator| over the batch exceeds ``tol``. In a
    synchronous fp32 run (staleness 0) the generator holds the trainer's weights, so the list must be empty: a
    weight sync skipped by mistake shows here from step 1 on. Raises DistlearnValueError."""
    if not isinstance(run, RLRun):
        raise DistlearnValueError("run", f"run must be an RLRun (what lab_rl returns on rank 0); got {run!r}.",
                                  f"run 必须是 RLRun（lab_rl 在 rank 0 上的返回值）；收到 {run!r}。")
    tol = check_number("tol", tol, minimum=0, strict_min=True)
    return [i for i, gap in enumerate(run.logprob_gap) if gap > tol]

def torchrun_entry(rank: int, world_size: int):
    """What ``torchrun --nproc-per-node N -m distlearn.post_training.lab_rl`` runs: :func:`lab_rl` for 40 steps,
    synchronous, with the largest batch ≤ 64 that the N − 1 generators split evenly (63 on 4 processes)."""
    return lab_rl(rank, world_size, 40, 0, batch=64 // max(world_size - 1, 1) * max(world_size - 1, 1))


if __name__ == "__main__":
    from distlearn.core.launch import torchrun_main

    torchrun_main(torchrun_entry, backend="gloo")   # CPU tensors throughout: gloo even on a GPU machine / 全程 CPU 张量：有 GPU 也用 gloo
