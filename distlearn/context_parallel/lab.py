"""Real context parallelism on ``torch.distributed``: ring attention over point-to-point messages and
DeepSpeed-Ulysses over ``all_to_all_single``, forward and backward, checked against one process.

- :class:`RingAttention` — an autograd Function. Forward: at each of the ``cp`` steps the rank posts
  ``dist.batch_isend_irecv`` (send the K/V block it holds to rank r+1, receive the next from r−1) *before*
  computing the current block, so on GPUs the transfer overlaps the block computation; the partial results are
  merged with the online softmax (log-sum-exp). Backward: the K/V blocks travel again, each with an accumulator
  for its dK/dV that every rank adds to and passes on; dQ stays local; after the last step the accumulators take
  one more hop home. A rank waits for the accumulator of the block it holds only after computing that block's
  gradients, so on GPUs the dK/dV hop overlaps the block computation too (PyTorch's
  ``_templated_ring_attention_backward`` and :func:`distlearn.context_parallel.simulation.ring_timeline` do the same). Blocks are computed in float32 for 16-bit inputs (PyTorch's CP does the same,
  ``_cp_options.convert_to_f32``), in float64 for float64 inputs.
- :func:`ulysses_attention` — two :class:`AllToAll` (an autograd Function whose backward is the inverse
  all-to-all) around PyTorch's own ``F.scaled_dot_product_attention`` on ``heads / cp`` heads of the whole
  sequence; K/V heads are replicated first when there are fewer than ``cp`` (DeepSpeed 0.19.8's rule).
- :class:`CPLlamaBlock` — the course's Llama block (:class:`distlearn.activation_memory.measure.LlamaBlock`: RMSNorm,
  RoPE at the tokens' global positions, GQA, SwiGLU) with either attention, fed only this rank's tokens.

:func:`cp_check` compares outputs and gradients with single-process ``scaled_dot_product_attention`` (and the
whole block with one unsharded block; weight gradients summed over the cp ranks, as training must) in float64;
:func:`cp_memory` measures the bytes one rank keeps for backward (saved-tensor hooks). :func:`torch_cp_probe`
tries PyTorch's own ``context_parallel`` on this machine; :func:`torch_ring_check` runs the ring functions it calls,
``_templated_ring_attention(_backward)``, here with the CPU kernel, and counts what they send.

From a notebook: ``distlearn.core.launch.run(cp_check, 4)``. Alone (gloo on CPU, NCCL on GPUs):
``torchrun --nproc-per-node 4 -m distlearn.context_parallel.lab``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from distlearn.activation_memory.measure import LlamaBlock, saved_tensor_bytes
from distlearn.core.launch import device, torchrun_main
from distlearn.core.guard import read_only

LAYOUTS = ("contiguous", "zigzag", "striped")
MEMORY_SHAPE = read_only(dict(seq_len=256, batch=1, hidden=64, heads=4, kv_heads=2, ffn=160))
"""The block :func:`cp_memory` measures by default: 256 tokens, h = 64, 4 query heads, 2 K/V heads, f = 160."""


def lab_config():
    """:data:`MEMORY_SHAPE` as a :class:`distlearn.core.models.ModelConfig` (one Llama layer), so the chapter can price
    it with the same functions as a real model (:func:`distlearn.context_parallel.simulation.cp_layer_activation_bytes`)."""
    from distlearn.core.models import ModelConfig

    m = MEMORY_SHAPE
    return ModelConfig(name="cp-lab-llama", arch="llama", vocab_size=1, hidden_size=m["hidden"], num_layers=1,
                       num_heads=m["heads"], ffn_hidden_size=m["ffn"], max_seq_len=m["seq_len"],
                       num_kv_heads=m["kv_heads"])


def layout_positions(seq_len: int, cp: int, layout: str) -> torch.Tensor:
    """``(cp, seq_len / cp)`` int64: the token positions each rank holds (same rule as
    :func:`distlearn.context_parallel.simulation.layout_positions`; a test checks they agree)."""
    if layout == "striped":
        return torch.arange(seq_len).view(-1, cp).t().contiguous()
    if layout == "contiguous":
        return torch.arange(seq_len).view(cp, -1)
    chunks = torch.arange(seq_len).view(2 * cp, -1)
    return torch.stack([torch.cat([chunks[r], chunks[2 * cp - 1 - r]]) for r in range(cp)])


class Traffic:
    """Bytes and messages this rank sent, counted where the lab calls ``isend`` / ``all_to_all_single``."""

    def __init__(self):
        self.bytes, self.messages = 0, 0

    def add(self, nbytes: int) -> None:
        self.bytes += int(nbytes)
        self.messages += 1


# ---------------------------------------------------------------- ring attention
def _exchange(send: torch.Tensor, recv: torch.Tensor, group, traffic: Traffic | None):
    """Post "send to rank r+1, receive from rank r−1" as one ``batch_isend_irecv``; returns the requests."""
    rank, cp = dist.get_rank(group), dist.get_world_size(group)
    nxt, prv = dist.get_global_rank(group, (rank + 1) % cp), dist.get_global_rank(group, (rank - 1) % cp)
    if traffic is not None:
        traffic.add(send.numel() * send.element_size())
    return dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt, group),
                                   dist.P2POp(dist.irecv, recv, prv, group)])


def _repeat(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x.repeat_interleave(heads // x.shape[1], dim=1)


def _mask(q_pos, k_pos):
    return k_pos[None, :] <= q_pos[:, None]


def _chunk_mask(q_pos, k_pos, causal, documents):
    """The mask of a query chunk over a key chunk from their GLOBAL positions: causal, and with ``documents``
    (global document id per position) also same-document; None when nothing is masked."""
    if documents is None:
        return _mask(q_pos, k_pos) if causal else None
    return _mask(q_pos, k_pos) & (documents[k_pos][None, :] == documents[q_pos][:, None])


def _block_forward(q, k, v, mask, scale):
    """(out, lse) of q over one K/V block, in q's dtype; rows with nothing to attend get lse = −inf, out = 0."""
    s = scale * (q @ _repeat(k, q.shape[1]).transpose(-1, -2))
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None])
    return p @ _repeat(v, q.shape[1]), lse


