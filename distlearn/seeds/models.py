"""The seed's ``LargeLM`` (seed B, snippet 8) and its block as ordinary ``torch.nn`` modules, bug kept beside the fix.

Imports torch; :mod:`distlearn.seeds.functions` re-exports these classes lazily (``from distlearn.seeds.functions import LargeLM``) and
builds the model with :func:`distlearn.seeds.functions.build_large_lm`. Shapes: ``input_ids`` (batch, seq) int64 → logits
(batch, seq, vocab_size). Parameter count in closed form: :func:`distlearn.seeds.functions.large_lm_parameters`.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["SeedTransformerBlock", "TransformerBlock", "LargeLM"]


class SeedTransformerBlock(nn.Module):
    """The seed's block, bug kept: the second residual adds to the *normalized* tensor, and attention expects
    (seq, batch, d) inputs (``batch_first=False``) while the model feeds (batch, seq, d), with no causal mask."""

    def __init__(self, d_model, nhead, dim_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, nhead)
        self.ffn = nn.Sequential(nn.Linear(d_model, dim_ff), nn.GELU(), nn.Linear(dim_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x):
        h = self.norm1(x)
        h = x + self.attn(h, h, h)[0]
        h = self.norm2(h)          # overwrites the residual stream with its normalized version ...
        h = h + self.ffn(h)        # ... so this residual adds to norm2(h), not to the stream
        return h


class TransformerBlock(nn.Module):
    """The fixed pre-LN block: ``x = x + attn(norm1(x))``; ``x = x + ffn(norm2(x))``. Same parameters as the
    seed's; inputs are (batch, seq, d) and attention is causally masked."""

    def __init__(self, d_model, nhead, dim_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, dim_ff), nn.GELU(), nn.Linear(dim_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x):
        s = x.shape[1]
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)  # True = may not attend
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


class LargeLM(nn.Module):
    """The seed's ``LargeLM`` (embedding → blocks → LM head with bias). ``fixed=False`` keeps the seed's block."""

    def __init__(self, vocab_size, d_model, n_layers, nhead, dim_ff, fixed=True):
        super().__init__()
        block = TransformerBlock if fixed else SeedTransformerBlock
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([block(d_model, nhead, dim_ff) for _ in range(n_layers)])
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, input_ids):
        h = self.embedding(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(h)
