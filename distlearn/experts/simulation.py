"""Mixture of experts and expert parallelism, simulated with numpy (chapter 11).

Routing
-------
A router scores each of ``T`` tokens against ``E`` experts (``logits`` (T, E) = x·Wᵀ) and sends the token to
``k`` of them (:func:`route`, rules shared with the torch module :func:`distlearn.core.moe.route`):

- ``score="softmax"``: ``p = softmax(logits)``; the k largest are chosen. ``normalize=True`` divides the chosen
  probabilities by their sum, as Mixtral does (Jiang et al. 2024: ``Softmax(TopK(x·W_g))``) and GShard's top-2
  (Lepikhin et al. 2020, Algorithm 1); ``False`` keeps them, as Switch's top-1 (Fedus et al. 2021, eq. 2). The
  noisy top-k gating of Shazeer et al. 2017 (eq. 3–5: ``Softmax(KeepTopK(H(x), k))``, the same renormalized
  weights) adds Gaussian noise of learned scale to the logits first, and GShard dispatches the second expert only
  with probability ``min(1, 2·g₂)`` ("random routing", §2.2); both are left out here (the second expert is always
  used, as in DeepSpeed's ``top2gating`` with ``top2_2nd_expert_sampling=False`` and in Mixtral).
- ``score="sigmoid"``: DeepSeek-V3 (DeepSeek-AI 2024, eq. 13–16): affinities ``s = sigmoid(logits)``, the experts
  are chosen by ``s + b`` (``bias``: auxiliary-loss-free balancing, below) but weighted by the unbiased ``s``,
  normalized over the chosen ones and multiplied by ``scale`` (2.5). ``num_groups`` / ``groups_per_token``:
  node-limited routing (§2.1.2): experts are split into equal groups (one per node), a group scores the sum of its
  two largest ``s + b`` (the highest K_r/M = 8/4 of §2.1.2; the released inference code adds the bias before
  scoring the groups), and a token may only use its best ``groups_per_token``
  groups (8 groups, 4 per token in DeepSeek-V3), which bounds the nodes its all-to-all reaches.

Capacity and dropped tokens (GShard §2.2; Switch §2.2, eq. 3): per group of ``tokens_per_group`` consecutive
tokens (one rank's batch), expert ``e`` takes at most ``C = ceil(capacity_factor · k · tokens_per_group / E)``
assignments (DeepSpeed's ``_capacity`` with ``capacity_factor · k``). ``priority="choice"``: all first choices, in
token order, before any second choice (GShard Algorithm 1, DeepSpeed ``top2gating``); ``priority="token"``: token
order, all of a token's choices together (DeepSpeed ``topkgating(drop_policy="position")``). An assignment past
``C`` is *dropped*: it contributes nothing, so a token whose every choice is dropped leaves the layer through the
residual connection alone. ``renormalize_kept=True`` divides the kept weights by their sum (DeepSpeed does);
``False`` (GShard, Megatron-LM) leaves them.

Load balance. The auxiliary loss (:func:`aux_loss`) is Switch's ``N·Σᵢ fᵢ·Pᵢ`` (Fedus et al. 2021, eq. 4–6): ``fᵢ``
the fraction of assignments routed to expert ``i``, ``Pᵢ`` the mean router probability of expert ``i``; it is 1
when both are uniform and ``N`` when every token goes to one expert. DeepSeek-V3 instead adds a bias ``bᵢ`` to the
selection scores and, after every step, moves it by ``±γ`` against the sign of the expert's excess load
(:func:`update_bias`, §2.1.2): overloaded experts become less likely to be chosen without any gradient.

Expert parallelism (GShard; Switch §5.4): experts are split into ``ep`` contiguous blocks, one per rank.
Dispatch: each rank sends every kept assignment's token row to the rank holding its expert (an all-to-all with
*variable* split sizes, exchanged first: :func:`split_sizes`); the experts compute; combine: the outputs travel
back by the reverse all-to-all and are added, weighted, to their tokens (:func:`simulate_expert_parallel`).

Units: bytes, FLOPs, seconds; GB = 1e9 bytes, GiB = 2**30 bytes.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from distlearn.core.records import GPU
from distlearn.core.validate import (MAX_ELEMENTS, DistlearnValueError, array, check_array, check_bool, check_choice,
                                     check_elements, check_int, check_number, check_seed, checks, each, record)

SCORES = ("softmax", "sigmoid")
MAX_EXPERTS = 4096  # experts per layer this course simulates (DeepSeek-V3 has 256): caps the per-expert arrays
PRIORITIES = ("choice", "token")


# ---------------------------------------------------------------- router settings of the presets
@dataclass(frozen=True)
class RouterSpec:
    """How a model routes: ``score``, ``k``, ``normalize``, ``scale``, ``num_groups``, ``groups_per_token``."""

    score: str
    k: int
    normalize: bool = True
    scale: float = 1.0
    num_groups: int = 1
    groups_per_token: int = 1

    def __post_init__(self):
        """Each field as :func:`route` takes it: ``score`` in :data:`SCORES`, ``k`` and ``num_groups`` whole numbers
        ≥ 1 (≤ :data:`MAX_EXPERTS`), ``normalize`` a bool, ``scale`` > 0, ``groups_per_token`` in [1, num_groups].
        Raises DistlearnValueError naming the field."""
        check_choice("score", self.score, SCORES)
        check_int("k", self.k, minimum=1, maximum=MAX_EXPERTS)
        check_bool("normalize", self.normalize)
        check_number("scale", self.scale, minimum=0, strict_min=True)
        check_int("num_groups", self.num_groups, minimum=1, maximum=MAX_EXPERTS)
        check_int("groups_per_token", self.groups_per_token, minimum=1, maximum=self.num_groups)

    def kwargs(self) -> dict:
        """Keyword arguments of :func:`route` for this spec (``k`` excluded)."""
        return dict(score=self.score, normalize=self.normalize, scale=self.scale, num_groups=self.num_groups,
                    groups_per_token=self.groups_per_token)


def router_spec(config) -> RouterSpec:
    """The routing of an MoE :class:`~distlearn.core.models.ModelConfig`. DeepSeek-V3 (HF config: ``scoring_func``
    sigmoid, ``norm_topk_prob`` true, ``routed_scaling_factor`` 2.5, ``n_group`` 8, ``topk_group`` 4); otherwise
    the config's ``router`` with normalization and no groups (Mixtral: softmax, top-2, renormalized)."""
    if not getattr(config, "is_moe", False):
        raise DistlearnValueError("config", f"{getattr(config, 'name', config)!r} is not a mixture-of-experts model.",
                                  f"{getattr(config, 'name', config)!r} 不是混合专家 (MoE) 模型。")
    if config.name == "deepseek-v3":
        return RouterSpec("sigmoid", config.experts_per_token, True, 2.5, 8, 4)
    return RouterSpec(config.router, config.experts_per_token)


