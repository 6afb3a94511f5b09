"""The course website on a desktop and on a phone: one search field, text outputs and figures that fit a phone.

Three things a reviewer found on the site (``make site``, :mod:`authoring.website`):

1. Desktop pages showed two search fields: pydata-sphinx-theme 0.16+ adds a top bar with its own search field when
   ``navbar_persistent`` is unset (sphinx-book-theme's empty default does not count), besides the sidebar's.
   ``website/conf.py`` sets it empty; the search page, which has its own field, hides the launcher
   (``website/_static/distlearn-site.css``). Checked: exactly one search field shows on every page at every width
   from a phone to a wide desktop, in both languages, and it works: typing a word and Enter lists the chapter on the
   search page (the search tests/test_site_search.py exercises).
2. Printed lines ran off the box on a phone. The rule (``website/_static/distlearn-outputs.js``, stored outputs and
   live explorers alike): a line is a *row* of columns when, after its indentation, two or more spaces stand between
   two characters, when it is indented 16 spaces or more, or when it holds a tab; a row never wraps (its columns
   stay aligned; the output scrolls sideways inside its own box); any other line is a *sentence* and wraps inside the
   box. Checked on every text output of the pages, each line measured in Chromium: a sentence lies inside its box's
   visible width, a row on one line; the page never pans sideways.
3. Figures shrank to a third of their size on a phone. Criterion: at 390 px every output figure (a notebook PNG, an
   explorer's static picture, a live explorer's SVG) is shown at >= 0.8 of its intrinsic width (matplotlib's 10 pt
   text at 100 dpi, 13.9 px, stays >= 11 CSS px) and never wider than that intrinsic width; one wider than the column
   scrolls sideways inside its own box, not the page. On a desktop (1280 px) figures still fit their column.

The fast tests check the configuration and the row rule itself (read from the page script); the extended ones build
chapters 01, 08 and 14 with their exercises, solutions and live explorers in both languages (about 20 s with the
explorer cache of ``build/web-explorers-cache/``; a first build renders these chapters' explorers, which
tests/test_web_explorers.py would render anyway), serve them on 127.0.0.1 and read them in headless Chromium
(Debian's ``chromium`` through Playwright). Screenshots: ``build/screenshots/site-layout-*.png``.
"""
from __future__ import annotations

import importlib.util
import re

import pytest

import browser_harness as bh
from authoring import website

CHAPTERS = ["01_memory", "08_activation_memory", "14_planning"]
OUT = bh.ROOT / "build" / "site-layout"
STATIC = bh.ROOT / "website" / "_static"
PHONE = (390, 844)
DESKTOP = (1280, 800)
WIDTHS = [360, 390, 576, 768, 991, 992, 1280, 1600]
# a word of each language and the chapter its search must list
QUERY = {"en": ("activation", "notebooks/08_activation_memory"), "zh": ("显存", "notebooks/01_memory")}


def is_row(line: str) -> bool:
    """The rule of the page script (module doc, item 2): a row of columns, which must not wrap; else a sentence."""
    return bool(re.search(r"\S {2,}(?=\S)", line) or line.startswith(" " * 16) or "\t" in line)


# ---------------------------------------------------------------- fast checks (no build, no browser)
def test_theme_keeps_one_search_field_and_the_page_script_is_loaded():
    conf = (bh.ROOT / "website" / "conf.py").read_text(encoding="utf-8")
    assert re.search(r'"navbar_persistent":\s*\[\]', conf), "the theme's top-bar search field is back"
    js = re.search(r"html_js_files\s*=\s*\[(.*?)\]", conf, re.S).group(1)
    assert js.index("distlearn-outputs.js") < js.index("distlearn-explorer.js")  # the explorer script calls it
    css = (STATIC / "distlearn-site.css").read_text(encoding="utf-8")
    assert re.search(r"body:has\(\.bd-search-container\) \.search-button__button \{ display: none", css)
    assert re.search(r"\.distlearn-wrap \{[^}]*white-space: pre-wrap", css)
    phone = re.search(r"@media screen and \(max-width: 767\.98px\) \{(.*?)\n\}", css, re.S).group(1)
    assert "overflow-x: auto" in phone and "calc(0.8 * var(--dl-natural-w" in phone
    explorer = (STATIC / "distlearn-explorer.js").read_text(encoding="utf-8")
    assert "fit.wrapLines(pre)" in explorer and "fit.boxFigure(" in explorer  # live outputs too


def _page_rule() -> re.Pattern:
    src = (STATIC / "distlearn-outputs.js").read_text(encoding="utf-8")
    return re.compile(re.search(r"var ROW = /(.+?)/;", src).group(1))


