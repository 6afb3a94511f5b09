"""Count the collectives real DeepSpeed ZeRO and real FSDP2 issue in one optimizer step with gradient accumulation,
to check :func:`distlearn.zero_fsdp.traffic.step_collectives` against the engines themselves.

:class:`CollectiveRecorder` is a ``TorchDispatchMode``: every ``torch.distributed`` collective reaches the process
group through a ``c10d`` operator of the dispatcher (``c10d.allreduce_``, ``c10d._allgather_base_``,
``c10d._reduce_scatter_base_``, ``c10d.reduce_``, ...), whichever Python wrapper called it (DeepSpeed's
``deepspeed.comm``, FSDP2's ``_fsdp_collectives.py``, a deprecated alias), so the mode sees each collective exactly
once, with its tensors. It records the operation and the number of elements of the whole message (the all-reduce
buffer, the all-gather output, the reduce-scatter input, the reduced tensor).

Workers (module-level, for :func:`distlearn.core.launch.run`):

- :func:`deepspeed_collectives`: the tiny GPT of :mod:`distlearn.deepspeed_fsdp.lab` under ``deepspeed.initialize``
  (ZeRO stage 0–3, fp32, ``gradient_accumulation_steps = m``), one warm-up step, then one recorded step;
- :func:`fsdp2_collectives`: the same model under ``fully_shard`` (every block and the root, given
  ``reshard_after_forward``), m micro-batches with gradient sync on every micro-batch or only on the last one
  (``set_requires_gradient_sync``), one warm-up step, then one recorded step.

Run alone: ``torchrun --nproc-per-node 2 -m distlearn.zero_fsdp.lab_traffic``.
"""
from __future__ import annotations

from collections import Counter

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from distlearn.deepspeed_fsdp.lab import FORKSERVER_PRELOAD  # noqa: F401 - read by distlearn.core.launch (DeepSpeed labs)
from distlearn.core.launch import device, torchrun_main
from distlearn.core.guard import read_only

# c10d operator → (our name, how to read the whole message's element count from its arguments)
_FLAT = lambda ts: sum(t.numel() for t in ts)  # noqa: E731 - a list of tensors
_C10D = {
    "allreduce_": ("all_reduce", lambda a: _FLAT(a[0])),
    "allreduce_coalesced_": ("all_reduce", lambda a: _FLAT(a[0])),
    "reduce_": ("reduce", lambda a: _FLAT(a[0])),
    "broadcast_": ("broadcast", lambda a: _FLAT(a[0])),
    "_allgather_base_": ("all_gather", lambda a: a[0].numel()),
    "allgather_": ("all_gather", lambda a: sum(_FLAT(x) for x in a[0])),
    "allgather_into_tensor_coalesced_": ("all_gather", lambda a: _FLAT(a[0])),
    "_reduce_scatter_base_": ("reduce_scatter", lambda a: a[1].numel()),
    "reduce_scatter_": ("reduce_scatter", lambda a: sum(_FLAT(x) for x in a[1])),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", lambda a: _FLAT(a[1])),
    # gather and scatter: the whole message at the root (its output / input lists); 0 elsewhere (kept in ``other``)
    "gather_": ("gather", lambda a: sum(_FLAT(x) for x in a[0])),
    "scatter_": ("scatter", lambda a: sum(_FLAT(x) for x in a[1])),
}


def _first_tensor(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (list, tuple)):
            t = _first_tensor(a)
            if t is not None:
                return t
    return None


def _group_size(args) -> int:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return int(torch._C._distributed_c10d.ProcessGroup.unbox(a).size())
            except Exception:  # noqa: BLE001 - not a process group after all
                continue
    return 0


class CollectiveRecorder(TorchDispatchMode):
    """Record every ``c10d`` collective dispatched while active: ``calls`` is a list of ``(op, numel,
    group_size)`` in issue order (``group_size``: ranks of the process group it ran on, 0 if unknown) (``op`` ∈ all_reduce, reduce, broadcast, all_gather, reduce_scatter, gather, scatter, or the raw operator name for
    anything else). Messages of at most ``min_numel`` elements (loss and gradient-norm scalars, DeepSpeed's
    overflow flag) and messages of integers (ZeRO-3's check that all ranks traced the same parameter order,
    ``assert_ints_same_as_other_ranks``) are kept apart in ``other``: they carry no model data. Barriers are
    not recorded."""

    def __init__(self, min_numel: int = 1):
        super().__init__()
        self.min_numel = min_numel
        self.calls: list[tuple[str, int, int]] = []
        self.other: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ns = getattr(func, "namespace", "")
        if ns == "c10d":
            name = func._schema.name.split("::")[-1]
            op, size = _C10D.get(name, (name, None))
            numel = int(size(args)) if size is not None else 0
            if op != "barrier":
                first = _first_tensor(args)
                data = numel > self.min_numel and first is not None and first.is_floating_point()
                (self.calls if data else self.other).append((op, numel, _group_size(args)))
        return func(*args, **(kwargs or {}))

    def elements(self) -> dict[str, int]:
        """Total elements per operation over the recorded data calls (not ``other``)."""
        total: Counter = Counter()
        for op, n, _ in self.calls:
            total[op] += n
        return dict(total)

    def counts(self) -> dict[str, int]:
        """Number of data calls (not ``other``) per operation."""
        return dict(Counter(op for op, _, _ in self.calls))


