"""Chapter 01's FP8-recipe explorer leaves room for every label (issue 39 leftover): its legend sat inside the axes
and covered the bars in 246 of the 480 settings of its whole grid in English (the same test as chapter 08's figures,
tests/test_activation_plots.py), and in both languages the y label ran off the figure. Checked here at every recipe
and model with the extreme dp and ZeRO settings, in each language mode."""
import itertools

import pytest

from i18n_helpers import language
from test_activation_plots import _layout_problems, _shown_figures


@pytest.mark.parametrize("lang", ["en", "zh", "both"])
def test_fp8_recipe_explorer_leaves_room_for_every_label(lang, monkeypatch):
    import matplotlib.pyplot as plt

    from distlearn.precision import explorer_fp8 as E, fp8_recipes

    recipes = [k for k in fp8_recipes.RECIPES if k != "bf16-mixed"]
    problems, drawn = [], 0
    with language(lang):
        for recipe, model, dp, zero in itertools.product(recipes, E.MODELS, (1, 8, 512), (0, 3)):
            for fig in _shown_figures(monkeypatch, lambda: E.render(E.compute(recipe=recipe, model=model, dp=dp,
                                                                              zero_stage=zero))):
                drawn += 1
                problems += [f"{recipe} {model} dp={dp} ZeRO-{zero}: {p}" for p in _layout_problems(fig)]
            plt.close("all")
    assert drawn == len(recipes) * len(E.MODELS) * 6 and problems == []
