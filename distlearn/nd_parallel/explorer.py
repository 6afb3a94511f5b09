"""Explorer for chapter 12: a mesh shape (pp × dp × cp × tp) → which ranks form each group of one rank, drawn node by
node; what each group sends per step; the memory of that rank — for the lab's toy model or a Llama 3 model, fp32
as in the lab (:mod:`distlearn.nd_parallel.simulation`)."""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.nd_parallel import simulation as N
from distlearn.core.i18n import bi, text
from distlearn.core.models import PRESETS
from distlearn.nd_parallel.plots import MAX_DRAWN, mesh_figure
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

MODELS = read_only({"toy-nd": (N.TOY_MODEL, 16), "llama3-8b": (PRESETS["llama3-8b"], 8192),
          "llama3-70b": (PRESETS["llama3-70b"], 8192)})
L_MODEL = text("nd_widget.model", "model (sequence length)", "模型（序列长度）")
L_TP = text("nd_widget.tp", "tensor-parallel degree tp (+ SP)", "张量并行度 tp（+ 序列并行）")
L_CP = text("nd_widget.cp", "context-parallel degree cp", "上下文并行度 cp")
L_PP = text("nd_widget.pp", "pipeline-parallel degree pp", "流水线并行度 pp")
L_DP = text("nd_widget.dp", "data-parallel degree dp (FSDP2)", "数据并行度 dp（FSDP2）")
L_NODE = text("nd_widget.node", "GPUs per node", "每个节点的 GPU 数")
L_RANK = text("nd_widget.rank", "rank to follow", "要查看的 rank")
L_M = text("nd_widget.m", "micro-batches per step m", "每步的微批次数 m")
TITLE = text("nd_widget.title", "N-D parallelism: groups, traffic and memory of one rank",
             "N 维并行：一个 rank 的组、通信量与显存")


