"""Chapter 06's two diagrams (what each rank holds under DDP / ZeRO-1/2/3, and the FSDP unit lifecycle): they draw
without error in English and in Chinese, every label is in the reader's language, and what they draw is the
package's own numbers (per-rank bytes from the memory formulas, the collectives in the simulated trainer's order)."""
from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from authoring import lang_audit as A
from distlearn.core.comm import VirtualCluster
from distlearn.zero_fsdp import plots as zp
from distlearn.zero_fsdp import simulation as fsdp

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    legend = ax.get_legend()
    return ([ax.get_title()] + [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_yticklabels()]
            + ([t.get_text() for t in legend.get_texts()] if legend else []))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("draw", [zp.zero_stages, zp.fsdp_lifecycle, zp.muon_forms])
def test_diagrams_draw_in_the_readers_language(draw, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = draw()
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    assert texts
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert sum(bool(CJK.search(t)) for t in texts) >= 5           # and so are the labels


def test_zero_stages_totals_are_the_memory_formula():
    import matplotlib.pyplot as plt

    with language("en"):
        ax = zp.zero_stages(dp=4)
        totals = [t.get_text() for t in ax.texts if t.get_text().endswith("Ψ bytes")]
    plt.close(ax.figure)
    assert totals == ["16Ψ bytes", "7Ψ bytes", "5.5Ψ bytes", "4Ψ bytes"]  # 16, 4 + 12/4, 2 + 14/4, 16/4


@pytest.mark.parametrize("num_units", [1, 3])
def test_lifecycle_follows_the_simulated_trainer(num_units):
    widths = [4, 3, 5, 2][: num_units + 1]
    trainer = fsdp.ShardedTrainer(fsdp.MLPUnits(widths, seed=0), VirtualCluster(2), lr=1e-2)
    rng = np.random.default_rng(0)
    trainer.step([rng.standard_normal((2, widths[0])) for _ in range(2)],
                 [rng.standard_normal((2, widths[-1])) for _ in range(2)])
    drawn = [(ph, u, e) for ph, u, e in zp.lifecycle_events(num_units) if e in ("all_gather", "reduce_scatter")]
    assert drawn == [(ph, u, k) for ph, u, k, _ in trainer.log]


def test_muon_forms_numbers_are_the_closed_forms():
    """3 matrices of 8 × 8 on 4 ranks: the all-gather form runs 3 Newton–Schulz on every rank and sends 3 · 3 · 2 · 8
    elements; the owner form at most 1 per rank, and rank 0 sends 3 · 16 rows of its matrix plus its shard of the other
    two, 2 · 16."""
    import matplotlib.pyplot as plt

    with language("en"):
        ax = zp.muon_forms(world_size=4, num_matrices=3)
        texts = [t.get_text() for t in ax.texts]
    plt.close(ax.figure)
    assert "busiest rank: 3 NS\nsends ≤ 144 elements" in texts
    assert "busiest rank: 1 NS\nsends ≤ 80 elements" in texts
    assert sum(t == "NS" for t in texts) == 4 * 3 + 4 * 3 + 3
