"""A real KV cache, built with torch on the CPU, for the course's transformer (:mod:`distlearn.core.transformer`).

:func:`generate` runs a :class:`~distlearn.core.transformer.TransformerLM` the way a generator does: one **prefill**
over the prompt, which fills the cache, then one **decode** step per new token, which attends over the cache and
appends one entry. What a layer caches is what an inference engine keeps:

- grouped-query attention (:class:`~distlearn.core.transformer.Attention`): the keys and values of the ``kv_heads``
  heads, two tensors of shape (batch, kv_heads, tokens, head_dim) per layer (the repeat to all query heads is done
  when attending, never stored);
- multi-head latent attention (:class:`~distlearn.core.transformer.MLAttention`): the output of
  ``kv_a_proj_with_mqa``, one tensor (batch, tokens, kv_lora_rank + qk_rope_head_dim) per layer — the compressed
  latent and the shared rotary key; each step rebuilds every head's key and value from it with ``kv_b_proj``
  (DeepSeek-V2 §2.1.2; an engine would absorb ``kv_b_proj`` into the query and output projections instead, which
  changes the arithmetic, not what is cached).

The logits of every step equal those of one full forward over the whole sequence (``TransformerLM.forward``), which
:func:`generate` reports, so the cache is a working one; its bytes are counted from the tensors themselves
(``numel · element_size``) and compared with :func:`distlearn.post_training.generation.kv_bytes`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from distlearn.core.validate import DistlearnValueError, check_int


class KVCache:
    """Per layer, the cached tensors (a list of tensors; the sequence axis grows by one entry per token).
    :meth:`nbytes` counts the bytes actually held."""

    def __init__(self, num_layers: int):
        self.layers: list[list[torch.Tensor]] = [[] for _ in range(num_layers)]

    def tokens(self) -> int:
        """Tokens cached so far (0 before the prefill)."""
        first = self.layers[0]
        if not first:
            return 0
        return first[0].shape[2] if first[0].dim() == 4 else first[0].shape[1]

    def nbytes(self) -> int:
        """Bytes held by every cached tensor: ``Σ numel · element_size``."""
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer)

    def shapes(self) -> list[tuple[int, ...]]:
        """The shapes of layer 0's cached tensors (every layer holds the same)."""
        return [tuple(t.shape) for t in self.layers[0]]


def _mask(new: int, total: int, device) -> torch.Tensor:
    """Causal mask for ``new`` queries at the end of ``total`` positions: query i sees keys 0 … total − new + i."""
    q = torch.arange(total - new, total, device=device)[:, None]
    return torch.arange(total, device=device)[None, :] <= q


def _gqa(attn, x, store: list, total: int):
    b, s, _ = x.shape
    k = attn.k(x).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)
    v = attn.v(x).view(b, s, attn.n_kv, attn.head_dim).transpose(1, 2)
    if store:
        k, v = torch.cat([store[0], k], dim=2), torch.cat([store[1], v], dim=2)
    store[:] = [k, v]
    q = attn.q(x).view(b, s, attn.n_heads, attn.head_dim).transpose(1, 2)
    rep = attn.n_heads // attn.n_kv
    if rep > 1:  # repeated for the product only, never stored / 只为计算而复制，不存入缓存
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=_mask(s, total, x.device))
    return attn.o(y.transpose(1, 2).reshape(b, s, -1))


def _mla(attn, x, store: list, total: int):
    b, s, _ = x.shape
    m, n = attn.m, attn.n_heads
    entry = attn.kv_a_proj_with_mqa(x)                                  # (b, s, kv_lora_rank + rope)
    if store:
        entry = torch.cat([store[0], entry], dim=1)
    store[:] = [entry]
    q = attn.q_proj(x) if m.q_lora_rank is None else attn.q_b_proj(attn.q_a_layernorm(attn.q_a_proj(x)))
    q = q.view(b, s, n, m.qk_head_dim).transpose(1, 2)
    latent, k_rope = entry.split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
    kv = attn.kv_b_proj(attn.kv_a_layernorm(latent)).view(b, total, n, m.qk_nope_head_dim + m.v_head_dim)
    k_nope, v = kv.transpose(1, 2).split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
    k = torch.cat([k_nope, k_rope.unsqueeze(1).expand(b, n, total, m.qk_rope_head_dim)], dim=-1)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=_mask(s, total, x.device))
    return attn.o_proj(y.transpose(1, 2).reshape(b, s, n * m.v_head_dim))


