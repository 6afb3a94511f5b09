"""Explorer for chapter 09: DeepSpeed's own model-state estimate per GPU and per CPU beside the ZeRO paper's count.

``compute`` uses :func:`distlearn.deepspeed_fsdp.deepspeed.zero2_model_states_mem_needs` / ``zero3_...`` (equal to DeepSpeed
0.19.8's functions, tested) and :func:`distlearn.memory.formulas.model_state_bytes` (ZeRO paper, 16 B/param mixed
precision). Everything in GiB (2**30 bytes), as DeepSpeed prints it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import plots
from distlearn.deepspeed_fsdp.deepspeed import (largest_layer_params_of_config, zero2_model_states_mem_needs, zero3_model_states_mem_needs)
from distlearn.core.i18n import bi, text
from distlearn.memory.formulas import GiB, model_state_bytes
from distlearn.core.models import PRESETS
from distlearn.core import explorer as base

L_MODEL = text("dse.model", "Model", "模型")
L_GPN = text("dse.gpn", "GPUs per node", "每节点 GPU 数")
L_NODES = text("dse.nodes", "Nodes", "节点数")
L_STAGE = text("dse.stage", "ZeRO stage", "ZeRO 级别")
L_OFF = text("dse.offload", "Offload", "卸载")
L_INIT = text("dse.zero_init", "zero.Init (stage 3)", "zero.Init（阶段 3）")


def controls() -> dict:
    return {
        "model": base.dropdown(L_MODEL, list(PRESETS), "llama2-7b"),
        "gpus_per_node": base.log2_slider(L_GPN, 8, 1, 16),
        "num_nodes": base.log2_slider(L_NODES, 1, 1, 64),
        "zero_stage": base.int_slider(L_STAGE, 3, 2, 3),
        "offload": base.dropdown(L_OFF, [(("none", "不卸载"), "none"), (("optimizer → CPU", "优化器 → CPU"), "optimizer"),
                                         (("optimizer + params → CPU", "优化器 + 参数 → CPU"), "optimizer+params")],
                                 "none"),
        "zero_init": base.checkbox(L_INIT, True),
    }


@base.within_controls(lambda: controls())
def compute(model="llama2-7b", gpus_per_node=8, num_nodes=1, zero_stage=3, offload="none", zero_init=True) -> dict:
    """DeepSpeed's ``(cpu, gpu)`` bytes and the paper's GPU bytes for the setting; ``{"error": msg}`` if impossible."""
    cfg = PRESETS[model]
    n, g = cfg.num_parameters(), gpus_per_node * num_nodes
    if offload == "optimizer+params" and zero_stage != 3:
        return {"error": bi("Parameter offload needs ZeRO stage 3.", "参数卸载需要 ZeRO-3。")}
    if zero_stage == 2:
        cpu, gpu = zero2_model_states_mem_needs(n, gpus_per_node, num_nodes, offload != "none")
        largest = 0
    else:
        largest = largest_layer_params_of_config(cfg)
        cpu, gpu, _ = zero3_model_states_mem_needs(n, largest, gpus_per_node, num_nodes, offload != "none",
                                                   offload == "optimizer+params", zero_init)
    paper = model_state_bytes(n, dp=g, zero_stage=zero_stage, offload_optimizer=offload != "none",
                              offload_params=offload == "optimizer+params")
    return {"model": model, "num_params": n, "gpus": g, "largest_layer_params": largest, "ds_gpu": gpu, "ds_cpu": cpu,
            "paper_gpu": paper.total, "paper_cpu_per_gpu": paper.cpu_total}


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    fig, ax = plots.new_figure(7, 2.4)
    labels = [bi("ZeRO paper", "ZeRO 论文"), bi("DeepSpeed estimator", "DeepSpeed 估算")]
    values = [result["paper_gpu"] / GiB, result["ds_gpu"] / GiB]
    ax.barh(labels, values, color=[plots.COLORS["optimizer"], plots.COLORS["params"]])
    ax.set_xlabel(bi("GiB per GPU (model states only)", "每块 GPU 的 GiB（仅模型状态）", sep="\n"))
    plots.title(ax, f"{result['model']} on {result['gpus']} GPUs", f"{result['model']}，{result['gpus']} 块 GPU")
    plt.show()
    print(bi(f"DeepSpeed: {result['ds_gpu'] / GiB:.2f} GiB per GPU, {result['ds_cpu'] / GiB:.2f} GiB per node's CPU; "
             f"paper: {result['paper_gpu'] / GiB:.2f} GiB per GPU. Neither counts activations, buffers or the CUDA "
             "context.",
             f"DeepSpeed：每块 GPU {result['ds_gpu'] / GiB:.2f} GiB，每个节点 CPU {result['ds_cpu'] / GiB:.2f} GiB；"
             f"论文：每块 GPU {result['paper_gpu'] / GiB:.2f} GiB。两者都不含激活值、缓冲区和 CUDA 上下文。", sep="\n"))


def explorer():
    return base.build(controls(), lambda **v: compute(**v), render,
                      title=bi("DeepSpeed memory estimator", "DeepSpeed 显存估算器"))
