"""Measure model-state bytes on real PyTorch: build a small model on CPU, take real optimizer steps, and count the
bytes of parameters, gradients and optimizer state from the tensors themselves.

This is the independent check of :func:`distlearn.memory.model_state_bytes`: the calculator multiplies Ψ by bytes
per parameter; here we sum ``numel × element_size`` over the tensors that PyTorch actually keeps between steps.

Recipes (names as in :data:`distlearn.memory.PRECISIONS`):

- ``"fp32"``: fp32 model, the optimizer updates the model's parameters directly. Adam: 4 + 4 + 8 B/param.
- ``"mixed"``: bf16 model and bf16 gradients; the optimizer owns an fp32 **master copy** of every parameter and
  updates it; the bf16 weights are re-cast from the master after each step (ZeRO paper §3.1: 2 + 2 + 12 B/param).
  The fp32 copy of a gradient the optimizer needs is made just before the step and freed right after.
- ``"mixed-fp32-grads"``: bf16 model; gradients are accumulated into persistent fp32 ``main_grad`` buffers and the
  bf16 ``.grad`` is freed (Megatron-LM's recipe): 2 + 4 + 12 = 18 B/param with Adam.

Optimizers: ``"adam"`` (``torch.optim.AdamW``: ``exp_avg``, ``exp_avg_sq``), ``"sgd-momentum"``
(``momentum_buffer``), ``"sgd"`` (no state). ``"adam-8bit"`` needs bitsandbytes and a GPU and is not measured here.

Optimizer state that is *per tensor*, not per element (Adam's ``step`` counter, a 0-d fp32 tensor per parameter
tensor), is reported apart as ``optimizer_scalars``: a few bytes per tensor, which the per-parameter calculator
does not count.
"""
from __future__ import annotations

from dataclasses import dataclass

from .memory import OPTIMIZERS, PRECISIONS
from .models import ModelConfig, build_model, count_parameters
from .validate import DistlearnValueError, check_choice, check_int

# A tiny Llama-shaped model: 2 layers, grouped-query attention, SwiGLU, untied head. 68,160 parameters.
TINY = ModelConfig("tiny-llama", "llama", vocab_size=256, hidden_size=64, num_layers=2, num_heads=4,
                   ffn_hidden_size=176, max_seq_len=32, num_kv_heads=2)
MEASURABLE_OPTIMIZERS = ("adam", "sgd-momentum", "sgd")


@dataclass(frozen=True)
class MeasuredModelStates:
    """Bytes found in real tensors after an optimizer step (integers; divide by 1e9 for GB, 2**30 for GiB)."""

    num_params: int          # Ψ, counted from the model's parameters
    params: int              # the model's parameter tensors
    grads: int               # gradient buffers kept between steps (``.grad`` or fp32 ``main_grad``)
    optimizer: int           # per-element optimizer state: fp32 master copy (if any) + state shaped like a param
    optimizer_scalars: int   # per-tensor state (Adam's ``step`` counters): not proportional to Ψ
    loss_before: float       # loss before the first step
    loss_after: float        # loss after the last step (on the same batch): the steps really trained

    @property
    def total(self) -> int:
        """params + grads + optimizer (what the calculator predicts)."""
        return self.params + self.grads + self.optimizer


def tensor_bytes(t) -> int:
    """Bytes of a tensor's elements: ``numel × element_size`` (views of one storage count their own elements)."""
    return t.numel() * t.element_size()


def _make_optimizer(name, params):
    import torch

    if name == "adam":
        return torch.optim.AdamW(params, lr=1e-2, foreach=False)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-1, momentum=0.9, foreach=False)
    return torch.optim.SGD(params, lr=1e-1, momentum=0.0, foreach=False)


