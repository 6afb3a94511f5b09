"""Real FSDP2 (``torch.distributed.fsdp.fully_shard``) on a tiny GPT over gloo, checked against one process.

``train_fsdp(rank, world_size, ...)`` builds the same model on every rank (same seed), applies ``fully_shard`` to
each transformer block and then to the root (which takes the embeddings, final norm and LM head, tied or not),
trains a few AdamW steps on this rank's slice of a fixed global batch, and returns the global losses, the local
shard shape of every parameter, and what FSDP did around forward. :func:`train_reference` trains the same model in
one process on the whole batch.

Run alone: ``torchrun --nproc-per-node 2 -m distlearn.zero_fsdp.lab`` (prints rank 0's result).
Mesh: ``init_device_mesh("cpu", (world_size,))`` under gloo; ``"cuda"`` under NCCL.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn.functional as F

from distlearn.core.launch import device, torchrun_main
from distlearn.core.models import ModelConfig, build_model
from distlearn.core.guard import read_only

# dims chosen so sharding is uneven: vocab 61 on 4 ranks → 16, 16, 16, 13 rows; 5 positions on 4 ranks → 2, 2, 1, 0
TINY = read_only(dict(arch="gpt", vocab_size=61, hidden_size=16, num_layers=2, num_heads=2, ffn_hidden_size=40, max_seq_len=5))


def tiny_config(tied: bool = False) -> ModelConfig:
    """The lab's model: a 2-block GPT with hidden size 16 (tied or untied embeddings)."""
    return ModelConfig(name="tiny-gpt-tied" if tied else "tiny-gpt", tied_embeddings=tied, **TINY)


def make_batches(config: ModelConfig, steps: int, global_batch: int, seed: int = 0) -> torch.Tensor:
    """Token ids of shape (steps, global_batch, max_seq_len + 1): input = [..., :-1], target = [..., 1:]."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, config.vocab_size, (steps, global_batch, config.max_seq_len + 1), generator=g)


def next_token_loss(model, tokens):
    """Next-token cross-entropy of ``model`` on ``tokens`` (batch, max_seq_len + 1) int64, as :func:`make_batches`
    gives them: input ``tokens[:, :-1]``, target ``tokens[:, 1:]``, logits upcast to float32. Returns a scalar
    tensor (the mean over every predicted token)."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def _train_one_process(tied: bool, steps: int, global_batch: int, lr: float, seed: int, optimizer) -> tuple:
    """The tiny GPT trained in one process on the whole batch with ``optimizer`` (a torch.optim class):
    ``(model, losses)``. The single-device baseline of :func:`train_reference` and :func:`reference_parameters`."""
    cfg = tiny_config(tied)
    torch.manual_seed(seed)
    model = build_model(cfg, device="cpu")
    opt = optimizer(model.parameters(), lr=lr)
    losses = []
    for tokens in make_batches(cfg, steps, global_batch, seed):
        loss = next_token_loss(model, tokens)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return model, losses