@pytest.mark.parametrize("line, row", [
    ("fp32              adam               4      4                 8     16", True),
    ("model             parameters Ψ  16 B/param (GB)", True),
    ("                                                   bytes", True),         # a column header, deep indent
    ("参数              17.64  16.43", True),
    ("x\ty", True),
    ("activations, s=2048: seed code 2.1 GB | Llama, flash 10.1 GB (4.7×) | scores stored 18.7 GB", False),
    ("    我们的解读：微批次大小 16、--DDP-impl torch 和交错方式都按 Megatron-LM 为这一行写的脚本", False),
    ("│ TypeError: TransformerDecoderLayer.forward() missing 1 required positional argument: 'memory'", False),
    ("        for r in range(n):", False),                                   # printed code: wraps under its indent
    ("", False),
])
def test_the_page_script_rule_is_the_documented_one(line, row):
    assert bool(_page_rule().search(line)) == row == is_row(line)


# ---------------------------------------------------------------- the built site in Chromium (extended)
def test_the_one_gate_fails_under_ci_and_skips_elsewhere(monkeypatch):
    """browser_harness.require, the gate every optional-tool test uses (site, Chromium, nbgrader ...): CI = 1 / true
    / yes (any case) fails, anything else skips, and an available tool passes."""
    for value, outcome in (("1", pytest.fail.Exception), ("TRUE", pytest.fail.Exception),
                           ("yes", pytest.fail.Exception), ("", pytest.skip.Exception),
                           ("0", pytest.skip.Exception), ("false", pytest.skip.Exception)):
        monkeypatch.setenv("CI", value)
        with pytest.raises(outcome, match="install it"):
            bh.require(False, "install it")
        bh.require(True, "install it")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        bh.require(False, "install it")


@pytest.fixture(scope="module")
def site():
    bh.require(importlib.util.find_spec("sphinx") is not None and importlib.util.find_spec("myst_nb") is not None,
             "the website needs the .[site] extra (make site)")
    res = website.build(OUT, chapters=CHAPTERS, jobs=1, log=lambda *a: None)  # with live explorers
    assert not any(res.warnings.values()), res.warnings
    return res


@pytest.fixture(scope="module")
def base(site):
    with website.serve(site.out) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    chromium = bh.find_chromium()
    bh.require(chromium is not None, bh.HOW_TO_GET_CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=bh.CHROMIUM_FLAGS)
        yield b
        b.close()


def _open(page, url: str) -> None:
    page.goto(url, wait_until="load")
    # live explorers replace their static picture once their data is read
    page.wait_for_function("() => [...document.querySelectorAll('[data-distlearn-explorer]')].every("
                           "(h) => h.classList.contains('distlearn-live-ready') || h.hasAttribute('data-live-error'))",
                           timeout=30000)
    page.wait_for_function("() => [...document.images].every((i) => i.complete)", timeout=30000)


# The search fields a reader sees without opening anything: the theme's launchers (a field-like button, an icon) and
# any search input, visible in the window.
_SEARCH_FIELDS = """() => [...document.querySelectorAll(
    '.search-button__button, input[type=search], input[name=q]')].filter((e) => {
  if (e.closest('dialog:not([open])')) return false;
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return r.width >= 1 && r.height >= 1 && s.visibility !== 'hidden' && r.right > 0 && r.left < innerWidth &&
         r.bottom > 0 && r.top < innerHeight;
}).map((e) => e.tagName.toLowerCase() + '.' + [...e.classList].join('.'))"""


def search_field_problems(seen: dict[str, list[str]]) -> list[str]:
    """``seen``: {where: the search fields shown there}; each place must show exactly one."""
    return [f"{where}: {len(fields)} search fields {fields}" for where, fields in seen.items() if len(fields) != 1]


def test_search_field_problems_count_each_place():
    assert search_field_problems({"a": ["button.x"], "b": ["button.x", "button.y"], "c": []}) == [
        "b: 2 search fields ['button.x', 'button.y']", "c: 0 search fields []"]


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_working_search_field_at_every_width(site, base, browser, lang):
    pages = ["index", "search"] + [p.docname for p in site.pages if p.stem == CHAPTERS[0] or p.section == "notebooks"]
    seen = {}
    for w in WIDTHS:
        page = browser.new_page(viewport={"width": w, "height": 800})
        try:
            for name in pages:
                _open(page, f"{base}/{lang}/{name}.html")
                seen[f"{lang}/{name} at {w} px"] = page.evaluate(_SEARCH_FIELDS)
        finally:
            page.close()
    assert search_field_problems(seen) == []
    word, chapter = QUERY[lang]
    for w, h in (PHONE, DESKTOP):  # the one field works: a word, Enter, the search page lists the chapter
        page = browser.new_page(viewport={"width": w, "height": h})
        try:
            _open(page, f"{base}/{lang}/notebooks/{CHAPTERS[2]}.html")
            page.locator(".search-button__button:visible").first.click()
            field = page.locator("#pst-search-dialog input[name=q]")
            field.wait_for(state="visible", timeout=10000)
            field.fill(word)
            field.press("Enter")
            page.wait_for_url(re.compile(r"/search\.html\?q="), timeout=15000)
            hits = page.locator("#search-results ul.search li a")
            hits.first.wait_for(timeout=30000)
            hrefs = [hits.nth(i).get_attribute("href") for i in range(hits.count())]
            assert any(chapter in (href or "") for href in hrefs), (lang, w, hrefs)
            assert len(page.evaluate(_SEARCH_FIELDS)) == 1  # the search page: its own field only
        finally:
            page.close()