# ---------------------------------------------------------------- DeepSpeed
def _ds_config(zero_stage: int, world_size: int, num_microbatches: int, micro_batch_size: int,
               multi_rank_bucket_allreduce: bool, hpz_partition_size: int = 1) -> dict:
    from distlearn.deepspeed_fsdp.deepspeed import deepspeed_config

    extra = {"zero_allow_untested_optimizer": True, "steps_per_print": 10_000}
    cfg = deepspeed_config(micro_batch_size=micro_batch_size, gradient_accumulation_steps=num_microbatches,
                           dp=world_size, zero_stage=zero_stage, precision="fp32", reduce_bucket_size=10_000,
                           allgather_bucket_size=10_000, overlap_comm=False, gradient_clipping=None, extra=extra)
    zero = cfg["zero_optimization"]
    if zero_stage in (1, 2):
        zero["use_multi_rank_bucket_allreduce"] = multi_rank_bucket_allreduce
    if zero_stage == 3:
        # count the design, not DeepSpeed's caching: every parameter is partitioned (default threshold 1e5
        # elements keeps small ones whole) and released after use (default reuse distance 1e9 keeps them)
        zero.update(stage3_param_persistence_threshold=0, stage3_max_reuse_distance=0, stage3_prefetch_bucket_size=0)
        if hpz_partition_size > 1:   # ZeRO++ hpZ: a secondary copy of the parameters sharded over this many ranks
            zero["zero_hpz_partition_size"] = hpz_partition_size
    return cfg


def deepspeed_collectives(rank: int, world_size: int, zero_stage: int, num_microbatches: int,
                          multi_rank_bucket_allreduce: bool = True, seed: int = 0, hpz_partition_size: int = 1) -> dict:
    """One recorded optimizer step of DeepSpeed ZeRO ``zero_stage`` with ``num_microbatches`` micro-batches of one
    sequence each (after a warm-up step); ``hpz_partition_size`` > 1 turns on ZeRO++ hpZ (stage 3). Returns ``{"num_params", "elements": {op: total elements},
    "counts": {op: calls}, "calls": [(op, numel, group_size), ...], "other": [...]}``."""
    from distlearn.deepspeed_fsdp.lab import TINY, quiet_deepspeed, tiny_model, token_loss

    torch.set_num_threads(1)
    deepspeed = quiet_deepspeed(build_shm_op=False)
    model = tiny_model(seed)
    num_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    cfg = _ds_config(zero_stage, world_size, num_microbatches, 1, multi_rank_bucket_allreduce, hpz_partition_size)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    g = torch.Generator().manual_seed(seed + 100 * rank)
    rec = CollectiveRecorder()
    for step in range(2):
        data = torch.randint(0, TINY.vocab_size, (num_microbatches, 1, TINY.max_seq_len + 1), generator=g)
        with (rec if step == 1 else _Null()):
            for mb in data:
                loss = token_loss(engine(mb[:, :-1].to(engine.device)), mb[:, 1:].to(engine.device))
                engine.backward(loss)
                engine.step()   # DeepSpeed steps the optimizer only at the accumulation boundary
    engine.destroy()
    return {"num_params": num_params, "elements": rec.elements(), "counts": rec.counts(), "calls": rec.calls,
            "other": rec.other}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


FULL_GRID = read_only([(stage, m, multi) for stage in (0, 1, 2, 3) for m in (1, 3)
             for multi in ((True, False) if stage in (1, 2) else (True,))])
CHAPTER_GRID = read_only([(1, 1, True), (1, 3, True), (2, 1, True), (2, 3, True), (2, 3, False), (3, 3, True)])


def deepspeed_grid(rank: int, world_size: int, configs=None) -> list[dict]:
    """:func:`deepspeed_collectives` for each ``(zero_stage, num_microbatches, multi_rank_bucket_allreduce)`` in
    ``configs`` (default :data:`FULL_GRID`: stages 0–3 × m ∈ {1, 3}, both bucket modes for stages 1–2), in one
    launch. Each entry adds ``zero_stage``, ``num_microbatches`` and ``multi_rank_bucket_allreduce``."""
    out = []
    for stage, m, multi in (FULL_GRID if configs is None else configs):
        r = deepspeed_collectives(rank, world_size, stage, m, multi)
        r.update(zero_stage=stage, num_microbatches=m, multi_rank_bucket_allreduce=multi)
        out.append(r)
    return out


