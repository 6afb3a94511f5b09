"""Measure model-state bytes on real PyTorch (and, in :mod:`distlearn.memory.lab`, DeepSpeed and FSDP2):
build a small model on CPU, take real optimizer steps with a library's own recipe, and count the bytes of
parameters, gradients and optimizer state from the tensors themselves, plus the **transient peak** while the
optimizer step runs.

This is the independent check of :func:`distlearn.memory.formulas.model_state_bytes`: the calculator multiplies Ψ by bytes
per parameter; here we sum the storages PyTorch really holds when ``optimizer.step()`` begins (after a first step,
so the optimizer state exists), and we follow every allocation during the step with :class:`AllocationTracker`.

Recipes (:data:`RECIPES`; each names the calculator precision it is compared with):

- ``"torch-fp32"``: fp32 model, ``torch.optim.AdamW`` (or SGD): 4 + 4 + 8 B/param (calculator ``"fp32"``).
- ``"torch-autocast"``: fp32 model, forward under ``torch.autocast(dtype=torch.bfloat16)``: weights, gradients
  and Adam state stay fp32 (16 B/param, calculator ``"fp32"``); autocast only makes bf16 copies of the weights
  inside the forward (activations, not model states).
- ``"manual-master"``: the hand-written loop this course used before: bf16 model and gradients, an ``AdamW`` over
  fp32 master copies, the fp32 copy of each gradient made just before the step and freed after it: 2 + 2 + 12 at
  rest (calculator ``"mixed"``), but **20 B/param** (plus Adam's temporaries) during the step.
- DeepSpeed's ``BF16_Optimizer`` and FSDP2's ``MixedPrecisionPolicy`` need a process group: see
  :mod:`distlearn.memory.lab`.

The step's transient (:func:`adam_step_transient`): ``AdamW(foreach=False)`` (the CPU default) updates one tensor
at a time and keeps a few temporaries the size of one tensor; ``foreach=True`` (the default on GPUs) runs each
operation over all tensors at once: one more fp32 copy of everything, 4 B/param (``torch/optim/adam.py``,
``_single_tensor_adam`` / ``_multi_tensor_adam``).

Optimizer state that is *per tensor*, not per element (Adam's ``step`` counter, a 0-d fp32 tensor per parameter
tensor), is reported apart as ``optimizer_scalars``: a few bytes per tensor, which the per-parameter calculator
does not count.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from distlearn.memory.formulas import OPTIMIZERS
from distlearn.core.models import ModelConfig, build_model, count_parameters
from distlearn.core.validate import DistlearnValueError, check_choice, check_int
from distlearn.core.guard import read_only

# A tiny Llama-shaped model: 2 layers, grouped-query attention, SwiGLU, untied head. 125,248 parameters.
TINY = ModelConfig("tiny-llama", "llama", vocab_size=256, hidden_size=64, num_layers=2, num_heads=4,
                   ffn_hidden_size=176, max_seq_len=32, num_kv_heads=2)
MEASURABLE_OPTIMIZERS = ("adam", "sgd-momentum", "sgd")
#: recipe → (the calculator precision it must equal at rest, a one-line description)
RECIPES = read_only({
    "torch-fp32": ("fp32", "fp32 model, torch.optim.AdamW"),
    "torch-autocast": ("fp32", "fp32 model, forward under torch.autocast(bfloat16)"),
    "manual-master": ("mixed", "hand-written: bf16 model, AdamW over fp32 master copies"),
})


@dataclass(frozen=True)
class MeasuredModelStates:
    """Bytes found in real tensors when ``optimizer.step()`` begins (integers; divide by 1e9 for GB, 2**30 for
    GiB), and the most bytes alive while the step runs."""

    num_params: int          # Ψ, counted from the model's parameters
    params: int              # the model's parameter tensors (for flat buffers: the whole buffer, padding included)
    grads: int               # gradient buffers alive at the step (``.grad``, fp32 accumulation buffers)
    optimizer: int           # per-element optimizer state: fp32 master copy (if any) + state shaped like a param
    optimizer_scalars: int   # per-tensor state (Adam's ``step`` counters): not proportional to Ψ
    loss_before: float       # loss before the first step
    loss_after: float        # loss after the last step (on the same batch): the steps really trained
    step_peak: int = 0       # most bytes alive during the step: params + grads + optimizer (+ scalars) + transient
    recipe: str = ""

    @property
    def total(self) -> int:
        """params + grads + optimizer (what the calculator predicts)."""
        return self.params + self.grads + self.optimizer

    @property
    def step_transient(self) -> int:
        """Bytes the step allocates on top of the model states at its peak (temporary copies)."""
        return self.step_peak - self.total - self.optimizer_scalars


def tensor_bytes(t) -> int:
    """Bytes of a tensor's elements: ``numel × element_size`` (views of one storage count their own elements)."""
    return t.numel() * t.element_size()