def sharded_tiny_gpt(world_size: int, seed: int = 0, shard_size: int | None = None):
    """The untied tiny GPT, seeded with ``seed``, built on this rank's device and sharded with FSDP2: ``fully_shard``
    on each block, then on the root. Mesh: 1-D over ``world_size`` ranks (``shard_size`` None), or 2-D
    ``(world_size // shard_size, shard_size)`` named ``("replicate", "shard")`` (HSDP). Returns ``(model, mesh)``.
    Call it inside a process group (the labs of chapters 06 and 13)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = device()
    torch.manual_seed(seed)
    model = build_model(tiny_config(False), device=str(dev))
    if shard_size:
        mesh = init_device_mesh(dev.type, (world_size // shard_size, shard_size), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(dev.type, (world_size,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, mesh


def train_reference(tied: bool = False, steps: int = 4, global_batch: int = 8, lr: float = 1e-2, seed: int = 0):
    """Single-process training on the whole batch: the losses FSDP must reproduce (list of floats)."""
    return _train_one_process(tied, steps, global_batch, lr, seed, torch.optim.AdamW)[1]


def train_fsdp(rank: int, world_size: int, tied: bool = False, steps: int = 4, global_batch: int = 8,
               lr: float = 1e-2, reshard_after_forward: bool = True, bf16: bool = False, seed: int = 0) -> dict:
    """FSDP2 training on this rank's ``global_batch // world_size`` rows. Returns a dict:

    ``losses`` (global mean loss per step), ``local_shapes`` {param name: local shard shape on this rank},
    ``local_numel`` (their total), ``dtensor_after_forward`` (is blocks.0's weight a sharded DTensor between
    forward and backward? True with reshard_after_forward), ``param_bytes`` / ``optim_bytes`` (bytes of this rank's
    parameter shards and AdamW moments, measured on the tensors), ``compute_dtype`` (dtype of the weight a block's linear
    sees in forward), ``stored_dtype`` (dtype of the sharded parameter the optimizer updates), ``tied`` (is the LM
    head still the embedding's parameter after sharding?).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import DTensor

    if global_batch % world_size:
        raise ValueError(f"global_batch {global_batch} must be divisible by world_size {world_size}")
    dev = device()
    cfg = tiny_config(tied)
    torch.manual_seed(seed)
    model = build_model(cfg, device=str(dev))
    mesh = init_device_mesh(dev.type, (world_size,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp)

    seen = {}
    probe = model.blocks[0].mlp.up

    def record_dtype(module, args):                # a pre-hook must return None (or new inputs)
        seen.setdefault("dtype", str(module.weight.dtype))

    hook = probe.register_forward_pre_hook(record_dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    b = global_batch // world_size
    losses, dtensor_after_forward = [], None
    for tokens in make_batches(cfg, steps, global_batch, seed):
        loss = next_token_loss(model, tokens[rank * b:(rank + 1) * b].to(dev))
        if dtensor_after_forward is None:
            dtensor_after_forward = isinstance(model.blocks[0].mlp.up.weight, DTensor)
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().float().clone()
        dist.all_reduce(total)                     # sum of equal-sized local means → global mean
        losses.append(total.item() / world_size)
    hook.remove()
    local_shapes = {name: tuple(p.to_local().shape) for name, p in model.named_parameters()}
    param_bytes = sum(p.to_local().numel() * p.to_local().element_size() for p in model.parameters())
    optim_bytes = sum(t.to_local().numel() * t.to_local().element_size() for st in opt.state.values()
                      for k, t in st.items() if k in ("exp_avg", "exp_avg_sq"))
    return {"rank": rank, "losses": losses, "local_shapes": local_shapes,
            "local_numel": sum(p.to_local().numel() for p in model.parameters()),
            "dtensor_after_forward": dtensor_after_forward, "compute_dtype": seen.get("dtype"),
            "stored_dtype": str(next(model.parameters()).dtype),
            "tied": model.lm_head.weight is model.embed.weight,
            "param_bytes": param_bytes, "optim_bytes": optim_bytes}


def split_tie(rank: int, world_size: int) -> str:
    """Wrap the embedding in its own unit while the tied LM head stays in the root: run one forward and report
    what happens (the error's type and first line, or "ok")."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = device()
    cfg = tiny_config(tied=True)
    torch.manual_seed(0)
    model = build_model(cfg, device=str(dev))
    mesh = init_device_mesh(dev.type, (world_size,))
    fully_shard(model.embed, mesh=mesh)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    try:
        loss = next_token_loss(model, make_batches(cfg, 1, world_size, 0)[0][rank:rank + 1].to(dev))
        loss.backward()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the point is to show it
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"


@contextmanager
def collectives_by_unit(model, mark):
    """While inside, call ``mark(kind, fqn)`` for every collective FSDP2 issues for ``model``'s units: ``kind``
    ``"all_gather"`` or ``"reduce_scatter"``, ``fqn`` the module FQN of the unit it belongs to (``""`` for the root
    unit, ``"blocks.2"`` for a block), or None for a collective issued outside any unit's all-gather or
    post-backward (none is expected).

    FSDP2 calls ``dist.all_gather_single`` / ``dist.reduce_scatter_single`` once per unit
    (``_fully_shard/_fsdp_collectives.py``); the unit is the param group whose ``unshard`` (its own pre-forward /
    pre-backward, or a prefetch issued by another unit) or ``post_backward`` is running at that moment
    (``_fully_shard/_fsdp_param_group.py``), named by FSDP2's own ``_module_fqn``. Both are wrapped on each group
    instance and restored on exit, with the two collectives."""
    from torch.distributed.fsdp import FSDPModule

    running: list = []            # FQNs of the units whose unshard / post_backward is running (innermost last)
    groups = [g for m in model.modules() if isinstance(m, FSDPModule) for g in m._get_fsdp_state()._fsdp_param_groups]

    def within(group, method):
        def wrapped(*args, **kwargs):
            running.append(group._module_fqn)
            try:
                return method(*args, **kwargs)
            finally:
                running.pop()
        return wrapped

    real_ag, real_rs = dist.all_gather_single, dist.reduce_scatter_single

    def ag(*args, **kwargs):
        mark("all_gather", running[-1] if running else None)
        return real_ag(*args, **kwargs)

    def rs(*args, **kwargs):
        mark("reduce_scatter", running[-1] if running else None)
        return real_rs(*args, **kwargs)

    for g in groups:
        g.unshard, g.post_backward = within(g, g.unshard), within(g, g.post_backward)
    dist.all_gather_single, dist.reduce_scatter_single = ag, rs
    try:
        yield
    finally:
        dist.all_gather_single, dist.reduce_scatter_single = real_ag, real_rs
        for g in groups:
            del g.unshard, g.post_backward          # the class's methods again


def count_collectives(rank: int, world_size: int, num_layers: int = 4, reshard_after_forward: bool = True) -> dict:
    """Count the all-gathers and reduce-scatters FSDP2 issues in one training step (after a warm-up step) of the
    tiny GPT with ``num_layers`` blocks, each block (with ``reshard_after_forward``) and the root (default, which
    FSDP2 does not reshard after forward: ``_fsdp_state.py``) a unit. Returns ``{"all_gather": n,
    "reduce_scatter": n, "order": [(kind, unit FQN), ...]}`` (:func:`collectives_by_unit`)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = device()
    cfg = tiny_config().with_(num_layers=num_layers)
    torch.manual_seed(0)
    model = build_model(cfg, device=str(dev))
    mesh = init_device_mesh(dev.type, (world_size,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh)  # root left at the default: FSDP2 then keeps it unsharded after forward
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = make_batches(cfg, 2, world_size, 0)
    order: list = []
    recording = [False]

    def mark(kind, fqn):
        if recording[0]:
            order.append((kind, fqn))

    with collectives_by_unit(model, mark):
        for step in range(2):
            recording[0] = step == 1
            next_token_loss(model, tokens[step][rank:rank + 1].to(dev)).backward()
            opt.step()
            opt.zero_grad()
    kinds = [k for k, _ in order]
    return {"all_gather": kinds.count("all_gather"), "reduce_scatter": kinds.count("reduce_scatter"),
            "order": order}


def collective_orders(rank: int, world_size: int, num_layers: int = 4) -> dict:
    """:func:`count_collectives` with and without resharding after forward, in one launch: {True: [...], False:
    [...]} (``(kind, unit FQN)`` in issue order)."""
    return {flag: count_collectives(rank, world_size, num_layers, flag)["order"] for flag in (True, False)}


def fsdp1_flat_shards(rank: int, world_size: int) -> list[tuple[str, int, int, int]]:
    """FSDP1 (``FullyShardedDataParallel``, FULL_SHARD, ``ModuleWrapPolicy({Block})``) on the tiny GPT: for every
    unit, ``(name, unpadded numel, local flat-parameter numel, padding on this rank)``, read from its FlatParameter."""
    import warnings
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from distlearn.core.models import Block

    torch.manual_seed(0)
    model = build_model(tiny_config(), device="cpu")
    names = {id(m): n for n, m in model.named_modules()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapped = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=device())
    out = []
    for unit in FSDP.fsdp_modules(wrapped):
        fp = unit._flat_param
        name = names.get(id(unit.module), "?")
        out.append((name, int(fp._unpadded_unsharded_size.numel()), int(fp.numel()), int(fp._shard_numel_padded)))
    return out


def split_tie_and_orders(rank: int, world_size: int) -> dict:
    """:func:`split_tie` and :func:`collective_orders` in one launch (used by the tests)."""
    return {"split_tie": split_tie(rank, world_size), "orders": collective_orders(rank, world_size)}


def demo(rank: int, world_size: int) -> dict:
    """Everything the chapter shows, in one launch: fp32 (untied and tied), no reshard after forward, bf16."""
    return {"fp32": train_fsdp(rank, world_size),
            "tied": train_fsdp(rank, world_size, tied=True),
            "no_reshard": train_fsdp(rank, world_size, reshard_after_forward=False, steps=2),
            "bf16": train_fsdp(rank, world_size, bf16=True, steps=2)}


def issue_order(rank: int, world_size: int, num_layers: int = 4, forward_prefetch: int = 0,
                backward_prefetch: int = 1, reshard_after_forward: bool = True) -> list[tuple[str, str | None]]:
    """What this rank's CPU issues, in order, in one training step (after a warm-up step) of the tiny GPT with
    ``num_layers`` FSDP2 blocks and an FSDP2 root, each event as ``(kind, module FQN)``: ``("all_gather", fqn)`` /
    ``("reduce_scatter", fqn)`` for each collective FSDP2 calls, named by the unit it belongs to (``""`` = the root,
    ``"blocks.i"`` = block i; :func:`collectives_by_unit`), and ``("forward", "blocks.i")`` /
    ``("backward", "blocks.i")`` when block i's computation starts — a forward pre-hook and a hook on the block
    output's gradient, both registered after ``fully_shard`` so that they run after FSDP2's own pre-forward /
    pre-backward hooks, which issue the all-gathers.

    ``forward_prefetch`` k: ``blocks[i].set_modules_to_forward_prefetch(blocks[i+1 : i+1+k])`` (FSDP2 prefetches
    nothing in forward by default); ``backward_prefetch`` k ≥ 2: ``set_modules_to_backward_prefetch`` likewise
    (1 is FSDP2's implicit default; an empty list also means the default, so 0 cannot be set)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = device()
    cfg = tiny_config().with_(num_layers=num_layers)
    torch.manual_seed(0)
    model = build_model(cfg, device=str(dev))
    mesh = init_device_mesh(dev.type, (world_size,))
    blocks = list(model.blocks)
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh)
    if forward_prefetch:
        for i, block in enumerate(blocks):
            block.set_modules_to_forward_prefetch(blocks[i + 1:i + 1 + forward_prefetch])
    if backward_prefetch > 1:
        for i, block in enumerate(blocks):
            block.set_modules_to_backward_prefetch(blocks[max(0, i - backward_prefetch):i][::-1])
    events: list = []
    recording = [False]

    def mark(kind, fqn):
        if recording[0]:
            events.append((kind, fqn))

    names = {id(m): name for name, m in model.named_modules()}
    for block in blocks:
        fqn = names[id(block)]
        block.register_forward_pre_hook(lambda _m, _a, fqn=fqn: mark("forward", fqn))
        block.register_forward_hook(lambda _m, _a, out, fqn=fqn: out.register_hook(
            lambda g, fqn=fqn: mark("backward", fqn)) and None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = make_batches(cfg, 2, world_size, 0)
    with collectives_by_unit(model, mark):
        for step in range(2):
            recording[0] = step == 1
            next_token_loss(model, tokens[step][rank:rank + 1].to(dev)).backward()
            opt.step()
            opt.zero_grad()
    return events


def issue_orders(rank: int, world_size: int, num_layers: int = 4, settings=((0, 1, True), (1, 1, True),
                                                                           (2, 1, True), (1, 2, True),
                                                                           (0, 1, False))) -> dict:
    """:func:`issue_order` for each ``(forward_prefetch, backward_prefetch, reshard_after_forward)`` in one
    launch: ``{setting: events}``."""
    return {tuple(st): issue_order(rank, world_size, num_layers, *st) for st in settings}


def reference_parameters(steps: int = 2, global_batch: int = 8, lr: float = 0.1, seed: int = 0) -> dict:
    """The untied tiny GPT after ``steps`` plain SGD steps in one process on the whole batch: ``{"losses": [...],
    "params": {name: numpy array}}`` (float32).

    SGD, not AdamW, for comparing parameters: the key projection's bias gets a gradient that is zero in exact
    arithmetic (softmax ignores a constant added to a whole row of scores), and Adam divides that rounding noise
    by its own size, so those entries would move by ~lr in a direction set by rounding alone."""
    model, losses = _train_one_process(False, steps, global_batch, lr, seed, torch.optim.SGD)
    return {"losses": losses, "params": {n: p.detach().numpy().copy() for n, p in model.named_parameters()}}


def train_hsdp(rank: int, world_size: int, shard_size: int | None = None, steps: int = 2, global_batch: int = 8,
               lr: float = 0.1, seed: int = 0) -> dict:
    """FSDP2 on the untied tiny GPT with a 1-D mesh (``shard_size`` None: flat FSDP over all ranks) or a 2-D mesh
    ``(world_size // shard_size, shard_size)`` named ``("replicate", "shard")``: HSDP, parameters sharded inside
    groups of ``shard_size`` consecutive ranks (a "node") and replicated across them. torch 2.13's ``fully_shard``
    reads a 2-D mesh this way (its docstring: "2D mesh ... HSDP"): forward and backward all-gather inside the
    shard group; backward reduce-scatters the gradients inside it, then all-reduces the shard across the
    replicate group (``_fsdp_collectives.py``, ``foreach_reduce``).

    Every rank trains on its ``global_batch // world_size`` rows of the same global batch, with plain SGD as
    :func:`reference_parameters` (which says why). Returns ``losses``
    (global mean per step), ``params`` {name: full parameter as numpy, gathered with ``full_tensor()``} after the
    last step, and ``calls``: the collectives of the last step as ``(op, elements, group size)``
    (:class:`distlearn.zero_fsdp.lab_traffic.CollectiveRecorder`), ``padded_numel``: the parameters' elements
    after FSDP2 pads each dim 0 to a multiple of the shard group's size."""
    from distlearn.zero_fsdp.lab_traffic import CollectiveRecorder

    if global_batch % world_size or (shard_size is not None and (shard_size < 1 or world_size % shard_size)):
        raise ValueError(f"world_size {world_size} must divide global_batch {global_batch}, and shard_size "
                         f"{shard_size} must divide world_size / 二者都必须整除")
    torch.set_num_threads(1)
    dev = device()
    cfg = tiny_config(False)
    model, mesh = sharded_tiny_gpt(world_size, seed, shard_size)
    s = shard_size or world_size
    # DTensor shapes are the global ones / DTensor 的形状是全局形状
    padded = sum(-(-p.shape[0] // s) * s * p.shape[1:].numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    b = global_batch // world_size
    losses, rec = [], CollectiveRecorder()
    for step, tokens in enumerate(make_batches(cfg, steps, global_batch, seed)):
        if step == steps - 1:
            rec.__enter__()
        loss = next_token_loss(model, tokens[rank * b:(rank + 1) * b].to(dev))
        loss.backward()
        if step == steps - 1:
            rec.__exit__(None, None, None)
        opt.step()
        opt.zero_grad()
        total = loss.detach().float().clone()
        dist.all_reduce(total)                     # sum of equal-sized local means → global mean / 各 rank 均值之和 → 全局均值
        losses.append(total.item() / world_size)
    params = {n: p.full_tensor().detach().cpu().numpy() for n, p in model.named_parameters()}
    return {"rank": rank, "losses": losses, "params": params, "calls": rec.calls, "padded_numel": padded}


if __name__ == "__main__":
    torchrun_main(train_fsdp)