# Every line of every shown text output (stored outputs and live explorers' text), measured: its text, the boxes of
# its words as rendered (a Range over each), how many screen lines they take, and the right edge of its box's
# content (inside the pre's padding).
_LINES = """() => {
  const out = [];
  for (const pre of document.querySelectorAll('.cell_output pre, .distlearn-live-output pre')) {
    if (!pre.getClientRects().length) continue;
    const box = pre.getBoundingClientRect(), st = getComputedStyle(pre);
    const right = box.left + pre.clientLeft + pre.clientWidth - parseFloat(st.paddingRight) + 1;
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT), nodes = [];
    let n, text = '';
    while ((n = walker.nextNode())) { nodes.push([n, text.length]); text += n.data; }
    const at = (k) => { for (let i = nodes.length - 1; i >= 0; i--) if (nodes[i][1] <= k)
      return [nodes[i][0], Math.min(k - nodes[i][1], nodes[i][0].data.length)]; };
    let start = 0;
    for (const line of text.split('\\n')) {
      const end = start + line.length;
      if (line.trim()) {
        const rects = [];  // the glyphs' boxes, word by word (a space at a wrap hangs past the edge unseen)
        for (const m of line.matchAll(/\\S+/g)) {
          const r = document.createRange();
          r.setStart(...at(start + m.index)); r.setEnd(...at(start + m.index + m[0].length));
          rects.push(...[...r.getClientRects()].filter((q) => q.width > 0));
        }
        out.push({line, live: !!pre.closest('.distlearn-live-output'), right,
                  maxRight: Math.max(...rects.map((q) => q.right)),
                  tops: [...new Set(rects.map((q) => Math.round(q.top)))].length});
      }
      start = end + 1;
    }
  }
  return {lines: out, width: document.documentElement.scrollWidth};
}"""


def line_problems(lines: list[dict]) -> list[str]:
    """A sentence reaching past its box's visible edge, or a row broken over more than one line."""
    bad = []
    for ln in lines:
        if is_row(ln["line"]) and ln["tops"] > 1:
            bad.append(f"row wrapped over {ln['tops']} lines: {ln['line'][:80]!r}")
        if not is_row(ln["line"]) and ln["maxRight"] > ln["right"]:
            bad.append(f"sentence past the box by {ln['maxRight'] - ln['right']:.0f} px: {ln['line'][:80]!r}")
    return bad


def test_line_problems_catch_a_cut_sentence_and_a_broken_row():
    ok = [{"line": "a sentence", "right": 300, "maxRight": 290, "tops": 3},
          {"line": "fp32    adam    4", "right": 300, "maxRight": 600, "tops": 1}]
    assert line_problems(ok) == []
    cut = {"line": "a sentence", "right": 300, "maxRight": 700, "tops": 1}
    broken = {"line": "fp32    adam    4", "right": 300, "maxRight": 290, "tops": 2}
    assert len(line_problems(ok + [cut, broken])) == 2


def _text_pages(site) -> list[str]:
    return [p.docname for p in site.pages if p.section != "exercises"]  # an exercise is stored unexecuted


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_text_outputs_fit_a_phone(site, base, browser, lang):
    problems, counts = [], {"rows": 0, "sentences": 0, "live": 0}
    bh.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for w, h in (PHONE, DESKTOP):
        page = browser.new_page(viewport={"width": w, "height": h})
        try:
            for name in _text_pages(site):
                _open(page, f"{base}/{lang}/{name}.html")
                got = page.evaluate(_LINES)
                if got["width"] > w:
                    problems.append(f"{lang}/{name} at {w} px: the page is {got['width']} px wide")
                problems += [f"{lang}/{name} at {w} px: {p}" for p in line_problems(got["lines"])]
                if w == PHONE[0]:
                    counts["rows"] += sum(is_row(ln["line"]) for ln in got["lines"])
                    counts["sentences"] += sum(not is_row(ln["line"]) for ln in got["lines"])
                    counts["live"] += sum(ln["live"] for ln in got["lines"])
                if w == PHONE[0] and name == f"notebooks/{CHAPTERS[0]}":
                    live = page.locator(".distlearn-live-output pre:visible").first
                    live.scroll_into_view_if_needed()
                    live.screenshot(path=str(bh.SCREENSHOTS / f"site-layout-live-text-{lang}.png"))
        finally:
            page.close()
    print(f"{lang}: {counts}")
    assert problems == [], "\n".join(problems[:40])
    assert counts["rows"] > 100 and counts["sentences"] > 100 and counts["live"] > 5, counts  # the check read lines


