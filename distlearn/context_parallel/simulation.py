"""Context parallelism (CP): every layer's sequence split over ``cp`` ranks, attention computed exactly.

The per-token layers (norms, projections, MLP) need nothing from other ranks; only attention does, because every
query attends to keys of the whole sequence. This module simulates, in float64 numpy on a
:class:`distlearn.core.comm.VirtualCluster` (which counts the bytes each rank sends), the three ways to do it:

- **ring** (Liu, Zaharia & Abbeel 2023, *Ring Attention with Blockwise Transformers*, arXiv 2310.01889, §3): the
  K/V blocks travel around the ring ``r → r+1``; each rank merges the partial attention of its queries over each
  block with the **online softmax** (running log-sum-exp; Milakov & Gimelshein 2018; Dao et al. 2022,
  *FlashAttention*, §3.1). Backward: dQ stays local, dK and dV are accumulated as they travel with their block and
  arrive back home after ``cp`` hops (PyTorch 2.13 ``torch/distributed/tensor/experimental/_context_parallel/
  _attention.py``, ``_templated_ring_attention(_backward)``);
- **all-gather** (Llama 3, Dubey et al. 2024, §3.3.2): all-gather K and V once, then attend locally — the
  transfer is exposed, but small with GQA (PyTorch's default ``rotate_method`` in 2.13 is ``"allgather"`` too; it
  posts the gather asynchronously, overlapping the local block, and sends dK/dV around the ring in backward);
- **all-to-all** (Jacobs et al. 2023, *DeepSpeed Ulysses*, arXiv 2309.14509, §3): re-shard Q, K, V from
  sequence to heads, run ordinary attention on ``heads / cp`` heads over the whole sequence, re-shard back.

Sequence layouts (which tokens a rank holds): ``"contiguous"`` (rank r: tokens ``r·s/cp …``), ``"zigzag"`` (2·cp
chunks; rank r holds chunks r and 2cp−1−r: Llama 3 §3.3.2, PyTorch's ``_HeadTailLoadBalancer`` in
``_context_parallel/_load_balancer.py``) and ``"striped"`` (token i on rank i mod cp: Brandon et al. 2023,
*Striped Attention*, arXiv 2311.09431). Under the causal mask, contiguous chunks leave the last rank with almost
twice the average work; zig-zag balances it exactly, striped to within one diagonal.

Arrays: ``q`` of shape ``(b, a, s, d)`` (batch, heads, sequence, head dim); ``k``, ``v`` of shape
``(b, kv, s, d)`` with ``kv`` dividing ``a`` (grouped-query attention; ``kv = a`` without it). Scale
``1/sqrt(d)`` unless given. Units: bytes, FLOPs, seconds; bandwidths in bytes/s (``distlearn.core.hardware``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from distlearn.activation_memory.formulas import ActivationTerm, layer_activation_table, layer_shape
from distlearn.core.comm import VirtualCluster
from distlearn.core.models import ModelConfig
from distlearn.core.validate import (MAX_ELEMENTS, DistlearnValueError, check_array, check_bool, check_choice, check_int,
                                     check_number, check_positive, check_record)
from distlearn.core.guard import read_only

LAYOUTS = ("contiguous", "zigzag", "striped")
VARIANTS = ("ring", "all-gather", "all-to-all")
PASSES = ("forward", "backward")

FLASH_BACKWARD_FACTOR = 2.5
"""Backward FLOPs of flash attention / forward FLOPs: five matmuls (S = QKᵀ recomputed, dV, dP, dQ, dK) against
two (Dao 2023, *FlashAttention-2*, §4.1: "To get the FLOPs of the backward pass, we multiply the forward pass
FLOPs by 2.5")."""

TORCH_GRAD_BYTES = 4
"""Bytes per element of the dK/dV that PyTorch 2.13's ring backward sends: ``_cp_options.convert_to_f32 = True``,
so the travelling accumulators are float32 (``_templated_ring_attention_backward``, ``accum_dtype``)."""


# ---------------------------------------------------------------- attention of queries over one K/V block
@dataclass
class Partial:
    """Attention of some queries over the keys seen so far: ``out`` ``(b, a, s_q, d)`` already normalised over
    those keys, ``lse`` ``(b, a, s_q)`` = log Σ exp(score) over them (−inf for a row that saw no key)."""

    out: np.ndarray
    lse: np.ndarray


def _check_qkv(q, k, v) -> tuple[int, int, int, int, int]:
    q, k, v = (check_array(n, x, ndim=4, min_size=1) for n, x in (("q", q), ("k", k), ("v", v)))
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape:
        raise DistlearnValueError(
            "q", f"q must be (b, a, s, d) and k, v (b, kv, s, d) of equal shape; got {q.shape}, {k.shape}, "
                 f"{v.shape}.",
            f"q 的形状必须是 (b, a, s, d)，k、v 为相同形状 (b, kv, s, d)；收到 {q.shape}、{k.shape}、{v.shape}。")
    b, a, s, d = q.shape
    kv = k.shape[1]
    if k.shape[0] != b or k.shape[3] != d or a % kv:
        raise DistlearnValueError(
            "k", f"k must be (b = {b}, kv, s, d = {d}) with kv dividing a = {a}; got {k.shape}.",
            f"k 的形状必须是 (b = {b}, kv, s, d = {d})，且 kv 整除 a = {a}；收到 {k.shape}。")
    return b, a, kv, s, d


def _repeat_kv(x: np.ndarray, heads: int) -> np.ndarray:
    """K or V of ``kv`` heads repeated to ``heads`` (query head i uses K/V head i // (heads / kv))."""
    return np.repeat(x, heads // x.shape[1], axis=1)


def _sum_groups(dx: np.ndarray, kv: int) -> np.ndarray:
    """The gradient of :func:`_repeat_kv`: sum the repeated heads of each K/V head."""
    b, a, s, d = dx.shape
    return dx.reshape(b, kv, a // kv, s, d).sum(axis=2)


def _scale(scale, head_dim: int) -> float:
    """The softmax scale: ``1/sqrt(head_dim)`` when None, else a finite number > 0 (checked)."""
    return 1.0 / math.sqrt(head_dim) if scale is None else check_positive("scale", scale)


def causal_mask(q_pos, k_pos) -> np.ndarray:
    """Boolean ``(len(q_pos), len(k_pos))``: True where query at position ``q_pos[i]`` may attend to the key at
    ``k_pos[j]``, i.e. ``k_pos[j] <= q_pos[i]``."""
    q_pos, k_pos = check_array("q_pos", q_pos, ndim=1), check_array("k_pos", k_pos, ndim=1)
    return k_pos[None, :] <= q_pos[:, None]


def block_attention(q, k, v, *, mask=None, scale: float | None = None) -> Partial:
    """Softmax attention of ``q`` ``(b, a, s_q, d)`` over one block ``k``, ``v`` ``(b, kv, s_k, d)``.

    ``mask`` ``(s_q, s_k)`` bool, True = attend. Returns :class:`Partial` with ``out = softmax(S)·V`` over this
    block only and ``lse = log Σ_j exp(S_ij)``, ``S = scale·QKᵀ``. Rows with every key masked get ``lse = −inf``
    and ``out = 0`` (they contribute nothing when merged). Raises DistlearnValueError for arrays of other shapes
    or holding NaN or infinity.
    """
    _check_qkv(q, k, v)
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (q.shape[2], k.shape[2]):
            raise DistlearnValueError(
                "mask", f"mask must be a bool array of shape (s_q, s_k) = {(q.shape[2], k.shape[2])}; got "
                        f"{mask.dtype} {mask.shape}.",
                f"mask 必须是形状为 (s_q, s_k) = {(q.shape[2], k.shape[2])} 的布尔数组；收到 {mask.dtype} {mask.shape}。")
    a = q.shape[1]
    scale = _scale(scale, q.shape[-1])
    s = scale * (q @ np.swapaxes(_repeat_kv(k, a), -1, -2))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(total))[..., 0]
    out = (e @ _repeat_kv(v, a)) / np.where(total > 0, total, 1.0)
    return Partial(out, lse)


def merge_blocks(out_a, lse_a, out_b, lse_b) -> tuple[np.ndarray, np.ndarray]:
    """Merge the attention of the same queries over two disjoint sets of keys (the online-softmax step).

    With ``lse = log(e^{lse_a} + e^{lse_b})`` (``np.logaddexp``, never overflows)::

        out = e^{lse_a − lse}·out_a + e^{lse_b − lse}·out_b

    because each ``out`` is normalised by its own ``e^{lse}``; the weights are the blocks' shares of the full
    softmax denominator. Order does not matter, so blocks can arrive in any order (Liu et al. 2023, §3).
    PyTorch's ``_SDPAMerger`` writes the same as ``out_a − σ(lse_b − lse_a)(out_a − out_b)``. A row with
    ``lse = −inf`` (no key seen) gets weight 0. Shapes: ``out`` ``(..., s, d)``, ``lse`` ``(..., s)``.
    """
    out_a, lse_a, out_b, lse_b = _check_blocks(out_a, lse_a, out_b, lse_b)
    lse = np.logaddexp(lse_a, lse_b)
    ref = np.where(np.isfinite(lse), lse, 0.0)
    wa = np.where(np.isfinite(lse_a), np.exp(lse_a - ref), 0.0)
    wb = np.where(np.isfinite(lse_b), np.exp(lse_b - ref), 0.0)
    return wa[..., None] * out_a + wb[..., None] * out_b, lse


def _check_blocks(out_a, lse_a, out_b, lse_b):
    """The two blocks of a merge as float arrays: ``out`` finite ``(..., s, d)``, ``lse`` ``(..., s)`` (−inf allowed:
    a row that saw no key; NaN and +inf refused), both blocks of one shape. Raises DistlearnValueError."""
    out_a, out_b = check_array("out_a", out_a, min_size=1), check_array("out_b", out_b, min_size=1)
    lse_a, lse_b = check_array("lse_a", lse_a, finite=False), check_array("lse_b", lse_b, finite=False)
    for name, lse in (("lse_a", lse_a), ("lse_b", lse_b)):
        if np.isnan(lse).any() or (lse == np.inf).any():
            raise DistlearnValueError(name, f"{name} must hold finite numbers or −inf (a row that saw no key), "
                                            f"not NaN or +inf.",
                                      f"{name} 只能包含有限数值或 −inf（没有看到任何键的行），不能是 NaN 或 +inf。")
    if out_b.shape != out_a.shape or lse_a.shape != out_a.shape[:-1] or lse_b.shape != lse_a.shape:
        raise DistlearnValueError(
            "out_b", f"out_a and out_b must have one shape (..., s, d) and lse_a, lse_b the shape (..., s); got "
                     f"{out_a.shape}, {out_b.shape}, {lse_a.shape}, {lse_b.shape}.",
            f"out_a 和 out_b 的形状必须相同 (..., s, d)，lse_a、lse_b 的形状必须是 (..., s)；收到 {out_a.shape}、"
            f"{out_b.shape}、{lse_a.shape}、{lse_b.shape}。")
    return out_a, lse_a, out_b, lse_b


def averaging_merge(out_a, lse_a, out_b, lse_b) -> tuple[np.ndarray, np.ndarray]:
    """A **wrong** merge, kept to show that the comparison with full attention catches it: it averages the two
    block outputs instead of weighting them by their softmax mass ``e^{lse}`` (the log-sum-exp is combined
    correctly, so only the output is wrong). Checks its arguments as :func:`merge_blocks` does."""
    out_a, lse_a, out_b, lse_b = _check_blocks(out_a, lse_a, out_b, lse_b)
    return (out_a + out_b) / 2, np.logaddexp(lse_a, lse_b)


def full_attention(q, k, v, *, causal: bool = False, scale: float | None = None) -> Partial:
    """Attention over the whole sequence in one block (the unsharded reference). Returns :class:`Partial`."""
    _, _, _, s, d = _check_qkv(q, k, v)
    causal, scale = check_bool("causal", causal), _scale(scale, d)
    pos = np.arange(s)
    return block_attention(np.asarray(q, float), np.asarray(k, float), np.asarray(v, float),
                           mask=causal_mask(pos, pos) if causal else None, scale=scale)


def reference_online_attention(q, k, v, causal=False, scale=None):
    """Attention one key at a time, with a running maximum and a running sum: the online softmax, as plain loops.

    For every head and query row: keep ``m`` (largest score so far), ``l`` (Σ exp(score − m)) and ``acc``
    (Σ exp(score − m)·v). A new key with score ``x`` rescales the old sums by ``exp(m − m_new)``. At the end
    ``out = acc / l`` and ``lse = m + log l``. Ring attention does exactly this, a block of keys at a time.
    ``q`` ``(b, a, s, d)``, ``k``, ``v`` ``(b, kv, s, d)``. Returns ``(out, lse)``.
    """
    b, a, s, d = q.shape
    group = a // k.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out, lse = np.zeros((b, a, s, d)), np.zeros((b, a, s))
    for n in range(b):
        for h in range(a):
            for i in range(s):
                m, l, acc = -math.inf, 0.0, np.zeros(d)
                for j in range(s):
                    if causal and j > i:
                        break
                    x = scale * float(q[n, h, i] @ k[n, h // group, j])
                    m_new = max(m, x)
                    l = l * math.exp(m - m_new) + math.exp(x - m_new)
                    acc = acc * math.exp(m - m_new) + math.exp(x - m_new) * v[n, h // group, j]
                    m = m_new
                out[n, h, i], lse[n, h, i] = acc / l, m + math.log(l)
    return out, lse


def _checked_reference(loops):
    """:func:`reference_online_attention` with its flags checked at the boundary (issue 33). A wrapper, not two
    lines in the loops, so that the listing chapter 10 prints (``inspect.getsource`` follows ``__wrapped__``) stays
    the plain loops it teaches."""
    @functools.wraps(loops)
    def checked(q, k, v, causal=False, scale=None):
        _check_qkv(q, k, v)
        q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
        causal = check_bool("causal", causal)
        scale = None if scale is None else check_positive("scale", scale)
        return loops(q, k, v, causal, scale)
    return checked


reference_online_attention = _checked_reference(reference_online_attention)


# ---------------------------------------------------------------- layouts: which tokens a rank holds
def _check_layout(seq_len: int, cp: int, layout: str) -> tuple[int, int]:
    s = check_int("seq_len", seq_len, maximum=MAX_ELEMENTS)
    cp = check_int("cp", cp, maximum=4096)
    check_choice("layout", layout, LAYOUTS)
    parts = 2 * cp if layout == "zigzag" else cp
    if s % parts:
        raise DistlearnValueError(
            "seq_len", f"seq_len = {s} must be divisible by {'2·cp' if layout == 'zigzag' else 'cp'} = {parts} "
                       f"for the {layout} layout.",
            f"{layout} 切分要求 seq_len = {s} 能被 {'2·cp' if layout == 'zigzag' else 'cp'} = {parts} 整除。")
    return s, cp


def layout_chunks(cp: int, layout: str) -> list[tuple[int, ...]]:
    """The sequence chunks each rank holds: contiguous — ``cp`` chunks, rank r holds ``(r,)``; zig-zag —
    ``2·cp`` chunks, rank r holds ``(r, 2cp − 1 − r)`` (Llama 3 §3.3.2: "the i-th CP rank received both the
    i-th and the (2 × CP − 1 − i)-th chunks"). Striped has no chunks (token i on rank i mod cp): raises."""
    cp = check_int("cp", cp, maximum=4096)
    check_choice("layout", layout, ("contiguous", "zigzag"))
    return [(r,) if layout == "contiguous" else (r, 2 * cp - 1 - r) for r in range(cp)]


def layout_positions(seq_len: int, cp: int, layout: str = "contiguous") -> list[np.ndarray]:
    """Token positions held by each rank, in the order the rank stores them (int arrays of ``seq_len / cp``).

    ``np.concatenate`` of the list is the permutation PyTorch applies before sharding: for ``"zigzag"`` it
    equals ``_HeadTailLoadBalancer(seq_len, cp, device)._generate_indices()[0]`` (a test checks it). Raises
    DistlearnValueError unless ``cp`` (``2·cp`` for zig-zag) divides ``seq_len``.
    """
    s, cp = _check_layout(seq_len, cp, layout)
    if layout == "striped":
        return [np.arange(r, s, cp) for r in range(cp)]
    size = s // (cp if layout == "contiguous" else 2 * cp)
    return [np.concatenate([np.arange(c * size, (c + 1) * size) for c in chunks])
            for chunks in layout_chunks(cp, layout)]


# ---------------------------------------------------------------- ring attention, forward
@dataclass
class RingForward:
    """Result of :func:`ring_attention_forward`.

    ``out`` ``(b, a, s, d)`` and ``lse`` ``(b, a, s)`` in the original token order; ``local[r]``: rank r's
    :class:`Partial` in its layout order; ``positions[r]``: its tokens; ``source[r, t]``: whose K/V block rank r
    holds at step t; ``work[r, t]``: score entries (query-key pairs) it computes then, per batch element and
    head; ``bytes_sent[r]``: bytes rank r sent (K and V of its current block at every step but the last).
    """

    out: np.ndarray
    lse: np.ndarray
    local: list
    positions: list
    source: np.ndarray
    work: np.ndarray
    bytes_sent: np.ndarray


def ring_attention_forward(q, k, v, cp: int, *, causal: bool = False, layout: str = "contiguous",
                           scale: float | None = None, merge=merge_blocks) -> RingForward:
    """Ring attention on ``cp`` simulated ranks; equal to :func:`full_attention` to float64 rounding (~1e-15).

    Rank r holds the queries, keys and values of :func:`layout_positions` ``[r]``. At step t = 0 … cp−1 it
    attends to the K/V block it holds (block of rank ``(r − t) mod cp``), merges the result into its running
    :class:`Partial` with ``merge`` (default :func:`merge_blocks`), and — except after the last step — sends the
    block to rank ``r + 1`` and receives the next from ``r − 1`` (one message of K and V: ``VirtualCluster.send``
    / ``recv``, which count the bytes). Under ``causal`` a block whose every pair is masked is skipped (its work
    is 0) but still forwarded. ``merge`` lets a wrong merge be tried (:func:`averaging_merge`).
    Raises DistlearnValueError for bad shapes or a layout that does not divide the sequence.
    """
    b, a, kv, s, d = _check_qkv(q, k, v)
    causal, scale = check_bool("causal", causal), _scale(scale, d)
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    pos = layout_positions(s, cp, layout)
    cluster = VirtualCluster(cp)
    local_q = [q[:, :, p] for p in pos]
    held = [(k[:, :, p], v[:, :, p], r) for r, p in enumerate(pos)]
    acc: list[Partial | None] = [None] * cp
    source, work = np.zeros((cp, cp), dtype=int), np.zeros((cp, cp), dtype=np.int64)
    for t in range(cp):
        for r in range(cp):
            kb, vb, src = held[r]
            mask = causal_mask(pos[r], pos[src]) if causal else None
            source[r, t] = src
            work[r, t] = int(mask.sum()) if causal else len(pos[r]) * len(pos[src])
            if work[r, t] == 0:
                continue
            blk = block_attention(local_q[r], kb, vb, mask=mask, scale=scale)
            acc[r] = blk if acc[r] is None else Partial(*merge(acc[r].out, acc[r].lse, blk.out, blk.lse))
        if t < cp - 1:
            for r in range(cp):
                kb, vb, _ = held[r]
                cluster.send(np.concatenate([kb.ravel(), vb.ravel()]), r, (r + 1) % cp)
            received = []
            for r in range(cp):
                msg = cluster.recv((r - 1) % cp, r)
                shape = held[(r - 1) % cp][0].shape
                n = int(np.prod(shape))
                received.append((msg[:n].reshape(shape), msg[n:].reshape(shape), held[(r - 1) % cp][2]))
            held = received
    out, lse = np.zeros((b, a, s, d)), np.zeros((b, a, s))
    for r, p in enumerate(pos):
        out[:, :, p], lse[:, :, p] = acc[r].out, acc[r].lse
    return RingForward(out, lse, acc, pos, source, work, cluster.bytes_sent.copy())


# ---------------------------------------------------------------- ring attention, backward
@dataclass
class RingBackward:
    """Result of :func:`ring_attention_backward`: ``dq``, ``dk``, ``dv`` in the original token order (shapes of
    q, k, v); ``bytes_sent[r]`` (K/V ``cp − 1`` times and dK/dV ``cp`` times); ``kv_bytes`` and ``grad_bytes``:
    the per-rank parts of it."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    bytes_sent: np.ndarray
    kv_bytes: np.ndarray
    grad_bytes: np.ndarray


def _block_grads(q, k, v, dout, lse, delta, mask, scale):
    """Flash-attention backward of one block (Dao et al. 2022, Alg. 4): with the final ``lse`` of each query row
    the block's probabilities are ``P = exp(S − lse)``, and ``D = rowsum(dO ∘ O)``::

        dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ∘ (dP − D),  dQ = scale·dS K,  dK = scale·dSᵀ Q

    (K, V repeated to all query heads first; their gradients summed back over each group)."""
    a, kv = q.shape[1], k.shape[1]
    kr, vr = _repeat_kv(k, a), _repeat_kv(v, a)
    s = scale * (q @ np.swapaxes(kr, -1, -2)) - lse[..., None]
    p = np.exp(s if mask is None else np.where(mask, s, -np.inf))
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(vr, -1, -2)
    ds = p * (dp - delta[..., None])
    return scale * (ds @ kr), _sum_groups(scale * (np.swapaxes(ds, -1, -2) @ q), kv), _sum_groups(dv, kv)


def ring_attention_backward(q, k, v, dout, cp: int, *, causal: bool = False, layout: str = "contiguous",
                            scale: float | None = None, forward: RingForward | None = None) -> RingBackward:
    """Backward of ring attention on ``cp`` simulated ranks; equal to autograd through full attention.

    Each rank keeps its queries, output, ``dO`` and the final log-sum-exp of its rows (``forward``, recomputed
    if not given). The K/V blocks travel the ring again, and with each block travels an accumulator for its dK
    and dV: at step t rank r adds the gradient its queries give the block it holds, then passes block and
    accumulator on. dQ never leaves the rank. After the last step one more hop brings every accumulator back to
    the rank that owns the block (``cp`` dK/dV messages, ``cp − 1`` K/V messages per rank: PyTorch 2.13's
    ``_templated_ring_attention_backward`` sends the same). Returns :class:`RingBackward`.
    """
    b, a, kv, s, d = _check_qkv(q, k, v)
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    dout = check_array("dout", dout)
    if dout.shape != q.shape:
        raise DistlearnValueError("dout", f"dout must have q's shape {q.shape}, got {dout.shape}.",
                                  f"dout 的形状必须与 q 相同 {q.shape}，收到 {dout.shape}。")
    causal, scale = check_bool("causal", causal), _scale(scale, d)
    fwd = forward or ring_attention_forward(q, k, v, cp, causal=causal, layout=layout, scale=scale)
    pos = fwd.positions
    if len(pos) != cp:
        raise DistlearnValueError("forward", f"forward was computed for cp = {len(pos)}, not {cp}.",
                                  f"forward 是按 cp = {len(pos)} 计算的，不是 {cp}。")
    kv_cluster, grad_cluster = VirtualCluster(cp), VirtualCluster(cp)
    lq, ldo = [q[:, :, p] for p in pos], [dout[:, :, p] for p in pos]
    lse = [fwd.local[r].lse for r in range(cp)]
    delta = [(ldo[r] * fwd.local[r].out).sum(axis=-1) for r in range(cp)]
    dq = [np.zeros_like(x) for x in lq]
    held = [(k[:, :, p], v[:, :, p], r) for r, p in enumerate(pos)]
    acc = [(np.zeros_like(h[0]), np.zeros_like(h[1])) for h in held]
    for t in range(cp):
        for r in range(cp):
            kb, vb, src = held[r]
            mask = causal_mask(pos[r], pos[src]) if causal else None
            if mask is not None and not mask.any():
                continue
            gq, gk, gv = _block_grads(lq[r], kb, vb, ldo[r], lse[r], delta[r], mask, scale)
            dq[r] += gq
            acc[r] = (acc[r][0] + gk, acc[r][1] + gv)
        if cp == 1:
            break
        for r in range(cp):               # every step: each accumulator moves on; K/V too, except after the last
            grad_cluster.send(np.concatenate([acc[r][0].ravel(), acc[r][1].ravel()]), r, (r + 1) % cp)
            if t < cp - 1:
                kv_cluster.send(np.concatenate([held[r][0].ravel(), held[r][1].ravel()]), r, (r + 1) % cp)
        new_acc, new_held = [], []
        for r in range(cp):
            prev = (r - 1) % cp
            shape = acc[prev][0].shape
            n = int(np.prod(shape))
            g = grad_cluster.recv(prev, r)
            new_acc.append((g[:n].reshape(shape), g[n:].reshape(shape)))
            m = kv_cluster.recv(prev, r) if t < cp - 1 else None
            new_held.append((None if m is None else m[:n].reshape(shape),
                             None if m is None else m[n:].reshape(shape), held[prev][2]))
        acc, held = new_acc, new_held
    dq_full, dk_full, dv_full = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for r, p in enumerate(pos):
        owner = held[r][2]
        if owner != r:   # cannot happen: after cp hops every accumulator is home
            raise AssertionError((r, owner))
        dq_full[:, :, p] = dq[r]
        dk_full[:, :, p], dv_full[:, :, p] = acc[r]
    return RingBackward(dq_full, dk_full, dv_full, kv_cluster.bytes_sent + grad_cluster.bytes_sent,
                        kv_cluster.bytes_sent.copy(), grad_cluster.bytes_sent.copy())


# ---------------------------------------------------------------- all-to-all (DeepSpeed-Ulysses)
@dataclass(frozen=True)
class UlyssesHeads:
    """Heads per rank under Ulysses: ``q_heads`` (query heads per rank), ``kv_heads`` (K/V heads per rank after
    replication), ``kv_replication`` (how many times each K/V head is copied so every rank has one)."""

    q_heads: int
    kv_heads: int
    kv_replication: int


def ulysses_heads(num_heads: int, num_kv_heads: int, cp: int, tp: int = 1) -> UlyssesHeads:
    """The head split DeepSpeed-Ulysses needs, or a bilingual error saying why ``cp`` is impossible.

    Within one tensor-parallel rank there are ``a/tp`` query and ``kv/tp`` K/V heads (``tp`` must divide both).
    The all-to-all gives each of the ``cp`` ranks whole heads, so ``cp`` must divide ``a/tp`` (hence
    ``cp ≤ a/tp``); K/V heads must divide evenly too, or — when there are fewer K/V heads than ranks — ``cp`` must
    be a multiple of them and each is replicated ``cp / (kv/tp)`` times (DeepSpeed 0.19.8
    ``runtime/sequence_parallel/ulysses_sp.py``, ``UlyssesSPAttentionHF``: "Attention head count … is not
    divisible by SP size", ``kv_replication_factor``).
    """
    a, kv = check_int("num_heads", num_heads), check_int("num_kv_heads", num_kv_heads)
    cp, tp = check_int("cp", cp, maximum=4096), check_int("tp", tp, maximum=4096)
    if a % kv or a % tp or kv % tp:
        raise DistlearnValueError(
            "tp", f"tp = {tp} must divide num_heads = {a} and num_kv_heads = {kv} (and kv must divide heads).",
            f"tp = {tp} 必须同时整除 num_heads = {a} 和 num_kv_heads = {kv}（且 kv 必须整除头数）。")
    at, kt = a // tp, kv // tp
    if at % cp:
        raise DistlearnValueError(
            "cp", f"Ulysses needs cp = {cp} to divide the {at} query heads per tensor-parallel rank "
                  f"(num_heads {a} / tp {tp}): each rank computes whole heads, so cp ≤ {at}.",
            f"Ulysses 要求 cp = {cp} 整除每个张量并行 rank 上的 {at} 个查询头（num_heads {a} / tp {tp}）："
            f"每个 rank 计算完整的头，所以 cp ≤ {at}。")
    if kt % cp and cp % kt:
        raise DistlearnValueError(
            "cp", f"Ulysses needs the {kt} K/V heads per tensor-parallel rank to divide evenly over cp = {cp}, "
                  "or cp to be a multiple of them (then each K/V head is replicated).",
            f"Ulysses 要求每个张量并行 rank 上的 {kt} 个 K/V 头能被 cp = {cp} 整除，或 cp 是它的整数倍"
            "（此时每个 K/V 头被复制）。")
    rep = max(1, cp // kt)
    return UlyssesHeads(at // cp, max(kt, cp) // cp, rep)


def max_ulysses_cp(num_heads: int, num_kv_heads: int, tp: int = 1) -> int:
    """The largest ``cp`` :func:`ulysses_heads` accepts (the query heads per tensor-parallel rank, ``a/tp``)."""
    at = check_int("num_heads", num_heads, maximum=4096) // check_int("tp", tp)
    check_int("num_kv_heads", num_kv_heads, maximum=num_heads)
    if at < 1 or not _ulysses_ok(num_heads, num_kv_heads, 1, tp):
        raise DistlearnValueError("tp", f"tp = {tp} must divide num_heads = {num_heads} and num_kv_heads = "
                                        f"{num_kv_heads}.",
                                  f"tp = {tp} 必须整除 num_heads = {num_heads} 和 num_kv_heads = {num_kv_heads}。")
    return max(c for c in range(1, at + 1) if _ulysses_ok(num_heads, num_kv_heads, c, tp))


def _ulysses_ok(a, kv, cp, tp) -> bool:
    try:
        ulysses_heads(a, kv, cp, tp)
        return True
    except DistlearnValueError:
        return False


@dataclass
class UlyssesResult:
    """Result of :func:`ulysses_attention`: ``out``, ``lse`` (original order), ``heads``
    (:class:`UlyssesHeads`), ``bytes_sent[r]`` (the four all-to-alls: Q, K, V in, O out)."""

    out: np.ndarray
    lse: np.ndarray
    heads: UlyssesHeads
    bytes_sent: np.ndarray


def _seq_to_heads(cluster, xs, group):
    """All-to-all: rank r's ``(b, H, s/cp, d)`` → ``(b, H/cp, s, d)`` (heads scattered, sequence gathered), as
    DeepSpeed's ``_dim_zero_all_to_all``: split heads into cp groups along a new axis 0, exchange, concatenate."""
    cp = len(xs)
    send = [np.ascontiguousarray(np.moveaxis(x.reshape(x.shape[0], cp, group, *x.shape[2:]), 1, 0))
            .reshape(cp * x.shape[0], group, *x.shape[2:]) for x in xs]
    got = cluster.all_to_all(send)
    return [np.concatenate(np.split(g, cp, axis=0), axis=2) for g in got]


def _heads_to_seq(cluster, xs):
    """The inverse all-to-all: ``(b, H/cp, s, d)`` → ``(b, H, s/cp, d)``."""
    cp = len(xs)
    send = [np.concatenate(np.split(x, cp, axis=2), axis=0) for x in xs]
    got = cluster.all_to_all(send)
    return [np.concatenate(np.split(g, cp, axis=0), axis=1) for g in got]


@dataclass(frozen=True)
class UlyssesHoldings:
    """What each rank holds around Ulysses' two all-to-alls (:func:`ulysses_holdings`): for each of ``cp`` ranks a
    list of ``(head, sequence_chunk)`` pieces. ``before``: sequence shards, grouped by the head group they are sent
    to; ``middle``: after the all-to-all, all chunks of ``num_heads/cp`` heads, grouped by sequence chunk;
    ``after``: after the all-to-all back, sequence shards again."""

    before: list
    middle: list
    after: list


def ulysses_holdings(cp: int, num_heads: int) -> UlyssesHoldings:
    """Run the course's own Ulysses all-to-alls (the ones :func:`ulysses_attention` uses) on a ``(1, num_heads, cp,
    1)`` tensor whose values label their (head, sequence chunk), and read back which pieces each rank holds.
    ``cp``: 2 … 8; ``num_heads``: 1 … 16, a multiple of ``cp``. Raises DistlearnValueError naming the parameter."""
    cp = check_int("cp", cp, minimum=2, maximum=8)
    a = check_int("num_heads", num_heads, minimum=1, maximum=16)
    group = ulysses_heads(a, a, cp).q_heads                   # heads per rank after the all-to-all / 交换后每个 rank 的头数
    labels = np.arange(a * cp, dtype=float).reshape(1, a, cp, 1)   # value = head·cp + chunk / 值 = 头编号·cp + 片段编号
    pos = layout_positions(cp, cp, "contiguous")
    before = [labels[:, :, p] for p in pos]                   # rank r: (1, a, 1, 1)
    middle = _seq_to_heads(VirtualCluster(cp), before, group)  # rank r: (1, a/cp, cp, 1)
    after = _heads_to_seq(VirtualCluster(cp), middle)          # rank r: (1, a, 1, 1) again / 又回到 (1, a, 1, 1)

    def by_group(x):         # [(head, chunk)] grouped by destination head group / 按目标头组分组
        return [divmod(int(v), cp) for v in x[0, :, :, 0].reshape(-1)]

    def by_chunk(x):         # [(head, chunk)] grouped by sequence chunk / 按序列片段分组
        return [divmod(int(v), cp) for v in x[0, :, :, 0].T.reshape(-1)]

    return UlyssesHoldings([by_group(x) for x in before], [by_chunk(x) for x in middle],
                           [by_group(x) for x in after])


def ulysses_attention(q, k, v, cp: int, *, causal: bool = False, scale: float | None = None) -> UlyssesResult:
    """DeepSpeed-Ulysses on ``cp`` simulated ranks (contiguous layout); equal to :func:`full_attention`.

    Rank r holds tokens ``r·s/cp …`` of Q, K, V. One all-to-all each turns Q, K, V into "all tokens, heads
    ``r·a/cp …``" (K/V heads replicated first when there are fewer than ``cp``); ordinary attention runs on
    those heads over the whole sequence (no load imbalance: every rank has the full causal triangle); one
    all-to-all turns the output back to the rank's tokens. Raises DistlearnValueError when the heads do not split
    (:func:`ulysses_heads`).
    """
    b, a, kv, s, d = _check_qkv(q, k, v)
    causal, scale = check_bool("causal", causal), _scale(scale, d)
    heads = ulysses_heads(a, kv, cp)
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    if heads.kv_replication > 1:
        k, v = np.repeat(k, heads.kv_replication, axis=1), np.repeat(v, heads.kv_replication, axis=1)
    pos = layout_positions(s, cp, "contiguous")
    cluster = VirtualCluster(cp)
    qh = _seq_to_heads(cluster, [q[:, :, p] for p in pos], heads.q_heads)
    kh = _seq_to_heads(cluster, [k[:, :, p] for p in pos], heads.kv_heads)
    vh = _seq_to_heads(cluster, [v[:, :, p] for p in pos], heads.kv_heads)
    full_pos = np.arange(s)
    parts = [block_attention(qh[r], kh[r], vh[r], mask=causal_mask(full_pos, full_pos) if causal else None,
                             scale=scale) for r in range(cp)]
    outs = _heads_to_seq(cluster, [p.out for p in parts])
    out = np.concatenate(outs, axis=2)
    lse = np.concatenate([p.lse for p in parts], axis=1)   # heads r·a/cp … hold the whole sequence
    return UlyssesResult(out, lse, heads, cluster.bytes_sent.copy())


# ---------------------------------------------------------------- work per rank under the causal mask
def work_matrix(seq_len: int, cp: int, layout: str = "contiguous", causal: bool = True) -> np.ndarray:
    """Score entries (query-key pairs, per batch element and head) rank r computes at ring step t:
    ``W[r, t]``, int ``(cp, cp)``; at step t rank r holds the K/V of rank ``(r − t) mod cp``.

    Closed forms (a test checks them against counting the masked pairs of :func:`layout_positions`), with
    ``c`` tokens per chunk: a chunk attends to an earlier chunk fully (c²), to itself causally (c(c+1)/2), to a
    later one not at all; striped (``n = s/cp`` tokens per rank): ``n(n+1)/2`` from ranks ≤ r, ``n(n−1)/2`` from
    ranks > r. Without ``causal`` every entry is ``(s/cp)²``. Every layout sums to ``s(s+1)/2`` under ``causal``.
    """
    causal = check_bool("causal", causal)
    s, cp = _check_layout(seq_len, cp, layout)
    n = s // cp
    if not causal:
        return np.full((cp, cp), n * n, dtype=np.int64)
    r = np.arange(cp)[:, None]
    src = (r - np.arange(cp)[None, :]) % cp                       # whose block rank r holds at step t
    if layout == "striped":
        return np.where(src <= r, n * (n + 1) // 2, n * (n - 1) // 2).astype(np.int64)
    c = n if layout == "contiguous" else n // 2
    chunks = np.array(layout_chunks(cp, layout))                  # (cp, chunks per rank)
    qc = chunks[r][:, :, :, None]                                 # (cp, 1, m, 1): the rank's query chunks
    kc = chunks[src][:, :, None, :]                               # (cp, cp, 1, m): the held block's key chunks
    pairs = np.where(qc > kc, c * c, np.where(qc == kc, c * (c + 1) // 2, 0))   # earlier, same, later chunk
    return pairs.sum(axis=(2, 3)).astype(np.int64)


def attention_flops(pairs, *, num_heads: int, head_dim: int, micro_batch_size: int = 1,
                    pass_: str = "forward"):
    """FLOPs of attention over ``pairs`` query-key pairs: ``4·d`` per pair and head forward (QKᵀ and P·V, two
    FLOPs per multiply-add: Liu et al. 2023 §3 "4dc²"; Dao 2023 §4.1 "4 · seqlen² · head dimension · number of
    heads"), ×:data:`FLASH_BACKWARD_FACTOR` backward. ``pairs`` may be an array (returned as float array)."""
    check_choice("pass_", pass_, PASSES)
    a, d, b = check_int("num_heads", num_heads), check_int("head_dim", head_dim), check_int(
        "micro_batch_size", micro_batch_size)
    factor = 1.0 if pass_ == "forward" else FLASH_BACKWARD_FACTOR
    return np.asarray(pairs, dtype=float) * 4 * d * a * b * factor


# ---------------------------------------------------------------- time: compute, transfer, overlap
@dataclass
class Timeline:
    """Ring schedule in time: ``start``/``end`` ``(cp, cp)`` seconds of rank r's step t; ``makespan`` (the last
    end), ``compute_only`` (makespan if transfers were free: ``max_r Σ_t compute``), ``exposed_comm =
    makespan − compute_only``, ``mean_compute`` (average busy time per rank) and ``imbalance = compute_only −
    mean_compute`` (time lost to uneven work)."""

    start: np.ndarray
    end: np.ndarray
    makespan: float
    compute_only: float
    exposed_comm: float
    mean_compute: float
    imbalance: float


def ring_timeline(compute_s, comm_s: float, grad_comm_s: float | None = None) -> Timeline:
    """Event simulation of one ring pass: ``compute_s[r, t]`` seconds of work, ``comm_s`` seconds per K/V hop.

    Forward (``grad_comm_s=None``): rank r starts step 0 at 0 and posts the send of the block it holds when it
    starts a step (double buffering: Liu et al. 2023 §3; PyTorch posts the send before computing), so the block
    for its step t+1 — which rank r−1 holds at step t — arrives at ``start[r−1, t] + comm_s``; rank r starts
    step t+1 at ``max(end[r, t], that arrival)``.

    Backward (``grad_comm_s`` = seconds per dK/dV hop): the same K/V hops, and the accumulator of a block can
    leave rank r−1 only when its step t ends, so rank r finishes step t+1 no earlier than ``end[r−1, t] +
    grad_comm_s``; after the last step one more dK/dV hop takes every accumulator home (its arrival is the end).
    Latency (α) and link contention are not modelled.
    """
    c = check_array("compute_s", compute_s, ndim=2, min_size=1)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise DistlearnValueError("compute_s", f"compute_s must be a (cp, cp) array, got shape {c.shape}.",
                                  f"compute_s 必须是 (cp, cp) 数组，收到形状 {c.shape}。")
    comm = check_number("comm_s", comm_s, minimum=0.0)
    grad = None if grad_comm_s is None else check_number("grad_comm_s", grad_comm_s, minimum=0.0)
    cp = c.shape[0]
    start, end = np.zeros_like(c), np.zeros_like(c)
    end[:, 0] = c[:, 0]
    for t in range(1, cp):
        arrive = np.roll(start[:, t - 1], 1) + comm        # rank r gets the block from rank r - 1
        start[:, t] = np.maximum(end[:, t - 1], arrive)
        end[:, t] = start[:, t] + c[:, t]
        if grad is not None:                                # the accumulator it adds to comes from rank r - 1
            end[:, t] = np.maximum(end[:, t], np.roll(end[:, t - 1], 1) + grad)
    finish = end[:, -1] if grad is None or cp == 1 else np.roll(end[:, -1], 1) + grad
    busy = c.sum(axis=1)
    makespan, compute_only = float(finish.max()), float(busy.max())
    makespan = max(makespan, compute_only)          # equal up to rounding when nothing waits
    return Timeline(start, end, makespan, compute_only, makespan - compute_only, float(busy.mean()),
                    float(busy.max() - busy.mean()))


def ring_overlap(*, tokens_per_rank: int, num_heads: int, num_kv_heads: int, head_dim: int, flops: float,
                 bandwidth: float, dtype_bytes: int = 2, work_fraction: float = 1.0,
                 micro_batch_size: int = 1) -> dict:
    """Is one ring step's transfer hidden behind its computation?

    One step: ``c = tokens_per_rank`` queries against a block of ``c`` keys computes
    ``4·c²·d·a·work_fraction`` FLOPs (``work_fraction`` = share of the block's pairs not masked: 1, or ½ for
    the off-diagonal steps of zig-zag) while ``2·c·d·kv·dtype_bytes`` bytes of K and V cross the link. Hidden iff
    ``compute_s ≥ comm_s``, i.e. (Liu et al. 2023 §3, "4dc²/F ≥ 4cd/B ⟹ c ≥ F/B" for MHA in 16 bits)::

        c ≥ min_tokens = kv·dtype_bytes / (2·a·work_fraction) · F / B

    ``flops`` = F (FLOP/s the kernel achieves; the datasheet peak is the strictest case), ``bandwidth`` = B
    (bytes/s per direction). Heads per GPU after tensor parallelism give the same ratio. Returns ``{"compute_s",
    "comm_s", "hidden", "min_tokens"}``.
    """
    c = check_int("tokens_per_rank", tokens_per_rank)
    a, kv, d = check_int("num_heads", num_heads), check_int("num_kv_heads", num_kv_heads), check_int(
        "head_dim", head_dim)
    f, bw = check_positive("flops", flops), check_positive("bandwidth", bandwidth)
    p = check_int("dtype_bytes", dtype_bytes, maximum=8)
    wf = check_number("work_fraction", work_fraction, minimum=0.0, maximum=1.0, strict_min=True)
    b = check_int("micro_batch_size", micro_batch_size)
    compute = 4 * c * c * d * a * wf * b / f
    comm = 2 * c * d * kv * p * b / bw
    return {"compute_s": compute, "comm_s": comm, "hidden": compute >= comm,
            "min_tokens": kv * p / (2 * a * wf) * f / bw}


# ---------------------------------------------------------------- bytes per layer and variant
@dataclass(frozen=True)
class CPComm:
    """Bytes one rank sends for the attention of one layer: ``bytes_per_rank``; ``messages`` (hops or
    collectives); ``overlapped``: whether the algorithm can hide it behind the attention compute."""

    variant: str
    pass_: str
    bytes_per_rank: float
    messages: int
    overlapped: bool


def cp_comm_bytes(variant: str, *, seq_len: int, num_heads: int, num_kv_heads: int, head_dim: int, cp: int,
                  micro_batch_size: int = 1, tp: int = 1, dtype_bytes: int = 2, grad_bytes: int | None = None,
                  pass_: str = "forward") -> CPComm:
    """Bytes each rank sends for one layer's attention under context parallelism ``cp`` (per tensor-parallel
    rank: heads divided by ``tp``). With ``c = s/cp`` local tokens, ``kv_t = kv/tp`` and ``p = dtype_bytes``, one
    K/V block is ``B_kv = 2·c·b·kv_t·d·p`` bytes:

    - ``"ring"``: forward ``(cp−1)·B_kv`` (``cp − 1`` hops); backward ``(cp−1)·B_kv`` again plus ``cp`` hops of
      dK/dV at ``grad_bytes`` per element (default :data:`TORCH_GRAD_BYTES`, PyTorch's fp32 accumulators);
      overlapped with the block computations;
    - ``"all-gather"``: forward: all-gather of K and V, ``(cp−1)/cp`` of ``2·s·b·kv_t·d·p`` = ``(cp−1)·B_kv``,
      the same bytes as the ring but exposed (Llama 3 §3.3.2); backward as Transformer Engine's
      ``AttnFuncWithCPAndKVAllGather``: gather again and reduce-scatter dK/dV (``(cp−1)`` blocks at
      ``grad_bytes``). PyTorch 2.13's ``"allgather"`` rotate differs in backward: it sends the dK/dV accumulators
      around the ring (``cp`` hops at ``grad_bytes``), i.e. exactly the ``"ring"`` backward bytes
      (measured by :func:`distlearn.context_parallel.lab.torch_ring_check`);
    - ``"all-to-all"`` (Ulysses): each all-to-all sends ``(cp−1)/cp`` of the rank's local tensor: Q, K, V
      before and O after, ``(cp−1)/cp · c·b·d·(2·a_t + 2·kv')·p`` with ``kv' = max(kv_t, cp)`` (K/V heads
      replicated when fewer than cp); backward moves dO, then dQ, dK, dV: the same. Exposed. The paper's
      "4Nh/P per link" (Jacobs et al. 2023 §3.2) is this for MHA with (cp−1)/cp ≈ 1, ``N = s``, ``h = a·d``.

    Raises DistlearnValueError (sizes, Ulysses head limits via :func:`ulysses_heads`).
    """
    check_choice("variant", variant, VARIANTS)
    check_choice("pass_", pass_, PASSES)
    s, cp = _check_layout(seq_len, cp, "contiguous")
    a, kv, d = check_int("num_heads", num_heads), check_int("num_kv_heads", num_kv_heads), check_int(
        "head_dim", head_dim)
    b, tp = check_int("micro_batch_size", micro_batch_size), check_int("tp", tp)
    p = check_int("dtype_bytes", dtype_bytes, maximum=8)
    g = TORCH_GRAD_BYTES if grad_bytes is None else check_int("grad_bytes", grad_bytes, maximum=8)
    if a % tp or kv % tp:
        raise DistlearnValueError("tp", f"tp = {tp} must divide num_heads = {a} and num_kv_heads = {kv}.",
                                  f"tp = {tp} 必须同时整除 num_heads = {a} 和 num_kv_heads = {kv}。")
    c, kvt, at = s // cp, kv // tp, a // tp
    block = 2 * c * b * kvt * d          # K and V elements of one block
    if variant == "ring":
        if pass_ == "forward":
            return CPComm(variant, pass_, (cp - 1) * block * p, cp - 1, True)
        return CPComm(variant, pass_, (cp - 1) * block * p + (cp if cp > 1 else 0) * block * g,
                      2 * cp - 1 if cp > 1 else 0, True)
    if variant == "all-gather":
        if pass_ == "forward":
            return CPComm(variant, pass_, (cp - 1) * block * p, 1 if cp > 1 else 0, False)
        return CPComm(variant, pass_, (cp - 1) * block * (p + g), 2 if cp > 1 else 0, False)
    heads = ulysses_heads(a, kv, cp, tp)
    kv_sent = heads.kv_heads * cp                                     # K/V heads after replication
    nbytes = (cp - 1) / cp * c * b * d * (2 * at + 2 * kv_sent) * p
    return CPComm(variant, pass_, nbytes, 4 if cp > 1 else 0, False)


# ---------------------------------------------------------------- memory: what context parallelism divides
def cp_layer_activation_table(config: ModelConfig, *, seq_len: int, cp: int = 1, micro_batch_size: int = 1,
                              tp: int = 1, sequence_parallel: bool = False, activation_bytes: int = 2,
                              attention: str = "flash") -> list[ActivationTerm]:
    """The tensors one layer of ``config`` keeps for backward on one GPU under context parallelism.

    Every rank holds ``s/cp`` tokens of every per-token tensor — the norm and projection inputs, Q, K, V, O, the
    MLP tensors and the fp32 log-sum-exp of its query rows — so the table is
    :func:`distlearn.activation_memory.formulas.layer_activation_table` at ``seq_len / cp`` (ring attention is a flash-style
    kernel: it keeps the log-sum-exp, never the s × s scores). ``attention="materialised"`` is accepted only for
    ``cp = 1`` (the single-GPU baseline whose scores grow as s²). Raises DistlearnValueError.
    """
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    s, cp = _check_layout(seq_len, cp, "contiguous")
    check_choice("attention", attention, ("flash", "materialised"))
    if attention == "materialised" and cp > 1:
        raise DistlearnValueError(
            "attention", "context parallelism computes attention block by block and keeps the log-sum-exp "
                         "(flash-style); attention='materialised' is only the cp = 1 baseline.",
            "上下文并行逐块计算注意力，只保存 log-sum-exp（flash 方式）；attention='materialised' 只用于 cp = 1 的基线。")
    return layer_activation_table(seq_len=s // cp, micro_batch_size=micro_batch_size, tp=tp,
                                  sequence_parallel=sequence_parallel, activation_bytes=activation_bytes,
                                  attention=attention, **layer_shape(config))


def cp_layer_activation_bytes(config: ModelConfig, **kw) -> float:
    """Sum of :func:`cp_layer_activation_table` (bytes per layer per GPU)."""
    check_record("config", config, ModelConfig, "get_preset('llama3-8b')")
    return sum(t.nbytes for t in cp_layer_activation_table(config, **kw))


def cp_model_activation_bytes(config: ModelConfig, *, seq_len: int, cp: int = 1, **kw):
    """:func:`distlearn.activation_memory.formulas.model_activation_bytes` on one GPU of a ``cp``-way context-parallel group:
    every per-token tensor — the layers', the final norm's, the fp32 logits — holds ``s/cp`` tokens, so it is
    the whole-model count at ``seq_len / cp`` (flash-style attention; the keyword arguments are passed on:
    ``micro_batch_size``, ``tp``, ``sequence_parallel``, ``pp``, ``stage``, ``num_microbatches``,
    ``recompute`` …). Returns :class:`distlearn.activation_memory.formulas.ActivationBytes`."""
    from distlearn.activation_memory.formulas import model_activation_bytes

    check_record("config", config, ModelConfig, "get_preset('llama3-8b')")
    s, cp = _check_layout(seq_len, cp, "contiguous")
    if kw.get("attention", "flash") != "flash" and cp > 1:
        raise DistlearnValueError("attention", "context parallelism keeps the log-sum-exp only (flash-style).",
                                  "上下文并行只保存 log-sum-exp（flash 方式）。")
    return model_activation_bytes(config, seq_len=s // cp, **{"attention": "flash", **kw})


def attention_buffer_bytes(variant: str, *, seq_len: int, num_heads: int, num_kv_heads: int, head_dim: int,
                           cp: int, micro_batch_size: int = 1, tp: int = 1, dtype_bytes: int = 2) -> float:
    """Transient bytes the attention of one layer needs on top of what is kept for backward, per GPU:

    - ring: the K/V block being used and the one being received (Liu et al. 2023 §3: "two block sizes for the
      current key and value blocks, and two block sizes for receiving"): ``2 · 2·(s/cp)·b·kv_t·d·p`` (none for
      ``cp = 1``);
    - all-gather: the gathered K and V of the whole sequence, ``2·s·b·kv_t·d·p``;
    - all-to-all: Q, K, V and O in the head layout (all tokens, ``a_t/cp`` heads, K/V after replication).
    """
    check_choice("variant", variant, VARIANTS)
    s, cp = _check_layout(seq_len, cp, "contiguous")
    a, kv, d = check_int("num_heads", num_heads), check_int("num_kv_heads", num_kv_heads), check_int(
        "head_dim", head_dim)
    b, tp, p = check_int("micro_batch_size", micro_batch_size), check_int("tp", tp), check_int(
        "dtype_bytes", dtype_bytes, maximum=8)
    kvt = kv // tp
    if variant == "ring":
        return 0.0 if cp == 1 else 2 * 2 * (s // cp) * b * kvt * d * p
    if variant == "all-gather":
        return 2 * s * b * kvt * d * p if cp > 1 else 0.0
    heads = ulysses_heads(a, kv, cp, tp)
    return s * b * d * (2 * heads.q_heads + 2 * heads.kv_heads) * p if cp > 1 else 0.0


def ulysses_extra_bytes(*, seq_len: int, num_heads: int, num_kv_heads: int, head_dim: int, cp: int,
                        micro_batch_size: int = 1, tp: int = 1, activation_bytes: int = 2) -> dict:
    """Bytes a Ulysses layer keeps for backward beyond :func:`cp_layer_activation_table`, per GPU.

    The attention kernel runs in the head layout, so what it saves lives there: its output O (all tokens,
    ``a/cp`` heads) is a different tensor from the output projection's input (the rank's tokens, all heads,
    after the second all-to-all) — the flash table counts one tensor for both; and when K/V heads are replicated
    (fewer than ``cp``), the saved K and V are ``max(kv, cp)/kv`` times larger. With ``c = s/cp`` tokens and
    ``h = a·d``: ``{"output_copy": c·b·h/tp·p, "kv_replication": 2·c·b·d·(max(kv_t, cp) − kv_t)·p, "total"}``
    (measured to the byte by the lab, ``tests/test_labs_context_parallel.py``).
    """
    s, cp = _check_layout(seq_len, cp, "contiguous")
    heads = ulysses_heads(num_heads, num_kv_heads, cp, tp)
    b, p = check_int("micro_batch_size", micro_batch_size), check_int("activation_bytes", activation_bytes,
                                                                      maximum=8)
    d, c, kvt = check_int("head_dim", head_dim), s // cp, num_kv_heads // tp
    out = {"output_copy": c * b * (num_heads // tp) * d * p,
           "kv_replication": 2 * c * b * d * (heads.kv_heads * cp - kvt) * p if cp > kvt else 0}
    out["total"] = out["output_copy"] + out["kv_replication"]
    return out


# ---------------------------------------------------------------- one layer's attention, all together
@dataclass
class CPAttentionCost:
    """One layer's attention on one GPU: ``work[r]`` pairs per rank (per head and batch element), ``compute_s``
    (slowest rank's attention compute), ``comm_bytes``, ``comm_s``, ``exposed_s`` (transfer time not hidden),
    ``total_s``; for the ring also the :class:`Timeline`."""

    variant: str
    layout: str
    work: np.ndarray
    compute_s: float
    comm_bytes: float
    comm_s: float
    exposed_s: float
    total_s: float
    timeline: Timeline | None = None


def attention_cost(variant: str, *, seq_len: int, num_heads: int, num_kv_heads: int, head_dim: int, cp: int,
                   flops: float, bandwidth: float, layout: str = "zigzag", causal: bool = True,
                   micro_batch_size: int = 1, tp: int = 1, dtype_bytes: int = 2, pass_: str = "forward",
                   grad_bytes: int | None = None) -> CPAttentionCost:
    """Time of one layer's attention (forward or backward) per GPU under context parallelism.

    - ``"ring"``: :func:`work_matrix` × :func:`attention_flops` / ``flops`` per step, one hop of
      :func:`cp_comm_bytes` / (hops) per step, :func:`ring_timeline`;
    - ``"all-gather"``: K/V gathered first (exposed), then each rank attends its queries to the whole sequence;
    - ``"all-to-all"``: two all-to-alls around attention on ``a/cp`` heads of the whole sequence (balanced
      whatever the layout; it needs the contiguous order only to read positions: ``layout`` is ignored).

    ``flops`` and ``bandwidth`` per GPU (FLOP/s, bytes/s per direction). Raises DistlearnValueError.
    """
    check_choice("variant", variant, VARIANTS)
    check_choice("pass_", pass_, PASSES)
    comm = cp_comm_bytes(variant, seq_len=seq_len, num_heads=num_heads, num_kv_heads=num_kv_heads,
                         head_dim=head_dim, cp=cp, micro_batch_size=micro_batch_size, tp=tp,
                         dtype_bytes=dtype_bytes, grad_bytes=grad_bytes, pass_=pass_)
    f, bw = check_positive("flops", flops), check_positive("bandwidth", bandwidth)
    heads = num_heads // tp
    kw = dict(num_heads=heads, head_dim=head_dim, micro_batch_size=micro_batch_size, pass_=pass_)
    comm_s = comm.bytes_per_rank / bw
    if variant == "all-to-all":
        s = seq_len
        pairs = s * (s + 1) // 2 if causal else s * s
        work = np.full(cp, pairs / cp)
        compute = float(attention_flops(pairs, **kw)) / cp / f
        return CPAttentionCost(variant, "contiguous", work, compute, comm.bytes_per_rank, comm_s, comm_s,
                               compute + comm_s)
    w = work_matrix(seq_len, cp, layout, causal)
    seconds = attention_flops(w, **kw) / f
    if variant == "all-gather":
        compute = float(seconds.sum(axis=1).max())
        return CPAttentionCost(variant, layout, w.sum(axis=1), compute, comm.bytes_per_rank, comm_s, comm_s,
                               compute + comm_s)
    block = 2 * (seq_len // cp) * micro_batch_size * (num_kv_heads // tp) * head_dim   # K and V elements
    kv_hop = block * dtype_bytes / bw
    if pass_ == "forward":
        tl = ring_timeline(seconds, kv_hop)
    else:
        g = TORCH_GRAD_BYTES if grad_bytes is None else grad_bytes
        tl = ring_timeline(seconds, kv_hop, block * g / bw)
    return CPAttentionCost(variant, layout, w.sum(axis=1), tl.compute_only, comm.bytes_per_rank, comm_s,
                           tl.exposed_comm, tl.makespan, tl)


# ---------------------------------------------------------------- the Llama 3 long-context run
LLAMA3_405B_LONG_CONTEXT = read_only({
    "gpus": 16384, "tp": 8, "cp": 16, "pp": 16, "dp": 8, "seq_len": 131072, "batch_size_per_dp": 16,
    "tokens_per_batch": "16M", "tflops_per_gpu": 380, "bf16_mfu": 0.38,
    "source": "Dubey et al. 2024, The Llama 3 Herd of Models, Table 4, last row (arXiv 2407.21783 v3; the v1 "
              "table prints DP 4, which does not multiply to 16,384 GPUs); §3.3.2: 2 × CP chunks, rank i holds "
              "chunks i and 2 × CP − 1 − i; K and V all-gathered, not passed around a ring.",
    "source_zh": "Dubey 等 2024，《The Llama 3 Herd of Models》，表 4 最后一行（arXiv 2407.21783 v3；v1 的表中印的是 "
                 "DP 4，乘起来不等于 16,384 块 GPU）；§3.3.2：切成 2 × CP 块，rank i 持有第 i 块和第 2 × CP − 1 − i 块；"
                 "K 和 V 用 AllGather 收集，而不是沿环传递。",
})
"""Llama 3 405B's 128K-token pre-training stage (Table 4): TP 8 × CP 16 × PP 16 × DP 8 = 16,384 GPUs."""


__all__ = ["LAYOUTS", "VARIANTS", "PASSES", "FLASH_BACKWARD_FACTOR", "TORCH_GRAD_BYTES", "Partial", "causal_mask",
           "block_attention", "merge_blocks", "averaging_merge", "full_attention", "reference_online_attention",
           "layout_chunks", "layout_positions", "RingForward", "ring_attention_forward", "RingBackward",
           "ring_attention_backward", "UlyssesHeads", "ulysses_heads", "max_ulysses_cp", "UlyssesResult",
           "ulysses_attention", "work_matrix", "attention_flops", "Timeline", "ring_timeline", "ring_overlap",
           "CPComm", "cp_comm_bytes", "cp_layer_activation_table", "cp_layer_activation_bytes",
           "cp_model_activation_bytes", "attention_buffer_bytes", "ulysses_extra_bytes", "CPAttentionCost",
           "attention_cost", "LLAMA3_405B_LONG_CONTEXT"]
