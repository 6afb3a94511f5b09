"""The course as a book (``make book``): ``build/book/distlearn-en.pdf`` and ``build/book/distlearn-zh.pdf``.

Why this route: the website (:mod:`authoring.website`) already shows each chapter from its stored monolingual copy
``courses/<lang>/`` with its figures, tables and formulas (MathJax 3 from the ``sphinx-mathjax-offline`` wheel),
all offline. A browser prints that page as it is: Debian's ``chromium`` (the one the browser tests use), driven by
Playwright's Python package (``page.pdf``; never ``playwright install``), with nothing fetched from the network.
The other routes need what is not here: Sphinx's LaTeX builder needs a TeX installation (and xeCJK for Chinese);
Pandoc and WeasyPrint are not installed and do not run MathJax. Chinese text needs a CJK font on the machine:
Debian's ``fonts-noto-cjk`` (Noto Sans/Serif CJK; ``apt-get install fonts-noto-cjk``; ``.ci/run`` installs it);
without one, every Chinese character is an empty box, which the check in ``tests/test_book.py`` catches.

What a build does, for each language:

1. build the website (chapters and exercises, no solutions, explorers as their static pictures) into ``build/book/site/`` (:func:`authoring.website.
   build`: the stored copies, nothing executed);
2. write ``build/book/site/<lang>/notebooks/book.html`` (:func:`book_page`): a title page, the contents, and each
   chapter's article in course order, each from a new page; element ids made unique per chapter, links between
   chapters made links inside the book, links to other pages of the site made links to the repository's copy
   (``courses/<lang>/…``), every collapsed aside opened;
3. serve the site on 127.0.0.1 and print that page in headless Chromium to ``build/book/distlearn-<lang>.pdf`` (A4,
   page numbers, the PDF's outline from the headings) once MathJax has set every formula;
4. give each Chinese character its own code point again in the PDF's text (:func:`fix_cjk_text`: Noto CJK shares a
   glyph between 一 and the radical ⼀, and Chromium named 9 % of the characters by the radical, so that a search
   of the PDF for 并行 found nothing). This step reads and writes the PDF with pypdf (the ``.[site]`` extra).

Command line::

    python -m authoring.book build [--out build/book] [--lang en zh] [--chapters 05_pipeline_parallel ...]
"""
from __future__ import annotations

import argparse
import html
import os
import posixpath
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from authoring import paths, website

ROOT = paths.ROOT
OUT = ROOT / "build" / "book"
FONT_PACKAGE = "fonts-noto-cjk"
HOW_TO_GET_CHROMIUM = ("The book is printed by Chromium: install it with `sudo apt-get install chromium` "
                       "(Debian/Ubuntu), or set DISTLEARN_CHROMIUM=/path/to/chromium. / 本书由 Chromium 打印成 PDF："
                       "请运行 `sudo apt-get install chromium`，或设置 DISTLEARN_CHROMIUM。")
HOW_TO_GET_CJK = (f"No Chinese font found (fc-list :lang=zh): install one, e.g. `sudo apt-get install {FONT_PACKAGE}`."
                  f" / 未找到中文字体：请安装，例如 `sudo apt-get install {FONT_PACKAGE}`。")
_ARTICLE = re.compile(r'<article class="bd-article">(.*?)</article>', re.S)
_ATTR = re.compile(r'\b(id|href)="([^"]*)"')
_HEAD = re.compile(r"<head>(.*?)</head>", re.S)
SUBTITLE = {"en": "An open, bilingual course on training large models on many GPUs",
            "zh": "一门开放的中英双语课程：大模型如何在多块 GPU 上训练"}
CONTENTS = {"en": "Contents", "zh": "目录"}
# The printed page: A4, each chapter from a new page, code wrapped rather than cut at the margin, no permalink
# marks, pictures and table rows kept whole. A code cell is kept whole too when it fits on a page; a taller one splits
# between lines, with its frame and background drawn on each piece (box-decoration-break). Code blocks print with
# overflow visible: the theme's `pre { overflow: auto }` made each one monolithic in Chromium's print, so a cell that
# met the page's end left its frame behind as an empty green box and moved its code to the next page whole (and code
# taller than a page would have been cut).
PRINT_CSS = """
@page { size: A4; margin: 16mm 15mm 18mm 15mm; }
html { font-size: 13px; }
body { background: white; }
.distlearn-book-chapter { break-before: page; }
.distlearn-book-cover { text-align: center; padding-top: 30vh; break-after: page; }
.distlearn-book-cover h1 { font-size: 2.4rem; }
.distlearn-book-contents ol { list-style: none; padding-left: 0; font-size: 1.1rem; line-height: 1.9; }
pre, .highlight pre, .output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.headerlink { display: none !important; }
.bd-main .bd-content .bd-article h1:first-of-type { display: block !important; }  /* the theme hides it in print */
img, figure, .cell_output, tr { break-inside: avoid; }
pre, div.highlight { overflow: visible !important; }
div.cell > div.cell_input { display: block; break-inside: avoid; -webkit-box-decoration-break: clone;
  box-decoration-break: clone; }
img { max-width: 100%; height: auto; }
h1, h2, h3, h4 { break-after: avoid; }
.bd-article-container, .bd-content, .bd-main, .bd-container, .bd-page-width { max-width: none !important;
  width: 100% !important; margin: 0 !important; padding: 0 !important; }
"""


