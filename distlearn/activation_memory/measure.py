"""Measure, exactly, the bytes a real PyTorch block saves for backward, and compare them with Korthikanti's formula.

Method (platform-notes.md): run the forward under ``torch.autograd.graph.saved_tensors_hooks``; every tensor autograd
saves passes through the pack hook; count each **storage** once (``untyped_storage().data_ptr()``, because views
such as K and Kᵀ share one) and skip the storages of parameters and buffers (they are model states, not
activations). Summing ``numel × element_size`` per hook call instead would count views twice and weights too.

:class:`KorthikantiBlock` is a GPT block written the way Korthikanti et al. 2022 (§4.1) assume: pre-LayerNorm,
separate Q, K, V projections of one shared input, explicit QKᵀ → softmax → dropout → ·V (no fused or flash
attention), GELU MLP of 4h, dropout after attention and MLP, residual adds. In bf16 with dropout its measured bytes
equal ``34·sbh + 5·a·s²·b`` plus two small terms the paper ignores (:func:`extra_terms`: the LayerNorms' mean and
1/std, and the s × s causal mask). Dropout must keep 1-byte masks for that: ``F.dropout`` does on CUDA (fused
``native_dropout``) but on CPU it multiplies by a mask of the activation dtype, so the block calls
``torch.native_dropout`` (``dropout_impl="functional"`` shows the CPU behaviour). :func:`measure_block` also runs the block under ``torch.utils.checkpoint`` (full
recomputation: only the block input is kept) and with the attention core checkpointed (selective recomputation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from distlearn.core.validate import check_choice, check_int, check_number
from distlearn.core.guard import read_only

MODES = ("none", "selective", "full", "norm-act")
ATTENTION = ("materialised", "flash")
NORM_IMPLS = ("fused", "torch")
SWIGLU = ("unfused", "fused")
DTYPES = read_only({"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16})


@dataclass
class SavedBytes:
    """What autograd kept for backward: ``total`` bytes over unique storages, and one entry per storage."""

    total: int
    storages: list = field(default_factory=list)   # (nbytes, dtype name, shape of the first tensor seen)

    def by_dtype(self) -> dict:
        out: dict[str, int] = {}
        for nbytes, dtype, _shape in self.storages:
            out[dtype] = out.get(dtype, 0) + nbytes
        return out


def saved_tensor_bytes(fn, *args, exclude=()) -> tuple[object, SavedBytes]:
    """Run ``fn(*args)`` and count the bytes of the distinct storages autograd saves for backward.

    ``exclude``: tensors (parameters, buffers) whose storages are not counted. Returns ``(output, SavedBytes)``;
    keep ``output`` alive while you need the graph. Storages are told apart by identity (the storage object
    itself, ``_cdata``, which stays the same when a storage is resized or moved, and views share), and each is
    counted at its size when ``fn`` returns: a storage freed during the forward (:class:`DiscardOutput` resizes it
    to 0 bytes) counts 0. Only what autograd saves is seen, not tensors kept alive some other way.
    """
    skip = {t.untyped_storage()._cdata for t in exclude}
    seen: dict[int, tuple] = {}   # storage identity -> (storage, dtype name, shape of the first tensor seen)

    def pack(t):
        st = t.untyped_storage()
        key = st._cdata
        if key not in skip and key not in seen:
            seen[key] = (st, str(t.dtype).replace("torch.", ""), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    storages = sorted(((st.nbytes(), dtype, shape) for st, dtype, shape in seen.values() if st.nbytes()),
                      key=lambda x: -x[0])
    return out, SavedBytes(sum(x[0] for x in storages), storages)


# ---------------------------------------------------------------- output-discarding recomputation
class _DiscardOutputFunction(torch.autograd.Function):
    """Runs ``run(*args)`` without recording it, keeps ``args`` for backward (through ``save_for_backward``, so
    saved-tensor hooks see them), and in backward differentiates the recomputed output that
    :class:`DiscardOutput` put in ``ctx.outputs``."""

    @staticmethod
    def forward(ctx, run, handle, *args):
        with torch.no_grad():
            out = run(*args)
        ctx.save_for_backward(*args)
        ctx.handle, handle.ctx = handle, ctx
        return out

    @staticmethod
    def backward(ctx, grad):
        ctx.handle.recompute()  # done already by the hook, unless discard() was never called
        inputs, out = ctx.detached, ctx.outputs
        torch.autograd.backward(out, grad)
        ctx.detached = ctx.outputs = ctx.handle = None
        return (None, None) + tuple(t.grad if t.requires_grad else None for t in inputs)


class DiscardOutput:
    """Output-discarding checkpointing, like Megatron-Core's ``CheckpointWithoutOutput`` (its ``recompute_modules``
    "layernorm", for norms that are separate modules, and "moe_act", the MoE experts' activation) and MindSpeed's
    norm and activation-function recomputation (``--recompute-norm``, ``--recompute-activation-function``).

    ``out = d.run(fn, *args)`` computes ``fn(*args)`` without keeping anything of ``fn`` but its inputs. The next
    operation (a linear layer) saves ``out`` for its weight gradient; then ``d.discard(next_outputs)`` frees
    ``out``'s storage (``untyped_storage().resize_(0)``: the GEMM's saved tensor is the same storage, so it is
    freed too) and hooks the gradient of ``next_outputs`` (that layer's outputs): when backward reaches that
    layer, ``fn`` runs again and its result is copied back into the freed storage, just before the layer's
    backward reads it. Exact: the recomputation is the same computation on the same inputs (deterministic here,
    so no RNG state is restored, as Megatron-Core does for dropout). Megatron-Core hooks the recomputation on the
    attention or MLP block's output instead; the bytes kept are the same.
    """

    def __init__(self):
        self.ctx, self.fn, self.out, self.done = None, None, None, False

    def run(self, fn, *args):
        self.fn = fn
        self.out = _DiscardOutputFunction.apply(fn, self, *args)
        return self.out

    def discard(self, *next_outputs):
        self.out.untyped_storage().resize_(0)
        for t in next_outputs:
            t.register_hook(self._recompute)

    def _recompute(self, grad):
        self.recompute()
        return grad

    def recompute(self):
        """Run ``fn`` again on the kept inputs and copy its output back into the freed storage (once: several
        next layers, Q, K, V or gate and up, share the one output)."""
        if not self.done:
            self.done = True
            ctx = self.ctx
            ctx.detached = tuple(t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors)
            with torch.enable_grad():
                ctx.outputs = self.fn(*ctx.detached)
            storage = self.out.untyped_storage()
            storage.resize_(ctx.outputs.untyped_storage().nbytes())
            with torch.no_grad():
                storage.copy_(ctx.outputs.untyped_storage())


def _run_discarding(discard: bool, fn, *args):
    """``(fn(*args), None)``, or with ``discard`` ``(output, handle)`` through a :class:`DiscardOutput`: call the
    handle's ``discard`` once the next linear layer has run (the blocks' ``recompute="norm-act"``)."""
    if not discard:
        return fn(*args), None
    d = DiscardOutput()
    return d.run(fn, *args), d


class KorthikantiBlock(nn.Module):
    """A pre-LN GPT block written exactly as Korthikanti et al. 2022 count it (see the module docstring).

    Input and output: ``(b, s, h)``. ``attention="flash"`` replaces the explicit core by
    ``F.scaled_dot_product_attention`` (PyTorch's CPU flash kernel: it keeps Q, K, V, O and the fp32 log-sum-exp;
    attention dropout is not applied inside it, the residual dropouts stay). ``recompute``: ``"none"``;
    ``"selective"`` checkpoints QKᵀ, softmax, dropout and ·V (or the SDPA call); ``"full"`` is applied from outside by :func:`measure_block`;
    ``"norm-act"`` runs both LayerNorms and the GeLU through :class:`DiscardOutput`. ``dropout_impl="native"`` calls
    ``torch.native_dropout`` (1-byte bool mask, as ``F.dropout`` does on CUDA and as Korthikanti assume);
    ``"functional"`` calls ``F.dropout``, which on CPU saves a mask of the activation dtype instead.
    The causal mask (s × s bool) is built in every forward and saved by ``masked_fill``: s² bytes the paper
    does not count.
    """

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.1, recompute: str = "none",
                 dropout_impl: str = "native", attention: str = "materialised"):
        super().__init__()
        self.dropout_impl = check_choice("dropout_impl", dropout_impl, ("native", "functional"))
        self.attention = check_choice("attention", attention, ATTENTION)
        self.h, self.a = check_int("hidden_size", hidden_size), check_int("num_heads", num_heads)
        self.p = check_number("dropout", dropout, minimum=0.0, maximum=0.99)
        self.recompute = check_choice("recompute", recompute, MODES)
        h = hidden_size
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.q, self.k, self.v, self.proj = (nn.Linear(h, h) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def _dropout(self, x):
        if not self.training or self.p == 0:
            return x
        if self.dropout_impl == "native":  # what F.dropout runs on CUDA: a fused kernel keeping a 1-byte bool mask
            return torch.native_dropout(x, self.p, True)[0]
        return F.dropout(x, self.p, True)   # on CPU: x * mask, the mask in x's dtype (2 or 4 bytes per element)

    def _heads(self, x):  # (b, s, h) -> (b·a, s, d), a contiguous copy
        b, s, _ = x.shape
        return x.view(b, s, self.a, self.h // self.a).transpose(1, 2).reshape(b * self.a, s, self.h // self.a)

    def _core(self, q, k, v):
        s = q.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = torch.bmm(q, k.transpose(1, 2)).masked_fill(causal, float("-inf"))
        probs = self._dropout(torch.softmax(scores, dim=-1))
        return torch.bmm(probs, v)

    def _flash(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward(self, x):
        b, s, h = x.shape
        discard = self.recompute == "norm-act"
        y, ln1 = _run_discarding(discard, self.ln1, x)
        qy, ky, vy = self.q(y), self.k(y), self.v(y)
        if ln1:
            ln1.discard(qy, ky, vy)
        if self.attention == "flash":   # (b, a, s, d) views of the projections, as models.Attention
            q, k, v = (t.view(b, s, self.a, h // self.a).transpose(1, 2) for t in (qy, ky, vy))
            core = self._flash
            z = checkpoint(core, q, k, v, use_reentrant=False) if self.recompute == "selective" else core(q, k, v)
            z = z.transpose(1, 2).reshape(b, s, h)
        else:
            q = self._heads(qy * (1.0 / math.sqrt(h // self.a)))
            k, v = self._heads(ky), self._heads(vy)
            if self.recompute == "selective":
                z = checkpoint(self._core, q, k, v, use_reentrant=False)
            else:
                z = self._core(q, k, v)
            z = z.view(b, self.a, s, h // self.a).transpose(1, 2).reshape(b, s, h)
        x = x + self._dropout(self.proj(z))
        y, ln2 = _run_discarding(discard, self.ln2, x)
        u = self.fc1(y)
        if ln2:
            ln2.discard(u)
        g, gelu = _run_discarding(discard, F.gelu, u)
        out = self.fc2(g)
        if gelu:
            gelu.discard(out)
        return x + self._dropout(out)


# ---------------------------------------------------------------- a Llama block, measured the same way
class FusedRMSNorm(torch.autograd.Function):
    """RMSNorm that keeps exactly what CUDA's fused kernel keeps: the input and the fp32 1/rms per row.

    On CUDA, ``F.rms_norm`` calls ``aten::_fused_rms_norm``, whose backward is
    ``_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)`` (torch 2.13 schema):
    autograd saves ``input`` and ``rstd``. On CPU, torch 2.13 runs the composite instead (upcast, x², mean, rsqrt,
    mul), which keeps two fp32 copies of the input. This Function runs PyTorch's own reference of the fused kernel
    (``torch._decomp.decompositions._fused_rms_norm`` forward and ``_fused_rms_norm_backward`` backward) so that
    the CPU measurement keeps what the GPU keeps; a test checks its gradients against ``F.rms_norm``.
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        from torch._decomp.decompositions import _fused_rms_norm
        y, rstd = _fused_rms_norm(x, [x.shape[-1]], weight, eps)
        ctx.save_for_backward(x, rstd, weight)
        return y

    @staticmethod
    def backward(ctx, grad):
        from torch._decomp.decompositions import _fused_rms_norm_backward
        x, rstd, weight = ctx.saved_tensors
        dx, dw = _fused_rms_norm_backward(grad, x, [x.shape[-1]], rstd, weight, [True, True])
        return dx, dw, None


