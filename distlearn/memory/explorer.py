"""Memory explorer (chapter 01): model-state bytes per GPU for a model, recipe, optimizer, dp, ZeRO stage and offload.

``compute`` wraps :func:`distlearn.memory.formulas.model_state_bytes`; ``plot_states`` draws stacked bars (params / grads /
optimizer) per GPU in GB with a GiB axis, against a GPU's memory; ``explorer()`` puts controls over both.
"""
from __future__ import annotations

from distlearn.core.i18n import bi, text
from distlearn.core.hardware import GPUS as HW_GPUS
from distlearn.memory.formulas import GB, GiB, OPTIMIZERS, PRECISION_LABELS, PRECISIONS, model_state_bytes
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

MiB = 2 ** 20
# GPU capacity, one convention for the whole course: the number in the card's name read as GB of 1e9 bytes
# ("A100 80GB" = 80e9 bytes), the same numbers as the planner's presets (distlearn.core.hardware.GPUS). That is a safe
# convention, not the card's size: an A100 80GB has 80 GiB of HBM. nvidia-smi's memory.total (NVIDIA_SMI_MIB
# below) counts it in MiB (81,920 MiB = 80 GiB), and CUDA's own total
# (torch.cuda.mem_get_info() returns (free, total) in bytes, from cudaMemGetInfo) is slightly less than that,
# e.g. 81,049 MiB = 85.0e9 bytes on an A100 80GB PCIe (deviceQuery-style "Total global mem", ekondis/mixbench
# issue #47); ``free`` is smaller again once the CUDA context exists. The datasheet figure is the conservative one.
GPUS = read_only({
    "RTX 4090 (24 GB)": 24e9,
    "A100 40GB": 40e9,
    "A100 80GB": HW_GPUS["a100-80gb"].memory_bytes,
    "H100 80GB (SXM)": HW_GPUS["h100-80gb"].memory_bytes,
    "H200 (141 GB)": HW_GPUS["h200"].memory_bytes,
})
# nvidia-smi --query-gpu=memory.total as printed (MiB): H100 81559, A100 80GB 81920 and A100 40GB 40960 MiB as
# listed in modal-labs/modal-client PR #2797 ("nvidia quotes GB on their GPUs not GiB"); RTX 4090 24564 and H200
# 143771 MiB as nvidia-smi prints them in public logs. For reference only: capacities above use the datasheet.
NVIDIA_SMI_MIB = read_only({"RTX 4090 (24 GB)": 24564, "A100 40GB": 40960, "A100 80GB": 81920, "H100 80GB (SXM)": 81559,
                  "H200 (141 GB)": 143771})
CUSTOM_SIZES_B = (0.125, 0.35, 1, 1.5, 3, 7, 8, 13, 30, 70, 175, 405, 1000)  # billions of parameters

T = read_only({
    "title": text("widgets.memory.title", "Model states per GPU", "每块 GPU 上的模型状态"),
    "model": text("widgets.memory.model", "Model", "模型"),
    "custom": text("widgets.memory.custom", "custom size", "自定义规模"),
    "size": text("widgets.memory.size", "Custom size (B params)", "自定义规模（十亿参数）"),
    "precision": text("widgets.memory.precision", "Precision recipe", "精度方案"),
    "optimizer": text("widgets.memory.optimizer", "Optimizer", "优化器"),
    "dp": text("widgets.memory.dp", "Data-parallel degree dp", "数据并行度 dp"),
    "zero": text("widgets.memory.zero", "ZeRO stage", "ZeRO 级别"),
    "off_opt": text("widgets.memory.off_opt", "Offload optimizer to CPU", "将优化器状态卸载到 CPU"),
    "off_par": text("widgets.memory.off_par", "Offload parameters to CPU (stage 3)", "将参数卸载到 CPU（需阶段 3）"),
    "gpu": text("widgets.memory.gpu", "GPU", "GPU 型号"),
    "params": text("widgets.memory.params", "parameters", "参数"),
    "grads": text("widgets.memory.grads", "gradients", "梯度"),
    "optim": text("widgets.memory.optim", "optimizer states", "优化器状态"),
    "ylabel": text("widgets.memory.ylabel", "GB (1e9 B) per GPU", "每块 GPU GB（1e9 字节）"),
    "gib": text("widgets.memory.gib", "GiB (2^30 B)", "GiB（2^30 字节）"),
    "capacity": text("widgets.memory.capacity", "GPU memory", "GPU 显存"),
})
OPTIMIZER_LABELS = read_only({
    "adam": ("Adam/AdamW (8 B)", "Adam/AdamW（8 字节）"),
    "adam-8bit": ("8-bit Adam (2 B)", "8 位 Adam（2 字节）"),
    "sgd-momentum": ("SGD + momentum (4 B)", "SGD + 动量（4 字节）"),
    "sgd": ("SGD (0 B)", "SGD（0 字节）"),
})


