"""Explorer for chapter 01: model-state bytes per GPU of an FP8 recipe (Transformer Engine, DeepSeek-V3, torchao
float8 on FSDP2) beside the bf16 baseline, for a model, dp and ZeRO stage.

``compute`` wraps :func:`distlearn.precision.fp8_recipes.recipe_state_bytes`; bars are parameters, gradients, optimizer
states and the FP8 weight copies (per replica: never divided by dp).
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.precision import fp8_recipes
from distlearn.core import plots
from distlearn.core.i18n import bi, text
from distlearn.memory.formulas import GB
from distlearn.core.models import PRESETS
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

MODELS = ("llama3-8b", "llama3-70b", "llama3.1-405b")
T = read_only({
    "title": text("widgets.fp8_recipes.title", "What each FP8 recipe keeps per GPU", "每种 FP8 方案在每块 GPU 上保留什么"),
    "recipe": text("widgets.fp8_recipes.recipe", "recipe", "方案"),
    "model": text("widgets.fp8_recipes.model", "model", "模型"),
    "dp": text("widgets.fp8_recipes.dp", "data-parallel degree dp", "数据并行度 dp"),
    "zero": text("widgets.fp8_recipes.zero", "ZeRO stage", "ZeRO 级别"),
    "ylabel": text("widgets.fp8_recipes.ylabel", "GB (1e9 B) per GPU", "每块 GPU 的 GB（1e9 字节）"),
})
PARTS = read_only({"params": ("parameters", "参数"), "grads": ("gradients", "梯度"), "optimizer": ("optimizer states", "优化器状态"),
         "fp8_weights": ("FP8 weight copies", "FP8 权重副本")})
COLORS = read_only({"params": plots.COLORS["params"], "grads": "#DD8452", "optimizer": "#55A868", "fp8_weights": "#C44E52"})


@base.within_controls(lambda: controls())
def compute(recipe: str = "te-fp8", model: str = "llama3-8b", dp: int = 8, zero_stage: int = 1) -> dict:
    psi = PRESETS[model].num_parameters() if model in PRESETS else None
    if psi is None:
        return {"error": bi(f"unknown model {model}", f"未知模型 {model}")}
    rows = {k: fp8_recipes.recipe_state_bytes(k, psi, dp=dp, zero_stage=zero_stage)
            for k in dict.fromkeys(["bf16-mixed", recipe])}
    return {"recipe": recipe, "model": model, "psi": psi, "dp": dp, "zero_stage": zero_stage, "rows": rows,
            "per_param": fp8_recipes.bytes_per_param(recipe)}


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    pp = res["per_param"]
    print(bi(f"{fp8_recipes.get_recipe(res['recipe']).title_en}: {pp['total']:.4g} B/param unsharded "
             f"({pp['params']:g} params + {pp['grads']:g} grads + {pp['optimizer']:g} optimizer + "
             f"{pp['fp8_weights']:.4g} FP8 copies)",
             f"{fp8_recipes.get_recipe(res['recipe']).title_zh}：不分片时每个参数 {pp['total']:.4g} 字节"
             f"（参数 {pp['params']:g} + 梯度 {pp['grads']:g} + 优化器 {pp['optimizer']:g} + FP8 副本 {pp['fp8_weights']:.4g}）"))
    for key, r in res["rows"].items():
        print(bi(f"  {key:<22} {r.total / GB:8.1f} GB per GPU ({res['model']}, dp = {res['dp']}, ZeRO-{res['zero_stage']})",
                 f"  {key:<22} 每块 GPU {r.total / GB:8.1f} GB（{res['model']}，dp = {res['dp']}，ZeRO-{res['zero_stage']}）"))
    fig, ax = plots.new_figure(6.5, 3.0)
    names = list(res["rows"])
    bottom = [0.0] * len(names)
    for part, (en, zh) in PARTS.items():
        vals = [getattr(res["rows"][n], part) / GB for n in names]
        ax.bar(names, vals, bottom=bottom, color=COLORS[part], label=bi(en, zh, sep="\n"))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel(T["ylabel"].render(sep="\n"))  # both languages: one line each / 双语时各占一行
    # the legend beside the axes, never over a tall bar; both languages one line each / 图例放在坐标区右侧，不会压住高的柱子；双语时各占一行
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plots.title(ax, f"{res['model']}, dp = {res['dp']}, ZeRO-{res['zero_stage']}",
                f"{res['model']}，dp = {res['dp']}，ZeRO-{res['zero_stage']}")
    plt.show()


def controls() -> dict:
    recipes = [((r.title_en, r.title_zh), k) for k, r in fp8_recipes.RECIPES.items() if k != "bf16-mixed"]
    return {"recipe": base.dropdown(T["recipe"], recipes, "te-fp8"),
            "model": base.dropdown(T["model"], list(MODELS), "llama3-8b"),
            "dp": base.log2_slider(T["dp"], 8, 1, 512),
            "zero_stage": base.int_slider(T["zero"], 1, 0, 3, exact=True)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=T["title"])
