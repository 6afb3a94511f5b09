"""Chapter 01's figures leave room for every label (issue 39 leftovers), checked with chapter 08's harness
(tests/test_activation_plots.py: no text or bar under a legend, no legend wider than its axes, nothing cut by the
figure's edge) plus one more rule: no two texts drawn inside the axes overlap. In English, Chinese and both.

- The FP8-recipe explorer: its legend sat inside the axes and covered the bars in 246 (en), 306 (zh) and 309 (both)
  of the 480 settings of its whole control grid, and in both languages its y label ran off the figure in all 480.
- The memory explorer: in both languages its legend was wider than its axes in every setting, and the GPU-memory
  label on the dashed line ran under the bar's total whenever the total came near the GPU's size.
- The chapter's two static figures (what one parameter costs; ZeRO's Figure 1)."""
import itertools

import pytest

from i18n_helpers import language, overlapping_labels
from test_activation_plots import _layout_problems, _shown_figures

LANGS = ["en", "zh", "both"]


def _problems(fig) -> list[str]:
    """The harness's problems, and any two texts inside the same axes (totals, notes) that overlap."""
    out = _layout_problems(fig)
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        out += [f"{a!r} over {b!r}" for a, b in overlapping_labels(texts)]
    return out


def _grid_problems(monkeypatch, lang, render, settings) -> tuple[int, list[str]]:
    """(figures drawn, problems) of ``render(**s)`` for every ``s`` in ``settings``, in language ``lang``."""
    import matplotlib.pyplot as plt

    problems, drawn = [], 0
    with language(lang):
        for s in settings:
            for fig in _shown_figures(monkeypatch, lambda: render(**s)):
                drawn += 1
                problems += [f"{s}: {p}" for p in _problems(fig)]
            plt.close("all")
    return drawn, problems


# ---------------------------------------------------------------------------------------- the FP8-recipe explorer
def _fp8_settings(dps, zeros):
    from distlearn.precision import explorer_fp8 as E, fp8_recipes

    recipes = [k for k in fp8_recipes.RECIPES if k != "bf16-mixed"]
    return [dict(recipe=r, model=m, dp=d, zero_stage=z)
            for r, m, d, z in itertools.product(recipes, E.MODELS, dps, zeros)]


def _fp8_render(**s):
    from distlearn.precision import explorer_fp8 as E

    E.render(E.compute(**s))


@pytest.mark.parametrize("lang", LANGS)
def test_fp8_recipe_explorer_leaves_room_for_every_label(lang, monkeypatch):
    """Every recipe and model at the extreme dp (1, 8, 512: the tallest and the shortest bars, titles of 1 to 3
    digits) and ZeRO stages (0, 3). The legend's place does not depend on the bars; the whole grid is the extended
    test below."""
    settings = _fp8_settings((1, 8, 512), (0, 3))
    drawn, problems = _grid_problems(monkeypatch, lang, _fp8_render, settings)
    assert drawn == len(settings) == 90 and problems == []  # 5 recipes × 3 models × 3 dp × 2 stages


@pytest.mark.extended
@pytest.mark.parametrize("lang", LANGS)
def test_fp8_recipe_explorer_whole_grid(lang, monkeypatch):
    """All 600 settings the controls reach (5 recipes × 3 models × 10 dp × 4 ZeRO stages); about 55 s a language."""
    from distlearn.precision import explorer_fp8 as E

    c = E.controls()
    settings = _fp8_settings(c["dp"].options, range(c["zero_stage"].min, c["zero_stage"].max + 1))
    drawn, problems = _grid_problems(monkeypatch, lang, _fp8_render, settings)
    assert drawn == len(settings) == 600 and problems == []