class FusedSwiGLU(torch.autograd.Function):
    """``silu(g) · u`` from ``y = [g, u]`` (last dimension split in two), keeping only ``y`` and recomputing the
    SiLU in backward — the memory behaviour of Megatron-Core's fused SwiGLU (``fused_bias_swiglu``). Backward,
    from the product rule: ``d/dg = grad · u · σ(g)·(1 + g·(1 − σ(g)))``, ``d/du = grad · silu(g)``."""

    @staticmethod
    def forward(ctx, y):
        ctx.save_for_backward(y)
        g, u = y.chunk(2, dim=-1)
        return F.silu(g) * u

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        g, u = y.chunk(2, dim=-1)
        sig = torch.sigmoid(g)
        return torch.cat((grad * u * sig * (1 + g * (1 - sig)), grad * g * sig), dim=-1)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """A Llama decoder block as it is trained, for measuring what it saves for backward.

    Pre-RMSNorm (``norm_impl="fused"``: :class:`FusedRMSNorm`, what CUDA runs; ``"torch"``: ``F.rms_norm``'s CPU
    composite), Q/K/V projections without bias (K and V with ``num_kv_heads`` heads), rotary positions on Q and K
    (cos/sin are buffers, shared by all layers: not activations), attention ``"flash"``
    (``F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True)``: PyTorch's flash kernel, K and V not
    repeated) or ``"materialised"`` (K, V repeated to all heads as Megatron's core attention and Hugging Face's
    ``repeat_kv`` do, then QKᵀ → causal mask → softmax → ·V), output projection, residual; RMSNorm, SwiGLU MLP
    ``down(silu(gate(x)) · up(x))`` (``swiglu="fused"``: one ``h → 2f`` projection and :class:`FusedSwiGLU`),
    residual. No dropout. ``recompute="selective"`` checkpoints the attention core (its inputs Q, K, V are kept);
    ``"norm-act"`` runs both RMSNorms and the SwiGLU through :class:`DiscardOutput` (their outputs are freed once
    the next linear layer has saved them, and recomputed in backward). Input and output ``(b, s, h)``.
    """

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int | None = None,
                 ffn_hidden_size: int | None = None, *, attention: str = "flash", recompute: str = "none",
                 norm_impl: str = "fused", swiglu: str = "unfused", max_seq_len: int = 4096, eps: float = 1e-5,
                 rope_theta: float = 10000.0):
        super().__init__()
        self.h, self.a = check_int("hidden_size", hidden_size), check_int("num_heads", num_heads)
        self.kv = self.a if num_kv_heads is None else check_int("num_kv_heads", num_kv_heads, maximum=self.a)
        self.f = 4 * self.h if ffn_hidden_size is None else check_int("ffn_hidden_size", ffn_hidden_size)
        self.attention = check_choice("attention", attention, ATTENTION)
        self.recompute = check_choice("recompute", recompute, MODES)
        self.norm_impl = check_choice("norm_impl", norm_impl, NORM_IMPLS)
        self.swiglu = check_choice("swiglu", swiglu, SWIGLU)
        self.eps, d = eps, self.h // self.a
        self.norm1, self.norm2 = nn.Parameter(torch.ones(self.h)), nn.Parameter(torch.ones(self.h))
        self.q = nn.Linear(self.h, self.h, bias=False)
        self.k = nn.Linear(self.h, self.kv * d, bias=False)
        self.v = nn.Linear(self.h, self.kv * d, bias=False)
        self.o = nn.Linear(self.h, self.h, bias=False)
        if swiglu == "fused":
            self.gate_up = nn.Linear(self.h, 2 * self.f, bias=False)
        else:
            self.gate, self.up = nn.Linear(self.h, self.f, bias=False), nn.Linear(self.h, self.f, bias=False)
        self.down = nn.Linear(self.f, self.h, bias=False)
        inv = 1.0 / rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _norm(self, x, w):
        if self.norm_impl == "fused":
            return FusedRMSNorm.apply(x, w, self.eps)
        return F.rms_norm(x, (self.h,), w, self.eps)

    def _rope(self, x):   # x: (b, heads, s, d); cos/sin slices are views of the buffers
        s = x.shape[2]
        return x * self.cos[:s] + _rotate_half(x) * self.sin[:s]

    def _flash(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.a)

    def _materialised(self, q, k, v):
        b, a, s, d = q.shape
        rep = self.a // self.kv
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        q, k, v = (t.reshape(b * a, s, d) for t in (q, k, v))
        causal = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = (torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(d))).masked_fill(causal, float("-inf"))
        return torch.bmm(torch.softmax(scores, dim=-1), v).view(b, a, s, d)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.a
        y, norm1 = _run_discarding(self.recompute == "norm-act", self._norm, x, self.norm1)
        qy, ky, vy = self.q(y), self.k(y), self.v(y)
        if norm1:
            norm1.discard(qy, ky, vy)
        q = self._rope(qy.view(b, s, self.a, d).transpose(1, 2))
        k = self._rope(ky.view(b, s, self.kv, d).transpose(1, 2))
        v = vy.view(b, s, self.kv, d).transpose(1, 2)
        core = self._flash if self.attention == "flash" else self._materialised
        z = checkpoint(core, q, k, v, use_reentrant=False) if self.recompute == "selective" else core(q, k, v)
        return self._finish(x, z)

    def _finish(self, x, z):
        """The block after attention: output projection and residual, norm, SwiGLU MLP and residual.
        ``x``: the block's input (b, s, h); ``z``: attention's output (b, heads, s, d)."""
        b, s, h = x.shape
        x = x + self.o(z.transpose(1, 2).reshape(b, s, h))
        discard = self.recompute == "norm-act"
        y, norm2 = _run_discarding(discard, self._norm, x, self.norm2)
        if self.swiglu == "fused":
            gu = (self.gate_up(y),)
            m, act = _run_discarding(discard, FusedSwiGLU.apply, *gu)
        else:
            gu = (self.gate(y), self.up(y))
            m, act = _run_discarding(discard, lambda g, u: F.silu(g) * u, *gu)
        if norm2:
            norm2.discard(*gu)
        out = self.down(m)
        if act:
            act.discard(out)
        return x + out


