"""Chapters that read as one course (issue 14, item 7): every chapter ends the same way — its exercises, their
answers and the next chapter (the last one: back to the course map) — in both languages; and a number the prose
quotes is the one the code prints."""
import re

import jupytext
import nbformat
import pytest

from authoring.paths import ROOT

CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md") if not p.name.startswith("00"))


def _last_pair(path):
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "markdown"]
    en = [c for c in cells if "lang-en" in c.metadata.get("tags", [])][-1].source
    zh = [c for c in cells if "lang-zh" in c.metadata.get("tags", [])][-1].source
    return en, zh


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_chapter_ends_with_exercises_answers_and_the_next_step(path):
    en, zh = _last_pair(path)
    k = CHAPTERS.index(path)
    for text in (en, zh):
        assert f"(../exercises/{path.stem}.ipynb)" in text and f"(../solutions/{path.stem}.ipynb)" in text, text
    if k + 1 < len(CHAPTERS):
        nxt = CHAPTERS[k + 1].stem
        assert re.search(rf"^\*\*Next:\*\* \[{nxt[:2]} · [^\]]+\]\({nxt}\.ipynb\)\.$", en, re.M), en
        assert re.search(rf"^\*\*下一章：\*\*\[{nxt[:2]} · [^\]]+\]\({nxt}\.ipynb\)。$", zh, re.M), zh
    else:
        assert "**Back to:** [the course map](00_welcome.ipynb)." in en and "**返回：**[课程地图](00_welcome.ipynb)。" in zh
    assert "Next /" not in en + zh and "下一章 / Next" not in zh  # one language per cell


def test_chapter_14_quotes_the_backward_time_it_prints():
    nb = nbformat.read(ROOT / "notebooks" / "14_planning.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    backward = re.search(r"backward of one micro-batch: (\d\.\d\d) s", printed).group(1)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"backward takes about {backward} s" in prose and f"反向传播只要约 {backward} 秒" in prose