@base.within_controls(lambda: controls())
def compute(model: str = "llama3-8b", custom_billions: float = 7, precision: str = "mixed",
            optimizer: str = "adam", dp: int = 8, zero_stage: int = 0, offload_optimizer: bool = False,
            offload_params: bool = False, gpu: str = "A100 80GB") -> dict:
    """Bytes per GPU of model states for the chosen settings.

    ``model`` is a preset name or ``"custom"`` (then ``custom_billions`` × 1e9 parameters). Returns bytes
    (``params``, ``grads``, ``optimizer``, ``total``, ``cpu``), the same in GB and GiB (``*_gb`` / ``*_gib``),
    ``capacity`` (bytes of ``gpu``: the datasheet's GB × 1e9, like the planner), ``fits`` (model states alone fit: activations, the CUDA context and the
    allocator need more) and ``per_param`` (bytes/param unsharded). An invalid combination returns
    ``{"error": <bilingual message>}`` instead of raising.
    """
    try:
        num_params = (round(custom_billions * 1e9) if model == "custom" else PRESETS[model].num_parameters())
        m = model_state_bytes(num_params, dp=dp, zero_stage=zero_stage, precision=precision, optimizer=optimizer,
                              offload_optimizer=offload_optimizer, offload_params=offload_params)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    except KeyError:
        names = ", ".join(["custom", *PRESETS])
        return {"error": bi(f"unknown model {model!r}; choose one of: {names}", f"未知的模型 {model!r}；可选：{names}")}
    capacity = GPUS.get(gpu)
    if capacity is None:
        names = ", ".join(GPUS)
        return {"error": bi(f"unknown GPU {gpu!r}; choose one of: {names}", f"未知的 GPU {gpu!r}；可选：{names}")}
    out = {"num_params": num_params, "dp": dp, "zero_stage": zero_stage, "params": m.params, "grads": m.grads,
           "optimizer": m.optimizer, "total": m.total, "cpu": m.cpu_total, "capacity": capacity,
           "gpu": gpu, "fits": m.total <= capacity,
           "per_param": model_state_bytes(num_params, precision=precision, optimizer=optimizer).total / num_params}
    for k in ("params", "grads", "optimizer", "total", "cpu", "capacity"):
        out[k + "_gb"], out[k + "_gib"] = out[k] / GB, out[k] / GiB
    return out


def controls() -> dict:
    """The explorer's controls, keyed by :func:`compute`'s parameters."""
    models = [(f"{T['custom']}", "custom")] + [
        (f"{name} ({c.num_parameters() / 1e9:.2f} B)", name) for name, c in PRESETS.items()]
    return {
        "model": base.dropdown(T["model"], models, "llama3-8b"),
        "custom_billions": base.W.SelectionSlider(options=list(CUSTOM_SIZES_B), value=7,
                                                  description=str(T["size"]), continuous_update=False,
                                                  style=base.STYLE, layout=base.LAYOUT),
        "precision": base.dropdown(T["precision"], [(PRECISION_LABELS[p], p) for p in PRECISIONS], "mixed"),
        "optimizer": base.dropdown(T["optimizer"], [(OPTIMIZER_LABELS[o], o) for o in OPTIMIZERS], "adam"),
        "dp": base.log2_slider(T["dp"], 8, 1, 1024),
        "zero_stage": base.int_slider(T["zero"], 0, 0, 3, exact=True),
        "offload_optimizer": base.checkbox(T["off_opt"], False),
        "offload_params": base.checkbox(T["off_par"], False),
        "gpu": base.dropdown(T["gpu"], list(GPUS), "A100 80GB"),
    }