def measure_block(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int, dtype: str = "bf16",
                  dropout: float = 0.1, recompute: str = "none", dropout_impl: str = "native",
                  block: nn.Module | None = None, seed: int = 0, arch: str = "gpt", num_kv_heads: int | None = None,
                  ffn_hidden_size: int | None = None, attention: str = "materialised", norm_impl: str = "fused",
                  swiglu: str = "unfused") -> SavedBytes:
    """Saved-for-backward bytes of one block on CPU for an input of shape ``(micro_batch_size, seq_len, h)``.

    ``block`` defaults to a :class:`KorthikantiBlock` (``arch="gpt"``, ``dropout``, ``dropout_impl``,
    ``attention``) or a :class:`LlamaBlock` (``arch="llama"``: ``num_kv_heads``, ``ffn_hidden_size``,
    ``attention``, ``norm_impl``, ``swiglu``; no dropout), in ``dtype`` (``"bf16"``, ``"fp16"`` or ``"fp32"``).
    ``recompute="full"`` wraps the whole block in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``:
    only its input is kept (counted here, since the checkpoint holds a reference to it); ``"selective"``
    checkpoints the attention core inside the block. The input requires grad, as it does inside a network.
    Returns :class:`SavedBytes` (bytes). Runs a backward afterwards to check the graph is usable.
    """
    check_choice("dtype", dtype, tuple(DTYPES))
    check_choice("recompute", recompute, MODES)
    check_choice("arch", arch, ("gpt", "llama"))
    torch.manual_seed(seed)
    inner = recompute if recompute in ("selective", "norm-act") else "none"
    if block is None:
        if arch == "gpt":
            block = KorthikantiBlock(hidden_size, num_heads, dropout, recompute=inner, dropout_impl=dropout_impl,
                                     attention=attention)
        else:
            block = LlamaBlock(hidden_size, num_heads, num_kv_heads, ffn_hidden_size, attention=attention,
                               recompute=inner, norm_impl=norm_impl, swiglu=swiglu, max_seq_len=seq_len)
        block = block.to(DTYPES[dtype])
    block.train()
    x = torch.randn(micro_batch_size, seq_len, hidden_size, dtype=next(block.parameters()).dtype,
                    requires_grad=True)
    exclude = list(block.parameters()) + list(block.buffers())
    if recompute == "full":
        out, saved = saved_tensor_bytes(lambda t: checkpoint(block, t, use_reentrant=False), x, exclude=exclude)
        # The non-reentrant checkpoint keeps its inputs itself (not through saved-tensor hooks): count x.
        if not saved.storages:
            saved = SavedBytes(x.untyped_storage().nbytes(),
                               [(x.untyped_storage().nbytes(), str(x.dtype).replace("torch.", ""), tuple(x.shape))])
    else:
        out, saved = saved_tensor_bytes(block, x, exclude=exclude)
    out.float().sum().backward()
    return saved


