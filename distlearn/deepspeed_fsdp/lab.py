"""Real DeepSpeed ZeRO stages 1, 2 and 3 on CPU with gloo: the same tiny GPT, each rank's partition sizes, and the
losses compared with plain single-process PyTorch.

Run from a notebook::

    from distlearn.core import launch
    from distlearn.deepspeed_fsdp import lab
    results = launch.run(lab.train_stages, 2, (1, 2, 3))   # 2 ranks, ZeRO stages 1, 2, 3
    lab.reference_losses()                               # the same steps in one process, no DeepSpeed

or alone: ``torchrun --nproc-per-node 2 -m distlearn.deepspeed_fsdp.lab`` (stages 1, 2, 3).

How it works: :func:`distlearn.core.launch.run` has already created the gloo process group and set ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; ``deepspeed.initialize`` finds the initialized
``torch.distributed`` group and uses it (its CPU accelerator picks gloo when oneCCL is absent). Each rank trains on
its half of a fixed batch of ``GLOBAL_BATCH`` sequences; DeepSpeed averages the gradients over the ranks, so the
mean loss must equal the full-batch loss of one process. Everything is fp32 (so they agree to ~1e-6) and the
optimizer is ``torch.optim.AdamW`` (element-wise, so updating a flat shard equals updating whole tensors): no C++
op has to be compiled. DeepSpeed 0.19.8 would still build its shared-memory all-reduce kernel
(``deepspeed_shm_comm``, ~20 s of g++ on first use) when it sets up communication; that kernel only serves
``inference_all_reduce`` (deepspeed/comm/torch.py), never training, so :func:`train_zero` marks it incompatible
unless ``build_shm_op=True``.
"""
from __future__ import annotations

import logging
import warnings

import torch
import torch.nn.functional as F

from distlearn.core.launch import torchrun_main
from distlearn.core.models import ModelConfig, build_model, count_parameters
from distlearn.core.guard import read_only

# What distlearn.core.launch's forkserver imports for these labs (distlearn.core.launch.lab_preload): DeepSpeed and the Muon
# module every ZeRO initialize imports, once in the server instead of in every worker (see the module named).
FORKSERVER_PRELOAD = read_only(["distlearn.deepspeed_fsdp.lab_preload"])

TINY = ModelConfig("tiny-gpt", "gpt", vocab_size=64, hidden_size=32, num_layers=2, num_heads=4,
                   ffn_hidden_size=128, max_seq_len=16)
GLOBAL_BATCH = 4
LR = 1e-2


def batch(seed: int = 0, step: int = 0):
    """The fixed global batch of step ``step``: ``(tokens, targets)``, each ``(GLOBAL_BATCH, max_seq_len)`` int64."""
    g = torch.Generator().manual_seed(1000 * seed + step)
    data = torch.randint(0, TINY.vocab_size, (GLOBAL_BATCH, TINY.max_seq_len + 1), generator=g)
    return data[:, :-1], data[:, 1:]


def tiny_model(seed: int):
    """:data:`TINY` as a real ``nn.Module`` on the CPU, initialized from ``torch.manual_seed(seed)``: the same
    weights in every process and in :func:`reference_losses`."""
    torch.manual_seed(seed)
    return build_model(TINY, device="cpu")