@dataclass
class BookBuild:
    """What :func:`build` made: each language's PDF, its page count, and the seconds taken."""

    pdfs: dict[str, Path] = field(default_factory=dict)
    pages: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def chapter_article(page_html: str) -> str:
    """The ``<article>`` of a built page of the site (its text, figures, tables and formulas). Raises ValueError if
    the page has none."""
    m = _ARTICLE.search(page_html)
    if not m:
        raise ValueError("no <article class=\"bd-article\"> in the page")
    return m.group(1)


def relink_chapter(article: str, stem: str, stems: list[str], lang: str) -> str:
    """``article`` of chapter ``stem`` for the book: each ``id`` prefixed with the chapter (``05_pipeline_parallel--
    id14``: every chapter has its "id14"); a link inside the chapter or to another chapter of the book made a link
    inside the book (``#06_zero_fsdp--…``, ``#chapter-06_zero_fsdp``); a link to another page of the site (an
    exercise, a solution, the home page) made a link to that notebook's ``lang`` copy in the repository; web
    links kept."""
    def fix(m: re.Match) -> str:
        attr, value = m.group(1), html.unescape(m.group(2))
        if attr == "id":
            return f'id="{stem}--{html.escape(value)}"'
        if re.match(r"^[a-z][a-z0-9+.-]*:", value, re.I):
            return m.group(0)
        path, _, anchor = value.partition("#")
        if not path:
            return f'href="#{stem}--{html.escape(anchor)}"'
        target = posixpath.normpath(posixpath.join("notebooks", path))
        doc = target[: -len(".html")] if target.endswith(".html") else target
        section, _, name = doc.partition("/")
        if section == "notebooks" and name in stems:
            return f'href="#{name}--{html.escape(anchor)}"' if anchor else f'href="#chapter-{name}"'
        if section in website.SECTIONS and name:
            url = f"{website.REPOSITORY}/blob/main/{website.course_copy(lang, f'{section}/{name}.ipynb')}"
        else:
            url = f"{website.REPOSITORY}/tree/main/{website.course_copy(lang, '')}"
        return f'href="{html.escape(url, quote=True)}"'

    return _ATTR.sub(fix, article)


def open_asides(article: str) -> str:
    """Every collapsed aside (``<details>``: "Under the hood / 深入一步", hidden code) open: paper cannot click."""
    return re.sub(r"<details(?![^>]*\bopen\b)", "<details open", article)


_STYLESHEET = re.compile(r"<link\b[^>]*\brel=\"stylesheet\"[^>]*>")
_MATHJAX = re.compile(r"<script>window\.MathJax = .*?</script>\s*<script[^>]*mathjax/[^>]*></script>", re.S)