def _forward_cached(model, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits (batch, new, vocab) of ``tokens`` (batch, new), which follow the ``cache.tokens()`` tokens already
    cached; appends their keys and values (or latents) to ``cache``."""
    start, new = cache.tokens(), tokens.shape[1]
    total = start + new
    x = model.embed(tokens)
    if model.pos is not None:
        x = x + model.pos(torch.arange(start, total, device=tokens.device))
    for block, store in zip(model.blocks, cache.layers):
        attend = _mla if model.config.mla is not None else _gqa
        x = x + attend(block.attn, block.norm1(x), store, total)
        x = x + block.mlp(block.norm2(x))
    return model.lm_head(model.norm(x))


@dataclass(frozen=True)
class CachedRun:
    """What :func:`generate` returns: the ``tokens`` (batch, prompt + new), the ``cache`` after the last step, its
    ``cache_bytes`` (measured), ``max_diff``: the largest |logit difference| between the cached steps and one full
    forward over the same tokens, and ``dtype`` of the cache."""

    tokens: torch.Tensor
    cache: KVCache
    cache_bytes: int
    max_diff: float
    dtype: torch.dtype


@torch.no_grad()
def generate(model, prompt: torch.Tensor, new_tokens: int = 4) -> CachedRun:
    """Greedy generation of ``new_tokens`` tokens after ``prompt`` (batch, prompt_len, int64) with a KV cache:
    one prefill, then one decode step per token. The cache ends holding ``prompt_len + new_tokens − 1`` tokens
    (the last token generated is not fed back). Raises DistlearnValueError for a model that is not a course
    ``TransformerLM``, a prompt that is not a 2-D integer tensor, or a length beyond the model's ``max_seq_len``."""
    from distlearn.core.transformer import TransformerLM

    if not isinstance(model, TransformerLM):
        raise DistlearnValueError("model", "model must be a distlearn TransformerLM (build_model(config, 'cpu')).",
                                  "model 必须是 distlearn 的 TransformerLM（build_model(config, 'cpu')）。")
    if not (isinstance(prompt, torch.Tensor) and prompt.dim() == 2 and not prompt.dtype.is_floating_point
            and prompt.numel() > 0):
        raise DistlearnValueError("prompt", "prompt must be a non-empty (batch, length) tensor of token ids.",
                                  "prompt 必须是非空的 (batch, length) 词元编号张量。")
    n = check_int("new_tokens", new_tokens, minimum=1, maximum=4096)
    if prompt.shape[1] + n > model.config.max_seq_len:
        raise DistlearnValueError("new_tokens", f"prompt + new_tokens exceeds max_seq_len {model.config.max_seq_len}.",
                                  f"prompt + new_tokens 超过了 max_seq_len {model.config.max_seq_len}。")
    cache = KVCache(len(model.blocks))
    logits = [_forward_cached(model, prompt, cache)]             # prefill / 预填充
    tokens = torch.cat([prompt, logits[-1][:, -1:].argmax(-1)], dim=1)
    for _ in range(n - 1):                                      # decode, one token a step / 解码，每步一个词元
        logits.append(_forward_cached(model, tokens[:, -1:], cache))
        tokens = torch.cat([tokens, logits[-1][:, -1:].argmax(-1)], dim=1)
    full = model(tokens[:, :-1])
    diff = (torch.cat(logits, dim=1).float() - full.float()).abs().max().item()
    return CachedRun(tokens, cache, cache.nbytes(), diff, cache.layers[0][0].dtype)