# Every shown output figure: its intrinsic width (an image's natural width; an SVG's width attribute in CSS px), its
# rendered width, the column's width, and whether the box that clips it scrolls sideways.
_FIGURES = """() => {
  const column = document.querySelector('article.bd-article');
  const cw = column.clientWidth - parseFloat(getComputedStyle(column).paddingLeft)
             - parseFloat(getComputedStyle(column).paddingRight);
  return {width: document.documentElement.scrollWidth, column: cw, figures: [...document.querySelectorAll(
      '.cell_output img, .distlearn-live-figure svg')].filter((f) => f.getClientRects().length &&
      !f.parentElement.closest('svg')).map((f) => {
    const natural = f.tagName.toLowerCase() === 'svg' ? f.width.baseVal.value : f.naturalWidth;
    let box = f.parentElement;
    while (box !== column && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    const boxRect = box.getBoundingClientRect();
    return {what: (f.getAttribute('src') || f.tagName).slice(-30), natural, shown: f.getBoundingClientRect().width,
            scrolls: box !== column && box.scrollWidth > box.clientWidth, boxWidth: boxRect.width};
  })};
}"""


def figure_problems(facts: dict, phone: bool) -> list[str]:
    """On a phone: a figure shown below 0.8 of its intrinsic width or above it, or wider than the column without
    its own scrolling box (no wider than the column). On a desktop: a figure wider than the column."""
    bad = []
    for f in facts["figures"]:
        if f["natural"] <= 0:
            bad.append(f"{f['what']}: not loaded")
            continue
        ratio = f["shown"] / f["natural"]
        if phone and not 0.8 - 1e-3 <= ratio <= 1 + 1e-3:
            bad.append(f"{f['what']}: shown at {ratio:.2f} of its width ({f['shown']:.0f} of {f['natural']:.0f} px)")
        if f["shown"] > facts["column"] + 1 and not (phone and f["scrolls"] and f["boxWidth"] <= facts["column"] + 1):
            bad.append(f"{f['what']}: {f['shown']:.0f} px in a {facts['column']:.0f} px column, no box of its own")
    return bad


def test_figure_problems_catch_a_shrunk_or_spilling_figure():
    fig = {"what": "a.png", "natural": 1000, "shown": 800, "scrolls": True, "boxWidth": 358}
    assert figure_problems({"column": 358, "figures": [fig]}, phone=True) == []
    assert figure_problems({"column": 358, "figures": [{**fig, "shown": 358, "scrolls": False}]}, phone=True)
    assert figure_problems({"column": 358, "figures": [{**fig, "scrolls": False}]}, phone=True)
    assert figure_problems({"column": 358, "figures": [fig]}, phone=False)  # a desktop figure fits its column
    assert figure_problems({"column": 358, "figures": [{**fig, "natural": 0}]}, phone=True)


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figures_keep_a_readable_size_on_a_phone(site, base, browser, lang):
    problems, seen = [], 0
    bh.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for (w, h), phone in ((PHONE, True), (DESKTOP, False)):
        page = browser.new_page(viewport={"width": w, "height": h})
        try:
            for name in _text_pages(site):
                _open(page, f"{base}/{lang}/{name}.html")
                facts = page.evaluate(_FIGURES)
                if facts["width"] > w:
                    problems.append(f"{lang}/{name} at {w} px: the page is {facts['width']} px wide")
                problems += [f"{lang}/{name} at {w} px: {p}" for p in figure_problems(facts, phone)]
                seen += len(facts["figures"]) if phone else 0
                if phone and name == f"notebooks/{CHAPTERS[2]}":
                    fig = page.locator(".cell_output img:visible").first
                    fig.scroll_into_view_if_needed()
                    page.screenshot(path=str(bh.SCREENSHOTS / f"site-layout-figure-{lang}.png"))
        finally:
            page.close()
    assert problems == [], "\n".join(problems[:40])
    assert seen >= 15, seen  # chapters 01, 08 and 14 and their solutions have figures and live explorers
