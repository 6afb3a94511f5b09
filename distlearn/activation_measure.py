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

from .validate import check_choice, check_int, check_number

MODES = ("none", "selective", "full")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


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
    keep ``output`` alive while you need the graph. Storages saved while the output is alive cannot share an
    address, so ``data_ptr`` identifies them.
    """
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, tuple] = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in skip and ptr not in seen:
            seen[ptr] = (st.nbytes(), str(t.dtype).replace("torch.", ""), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    storages = sorted(seen.values(), key=lambda x: -x[0])
    return out, SavedBytes(sum(x[0] for x in storages), storages)


class KorthikantiBlock(nn.Module):
    """A pre-LN GPT block written exactly as Korthikanti et al. 2022 count it (see the module docstring).

    Input and output: ``(b, s, h)``. ``recompute``: ``"none"``; ``"selective"`` checkpoints QKᵀ, softmax,
    dropout and ·V; ``"full"`` is applied from outside by :func:`measure_block`. ``dropout_impl="native"`` calls
    ``torch.native_dropout`` (1-byte bool mask, as ``F.dropout`` does on CUDA and as Korthikanti assume);
    ``"functional"`` calls ``F.dropout``, which on CPU saves a mask of the activation dtype instead.
    The causal mask (s × s bool) is built in every forward and saved by ``masked_fill``: s² bytes the paper
    does not count.
    """

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.1, recompute: str = "none",
                 dropout_impl: str = "native"):
        super().__init__()
        self.dropout_impl = check_choice("dropout_impl", dropout_impl, ("native", "functional"))
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

    def forward(self, x):
        b, s, h = x.shape
        y = self.ln1(x)
        q = self._heads(self.q(y) * (1.0 / math.sqrt(h // self.a)))
        k, v = self._heads(self.k(y)), self._heads(self.v(y))
        if self.recompute == "selective":
            z = checkpoint(self._core, q, k, v, use_reentrant=False)
        else:
            z = self._core(q, k, v)
        z = z.view(b, self.a, s, h // self.a).transpose(1, 2).reshape(b, s, h)
        x = x + self._dropout(self.proj(z))
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + self._dropout(y)


def measure_block(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int, dtype: str = "bf16",
                  dropout: float = 0.1, recompute: str = "none", dropout_impl: str = "native",
                  block: nn.Module | None = None, seed: int = 0) -> SavedBytes:
    """Saved-for-backward bytes of one block on CPU for an input of shape ``(micro_batch_size, seq_len, h)``.

    ``block`` defaults to a :class:`KorthikantiBlock` in ``dtype`` (``"bf16"``, ``"fp16"`` or ``"fp32"``).
    ``recompute="full"`` wraps the whole block in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``:
    only its input is kept (counted here, since the checkpoint holds a reference to it); ``"selective"``
    checkpoints the attention core inside the block. The input requires grad, as it does inside a network.
    Returns :class:`SavedBytes` (bytes). Runs a backward afterwards to check the graph is usable.
    """
    check_choice("dtype", dtype, tuple(DTYPES))
    check_choice("recompute", recompute, MODES)
    torch.manual_seed(seed)
    if block is None:
        block = KorthikantiBlock(hidden_size, num_heads, dropout,
                                 recompute="selective" if recompute == "selective" else "none",
                                 dropout_impl=dropout_impl)
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
                num_layernorms: int = 2) -> dict:
    """Bytes that :class:`KorthikantiBlock` saves beyond Korthikanti's count, term by term:

    - ``layernorm_stats``: each LayerNorm saves its mean and 1/std, ``2 × s·b`` elements in the activation dtype
      on CPU (fp32 on CUDA for 16-bit inputs); 0 with full recomputation;
    - ``causal_mask``: the s × s bool mask saved by ``masked_fill`` (0 with selective or full recomputation, where
      the attention core is recomputed).

    Measured = formula + these, exactly (a test checks it). Returns bytes by term plus ``"total"``.
    """
    b = check_int("micro_batch_size", micro_batch_size)
    s = check_int("seq_len", seq_len)
    size = torch.tensor([], dtype=DTYPES[check_choice("dtype", dtype, tuple(DTYPES))]).element_size()
    check_choice("recompute", recompute, MODES)
    terms = {"layernorm_stats": 0 if recompute == "full" else num_layernorms * 2 * s * b * size,
             "causal_mask": s * s if recompute == "none" else 0}
    terms["total"] = sum(terms.values())
    return terms


def sdpa_block_bytes(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                     activation_bytes: int = 2) -> int:
    """Saved bytes of :class:`distlearn.models.Block` (GPT arch, no dropout), whose attention is
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


__all__ = ["sdpa_block_bytes", "SavedBytes", "saved_tensor_bytes", "KorthikantiBlock", "measure_block", "extra_terms"]
