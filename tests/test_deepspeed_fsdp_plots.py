"""Chapter 09's diagram (ZeRO-3, hpZ and HSDP on 2 nodes of 2 ranks): it draws without error in English and in
Chinese, every label is in the reader's language, and the process groups it draws are the ones the real engines use
(the same (operation, group size) pairs that tests/test_zero_comm.py measures on four processes)."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.deepspeed_fsdp import plots as dp

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    legend = ax.get_legend()
    return ([ax.get_title()] + [t.get_text() for t in ax.texts]
            + ([t.get_text() for t in legend.get_texts()] if legend else []))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_hierarchy_diagram_draws_in_the_readers_language(lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = dp.hierarchy_diagram()
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    assert texts
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "node 1" in texts
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert "节点 1" in texts and "node 1" not in texts
        assert sum(bool(CJK.search(t)) for t in texts) >= 10          # and so are the labels


def test_hierarchy_diagram_draws_the_measured_process_groups():
    # tests/test_zero_comm.py::test_hpz_fsdp2_int_reshard_and_hsdp_on_the_real_engines measures these on 4 processes
    assert dp.group_sizes("hpz") == {("all_gather", 4), ("all_gather", 2), ("reduce_scatter", 4)}
    assert dp.group_sizes("hsdp") == {("all_gather", 2), ("reduce_scatter", 2), ("all_reduce", 2)}
    assert dp.group_sizes("zero3") == {("all_gather", 4), ("reduce_scatter", 4)}
    assert dp.group_sizes("hpz") != dp.group_sizes("hsdp")
