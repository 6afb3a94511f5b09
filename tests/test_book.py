"""The course as a book (``make book``, :mod:`authoring.book`): one PDF per language, printed by Chromium from the
website's pages, with every chapter, figures, formulas, tables and no missing glyph.

Missing glyphs: Chromium (Skia) writes each font of the page into the PDF, as a CID font (two-byte glyph ids) or,
for the CJK fonts, as a Type 3 font (its glyphs drawn inline, each code named ``/g<glyph id>``). A character that
no font on the machine has is drawn as glyph 0, ``.notdef`` (the empty box, "tofu"). :func:`missing_glyphs` reads
every text-drawing operator of every page and reports each glyph 0; :func:`font_problems` each font that is not in
the file. The check is seen to fail: a Chinese page printed with the Chinese fonts hidden from fontconfig has its
Chinese characters drawn as glyph 0 (:func:`test_glyph_check_fails_without_a_chinese_font`).

The fast tests assemble the book page from a small fake site. The extended ones (``make test-extended``; about
2 min on 2 cores) build the site and both PDFs (``build/book-test/``), and check page counts, chapter titles and
glyphs; they need Chromium, a Chinese font (Debian's ``fonts-noto-cjk``) and pypdf.
"""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import nbformat
import pytest

import browser_harness as bh
from authoring import book, parity, paths, website

OUT = bh.ROOT / "build" / "book-test"
# A whole course of 16 chapters on A4 (326 and 327 pages when written); a chapter lost, or pages cut in two,
# leaves this range.
PAGE_RANGE = (220, 480)


# ---------------------------------------------------------------- reading a PDF
def _fonts(page) -> dict:
    """``{resource name: (kind, Type 3 code → glyph name, embedded, name)}`` of one page's fonts."""
    out = {}
    for name, ref in page["/Resources"].get_object().get("/Font", {}).items():
        f = ref.get_object()
        if f["/Subtype"] == "/Type0":
            desc = f["/DescendantFonts"][0].get_object()["/FontDescriptor"].get_object()
            out[name] = ("cid", None, any(k in desc for k in ("/FontFile", "/FontFile2", "/FontFile3")),
                         str(f.get("/BaseFont")))
        elif f["/Subtype"] == "/Type3":
            names, code = {}, 0
            for d in f["/Encoding"].get_object()["/Differences"]:
                if isinstance(d, int):
                    code = int(d)
                else:
                    names[code], code = str(d), code + 1
            out[name] = ("type3", names, True, "Type3")
        else:
            desc = f.get("/FontDescriptor")
            desc = desc.get_object() if desc else {}
            out[name] = ("simple", None, any(k in desc for k in ("/FontFile", "/FontFile2", "/FontFile3")),
                         str(f.get("/BaseFont")))
    return out


def missing_glyphs(pdf: Path) -> list[tuple[int, str]]:
    """``(page, font)`` for each glyph drawn as ``.notdef`` (glyph 0) in ``pdf``: a character no font had."""
    from pypdf import PdfReader
    from pypdf.generic import ContentStream

    reader, bad = PdfReader(str(pdf)), []
    for number, page in enumerate(reader.pages, 1):
        fonts, font = _fonts(page), None
        for operands, op in ContentStream(page.get_contents(), reader).operations:
            if op == b"Tf":
                font = fonts.get(operands[0])
            elif op in (b"Tj", b"TJ", b"'", b'"') and font:
                for item in (operands[0] if op == b"TJ" else [operands[-1]]):
                    if isinstance(item, (int, float)) or not hasattr(item, "__len__"):
                        continue  # a TJ spacing
                    raw = item.original_bytes if hasattr(item, "original_bytes") else bytes(item)
                    if font[0] == "cid":
                        bad += [(number, font[3]) for k in range(0, len(raw), 2)
                                if int.from_bytes(raw[k:k + 2], "big") == 0]
                    elif font[0] == "type3":
                        bad += [(number, font[3]) for c in raw if font[1].get(c, "/g0") == "/g0"]
    return bad