def book_head(pages, title: str) -> str:
    """The book's ``<head>``: the site's style sheets and, from a chapter page that sets formulas, MathJax and its
    settings (Sphinx adds MathJax only to a page with a formula); not the theme's scripts, which look for the
    page's sidebars and buttons."""
    pages = list(pages)
    sheets = list(dict.fromkeys(x for page in pages for x in _STYLESHEET.findall(_HEAD.search(page).group(1))))
    mathjax = next((m.group(0) for page in pages for m in [_MATHJAX.search(page)] if m), "")
    return ('<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n" + "\n".join(sheets) + "\n" + mathjax)


def book_page(site_lang: Path, lang: str, stems: list[str]) -> str:
    """The whole book of the ``lang`` site (``site_lang``: ``build/book/site/<lang>``) as one page, to be written to
    ``site_lang/notebooks/book.html`` (so that the chapters' relative paths to pictures, styles and MathJax hold):
    the head of the first chapter's page with :data:`PRINT_CSS`, a title page, the contents, then each chapter
    (:func:`chapter_article`, :func:`relink_chapter`, :func:`open_asides`)."""
    L = website.LANGUAGES[lang]
    pages = {stem: (site_lang / "notebooks" / f"{stem}.html").read_text(encoding="utf-8") for stem in stems}
    chapters, contents = [], []
    for stem in stems:
        article = chapter_article(pages[stem])
        title = re.search(r"<h1>(.*?)<a class=\"headerlink\"", article, re.S)
        contents.append(f'<li><a href="#chapter-{stem}">{title.group(1).strip() if title else stem}</a></li>')
        article = open_asides(relink_chapter(article, stem, stems, lang))
        chapters.append(f'<section class="distlearn-book-chapter" id="chapter-{stem}">\n{article}\n</section>')
    html_lang = "zh-CN" if lang == "zh" else "en"
    head = book_head(pages.values(), L.title)
    return (f'<!DOCTYPE html>\n<html lang="{html_lang}" data-theme="light"><head>{head}\n'
            f"<style>{PRINT_CSS}</style></head>\n"
            '<body><div class="bd-container"><div class="bd-container__inner bd-page-width">'
            '<main id="main-content" class="bd-main" role="main"><div class="bd-content">'
            '<div class="bd-article-container"><article class="bd-article">\n'
            f'<div class="distlearn-book-cover"><p class="distlearn-book-subtitle">{html.escape(SUBTITLE[lang])}</p>'
            f"<h1>{html.escape(L.title)}</h1><p>{html.escape(L.author)}</p>"
            f'<p><a href="{website.REPOSITORY}">{website.REPOSITORY}</a></p></div>\n'
            f'<nav class="distlearn-book-contents"><h2>{CONTENTS[lang]}</h2><ol>{"".join(contents)}</ol></nav>\n'
            + "\n".join(chapters) +
            "\n</article></div></div></main></div></div></body></html>\n")


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$DISTLEARN_CHROMIUM``, ``chromium`` on PATH or /usr/bin/chromium (as
    ``tests/browser_harness.py`` finds it)."""
    for cand in (os.environ.get("DISTLEARN_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
                 shutil.which("chromium-browser")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def has_cjk_font() -> bool:
    """Whether fontconfig knows a font with Chinese glyphs (``fc-list :lang=zh``); True where fontconfig is absent
    (not Linux: the system's own fonts)."""
    fc = shutil.which("fc-list")
    if fc is None:
        return True
    import subprocess

    out = subprocess.run([fc, ":lang=zh", "family"], capture_output=True, text=True, check=False).stdout
    return bool(out.strip())


def print_pdf(site: Path, page_path: str, pdf: Path, chromium: str, env: dict | None = None,
              timeout_ms: int = 300_000) -> None:
    """Serve ``site`` on 127.0.0.1, open ``page_path`` (relative to it) in headless Chromium, wait for MathJax to set
    every formula and print the page to ``pdf`` (A4, "page / pages" at the foot, an outline from the headings).
    ``env``: the browser's environment (e.g. ``FONTCONFIG_FILE``). Raises RuntimeError on a page error."""
    from playwright.sync_api import sync_playwright

    errors = []
    with website.serve(site) as base:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, env=env or dict(os.environ),
                                         args=["--headless", "--no-sandbox", "--disable-gpu",
                                               "--disable-background-networking", "--disable-dev-shm-usage",
                                               "--disable-component-update", "--no-first-run"])
            try:
                page = browser.new_page()
                page.set_default_timeout(timeout_ms)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(f"{base}/{page_path}", wait_until="load")
                if page.evaluate("() => !!document.querySelector('script[src*=\"mathjax/\"]')"):
                    page.wait_for_function("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)",
                                           timeout=60_000)
                    page.evaluate("() => MathJax.startup.promise")
                page.evaluate("() => document.fonts.ready")
                pdf.parent.mkdir(parents=True, exist_ok=True)
                page.pdf(path=str(pdf), format="A4", print_background=True, outline=True, tagged=True,
                         display_header_footer=True, header_template="<span></span>",
                         footer_template='<div style="font-size:8px;width:100%;text-align:center;color:#555">'
                                         '<span class="pageNumber"></span> / <span class="totalPages"></span></div>',
                         margin={"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"})
            finally:
                browser.close()
    if errors:
        raise RuntimeError(f"{page_path}: page errors / 页面错误: {errors[:3]}")


# Noto CJK draws a CJK radical and the ideograph it looks like with one glyph ("⼀" U+2F00 and "一" U+4E00), and
# Chromium's PDF names each glyph's text by the lowest code point of the font's map: 9 % of the Chinese book's
# characters read as radicals, so that searching the PDF for 并行 found nothing ("并⾏"). fix_cjk_text maps them
# back.
RADICALS = (0x2E80, 0x2FDF)  # CJK Radicals Supplement and Kangxi Radicals
IDEOGRAPHS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))