def token_loss(logits, targets):
    """Mean cross-entropy over every token: ``logits`` (batch, seq, vocab_size) float, ``targets`` (batch, seq)
    int64 token ids. Returns a scalar tensor."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def reference_losses(steps: int = 3, seed: int = 0) -> list[float]:
    """Plain PyTorch in one process: full batch, AdamW, the same initial weights. Returns one loss per step."""
    torch.set_num_threads(1)
    model = tiny_model(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for step in range(steps):
        tokens, targets = batch(seed, step)
        loss = token_loss(model(tokens), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def ds_config(zero_stage: int, world_size: int) -> dict:
    """The DeepSpeed config of this lab (built with :func:`distlearn.deepspeed_fsdp.deepspeed.deepspeed_config`)."""
    from distlearn.deepspeed_fsdp.deepspeed import deepspeed_config

    return deepspeed_config(micro_batch_size=GLOBAL_BATCH // world_size, gradient_accumulation_steps=1,
                            dp=world_size, zero_stage=zero_stage, precision="fp32", reduce_bucket_size=10_000,
                            allgather_bucket_size=10_000, overlap_comm=False, extra={"zero_allow_untested_optimizer": True,
                                                                 "steps_per_print": 10_000})


def quiet_deepspeed(build_shm_op: bool):
    """Import DeepSpeed for a lab worker (:func:`~distlearn.deepspeed_fsdp.deepspeed.require_deepspeed`: CPU
    accelerator without a GPU, a bilingual install hint when it is missing) with its logging and torch's
    deprecation warnings silenced; ``build_shm_op=False`` keeps it from compiling its shared-memory all-reduce
    kernel (``deepspeed_shm_comm``, ~20 s of g++: see the module doc). Returns the ``deepspeed`` module."""
    from distlearn.deepspeed_fsdp.deepspeed import prepare_deepspeed, require_deepspeed

    prepare_deepspeed()
    # torch 2.13 deprecates the *_tensor collectives DeepSpeed 0.19.8 calls; the warnings say nothing about ZeRO
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="deepspeed")
    deepspeed = require_deepspeed()  # the real package; a bilingual install hint if it is missing

    for name in ("DeepSpeed", "deepspeed"):
        logging.getLogger(name).setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    if not build_shm_op:
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    return deepspeed


def train_zero(rank: int, world_size: int, zero_stage: int, steps: int = 3, seed: int = 0,
               build_shm_op: bool = False) -> dict:
    """Train :data:`TINY` with ``deepspeed.initialize`` under ZeRO ``zero_stage`` (1, 2 or 3) on this rank.

    Returns ``{"rank", "losses"`` (global mean loss per step, all-reduced), ``"num_params"`` (Ψ of the model),
    ``"param_numel"`` (parameter elements this rank stores: Ψ for stages 1–2, its partition for stage 3),
    ``"optimizer_numel"`` (elements of Adam's ``exp_avg`` this rank stores: its partition for every stage),
    ``"zero_stage"}``. Partitions may be padded so that every rank holds the same number of elements.
    """
    torch.set_num_threads(1)
    deepspeed = quiet_deepspeed(build_shm_op)
    import torch.distributed as dist

    model = tiny_model(seed)
    num_params = count_parameters(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                                   config=ds_config(zero_stage, world_size))
    per_rank = GLOBAL_BATCH // world_size
    losses = []
    for step in range(steps):
        tokens, targets = batch(seed, step)
        sl = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = token_loss(engine(tokens[sl].to(engine.device)), targets[sl].to(engine.device))
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world_size)

    inner = optimizer.optimizer  # the torch AdamW that DeepSpeed's ZeRO optimizer drives
    optimizer_numel = sum(s["exp_avg"].numel() for s in inner.state.values() if "exp_avg" in s)
    if zero_stage == 3:
        param_numel = sum(p.ds_tensor.numel() for p in engine.module.parameters())
    else:
        param_numel = sum(p.numel() for p in engine.module.parameters())
    return {"rank": rank, "losses": losses, "num_params": num_params, "param_numel": param_numel,
            "optimizer_numel": optimizer_numel, "zero_stage": zero_stage}


def train_stages(rank: int, world_size: int, stages=(1, 2, 3), steps: int = 3, seed: int = 0) -> list[dict]:
    """:func:`train_zero` for each stage in ``stages``, one after the other in the same processes (DeepSpeed's
    first ``initialize`` imports a lot — torch.compile machinery for its Muon optimizer check —, so paying it
    once keeps the three stages to a few seconds). Returns one result dict per stage."""
    return [train_zero(rank, world_size, stage, steps, seed) for stage in stages]


if __name__ == "__main__":
    torchrun_main(train_stages)
