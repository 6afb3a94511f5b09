"""Every chapter's core-idea diagram (issue 34), as every stored notebook shows it: the bilingual chapter and its
monolingual copies ``courses/en`` and ``courses/zh`` each keep, in the cell that draws it
(:data:`browser_harness.CORE_DIAGRAMS`), a PNG picture of real size, introduced by prose in the reader's language
(the prose cell just above it; in the bilingual notebook the English and the Chinese one). The browser checks of
the same pictures: tests/test_browser.py (JupyterLab) and tests/test_website.py (the website)."""
from __future__ import annotations

import base64
import re
import struct

import nbformat
import pytest

import browser_harness as bh
from authoring import copies, lang_audit as A, parity

CJK = re.compile(r"[\u4e00-\u9fff]")


def png_size(data: str) -> tuple[int, int]:
    """(width, height) in pixels of a base64 PNG, from its IHDR chunk; (0, 0) for anything else."""
    raw = base64.b64decode(data)
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        return 0, 0
    return struct.unpack(">II", raw[16:24])


def diagram_problems(nb, stem: str, langs: tuple[str, ...]) -> list[str]:
    """What is wrong with chapter ``stem``'s diagram in notebook ``nb`` whose prose is in ``langs``."""
    try:
        i = bh.diagram_cell(nb, stem)
    except LookupError as exc:
        return [str(exc)]
    problems = []
    sizes = [png_size(o["data"]["image/png"]) for o in nb.cells[i].get("outputs", [])
             if "image/png" in o.get("data", {})]
    if not any(w >= 300 and h >= 100 for w, h in sizes):
        problems.append(f"{stem}: the diagram cell {i} has no picture of real size ({sizes})")
    for lang in langs:
        above = next((c for c in reversed(nb.cells[:i]) if c.cell_type == "markdown"
                      and parity.cell_language(c) in (lang, None)), None)
        text = above.source if above is not None else ""
        ok = bool(text.strip()) and (CJK.search(text) if lang == "zh" else not CJK.search(text))
        if not ok or not all(A.readable(ln, lang) for ln in text.splitlines() if not ln.startswith(("|", "$"))):
            problems.append(f"{stem}: the prose above the diagram is not {lang}: {text[:120]!r}")
    return problems


@pytest.mark.parametrize("stem", sorted(bh.CORE_DIAGRAMS))
def test_each_chapter_shows_its_diagram_with_prose_in_each_language(stem):
    rel = f"notebooks/{stem}.ipynb"
    problems = diagram_problems(nbformat.read(bh.ROOT / rel, as_version=4), stem, ("en", "zh"))
    for lang in ("en", "zh"):
        problems += diagram_problems(nbformat.read(copies.copy_path(rel, lang, bh.ROOT), as_version=4), stem,
                                     (lang,))
    assert problems == []


def test_the_check_catches_a_missing_picture_and_prose_in_the_other_language():
    stem = "02_collectives"
    nb = nbformat.read(copies.copy_path(f"notebooks/{stem}.ipynb", "zh", bh.ROOT), as_version=4)
    i = bh.diagram_cell(nb, stem)
    assert diagram_problems(nb, stem, ("zh",)) == []
    assert len(diagram_problems(nb, stem, ("en",))) == 1  # Chinese prose above it
    saved = nb.cells[i].outputs
    nb.cells[i].outputs = [o for o in saved if "image/png" not in o.get("data", {})]
    assert "no picture" in diagram_problems(nb, stem, ("zh",))[0]
    nb.cells[i].outputs = saved
    nb.cells[i - 1].source = "The figure below shows 4 ranks."  # English left in the Chinese copy
    assert "not zh" in diagram_problems(nb, stem, ("zh",))[0]
    nb.cells[i].source = "print(1)"
    assert "0 cells draw" in diagram_problems(nb, stem, ("zh",))[0]