def plot_states(results: list[dict], labels: list[str], ax=None, title_en: str = "Model states per GPU",
                title_zh: str = "每块 GPU 上的模型状态"):
    """Stacked bars (params / grads / optimizer) in GB, one per result of :func:`compute`, with a GiB axis on the
    right and a dashed line at the first result's GPU capacity. Returns the axes."""
    from distlearn.core import plots

    if ax is None:
        _, ax = plots.new_figure(max(5.5, 1.3 * len(results) + 3), 3.8)
    bottom, bars = [0.0] * len(results), []
    for key, name in (("params", "params"), ("grads", "grads"), ("optimizer", "optim")):
        vals = [r[key] / GB for r in results]
        bars.append(ax.bar(labels, vals, bottom=bottom, color=plots.COLORS[key], label=T[name].render(sep="\n"),
                           width=0.6))
        bottom = [b + v for b, v in zip(bottom, vals)]
    for x, total in enumerate(bottom):  # the total on top: a 2 GB bar stays readable against an 80 GB GPU
        label = f"{total:,.0f} GB" if total >= 1000 else f"{total:.3g} GB"  # 6,490 GB, not 6.49e+03 GB / 写作 6,490 GB
        ax.annotate(label, (x, total), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=9)
    cap = results[0]["capacity"] / GB
    # the GPU's size in the legend: on its line a total near it ran over it / GPU 容量写进图例：写在虚线上会被相近的合计压住
    line = ax.axhline(cap, color="black", linestyle="--", linewidth=1,
                      label=bi(f"{T['capacity'].en}: {cap:.1f} GB", f"{T['capacity'].zh}：{cap:.1f} GB", sep="\n"))
    ax.set_ylabel(T["ylabel"].render(sep="\n"))  # both languages: one line each / 双语时各占一行
    ax.set_ylim(0, max(max(bottom), cap) * 1.15)
    sec = ax.secondary_yaxis("right", functions=(lambda g: g * GB / GiB, lambda g: g * GiB / GB))
    sec.set_ylabel(T["gib"].render(sep="\n"))
    # below the axes, two columns: never over a bar nor wider than the axes / 坐标区下方分两列：不压柱子，不比坐标区宽
    ax.legend(handles=[*bars, line], loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=8,
              frameon=False)
    plots.title(ax, title_en, title_zh)
    return ax


def render(result: dict) -> None:
    """Print the numbers and draw one stacked bar against the GPU's memory."""
    import matplotlib.pyplot as plt

    if "error" in result:
        print(result["error"])
        return
    r = result
    print(bi(f"Ψ = {r['num_params']:,} parameters, {r['per_param']:g} bytes/param before sharding",
             f"Ψ = {r['num_params']:,} 个参数，分片前每个参数 {r['per_param']:g} 字节", sep="\n"))
    for key, name in (("params", "params"), ("grads", "grads"), ("optimizer", "optim"), ("total", None)):
        label = str(T[name]) if name else bi("total", "合计")  # last: Chinese glyphs do not break the columns
        print(f"  {r[key + '_gb']:10.2f} GB  {r[key + '_gib']:10.2f} GiB   {label}")
    if r["cpu"]:
        print("  " + bi(f"in CPU memory (offload): {r['cpu_gb']:.2f} GB", f"CPU 内存中（卸载）：{r['cpu_gb']:.2f} GB"))
    verdict = (bi("model states fit; activations, CUDA context and allocator still need room",
                  "模型状态放得下；但激活值、CUDA 上下文和分配器缓存还需要空间") if r["fits"]
               else bi("model states alone do NOT fit", "仅模型状态就放不下"))
    print(f"  {r['gpu']}: {r['capacity_gb']:.1f} GB = {r['capacity_gib']:.1f} GiB → {verdict}")
    plot_states([r], [f"dp={r['dp']}, ZeRO-{r['zero_stage']}"])
    plt.show()


def active(values: dict) -> dict:
    """Which controls matter: the custom size only for a custom model, parameter offload only at ZeRO-3."""
    return {"custom_billions": values["model"] == "custom", "offload_params": values["zero_stage"] == 3}


def explorer():
    """The memory explorer widget."""
    return base.build(controls(), compute, render, title=T["title"], active=active)