def _merge(out, lse, block_out, block_lse):
    """Online-softmax merge of two partial results (see :func:`distlearn.context_parallel.simulation.merge_blocks`)."""
    new = torch.logaddexp(lse, block_lse)
    ref = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
    wa = torch.where(torch.isfinite(lse), torch.exp(lse - ref), torch.zeros_like(lse))
    wb = torch.where(torch.isfinite(block_lse), torch.exp(block_lse - ref), torch.zeros_like(lse))
    return wa[..., None] * out + wb[..., None] * block_out, new


def _block_backward(q, k, v, dout, lse, delta, mask, scale):
    """dQ and the block's dK, dV (flash-attention backward with the final lse; K/V gradients summed per group)."""
    a, kv = q.shape[1], k.shape[1]
    kr, vr = _repeat(k, a), _repeat(v, a)
    s = scale * (q @ kr.transpose(-1, -2)) - lse[..., None]
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    p = torch.exp(s)
    ds = p * (dout @ vr.transpose(-1, -2) - delta[..., None])
    b, _, n, d = k.shape
    dk = (scale * ds.transpose(-1, -2) @ q).view(b, kv, a // kv, n, d).sum(2)
    dv = (p.transpose(-1, -2) @ dout).view(b, kv, a // kv, n, d).sum(2)
    return scale * ds @ kr, dk, dv


class RingAttention(torch.autograd.Function):
    """Ring attention of this rank's ``q`` ``(b, a, n, d)`` over all ranks' ``k``, ``v`` ``(b, kv, n, d)``.

    ``positions`` ``(cp, n)``: every rank's token positions (the layout), used only for the causal mask.
    Saves exactly what a flash kernel saves: q, k, v (local), the output and the log-sum-exp of its rows (fp32
    for 16-bit inputs). The output is stored as ``(b, n, a, d)`` and returned as a ``(b, a, n, d)`` view, so the
    output projection's input is a view of it (one tensor, as with a flash kernel).
    """

    @staticmethod
    def forward(ctx, q, k, v, positions, causal, group, traffic, documents=None):
        rank, cp = dist.get_rank(group), dist.get_world_size(group)
        cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = 1.0 / math.sqrt(q.shape[-1])
        qc = q.to(cdt)
        kv = torch.cat([k.reshape(-1), v.reshape(-1)])     # K and V: one message / K、V 合成一条消息
        out = lse = None
        for t in range(cp):
            if t < cp - 1:       # post the transfer first: send to r+1, receive from r−1 / 先发起传输：发给 r+1，从 r−1 收
                incoming = torch.empty_like(kv)
                reqs = _exchange(kv, incoming, group, traffic)
            src = (rank - t) % cp                            # whose K/V block we hold / 当前持有哪个 rank 的 K/V 块
            mask = _chunk_mask(positions[rank], positions[src], causal, documents)
            if mask is None or bool(mask.any()):             # skip a fully masked block / 整块都被掩码时跳过
                kb, vb = kv[:k.numel()].view_as(k).to(cdt), kv[k.numel():].view_as(v).to(cdt)
                bo, bl = _block_forward(qc, kb, vb, mask, scale)
                # merge with the log-sum-exp (online softmax) / 用 log-sum-exp 合并（在线 softmax）
                out, lse = (bo, bl) if out is None else _merge(out, lse, bo, bl)
            if t < cp - 1:                                   # wait for the next block / 等下一个 K/V 块到达
                for req in reqs:
                    req.wait()
                kv = incoming
        out = out.to(q.dtype).transpose(1, 2).contiguous().transpose(1, 2)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.positions, ctx.causal, ctx.group, ctx.traffic = positions, causal, group, traffic
        ctx.documents = documents
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        positions, causal, group, traffic = ctx.positions, ctx.causal, ctx.group, ctx.traffic
        documents = ctx.documents
        rank, cp = dist.get_rank(group), dist.get_world_size(group)
        cdt = lse.dtype
        scale = 1.0 / math.sqrt(q.shape[-1])
        qc, doc = q.to(cdt), dout.to(cdt)
        delta = (doc * out.to(cdt)).sum(-1)
        dq = torch.zeros_like(qc)
        kv = torch.cat([k.reshape(-1), v.reshape(-1)])
        dkv = torch.zeros(kv.numel(), dtype=cdt, device=q.device)      # accumulator of the block held now
        grad_reqs, sending = [], None   # the accumulator of the block held now, still on its way from rank r−1
        n = k.numel()
        for t in range(cp):
            if t < cp - 1:
                incoming = torch.empty_like(kv)
                reqs = _exchange(kv, incoming, group, traffic)
            src = (rank - t) % cp
            mask = _chunk_mask(positions[rank], positions[src], causal, documents)
            block = None
            if mask is None or bool(mask.any()):
                kb, vb = kv[:n].view_as(k).to(cdt), kv[n:].view_as(v).to(cdt)
                gq, gk, gv = _block_backward(qc, kb, vb, doc, lse, delta, mask, scale)
                dq += gq
                block = torch.cat([gk.reshape(-1), gv.reshape(-1)])
            for req in grad_reqs:       # computed first, so this hop overlapped the block (as PyTorch's ring)
                req.wait()
            if block is not None:
                dkv = dkv + block
            if cp > 1:                  # pass the accumulator on; the next block's arrives meanwhile
                nxt = torch.empty_like(dkv)
                grad_reqs, sending = _exchange(dkv, nxt, group, traffic), dkv   # keep the send buffer alive
                dkv = nxt
            if t < cp - 1:
                for req in reqs:
                    req.wait()
                kv = incoming
        for req in grad_reqs:           # the last hop: every accumulator back with the rank that owns its block
            req.wait()
        del sending
        return (dq.to(q.dtype), dkv[:n].view_as(k).to(k.dtype), dkv[n:].view_as(v).to(v.dtype),
                None, None, None, None, None)


def ring_attention(q, k, v, positions, causal=False, group=None, traffic=None, documents=None):
    """:class:`RingAttention` over ``group`` (default: the whole world). ``documents`` (optional, int64 ``(s,)``):
    the document id of every **global** position of a packed sequence; with it the mask of each (query chunk, key
    chunk) is causal and same-document, built from global positions and ids (implies ``causal``)."""
    return RingAttention.apply(q, k, v, positions, causal, group or dist.group.WORLD, traffic, documents)


# ---------------------------------------------------------------- all-to-all (DeepSpeed-Ulysses)
def _all_to_all(x, scatter_dim, gather_dim, group, traffic):
    cp = dist.get_world_size(group)
    send = torch.stack(x.chunk(cp, dim=scatter_dim)).contiguous()      # slot j goes to rank j
    recv = torch.empty_like(send)
    if traffic is not None:
        traffic.add(send.numel() * send.element_size() * (cp - 1) // cp)  # the slot for itself stays
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim)


class AllToAll(torch.autograd.Function):
    """Re-shard ``x``: split ``scatter_dim`` over the ranks, gather ``gather_dim`` from them. Its gradient is the
    all-to-all the other way round (scatter ``gather_dim``, gather ``scatter_dim``)."""

    @staticmethod
    def forward(ctx, x, scatter_dim, gather_dim, group, traffic):
        ctx.dims, ctx.group, ctx.traffic = (scatter_dim, gather_dim), group, traffic
        return _all_to_all(x, scatter_dim, gather_dim, group, traffic)

    @staticmethod
    def backward(ctx, grad):
        scatter_dim, gather_dim = ctx.dims
        return _all_to_all(grad, gather_dim, scatter_dim, ctx.group, ctx.traffic), None, None, None, None


def ulysses_attention(q, k, v, causal=False, group=None, traffic=None):
    """DeepSpeed-Ulysses: this rank's contiguous tokens ``(b, a, n, d)`` in, its tokens' output out.

    Q, K, V go from "my tokens, all heads" to "all tokens, heads ``r·a/cp …``" (K/V heads replicated first when
    fewer than cp), PyTorch's ``scaled_dot_product_attention`` runs on them, and the output goes back. The
    output is returned as a ``(b, a, n, d)`` view of a ``(b, n, a, d)`` tensor (like :class:`RingAttention`).
    """
    group = group or dist.group.WORLD
    cp, a, kv = dist.get_world_size(group), q.shape[1], k.shape[1]
    if a % cp or (kv % cp and cp % kv):
        raise ValueError(f"Ulysses needs cp = {cp} to divide the {a} query heads and the {kv} K/V heads to "
                         f"divide or be divided by cp / Ulysses 要求 cp = {cp} 整除 {a} 个查询头，且 {kv} 个 K/V 头"
                         "与 cp 能互相整除")
    if kv < cp:
        k, v = k.repeat_interleave(cp // kv, dim=1), v.repeat_interleave(cp // kv, dim=1)
    qh, kh, vh = (AllToAll.apply(x, 1, 2, group, traffic) for x in (q, k, v))
    oh = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, enable_gqa=qh.shape[1] != kh.shape[1])
    o = AllToAll.apply(oh.transpose(1, 2), 1, 2, group, traffic)          # (b, n, a, d): scatter seq, gather heads
    return o.transpose(1, 2)


# ---------------------------------------------------------------- a Llama block with context parallelism
def _runs(pos: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of consecutive positions, as (start, length): contiguous → 1 run, zig-zag → 2."""
    runs, start, length = [], int(pos[0]), 1
    for p in pos[1:].tolist():
        if p == start + length:
            length += 1
        else:
            runs.append((start, length))
            start, length = p, 1
    return runs + [(start, length)]


class CPLlamaBlock(LlamaBlock):
    """:class:`distlearn.activation_memory.measure.LlamaBlock` fed only this rank's tokens, with context-parallel
    attention: ``variant="ring"`` (:class:`RingAttention`, any layout) or ``"ulysses"`` (contiguous layout).

    ``forward(x, positions)``: ``x`` ``(b, n, h)`` this rank's tokens, ``positions`` ``(cp, n)`` (every rank's).
    RoPE uses the tokens' global positions, sliced from the cos/sin buffers run by run (so nothing new is saved:
    slices of a buffer are not activations). Everything else is the parent's code, token by token.
    """

    def __init__(self, *args, variant: str = "ring", causal: bool = True, group=None, traffic=None, **kw):
        super().__init__(*args, **kw)
        if variant not in ("ring", "ulysses"):
            raise ValueError(f"variant must be 'ring' or 'ulysses', got {variant!r} / variant 必须是 'ring' 或 "
                             "'ulysses'")
        self.variant, self.causal, self.group, self.traffic = variant, causal, group, traffic

    def _rope_at(self, x, runs):
        parts = [x[:, :, i:i + n] * self.cos[p:p + n] + _rotate(x[:, :, i:i + n]) * self.sin[p:p + n]
                 for (p, n), i in zip(runs, _offsets(runs))]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)

    def forward(self, x, positions):
        group = self.group or dist.group.WORLD
        rank = dist.get_rank(group)
        runs = _runs(positions[rank])
        b, s, h = x.shape
        d = h // self.a
        y = self._norm(x, self.norm1)
        q = self._rope_at(self.q(y).view(b, s, self.a, d).transpose(1, 2), runs)
        k = self._rope_at(self.k(y).view(b, s, self.kv, d).transpose(1, 2), runs)
        v = self.v(y).view(b, s, self.kv, d).transpose(1, 2)
        if self.variant == "ring":
            z = ring_attention(q, k, v, positions, self.causal, group, self.traffic)
        else:
            z = ulysses_attention(q, k, v, self.causal, group, self.traffic)
        return self._finish(x, z)     # output projection, norm, SwiGLU MLP: LlamaBlock's, unchanged


def _rotate(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _offsets(runs):
    out, i = [], 0
    for _, n in runs:
        out.append(i)
        i += n
    return out


# ---------------------------------------------------------------- the checks
def _err(a, b) -> float:
    return float((a.detach().cpu() - b.detach().cpu()).abs().max())


def _attention_case(rank, cp, q, k, v, g, variant, layout, causal, dev):
    """One comparison: this rank's CP output and gradients vs the single-process SDPA reference."""
    pos = layout_positions(q.shape[2], cp, layout).to(dev)
    mine = pos[rank]
    qr, kr, vr = (x[:, :, mine].clone().requires_grad_() for x in (q, k, v))
    traffic = Traffic()
    if variant == "ring":
        out = ring_attention(qr, kr, vr, pos, causal, None, traffic)
    else:
        out = ulysses_attention(qr, kr, vr, causal, None, traffic)
    fwd_bytes = traffic.bytes
    out.backward(g[:, :, mine])
    full = [x.clone().requires_grad_() for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*full, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    ref.backward(g)
    return {"out_err": _err(out, ref[:, :, mine]), "dq_err": _err(qr.grad, full[0].grad[:, :, mine]),
            "dk_err": _err(kr.grad, full[1].grad[:, :, mine]), "dv_err": _err(vr.grad, full[2].grad[:, :, mine]),
            "fwd_bytes": fwd_bytes, "bwd_bytes": traffic.bytes - fwd_bytes, "out": out.detach().cpu().numpy()}


def _block_case(rank, cp, x, g, variant, layout, dev, shape, seed):
    """The whole (causal) Llama block with context parallelism vs one unsharded block: outputs, input gradients,
    and weight gradients summed over the cp ranks (each rank's tokens contribute to every weight)."""
    s = x.shape[1]
    torch.manual_seed(seed)
    ref = LlamaBlock(**shape, max_seq_len=s).double().to(dev)
    blk = CPLlamaBlock(**shape, max_seq_len=s, variant=variant, causal=True).double().to(dev)
    blk.load_state_dict(ref.state_dict())
    pos = layout_positions(s, cp, layout).to(dev)
    mine = pos[rank]
    xr = x[:, mine].clone().requires_grad_()
    out = blk(xr, pos)
    out.backward(g[:, mine])
    grads = [p.grad.clone() for p in blk.parameters()]
    for t in grads:
        dist.all_reduce(t)
    xf = x.clone().requires_grad_()
    ref_out = ref(xf)
    ref_out.backward(g)
    return {"out_err": _err(out, ref_out[:, mine]), "dx_err": _err(xr.grad, xf.grad[:, mine]),
            "grad_err": max(_err(a, p.grad) for a, p in zip(grads, ref.parameters()))}


def cp_check(rank: int, world_size: int, probe: bool = False, seq_len: int = 16, batch: int = 2, heads: int = 4,
             kv_heads: int = 2, head_dim: int = 8, seed: int = 0, memory: bool = True) -> dict:
    """Ring (contiguous, zig-zag and striped layouts) and Ulysses attention on ``world_size`` ranks, causal and
    not, against single-process ``F.scaled_dot_product_attention`` in float64; and the whole
    :class:`CPLlamaBlock` against one unsharded block.

    Every rank draws the same full Q, K, V and upstream gradient (same seed) and keeps its tokens. Returns
    ``{"attention": {(variant, layout, causal): {out_err, dq_err, dk_err, dv_err, fwd_bytes, bwd_bytes, out}},
    "block": {(variant, layout): {out_err, dx_err, grad_err}}, "inputs": (q, k, v, g) numpy (rank 0 only),
    "memory": {variant: cp_memory(...)} (with ``memory``), "probe": torch_cp_probe(...) (with ``probe``)}`` with
    errors = max |difference| over this rank's tokens. (One launch does it all: starting processes is the cost.)
    """
    dev = device()
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_len, head_dim, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(batch, kv_heads, seq_len, head_dim, generator=gen, dtype=torch.float64) for _ in range(2))
    g = torch.randn(batch, heads, seq_len, head_dim, generator=gen, dtype=torch.float64)
    q, k, v, g = (t.to(dev) for t in (q, k, v, g))
    cases = [("ring", layout, causal) for layout in LAYOUTS for causal in (False, True)]
    cases += [("ulysses", "contiguous", causal) for causal in (False, True)]
    attention = {c: _attention_case(rank, world_size, q, k, v, g, *c, dev) for c in cases}
    hidden = heads * head_dim
    shape = dict(hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads, ffn_hidden_size=2 * hidden)
    x = torch.randn(batch, seq_len, hidden, generator=gen, dtype=torch.float64).to(dev)
    gx = torch.randn(batch, seq_len, hidden, generator=gen, dtype=torch.float64).to(dev)
    block = {(variant, layout): _block_case(rank, world_size, x, gx, variant, layout, dev, shape, seed)
             for variant, layout in (("ring", "zigzag"), ("ulysses", "contiguous"))}
    inputs = tuple(t.cpu().numpy() for t in (q, k, v, g)) if rank == 0 else None
    result = {"rank": rank, "world_size": world_size, "attention": attention, "block": block, "inputs": inputs}
    if memory:
        result["memory"] = {(var, lay): cp_memory(rank, world_size, variant=var, layout=lay)
                            for var, lay in (("ring", "zigzag"), ("ulysses", "contiguous"))}
    if probe:
        result["probe"] = torch_cp_probe(rank, world_size)
    return result


def cp_memory(rank: int, world_size: int, seq_len: int = MEMORY_SHAPE["seq_len"], batch: int = MEMORY_SHAPE["batch"],
              hidden: int = MEMORY_SHAPE["hidden"], heads: int = MEMORY_SHAPE["heads"],
              kv_heads: int = MEMORY_SHAPE["kv_heads"], ffn: int = MEMORY_SHAPE["ffn"], variant: str = "ring",
              layout: str = "zigzag", seed: int = 0) -> dict:
    """Bytes this rank's :class:`CPLlamaBlock` keeps for backward, in bf16, measured with saved-tensor hooks
    (storages counted once, parameters and buffers excluded: :func:`distlearn.activation_memory.measure.
    saved_tensor_bytes`). Returns ``{"total", "by_dtype", "storages", "local_tokens"}``; runs the backward too."""
    dev = device()
    torch.manual_seed(seed)
    blk = CPLlamaBlock(hidden, heads, kv_heads, ffn, max_seq_len=seq_len, variant=variant).to(torch.bfloat16)
    blk = blk.to(dev)
    pos = layout_positions(seq_len, world_size, layout).to(dev)
    x = torch.randn(batch, seq_len // world_size, hidden, dtype=torch.bfloat16, device=dev, requires_grad=True)
    exclude = list(blk.parameters()) + list(blk.buffers())
    out, saved = saved_tensor_bytes(lambda t: blk(t, pos), x, exclude=exclude)
    out.float().sum().backward()
    by_dtype = {}
    for nbytes, dtype, _ in saved.storages:
        by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
    return {"rank": rank, "total": saved.total, "by_dtype": by_dtype, "storages": saved.storages,
            "local_tokens": seq_len // world_size}


def torch_cp_probe(rank: int, world_size: int, seq_len: int = 16) -> dict:
    """Try PyTorch's own ``torch.distributed.tensor.experimental.context_parallel`` here: shard Q, K, V over a
    device mesh of all ranks and call ``F.scaled_dot_product_attention`` inside it. Returns ``{"ok": bool,
    "error": "<type>: <first line>" or None, "device": str}``. On CPU, torch 2.13 dispatches SDPA to
    ``aten._scaled_dot_product_flash_attention_for_cpu``, which has no context-parallel sharding strategy."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    dev = device()
    mesh = init_device_mesh(dev.type, (world_size,))
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, seq_len, 8, generator=gen).to(dev) for _ in range(3))
    try:
        with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
            qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
            F.scaled_dot_product_attention(qq, kk, vv, is_causal=True).sum().backward()
        return {"ok": True, "error": None, "device": dev.type}
    except Exception as exc:   # noqa: BLE001 - the point is to report what PyTorch raises here
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}", "device": dev.type}


class _CountCollectives:
    """Count what PyTorch's context-parallel ring sends, where it calls the functional collectives: inside the
    ``with``, ``ft_c.permute_tensor`` (the ``"alltoall"`` rotate: the whole tensor to rank r+1) and
    ``ft_c.all_gather_single`` (the ``"allgather"`` rotate: ``cp − 1`` times the input leaves each rank, as in a
    ring all-gather) are wrapped to record ``(kind, bytes sent by this rank, dtype)``; restored on exit."""

    def __init__(self, cp: int):
        import torch.distributed._functional_collectives as ft_c

        self.ft_c, self.cp, self.calls = ft_c, cp, []

    def __enter__(self):
        ft_c, calls, cp = self.ft_c, self.calls, self.cp
        self._saved = ft_c.permute_tensor, ft_c.all_gather_single
        permute, gather = self._saved

        def counted_permute(t, *args, **kw):
            calls.append(("permute", t.numel() * t.element_size(), str(t.dtype).replace("torch.", "")))
            return permute(t, *args, **kw)

        def counted_gather(t, *args, **kw):
            calls.append(("all_gather", (cp - 1) * t.numel() * t.element_size(), str(t.dtype).replace("torch.", "")))
            return gather(t, *args, **kw)

        ft_c.permute_tensor, ft_c.all_gather_single = counted_permute, counted_gather
        return self

    def __exit__(self, *exc):
        self.ft_c.permute_tensor, self.ft_c.all_gather_single = self._saved
        return False


def torch_ring_check(rank: int, world_size: int, rotate: str = "allgather", dtype: str = "float64",
                     load_balance: bool = True, seq_len: int = 16, heads: int = 2, head_dim: int = 8,
                     seed: int = 0) -> dict:
    """PyTorch's own ring attention, forward and backward, on this machine: the functions its ``context_parallel``
    runs for every CUDA SDPA kernel — ``_templated_ring_attention`` and ``_templated_ring_attention_backward``
    (torch 2.13, ``torch/distributed/tensor/experimental/_context_parallel/_attention.py``) — given the CPU kernel
    ``aten._scaled_dot_product_flash_attention_for_cpu`` (and its backward) instead. They take the kernel as an
    argument, so the algorithm is PyTorch's line for line: rotate method (``"allgather"``, its default, or
    ``"alltoall"``), the head-tail load-balanced skipping of masked half blocks, the ``_SDPAMerger``, the dK/dV
    accumulators sent around the ring.

    Every rank draws the same causal Q, K, V, dO (multi-head: the CPU kernel takes equal head counts) and keeps
    its head-tail shard (``_HeadTailLoadBalancer`` = the course's zig-zag). ``dtype="float64"`` runs with
    ``_cp_options.convert_to_f32 = False`` (else PyTorch merges in float32 and the float64 comparison could only
    reach ~1e-7); ``"bfloat16"`` keeps PyTorch's default ``True`` (float32 merge and dK/dV accumulators).
    ``load_balance=False`` runs PyTorch's ring as if the shards were contiguous while they are head-tail — a
    deliberately wrong setting, to see the comparison fail. Options are restored afterwards.

    Returns ``{"out_err", "dq_err", "dk_err", "dv_err"}`` (max |difference| from single-process SDPA over this
    rank's tokens), ``"lab_err"`` (max |difference| of output and dQ, dK, dV from this lab's
    :class:`RingAttention` on the same shards), ``"fwd"`` / ``"bwd"``: lists of ``(collective, bytes this rank
    sent, dtype)`` as PyTorch called them, and ``"block_bytes"`` (K and V of one shard, bytes).
    """
    from torch.distributed.tensor.experimental._context_parallel import _attention as A
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import _HeadTailLoadBalancer

    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(seed)
    q, k, v, g = (torch.randn(1, heads, seq_len, head_dim, generator=gen, dtype=torch.float64).to(dt)
                  for _ in range(4))
    order = _HeadTailLoadBalancer(seq_len, world_size, "cpu")._generate_indices()[0].long()
    pos = order.view(world_size, -1)
    mine = pos[rank]
    ql, kl, vl, gl = (t[:, :, mine].contiguous() for t in (q, k, v, g))
    saved = A._cp_options.rotate_method, A._cp_options.enable_load_balance, A._cp_options.convert_to_f32
    try:
        A.set_rotate_method(rotate)
        A._cp_options.enable_load_balance = load_balance
        A._cp_options.convert_to_f32 = dt != torch.float64
        group = dist.group.WORLD
        with _CountCollectives(world_size) as fwd:
            out, lse = A._templated_ring_attention(
                group, 2, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, ql, kl, vl, is_causal=True)[:2]
        with _CountCollectives(world_size) as bwd:
            dq, dk, dv = A._templated_ring_attention_backward(
                group, 2, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward, gl, "grad_out",
                ql, kl, vl, out, lse, True, dropout_p=0.0)[:3]
    finally:
        A._cp_options.rotate_method, A._cp_options.enable_load_balance, A._cp_options.convert_to_f32 = saved
    full = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*full, is_causal=True)
    ref.backward(g)
    lq, lk, lv = (t.clone().requires_grad_() for t in (ql, kl, vl))
    ours = ring_attention(lq, lk, lv, pos, True)
    ours.backward(gl)
    return {"rank": rank, "rotate": rotate, "dtype": dtype, "load_balance": load_balance,
            "out_err": _err(out, ref[:, :, mine]), "dq_err": _err(dq, full[0].grad[:, :, mine]),
            "dk_err": _err(dk, full[1].grad[:, :, mine]), "dv_err": _err(dv, full[2].grad[:, :, mine]),
            "lab_err": max(_err(out, ours), _err(dq, lq.grad), _err(dk, lk.grad), _err(dv, lv.grad)),
            "fwd": fwd.calls, "bwd": bwd.calls, "block_bytes": 2 * kl.numel() * kl.element_size()}


TORCH_RING_CASES = (("alltoall", "float64", True), ("allgather", "float64", True), ("allgather", "bfloat16", True),
                    ("alltoall", "float64", False))
"""The chapter's runs of :func:`torch_ring_check`: ``(rotate, dtype, load_balance)``; the last is broken on purpose."""


def torch_ring_checks(rank: int, world_size: int, cases=TORCH_RING_CASES, seq_len: int = 16, heads: int = 2,
                      head_dim: int = 8) -> list:
    """:func:`torch_ring_check` for each ``(rotate, dtype, load_balance)`` of ``cases`` in one launch (importing
    PyTorch's context-parallel module costs seconds per process; one launch pays it once). Returns the list."""
    return [torch_ring_check(rank, world_size, *case, seq_len=seq_len, heads=heads, head_dim=head_dim)
            for case in cases]

# ---------------------------------------------------------------- packed sequences: document masks
PACKED_LENGTHS = (24, 8, 16, 16)
"""The packed batch of the chapter's document-mask section: four documents, 64 tokens (every length a multiple of
8, so the per-document zig-zag layout works for cp = 2 and 4)."""


def per_document_sdpa(q, k, v, lengths):
    """Reference on one process: PyTorch's ``F.scaled_dot_product_attention(is_causal=True)`` on every document's
    own slice of ``q`` ``(b, a, s, d)``, ``k``, ``v`` ``(b, kv, s, d)``, outputs concatenated. No mask tensor is
    involved, so a wrong document mask cannot hide in the reference."""
    outs, start = [], 0
    for n in lengths:
        sl = slice(start, start + n)
        outs.append(F.scaled_dot_product_attention(q[:, :, sl], k[:, :, sl], v[:, :, sl], is_causal=True,
                                                   enable_gqa=q.shape[1] != k.shape[1]))
        start += n
    return torch.cat(outs, dim=2)


PACKED_CASES = (("contiguous", True), ("zigzag", True), ("document-zigzag", True), ("zigzag", False))
"""The lab's runs of :func:`packed_check`: ``(layout, document mask passed)``; the last ignores the documents (a
ring that knows only ``is_causal``), the mistake the chapter shows."""


def packed_check(rank: int, world_size: int, lengths=PACKED_LENGTHS, cases=PACKED_CASES, batch: int = 2,
                 heads: int = 4, kv_heads: int = 2, head_dim: int = 8, seed: int = 0) -> dict:
    """Ring attention (:class:`RingAttention`) on a packed batch with the document mask, against
    :func:`per_document_sdpa` in float64: output and dQ, dK, dV of this rank's tokens, for each
    ``(layout, documents)`` of ``cases`` (layouts of :func:`distlearn.context_parallel.packed.packed_positions`).
    The mask of every (query chunk, key chunk) is built from global positions and global document ids.

    Returns ``{(layout, documents): {"out_err", "grad_err", "fwd_bytes", "bwd_bytes"}}`` (max |difference| over
    this rank's tokens; bytes this rank sent).
    """
    from distlearn.context_parallel.packed import document_ids, packed_positions

    dev = device()
    s = int(sum(lengths))
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, s, head_dim, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(batch, kv_heads, s, head_dim, generator=gen, dtype=torch.float64) for _ in range(2))
    g = torch.randn(batch, heads, s, head_dim, generator=gen, dtype=torch.float64)
    q, k, v, g = (t.to(dev) for t in (q, k, v, g))
    full = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = per_document_sdpa(*full, lengths)
    ref.backward(g)
    docs = torch.as_tensor(document_ids(lengths), device=dev)
    result = {}
    for layout, with_docs in cases:
        pos = torch.as_tensor(np.stack(packed_positions(lengths, world_size, layout)), device=dev)
        mine = pos[rank]
        qr, kr, vr = (t[:, :, mine].clone().requires_grad_() for t in (q, k, v))
        traffic = Traffic()
        out = ring_attention(qr, kr, vr, pos, True, None, traffic, docs if with_docs else None)
        fwd = traffic.bytes
        out.backward(g[:, :, mine])
        result[(layout, with_docs)] = {
            "out_err": _err(out, ref[:, :, mine]),
            "grad_err": max(_err(qr.grad, full[0].grad[:, :, mine]), _err(kr.grad, full[1].grad[:, :, mine]),
                            _err(vr.grad, full[2].grad[:, :, mine])),
            "fwd_bytes": fwd, "bwd_bytes": traffic.bytes - fwd}
    return result


def packed_batches(lengths, batch: int, generator, vocab: int = 16, topics: int = 4, stay: float = 0.7):
    """A synthetic packed batch ``(batch, s)`` int64: every document picks a topic ``t`` (a token id below
    ``topics``); each of its tokens is ``t`` with probability ``stay``, else uniform over ``vocab``. The next token
    is predictable only from the tokens of its own document, so attention to other documents can only hurt."""
    s = int(sum(lengths))
    toks = torch.randint(vocab, (batch, s), generator=generator)
    start = 0
    for n in lengths:
        topic = torch.randint(topics, (batch, 1), generator=generator)
        keep = torch.rand(batch, n, generator=generator) < stay
        toks[:, start:start + n] = torch.where(keep, topic.expand(batch, n), toks[:, start:start + n])
        start += n
    return toks


class TinyPackedLM(torch.nn.Module):
    """One attention layer over token embeddings, residual, linear head: the smallest model whose next-token loss
    depends on which keys each query may see. ``forward(tokens (b, s), mask (s, s) bool)`` → logits ``(b, s, V)``."""

    def __init__(self, vocab: int = 16, hidden: int = 32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = torch.nn.Linear(hidden, hidden, bias=False)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens, mask):
        x = self.embed(tokens)
        q, k, v = self.qkv(x).unsqueeze(1).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).squeeze(1)
        return self.head(x + self.o(y))


def document_labels(tokens, lengths):
    """Next-token labels of a packed batch: token ``i + 1`` of the same document, and ``-100`` (ignored) for the
    last token of every document, whose next token belongs to another document."""
    labels = torch.full_like(tokens, -100)
    labels[:, :-1] = tokens[:, 1:]
    ends = torch.as_tensor(list(np.cumsum(lengths) - 1))
    labels[:, ends] = -100
    return labels


def packed_loss(masks: dict, lengths=PACKED_LENGTHS, steps: int = 100, batch: int = 16, seed: int = 0) -> dict:
    """Train :class:`TinyPackedLM` on :func:`packed_batches` with the correct document mask (one process, float32,
    Adam 1e-2, ``steps`` steps), then evaluate its mean next-token loss (cross-entropy, nats; labels
    :func:`document_labels`) on 64 fresh sequences under each mask of ``masks`` (``{name: (s, s) bool}``, e.g.
    :func:`distlearn.context_parallel.packed.effective_mask` of each mistake). The first entry of ``masks`` is the
    training mask. Returns ``{name: loss}``."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyPackedLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tensors = {name: torch.as_tensor(np.asarray(m, dtype=bool)) for name, m in masks.items()}
    train = next(iter(tensors.values()))
    for _ in range(steps):
        toks = packed_batches(lengths, batch, gen)
        loss = F.cross_entropy(model(toks, train).flatten(0, 1), document_labels(toks, lengths).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    toks = packed_batches(lengths, 64, gen)
    labels = document_labels(toks, lengths).flatten()
    with torch.no_grad():
        return {name: float(F.cross_entropy(model(toks, m).flatten(0, 1), labels)) for name, m in tensors.items()}


FLEX_LENGTHS = (96, 32, 64, 64)
"""A packed batch PyTorch's flex-attention CP accepts on 2 ranks: 256 tokens, a multiple of cp × 128."""


def torch_flex_check(rank: int, world_size: int, lengths=FLEX_LENGTHS, heads: int = 2, head_dim: int = 16,
                     seed: int = 0) -> dict:
    """PyTorch 2.13's own context parallelism for flex attention with a document ``BlockMask``, on this machine.

    The module calling ``flex_attention`` is parallelised with ``_ContextParallel(seq_dim=2,
    AttentionType.FLEX)`` (K and V all-gathered by ``flex_cp_allgather``); Q, K, V and the block mask are sharded
    by ``_context_parallel_shard`` with the head-tail load balancer, which rebuilds the mask for the local queries
    (``_create_cp_block_mask``: the ``mask_mod`` sees global, restored indices). The mask_mod reads GLOBAL document
    ids. Returns ``{"err_documents"}`` (max |difference| of this rank's output from :func:`per_document_sdpa`,
    float32) and ``{"err_causal"}`` (from plain causal SDPA: large, so the comparison can fail). Slow on CPU:
    ``create_block_mask`` is compiled with ``torch.compile`` (about two minutes on 2 busy cores)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental._context_parallel import (_context_parallel_shard, _ContextParallel,
                                                                        _HeadTailLoadBalancer)
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    s = int(sum(lengths))
    mesh = init_device_mesh("cpu", (world_size,))
    docs = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))

    def document_mod(b, h, q_idx, kv_idx):      # global indices, global document ids / 全局下标、全局文档编号
        return (kv_idx <= q_idx) & (docs[q_idx] == docs[kv_idx])

    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, s, head_dim, generator=gen) for _ in range(3))
    block_mask = create_block_mask(document_mod, 1, 1, s, s, device="cpu")
    attn = parallelize_module(_FlexAttention(), mesh,
                              _ContextParallel(seq_dim=2, attention_type=_ContextParallel.AttentionType.FLEX))
    balancer = _HeadTailLoadBalancer(s, world_size, "cpu")
    ql, kl, vl, mask_l = _context_parallel_shard(mesh, [q, k, v, block_mask], [2, 2, 2, 2], load_balancer=balancer)
    out = attn(ql, kl, vl, block_mask=mask_l)
    mine = balancer._generate_indices()[0].view(world_size, -1)[rank]
    ref = per_document_sdpa(q, k, v, lengths)[:, :, mine]
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, mine]
    return {"rank": rank, "err_documents": _err(out, ref), "err_causal": _err(out, causal)}


class _FlexAttention(torch.nn.Module):
    """``flex_attention`` as a module, so ``_ContextParallel`` can hook its inputs."""

    def forward(self, q, k, v, block_mask=None):
        from torch.nn.attention.flex_attention import flex_attention

        return flex_attention(q, k, v, block_mask=block_mask)


def summary(rank: int, world_size: int) -> str:
    """The torchrun entry: the largest differences from single-process SDPA, per case, on this world size."""
    r = cp_check(rank, world_size)
    lines = [f"{v} {lay} causal={c}: world_size={world_size} max|Δout|={e['out_err']:.1e} "
             f"max|Δgrad|={max(e['dq_err'], e['dk_err'], e['dv_err']):.1e} bytes fwd/bwd={e['fwd_bytes']}/"
             f"{e['bwd_bytes']}" for (v, lay, c), e in r["attention"].items()]
    lines += [f"block {v} {lay}: max|Δout|={e['out_err']:.1e} max|Δdx|={e['dx_err']:.1e} "
              f"max|Δweight grad|={e['grad_err']:.1e}" for (v, lay), e in r["block"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    torchrun_main(summary)
