"""Chapter 01 lab: model states as real libraries keep them, on real processes.

- :func:`zero1_adam_state_bytes`: ZeRO stage 1 with PyTorch's ``ZeroRedundancyOptimizer`` (AdamW inside), which
  keeps Adam's state only for the parameters this rank owns.
- :func:`deepspeed_bf16_states`: DeepSpeed's ``BF16_Optimizer`` (bf16 weights, fp32 gradient accumulation and
  fp32 master weights; DeepSpeed 0.19.8 picks it for ``bf16`` + ZeRO stage 1 + ``grad_accum_dtype: fp32``,
  ``engine.py``: ``_do_optimizer_sanity_check``).
- :func:`fsdp2_mixed_states`: FSDP2 ``fully_shard`` with ``MixedPrecisionPolicy(param_dtype=bfloat16,
  reduce_dtype=float32)``.

Each counts, from the library's own tensors, the bytes of parameters, gradients and optimizer state when the
optimizer step begins (the second step, so the state exists), and follows the step's allocations with
:class:`distlearn.memory.measure.AllocationTracker` for its peak.

Run it alone: ``torchrun --nproc-per-node 2 -m distlearn.memory.lab``.
"""
import contextlib
import io

import torch
import torch.distributed as dist
import torch.nn.functional as F

from distlearn.core.launch import device, torchrun_main
from distlearn.memory.measure import TINY, AllocationTracker, StateCounter, tensor_bytes
from distlearn.core.models import build_model
from distlearn.core.guard import read_only


def zero1_adam_state_bytes(rank: int, world_size: int, seed: int = 0) -> dict:
    """One fp32 AdamW step under ``ZeroRedundancyOptimizer``; returns this rank's bytes.

    Keys: ``rank``; ``owned_params`` (number of parameters whose optimizer state this rank keeps);
    ``state_bytes`` (bytes of per-element Adam state on this rank: ``exp_avg`` + ``exp_avg_sq``);
    ``full_state_bytes`` (what plain AdamW would keep on every rank: 8 B × Ψ); ``num_params`` (Ψ);
    ``max_param_diff`` (largest difference of the updated parameters from rank 0's, after the optimizer's
    broadcast of each rank's updated parameters: 0.0 when the ranks agree).
    All ranks use the same seed and batch, so their gradients are equal without an all-reduce.
    """
    from torch.distributed.optim import ZeroRedundancyOptimizer

    torch.manual_seed(seed)
    model = build_model(TINY, device=str(device()))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-2)
    tokens = torch.randint(0, TINY.vocab_size, (2, 17), device=device())
    loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, TINY.vocab_size), tokens[:, 1:].reshape(-1))
    loss.backward()
    opt.step()

    local = opt.optim  # the AdamW that holds only this rank's partition
    owned = [p for g in local.param_groups for p in g["params"]]
    state_bytes = sum(tensor_bytes(v) for p in owned for v in local.state.get(p, {}).values()
                      if torch.is_tensor(v) and v.shape == p.shape)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    num_params = sum(p.numel() for p in model.parameters())
    dist.barrier()
    return {"rank": rank, "owned_params": sum(p.numel() for p in owned), "state_bytes": state_bytes,
            "full_state_bytes": 8 * num_params, "num_params": num_params,
            "max_param_diff": float((flat - ref).abs().max())}


def _tokens(seed: int = 0, batch: int = 2, seq_len: int = 16):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TINY.vocab_size, (batch, seq_len + 1), generator=g)


def _lm_loss(logits, tokens):
    return F.cross_entropy(logits.float().reshape(-1, TINY.vocab_size), tokens[:, 1:].reshape(-1).to(logits.device))