def font_problems(pdf: Path) -> list[str]:
    """Fonts of ``pdf`` that are not in the file (a reader's machine would substitute them)."""
    from pypdf import PdfReader

    return sorted({f"{kind} font {name}" for page in PdfReader(str(pdf)).pages
                   for kind, _, embedded, name in _fonts(page).values() if not embedded})


def pdf_text(pdf: Path) -> str:
    """The text of every page, as a reader searches or copies it, without white space."""
    from pypdf import PdfReader

    return re.sub(r"\s+", "", "".join(p.extract_text() or "" for p in PdfReader(str(pdf)).pages))


# TeX that MathJax would have turned into a formula (code cells hold "\\(" in regular expressions, not these)
TEX_LEFT = re.compile(r"\\(?:frac|tfrac|text|sum|qquad|mathrm|cdot|times|approx|left|right|begin)(?![a-z])|\$\$")
RADICAL = re.compile("[\u2e80-\u2fdf]")  # CJK radicals: what Chromium named 9 % of the Chinese book's characters


def chapter_titles(lang: str) -> dict[str, str]:
    """``{stem: title}``: the first ``#`` heading of each chapter's stored ``lang`` copy (``courses/<lang>/``)."""
    out = {}
    for path in sorted((bh.ROOT / "courses" / lang / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=paths.NB_VERSION)
        out[path.stem] = website.title_of(nb, lang)
    return out


def title_problems(text: str, titles: dict[str, str]) -> list[str]:
    """Chapter titles (markdown markup and spaces dropped) missing from a PDF's text (:func:`pdf_text`)."""
    def plain(t):
        return re.sub(r"\s+", "", re.sub(r"[`*_]", "", t))
    return [f"{stem}: {title}" for stem, title in titles.items() if plain(title) not in text]


# ---------------------------------------------------------------- fast: the book page from a small site
def _fake_site(tmp: Path, lang: str) -> Path:
    site = tmp / lang
    (site / "notebooks").mkdir(parents=True)
    head = ('<head><title>x</title><link rel="stylesheet" type="text/css" href="../_static/a.css" />'
            '<script src="../_static/theme.js"></script>{}</head>')
    mj = ('<script>window.MathJax = {"options": {}}</script>\n    '
          '<script defer="defer" src="../_static/mathjax/tex-chtml.js"></script>')
    for stem, math, body in (
            ("00_welcome", "", '<h1>00 · Welcome<a class="headerlink" href="#w">#</a></h1>'
                               '<p><a href="01_memory.html#peak">peak</a> <a href="#w">top</a> '
                               '<a href="../exercises/01_memory.html">ex</a> <a href="https://pytorch.org">pt</a></p>'),
            ("01_memory", mj, '<section id="peak"><h1>01 · Memory<a class="headerlink" href="#peak">#</a></h1>'
                              '<details><summary>Under the hood</summary><p>\\(x^2\\)</p></details></section>')):
        (site / "notebooks" / f"{stem}.html").write_text(
            f'<html>{head.format(math)}<body><h1>theme print title</h1><article class="bd-article">{body}</article>'
            "</body></html>", encoding="utf-8")
    return site


def test_book_page_joins_the_chapters_with_links_inside_the_book(tmp_path):
    site = _fake_site(tmp_path, "en")
    page = book.book_page(site, "en", ["00_welcome", "01_memory"])
    assert page.count('class="distlearn-book-chapter"') == 2 and "theme print title" not in page
    assert 'href="#chapter-00_welcome">00 · Welcome</a>' in page         # the contents: each chapter's title
    assert 'href="#01_memory--peak"' in page and 'id="01_memory--peak"' in page  # another chapter's section
    assert 'href="#00_welcome--w"' in page                                # a link inside the chapter
    assert f'href="{website.REPOSITORY}/blob/main/courses/en/exercises/01_memory.ipynb"' in page
    assert 'href="https://pytorch.org"' in page
    assert "<details open>" in page and "<details>" not in page            # asides open on paper
    assert "mathjax/tex-chtml.js" in page and "theme.js" not in page and "../_static/a.css" in page
    assert page.index("00 · Welcome</a></li>") < page.index('id="chapter-00_welcome"') < page.index(
        'id="chapter-01_memory"')


def _css_rules(css: str) -> dict[str, str]:
    """``{selector: declarations}`` of a flat style sheet (no @media blocks; @page kept as a selector)."""
    return {sel.strip(): body for sels, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css) for sel in sels.split(",")}