def measure_one_step(config: ModelConfig = TINY, *, precision: str = "fp32", optimizer: str = "adam",
                     steps: int = 1, batch_size: int = 2, seq_len: int = 16, seed: int = 0) -> MeasuredModelStates:
    """Build ``config`` on the CPU, train ``steps`` real steps with ``precision`` / ``optimizer``, count bytes.

    Parameters
    ----------
    config : a :class:`~distlearn.models.ModelConfig` small enough for the CPU (default :data:`TINY`).
    precision : ``"fp32"``, ``"mixed"`` (bf16 + fp32 master) or ``"mixed-fp32-grads"``.
    optimizer : ``"adam"``, ``"sgd-momentum"`` or ``"sgd"``.
    steps, batch_size, seq_len : integers ≥ 1; tokens are random with ``torch.manual_seed(seed)``.

    Returns :class:`MeasuredModelStates` (bytes). Every tensor is counted once (by storage), and a tensor that
    appears in two roles raises RuntimeError, so nothing can be double-counted.

    Raises DistlearnValueError for an unknown recipe, ``"adam-8bit"`` (not measurable on CPU) or bad sizes.
    """
    import torch
    import torch.nn.functional as F

    check_choice("precision", precision, tuple(PRECISIONS))
    check_choice("optimizer", optimizer, tuple(OPTIMIZERS))
    if optimizer not in MEASURABLE_OPTIMIZERS:
        raise DistlearnValueError(
            "optimizer", f"optimizer={optimizer!r} needs bitsandbytes and a GPU; measurable here: "
                         f"{', '.join(MEASURABLE_OPTIMIZERS)}.",
            f"optimizer={optimizer!r} 需要 bitsandbytes 和 GPU；这里可测量的有：{', '.join(MEASURABLE_OPTIMIZERS)}。")
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    seq_len = check_int("seq_len", seq_len, minimum=1, maximum=config.max_seq_len)

    torch.manual_seed(seed)
    model = build_model(config, device="cpu")
    mixed = precision != "fp32"
    if mixed:
        model = model.to(torch.bfloat16)
    params = list(model.parameters())
    tokens = torch.randint(0, config.vocab_size, (batch_size, seq_len + 1))

    def loss_fn():
        logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, config.vocab_size), tokens[:, 1:].reshape(-1))

    if mixed:  # the optimizer owns fp32 master weights; the model keeps 16-bit ones
        master = [p.detach().float().clone().requires_grad_(True) for p in params]
        opt = _make_optimizer(optimizer, master)
        main_grads = ([torch.zeros_like(m) for m in master] if precision == "mixed-fp32-grads" else None)
    else:
        master, main_grads = None, None
        opt = _make_optimizer(optimizer, params)

    with torch.no_grad():
        loss_before = float(loss_fn())
    for _ in range(steps):
        for p in params:
            p.grad = None
        if main_grads is not None:
            for g in main_grads:
                g.zero_()
        loss_fn().backward()
        if master is None:
            opt.step()
            continue
        for i, (p, m) in enumerate(zip(params, master)):
            if main_grads is not None:       # Megatron: accumulate into fp32 main_grad, free the bf16 grad
                main_grads[i].add_(p.grad.float())
                p.grad = None
                m.grad = main_grads[i]
            else:                            # ZeRO: fp32 copy of the bf16 grad only for the step
                m.grad = p.grad.float()
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, master):
                p.copy_(m)                   # re-cast the updated master weights to bf16
                if main_grads is None:
                    m.grad = None            # the transient fp32 gradient is freed
    with torch.no_grad():
        loss_after = float(loss_fn())

    seen: dict[int, str] = {}

    def add(t, role) -> int:
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            if seen[ptr] == role:
                return 0
            raise RuntimeError(f"tensor counted as both {seen[ptr]} and {role}")
        seen[ptr] = role
        return tensor_bytes(t)

    n_params = count_parameters(model)
    b_params = sum(add(p, "params") for p in params)
    grad_tensors = main_grads if main_grads is not None else [p.grad for p in params if p.grad is not None]
    b_grads = sum(add(g, "grads") for g in grad_tensors)
    b_opt = sum(add(m, "optimizer") for m in master) if master is not None else 0
    b_scalars = 0
    for group in opt.param_groups:
        for p in group["params"]:
            for value in opt.state.get(p, {}).values():
                if not torch.is_tensor(value):
                    continue
                if value.shape == p.shape:
                    b_opt += add(value, "optimizer")
                else:
                    b_scalars += add(value, "optimizer_scalars")
    return MeasuredModelStates(n_params, b_params, b_grads, b_opt, b_scalars, loss_before, loss_after)


def bf16_round_trip(weight: float = 1.0, update: float = 1e-3) -> dict[str, float]:
    """Why the fp32 master copy exists: add a small ``update`` to ``weight`` in bf16 and in fp32.

    bf16 keeps 8 significant bits, so near 1.0 its spacing is 2**-7 = 0.0078125; an update smaller than half of
    that rounds away (the weight never moves), while fp32 (spacing 2**-23) keeps it. Returns
    ``{"bf16": …, "fp32": …, "bf16_spacing": …}`` as Python floats. Raises DistlearnValueError for non-finite input.
    """
    import torch

    from .validate import check_number

    weight, update = check_number("weight", weight), check_number("update", update)
    w16 = torch.tensor(weight, dtype=torch.bfloat16)
    spacing = float(torch.nextafter(w16.abs(), torch.tensor(float("inf"), dtype=torch.bfloat16)) - w16.abs())
    return {"bf16": float(w16 + torch.tensor(update, dtype=torch.bfloat16)),
            "fp32": float(torch.tensor(weight, dtype=torch.float32) + torch.tensor(update, dtype=torch.float32)),
            "bf16_spacing": spacing}