def extra_terms(*, seq_len: int, micro_batch_size: int, dtype: str = "bf16", recompute: str = "none",
                num_layernorms: int = 2, arch: str = "gpt", attention: str = "materialised",
                norm_impl: str = "fused", hidden_size: int | None = None) -> dict:
    """Bytes that the measured blocks save beyond the formula of :mod:`distlearn.activation_memory.formulas`, term by term:

    - ``layernorm_stats`` (GPT): each LayerNorm saves its mean and 1/std, ``2 × s·b`` elements in the activation
      dtype on CPU (fp32 on CUDA for 16-bit inputs);
    - ``rmsnorm_rstd`` (Llama): each RMSNorm keeps one fp32 1/rms per row, ``4·s·b`` bytes (the fused kernel);
    - ``cpu_rms_norm_composite`` (Llama, ``norm_impl="torch"`` only): torch 2.13's CPU ``F.rms_norm`` is a
      composite that keeps a fp32 copy of the input and the fp32 normalised input instead of the input:
      ``(8 − p)·s·b·h`` more bytes per norm (``hidden_size`` needed);
    - ``causal_mask``: the s × s bool mask saved by ``masked_fill`` (materialised attention only; 0 with selective
      or full recomputation, where the attention core is recomputed; flash kernels take ``is_causal``).

    The norm terms are 0 with full and with norm-act recomputation (the checkpoint runs the norms without
    recording them). Measured = formula + these, exactly (tests check it). Returns
    bytes by term plus ``"total"``.
    """
    b = check_int("micro_batch_size", micro_batch_size)
    s = check_int("seq_len", seq_len)
    size = torch.tensor([], dtype=DTYPES[check_choice("dtype", dtype, tuple(DTYPES))]).element_size()
    check_choice("recompute", recompute, MODES)
    check_choice("arch", arch, ("gpt", "llama"))
    check_choice("attention", attention, ATTENTION)
    check_choice("norm_impl", norm_impl, NORM_IMPLS)
    kept = recompute not in ("full", "norm-act")   # the norms' statistics ("norm-act": the norm runs unrecorded)
    terms = {"causal_mask": s * s if recompute in ("none", "norm-act") and attention == "materialised" else 0}
    if arch == "gpt":
        terms["layernorm_stats"] = num_layernorms * 2 * s * b * size if kept else 0
    else:
        terms["rmsnorm_rstd"] = num_layernorms * 4 * s * b if kept else 0
        if norm_impl == "torch":
            h = check_int("hidden_size", hidden_size)
            terms["cpu_rms_norm_composite"] = num_layernorms * (8 - size) * s * b * h if kept else 0
    terms["total"] = sum(terms.values())
    return terms