def stages_and_grid(rank: int, world_size: int, stages=(1, 2, 3), steps: int = 3, configs=None) -> dict:
    """Chapter 09 in one launch (DeepSpeed is imported once): ``{"stages":``
    :func:`distlearn.deepspeed_fsdp.lab.train_stages` ``, "grid":`` :func:`deepspeed_grid` ``(configs)}``."""
    from distlearn.deepspeed_fsdp.lab import train_stages

    return {"stages": train_stages(rank, world_size, stages, steps),
            "grid": deepspeed_grid(rank, world_size, CHAPTER_GRID if configs is None else configs)}


# ---------------------------------------------------------------- FSDP2
def fsdp2_collectives(rank: int, world_size: int, num_microbatches: int, reshard_after_forward: bool | int = True,
                      grad_sync_every_microbatch: bool = True, root_reshard_after_forward: bool | None = True,
                      seed: int = 0, hsdp_shard_size: int | None = None) -> dict:
    """One recorded optimizer step of FSDP2 (``fully_shard`` on every block with ``reshard_after_forward`` — True,
    False, or an int: reshard to that many ranks after forward, the analogue of ZeRO++ hpZ —, then
    on the root with ``root_reshard_after_forward``; ``None`` is FSDP2's default, which keeps the root unsharded
    between forward and backward) over ``num_microbatches`` micro-batches; with ``grad_sync_every_microbatch =
    False`` gradients are reduce-scattered only in the last micro-batch (``set_requires_gradient_sync``). Returns
    the same keys as :func:`deepspeed_collectives`, plus ``root_params`` (elements owned by the root unit).
    ``hsdp_shard_size``: shard over groups of that many ranks and replicate across groups (HSDP: a 2-D mesh
    ``(world_size // hsdp_shard_size, hsdp_shard_size)``)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from distlearn.deepspeed_fsdp.lab import TINY, tiny_model, token_loss

    torch.set_num_threads(1)
    dev = device()
    model = tiny_model(seed).to(dev)
    num_params = sum(p.numel() for p in model.parameters())
    block_params = sum(p.numel() for b in model.blocks for p in b.parameters())
    if hsdp_shard_size:
        mesh = init_device_mesh(dev.type, (world_size // hsdp_shard_size, hsdp_shard_size),
                                mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(dev.type, (world_size,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=root_reshard_after_forward)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed + 100 * rank)
    rec = CollectiveRecorder()
    for step in range(2):
        data = torch.randint(0, TINY.vocab_size, (num_microbatches, 1, TINY.max_seq_len + 1), generator=g)
        with (rec if step == 1 else _Null()):
            for i, mb in enumerate(data):
                last = i == num_microbatches - 1
                model.set_requires_gradient_sync(grad_sync_every_microbatch or last)
                (token_loss(model(mb[:, :-1].to(dev)), mb[:, 1:].to(dev)) / num_microbatches).backward()
            opt.step()
            opt.zero_grad()
    return {"num_params": num_params, "root_params": num_params - block_params, "elements": rec.elements(),
            "counts": rec.counts(), "calls": rec.calls, "other": rec.other}


def fsdp2_grid(rank: int, world_size: int, microbatches=(1, 3)) -> list[dict]:
    """:func:`fsdp2_collectives` for reshard_after_forward ∈ {True, False} × gradient sync every micro-batch or
    only the last × m, plus FSDP2's default root (``None``), in one launch. Each entry adds its settings."""
    out = []
    for m in microbatches:
        for raf in (True, False):
            for sync in (True, False):
                r = fsdp2_collectives(rank, world_size, m, raf, sync, root_reshard_after_forward=raf)
                r.update(num_microbatches=m, reshard_after_forward=raf, grad_sync_every_microbatch=sync,
                         root_reshard_after_forward=raf)
                out.append(r)
        r = fsdp2_collectives(rank, world_size, m, True, True, root_reshard_after_forward=None)
        r.update(num_microbatches=m, reshard_after_forward=True, grad_sync_every_microbatch=True,
                 root_reshard_after_forward=None)
        out.append(r)
    return out


def hierarchical_collectives(rank: int, world_size: int, group: int = 2) -> dict:
    """ZeRO++ hpZ beside its FSDP2 analogue and beside HSDP, one step of one micro-batch each, in one launch on
    ``world_size`` ranks (4: two "nodes" of ``group`` = 2): ``{"hpz": DeepSpeed ZeRO-3 with
    zero_hpz_partition_size = group, "fsdp2_int": fully_shard(reshard_after_forward=group) on the blocks,
    "hsdp": fully_shard on a (world_size // group, group) mesh}``, each with ``calls`` as (op, numel, group size)."""
    return {"hpz": deepspeed_collectives(rank, world_size, 3, 1, hpz_partition_size=group),
            "fsdp2_int": fsdp2_collectives(rank, world_size, 1, reshard_after_forward=group),
            "hsdp": fsdp2_collectives(rank, world_size, 1, hsdp_shard_size=group)}


if __name__ == "__main__":
    torchrun_main(deepspeed_grid)