# ---------------------------------------------------------------- synthetic router inputs
def router_logits(num_tokens: int, num_experts: int, *, skew: float = 0.0, seed: int = 0) -> np.ndarray:
    """Synthetic router logits (num_tokens, num_experts): ``z − skew·ln(e + 1)`` with ``z`` standard normal.

    ``skew = 0``: every expert equally likely; ``skew > 0`` favours low-numbered experts (under softmax the prior
    odds of expert ``e`` against expert 0 are ``(e + 1)^(−skew)``, a Zipf law), the kind of imbalance an untrained
    or collapsing router shows. Deterministic for a given ``seed``."""
    t = check_int("num_tokens", num_tokens, minimum=1)
    e = check_int("num_experts", num_experts, minimum=1)
    skew = check_number("skew", skew, minimum=0)
    check_elements("num_tokens × num_experts", t * e)
    return _standard_normal(t, e, check_seed("seed", seed)) - skew * np.log(np.arange(1, e + 1))


@functools.lru_cache(maxsize=4)
def _standard_normal(t: int, e: int, seed: int) -> np.ndarray:
    """The (t, e) standard-normal draw of ``seed``, read-only: drawn once per shape (an explorer moving any slider
    but E reuses it; 1M draws cost ~14 ms on 2 cores)."""
    z = np.random.default_rng(seed).standard_normal((t, e))
    z.flags.writeable = False
    return z


# ---------------------------------------------------------------- routing
@dataclass
class Routing:
    """Where ``T`` tokens go.

    ``index`` (T, k) int: the chosen experts, best first; ``weights`` (T, k): gate values (0 where dropped);
    ``kept`` (T, k) bool; ``probs`` (T, E): softmax probabilities or normalized sigmoid affinities (what the
    load-balancing loss uses); ``capacity``: per expert per group (None = unlimited); ``tokens_per_group``."""

    index: np.ndarray
    weights: np.ndarray
    kept: np.ndarray
    probs: np.ndarray
    capacity: int | None
    tokens_per_group: int

    @property
    def num_tokens(self) -> int:
        return self.index.shape[0]

    @property
    def k(self) -> int:
        return self.index.shape[1]

    @property
    def num_experts(self) -> int:
        return self.probs.shape[1]

    @property
    def load(self) -> np.ndarray:
        """(E,) assignments each expert was chosen for (before capacity)."""
        return np.bincount(self.index.ravel(), minlength=self.num_experts)

    @property
    def kept_load(self) -> np.ndarray:
        """(E,) assignments each expert actually processes."""
        return np.bincount(self.index[self.kept], minlength=self.num_experts)

    @property
    def dropped(self) -> int:
        """Assignments dropped by the capacity limit."""
        return int((~self.kept).sum())

    @property
    def dropped_tokens(self) -> int:
        """Tokens all of whose k assignments were dropped (they skip the layer: residual only)."""
        return int((~self.kept.any(axis=1)).sum())


def capacity(capacity_factor: float, k: int, tokens: int, num_experts: int, min_capacity: int = 0) -> int:
    """Expert capacity ``max(ceil(capacity_factor · k · tokens / num_experts), min_capacity)`` (Switch eq. 3 with
    k assignments per token; DeepSpeed ``_capacity``). Example: 1.25 · 2 · 4096 / 8 = 1280."""
    check_number("capacity_factor", capacity_factor, minimum=0, strict_min=True)
    k, tokens = check_int("k", k), check_int("tokens", tokens)
    num_experts = check_int("num_experts", num_experts)
    min_capacity = check_int("min_capacity", min_capacity, minimum=0)
    return max(math.ceil(capacity_factor * k * tokens / num_experts), min_capacity)


def _no_nan(name: str, scores: np.ndarray) -> None:
    """DistlearnValueError if ``scores`` holds NaN (−inf is a valid score: an expert ruled out by
    :func:`limit_groups`)."""
    if np.isnan(scores).any():
        raise DistlearnValueError(name, f"{name} must hold numbers (−inf allowed), not NaN.",
                                  f"{name} 必须是数值（可以是 −inf），不能是 NaN。")


class _Scores(array):
    """A (T, E) array of scores: −inf allowed (an expert ruled out), NaN refused (:func:`_no_nan`)."""

    def __init__(self):
        super().__init__("tokens experts", finite=False)

    def check(self, name, value, dims):
        super().check(name, value, dims)
        _no_nan(name, np.asarray(value, dtype=float))


SCORES_ARRAY = _Scores()


@checks(scores=SCORES_ARRAY)
def limit_groups(scores: np.ndarray, num_groups: int, groups_per_token: int) -> np.ndarray:
    """Node-limited routing (DeepSeek-V3 §2.1.2): scores (T, E) with every expert outside each token's best
    ``groups_per_token`` groups set to −inf; a group (E / num_groups consecutive experts) scores the sum of its
    two largest scores. Raises DistlearnValueError for scores that are not a (T, E) array without NaN, or a
    ``num_groups`` that does not divide E."""
    t, e = scores.shape
    check_int("num_groups", num_groups, minimum=1)
    check_int("groups_per_token", groups_per_token, minimum=1, maximum=num_groups)
    if e % num_groups:
        raise DistlearnValueError("num_groups", f"num_groups = {num_groups} must divide the {e} experts.",
                                  f"num_groups = {num_groups} 必须整除专家数 {e}。")
    size = e // num_groups
    g = scores.reshape(t, num_groups, size)
    top2 = g.max(axis=2) if size == 1 else np.partition(g, size - 2, axis=2)[:, :, -2:].sum(axis=2)  # 2 largest
    best = np.argsort(-top2, axis=1, kind="stable")[:, :groups_per_token]
    allowed = np.zeros((t, num_groups), dtype=bool)
    np.put_along_axis(allowed, best, True, axis=1)
    return np.where(allowed[:, :, None], g, -np.inf).reshape(t, e)


@checks(scores=SCORES_ARRAY)
def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """(T, k) int: each row's k largest ``scores`` (T, E), best first, ties to the lower expert index — exactly
    ``np.argsort(-scores, axis=1, kind="stable")[:, :k]``, in O(T·E) instead of a full sort: a partition finds
    each row's k best, a sort orders just those; a row with a tie at the k-th place takes the full stable sort.
    Raises DistlearnValueError for scores that are not a (T, E) array without NaN (−inf allowed), or k not in
    [1, E]."""
    e = scores.shape[1]
    k = check_int("k", k, minimum=1, maximum=e)
    if k >= e:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    part = np.argpartition(scores, e - k, axis=1)[:, e - k:]      # the k largest, in no particular order
    vals = np.take_along_axis(scores, part, axis=1)
    index = np.take_along_axis(part, np.lexsort((part, -vals), axis=1), axis=1)  # by score, then by index
    tied = (scores >= vals.min(axis=1, keepdims=True)).sum(axis=1) > k
    tied |= np.isnan(vals).any(axis=1)  # argpartition ranks NaN highest, the stable sort of −scores last
    if tied.any():
        index[tied] = np.argsort(-scores[tied], axis=1, kind="stable")[:, :k]
    return index