def _deepspeed_two_steps(rank: int, world_size: int, zero_stage: int, extra: dict, count, flat_buffers,
                         seed: int) -> dict:
    """Train :data:`TINY` two steps with ``deepspeed.initialize`` (bf16, ``torch.optim.AdamW`` inside) and count
    this rank's states at the start of the second ``engine.step()``.

    ``count(engine, optimizer, counter)`` adds the recipe's tensors to a :class:`StateCounter`;
    ``flat_buffers(optimizer)`` lists its flat bf16 parameter buffers (their size beyond ``num_params`` is
    alignment ``padding``). Returns a dict of bytes (``params``, ``grads``, ``optimizer``) with ``num_params``,
    ``padding`` (elements), ``step_peak``, ``optimizer_class`` and ``loss_before`` / ``loss_after``.
    """
    from distlearn.deepspeed_fsdp.deepspeed import deepspeed_config
    from distlearn.deepspeed_fsdp.lab import quiet_deepspeed

    torch.set_num_threads(1)
    deepspeed = quiet_deepspeed(False)
    torch.manual_seed(seed)
    model = build_model(TINY, device="cpu")
    num_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    config = deepspeed_config(micro_batch_size=2, dp=world_size, zero_stage=zero_stage, precision="bf16",
                              overlap_comm=False, gradient_clipping=None, reduce_bucket_size=10_000,
                              allgather_bucket_size=10_000,
                              extra={"zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 6, **extra})
    with contextlib.redirect_stdout(io.StringIO()):   # DeepSpeed prints memory usage while it builds the optimizer
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    tokens = _tokens(seed)
    with torch.no_grad():
        loss_before = _lm_loss(engine(tokens[:, :-1].to(engine.device)), tokens).item()
    for step in range(2):
        engine.backward(_lm_loss(engine(tokens[:, :-1].to(engine.device)), tokens))
        if step == 0:
            engine.step()
            continue
        counter = StateCounter()
        count(engine, optimizer, counter)
        counter.add_optimizer_state(optimizer.optimizer)
        with AllocationTracker(counter.tensors + list(engine.module.parameters())) as tracker:
            engine.step()
    with torch.no_grad():
        loss_after = _lm_loss(engine(tokens[:, :-1].to(engine.device)), tokens).item()
    padding = sum(f.numel() for f in flat_buffers(optimizer)) - num_params
    dist.barrier()
    return {"rank": rank, "num_params": num_params, **counter.bytes, "padding": padding, "step_peak": tracker.peak,
            "optimizer_class": type(optimizer).__name__, "loss_before": loss_before, "loss_after": loss_after}


def deepspeed_bf16_states(rank: int, world_size: int, immediate_grad_update: bool = False, seed: int = 0) -> dict:
    """Train :data:`TINY` two steps with ``deepspeed.initialize`` (bf16, ZeRO stage 1, ``grad_accum_dtype`` fp32,
    ``torch.optim.AdamW`` inside): DeepSpeed's ``BF16_Optimizer`` (``deepspeed/runtime/bf16_optimizer.py``).

    Counted at the start of the second ``engine.step()``, by storage: ``params`` (``bf16_groups_flat``, the flat
    bf16 buffer the model's parameters are views of), ``grads`` (the bf16 ``.grad`` of each parameter, kept unless
    ``immediate_grad_update``, plus ``fp32_groups_gradients_flat``, the fp32 accumulation buffer of the *whole*
    model), ``optimizer`` (``fp32_groups_flat_partition``, the fp32 master shard, and Adam's state on it).
    Returns a dict of bytes with ``num_params``, ``padding`` (elements of alignment padding in the flat buffers),
    ``step_peak``, ``optimizer_class`` and ``loss_before`` / ``loss_after``.
    """
    def count(engine, optimizer, counter):
        for flat in optimizer.bf16_groups_flat:
            counter.add(flat, "params")
        for p in engine.module.parameters():
            if p.grad is not None:
                counter.add(p.grad, "grads")
        for flat in optimizer.fp32_groups_gradients_flat:
            counter.add(flat, "grads")
        for master in optimizer.fp32_groups_flat_partition:
            counter.add(master, "optimizer")

    extra = {"data_types": {"grad_accum_dtype": "fp32"},
             "bf16": {"enabled": True, "immediate_grad_update": immediate_grad_update}}
    return _deepspeed_two_steps(rank, world_size, 1, extra, count, lambda opt: opt.bf16_groups_flat, seed)


def deepspeed_zero2_bf16_states(rank: int, world_size: int, seed: int = 0) -> dict:
    """Train :data:`TINY` two steps with ``deepspeed.initialize`` (bf16, ZeRO stage 2, gradients accumulated in
    bf16, the default): DeepSpeed's ``DeepSpeedZeroOptimizer`` (``deepspeed/runtime/zero/stage_1_and_2.py``), the
    ZeRO paper's mixed-precision recipe.

    Counted at the start of the second ``engine.step()``: ``params`` (``bit16_groups_flat``), ``grads`` (the
    reduced bf16 gradients of this rank's partition, ``averaged_gradients``), ``optimizer``
    (``single_partition_of_fp32_groups``, the fp32 master shard, and Adam's state). During the step DeepSpeed
    makes the fp32 gradient of the master shard (``single_partition_of_fp32_groups[i].grad``) and frees it after.
    Returns the same keys as :func:`deepspeed_bf16_states`."""
    def count(engine, optimizer, counter):
        for flat in optimizer.bit16_groups_flat:
            counter.add(flat, "params")
        for grads in optimizer.averaged_gradients.values():
            for g in grads or ():
                counter.add(g, "grads")
        for p in engine.module.parameters():
            if p.grad is not None:
                counter.add(p.grad, "grads")
        for master in optimizer.single_partition_of_fp32_groups:
            counter.add(master, "optimizer")

    return _deepspeed_two_steps(rank, world_size, 2, {}, count, lambda opt: opt.bit16_groups_flat, seed)


def fsdp2_mixed_states(rank: int, world_size: int, seed: int = 0) -> dict:
    """Train :data:`TINY` two steps with FSDP2 (``fully_shard`` on every block and the root) and
    ``MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)``, ``torch.optim.AdamW``.

    The sharded parameters stay fp32 — they are the master weights — and so do the sharded gradients; the bf16
    parameters exist only while a unit is unsharded for its forward or backward. Counted at the start of the
    second ``optimizer.step()``: this rank's local shards of ``params``, ``grads`` and Adam's ``optimizer`` state
    (bytes), ``num_params`` (Ψ of the model), ``param_dtype`` / ``grad_dtype`` of the shards, ``step_peak``,
    ``compute_dtype`` (the dtype a block's weights have during its forward), ``loss_before`` / ``loss_after``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(seed)
    dev = device()
    model = build_model(TINY, device=str(dev))
    num_params = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh(dev.type, (world_size,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    seen_dtype = []
    model.blocks[0].register_forward_pre_hook(lambda m, a: seen_dtype.append(str(next(m.parameters()).dtype)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    tokens = _tokens(seed)[rank::world_size] if world_size <= 2 else _tokens(seed)
    with torch.no_grad():
        loss_before = _lm_loss(model(tokens[:, :-1].to(dev)), tokens).item()
    for step in range(2):
        _lm_loss(model(tokens[:, :-1].to(dev)), tokens).backward()
        if step == 0:
            opt.step()
            opt.zero_grad()
            continue
        counter = StateCounter()
        params = list(model.parameters())
        for p in params:
            counter.add(p, "params")
        for p in params:
            counter.add(p.grad, "grads")
        counter.add_optimizer_state(opt)
        dtypes = (str(params[0].dtype), str(params[0].grad.dtype))
        with AllocationTracker(counter.tensors) as tracker:
            opt.step()
    with torch.no_grad():
        loss_after = _lm_loss(model(tokens[:, :-1].to(dev)), tokens).item()
    dist.barrier()
    return {"rank": rank, "num_params": num_params, **counter.bytes, "step_peak": tracker.peak,
            "param_dtype": dtypes[0], "grad_dtype": dtypes[1], "compute_dtype": seen_dtype[0],
            "loss_before": loss_before, "loss_after": loss_after}


def library_recipes(rank: int, world_size: int) -> dict:
    """:func:`deepspeed_zero2_bf16_states`, :func:`deepspeed_bf16_states` (``immediate_grad_update`` False and
    True) and :func:`fsdp2_mixed_states` in one launch: ``{recipe: result}``."""
    return {"deepspeed-zero2-bf16": deepspeed_zero2_bf16_states(rank, world_size),
            "deepspeed-bf16": deepspeed_bf16_states(rank, world_size, False),
            "deepspeed-bf16-immediate": deepspeed_bf16_states(rank, world_size, True),
            "fsdp2-bf16": fsdp2_mixed_states(rank, world_size)}


#: library recipe → (calculator precision, ZeRO stage) it must equal per rank, and what it is
LIBRARY_RECIPES = read_only({
    "deepspeed-zero2-bf16": ("mixed", 2, "DeepSpeed ZeRO-2, bf16 (DeepSpeedZeroOptimizer)"),
    "deepspeed-bf16": ("mixed-fp32-grads", 1, "DeepSpeed BF16_Optimizer (ZeRO-1, fp32 grad accumulation)"),
    "deepspeed-bf16-immediate": ("mixed-fp32-grads", 1, "  same, bf16.immediate_grad_update = true"),
    "fsdp2-bf16": ("fp32", 3, "FSDP2 + MixedPrecisionPolicy(param=bf16, reduce=fp32)"),
})


if __name__ == "__main__":
    torchrun_main(zero1_adam_state_bytes)