def font_faces() -> list[tuple[str, int]]:
    """``(file, face index)`` of the fonts fontconfig gives Chromium for Chinese (sans-serif, serif, monospace)."""
    fc = shutil.which("fc-match")
    if fc is None:
        return []
    import subprocess

    faces = []
    for family in ("sans-serif", "serif", "monospace"):
        out = subprocess.run([fc, "-f", "%{file}|%{index}", f"{family}:lang=zh-cn"], capture_output=True,
                             text=True, check=False).stdout
        if "|" in out:
            path, index = out.rsplit("|", 1)
            faces.append((path, int(index or 0)))
    return list(dict.fromkeys(faces))


def radical_equivalents(font_file: str | Path, index: int = 0) -> dict[int, int]:
    """``{radical: ideograph}`` for each glyph of an OpenType/TrueType font (a ``.ttc`` face ``index``) that the
    font's character map reaches both from a CJK radical (:data:`RADICALS`) and from a unified ideograph (read from
    the font's ``cmap`` format 12 or 4 table). Raises ValueError for a file that is not such a font."""
    import struct

    data = Path(font_file).read_bytes()
    base = 0
    if data[:4] == b"ttcf":
        base = struct.unpack_from(">I", data, 12 + 4 * index)[0]
    num_tables = struct.unpack_from(">H", data, base + 4)[0]
    tables = {data[base + 12 + 16 * i: base + 16 + 16 * i]: struct.unpack_from(">I", data, base + 20 + 16 * i)[0]
              for i in range(num_tables)}
    if b"cmap" not in tables:
        raise ValueError(f"{font_file}: no cmap table")
    cmap = tables[b"cmap"]
    subtables = [struct.unpack_from(">HHI", data, cmap + 4 + 8 * i)
                 for i in range(struct.unpack_from(">H", data, cmap + 2)[0])]
    glyphs: dict[int, list[int]] = {}

    def note(code: int, glyph: int) -> None:
        if glyph and (RADICALS[0] <= code <= RADICALS[1] or any(a <= code <= b for a, b in IDEOGRAPHS)):
            glyphs.setdefault(glyph, []).append(code)

    offsets = {fmt: cmap + off for pid, eid, off in subtables
               for fmt in [struct.unpack_from(">H", data, cmap + off)[0]] if (pid, eid) in ((3, 10), (3, 1), (0, 4),
                                                                                           (0, 3))}
    if 12 in offsets:
        at = offsets[12]
        for k in range(struct.unpack_from(">I", data, at + 12)[0]):
            start, end, glyph = struct.unpack_from(">III", data, at + 16 + 12 * k)
            for code in range(max(start, RADICALS[0]), end + 1):
                note(code, glyph + code - start)
    elif 4 in offsets:
        at = offsets[4]
        segs = struct.unpack_from(">H", data, at + 6)[0] // 2
        ends = struct.unpack_from(f">{segs}H", data, at + 14)
        starts = struct.unpack_from(f">{segs}H", data, at + 16 + 2 * segs)
        deltas = struct.unpack_from(f">{segs}h", data, at + 16 + 4 * segs)
        range_at = at + 16 + 6 * segs
        ranges = struct.unpack_from(f">{segs}H", data, range_at)
        for s_i, (start, end, delta, ro) in enumerate(zip(starts, ends, deltas, ranges)):
            for code in range(max(start, RADICALS[0]), min(end, 0xFFFF) + 1):
                if ro:
                    glyph = struct.unpack_from(">H", data, range_at + 2 * s_i + ro + 2 * (code - start))[0]
                    glyph = (glyph + delta) & 0xFFFF if glyph else 0
                else:
                    glyph = (code + delta) & 0xFFFF
                note(code, glyph)
    else:
        raise ValueError(f"{font_file}: no Unicode cmap (format 12 or 4)")
    out = {}
    for codes in glyphs.values():
        radicals = [c for c in codes if RADICALS[0] <= c <= RADICALS[1]]
        ideographs = sorted(c for c in codes if c not in radicals)
        for r in radicals:
            if ideographs:
                out.setdefault(r, ideographs[0])
    return out


