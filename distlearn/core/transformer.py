"""The readable decoder-only transformer of :mod:`distlearn.core.models`, as ordinary ``torch.nn`` modules.

This module imports torch; :mod:`distlearn.core.models` (configs, closed-form counts) does not, and re-exports these
classes lazily: ``from distlearn.core.models import TransformerLM`` imports torch only then. The classes are top-level,
so they pickle, show in ``help()`` and ``inspect.getsource`` finds them.

Every ``c`` below is a :class:`distlearn.core.models.ModelConfig`. The annotations name it without importing it
(they are strings: ``from __future__ import annotations``), so the dependency runs one way, models → transformer,
and the import graph stays acyclic (``tests/test_layout.py``).

Shapes: ``tokens`` (batch, seq) int64 → logits (batch, seq, vocab_size); inside a block (batch, seq, hidden_size).
Architectures (``ModelConfig.arch``): ``"gpt"`` = learned positions, LayerNorm with bias, biased linears, GELU MLP
(Radford et al. 2019); ``"llama"`` = RMSNorm, no biases, SwiGLU MLP, grouped-query attention (Touvron et al. 2023).
Rotary position embeddings have no parameters and are left out (parameter counts and memory are what the course
measures with these modules).

Mixture of experts (chapter 11): an MoE layer's FFN is :class:`distlearn.core.moe.MoE` (router, routed and shared
experts); :class:`MLAttention` is DeepSeek's multi-head latent attention with exactly its parameter shapes
(DeepSeek-V2 §2.1, HF ``modeling_deepseek.py``), and :class:`MTPModule` a DeepSeek-V3 multi-token prediction
module (§2.2). DeepSeek-V3 with all 61 layers and 256 experts per layer is only ever built on the meta device.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from distlearn.core.moe import GroupedExperts, MoE

__all__ = ["RMSNorm", "Attention", "MLAttention", "MLP", "GroupedExperts", "MoE", "MTPModule", "Block",
           "TransformerLM"]


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): ``weight · x / sqrt(mean(x²) + eps)`` over the last dim."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    """Causal self-attention with grouped K/V heads (positions: learned for GPT; none here for Llama)."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        bias = c.arch == "gpt"
        self.n_heads, self.n_kv, self.head_dim = c.num_heads, c.kv_heads, c.head_dim
        self.q = nn.Linear(c.hidden_size, c.hidden_size, bias=bias)
        self.k = nn.Linear(c.hidden_size, c.kv_heads * c.head_dim, bias=bias)
        self.v = nn.Linear(c.hidden_size, c.kv_heads * c.head_dim, bias=bias)
        self.o = nn.Linear(c.hidden_size, c.hidden_size, bias=bias)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        rep = self.n_heads // self.n_kv
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


class MLAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2 §2.1; DeepSeek-V3 §2.1.1), causal, rotary rotation omitted.

    Queries: ``q_b_proj(q_a_layernorm(q_a_proj(x)))`` (or ``q_proj(x)`` without a query rank), split per head into
    ``qk_nope_head_dim`` + ``qk_rope_head_dim``. Keys and values: ``kv_a_proj_with_mqa(x)`` gives the latent
    (``kv_lora_rank``, the part a KV cache keeps) and one rotary key shared by all heads; ``kv_b_proj`` of the
    normed latent gives each head's non-rotary key and its value. Output: ``o_proj`` of the heads' values."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        m, h, n = c.mla, c.hidden_size, c.num_heads
        self.m, self.n_heads = m, n
        if m.q_lora_rank is None:
            self.q_proj = nn.Linear(h, n * m.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(h, m.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(m.q_lora_rank)
            self.q_b_proj = nn.Linear(m.q_lora_rank, n * m.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, m.kv_lora_rank + m.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(m.kv_lora_rank)
        self.kv_b_proj = nn.Linear(m.kv_lora_rank, n * (m.qk_nope_head_dim + m.v_head_dim), bias=False)
        self.o_proj = nn.Linear(n * m.v_head_dim, h, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        m, n = self.m, self.n_heads
        q = self.q_proj(x) if m.q_lora_rank is None else self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(b, s, n, m.qk_head_dim).transpose(1, 2)                       # (b, n, s, nope + rope)
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, s, n, m.qk_nope_head_dim + m.v_head_dim)
        k_nope, v = kv.transpose(1, 2).split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_rope.unsqueeze(1).expand(b, n, s, m.qk_rope_head_dim)], dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                # scale 1/sqrt(nope + rope)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, n * m.v_head_dim))


class MLP(nn.Module):
    """GPT: ``down(gelu(up(x)))`` with biases; Llama SwiGLU: ``down(silu(gate(x)) · up(x))`` without biases."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.arch = c.arch
        if c.arch == "gpt":
            self.up = nn.Linear(c.hidden_size, c.ffn_hidden_size)
            self.down = nn.Linear(c.ffn_hidden_size, c.hidden_size)
        else:
            self.gate = nn.Linear(c.hidden_size, c.ffn_hidden_size, bias=False)
            self.up = nn.Linear(c.hidden_size, c.ffn_hidden_size, bias=False)
            self.down = nn.Linear(c.ffn_hidden_size, c.hidden_size, bias=False)

    def forward(self, x):
        if self.arch == "gpt":
            return self.down(F.gelu(self.up(x), approximate="tanh"))
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _norm(c: ModelConfig) -> nn.Module:
    return nn.LayerNorm(c.hidden_size) if c.arch == "gpt" else RMSNorm(c.hidden_size)


class Block(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then + mlp(norm2(·)); the residual always adds to the un-normed x.

    ``layer`` (0-based) picks the FFN: :class:`~distlearn.core.moe.MoE` when ``c.is_moe_layer(layer)``, else the dense
    :class:`MLP`; the attention is :class:`MLAttention` when ``c.mla`` is set."""

    def __init__(self, c: ModelConfig, layer: int = 0):
        super().__init__()
        self.norm1, self.norm2 = _norm(c), _norm(c)
        self.attn = MLAttention(c) if c.mla is not None else Attention(c)
        self.mlp = MoE.from_config(c) if c.is_moe_layer(layer) else MLP(c)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class MTPModule(nn.Module):
    """One multi-token prediction module of DeepSeek-V3 (§2.2, Figure 3; HF names ``enorm``, ``hnorm``,
    ``eh_proj``, the block, ``shared_head.norm``): it combines the previous depth's hidden state ``h`` with the
    embedding of the next token, ``eh_proj([enorm(emb); hnorm(h)])`` (2h → h), runs one more block and a final
    RMSNorm. The embedding and the output head are the main model's, passed in (shared, not parameters here).

    Order of the concatenation: the embedding first, as the released weights expect (vLLM's ``deepseek_mtp.py``
    loads them and computes ``eh_proj(cat([enorm(emb), hnorm(h)]))``); the report's eq. 21 writes the two halves the
    other way round. The parameter count is the same either way."""

    def __init__(self, c: ModelConfig, layer: int):
        super().__init__()
        self.hnorm, self.enorm, self.norm = _norm(c), _norm(c), _norm(c)
        self.eh_proj = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=False)
        self.block = Block(c, layer)

    def forward(self, h, next_embeddings):
        return self.norm(self.block(self.eh_proj(torch.cat([self.enorm(next_embeddings), self.hnorm(h)], -1))))


class TransformerLM(nn.Module):
    """Decoder-only language model: embeddings → blocks → final norm → LM head (maybe tied).

    With ``c.num_mtp_modules`` the model also holds DeepSeek-V3's multi-token prediction modules
    (``self.mtp``); ``forward`` returns the main logits only (:meth:`mtp_logits` gives module ``m``'s)."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.pos = nn.Embedding(c.max_seq_len, c.hidden_size) if c.arch == "gpt" else None
        self.blocks = nn.ModuleList(Block(c, i) for i in range(c.num_layers))
        self.norm = _norm(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tied_embeddings:
            self.lm_head.weight = self.embed.weight
        self.mtp = nn.ModuleList(MTPModule(c, c.num_layers + m) for m in range(c.num_mtp_modules))

    def hidden(self, tokens):
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, tokens):
        return self.lm_head(self.norm(self.hidden(tokens)))

    def mtp_logits(self, tokens):
        """Logits of every MTP depth: depth ``m`` (1-based) at position ``i`` predicts token ``i + m + 1`` from
        the depth ``m − 1`` state at ``i`` and the embedding of token ``i + m``; sequences shrink by one per
        depth. Returns a list of (batch, seq − m, vocab) tensors."""
        h, out = self.hidden(tokens), []
        for m, module in enumerate(self.mtp, start=1):
            h = module(h[:, :-1], self.embed(tokens[:, m:]))
            out.append(self.lm_head(h))
        return out