@base.within_controls(lambda: controls())
def compute(model: str = "toy-nd", tp: int = 2, cp: int = 1, pp: int = 2, dp: int = 2, gpus_per_node: int = 4,
            rank: int = 0, num_microbatches: int = 2) -> dict:
    """The mesh ``(pp, dp, cp, tp)``, ZeRO-3, micro-batch 1, fp32: ``rank``'s ``coords``, its ``groups`` by
    dimension, ``nodes`` each of its groups spans, its ``traffic`` (:func:`distlearn.nd_parallel.simulation.group_traffic`),
    ``sent`` (bytes per step by dimension) and ``memory`` (:func:`~distlearn.nd_parallel.simulation.predict_rank_memory`, None
    for cp > 1), or ``{"error": message}`` for an impossible setting."""
    cfg, seq = MODELS[model]
    try:
        lay = N.Layout(pp=pp, dp=dp, cp=cp, tp=tp, micro_batch_size=1, num_microbatches=num_microbatches)
        if rank >= lay.world_size:
            raise DistlearnValueError("rank", f"rank {rank} does not exist: this mesh has {lay.world_size} ranks "
                                              f"(0 … {lay.world_size - 1}).",
                                      f"rank {rank} 不存在：这个网格只有 {lay.world_size} 个 rank"
                                      f"（0 … {lay.world_size - 1}）。")
        if pp > cfg.num_layers:
            raise DistlearnValueError("pp", f"pp = {pp} > {cfg.num_layers} layers: a stage would be empty.",
                                      f"pp = {pp} > {cfg.num_layers} 层：会有空的流水线段。")
        traffic = N.group_traffic(cfg, lay, rank, seq_len=seq)
        memory = N.predict_rank_memory(cfg, lay, rank, seq_len=seq) if cp == 1 else None
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    c = N.coords(rank, lay)
    return {"model": model, "seq_len": seq, "layout": lay, "rank": rank, "coords": c, "gpus_per_node": gpus_per_node,
            "groups": {d: N.group_of(rank, lay, d) for d in N.DIMS},
            "nodes": {d: len({r // gpus_per_node for r in N.group_of(rank, lay, d)}) for d in N.DIMS},
            "traffic": traffic, "sent": N.bytes_sent_per_step(traffic), "memory": memory,
            "layers": N.stage_layers(cfg.num_layers, pp, c["pp"])}


def controls() -> dict:
    return {
        "model": base.dropdown(L_MODEL, [(f"{k} (s = {s:,})", k) for k, (_, s) in MODELS.items()], "toy-nd"),
        "tp": base.log2_slider(L_TP, 2, 1, 8),
        "cp": base.log2_slider(L_CP, 1, 1, 4),
        "pp": base.log2_slider(L_PP, 2, 1, 8),
        "dp": base.log2_slider(L_DP, 2, 1, 8),
        "gpus_per_node": base.log2_slider(L_NODE, 4, 4, 8),
        "rank": base.int_slider(L_RANK, 0, 0, 63),
        "num_microbatches": base.log2_slider(L_M, 2, 1, 16),
    }


def _fmt(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    r, lay = result, result["layout"]
    print(bi(f"{r['model']}, s = {r['seq_len']:,}: {lay.describe()} = {lay.world_size} ranks, "
             f"{r['gpus_per_node']} GPUs per node, fp32",
             f"{r['model']}，s = {r['seq_len']:,}：{lay.describe()} = {lay.world_size} 个 rank，"
             f"每节点 {r['gpus_per_node']} 块 GPU，fp32", sep="\n"))
    first, last = r["layers"]
    print(bi(f"rank {r['rank']}: coordinates {r['coords']}, layers {first}–{last - 1}",
             f"rank {r['rank']}：坐标 {r['coords']}，第 {first}–{last - 1} 层", sep="\n"))
    for d in ("tp", "cp", "dp", "pp"):
        g = r["groups"][d]
        shown = ", ".join(map(str, g[:12])) + (" …" if len(g) > 12 else "")
        one_node = r["nodes"][d] == 1
        link_en = "NVLink (one node)" if one_node else f"network ({r['nodes'][d]} nodes)"
        link_zh = "经由 NVLink（同一节点）" if one_node else f"经由网络（{r['nodes'][d]} 个节点）"
        sent = _fmt(r["sent"].get(d, 0.0))
        calls = sum(t.calls for t in r["traffic"] if t.dim == d)
        print(bi(f"  {d}: group [{shown}] over {link_en}; {calls} collectives per step, sends {sent}",
                 f"  {d}：组 [{shown}]，{link_zh}；每步 {calls} 次集合通信，发送 {sent}"))
    for t in r["traffic"]:
        print(f"    {t.dim} {t.collective:14s} × {t.calls:4d}  {_fmt(t.bytes_per_call):>10s}  {t.label()}")
    m = r["memory"]
    if m is None:
        print(bi("memory: the course's per-rank model does not cover cp > 1 (chapter 10 measures it)",
                 "显存：课程的每 rank 模型不包含 cp > 1（第 10 章对其做了测量）"))
    else:
        print(bi(f"memory of rank {r['rank']}: parameters {_fmt(m.params)}, gradients {_fmt(m.grads)}, Adam "
                 f"{_fmt(m.optimizer)}, activations {_fmt(m.activations)}; total {_fmt(m.total)}",
                 f"rank {r['rank']} 的显存：参数 {_fmt(m.params)}，梯度 {_fmt(m.grads)}，Adam {_fmt(m.optimizer)}，"
                 f"激活值 {_fmt(m.activations)}；合计 {_fmt(m.total)}", sep="\n"))
    if lay.world_size <= MAX_DRAWN:
        mesh_figure(lay.shape, r["rank"], r["gpus_per_node"])
        plt.show()
    else:
        print(bi(f"({lay.world_size} ranks: too many to draw)", f"（{lay.world_size} 个 rank：太多，不作图）"))


def explorer():
    """The chapter-12 explorer widget."""
    return base.build(controls(), compute, render, title=TITLE)