def test_print_css_keeps_code_cells_whole_and_never_leaves_an_empty_frame(tmp_path):
    """Issue 39 leftover: where a code cell met a page's end the PDF showed its frame as an empty green box and the
    code on the next page. The theme's ``pre { overflow: auto }`` makes a code block monolithic in Chromium's print;
    printed with overflow visible, the cell is kept whole when it fits (``break-inside: avoid`` on MyST-NB's
    ``div.cell > div.cell_input``, the element with the green frame) and split between lines, frame repeated on each
    piece, when it is taller than a page. Seen on real PDFs of chapter 02 (pages 4, 8 and 12 ended in an empty
    frame before, none after; a 150-line cell printed all its lines over three pages, framed on each)."""
    rules = _css_rules(book.PRINT_CSS)
    norm = {sel: re.sub(r"\s+", " ", body) for sel, body in rules.items()}
    for sel in ("pre", "div.highlight"):
        assert "overflow: visible !important" in norm[sel], sel
    cell = norm["div.cell > div.cell_input"]
    assert "break-inside: avoid" in cell and "display: block" in cell
    assert " box-decoration-break: clone" in cell and "-webkit-box-decoration-break: clone" in cell
    assert "break-inside: avoid" in norm[".cell_output"]                   # outputs and pictures stay whole too
    assert book.PRINT_CSS in book.book_page(_fake_site(tmp_path, "en"), "en", ["00_welcome"])


def test_title_check_reports_a_missing_chapter():
    titles = {"05_pipeline_parallel": "05 · 流水线并行", "06_zero_fsdp": "06 · ZeRO 与 FSDP"}
    text = "...05·流水线并行...06·ZeRO与FSDP"
    assert title_problems(text, titles) == []
    assert title_problems(text.replace("行", "⾏"), titles) == ["05_pipeline_parallel: 05 · 流水线并行"]
    assert title_problems(text.replace("06", "07"), titles) == ["06_zero_fsdp: 06 · ZeRO 与 FSDP"]
    assert len(chapter_titles("zh")) >= 16 and all(chapter_titles("zh").values())


def test_radical_equivalents_read_from_the_chinese_font():
    """The font's own map says which radical shares a glyph with which ideograph (⼀ with 一, ⾏ with 行, ⻔ with 门)."""
    faces = book.font_faces()
    bh.require(bool(faces) and book.has_cjk_font(), book.HOW_TO_GET_CJK)
    eq = book.radical_equivalents(*faces[0])
    assert eq[0x2F00] == ord("一") and eq[0x2F8F] == ord("行") and eq[0x2ED4] == ord("门"), faces[0]
    assert all(0x2E80 <= r <= 0x2FDF and not 0x2E80 <= i <= 0x2FDF for r, i in eq.items())


