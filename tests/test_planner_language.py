"""Chapter 14's planner texts in the reader's language: each published run's source and reading in Chinese, the
published-runs table, the rooflines table and plot (authoring.lang_audit's rule: under en no Chinese, under zh no
line a Chinese reader needs English for)."""
from __future__ import annotations

import re

import matplotlib
import pytest

from distlearn.core import i18n
from authoring import lang_audit as A
from distlearn import planning as P
from distlearn.core.models import get_preset
from distlearn.planning import rooflines as R

from i18n_helpers import language

matplotlib.use("Agg")


def _figures(s: str) -> list[str]:
    return sorted(x.replace(",", "") for x in re.findall(r"\d[\d,.]*\d|\d", s))


@pytest.mark.parametrize("name", list(P.PUBLISHED_RUNS))
def test_every_published_run_has_its_source_and_reading_in_chinese(name):
    run = P.PUBLISHED_RUNS[name]
    for field in ("source", "reading"):
        en, zh = run[field], run[f"{field}_zh"]
        assert A.readable(en, "en") and A.english_words(en), (field, en)
        assert A.CJK.search(zh) and A.readable(zh, "zh") and zh != en, (field, zh)
    # the Chinese cites the same figures as the English (GPU counts, degrees, sections, rates; DeepSeek's "180K
    # GPU hours" is written 18 万 in Chinese)
    en_figures, zh_figures = _figures(run["source"]), _figures(run["source_zh"])
    if name == "deepseek-v3":
        en_figures.remove("180"), zh_figures.remove("18")
    assert en_figures == zh_figures, name
    with language("en"):
        assert P.run_source(name) == run["source"] and P.run_reading(name) == run["reading"]
    with language("zh"):
        assert P.run_source(name) == run["source_zh"] and P.run_reading(name) == run["reading_zh"]
    r = P.compare_published(name)
    assert (r["source_zh"], r["reading_zh"]) == (run["source_zh"], run["reading_zh"])


def test_chinese_run_texts_use_the_glossary_forms():
    from authoring.parity import forbidden_problems

    texts = [run[f] for run in P.PUBLISHED_RUNS.values() for f in ("source_zh", "reading_zh")]
    assert not [(t, hit) for t in texts for hit, _ in forbidden_problems(t)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_published_and_roofline_tables_follow_the_language(lang):
    with language(lang):
        pub, roof = P.published_table().splitlines(), R.roofline_table().splitlines()
    for line in pub + roof:
        assert A.readable(line, lang), line
    assert pub[0].split()[0] == {"en": "run", "zh": "运行"}[lang] and pub[1].startswith("-- ")  # a block title
    assert pub[1].startswith({"en": "-- calibration", "zh": "-- 校准"}[lang]) and pub[2].startswith("megatron-gpt-1.7b")
    assert roof[0].split()[0] == {"en": "kind", "zh": "类型"}[lang] and len(roof) == 1 + len(R.KINDS)
    rows = [x for x in pub if x.split() and x.split()[0] in P.PUBLISHED_RUNS]
    assert len(rows) == len(P.PUBLISHED_RUNS) and len({P.display_width(x) for x in [pub[0]] + rows}) == 1
    with language("both"):
        both = P.published_table().splitlines()
    assert both[0] == pub[0] if lang == "en" else both[1] == pub[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_roofline_plot_texts_follow_the_language(lang):
    import matplotlib.pyplot as plt
    from distlearn.planning.plots import plot_rooflines

    with language(lang):
        fig = plot_rooflines({"fsdp": (8192, i18n.bi("8192 tokens / micro-batch", "每个微批次 8192 个词元"))},
                             model=get_preset("llama3.1-405b"))
        ax = fig.axes[0]
        texts = [ax.get_title(), ax.get_ylabel()] + [t.get_text() for t in ax.get_xticklabels()]
        texts += [t.get_text() for t in ax.texts]
    plt.close(fig)
    assert all(t for t in texts[:2])
    for t in texts:
        assert A.readable(t, lang), t


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_plan_diagram_draws_in_the_readers_language(lang):
    """Issue 34: chapter 14 had no picture of its core idea. plan_diagram draws a plan's GPUs as boxes (one block of
    tp per stage, one row per replica, arrows for PP and DP), the busiest GPU's memory against the capacity and the
    step time by part; every label follows the course language."""
    import matplotlib.pyplot as plt
    from distlearn.planning.plots import plan_diagram

    plan = P.Plan(dp=4, tp=8, pp=2, zero_stage=2, recompute="selective", micro_batch_size=1, num_microbatches=128)
    with language(lang):
        try:
            fig = plan_diagram(get_preset("llama3-70b"), plan, global_batch=512, seq_len=8192)
            fig.canvas.draw()
            layout = fig.axes[0]
            assert sum(type(p).__name__ == "Rectangle" for p in layout.patches) == 4 * 2 * 8   # one box per GPU
            arrows = [c for c in layout.get_children() if type(c).__name__ == "Annotation"]
            assert len(arrows) == 4 * (2 - 1) + (4 - 1)                # PP sends per replica + DP links between them
            est = P.evaluate(get_preset("llama3-70b"), plan, global_batch=512, seq_len=8192, gpu="h100-80gb")
            heights = sum(p.get_height() for p in fig.axes[1].patches)
            assert heights == pytest.approx(sum(v for k, v in est.memory.items() if k != "total") / 1e9)
            texts = [fig._supxlabel.get_text()] + [ax.get_title() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes]
            texts += [t.get_text() for ax in fig.axes for t in ax.texts]
            texts += [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
            words = " ".join(texts)
            cjk = re.search(r"[\u4e00-\u9fff]", words)
            if lang == "en":
                assert not cjk and "replica 3" in words and "stage 1" in words and "capacity" in words, words
            else:
                assert "副本 3" in words and "阶段 1" in words and "容量" in words and "激活值" in words, words
                assert not re.search(r"\b(replica|stage|capacity|activations|seconds)\b", words), words
        finally:
            plt.close("all")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_validation_plot_draws_every_run_in_its_group_in_the_readers_language(lang):
    """Issue 38: chapter 14's picture of calibration apart from validation: one point per evaluated published run at
    its ratio (calibration, scored, not modelled, in that order from the top), the ±10 % and ±20 % bands, the sources
    named under the figure; every text follows the course language."""
    import matplotlib.pyplot as plt
    from distlearn.planning import calibration as C
    from distlearn.planning.plots import plot_validation

    report = C.validation_report()
    with language(lang):
        fig = plot_validation()
        fig.canvas.draw()
        ax = fig.axes[0]
        names = [t.get_text() for t in ax.get_yticklabels()]
        points = {n: line.get_xdata()[0] for n, line in zip(names, ax.lines[1:])}
        texts = [ax.get_title(), ax.get_xlabel()] + [t.get_text() for t in ax.texts] + [t.get_text() for t in fig.texts]
    plt.close(fig)
    order = list(report.calibration) + list(report.ratios) + list(report.excluded)
    assert names == order
    ratios = {**report.calibration, **report.ratios, **{n: v[0] for n, v in report.excluded.items()}}
    assert all(points[n] == pytest.approx(min(ratios[n], 1.7)) for n in order)
    spans = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert spans == [2 * C.TOLERANCE, 2 * C.WIDE]
    assert any("Narayanan" in t for t in texts) and any("DeepSeek-V3" in t for t in texts)
    for t in texts:
        assert A.readable(t, lang), t