def _sigmoid(x):
    y = np.negative(x)                                            # 1 / (1 + exp(-x)), in one buffer
    np.exp(y, out=y)
    y += 1.0
    return np.reciprocal(y, out=y)


def _softmax(x):
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@checks(index=array("tokens k", min_size=0))
def keep_within_capacity(index: np.ndarray, num_experts: int, cap: int, tokens_per_group: int,
                         priority: str = "choice") -> np.ndarray:
    """(T, k) bool: the assignments that fit in ``cap`` per expert per group (``priority`` as in the module doc).

    In each group the assignments are put in priority order; an assignment's position is how many earlier ones
    chose the same expert (a stable sort by expert gives it without a (T·k, E) one-hot matrix). Raises
    DistlearnValueError for an ``index`` that is not a (T, k) array of experts in [0, num_experts − 1]."""
    num_experts = check_int("num_experts", num_experts, maximum=MAX_EXPERTS)
    index = np.asarray(index)
    if index.size and (index.dtype.kind not in "iu" or index.min() < 0 or index.max() >= num_experts):
        raise DistlearnValueError("index", f"index must hold expert numbers in [0, {num_experts - 1}].",
                                  f"index 必须是 [0, {num_experts - 1}] 内的专家编号。")
    cap = check_int("cap", cap, minimum=0)
    tokens_per_group = check_int("tokens_per_group", tokens_per_group)
    check_choice("priority", priority, PRIORITIES)
    t, k = index.shape
    kept = np.zeros((t, k), dtype=bool)
    for start in range(0, t, tokens_per_group):
        block = index[start:start + tokens_per_group]
        order = block.T.ravel() if priority == "choice" else block.ravel()
        by_expert = np.argsort(order, kind="stable")
        sorted_experts = order[by_expert]
        position = np.empty(len(order), dtype=np.int64)
        position[by_expert] = np.arange(len(order)) - np.searchsorted(sorted_experts, sorted_experts, side="left")
        fits = position < cap
        kept[start:start + tokens_per_group] = fits.reshape(k, -1).T if priority == "choice" else fits.reshape(-1, k)
    return kept


def route(logits, k: int, *, score: str = "softmax", normalize: bool = True, bias=None, scale: float = 1.0,
          num_groups: int = 1, groups_per_token: int = 1, capacity_factor: float | None = None,
          tokens_per_group: int | None = None, priority: str = "choice", renormalize_kept: bool = False,
          min_capacity: int = 0) -> Routing:
    """Top-k routing of ``logits`` (T, E) with optional capacity; the rules are in the module doc.

    ``k`` in [1, E]; ``bias`` (E,) selection bias (``score="sigmoid"`` only, else an error); ``capacity_factor``
    > 0 or None (no limit);
    ``tokens_per_group`` divides the tokens into capacity groups (default: one group). Raises
    DistlearnValueError for bad arguments."""
    logits = check_array("logits", logits)  # finite numbers: a NaN logit would be routed silently
    if logits.ndim != 2:
        raise DistlearnValueError("logits", f"logits must be 2-D (tokens, experts), got shape {logits.shape}.",
                                  f"logits 必须是二维的（词元，专家），收到形状 {logits.shape}。")
    t, e = logits.shape
    k = check_int("k", k, minimum=1, maximum=e)
    check_choice("score", score, SCORES)
    check_choice("priority", priority, PRIORITIES)
    group = t if tokens_per_group is None else check_int("tokens_per_group", tokens_per_group, minimum=1)
    normalize, renormalize_kept = check_bool("normalize", normalize), check_bool("renormalize_kept", renormalize_kept)
    scale = check_number("scale", scale, minimum=0, strict_min=True)
    num_groups = check_int("num_groups", num_groups, minimum=1, maximum=e)
    groups_per_token = check_int("groups_per_token", groups_per_token, minimum=1, maximum=num_groups)
    min_capacity = check_int("min_capacity", min_capacity, minimum=0)
    if bias is not None:
        if score != "sigmoid":
            raise DistlearnValueError("bias", "a selection bias is used only with score='sigmoid' (DeepSeek-V3).",
                                      "选择偏置只用于 score='sigmoid'（DeepSeek-V3）。")
        bias = np.asarray(bias, dtype=float)
        if bias.shape != (e,):
            raise DistlearnValueError("bias", f"bias must have shape ({e},) (one value per expert), got {bias.shape}.",
                                      f"bias 的形状必须是 ({e},)（每个专家一个值），收到 {bias.shape}。")
    if score == "softmax":
        probs = base = sel = _softmax(logits)
    else:
        base = _sigmoid(logits)
        probs = base / base.sum(axis=1, keepdims=True)
        sel = base if bias is None else base + bias
    if num_groups > 1:
        if k > groups_per_token * (e // num_groups):
            raise DistlearnValueError(
                "k", f"k = {k} experts cannot come from {groups_per_token} groups of {e // num_groups} experts.",
                f"k = {k} 个专家无法从 {groups_per_token} 组（每组 {e // num_groups} 个专家）中选出。")
        sel = limit_groups.unchecked(sel, num_groups, groups_per_token)  # checked above / 参数已检查
    index = top_k.unchecked(sel, k)
    weights = np.take_along_axis(base, index, axis=1)
    if normalize:
        weights = weights / weights.sum(axis=1, keepdims=True)
    weights = weights * scale
    kept, cap = np.ones((t, k), dtype=bool), None
    if capacity_factor is not None:
        cap = capacity(capacity_factor, k, group, e, min_capacity)
        kept = keep_within_capacity.unchecked(index, e, cap, group, priority)
        weights = weights * kept
        if renormalize_kept:
            total = weights.sum(axis=1, keepdims=True)
            weights = np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)
    return Routing(index, weights, kept, probs, cap, group)