def test_make_book_and_its_font_are_documented():
    make = (bh.ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^book:", make, re.M) and "make book" in make
    for readme in ("README.md", "README.zh-CN.md"):
        text = (bh.ROOT / readme).read_text(encoding="utf-8")
        assert "make book" in text and book.FONT_PACKAGE in text, readme
    assert book.FONT_PACKAGE in (bh.ROOT / ".ci" / "run").read_text(encoding="utf-8")


# ---------------------------------------------------------------- slow: real PDFs
NO_CJK_FONTS = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <cachedir>{cache}</cachedir>
  <selectfont><rejectfont><pattern><patelt name="lang"><string>zh-cn</string></patelt></pattern></rejectfont>
  </selectfont>
</fontconfig>
"""


@pytest.mark.extended
def test_glyph_check_fails_without_a_chinese_font(tmp_path):
    """The same Chinese page printed twice: with the machine's fonts, no glyph is missing; with every font that
    covers Chinese hidden from fontconfig, each Chinese character is drawn as glyph 0 and the check says so."""
    chromium = book.find_chromium()
    bh.require(chromium is not None, book.HOW_TO_GET_CHROMIUM)
    bh.require(importlib.util.find_spec("pypdf") is not None, "pypdf (the .[test] extra) is not installed")
    bh.require(book.has_cjk_font(), book.HOW_TO_GET_CJK)
    (tmp_path / "p.html").write_text('<html lang="zh-CN"><head><meta charset="utf-8"></head><body>'
                                     "<h1>专家并行 expert parallelism</h1><p>数据并行：∑ → ✓ ✗ “引号”</p></body></html>",
                                     encoding="utf-8")
    book.print_pdf(tmp_path, "p.html", tmp_path / "with.pdf", chromium)
    conf = tmp_path / "fonts.conf"
    conf.write_text(NO_CJK_FONTS.format(cache=tmp_path / "fc-cache"), encoding="utf-8")
    book.print_pdf(tmp_path, "p.html", tmp_path / "without.pdf", chromium, env={**os.environ, "FONTCONFIG_FILE": str(conf)})
    assert missing_glyphs(tmp_path / "with.pdf") == []
    assert font_problems(tmp_path / "with.pdf") == []
    missing = missing_glyphs(tmp_path / "without.pdf")
    assert len(missing) >= len("专家并行数据并行引号"), missing


@pytest.fixture(scope="module")
def books():
    bh.require(importlib.util.find_spec("sphinx") is not None, "the book needs the .[site] extra (make site)")
    bh.require(importlib.util.find_spec("pypdf") is not None, "pypdf (the .[test] extra) is not installed")
    bh.require(book.find_chromium() is not None, book.HOW_TO_GET_CHROMIUM)
    bh.require(book.has_cjk_font(), book.HOW_TO_GET_CJK)
    res = book.build(OUT, log=lambda *a: None)
    print(f"book: {res.pages} pages in {res.seconds:.0f} s")
    return res


@pytest.mark.extended
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_book_has_every_chapter_and_no_missing_glyph(books, lang):
    pdf = books.pdfs[lang]
    assert pdf == OUT / f"distlearn-{lang}.pdf" and pdf.is_file()
    assert PAGE_RANGE[0] <= books.pages[lang] <= PAGE_RANGE[1], books.pages
    text = pdf_text(pdf)
    assert title_problems(text, chapter_titles(lang)) == []
    assert RADICAL.findall(text) == []  # 一, 行, 门 as themselves: a search of the PDF for 并行 finds it
    other = "en" if lang == "zh" else "zh"
    assert [t for t in chapter_titles(other).values() if re.search(r"[\u4e00-\u9fff]", t)
            and title_problems(text, {"x": t}) == []] == []  # the other language's titles are not in it
    assert font_problems(pdf) == []
    assert missing_glyphs(pdf) == []
    assert TEX_LEFT.findall(text) == []  # every formula set by MathJax: no TeX command or "$$" in the text
    html_page = (OUT / "site" / lang / "notebooks" / "book.html").read_text(encoding="utf-8")
    assert pdf_images(pdf) >= html_page.count("<img") >= 16  # every figure printed (each chapter has a diagram)


def pdf_images(pdf: Path) -> int:
    """Pictures drawn on the pages of ``pdf`` (image objects of each page's resources)."""
    from pypdf import PdfReader

    return sum(1 for page in PdfReader(str(pdf)).pages
               for x in page["/Resources"].get_object().get("/XObject", {}).values()
               if x.get_object().get("/Subtype") == "/Image")