def _local(t):
    """The plain tensor holding a DTensor's data on this rank (a plain tensor is returned as is)."""
    return getattr(t, "_local_tensor", t)


def storage_bytes(t) -> int:
    """Bytes of the storage under ``t`` (a DTensor: its local shard's storage)."""
    return _local(t).untyped_storage().nbytes()


class AllocationTracker:
    """Follow tensor allocations, tracemalloc-style: every storage an operator creates while the tracker is active
    is counted until the last tensor using it is garbage (``weakref.finalize``), and ``peak`` is the most bytes
    alive at once.

    ``baseline``: tensors alive before (the model states); their storages are counted from the start, so freeing
    one during the tracked region lowers the level. Use as ``with AllocationTracker(states) as tr: opt.step()``,
    then ``tr.peak`` (bytes, baseline included), ``tr.start`` and ``tr.current``. It sees the outputs of ATen
    operators (a ``TorchDispatchMode``), so C++ kernels' internal scratch is not seen; ``torch.profiler`` with
    ``profile_memory=True`` sees the allocator itself (the tests compare the two).
    """

    def __init__(self, baseline=()):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return tracker._dispatch(func, args, kwargs or {})

        self._mode = _Mode()
        self.live: dict[int, list] = {}   # storage address → [nbytes, number of live tensors on it]
        self.current = self.peak = 0
        for t in baseline:
            self._add(t)
        self.start = self.peak = self.current

    def _release(self, ptr: int) -> None:
        entry = self.live.get(ptr)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[ptr]

    def _add(self, t) -> None:
        local = _local(t)
        storage = local.untyped_storage()
        ptr = storage.data_ptr()
        if ptr == 0:
            return
        entry = self.live.get(ptr)
        if entry is None:
            entry = self.live[ptr] = [storage.nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(local, self._release, ptr)

    def _dispatch(self, func, args, kwargs):
        import torch
        from torch.utils._pytree import tree_flatten

        out = func(*args, **kwargs)
        inputs = {_local(a).untyped_storage().data_ptr() for a in tree_flatten((args, kwargs))[0]
                  if isinstance(a, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                ptr = _local(t).untyped_storage().data_ptr()
                if ptr in self.live or ptr not in inputs:   # a new storage, or another view of a tracked one
                    self._add(t)
        return out

    def __enter__(self):
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


class StateCounter:
    """Count model-state bytes by storage, each storage once and in one role only (``add(t, role)``; a storage met
    in two roles raises RuntimeError, so nothing can be double-counted). ``bytes[role]``; ``tensors`` (all, for an
    :class:`AllocationTracker` baseline)."""

    def __init__(self):
        self.seen: dict[int, str] = {}
        self.bytes = {"params": 0, "grads": 0, "optimizer": 0, "optimizer_scalars": 0}
        self.tensors: list = []

    def add(self, t, role: str) -> None:
        ptr = _local(t).untyped_storage().data_ptr()
        if ptr in self.seen:
            if self.seen[ptr] != role:
                raise RuntimeError(f"tensor counted as both {self.seen[ptr]} and {role}")
            return
        self.seen[ptr] = role
        self.bytes[role] += storage_bytes(t)
        self.tensors.append(t)

    def add_optimizer_state(self, opt) -> None:
        """Every tensor in ``opt.state``: per-element state (shaped like its parameter) or per-tensor scalars."""
        import torch

        for group in opt.param_groups:
            for p in group["params"]:
                for value in opt.state.get(p, {}).values():
                    if torch.is_tensor(value):
                        self.add(value, "optimizer" if value.shape == p.shape else "optimizer_scalars")


def _make_optimizer(name, params, foreach: bool = False):
    import torch

    if name == "adam":
        return torch.optim.AdamW(params, lr=1e-2, foreach=foreach)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-1, momentum=0.9, foreach=foreach)
    return torch.optim.SGD(params, lr=1e-1, momentum=0.0, foreach=foreach)


def measure_one_step(config: ModelConfig = TINY, *, recipe: str = "torch-fp32", optimizer: str = "adam",
                     foreach: bool = False, steps: int = 2, batch_size: int = 2, seq_len: int = 16,
                     seed: int = 0) -> MeasuredModelStates:
    """Build ``config`` on the CPU, train ``steps`` real steps with ``recipe`` / ``optimizer``, count bytes at the
    start of the last step and follow its allocations.

    Parameters
    ----------
    config : a :class:`~distlearn.core.models.ModelConfig` small enough for the CPU (default :data:`TINY`).
    recipe : ``"torch-fp32"``, ``"torch-autocast"`` or ``"manual-master"`` (:data:`RECIPES`).
    optimizer : ``"adam"``, ``"sgd-momentum"`` or ``"sgd"``; ``foreach``: the optimizer's multi-tensor path.
    steps : ≥ 2 (the first step creates the optimizer state); batch_size, seq_len : integers ≥ 1; tokens are random
        with ``torch.manual_seed(seed)``.

    Returns :class:`MeasuredModelStates` (bytes): the states when the last ``optimizer.step()`` begins (for
    ``"manual-master"``: when the step phase — casting gradients to fp32, the step, re-casting weights — begins),
    and ``step_peak``, the most bytes alive during it.

    Raises DistlearnValueError for an unknown recipe, ``"adam-8bit"`` (not measurable on CPU) or bad sizes.
    """
    import torch
    import torch.nn.functional as F

    check_choice("recipe", recipe, tuple(RECIPES))
    check_choice("optimizer", optimizer, tuple(OPTIMIZERS))
    if optimizer not in MEASURABLE_OPTIMIZERS:
        raise DistlearnValueError(
            "optimizer", f"optimizer={optimizer!r} needs bitsandbytes and a GPU; measurable here: "
                         f"{', '.join(MEASURABLE_OPTIMIZERS)}.",
            f"optimizer={optimizer!r} 需要 bitsandbytes 和 GPU；这里可测量的有：{', '.join(MEASURABLE_OPTIMIZERS)}。")
    steps = check_int("steps", steps, minimum=2)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    seq_len = check_int("seq_len", seq_len, minimum=1, maximum=config.max_seq_len)

    torch.manual_seed(seed)
    model = build_model(config, device="cpu")
    manual = recipe == "manual-master"
    if manual:
        model = model.to(torch.bfloat16)
    params = list(model.parameters())
    tokens = torch.randint(0, config.vocab_size, (batch_size, seq_len + 1))

    def loss_fn():
        if recipe == "torch-autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(tokens[:, :-1])
        else:
            logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, config.vocab_size), tokens[:, 1:].reshape(-1))

    if manual:  # the optimizer owns fp32 master weights; the model keeps 16-bit ones
        master = [p.detach().float().clone().requires_grad_(True) for p in params]
        opt = _make_optimizer(optimizer, master, foreach)
    else:
        master = None
        opt = _make_optimizer(optimizer, params, foreach)

    def step_phase():
        if master is None:
            opt.step()
            return
        for p, m in zip(params, master):
            m.grad = p.grad.float()          # the fp32 copy of the bf16 gradient, only for the step
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, master):
                p.copy_(m)                   # re-cast the updated master weights to bf16
                m.grad = None                # the transient fp32 gradient is freed

    with torch.no_grad():
        loss_before = float(loss_fn())
    counter = tracker = None
    for step in range(steps):
        for p in params:
            p.grad = None
        loss_fn().backward()
        if step < steps - 1:
            step_phase()
            continue
        counter = StateCounter()
        for p in params:
            counter.add(p, "params")
        for p in params:
            if p.grad is not None:
                counter.add(p.grad, "grads")
        for m in master or ():
            counter.add(m, "optimizer")
        counter.add_optimizer_state(opt)
        with AllocationTracker(counter.tensors) as tracker:
            step_phase()
    with torch.no_grad():
        loss_after = float(loss_fn())
    b = counter.bytes
    return MeasuredModelStates(count_parameters(model), b["params"], b["grads"], b["optimizer"],
                               b["optimizer_scalars"], loss_before, loss_after, tracker.peak, recipe)