def reference_route(logits, k: int, capacity_factor: float | None = None) -> tuple[list, list, list]:
    """Softmax top-k routing with capacity written as plain loops, to read beside :func:`route`.

    Returns ``(experts, weights, kept)``: for every token a list of its k experts (best first), their weights
    (softmax probabilities renormalized over the k; 0 when dropped) and whether each assignment fits."""
    logits = np.asarray(logits, dtype=float)
    num_tokens, num_experts = logits.shape
    experts, weights, kept = [], [], []
    # 1. every token picks its k best experts
    # 1. 每个词元选出概率最高的 k 个专家
    for t in range(num_tokens):
        p = np.exp(logits[t] - logits[t].max())
        p = p / p.sum()
        best = sorted(range(num_experts), key=lambda e: -p[e])[:k]
        total = sum(p[e] for e in best)
        experts.append(best)
        weights.append([p[e] / total for e in best])
        kept.append([True] * k)
    # 2. each expert takes at most C of them: all first choices first, then second choices, … in token order
    # 2. 每个专家最多接收 C 个：先处理所有词元的第一选择，再处理第二选择……按词元顺序
    if capacity_factor is not None:
        cap = math.ceil(capacity_factor * k * num_tokens / num_experts)
        taken = [0] * num_experts
        for choice in range(k):
            for t in range(num_tokens):
                e = experts[t][choice]
                if taken[e] < cap:
                    taken[e] += 1
                else:  # full: this assignment is dropped / 已满：这次分配被丢弃
                    kept[t][choice] = False
                    weights[t][choice] = 0.0
    return experts, weights, kept


def _checked_reference(loops):
    """:func:`reference_route` with its arguments checked at the boundary (issue 33). A wrapper, not lines in the
    loops, so that the listing chapter 11 prints (``inspect.getsource`` follows ``__wrapped__``) stays the plain
    loops it teaches."""
    @functools.wraps(loops)
    def checked(logits, k, capacity_factor=None):
        shape = check_array("logits", logits).shape  # finite numbers: a NaN logit would be routed silently
        if len(shape) != 2:
            raise DistlearnValueError("logits", f"logits must be 2-D (tokens, experts), got shape {shape}.",
                                      f"logits 必须是二维的（词元，专家），收到形状 {shape}。")
        k = check_int("k", k, minimum=1, maximum=shape[1])
        if capacity_factor is not None:
            capacity_factor = check_number("capacity_factor", capacity_factor, minimum=0, strict_min=True)
        return loops(logits, k, capacity_factor)
    return checked


reference_route = _checked_reference(reference_route)


# ---------------------------------------------------------------- the experts and the layer
ROUTING = record(Routing, "route(logits, k=2)")


@dataclass
class MoEWeights:
    """Weights of one MoE layer in ``nn.Linear`` layout (out × in), numpy float64: ``router`` (E, h);
    ``w_gate``, ``w_up`` (E, f, h); ``w_down`` (E, h, f); optional shared SwiGLU ``shared_gate``, ``shared_up``
    (f_s, h) and ``shared_down`` (h, f_s)."""

    router: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray
    shared_gate: np.ndarray | None = None
    shared_up: np.ndarray | None = None
    shared_down: np.ndarray | None = None

    def __post_init__(self):
        """Each weight a finite float array of its shape (E, h, f, f_s read from ``router``, ``w_gate`` and
        ``shared_gate``), the shared ones all given or all None; stored as float64 numpy arrays. Raises
        DistlearnValueError naming the field and the shape it needs."""
        self.router = check_array("router", self.router, ndim=2, min_size=1)
        (e, h), get = self.router.shape, lambda name, ndim: check_array(name, getattr(self, name), ndim=ndim)
        self.w_gate, self.w_up, self.w_down = get("w_gate", 3), get("w_up", 3), get("w_down", 3)
        f = self.w_gate.shape[1]
        shared = [getattr(self, n) is None for n in ("shared_gate", "shared_up", "shared_down")]
        if any(shared) and not all(shared):
            raise DistlearnValueError("shared_gate", "shared_gate, shared_up and shared_down must be given together "
                                                     "(a shared expert) or all be None.",
                                      "shared_gate、shared_up 和 shared_down 必须同时给出（共享专家），或全为 None。")
        fs = None
        if not shared[0]:
            self.shared_gate, self.shared_up = get("shared_gate", 2), get("shared_up", 2)
            self.shared_down, fs = get("shared_down", 2), self.shared_gate.shape[0]
        needed = {"w_gate": (e, f, h), "w_up": (e, f, h), "w_down": (e, h, f), "shared_gate": (fs, h),
                  "shared_up": (fs, h), "shared_down": (h, fs)}
        for name, shape in needed.items():
            value = getattr(self, name)
            if value is not None and value.shape != shape:
                want = "(" + ", ".join(str(n) for n in shape) + ")"
                raise DistlearnValueError(
                    name, f"{name} must have shape {want} (E experts, hidden h, expert width f, shared width f_s, "
                          f"read from router {self.router.shape} and w_gate); got {value.shape}.",
                    f"{name} 的形状必须是 {want}（E 个专家、隐藏维度 h、专家宽度 f、共享专家宽度 f_s，由 router "
                    f"{self.router.shape} 和 w_gate 确定）；收到 {value.shape}。")

    @classmethod
    def random(cls, num_experts: int, hidden_size: int, ffn_hidden_size: int, shared_ffn: int = 0,
               seed: int = 0) -> "MoEWeights":
        """Weights drawn uniformly in ±1/sqrt(fan_in) (as ``nn.Linear``), deterministic for ``seed``."""
        num_experts = check_int("num_experts", num_experts, minimum=1, maximum=MAX_EXPERTS)
        hidden_size = check_int("hidden_size", hidden_size, minimum=1)
        ffn_hidden_size = check_int("ffn_hidden_size", ffn_hidden_size, minimum=1)
        shared_ffn = check_int("shared_ffn", shared_ffn, minimum=0)
        seed = check_seed("seed", seed)
        check_elements("num_experts × hidden_size × ffn_hidden_size",
                       3 * num_experts * hidden_size * ffn_hidden_size + num_experts * hidden_size
                       + 3 * shared_ffn * hidden_size, MAX_ELEMENTS)
        rng = np.random.default_rng(seed)
        u = lambda shape, fan_in: rng.uniform(-1, 1, shape) / math.sqrt(fan_in)
        e, h, f = num_experts, hidden_size, ffn_hidden_size
        shared = (u((shared_ffn, h), h), u((shared_ffn, h), h), u((h, shared_ffn), shared_ffn)) if shared_ffn else (None,) * 3
        return cls(u((e, h), h), u((e, f, h), h), u((e, f, h), h), u((e, h, f), f), *shared)

    @property
    def num_experts(self) -> int:
        return self.router.shape[0]


MOE_WEIGHTS = record(MoEWeights, "MoEWeights.random(num_experts=4, hidden_size=8, ffn_hidden_size=16)")


