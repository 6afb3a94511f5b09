"""Explorer for chapter 11: experts, k, capacity factor, EP degree, routing skew → load per expert and per GPU,
dropped tokens, all-to-all bytes per GPU, and model-state and routed-activation memory per GPU.

The routing is simulated on ``TOKENS`` tokens of one GPU (:func:`distlearn.experts.simulation.router_logits` with the chosen
skew, the preset's router: Mixtral softmax top-k, DeepSeek-V3 sigmoid with node-limited groups); every GPU of the
EP group is assumed to route alike (same router, same data distribution), so one GPU's routing stands for all.
Shapes (hidden size, expert width) and the memory come from the chosen preset with its number of experts and k
replaced by the sliders'. Bytes: bf16 dispatch and combine; memory: mixed-precision Adam, ZeRO-1, no TP/PP.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from distlearn.experts import simulation as X
from distlearn.core import plots
from distlearn.core.hardware import get_gpu
from distlearn.core.i18n import bi, text
from distlearn.core.models import MOE_PRESETS
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

TOKENS = 4096
GPU = "h100-80gb"
L_MODEL = text("experts.model", "model shape", "模型形状")
L_E = text("experts.num_experts", "routed experts E", "路由专家数 E")
L_K = text("experts.k", "experts per token k", "每个词元的专家数 k")
L_CF = text("experts.cf", "capacity factor", "容量因子")
L_EP = text("experts.ep", "EP degree ep", "专家并行度 ep")
L_SKEW = text("experts.skew", "routing skew", "路由偏斜度")
L_DP = text("experts.dp", "GPUs (data-parallel degree dp)", "GPU 数（数据并行度 dp）")
L_NONE = text("experts.no_limit", "no limit", "不限")  # short: a slider readout is ~140 px wide
TITLE = text("experts.title", "Mixture of experts: routing, capacity and expert parallelism",
             "混合专家：路由、容量与专家并行")


EP_OPTIONS = (1, 2, 4, 8, 16, 32, 64)   # the EP slider's values
# Choosing a model shape sets E and k to that model's own (Mixtral 8×7B: 8 experts, top-2; DeepSeek-V3: 256, top-8),
# and ep to the largest option dividing E unless the current one still does (a tuple: keep if in it, else its
# first); the reader may move them afterwards / 选择模型形状时，E 和 k 取该模型自己的值，ep 不再整除 E 时取能整除的最大值
LINKS = read_only({"model": {name: {"num_experts": cfg.num_experts, "k": cfg.experts_per_token,
                                    "ep": tuple(sorted((d for d in EP_OPTIONS if cfg.num_experts % d == 0),
                                                       reverse=True))}
                             for name, cfg in MOE_PRESETS.items()}})


@base.within_controls(lambda: controls())
def compute(model: str = "deepseek-v3", num_experts: int = 256, k: int = 8, capacity_factor: float = 1.25,
            ep: int = 64, skew: float = 0.25, dp: int = 2048) -> dict:
    """One MoE layer of ``model``'s shape with ``num_experts`` experts, top-``k``. ``capacity_factor`` 0 means no
    limit. Returns loads, drops, bytes and memory (bytes), or ``{"error": message}`` for an impossible setting."""
    problems = []  # named by this function's parameters (the model config calls k experts_per_token)
    if k > num_experts:
        problems.append((f"k = {k} must be ≤ num_experts = {num_experts} (a token picks k distinct experts)",
                         f"k = {k} 必须 ≤ num_experts = {num_experts}（每个词元选 k 个不同的专家）"))
    if num_experts % ep:
        problems.append((f"ep = {ep} must divide num_experts = {num_experts} (each GPU holds num_experts/ep experts)",
                         f"ep = {ep} 必须整除 num_experts = {num_experts}（每块 GPU 持有 num_experts/ep 个专家）"))
    if problems:
        return {"error": bi("; ".join(en for en, _ in problems) + ".", "；".join(zh for _, zh in problems) + "。")}
    try:
        cfg = MOE_PRESETS[model].with_(num_experts=num_experts, experts_per_token=k)
        spec = X.router_spec(MOE_PRESETS[model])
        kwargs = spec.kwargs()
        if spec.num_groups > 1 and num_experts % spec.num_groups:
            kwargs.update(num_groups=1, groups_per_token=1)
        logits = X.router_logits(TOKENS, num_experts, skew=skew, seed=0)
        r = X.route(logits, k, capacity_factor=capacity_factor or None, **kwargs)
        per_gpu = X.gpu_loads(r.kept_load, ep)
        states = X.ep_model_state_bytes(cfg, ep=ep, dp=dp)
    except Exception as exc:  # noqa: BLE001 - explorer must not crash
        return {"error": str(exc)}
    h, f = cfg.hidden_size, cfg.expert_ffn
    kept = int(r.kept.sum())
    cost = X.ep_layer_cost(tokens_per_gpu=TOKENS, hidden_size=h, expert_ffn_hidden_size=f, k=k, ep=ep)
    row_bytes = 2 * h                                             # bf16 row, dispatch and combine alike
    mean_sent = 2 * kept * (ep - 1) / ep * row_bytes              # rows leaving a GPU, averaged over the group
    busiest = per_gpu.max() * ep                                  # rows the busiest GPU receives from all ep GPUs
    gpu = get_gpu(GPU)
    return {"model": model, "num_experts": num_experts, "k": k, "ep": ep, "dp": dp, "skew": skew,
            "capacity": r.capacity, "load": r.load, "kept_load": r.kept_load, "gpu_load": per_gpu,
            "dropped": r.dropped, "dropped_fraction": r.dropped / r.index.size,
            "dropped_tokens": r.dropped_tokens, "tokens": TOKENS,
            "straggler": X.straggler_factor(per_gpu), "bytes_per_gpu": mean_sent,
            "uniform_bytes_per_gpu": cost.forward_bytes, "ratio": X.comm_compute_ratio(cost, gpu, mfu=0.5),
            "intra_share": cost.intra_node_share,
            "dense_bytes": states.dense, "expert_bytes": states.experts, "state_bytes": states.total,
            "activation_bytes": X.routed_activation_bytes(received_rows=busiest, hidden_size=h,
                                                          expert_ffn_hidden_size=f),
            "mean_activation_bytes": X.routed_activation_bytes(received_rows=kept, hidden_size=h,
                                                               expert_ffn_hidden_size=f)}


def controls() -> dict:
    return {
        "model": base.dropdown(L_MODEL, list(MOE_PRESETS), "deepseek-v3"),
        "num_experts": base.log2_slider(L_E, 256, 8, 256),
        "k": base.int_slider(L_K, 8, 1, 8),
        "capacity_factor": base.selection_slider(L_CF, [("1.0", 1.0), ("1.25", 1.25), ("1.5", 1.5), ("2.0", 2.0),
                                                        ("4.0", 4.0), (L_NONE, 0.0)], 1.25),  # 0: no limit
        "ep": base.log2_slider(L_EP, 64, EP_OPTIONS[0], EP_OPTIONS[-1]),
        "skew": base.float_slider(L_SKEW, 0.25, 0.0, 2.0, 0.25),
        "dp": base.log2_slider(L_DP, 2048, 8, 2048),
    }


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    gb, mb = 1e9, 1e6
    cap = "—" if res["capacity"] is None else res["capacity"]
    print(bi(f"{res['tokens']} tokens per GPU × k = {res['k']} → capacity per expert {cap}; dropped "
             f"{res['dropped']} assignments ({res['dropped_fraction']:.1%}), {res['dropped_tokens']} tokens lost all k",
             f"每块 GPU {res['tokens']} 个词元 × k = {res['k']} → 每个专家的容量 {cap}；被丢弃 {res['dropped']} 次分配"
             f"（{res['dropped_fraction']:.1%}），{res['dropped_tokens']} 个词元的 k 个专家全部被丢弃"))
    print(bi(f"busiest GPU / mean = {res['straggler']:.2f} (the layer waits for it); all-to-all {res['bytes_per_gpu'] / mb:.0f} MB "
             f"sent per GPU per layer (forward; {res['intra_share']:.0%} inside a node); comm / compute ≈ {res['ratio']:.2f} "
             f"on {GPU} at 50 % MFU",
             f"最忙的 GPU / 平均 = {res['straggler']:.2f}（整层都要等它）；每块 GPU 每层发送 {res['bytes_per_gpu'] / mb:.0f} MB"
             f"（前向；{res['intra_share']:.0%} 在节点内）；在 {GPU} 上按 50% MFU，通信 / 计算 ≈ {res['ratio']:.2f}", sep="\n"))
    print(bi(f"model states per GPU: {res['dense_bytes'] / gb:.1f} GB replicated + {res['expert_bytes'] / gb:.1f} GB "
             f"experts = {res['state_bytes'] / gb:.1f} GB; routed activations per MoE layer {res['activation_bytes'] / gb:.2f} GB "
             f"on the busiest GPU (mean {res['mean_activation_bytes'] / gb:.2f} GB)",
             f"每块 GPU 的模型状态：复制部分 {res['dense_bytes'] / gb:.1f} GB + 专家 {res['expert_bytes'] / gb:.1f} GB = "
             f"{res['state_bytes'] / gb:.1f} GB；最忙的 GPU 上每个 MoE 层的路由激活值 {res['activation_bytes'] / gb:.2f} GB"
             f"（平均 {res['mean_activation_bytes'] / gb:.2f} GB）", sep="\n"))
    fig, (a1, a2) = plots.new_figure(10, 3.2, ncols=2, width_ratios=[3, 1])
    # Expert i's load fills [i - 0.5, i + 0.5]: what bars of width 1 draw, as one step patch per series instead of
    # one rectangle per expert (256 experts: 512 rectangles made a render ~5x slower)
    # (the capacity line first, so that the legend lists it first, as it did beside bars; lines draw above patches)
    edges = np.arange(res["num_experts"] + 1) - 0.5
    if res["capacity"] is not None:
        a1.axhline(res["capacity"], color=plots.COLORS["activations"], ls="--", label=bi("capacity", "容量"))
    a1.stairs(res["load"], edges, fill=True, color=plots.COLORS["idle"], label=bi("chosen", "被选中"))
    a1.stairs(res["kept_load"], edges, fill=True, color=plots.COLORS["compute"], label=bi("kept", "保留"))
    a1.set_xlabel(bi("expert", "专家"))
    a1.set_ylabel(bi("assignments", "分配次数"))
    a1.legend(fontsize=8)
    plots.title(a1, "Load per expert (one GPU's tokens)", "每个专家的负载（一块 GPU 的词元）")
    g = np.arange(res["ep"])
    a2.bar(g, res["gpu_load"], color=plots.COLORS["comm"])
    a2.axhline(np.mean(res["gpu_load"]), color="black", lw=0.8)
    a2.set_xlabel("EP rank")
    plots.title(a2, "Load per GPU", "每块 GPU 的负载")
    plt.show()


def explorer():
    """The chapter-11 explorer widget."""
    return base.build(controls(), compute, render, title=TITLE, links=LINKS)
