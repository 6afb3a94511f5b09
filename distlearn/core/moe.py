"""The mixture-of-experts FFN as ``torch.nn`` modules: a router, routed experts, shared experts (chapter 11).

:class:`MoE` replaces the MLP of an MoE layer of :class:`distlearn.core.transformer.TransformerLM`; the real
expert-parallel lab (:mod:`distlearn.experts.lab`) runs the same module on one process as its reference. Shapes:
``x`` (..., hidden_size) → (..., hidden_size); inside, tokens are flattened to ``T`` rows.

Routing (:func:`route`), the same rules as the numpy simulation :func:`distlearn.experts.simulation.route` (a test checks
they agree):

- ``score="softmax"`` (Shazeer et al. 2017; Switch, Fedus et al. 2021; Mixtral, Jiang et al. 2024): probabilities
  ``p = softmax(x·Wᵀ)``, the k largest are chosen; ``normalize=True`` divides the chosen ones by their sum (Mixtral;
  Shazeer's ``Softmax(KeepTopK(·))`` without its noise; GShard's top-2 without its random dispatch of the second
  expert), ``False`` keeps them (Switch's top-1).
- ``score="sigmoid"`` (DeepSeek-AI 2024, DeepSeek-V3 eq. 13–16): affinities ``s = sigmoid(x·Wᵀ)``; the experts are
  chosen by ``s + b`` (``b`` = the selection bias of auxiliary-loss-free balancing, a buffer), the weights are the
  unbiased ``s`` of the chosen experts, normalized, times ``scale`` (2.5 in DeepSeek-V3). With ``num_groups > 1``
  (node-limited routing, §2.1.2) the experts form ``num_groups`` equal groups; a group scores the sum of its two
  largest ``s + b``, and only the best ``groups_per_token`` groups may be chosen from.
- Capacity (GShard, Lepikhin et al. 2020; Switch): an expert takes at most ``C = ceil(capacity_factor · k ·
  tokens_per_group / num_experts)`` assignments per group of ``tokens_per_group`` consecutive tokens (one group =
  one rank's tokens). Priority: every token's first choice, in token order, before any second choice, and so on
  (GShard Algorithm 1; DeepSpeed's ``top2gating``). A dropped assignment contributes nothing to the output (its
  weight is 0; the others keep theirs).

Experts are SwiGLU MLPs stored stacked (:class:`GroupedExperts`, as torchtitan does), so ``w_gate[e]`` is expert
``e``'s gate projection; an expert-parallel rank holds a slice of dim 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from distlearn.core.validate import array, check_bool, check_choice, check_divisible, check_int, check_number, checks

__all__ = ["TorchRouting", "route", "capacity", "GroupedExperts", "SwiGLU", "MoE"]


def capacity(capacity_factor: float, k: int, tokens: int, num_experts: int) -> int:
    """Assignments one expert takes per group: ``ceil(capacity_factor · k · tokens / num_experts)``. Raises
    DistlearnValueError for a non-positive factor or count."""
    check_number("capacity_factor", capacity_factor, minimum=0, strict_min=True)
    k, tokens = check_int("k", k), check_int("tokens", tokens)
    num_experts = check_int("num_experts", num_experts)
    return math.ceil(capacity_factor * k * tokens / num_experts)


@dataclass
class TorchRouting:
    """Where each of ``T`` tokens goes: ``index`` (T, k) expert ids, ``weights`` (T, k) gate values (0 where
    dropped), ``kept`` (T, k) bool, ``probs`` (T, E) the softmax probabilities or the normalized sigmoid affinities
    (what a load-balancing loss uses)."""

    index: torch.Tensor
    weights: torch.Tensor
    kept: torch.Tensor
    probs: torch.Tensor


def _limit_groups(sel: torch.Tensor, num_groups: int, groups_per_token: int) -> torch.Tensor:
    """Node-limited routing: keep the scores of the best ``groups_per_token`` of ``num_groups`` groups per token
    (a group scores the sum of its two largest entries), set the rest to -inf."""
    t, e = sel.shape
    grouped = sel.view(t, num_groups, e // num_groups)
    group_score = grouped.topk(min(2, e // num_groups), dim=-1).values.sum(-1)
    best = group_score.topk(groups_per_token, dim=-1).indices
    allowed = torch.zeros(t, num_groups, dtype=torch.bool, device=sel.device).scatter_(1, best, True)
    return grouped.masked_fill(~allowed.unsqueeze(-1), float("-inf")).view(t, e)


def _keep_within_capacity(index: torch.Tensor, num_experts: int, cap: int, tokens_per_group: int) -> torch.Tensor:
    """(T, k) bool: which assignments fit, choice-major then token order, per group of consecutive tokens."""
    t, k = index.shape
    kept = torch.zeros_like(index, dtype=torch.bool)
    for start in range(0, t, tokens_per_group):
        block = index[start:start + tokens_per_group]
        order = block.t().reshape(-1)                      # all first choices, then all second choices …
        one_hot = F.one_hot(order, num_experts)
        position = (one_hot.cumsum(0) - 1).gather(1, order[:, None]).squeeze(1)
        kept[start:start + tokens_per_group] = (position < cap).view(k, -1).t()
    return kept


@checks(logits=array("tokens experts", torch=True), bias=array("experts", torch=True))
def route(logits: torch.Tensor, k: int, *, score: str = "softmax", normalize: bool = True,
          bias: torch.Tensor | None = None, scale: float = 1.0, num_groups: int = 1, groups_per_token: int = 1,
          capacity_factor: float | None = None, tokens_per_group: int | None = None) -> TorchRouting:
    """Top-k routing of ``logits`` (T, E) with the rules of the module doc. Differentiable in ``weights``."""
    t, e = logits.shape
    k = check_int("k", k, minimum=1, maximum=e)
    normalize = check_bool("normalize", normalize)
    scale = check_number("scale", scale, minimum=0, strict_min=True)
    num_groups = check_int("num_groups", num_groups, minimum=1, maximum=e)
    groups_per_token = check_int("groups_per_token", groups_per_token, minimum=1, maximum=num_groups)
    if tokens_per_group is not None:
        tokens_per_group = check_int("tokens_per_group", tokens_per_group, minimum=1)
    if score == "softmax":
        probs = logits.softmax(-1)
        sel = probs
    elif score == "sigmoid":
        affinity = logits.sigmoid()
        probs = affinity / affinity.sum(-1, keepdim=True)
        sel = affinity if bias is None else affinity + bias
    else:
        check_choice("score", score, ("softmax", "sigmoid"))
    if num_groups > 1:
        check_divisible("num_experts", e, "num_groups", num_groups)
        sel = _limit_groups(sel.detach(), num_groups, groups_per_token)
    index = sel.detach().topk(k, dim=-1).indices
    base = probs if score == "softmax" else affinity
    weights = base.gather(1, index)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    weights = weights * scale
    kept = torch.ones_like(index, dtype=torch.bool)
    if capacity_factor is not None:
        group = t if tokens_per_group is None else tokens_per_group
        kept = _keep_within_capacity(index, e, capacity(capacity_factor, k, group, e), group)
        weights = weights * kept
    return TorchRouting(index, weights, kept, probs)


def _uniform_(t: torch.Tensor, fan_in: int) -> torch.Tensor:
    bound = 1 / math.sqrt(fan_in)
    return nn.init.uniform_(t, -bound, bound)   # nn.Linear's default range; a no-op on the meta device


class GroupedExperts(nn.Module):
    """``num_experts`` SwiGLU experts as three stacked weights (``nn.Linear`` layout, out × in):
    ``w_gate``, ``w_up`` (E, f, h) and ``w_down`` (E, h, f). Expert ``e`` maps rows ``x`` (n, h) to
    ``(silu(x·w_gate[e]ᵀ) ⊙ x·w_up[e]ᵀ)·w_down[e]ᵀ`` (n, h). Parameters: 3·E·h·f."""

    def __init__(self, num_experts: int, hidden_size: int, ffn_hidden_size: int):
        super().__init__()
        e, h, f = num_experts, hidden_size, ffn_hidden_size
        self.w_gate = nn.Parameter(_uniform_(torch.empty(e, f, h), h))
        self.w_up = nn.Parameter(_uniform_(torch.empty(e, f, h), h))
        self.w_down = nn.Parameter(_uniform_(torch.empty(e, h, f), f))

    @property
    def num_experts(self) -> int:
        return self.w_gate.shape[0]

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert ``e`` (a local index into this module's experts) on rows ``x`` (n, h)."""
        return (F.silu(x @ self.w_gate[e].t()) * (x @ self.w_up[e].t())) @ self.w_down[e].t()