# ------------------------------------------------------------------------------------------- the memory explorer
def _near_capacity() -> list[dict]:
    """For each GPU, the reachable settings whose total comes closest to its size from below and from above (where
    a total and a label on the GPU's line would meet), searched over every model, size, recipe, optimizer, dp
    (1, 4, …, 1024), ZeRO stage and offload (about 9,000 compute() calls, no drawing)."""
    from distlearn.memory import explorer as M

    c = M.controls()
    models = [("custom", b) for b in c["custom_billions"].options] + [
        (m, 7) for _, m in c["model"].options if m != "custom"]
    stages = [(z, oo, op) for z in range(4) for oo in (False, True) for op in ((False, True) if z == 3 else (False,))]
    best = {}
    for (model, size), (_, p), (_, o), dp, (z, oo, op) in itertools.product(
            models, c["precision"].options, c["optimizer"].options, c["dp"].options[::2], stages):
        s = dict(model=model, custom_billions=size, precision=p, optimizer=o, dp=dp, zero_stage=z,
                 offload_optimizer=oo, offload_params=op)
        total = M.compute(**s)["total"]
        for gpu, cap in M.GPUS.items():
            side = total > cap
            if (gpu, side) not in best or abs(total / cap - 1) < best[gpu, side][0]:
                best[gpu, side] = (abs(total / cap - 1), dict(s, gpu=gpu))
    return [s for _, s in best.values()]


def _memory_settings(wide: bool) -> list[dict]:
    """The settings that crowd the memory explorer's figure: the smallest and largest models (bars far below and far
    above the GPU line; 1- to 5-digit ticks and totals), dp 1 and 1024 (the longest bar name), ZeRO-0 and ZeRO-3 with
    both offloads, the smallest and largest GPU; then the totals nearest each GPU's size. Precision, optimizer and
    offload move only the bar's height, which the models already span; ``wide`` adds them (and llama3-8b) anyway."""
    models = [("custom", 0.125), ("llama3.1-405b", 7), ("custom", 1000)] + ([("llama3-8b", 7)] if wide else [])
    recipes = [("fp32", "adam"), ("mixed", "sgd")] if wide else [("mixed", "adam")]
    stages = [(z, off) for z in (0, 3) for off in (False, True)] if wide else [(0, False), (3, True)]
    grid = [dict(model=m, custom_billions=b, precision=p, optimizer=o, dp=d, zero_stage=z, offload_optimizer=off,
                 offload_params=off and z == 3, gpu=g)
            for (m, b), (p, o), d, (z, off), g in itertools.product(
                models, recipes, (1, 1024), stages, ("RTX 4090 (24 GB)", "H200 (141 GB)"))]
    return grid + _near_capacity()


def _memory_render(**s):
    from distlearn.memory import explorer as M

    M.render(M.compute(**s))


@pytest.mark.parametrize("lang", LANGS)
def test_memory_explorer_leaves_room_for_every_label(lang, monkeypatch):
    """Before: in both languages the legend was wider than the axes in all 34 settings, and in 2 of them the bar's
    total ran over the GPU-memory label."""
    settings = _memory_settings(wide=False)
    drawn, problems = _grid_problems(monkeypatch, lang, _memory_render, settings)
    assert drawn == len(settings) == 24 + 10 and problems == []


@pytest.mark.extended
@pytest.mark.parametrize("lang", LANGS)
def test_memory_explorer_wider_grid(lang, monkeypatch):
    """128 settings and the 10 nearest the GPUs' sizes; about 20 s a language."""
    settings = _memory_settings(wide=True)
    drawn, problems = _grid_problems(monkeypatch, lang, _memory_render, settings)
    assert drawn == len(settings) == 128 + 10 and problems == []


# ---------------------------------------------------------------------------------------- the chapter's figures
def _chapter_figures():
    import matplotlib.pyplot as plt

    from distlearn.memory import explorer as M, plots as MP

    yield "bytes per parameter", lambda: (MP.bytes_per_parameter(), plt.show())
    zero = [M.compute(model="custom", custom_billions=7.5, dp=64, zero_stage=z, gpu="A100 80GB") for z in range(4)]
    yield "ZeRO Figure 1", lambda: (M.plot_states(zero, [f"ZeRO-{z}" for z in range(4)], title_en="Ψ = 7.5B, dp = 64",
                                                  title_zh="Ψ = 75 亿，dp = 64"), plt.show())


@pytest.mark.parametrize("lang", LANGS)
def test_chapter_01_figures_leave_room_for_every_label(lang, monkeypatch):
    import matplotlib.pyplot as plt

    problems, drawn = [], 0
    with language(lang):
        for name, draw in _chapter_figures():
            for fig in _shown_figures(monkeypatch, draw):
                drawn += 1
                problems += [f"{name}: {p}" for p in _problems(fig)]
            plt.close("all")
    assert drawn == 2 and problems == []