def _check_rows(name: str, x, w: MoEWeights, tokens: int | None) -> None:
    """DistlearnValueError unless ``x`` is (tokens, h) with the hidden size h of ``w`` (any number of rows when
    ``tokens`` is None)."""
    h = w.w_gate.shape[-1]
    shape = np.shape(x)
    if shape[-1] != h or (tokens is not None and shape[0] != tokens):
        want = f"({'T' if tokens is None else tokens}, {h})"
        raise DistlearnValueError(name, f"{name} must have shape {want} (tokens, the experts' hidden size); got "
                                        f"{shape}.",
                                  f"{name} 的形状必须是 {want}（词元数，专家的隐藏维度）；收到 {shape}。")


@checks(x=array("n h", min_size=0), w_gate=array("f h"), w_up=array("f h"), w_down=array("h f"))
def swiglu(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """One SwiGLU expert on rows ``x`` (n, h): ``(silu(x·w_gateᵀ) ⊙ x·w_upᵀ)·w_downᵀ`` (n, h); ``w_gate``, ``w_up``
    (f, h), ``w_down`` (h, f), in ``nn.Linear`` layout. Raises DistlearnValueError for arrays that are not finite or
    whose shapes disagree."""
    a = x @ w_gate.T
    return ((a * _sigmoid(a)) * (x @ w_up.T)) @ w_down.T


@checks(x=array("tokens h"), w=MOE_WEIGHTS, routing=ROUTING)
def moe_forward(x: np.ndarray, w: MoEWeights, routing: Routing) -> np.ndarray:
    """Output (T, h) of an MoE FFN on rows ``x`` (T, h) under ``routing``: for every kept assignment
    ``weight × expert(x)``, summed per token, plus the shared experts. Dropped assignments add nothing. Raises
    DistlearnValueError unless ``x`` has one row per routed token and the weights' hidden size."""
    _check_rows("x", x, w, len(routing.index))
    y = np.zeros_like(x, dtype=float)
    for e in range(w.num_experts):
        rows, slot = np.nonzero((routing.index == e) & routing.kept)
        if len(rows):
            np.add.at(y, rows, routing.weights[rows, slot, None]
                      * swiglu.unchecked(x[rows], w.w_gate[e], w.w_up[e], w.w_down[e]))
    if w.shared_gate is not None:
        y = y + swiglu.unchecked(x, w.shared_gate, w.shared_up, w.shared_down)
    return y


# ---------------------------------------------------------------- load balancing
def aux_loss(probs, index, num_experts: int | None = None, *, first_choice_only: bool = False) -> float:
    """The load-balancing loss ``N·Σᵢ fᵢ·Pᵢ`` (unscaled by its coefficient α).

    ``probs`` (T, E): router probabilities (softmax; DeepSeek-V3: sigmoid affinities normalized per token);
    ``index`` (T, k): the chosen experts (before capacity). ``fᵢ`` = fraction of the T·k assignments routed to
    expert ``i`` (``first_choice_only``: of the T first choices), ``Pᵢ`` = mean of ``probs[:, i]``.

    - Switch (Fedus et al. 2021, eq. 4–6): k = 1.
    - DeepSpeed ``topkgating``: ``mean(me·ce)·E²/k`` = this with all k choices.
    - GShard (Lepikhin et al. 2020, Algorithm 1) and DeepSpeed ``top2gating``: first choices only; the paper
      writes the mean over experts, (1/E)·Σ_e (c_e/S)·m_e, which is this divided by E².
    - DeepSeek-V3's sequence-wise loss (eq. 17–20): normalized affinities, all k choices, T = one sequence.

    1.0 when both ``f`` and ``P`` are uniform; ``N`` when every token goes, with probability 1, to one expert."""
    probs = check_array("probs", probs, ndim=2)
    first_choice_only = check_bool("first_choice_only", first_choice_only)
    n = probs.shape[1]
    index_f = check_array("index", index, ndim=2)
    if index_f.shape[0] != probs.shape[0] or not index_f.shape[1]:
        raise DistlearnValueError("index", f"index must have shape ({probs.shape[0]}, k ≥ 1), one row per row of "
                                           f"probs; got {index_f.shape}.",
                                  f"index 的形状必须是 ({probs.shape[0]}, k ≥ 1)，与 probs 的行一一对应；收到 "
                                  f"{index_f.shape}。")
    if index_f.size and (index_f.min() < 0 or index_f.max() >= n or (index_f != np.round(index_f)).any()):
        raise DistlearnValueError("index", f"index must hold expert numbers, whole numbers in [0, {n - 1}] (probs has "
                                           f"{n} experts); got values from {index_f.min():g} to {index_f.max():g}.",
                                  f"index 必须是专家编号，即范围 [0, {n - 1}] 内的整数（probs 有 {n} 个专家）；收到 "
                                  f"{index_f.min():g} 到 {index_f.max():g} 的值。")
    index = np.asarray(index) if np.asarray(index).dtype.kind in "iu" else index_f.astype(int)
    if num_experts is not None and check_int("num_experts", num_experts, maximum=MAX_EXPERTS) != n:
        raise DistlearnValueError("num_experts", f"num_experts = {num_experts} must equal the {n} columns of probs.",
                                  f"num_experts = {num_experts} 必须等于 probs 的列数 {n}。")
    chosen = index[:, :1] if first_choice_only else index
    f = np.bincount(chosen.ravel(), minlength=n) / chosen.size
    return float(n * np.sum(f * probs.mean(axis=0)))


@checks(bias=array("experts"), load=array("experts"))
def update_bias(bias, load, gamma: float) -> np.ndarray:
    """DeepSeek-V3's auxiliary-loss-free update (§2.1.2): ``bᵢ ← bᵢ + γ·sign(mean(load) − loadᵢ)``: an overloaded
    expert's bias drops by γ, an underloaded one's rises by γ, an exactly average one keeps its bias (as
    Megatron-LM's ``get_updated_expert_bias``). DeepSeek-V3 used γ = 0.001 for its first 14.3 T tokens.
    ``bias``, ``load``: shape (E,). Raises DistlearnValueError for arrays that are not finite or of different
    lengths, or a negative γ."""
    gamma = check_number("gamma", gamma, minimum=0)
    load = np.asarray(load, dtype=float)
    return np.asarray(bias, dtype=float) + gamma * np.sign(load.mean() - load)


@dataclass
class BalanceHistory:
    """Per step of :func:`simulate_bias_balancing`: ``max_over_mean`` (the busiest expert's load / the mean),
    ``loads`` (steps, E), ``bias`` (steps + 1, E), ``weights_unbiased`` (whether every gate weight equalled the
    normalized unbiased affinity)."""

    max_over_mean: np.ndarray
    loads: np.ndarray
    bias: np.ndarray
    weights_unbiased: bool


def simulate_bias_balancing(*, num_experts: int = 16, k: int = 2, num_tokens: int = 1024, steps: int = 200,
                            gamma: float = 0.01, skew: float = 1.0, seed: int = 0) -> BalanceHistory:
    """Route a fresh batch of skewed tokens (:func:`router_logits`) with sigmoid scores every step, updating the
    selection bias by :func:`update_bias` after each step. Returns the history; with ``gamma = 0`` nothing is
    balanced. The gate weights never see the bias (checked: ``weights_unbiased``)."""
    check_int("steps", steps, minimum=1, maximum=10_000)
    check_number("gamma", gamma, minimum=0)
    num_experts = check_int("num_experts", num_experts, minimum=2, maximum=MAX_EXPERTS)
    check_int("k", k, minimum=1, maximum=num_experts)
    num_tokens = check_int("num_tokens", num_tokens, maximum=2 ** 16)
    check_number("skew", skew, minimum=0)
    seed = check_int("seed", seed, minimum=0, maximum=2 ** 32 // 100_003 - 10_000)  # seeds seed·100003 + step
    bias = np.zeros(num_experts)
    biases, loads, ratio, unbiased = [bias.copy()], [], [], True
    for step in range(steps):
        logits = router_logits(num_tokens, num_experts, skew=skew, seed=seed * 100_003 + step)
        r = route(logits, k, score="sigmoid", bias=bias)
        s = _sigmoid(logits)
        expected = np.take_along_axis(s, r.index, axis=1)
        unbiased &= bool(np.allclose(r.weights, expected / expected.sum(axis=1, keepdims=True)))
        loads.append(r.load)
        ratio.append(r.load.max() / r.load.mean())
        bias = update_bias.unchecked(bias, r.load, gamma)
        biases.append(bias.copy())
    return BalanceHistory(np.array(ratio), np.array(loads), np.array(biases), unbiased)


# ---------------------------------------------------------------- expert parallelism: who sends what to whom
def _check_ep(num_experts: int, ep: int) -> tuple[int, int]:
    e = check_int("num_experts", num_experts, minimum=1, maximum=MAX_EXPERTS)
    ep = check_int("ep", ep, minimum=1)
    if e % ep:
        raise DistlearnValueError("ep", f"ep = {ep} must divide num_experts = {e} (each rank holds E/ep experts).",
                                  f"ep = {ep} 必须整除 num_experts = {e}（每个 rank 持有 E/ep 个专家）。")
    return e, ep


def expert_owner(expert, num_experts: int, ep: int):
    """The rank holding ``expert`` (an int or an array): experts are split into ``ep`` contiguous blocks of
    E/ep (expert ``e`` lives on rank ``e // (E/ep)``, as in DeepSpeed and Megatron-LM)."""
    e, ep = _check_ep(num_experts, ep)
    return np.asarray(expert) // (e // ep)


@dataclass
class Splits:
    """The split sizes of one dispatch all-to-all. ``send[i, j]``: rows rank ``i`` sends to rank ``j``;
    ``per_expert[i, e]``: rows rank ``i`` sends to expert ``e``. Rank ``r`` passes ``input_split_sizes(r)``
    (= ``send[r]``) and ``output_split_sizes(r)`` (= ``send[:, r]``) to ``all_to_all_single``; the combine
    all-to-all uses the same two lists swapped."""

    send: np.ndarray
    per_expert: np.ndarray

    def input_split_sizes(self, rank: int) -> list[int]:
        return [int(v) for v in self.send[rank]]

    def output_split_sizes(self, rank: int) -> list[int]:
        return [int(v) for v in self.send[:, rank]]


@checks(routings=each(ROUTING))
def split_sizes(routings: list[Routing], num_experts: int, ep: int) -> Splits:
    """Split sizes of the dispatch all-to-all when rank ``r`` routed its tokens as ``routings[r]`` (only kept
    assignments travel). Raises DistlearnValueError when ``len(routings) != ep`` or ``ep`` does not divide E."""
    e, ep = _check_ep(num_experts, ep)
    if len(routings) != ep:
        raise DistlearnValueError("routings", f"need one routing per rank: {len(routings)} for ep = {ep}.",
                                  f"每个 rank 需要一个路由结果：收到 {len(routings)} 个，ep = {ep}。")
    per_expert = np.stack([np.bincount(r.index[r.kept], minlength=e) for r in routings])
    send = per_expert.reshape(ep, ep, e // ep).sum(axis=2)
    return Splits(send, per_expert)


@dataclass
class EPResult:
    """What :func:`simulate_expert_parallel` computed: ``outputs`` (one (T_r, h) array per rank), the
    ``routings``, the ``splits``, ``bytes_sent`` per rank (dispatch + combine, forward), and ``received`` rows per
    rank (the expert work each rank does)."""

    outputs: list[np.ndarray]
    routings: list[Routing]
    splits: Splits
    bytes_sent: np.ndarray
    received: np.ndarray


@checks(xs=each(array("_ h")), w=MOE_WEIGHTS)
def simulate_expert_parallel(xs: list[np.ndarray], w: MoEWeights, k: int, *, capacity_factor: float | None = None,
                             **route_kwargs) -> EPResult:
    """An MoE layer with its experts split over ``ep = len(xs)`` ranks, step by step with explicit buffers.

    1. every rank routes its own tokens ``xs[r]`` (T_r, h) (capacity per rank: ``tokens_per_group = T_r``);
    2. dispatch: rank ``r`` sorts its kept assignments by destination expert and sends rank ``j`` the rows for
       ``j``'s experts (split sizes from :func:`split_sizes`);
    3. every rank runs each of its experts on the rows it received;
    4. combine: the outputs go back the same way; each rank adds ``weight × output`` to its tokens, plus the
       shared experts (replicated, computed locally).

    Equals :func:`moe_forward` on each rank's tokens (tests). ``bytes_sent`` counts rows leaving a rank
    (dispatch, then combine), at ``x.itemsize`` bytes per element. Raises DistlearnValueError unless ``xs`` is a
    list of finite (T_r, h) arrays with the weights' hidden size h and ``len(xs)`` divides the experts."""
    ep, e = len(xs), w.num_experts
    for r, x in enumerate(xs):
        _check_rows(f"xs[{r}]", x, w, None)
    _check_ep(e, ep)
    local = e // ep
    routings = [route(x @ w.router.T, k, capacity_factor=capacity_factor, tokens_per_group=len(x), **route_kwargs)
                for x in xs]
    splits = split_sizes.unchecked(routings, e, ep)
    # 2. dispatch: per source rank, (token, slot) of its kept assignments in destination-expert order
    plans, inbox = [], [[None] * ep for _ in range(ep)]
    for src, (x, r) in enumerate(zip(xs, routings)):
        rows, slot = np.nonzero(r.kept)
        order = np.lexsort((slot, rows, r.index[rows, slot]))        # by expert, then token, then choice
        rows, slot = rows[order], slot[order]
        experts = r.index[rows, slot]
        plans.append((rows, slot, experts))
        for dst in range(ep):
            mine = (experts // local) == dst
            inbox[dst][src] = (x[rows[mine]], experts[mine])
    # 3. expert compute on the receiving rank
    outbox = [[None] * ep for _ in range(ep)]
    received = np.zeros(ep, dtype=np.int64)
    for dst in range(ep):
        for src in range(ep):
            rows_in, experts_in = inbox[dst][src]
            out = np.zeros_like(rows_in)
            for ex in np.unique(experts_in):
                sel = experts_in == ex
                out[sel] = swiglu.unchecked(rows_in[sel], w.w_gate[ex], w.w_up[ex], w.w_down[ex])
            outbox[src][dst] = out
            received[dst] += len(rows_in)
    # 4. combine
    outputs, bytes_sent = [], np.zeros(ep)
    itemsize = xs[0].itemsize if ep else 8
    h = xs[0].shape[1] if ep else 0
    for src, (x, r) in enumerate(zip(xs, routings)):
        rows, slot, experts = plans[src]
        y = np.zeros_like(x, dtype=float)
        for dst in range(ep):
            mine = (experts // local) == dst
            np.add.at(y, rows[mine], r.weights[rows[mine], slot[mine], None] * outbox[src][dst])
        if w.shared_gate is not None:
            y = y + swiglu.unchecked(x, w.shared_gate, w.shared_up, w.shared_down)
        outputs.append(y)
    for r in range(ep):
        off_rank = splits.send[r].sum() - splits.send[r, r]
        back = splits.send[:, r].sum() - splits.send[r, r]
        bytes_sent[r] = (off_rank + back) * h * itemsize
    return EPResult(outputs, routings, splits, bytes_sent, received)


# ---------------------------------------------------------------- communication vs computation per layer
@dataclass
class LayerCost:
    """Per GPU and MoE layer, one micro-batch: ``dispatch_bytes``, ``combine_bytes`` sent in the forward (the
    backward sends the same again, gradients through the reverse all-to-alls), ``forward_flops`` of the routed
    experts (backward: 2×), ``intra_node_share`` / ``inter_node_share`` of the off-GPU bytes."""

    dispatch_bytes: float
    combine_bytes: float
    forward_flops: float
    intra_node_share: float
    inter_node_share: float

    @property
    def forward_bytes(self) -> float:
        return self.dispatch_bytes + self.combine_bytes

    @property
    def training_bytes(self) -> float:
        """Forward + backward."""
        return 2 * self.forward_bytes

    @property
    def training_flops(self) -> float:
        return 3 * self.forward_flops


LAYER_COST = record(LayerCost, "ep_layer_cost(tokens_per_gpu=4096, hidden_size=7168, expert_ffn_hidden_size=2048, "
                                "k=8, ep=64)")


def ep_layer_cost(*, tokens_per_gpu: int, hidden_size: int, expert_ffn_hidden_size: int, k: int, ep: int,
                  gpus_per_node: int = 8, dispatch_bytes: float = 2, combine_bytes: float = 2) -> LayerCost:
    """Bytes and FLOPs per GPU for one MoE layer under expert parallelism, with balanced uniform routing.

    Each GPU routes ``T = tokens_per_gpu`` tokens to k experts; a uniformly chosen expert lives on another GPU with
    probability (ep − 1)/ep, so dispatch sends ``T·k·(ep − 1)/ep·h`` values (``dispatch_bytes`` each: 2 for bf16,
    1 for DeepSeek-V3's FP8 dispatch) and combine sends as many back (``combine_bytes``). Balanced, each GPU
    also computes T·k assignments: ``2·3·h·f`` FLOPs each (three matrices of a SwiGLU expert). Of the off-GPU
    traffic, (min(ep, g) − 1)/(ep − 1) stays inside a node of ``g = gpus_per_node`` GPUs (NVLink) and the rest
    crosses nodes (an EP group laid out over ``ep / g`` whole nodes)."""
    t = check_int("tokens_per_gpu", tokens_per_gpu, minimum=1)
    h = check_int("hidden_size", hidden_size, minimum=1)
    f = check_int("expert_ffn_hidden_size", expert_ffn_hidden_size, minimum=1)
    k = check_int("k", k, minimum=1)
    ep = check_int("ep", ep, minimum=1)
    g = check_int("gpus_per_node", gpus_per_node, minimum=1)
    dispatch_bytes = check_number("dispatch_bytes", dispatch_bytes, minimum=0, strict_min=True, maximum=8)
    combine_bytes = check_number("combine_bytes", combine_bytes, minimum=0, strict_min=True, maximum=8)
    off = t * k * (ep - 1) / ep * h
    intra = (min(ep, g) - 1) / (ep - 1) if ep > 1 else 0.0
    return LayerCost(off * dispatch_bytes, off * combine_bytes, 6.0 * t * k * h * f, intra,
                     (1 - intra) if ep > 1 else 0.0)


def tp_ffn_layer_cost(*, tokens: int, hidden_size: int, ffn_hidden_size: int, tp: int, gpus_per_node: int = 8,
                      dtype_bytes: float = 2) -> LayerCost:
    """The dense comparison: a SwiGLU FFN of width ``ffn_hidden_size`` split Megatron-style over ``tp`` GPUs
    (chapter 04) for ``tokens`` tokens. Forward: one ring all-reduce of the (tokens, h) output, 2(t−1)/t of it
    sent per GPU (reported as ``dispatch_bytes``; ``combine_bytes`` = 0); each GPU computes 1/t of the 6·T·h·f
    FLOPs. Compared with :func:`ep_layer_cost`, the all-reduce per GPU stays while the compute per GPU shrinks
    as 1/t, so TP's ratio grows with t; EP's does not (each GPU keeps its tokens' T·k assignments)."""
    t = check_int("tokens", tokens, minimum=1)
    h = check_int("hidden_size", hidden_size, minimum=1)
    f = check_int("ffn_hidden_size", ffn_hidden_size, minimum=1)
    tp = check_int("tp", tp, minimum=1)
    g = check_int("gpus_per_node", gpus_per_node, minimum=1)
    dtype_bytes = check_number("dtype_bytes", dtype_bytes, minimum=0, strict_min=True, maximum=8)
    intra = (min(tp, g) - 1) / (tp - 1) if tp > 1 else 0.0
    return LayerCost(2 * (tp - 1) / tp * t * h * dtype_bytes, 0.0, 6.0 * t * h * f / tp, intra,
                     (1 - intra) if tp > 1 else 0.0)


@checks(cost=LAYER_COST, gpu=GPU)
def all_to_all_seconds(nbytes: float, cost: LayerCost, gpu) -> float:
    """Time of ``nbytes`` of all-to-all traffic per GPU: the intra-node share over NVLink and the inter-node
    share over the network run at the same time, so the slower one sets the time (α latency ignored).
    ``gpu``: a :class:`distlearn.core.hardware.GPU` (bandwidths per direction)."""
    nbytes = check_number("nbytes", nbytes, minimum=0)
    return max(nbytes * cost.intra_node_share / gpu.nvlink_bw, nbytes * cost.inter_node_share / gpu.network_bw)


@checks(cost=LAYER_COST, gpu=GPU)
def comm_compute_ratio(cost: LayerCost, gpu, mfu: float = 1.0) -> float:
    """Forward all-to-all time / forward expert compute time (at ``mfu`` of the GPU's peak). Below 1 the
    all-to-all can hide behind computation (of other micro-batches, DualPipe-style); above 1 it cannot."""
    mfu = check_number("mfu", mfu, minimum=0, maximum=1, strict_min=True)
    return all_to_all_seconds.unchecked(cost.forward_bytes, cost, gpu) / (cost.forward_flops / (gpu.peak_flops * mfu))


@checks(routing=ROUTING)
def nodes_per_token(routing: Routing, experts_per_node: int) -> np.ndarray:
    """(T,) how many different nodes each token's kept assignments reach when every node holds
    ``experts_per_node`` consecutive experts: the nodes its dispatch crosses the network to (at most k)."""
    check_int("experts_per_node", experts_per_node, minimum=1)
    node = np.where(routing.kept, routing.index // experts_per_node, -1)
    ordered = np.sort(node, axis=1)
    distinct = (ordered[:, 1:] != ordered[:, :-1]).sum(axis=1) + 1
    return distinct - (ordered[:, 0] == -1)


def straggler_factor(received) -> float:
    """max / mean of the expert work per GPU (rows received): the whole layer waits for the busiest GPU, so the
    expert phase takes this many times the balanced time."""
    received = check_array("received", received, min_size=1)
    if (received < 0).any():
        raise DistlearnValueError("received", f"received must hold rows per GPU (≥ 0); got {received.min():g}.",
                                  f"received 必须是每块 GPU 收到的行数（≥ 0）；收到 {received.min():g}。")
    return float(received.max() / received.mean()) if received.mean() > 0 else 1.0


@checks(load=array("experts"))
def gpu_loads(load, ep: int) -> np.ndarray:
    """(ep,) assignments each GPU's experts process, from the per-expert ``load`` (E,)."""
    load = np.asarray(load)
    e, ep = _check_ep(len(load), ep)
    return load.reshape(ep, e // ep).sum(axis=1)


# ---------------------------------------------------------------- memory under EP × DP
@dataclass(frozen=True)
class EPStateBytes:
    """Model-state bytes per GPU under EP × DP: ``dense`` (replicated parameters: attention, embeddings, norms,
    routers, dense and shared FFNs) and ``experts`` (this GPU's E/ep routed experts of every MoE layer)."""

    dense: float
    experts: float
    dense_params: int
    expert_params: int

    @property
    def total(self) -> float:
        return self.dense + self.experts


def routed_expert_parameters(config) -> int:
    """Parameters of all routed experts of ``config`` (main model and MTP modules)."""
    layers = config.num_moe_layers + sum(config.is_moe_layer(config.num_layers + m)
                                         for m in range(config.num_mtp_modules))
    return layers * config.num_experts * config.expert_parameters()


def ep_model_state_bytes(config, *, ep: int, dp: int, zero_stage: int = 1, precision: str = "mixed",
                         optimizer: str = "adam") -> EPStateBytes:
    """Per-GPU model states of an MoE model on ``dp`` data-parallel GPUs (no TP/PP) with expert parallelism
    ``ep`` inside them (DeepSpeed-MoE and Megatron-LM's layout): the dense parameters are replicated over all
    ``dp`` GPUs and ZeRO shards them over ``dp``; each GPU holds E/ep routed experts of every MoE layer, which
    ``dp/ep`` GPUs replicate (the expert-data-parallel group) and ZeRO shards over ``dp/ep``.

    Raises DistlearnValueError unless ``ep`` divides both the number of experts and ``dp``."""
    from distlearn.memory.formulas import model_state_bytes

    if not getattr(config, "num_experts", 0):
        name = getattr(config, "name", config)
        raise DistlearnValueError("config", f"{name} is not a mixture-of-experts model (it has no routed experts): "
                                            "expert parallelism needs one, e.g. get_preset('mixtral-8x7b').",
                                  f"{name} 不是混合专家 (MoE) 模型（没有路由专家）：专家并行需要 MoE 模型，例如 "
                                  "get_preset('mixtral-8x7b')。")
    _check_ep(config.num_experts, ep)
    dp = check_int("dp", dp, minimum=1)
    if dp % ep:
        raise DistlearnValueError("dp", f"ep = {ep} must divide dp = {dp} (the EP group lies inside the data-"
                                        "parallel GPUs).",
                                  f"ep = {ep} 必须整除 dp = {dp}（专家并行组位于数据并行的 GPU 之内）。")
    experts = routed_expert_parameters(config)
    dense = config.num_parameters() - experts
    d = model_state_bytes(dense, dp=dp, zero_stage=zero_stage, precision=precision, optimizer=optimizer)
    x = model_state_bytes(max(experts // ep, 1), dp=dp // ep, zero_stage=zero_stage, precision=precision,
                          optimizer=optimizer)
    return EPStateBytes(d.total, x.total if experts else 0.0, dense, experts // ep)


def routed_activation_bytes(*, received_rows: float, hidden_size: int, expert_ffn_hidden_size: int,
                            dtype_bytes: int = 2) -> float:
    """Bytes autograd keeps for backward in one GPU's routed experts, for ``received_rows`` token rows (the rows
    dispatched to it: T·k on average, more on a straggler).

    Per row, as PyTorch saves them for the expert loop of :class:`distlearn.core.moe.MoE` (measured exactly in the
    tests with ``saved_tensors_hooks``): the gathered input row (h), the gate projection (f), its SiLU (f), the up
    projection (f), their product (f), the expert output (h) and the gate weight (1), both kept by the weighting
    multiply, and the weighted output (h) kept by ``index_add`` — ``(3h + 4f + 1)·dtype_bytes`` — plus the
    (row, slot) int64 index pair from ``torch.where`` (16 bytes). Router and attention activations are not
    included (they scale with the tokens, not with the routed rows)."""
    rows = check_number("received_rows", received_rows, minimum=0)
    h = check_int("hidden_size", hidden_size, minimum=1)
    f = check_int("expert_ffn_hidden_size", expert_ffn_hidden_size, minimum=1)
    dtype_bytes = check_int("dtype_bytes", dtype_bytes, maximum=8)
    return rows * ((3 * h + 4 * f + 1) * dtype_bytes + 16)
