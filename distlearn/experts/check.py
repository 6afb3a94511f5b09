"""Checkers for chapter 11 (mixture of experts and expert parallelism). Expected values come from
:mod:`distlearn.experts.simulation` (checked against DeepSpeed's gating code, the torch MoE module and the real
expert-parallel lab) and :class:`distlearn.core.models.ModelConfig` (checked against the meta-device modules and the
published totals)."""
from __future__ import annotations

import numpy as np

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.experts.simulation import Routing, aux_loss, route, router_logits, split_sizes
from distlearn.core.models import MOE_PRESETS, ModelConfig


def _same_routing(got, expected) -> bool:
    try:
        index, weights, kept = (np.asarray(g) for g in got)
    except (TypeError, ValueError):
        return False
    e_index, e_weights, e_kept = expected
    return (index.shape == e_index.shape and np.array_equal(index, e_index)
            and np.array_equal(kept.astype(bool), e_kept) and np.allclose(weights, e_weights, atol=1e-12))


def _route_case_hint(t: int, e: int, k: int, cf: float, r: Routing) -> tuple[str, str]:
    """What this case tests, so that a failing case points at the likely mistake without giving the code."""
    exact = cf * k * t / e
    if r.dropped == 0:
        return ("Nothing is dropped in this case (C is large): if it fails, the experts or the weights are wrong, "
                "not the capacity.",
                "这个用例里没有分配被丢弃（C 很大）：如果它没通过，错的是 experts 或 weights，而不是容量。")
    if k == 1:
        return (f"k = 1 here, so the filling order cannot matter: check C = ceil({cf}·1·{t}/{e}) = {r.capacity} and "
                "that the weight of a dropped assignment is 0.",
                f"这里 k = 1，放入顺序不影响结果：检查 C = ceil({cf}·1·{t}/{e}) = {r.capacity}，以及被丢弃分配的权重是否为 0。")
    rounding = (f" cf·k·T/E = {exact:g} is not a whole number: round it up." if exact != int(exact) else "")
    rounding_zh = (f"cf·k·T/E = {exact:g} 不是整数：要向上取整。" if exact != int(exact) else "")
    return (f"Here C = ceil({cf}·{k}·{t}/{e}) = {r.capacity} and {r.dropped} assignments are dropped.{rounding} Fill "
            "in priority order: all first choices (token 0, 1, …), then all second choices — not a token's k choices "
            "together. Dropped weights are 0; the kept ones are not renormalized.",
            f"这里 C = ceil({cf}·{k}·{t}/{e}) = {r.capacity}，有 {r.dropped} 个分配被丢弃。{rounding_zh}按优先级放入：先放所有"
            "第一选择（词元 0、1、……），再放所有第二选择——不是把一个词元的 k 个选择一起放。被丢弃的权重为 0；保留下来的权重不再"
            "重新归一化。")


def ex11_route_with_capacity(fn) -> None:
    """``fn(logits, k, capacity_factor)`` → ``(experts, weights, kept)``, each (T, k): softmax top-k, weights
    renormalized over the k, capacity ``ceil(cf·k·T/E)`` filled first choices first, in token order."""
    cases = []
    # the case without drops first (it tests the experts and weights alone), then k = 1 (the capacity alone)
    for seed, t, e, k, cf, skew in [(104, 8, 4, 2, 8.0, 1.0), (102, 10, 4, 1, 1.0, 1.5), (100, 12, 4, 2, 1.0, 1.0),
                                    (101, 16, 8, 2, 1.0, 0.0), (103, 20, 8, 3, 0.75, 0.5), (105, 15, 6, 2, 1.25, 2.0)]:
        logits = router_logits(t, e, skew=skew, seed=seed)
        r = route(logits, k, capacity_factor=cf)
        en, zh = _route_case_hint(t, e, k, cf, r)
        cases.append(Case((logits, k, cf), expected=(r.index, r.weights, r.kept), compare=_same_routing,
                          parts=(("experts", "experts"), ("weights", "weights"), ("kept", "kept")),
                          hint_en=en, hint_zh=zh))
    verify("ex11_route_with_capacity", fn, cases)


def _routing_from_index(index: np.ndarray, num_experts: int) -> Routing:
    kept = index >= 0
    safe = np.where(kept, index, 0)
    return Routing(safe, kept.astype(float), kept, np.full((len(index), num_experts), 1.0 / num_experts), None,
                   len(index))


def ex11_split_sizes(fn) -> None:
    """``fn(expert_index, num_experts, ep, rank)`` → ``(input_split_sizes, output_split_sizes)`` of ``rank`` for
    the dispatch all-to-all; ``expert_index`` is one (T, k) int array per rank, −1 for dropped assignments."""
    cases = []
    for seed, (e, ep, t, k, drop) in enumerate([(8, 2, 6, 2, 0.0), (8, 4, 5, 2, 0.2), (4, 4, 3, 1, 0.0),
                                                 (6, 3, 4, 2, 0.3), (16, 4, 8, 4, 0.1), (8, 1, 4, 2, 0.0)]):
        rng = np.random.default_rng(200 + seed)
        index = []
        for _ in range(ep):
            idx = np.stack([rng.choice(e, size=k, replace=False) for _ in range(t)])
            idx[rng.random(idx.shape) < drop] = -1
            index.append(idx)
        s = split_sizes([_routing_from_index(i, e) for i in index], e, ep)
        dropped = any((i < 0).any() for i in index)
        for rank in sorted({0, ep - 1}):
            extra_en = (" This case has dropped assignments (−1): they are sent nowhere." if dropped else
                        f" Here every rank holds {e // ep} consecutive experts: expert x lives on rank x // {e // ep}.")
            extra_zh = ("这个用例里有被丢弃的分配（−1）：它们不发往任何地方。" if dropped else
                        f"这里每个 rank 持有 {e // ep} 个连续的专家：专家 x 在 rank x // {e // ep} 上。")
            cases.append(Case((index, e, ep, rank), expected=(s.input_split_sizes(rank), s.output_split_sizes(rank)),
                              parts=(("input_split_sizes", "input_split_sizes"),
                                     ("output_split_sizes", "output_split_sizes")),
                              hint_en="Rank r holds experts r·E/ep … (r+1)·E/ep − 1. input_split_sizes[j] = how many "
                                      "of this rank's kept assignments go to rank j's experts; output_split_sizes[j] "
                                      "= how many of rank j's go to this rank's experts." + extra_en,
                              hint_zh="rank r 持有第 r·E/ep … (r+1)·E/ep − 1 个专家。input_split_sizes[j] = 本 rank 保留的"
                                      "分配中发往 rank j 的专家的个数；output_split_sizes[j] = rank j 的分配中发往本 rank "
                                      "专家的个数。" + extra_zh))
    verify("ex11_split_sizes", fn, cases)