class SwiGLU(nn.Module):
    """The shared experts of an MoE layer: one SwiGLU MLP of width ``num_shared · expert_ffn`` (as DeepSeek
    builds it), parameter names ``gate_proj``, ``up_proj``, ``down_proj``."""

    def __init__(self, hidden_size: int, ffn_hidden_size: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, ffn_hidden_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, ffn_hidden_size, bias=False)
        self.down_proj = nn.Linear(ffn_hidden_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    """The FFN of an MoE layer: router ``gate`` (Linear h → E, no bias), :class:`GroupedExperts`, and
    :class:`SwiGLU` shared experts when ``num_shared_experts > 0``. ``expert_bias`` (E,) is the selection bias of
    auxiliary-loss-free balancing (a buffer: updated by a rule, not by gradients; used only with the sigmoid
    router).

    ``forward(x, capacity_factor=None, tokens_per_group=None)``: route, run every expert on the rows sent to it,
    add ``weight × expert output`` to those rows, add the shared experts. Routing options (module doc) are
    attributes: ``score``, ``normalize``, ``scale``, ``num_groups``, ``groups_per_token``; the defaults follow
    ``config.router`` (softmax: Mixtral; sigmoid: DeepSeek-V3 without its 2.5 scale and 8 groups, which
    :func:`distlearn.experts.simulation.router_spec` gives)."""

    def __init__(self, num_experts: int, experts_per_token: int, hidden_size: int, expert_ffn_hidden_size: int,
                 num_shared_experts: int = 0, router: str = "softmax"):
        super().__init__()
        self.k = experts_per_token
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = GroupedExperts(num_experts, hidden_size, expert_ffn_hidden_size)
        self.shared_experts = (SwiGLU(hidden_size, num_shared_experts * expert_ffn_hidden_size)
                               if num_shared_experts else None)
        self.score, self.normalize, self.scale, self.num_groups, self.groups_per_token = router, True, 1.0, 1, 1
        self.register_buffer("expert_bias", torch.zeros(num_experts))

    @classmethod
    def from_config(cls, c) -> "MoE":
        """The MoE FFN of an MoE layer of ``c`` (a :class:`distlearn.core.models.ModelConfig`)."""
        return cls(c.num_experts, c.experts_per_token, c.hidden_size, c.expert_ffn, c.num_shared_experts, c.router)

    def route(self, x: torch.Tensor, capacity_factor: float | None = None,
              tokens_per_group: int | None = None) -> TorchRouting:
        """Routing of rows ``x`` (T, h)."""
        return route(self.gate(x), self.k, score=self.score, normalize=self.normalize,
                     bias=self.expert_bias if self.score == "sigmoid" else None, scale=self.scale,
                     num_groups=self.num_groups, groups_per_token=self.groups_per_token,
                     capacity_factor=capacity_factor, tokens_per_group=tokens_per_group)

    def forward(self, x: torch.Tensor, capacity_factor: float | None = None,
                tokens_per_group: int | None = None) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        r = self.route(x, capacity_factor, tokens_per_group)
        y = torch.zeros_like(x)
        for e in range(self.experts.num_experts):
            rows, slot = torch.where((r.index == e) & r.kept)
            if len(rows):
                y = y.index_add(0, rows, r.weights[rows, slot, None] * self.experts.expert(e, x[rows]))
        if self.shared_experts is not None:
            y = y + self.shared_experts(x)
        return y.reshape(shape)