def sdpa_block_bytes(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                     activation_bytes: int = 2) -> int:
    """Saved bytes of :class:`distlearn.core.models.Block` (GPT arch, no dropout), whose attention is
    ``F.scaled_dot_product_attention``: on CPU (and with FlashAttention on GPUs) it saves Q, K, V, its output and a
    fp32 log-sum-exp per row (``4·a·s·b`` bytes) instead of the ``a·s²·b`` probabilities — the attention backward
    recomputes them, so the ``5as/h`` term vanishes as with selective recomputation.

    Measured total (a test checks it to the byte): ``16·p·sbh + 4·a·s·b + 2·2·s·b·p`` with ``p`` the activation
    bytes — Korthikanti's 16 sbh tensors (no dropout masks), the log-sum-exp, and the LayerNorms' mean and 1/std.
    """
    s, b = check_int("seq_len", seq_len), check_int("micro_batch_size", micro_batch_size)
    h, a = check_int("hidden_size", hidden_size), check_int("num_heads", num_heads)
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    return 16 * p * s * b * h + 4 * a * s * b + 2 * 2 * s * b * p


__all__ = ["sdpa_block_bytes", "SavedBytes", "saved_tensor_bytes", "KorthikantiBlock", "LlamaBlock", "FusedRMSNorm",
           "FusedSwiGLU", "measure_block", "extra_terms"]