def _moe_args(c: ModelConfig) -> tuple:
    return (c.vocab_size, c.hidden_size, c.num_layers, c.first_dense_layers, c.attention_parameters(),
            c.ffn_hidden_size, c.num_experts, c.num_shared_experts, c.expert_ffn, c.experts_per_token)


def ex11_active_parameters(fn) -> None:
    """``fn(vocab_size, hidden_size, num_layers, first_dense_layers, attention_per_layer, ffn_hidden_size,
    num_experts, num_shared_experts, expert_ffn_hidden_size, k)`` → ``(total, active)`` of the main model
    (untied embedding and head, RMSNorms, SwiGLU FFNs, a router of E·h per MoE layer; active counts the embedding)."""
    mixtral, deepseek = MOE_PRESETS["mixtral-8x7b"], MOE_PRESETS["deepseek-v3"]
    configs = [mixtral, deepseek, mixtral.with_(experts_per_token=1), deepseek.with_(num_shared_experts=2),
               deepseek.with_(first_dense_layers=0, num_experts=64, experts_per_token=6),
               ModelConfig("small", "llama", 1000, 64, 4, 4, 256, 128, num_experts=8, experts_per_token=2,
                           num_shared_experts=1, expert_ffn_hidden_size=32, first_dense_layers=1)]
    def hint(c: ModelConfig) -> tuple[str, str]:
        en, zh = [], []
        if c.num_shared_experts:
            en.append(f"This model has {c.num_shared_experts} shared expert(s) per MoE layer: every token uses them.")
            zh.append(f"这个模型每个 MoE 层有 {c.num_shared_experts} 个共享专家：每个词元都会用到它们。")
        if c.first_dense_layers:
            en.append(f"Its first {c.first_dense_layers} layer(s) are dense (3·h·ffn, no router).")
            zh.append(f"它的前 {c.first_dense_layers} 层是稠密层（3·h·ffn，没有路由器）。")
        else:
            en.append("Every layer is an MoE layer here.")
            zh.append("这里每一层都是 MoE 层。")
        return " ".join(en), "".join(zh)

    cases = [Case(_moe_args(c), expected=(c.main_parameters(), c.active_parameters()), rtol=0,
                  parts=(("total", "总参数量"), ("active", "激活参数量")),
                  hint_en=hint(c)[0] + " Per layer: attention + 2 RMSNorms (2h) + FFN. MoE layers: router E·h + "
                          "(E + shared)·3·h·f_e in total, router + (k + shared)·3·h·f_e active. Plus embedding V·h, "
                          "final norm h and LM head V·h (all counted as active).",
                  hint_zh=hint(c)[1] + "每层：注意力 + 2 个 RMSNorm（2h）+ FFN。MoE 层：总数为路由器 E·h + "
                          "(E + shared)·3·h·f_e，激活的是路由器 + (k + shared)·3·h·f_e。再加词嵌入 V·h、最后的 norm h 和 "
                          "输出层 V·h（都算作激活参数）。") for c in configs]
    verify("ex11_active_parameters", fn, cases)


def ex11_aux_loss(fn) -> None:
    """``fn(probs, index)`` → Switch's load-balancing loss ``N·Σ fᵢ·Pᵢ`` over all k choices."""
    cases = []
    for seed, (t, e, k, skew) in enumerate([(64, 8, 1, 0.0), (64, 8, 2, 1.0), (32, 4, 2, 3.0), (100, 16, 4, 0.5)]):
        logits = router_logits(t, e, skew=skew, seed=300 + seed)
        r = route(logits, k)
        extra_en = (f" k = {k} here: every one of a token's {k} choices counts, and Σ f_i = 1." if k > 1 else
                    " k = 1 here: f_i is simply the fraction of tokens sent to expert i.")
        extra_zh = (f"这里 k = {k}：一个词元的 {k} 个选择都要计数，且 Σ f_i = 1。" if k > 1 else
                    "这里 k = 1：f_i 就是被送到专家 i 的词元所占的比例。")
        cases.append(Case((r.probs, r.index), expected=aux_loss(r.probs, r.index), rtol=1e-9,
                          hint_en="N = number of experts (probs.shape[1]); f_i = (assignments to expert i) / (T·k); "
                                  "P_i = mean over tokens of probs[:, i]. Balanced routing gives 1." + extra_en,
                          hint_zh="N = 专家数（probs.shape[1]）；f_i = 分配给专家 i 的次数 / (T·k)；P_i = probs[:, i] 在所有"
                                  "词元上的平均值。完全均衡时结果为 1。" + extra_zh))
    verify("ex11_aux_loss", fn, cases)