def adam_step_transient(param_numels, *, foreach: bool = False, dtype_bytes: int = 4) -> int:
    """Bytes ``torch.optim.AdamW`` allocates on top of its inputs while it steps (torch 2.13, no ``amsgrad``,
    ``capturable`` False), for parameters of ``param_numels`` elements in the order the optimizer holds them.

    - ``foreach=False`` (``_single_tensor_adam``, ``torch/optim/adam.py``): ``denom = (exp_avg_sq.sqrt() /
      bias_correction2_sqrt).add_(eps)`` keeps the square root and the quotient of tensor i alive together while
      the variable ``denom`` still holds tensor i−1's: max over i of (n_{i−1} + 2·n_i) elements;
    - ``foreach=True`` (``_multi_tensor_adam``): ``torch._foreach_sqrt(exp_avg_sqs)`` for all tensors at once:
      Ψ elements.

    Times ``dtype_bytes`` (4 for fp32 state). The tests check it against :class:`AllocationTracker` and
    ``torch.profiler``."""
    numels = [check_int("param_numels", n, minimum=1) for n in param_numels]
    size = check_int("dtype_bytes", dtype_bytes, minimum=1, maximum=16)
    if foreach:
        return size * sum(numels)
    return size * max(prev + 2 * n for prev, n in zip([0] + numels[:-1], numels))


def bf16_round_trip(weight: float = 1.0, update: float = 1e-3) -> dict[str, float]:
    """Why the fp32 master copy exists: add a small ``update`` to ``weight`` in bf16 and in fp32.

    bf16 keeps 8 significant bits, so near 1.0 its spacing is 2**-7 = 0.0078125; an update smaller than half of
    that rounds away (the weight never moves), while fp32 (spacing 2**-23) keeps it. Returns
    ``{"bf16": …, "fp32": …, "bf16_spacing": …}`` as Python floats. Raises DistlearnValueError for non-finite input.
    """
    import torch

    from distlearn.core.validate import check_number

    weight, update = check_number("weight", weight), check_number("update", update)
    w16 = torch.tensor(weight, dtype=torch.bfloat16)
    spacing = float(torch.nextafter(w16.abs(), torch.tensor(float("inf"), dtype=torch.bfloat16)) - w16.abs())
    return {"bf16": float(w16 + torch.tensor(update, dtype=torch.bfloat16)),
            "fp32": float(torch.tensor(weight, dtype=torch.float32) + torch.tensor(update, dtype=torch.float32)),
            "bf16_spacing": spacing}
