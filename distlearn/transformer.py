"""The readable decoder-only transformer of :mod:`distlearn.models`, as ordinary ``torch.nn`` modules.

This module imports torch; :mod:`distlearn.models` (configs, closed-form counts) does not, and re-exports these
classes lazily: ``from distlearn.models import TransformerLM`` imports torch only then. The classes are top-level,
so they pickle, show in ``help()`` and ``inspect.getsource`` finds them.

Shapes: ``tokens`` (batch, seq) int64 → logits (batch, seq, vocab_size); inside a block (batch, seq, hidden_size).
Architectures (``ModelConfig.arch``): ``"gpt"`` = learned positions, LayerNorm with bias, biased linears, GELU MLP
(Radford et al. 2019); ``"llama"`` = RMSNorm, no biases, SwiGLU MLP, grouped-query attention (Touvron et al. 2023).
Rotary position embeddings have no parameters and are left out (parameter counts and memory are what the course
measures with these modules).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .models import ModelConfig

__all__ = ["RMSNorm", "Attention", "MLP", "Block", "TransformerLM"]


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
    """Pre-norm block: x + attn(norm1(x)), then + mlp(norm2(·)); the residual always adds to the un-normed x."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = _norm(c), Attention(c), _norm(c), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TransformerLM(nn.Module):
    """Decoder-only language model: embeddings → blocks → final norm → LM head (maybe tied)."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.pos = nn.Embedding(c.max_seq_len, c.hidden_size) if c.arch == "gpt" else None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.num_layers))
        self.norm = _norm(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tied_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))
