"""Packed sequences under context parallelism: several documents in one sequence, kept apart by a document mask.

Packing puts documents of different lengths one after the other into a sequence of ``s`` tokens, so that no token
is padding. ``documents[i]`` is the document of token ``i`` (:func:`document_ids`). Each query may attend only to
earlier keys **of its own document**: the mask is causal and block-diagonal (:func:`document_mask`). Without context
parallelism that is one mask for the whole sequence. With it, every rank builds the mask of its query chunk against
one key chunk at a time, and it must use the **global** positions and the **global** document ids of both chunks.

This module simulates, in float64 numpy on a :class:`distlearn.core.comm.VirtualCluster`, ring attention
(:func:`packed_ring_attention`) and all-gather attention (:func:`packed_allgather_attention`) on packed batches,
for three layouts (:data:`PACKED_LAYOUTS`): contiguous, zig-zag over the whole sequence (Llama 3 §3.3.2; PyTorch
2.13 ``_HeadTailLoadBalancer``) and zig-zag **inside every document** (PyTorch 2.13
``_PerDocumentHeadTailLoadBalancer``, ``torch/distributed/tensor/experimental/_context_parallel/_load_balancer.py``).
With ``mode="global"`` both equal :func:`per_document_attention`, attention computed separately per document.

The other :data:`MASK_MODES` are mistakes, each one a real class of bug, kept to show what they compute:

- ``"causal-only"``: the ring knows only ``is_causal`` and ignores the document boundaries, so every document
  attends to all documents before it. This is what a ring API without a document or ``cu_seqlens`` channel does;
  axolotl issue 3608 (ring-flash-attn's ``batch_ring`` on packed data) and Hugging Face TRL pull request 6843
  (accelerate's CP hook replaces the mask by ``is_causal=True``) report it;
- ``"local"``: positions and document ids recomputed from each chunk alone: positions ``0 … n−1`` and document
  ids counted from 0 at the start of the chunk. Within one contiguous chunk that is right; against a key chunk of
  another rank it compares unrelated numbers;
- ``"unrestored"``: the mask is built from the token's index in the re-ordered (layout-order) sequence instead of
  its original position. Right for the contiguous layout, wrong for zig-zag: PyTorch's ``_create_cp_block_mask``
  maps indices back through the load balancer's permutation for exactly this reason (``qkv_idx_restore``).

:func:`effective_mask` gives the ``(s, s)`` mask a mode really applies, so a single process can reproduce what
the broken CP computes (a test checks ring and all-gather against it). :func:`document_work` counts the unmasked
(query, key) pairs per rank, the attention work, for each layout.

Arrays: ``q`` ``(b, a, s, d)``; ``k``, ``v`` ``(b, kv, s, d)`` (``kv`` divides ``a``), as in
:mod:`distlearn.context_parallel.simulation`. ``lengths``: the document lengths, in tokens, summing to ``s``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distlearn.context_parallel.simulation import (Partial, block_attention, layout_positions, merge_blocks)
from distlearn.core.comm import VirtualCluster
from distlearn.core.validate import DistlearnValueError, check_array, check_choice, check_int

PACKED_LAYOUTS = ("contiguous", "zigzag", "document-zigzag")
MASK_MODES = ("global", "causal-only", "local", "unrestored")
PACKED_VARIANTS = ("ring", "all-gather")
MAX_TOKENS = 1 << 14


def _check_lengths(lengths) -> np.ndarray:
    """``lengths`` as an int array of positive document lengths summing to at most :data:`MAX_TOKENS`."""
    arr = check_array("lengths", lengths, ndim=1, min_size=1)
    if (arr < 1).any() or (arr != np.round(arr)).any() or arr.sum() > MAX_TOKENS:
        raise DistlearnValueError(
            "lengths", f"lengths must be whole numbers ≥ 1 (tokens per document) summing to at most {MAX_TOKENS}; "
                       f"got {arr.tolist()}.",
            f"lengths 必须是 ≥ 1 的整数（每个文档的词元数），总和不超过 {MAX_TOKENS}；收到 {arr.tolist()}。")
    return arr.astype(np.int64)


def document_ids(lengths) -> np.ndarray:
    """The document of every token of a packed sequence: ``lengths = [3, 2]`` → ``[0, 0, 0, 1, 1]`` (int64,
    ``sum(lengths)`` tokens). Raises DistlearnValueError unless every length is a whole number ≥ 1."""
    lengths = _check_lengths(lengths)
    return np.repeat(np.arange(len(lengths)), lengths)


def document_mask(q_pos, k_pos, documents) -> np.ndarray:
    """Boolean ``(len(q_pos), len(k_pos))``: True where the query at global position ``q_pos[i]`` may attend to the
    key at global position ``k_pos[j]``: the key is not later (``k_pos[j] <= q_pos[i]``) and in the same document
    (``documents[k_pos[j]] == documents[q_pos[i]]``). ``documents``: the document id of every position of the whole
    sequence (:func:`document_ids`). Raises DistlearnValueError for positions outside the sequence."""
    documents = check_array("documents", documents, ndim=1, min_size=1)
    q_pos, k_pos = _positions("q_pos", q_pos, len(documents)), _positions("k_pos", k_pos, len(documents))
    return (k_pos[None, :] <= q_pos[:, None]) & (documents[k_pos][None, :] == documents[q_pos][:, None])


def _positions(name, pos, s) -> np.ndarray:
    pos = check_array(name, pos, ndim=1)
    if (pos < 0).any() or (pos >= s).any() or (pos != np.round(pos)).any():
        raise DistlearnValueError(name, f"{name} must hold whole positions 0 … {s - 1}; got {pos.tolist()[:8]} …",
                                  f"{name} 只能包含 0 … {s - 1} 之间的整数位置；收到 {pos.tolist()[:8]} …")
    return pos.astype(np.int64)


def packed_positions(lengths, cp: int, layout: str = "zigzag") -> list[np.ndarray]:
    """Token positions each of the ``cp`` ranks holds, in the order it stores them (``s/cp`` each).

    ``"contiguous"`` and ``"zigzag"``: :func:`distlearn.context_parallel.simulation.layout_positions` over the whole
    packed sequence, blind to the documents. ``"document-zigzag"``: every document of length ``L`` is cut into
    ``2·cp`` chunks of ``L/(2·cp)`` and rank r takes chunks r and ``2·cp − 1 − r`` of every document, documents in
    order (PyTorch 2.13 ``_PerDocumentHeadTailLoadBalancer._generate_indices``: a test checks they agree).
    Raises DistlearnValueError when the layout does not divide the sequence (or, for ``"document-zigzag"``, a
    document) into equal chunks.
    """
    lengths = _check_lengths(lengths)
    cp = check_int("cp", cp, maximum=64)
    check_choice("layout", layout, PACKED_LAYOUTS)
    s = int(lengths.sum())
    if layout != "document-zigzag":
        return layout_positions(s, cp, layout)
    if (lengths % (2 * cp)).any():
        raise DistlearnValueError(
            "lengths", f"the document-zigzag layout cuts every document into 2·cp = {2 * cp} equal chunks; "
                       f"got lengths {lengths.tolist()}.",
            f"document-zigzag 切分要把每个文档切成 2·cp = {2 * cp} 个等长片段；收到 lengths {lengths.tolist()}。")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = []
    for r in range(cp):
        parts = []
        for start, n in zip(starts, lengths):
            c = n // (2 * cp)
            parts += [np.arange(start + r * c, start + (r + 1) * c),
                      np.arange(start + (2 * cp - 1 - r) * c, start + (2 * cp - r) * c)]
        out.append(np.concatenate(parts).astype(np.int64))
    return out


def _believed(pos: np.ndarray, documents: np.ndarray, mode: str, where: np.ndarray):
    """What the code believes the positions and document ids of the tokens ``pos`` (one chunk, in storage order)
    are, under ``mode``. ``where[p]``: the index of original position ``p`` in the layout-order sequence."""
    if mode == "global":
        return pos, documents[pos]
    if mode == "causal-only":
        return pos, np.zeros(len(pos), dtype=np.int64)
    if mode == "local":
        ids = documents[pos]
        return np.arange(len(pos)), np.concatenate([[0], np.cumsum(ids[1:] != ids[:-1])])
    idx = where[pos]                                   # "unrestored": the layout-order index taken as the position
    return idx, documents[idx]


def chunk_mask(q_pos, k_pos, lengths, *, mode: str = "global", order=None) -> np.ndarray:
    """The mask a rank builds for its query chunk (global positions ``q_pos``, as stored) over one key chunk
    (``k_pos``), bool ``(len(q_pos), len(k_pos))``, under ``mode`` (:data:`MASK_MODES`).

    ``"global"`` is :func:`document_mask`. The others are the mistakes of the module docstring; ``"unrestored"``
    needs ``order``, the layout-order sequence (``np.concatenate`` of :func:`packed_positions`; default: the
    identity, where it is right). Raises DistlearnValueError.
    """
    documents = document_ids(lengths)
    s = len(documents)
    check_choice("mode", mode, MASK_MODES)
    q_pos, k_pos = _positions("q_pos", q_pos, s), _positions("k_pos", k_pos, s)
    order = np.arange(s) if order is None else _positions("order", order, s)
    if len(order) != s or len(np.unique(order)) != s:
        raise DistlearnValueError("order", f"order must be a permutation of 0 … {s - 1}.",
                                  f"order 必须是 0 … {s - 1} 的一个排列。")
    return _chunk_mask(q_pos, k_pos, documents, mode, np.argsort(order))


def _chunk_mask(q_pos, k_pos, documents, mode, where) -> np.ndarray:
    qp, qd = _believed(q_pos, documents, mode, where)
    kp, kd = _believed(k_pos, documents, mode, where)
    return (kp[None, :] <= qp[:, None]) & (kd[None, :] == qd[:, None])


def _check_packed(q, k, v, lengths, cp, layout, mode):
    q, k, v = (check_array(n, x, ndim=4, min_size=1) for n, x in (("q", q), ("k", k), ("v", v)))
    documents = document_ids(lengths)
    s = len(documents)
    if q.shape[2] != s or k.shape != v.shape or k.shape[2] != s or k.shape[0] != q.shape[0] \
            or k.shape[3] != q.shape[3] or q.shape[1] % k.shape[1]:
        raise DistlearnValueError(
            "q", f"q must be (b, a, s, d) and k, v (b, kv, s, d), kv dividing a, with s = sum(lengths) = {s}; got "
                 f"{q.shape}, {k.shape}, {v.shape}.",
            f"q 的形状必须是 (b, a, s, d)，k、v 为 (b, kv, s, d)，kv 整除 a，且 s = sum(lengths) = {s}；收到 "
            f"{q.shape}、{k.shape}、{v.shape}。")
    check_choice("mode", mode, MASK_MODES)
    pos = packed_positions(lengths, cp, layout)
    return q, k, v, documents, pos, np.argsort(np.concatenate(pos))


def per_document_attention(q, k, v, lengths) -> Partial:
    """The reference: causal attention computed **separately for every document** (its own slices of Q, K, V,
    one :func:`distlearn.context_parallel.simulation.block_attention` each, no document mask involved), the
    outputs put side by side. Returns :class:`Partial` ``(out (b, a, s, d), lse (b, a, s))``."""
    q, k, v, documents, _, _ = _check_packed(q, k, v, lengths, 1, "contiguous", "global")
    out, lse = np.zeros(q.shape), np.zeros(q.shape[:3])
    start = 0
    for n in _check_lengths(lengths):
        sl = slice(start, start + n)
        tri = np.tril(np.ones((n, n), dtype=bool))
        p = block_attention(q[:, :, sl], k[:, :, sl], v[:, :, sl], mask=tri)
        out[:, :, sl], lse[:, :, sl] = p.out, p.lse
        start += n
    return Partial(out, lse)


@dataclass
class PackedResult:
    """Result of :func:`packed_ring_attention` / :func:`packed_allgather_attention`: ``out`` ``(b, a, s, d)`` and
    ``lse`` ``(b, a, s)`` in the original token order; ``positions[r]``: the tokens of rank r; ``work[r]``:
    unmasked (query, key) pairs rank r computed, per batch element and head; ``bytes_sent[r]``."""

    out: np.ndarray
    lse: np.ndarray
    positions: list
    work: np.ndarray
    bytes_sent: np.ndarray


def _assemble(acc, pos, shape):
    out, lse = np.zeros(shape), np.full(shape[:3], -np.inf)
    for r, p in enumerate(pos):
        if acc[r] is not None:
            out[:, :, p], lse[:, :, p] = acc[r].out, acc[r].lse
    return out, lse


def packed_ring_attention(q, k, v, lengths, cp: int, *, layout: str = "zigzag",
                          mode: str = "global") -> PackedResult:
    """Ring attention on a packed batch, ``cp`` simulated ranks: rank r keeps the queries of
    :func:`packed_positions` ``[r]``; the K/V blocks go around the ring ``r → r+1`` (``cp − 1`` messages of K and
    V per rank); at every step the rank masks its queries against the block it holds with :func:`chunk_mask`
    (``mode``), skips a block whose every pair is masked, and merges with the log-sum-exp
    (:func:`distlearn.context_parallel.simulation.merge_blocks`). With ``mode="global"`` the result equals
    :func:`per_document_attention` to float64 rounding. Returns :class:`PackedResult`. Raises DistlearnValueError.
    """
    q, k, v, documents, pos, where = _check_packed(q, k, v, lengths, cp, layout, mode)
    cluster = VirtualCluster(cp)
    held = [(k[:, :, p], v[:, :, p], r) for r, p in enumerate(pos)]
    acc: list[Partial | None] = [None] * cp
    work = np.zeros(cp, dtype=np.int64)
    for t in range(cp):
        for r in range(cp):
            kb, vb, src = held[r]
            mask = _chunk_mask(pos[r], pos[src], documents, mode, where)
            work[r] += int(mask.sum())
            if mask.any():
                blk = block_attention(q[:, :, pos[r]], kb, vb, mask=mask)
                acc[r] = blk if acc[r] is None else Partial(*merge_blocks(acc[r].out, acc[r].lse, blk.out, blk.lse))
        if t < cp - 1:
            for r in range(cp):
                cluster.send(np.concatenate([held[r][0].ravel(), held[r][1].ravel()]), r, (r + 1) % cp)
            nxt = []
            for r in range(cp):
                prev = (r - 1) % cp
                msg, shape = cluster.recv(prev, r), held[prev][0].shape
                n = int(np.prod(shape))
                nxt.append((msg[:n].reshape(shape), msg[n:].reshape(shape), held[prev][2]))
            held = nxt
    out, lse = _assemble(acc, pos, q.shape)
    return PackedResult(out, lse, pos, work, cluster.bytes_sent.copy())


def packed_allgather_attention(q, k, v, lengths, cp: int, *, layout: str = "zigzag",
                               mode: str = "global") -> PackedResult:
    """All-gather attention on a packed batch (Llama 3 §3.3.2; PyTorch's flex-attention CP): each rank
    all-gathers K and V (in layout order, ``(cp − 1)/cp`` of them sent per rank), then attends its queries to
    the whole gathered sequence with :func:`chunk_mask` of its query positions against the gathered positions.
    With ``mode="global"`` equal to :func:`per_document_attention`. Returns :class:`PackedResult`."""
    q, k, v, documents, pos, where = _check_packed(q, k, v, lengths, cp, layout, mode)
    cluster = VirtualCluster(cp)
    shards = [np.concatenate([np.moveaxis(k[:, :, p], 2, 0).ravel(), np.moveaxis(v[:, :, p], 2, 0).ravel()])
              for p in pos]
    gathered = cluster.all_gather(shards)             # every rank: all ranks' K/V, rank order / 每个 rank 都拿到全部 K/V
    kv_pos = np.concatenate(pos)
    b, kvh, _, d = k.shape
    n = len(pos[0])
    acc, work = [], np.zeros(cp, dtype=np.int64)
    for r in range(cp):
        parts = gathered[r].reshape(cp, 2, n, b, kvh, d)                # (rank, K|V, token, b, kv, d)
        kg = parts[:, 0].reshape(cp * n, b, kvh, d)  # tokens in layout order / 按切分顺序的词元
        vg = parts[:, 1].reshape(cp * n, b, kvh, d)
        kg, vg = (np.moveaxis(x, 0, 2) for x in (kg, vg))
        mask = _chunk_mask(pos[r], kv_pos, documents, mode, where)
        work[r] = int(mask.sum())
        acc.append(block_attention(q[:, :, pos[r]], kg, vg, mask=mask) if mask.any() else None)
    out, lse = _assemble(acc, pos, q.shape)
    return PackedResult(out, lse, pos, work, cluster.bytes_sent.copy())


def effective_mask(lengths, cp: int, *, layout: str = "zigzag", mode: str = "global",
                   variant: str = "ring") -> np.ndarray:
    """The ``(s, s)`` mask, in original token order (row: query, column: key), that context parallelism really
    applies under ``mode``: each rank's :func:`chunk_mask` against every key chunk (``"ring"``) or against the
    gathered sequence (``"all-gather"``), put back in place. Attention with this mask in one process equals
    :func:`packed_ring_attention` / :func:`packed_allgather_attention` (tested). ``mode="global"`` gives the
    block-diagonal causal document mask for any layout. Raises DistlearnValueError."""
    documents = document_ids(lengths)
    check_choice("mode", mode, MASK_MODES)
    check_choice("variant", variant, PACKED_VARIANTS)
    pos = packed_positions(lengths, cp, layout)
    where = np.argsort(np.concatenate(pos))
    s = len(documents)
    full = np.zeros((s, s), dtype=bool)
    kv_pos = np.concatenate(pos)
    for r in range(cp):
        if variant == "ring":
            for src in range(cp):
                full[np.ix_(pos[r], pos[src])] = _chunk_mask(pos[r], pos[src], documents, mode, where)
        else:
            full[np.ix_(pos[r], kv_pos)] = _chunk_mask(pos[r], kv_pos, documents, mode, where)
    return full


def document_work(lengths, cp: int, layout: str = "zigzag") -> np.ndarray:
    """Unmasked (query, key) pairs each rank computes under the document mask, int ``(cp,)``, counted from
    :func:`document_mask` over :func:`packed_positions`. They sum to ``Σ L(L+1)/2`` over the documents, whatever
    the layout; ``"document-zigzag"`` gives every rank ``Σ_L c(c+1) + (2·cp − 1)·c²`` with ``c = L/(2·cp)``
    (each document's triangle split evenly). Raises DistlearnValueError."""
    documents = document_ids(lengths)
    pos = packed_positions(lengths, cp, layout)
    return np.array([int(document_mask(p, np.arange(len(documents)), documents).sum()) for p in pos], dtype=np.int64)


__all__ = ["PACKED_LAYOUTS", "MASK_MODES", "PACKED_VARIANTS", "document_ids", "document_mask", "packed_positions",
           "chunk_mask", "per_document_attention", "PackedResult", "packed_ring_attention",
           "packed_allgather_attention", "effective_mask", "document_work"]