def fix_cjk_text(pdf: Path, equivalents: dict[int, int]) -> int:
    """Rewrite the text map (``/ToUnicode``) of each font of ``pdf`` so that a glyph named by a CJK radical is named
    by its ideograph (:func:`radical_equivalents`): the PDF's text, as a reader searches or copies it, is then the
    page's text. Returns how many glyph names changed. Needs pypdf."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject

    writer = PdfWriter(clone_from=PdfReader(str(pdf)))
    changed, seen = 0, set()

    def swap(m: re.Match) -> str:
        nonlocal changed
        code = int(m.group(2), 16)
        if code in equivalents:
            changed += 1
            return f"{m.group(1)}<{equivalents[code]:04X}>"
        return m.group(0)

    for page in writer.pages:
        for ref in page["/Resources"].get_object().get("/Font", {}).values():
            font = ref.get_object()
            to_unicode = font.get(NameObject("/ToUnicode"))
            if to_unicode is None or to_unicode.idnum in seen:
                continue
            seen.add(to_unicode.idnum)
            stream = to_unicode.get_object()
            text = stream.get_data().decode("latin-1")
            # a one-glyph entry "<0041> <2F00>" of a bfchar list, or a one-glyph range "<0041> <0041> <2F00>"
            new = re.sub(r"(<[0-9A-Fa-f]+>\s*(?:<[0-9A-Fa-f]+>\s*)?)<([0-9A-Fa-f]{4})>", swap, text)
            if new != text:
                stream.set_data(new.encode("latin-1"))
    if changed:
        with open(pdf, "wb") as f:
            writer.write(f)
    return changed


def pdf_page_count(pdf: Path) -> int:
    """Pages of a PDF, read from its page tree's ``/Count`` (no PDF library needed)."""
    data = Path(pdf).read_bytes()
    counts = [int(n) for n in re.findall(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)", data, re.S)]
    counts += [int(n) for n in re.findall(rb"/Count\s+(\d+)[^>]*?/Type\s*/Pages\b", data, re.S)]
    return max(counts, default=0)


def build(out: Path = OUT, languages: tuple[str, ...] = ("en", "zh"), chapters: list[str] | None = None,
          env: dict | None = None, log=print) -> BookBuild:
    """Build the site into ``out/site`` and print each language's book to ``out/distlearn-<lang>.pdf``.

    ``chapters``: stems (default: every chapter, ``00_welcome`` first); ``env``: the browser's environment.
    Raises RuntimeError without Chromium, without a Chinese font for ``zh`` (:func:`has_cjk_font`), or when the site
    build or a page fails.
    """
    t0 = time.perf_counter()
    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError(HOW_TO_GET_CHROMIUM)
    if "zh" in languages and env is None and not has_cjk_font():
        raise RuntimeError(HOW_TO_GET_CJK)
    out = Path(out)
    site = website.build(out / "site", chapters=chapters, solutions=False, languages=tuple(languages),
                         log=lambda *a: None, explorers=False)  # paper shows each explorer's static picture
    if any(site.warnings.values()):
        raise RuntimeError(f"site build warnings / 网站构建警告: {site.warnings}")
    stems = [p.stem for p in site.pages if p.section == "notebooks"]
    equivalents: dict[int, int] = {}
    for path, index in font_faces():
        try:
            for radical, ideograph in radical_equivalents(path, index).items():
                equivalents.setdefault(radical, ideograph)
        except (OSError, ValueError, IndexError):
            continue  # a font fontconfig names but this reader does not understand: its radicals stay
    result = BookBuild()
    for lang in languages:
        page = out / "site" / lang / "notebooks" / "book.html"
        page.write_text(book_page(out / "site" / lang, lang, stems), encoding="utf-8")
        pdf = out / f"distlearn-{lang}.pdf"
        print_pdf(out / "site", f"{lang}/notebooks/book.html", pdf, chromium, env)
        if equivalents:
            fix_cjk_text(pdf, equivalents)
        result.pdfs[lang], result.pages[lang] = pdf, pdf_page_count(pdf)
        log(f"{lang}: {pdf} ({result.pages[lang]} pages, {pdf.stat().st_size / 1e6:.1f} MB) / "
            f"{result.pages[lang]} 页")
    result.seconds = time.perf_counter() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m authoring.book", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="print the course to one PDF per language")
    b.add_argument("--out", default=str(OUT), help="output folder (default: build/book)")
    b.add_argument("--lang", nargs="*", default=["en", "zh"], choices=["en", "zh"])
    b.add_argument("--chapters", nargs="*", default=None, help="chapter stems (default: all)")
    args = ap.parse_args(argv)
    try:
        res = build(Path(args.out), tuple(args.lang), args.chapters)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"book: {', '.join(str(p) for p in res.pdfs.values())} in {res.seconds:.0f} s / 已生成，用时 "
          f"{res.seconds:.0f} 秒")
    return 0


if __name__ == "__main__":
    sys.exit(main())
