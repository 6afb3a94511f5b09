"""The course website (``make site``, :mod:`authoring.website`) as a reader sees it.

The slow tests build the site for two chapters (05 and 06, their exercises and solutions) in both languages with
the real Sphinx + MyST-NB build, serve it on 127.0.0.1 and open it in headless Chromium (Debian's ``chromium``
through Playwright's Python package, never ``playwright install``). They check: every page of both languages
loads with no console error; every internal link and image resolves; formulas are rendered by MathJax (no raw
``\\(…\\)`` or ``$…$``); a chapter page in English has exactly the English prose (headings) and no Chinese outside
code cells and outputs, and the Chinese page exactly the Chinese; every output block of every chapter and solution
page is readable in that page's language alone (the site reads the stored copies ``courses/<lang>/``, executed in
that language; :mod:`authoring.lang_audit`'s rule); an explorer's static picture shows; the "Next"
link leads to the next chapter; the language toggle leads to the same page in the other language; search finds a
term in each language. Each check is a function returning problems, and each is also fed a page broken on purpose
so that it is seen to fail. ``make site`` builds every chapter; a subset keeps this test near 30 s on 2 cores.

The tests that build the site are marked ``extended``: ``make test-extended`` (run by CI after ``make test``) runs
them, about 1 min on 2 cores. ``make test`` runs the rest in about a second, with no Sphinx build and no browser:
what the site makes of each notebook before Sphinx (monolingual pages, links, titles, captions) and each page check
fed pages broken on purpose.

Without Sphinx (``pip install -e '.[site]'``) or Chromium the slow tests are skipped with instructions, except in
CI (``CI=true``) where they fail. Screenshots of chapter 05 go to ``build/screenshots/site-05-{en,zh}.png``.
"""
from __future__ import annotations

from html import unescape
import importlib.util
import os
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

import browser_harness as bh
from authoring import lang_audit as A, website, copies, parity
from distlearn.core.validate import DistlearnValueError

CHAPTERS = ["05_pipeline_parallel", "06_zero_fsdp"]
PAGE = "notebooks/05_pipeline_parallel"
NEXT = "notebooks/06_zero_fsdp"
SEARCH = {"en": "bubble", "zh": "气泡"}
OUT = bh.ROOT / "build" / "site-test"
CJK = re.compile(r"[\u4e00-\u9fff]")
HOW_TO_GET_SPHINX = ("The website needs Sphinx and MyST-NB: run `make site` once, or `.venv/bin/pip install -e "
                     "'.[site]'`. / 构建网站需要 Sphinx 和 MyST-NB：先运行一次 `make site`，或 "
                     "`.venv/bin/pip install -e '.[site]'`。")


# ---------------------------------------------------------------- what the source says each page must show
def source_headings(stem: str, lang: str) -> list[str]:
    """The headings of ``notebooks/<stem>.ipynb``'s ``lang`` prose cells, as plain text (markdown marks removed)."""
    nb = nbformat.read(bh.ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and parity.cell_language(cell) == lang:
            text = re.sub(r"```.*?```", "", cell.source, flags=re.S)
            out += [_plain(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)]
    return out


def _plain(text: str) -> str:
    text = text.translate(str.maketrans("‘’“”", "''\"\""))  # docutils' smart quotes
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return " ".join(re.sub(r"[*_`]", "", text).split())


# ---------------------------------------------------------------- checks on one loaded page (each returns problems)
PAGE_FACTS = """() => {
  const article = document.querySelector('article.bd-article') || document.body;
  const copy = article.cloneNode(true);
  copy.querySelectorAll('div.cell, .headerlink, mjx-container, .math, script, style').forEach(e => e.remove());
  const headings = [...copy.querySelectorAll('h1, h2, h3, h4, h5, h6')].map(h => h.textContent.replace(/\\s+/g, ' ').trim());
  const maths = [...article.querySelectorAll('.math')];
  return {
    prose: copy.innerText,
    headings: headings,
    math: maths.length,
    math_unrendered: maths.filter(m => !m.querySelector('mjx-container') && !(m.tagName === 'MJX-CONTAINER')).length,
    pictures: [...document.querySelectorAll('.distlearn-explorer-static img')].map(
        i => ({w: i.naturalWidth, h: i.naturalHeight, shown: i.getBoundingClientRect().width > 0})),
    toggle: (document.querySelector('a.distlearn-lang-toggle') || {}).href || null,
    outputs: [...article.querySelectorAll('div.cell_output')].map(e => e.innerText),
    h1: (document.querySelector('article h1') || {textContent: ''}).textContent.replace('#', '').trim(),
    cells: [...article.querySelectorAll('div.cell')].map(c => {
      let e = c.previousElementSibling;
      while (e && !e.innerText.trim()) e = e.previousElementSibling;
      return {code: (c.querySelector('.cell_input') || {innerText: ''}).innerText,
              above: e && !e.matches('div.cell') ? e.innerText : '',
              imgs: [...c.querySelectorAll('.cell_output img')].map(i => ({w: i.naturalWidth, h: i.naturalHeight,
                     shown: i.getBoundingClientRect().width > 0}))}; }),
  };
}"""


def language_problems(facts: dict, lang: str, want_headings: list[str]) -> list[str]:
    """A chapter page shows the ``lang`` prose only: its headings are exactly ``want_headings`` (in order) and, for
    English, no Chinese character outside code cells and outputs. (Chapter 05's English prose quotes no Chinese;
    chapters 00 and 09 do, on purpose: the seed's "深度速度".)"""
    problems = []
    got = [h for h in facts["headings"] if h]
    if [_plain(h) for h in got] != want_headings:
        problems.append(f"headings {got[:6]}… are not the {lang} ones {want_headings[:6]}…")
    if lang == "en" and CJK.search(facts["prose"]):
        i = CJK.search(facts["prose"]).start()
        problems.append(f"Chinese prose on the English page: …{facts['prose'][max(0, i - 40):i + 40]!r}…")
    return problems


def output_problems(facts: dict, lang: str, name: str = "page") -> list[str]:
    """Every line of the page's output blocks (printed text, tables, explorer pictures' text, as rendered) is one a
    reader of ``lang`` alone can read, by :mod:`authoring.lang_audit`'s rule (English: no Chinese character;
    Chinese: a line with an English word has Chinese too; a printed Python listing or JSON document is exempt)."""
    lines = [ln for i, text in enumerate(facts["outputs"])
             for ln in A.output_lines([{"output_type": "stream", "name": "stdout", "text": text}], f"output {i}")]
    return [f"{name} [{lang}] {ln.where}: {ln.text[:150]!r}" for ln in A.Report(name, lang, lines).bad]


def math_problems(facts: dict) -> list[str]:
    """Formulas rendered: there is math, MathJax rendered all of it, and no raw ``$…$`` or ``\\(…\\)`` is left."""
    problems = []
    if facts["math"] == 0:
        problems.append("no formula on the page")
    if facts["math_unrendered"]:
        problems.append(f"{facts['math_unrendered']} of {facts['math']} formulas not rendered by MathJax")
    raw = re.search(r"\$(?=\S)[^$\n]*?(?<=\S)\$(?!\d)|\\\(|\\\[", facts["prose"])  # MyST's $…$ rule
    if raw:
        problems.append(f"raw TeX in the prose: {facts['prose'][max(0, raw.start() - 30):raw.end() + 30]!r}")
    return problems


def picture_problems(facts: dict) -> list[str]:
    """At least one explorer static picture, every one loaded and shown."""
    if not facts["pictures"]:
        return ["no explorer static picture on the page"]
    return [f"explorer picture {i} not shown: {p}" for i, p in enumerate(facts["pictures"])
            if not (p["shown"] and p["w"] > 100 and p["h"] > 50)]


def diagram_problems(facts: dict, lang: str, call: str) -> list[str]:
    """The chapter's core-idea diagram (the cell whose code has ``call``, :data:`browser_harness.CORE_DIAGRAMS`)
    is on the page, its picture loaded and shown, and the prose just above it reads in ``lang`` alone."""
    cells = [c for c in facts["cells"] if call in c["code"]]
    if len(cells) != 1:
        return [f"{len(cells)} cells draw {call!r}, not one"]
    (cell,) = cells
    problems = [] if any(i["shown"] and i["w"] > 300 and i["h"] > 100 for i in cell["imgs"]) else [
        f"the diagram's picture is not shown: {cell['imgs']}"]
    text = cell["above"]
    if not text.strip() or bool(CJK.search(text)) != (lang == "zh") or not all(
            A.readable(ln, lang) for ln in text.splitlines()):
        problems.append(f"the prose above the diagram is not {lang}: {text[:120]!r}")
    return problems


def link_problems(site: Path) -> list[str]:
    """Every internal ``href``/``src`` of every HTML page under ``site`` names a file that exists, and every
    ``#anchor`` into a page names an element of that page. (Not the theme's templates under ``_static/``.)"""
    from bs4 import BeautifulSoup

    refs, ids = {}, {}
    for page in sorted(p for p in site.rglob("*.html") if "_static" not in p.parts):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        ids[page.resolve()] = {e.get("id") for e in soup.find_all(id=True)} | \
            {a.get("name") for a in soup.find_all("a", attrs={"name": True})}
        refs[page] = [(tag, el.get(attr)) for tag, attr in (("a", "href"), ("img", "src"), ("script", "src"),
                                                            ("link", "href")) for el in soup.find_all(tag)]
    problems = []
    for page, found in refs.items():
        for tag, ref in found:
            if not ref or re.match(r"^[a-z][a-z0-9+.-]*:", ref, re.I):
                continue  # none, or web / data: / mailto: (the launch and repository links)
            parts = urlsplit(ref)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
            if not target.is_file():
                problems.append(f"{page.relative_to(site)}: {tag} {ref!r} -> missing {target}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in ids.get(target, set()):
                problems.append(f"{page.relative_to(site)}: {ref!r} -> no #{parts.fragment} in that page")
    return problems


# ---------------------------------------------------------------- fast tests of the build's pieces
def test_relink_keeps_built_pages_and_points_the_rest_at_the_repository():
    built = {"notebooks/05_pipeline_parallel", "notebooks/06_zero_fsdp", "exercises/05_pipeline_parallel"}
    md = ("**Next:** [06](06_zero_fsdp.ipynb). [ex](../exercises/05_pipeline_parallel.ipynb) "
          "[sol](../solutions/05_pipeline_parallel.ipynb) [web](https://pytorch.org) [07](07_overlap_prefetch.ipynb)")
    got = website.relink(md, "notebooks/05_pipeline_parallel", built, solutions=False)
    assert "[06](06_zero_fsdp.ipynb)" in got and "[ex](../exercises/05_pipeline_parallel.ipynb)" in got
    assert "[sol]" not in got and " sol " in got            # solutions not published: plain text
    assert "[web](https://pytorch.org)" in got
    assert f"[07]({website.REPOSITORY}/blob/main/notebooks/07_overlap_prefetch.ipynb)" in got
    with_solutions = website.relink(md, "notebooks/05_pipeline_parallel", built, solutions=True)
    assert f"[sol]({website.REPOSITORY}/blob/main/solutions/05_pipeline_parallel.ipynb)" in with_solutions
    zh = website.relink(md + " [glossary](../docs/glossary.md)", "notebooks/05_pipeline_parallel", built, lang="zh")
    assert f"[07]({website.REPOSITORY}/blob/main/courses/zh/notebooks/07_overlap_prefetch.ipynb)" in zh
    assert f"[glossary]({website.REPOSITORY}/blob/main/docs/glossary.md)" in zh  # not a notebook: one file


def test_pages_sections_and_the_solutions_setting():
    pages = website.course_pages(chapters=CHAPTERS)
    assert [p.docname for p in pages] == [f"{s}/{c}" for s in website.SECTIONS for c in CHAPTERS]
    assert all(p.section != "solutions" for p in website.course_pages(chapters=CHAPTERS, solutions=False))
    with pytest.raises(DistlearnValueError, match="unknown chapter") as err:
        website.course_pages(chapters=["99_nothing"])
    assert err.value.param == "chapters" and "未知章节" in str(err.value)


def test_monolingual_page_and_toggle_url():
    nb = nbformat.read(bh.ROOT / "notebooks" / "10_context_parallel.ipynb", as_version=4)
    for lang in ("en", "zh"):
        out = website.monolingual(nb, lang, "notebooks/10_context_parallel", {"notebooks/10_context_parallel"})
        tags = [t for c in out.cells if c.cell_type == "markdown" for t in c.metadata.get("tags", [])]
        assert f"lang-{website.other(lang)}" not in tags and f"lang-{lang}" in tags
        views = [o for c in out.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if website.WIDGET_VIEW in o.get("data", {})]
        assert views and all("text/html" in o["data"] for o in views)  # a picture or a note, never VBox(...)
    for lang in ("en", "zh"):  # a stored copy: its language cell shows nothing (the site has its own toggle)
        copy = nbformat.read(copies.copy_path("notebooks/10_context_parallel.ipynb", lang), as_version=4)
        setter = next(c for c in copy.cells if c.get("id") == copies.LANGUAGE_CELL_ID)
        assert setter.outputs  # Jupyter shows the style widget that hides the other prose
        out = website.monolingual(copy, lang, "notebooks/10_context_parallel", {"notebooks/10_context_parallel"})
        assert next(c for c in out.cells if c.get("id") == copies.LANGUAGE_CELL_ID).outputs == []
    assert website.other_language_url("index", "zh") == "../en/index.html"
    assert website.other_language_url("notebooks/05_pipeline_parallel", "en") == \
        "../../zh/notebooks/05_pipeline_parallel.html"


def test_a_line_printed_in_two_pieces_stays_one_line_on_the_page():
    """A kernel may flush one printed line as two stream outputs; MyST-NB's own merge would break the line there."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(...)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="按数据类型统计的字节数："),
        nbformat.v4.new_output("stream", name="stdout", text=" {'bool': 1}\n")])])
    out = website.monolingual(nb, "zh", "notebooks/x", set())
    assert [o.text for o in out.cells[0].outputs] == ["按数据类型统计的字节数： {'bool': 1}\n"]


def test_solution_pages_have_their_own_title_in_each_language():
    """Search and the browser's tabs tell a solution page from its exercise page (same notebook, same H1)."""
    assert website.solution_title("05 · Exercises: pipeline parallelism", "en") == \
        "05 · Solutions: pipeline parallelism"
    assert website.solution_title("10 · Context parallelism: exercises", "en") == "10 · Context parallelism: solutions"
    assert website.solution_title("05 · 练习：流水线并行", "zh") == "05 · 参考答案：流水线并行"
    assert website.solution_title("10 · 上下文并行：练习", "zh") == "10 · 上下文并行：参考答案"
    assert website.solution_title("Odd", "en") == "Odd: solutions"
    built = {p.docname for p in website.course_pages(chapters=CHAPTERS)}
    for stem in CHAPTERS:
        nb = nbformat.read(bh.ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
        for lang in ("en", "zh"):
            ex = website.title_of(website.monolingual(nb, lang, f"exercises/{stem}", built), lang)
            sol = website.title_of(website.monolingual(nb, lang, f"solutions/{stem}", built), lang)
            assert ex == website.title_of(nb, lang) and sol == website.solution_title(ex, lang) and sol != ex
            assert ("Solutions" in sol) if lang == "en" else ("参考答案" in sol)


def test_explorer_caption_on_the_site_says_defaults_and_links_binder():
    """The stored note ("Run this cell …") is for Jupyter; the site's caption says what the picture is and where
    it is live, in the page's language. The site reads each language's stored copy (courses/<lang>/)."""
    for lang, says, note in (("en", "default settings", "Run this cell"), ("zh", "默认设置", "运行本单元格")):
        nb = nbformat.read(copies.copy_path(f"notebooks/{CHAPTERS[0]}.ipynb", lang), as_version=4)
        stored = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if website.WIDGET_VIEW in o.get("data", {}) and "text/html" in o["data"]]
        assert stored and all(note in "".join(h) for h in stored)
        out = website.monolingual(nb, lang, PAGE, {PAGE})
        shown = [o["data"]["text/html"] for c in out.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if website.WIDGET_VIEW in o.get("data", {})]
        assert len(shown) == len(stored)
        for h in shown:
            assert "Run this cell" not in h and "运行本单元格" not in h and says in h, h[:400]
            assert f'href="{website.BINDER}courses/{lang}/{PAGE}.ipynb"' in h and "<img" in h  # this language's copy
            other = "默认设置" if lang == "en" else "default settings"
            assert other not in h


def test_no_solutions_build_drops_the_answers_sentence():
    here = "notebooks/05_pipeline_parallel"
    md = ("Count the activations. Answers:\n[solutions/05_pipeline_parallel.ipynb](../solutions/05_pipeline_parallel.ipynb)."
          "\n\n**Next:** [06](06_zero_fsdp.ipynb).")
    assert website.drop_answers(md, here) == "Count the activations.\n\n**Next:** [06](06_zero_fsdp.ipynb)."
    assert website.drop_answers("A. Solutions: [s](../solutions/x.ipynb). B", here) == "A. B"
    assert website.drop_answers("scaler. Answers\nare in [s](../solutions/x.ipynb).", here) == "scaler."
    assert website.drop_answers("检查单元格。参考答案：\n[s](../solutions/x.ipynb)。", here) == "检查单元格。"
    assert website.drop_answers("更新。参考答案在 [s](../solutions/x.ipynb)。", here) == "更新。"
    assert website.drop_answers("weights (answers are in `solutions/`):", here) == "weights:"
    assert website.drop_answers("检查（参考答案在 `solutions/` 中）：", here) == "检查："
    assert website.drop_answers("Answers: [ex](../exercises/x.ipynb).", here) == "Answers: [ex](../exercises/x.ipynb)."
    pages = website.course_pages(solutions=False)
    built = {p.docname for p in pages}
    for p in pages:
        nb = nbformat.read(bh.ROOT / p.path, as_version=4)
        for lang in ("en", "zh"):
            for with_solutions in (True, False):
                prose = "\n".join(c.source for c in website.monolingual(nb, lang, p.docname, built, with_solutions).cells
                                  if c.cell_type == "markdown")
                said = re.findall(r"Answers|Solutions:|参考答案", prose)
                if with_solutions:
                    continue
                assert not said and "solutions/" not in prose, (p.docname, lang, said)
    ch05 = nbformat.read(bh.ROOT / "notebooks" / f"{CHAPTERS[0]}.ipynb", as_version=4)
    for lang in ("en", "zh"):  # the sentence is there with solutions
        prose = "\n".join(c.source for c in website.monolingual(ch05, lang, PAGE, built | {"solutions/" + CHAPTERS[0]})
                          .cells if c.cell_type == "markdown")
        assert "solutions/05_pipeline_parallel.ipynb" in prose


def test_page_checks_fail_on_broken_pages(tmp_path):
    """Each browser check reports a page broken on purpose."""
    en, zh = source_headings(CHAPTERS[0], "en"), source_headings(CHAPTERS[0], "zh")
    both = {"prose": "Pipeline 流水线", "headings": [x for pair in zip(en, zh) for x in pair], "math": 3,
            "math_unrendered": 1, "pictures": [], "toggle": None, "h1": "",
            "outputs": ["bubble fraction / 气泡占比: 0.43\n1F1B  0.43", "stage  time (ms)\n0  1.5"]}
    assert language_problems(both, "en", en) and language_problems(both, "zh", zh)
    assert len(output_problems(both, "en")) == 1 and len(output_problems(both, "zh")) == 1  # "1F1B  0.43": both
    assert not output_problems({**both, "outputs": ["bubble fraction: 0.43\n1F1B  0.43"]}, "en")
    assert not output_problems({**both, "outputs": ["气泡占比: 0.43\n1F1B  0.43\ndef f(x):\n    return x"]}, "zh")
    assert output_problems({**both, "outputs": ["气泡占比: 0.43\nstage  time (ms)"]}, "zh")
    assert language_problems({**both, "headings": en, "prose": "only English"}, "zh", zh)
    assert math_problems(both) and math_problems({**both, "math_unrendered": 0, "prose": "t = $p - 1$ raw"})
    assert not math_problems({**both, "math_unrendered": 0, "prose": "costs $5 and $6"})  # money is not TeX
    assert picture_problems(both) and picture_problems({**both, "pictures": [{"w": 0, "h": 0, "shown": True}]})
    call = bh.CORE_DIAGRAMS["06_zero_fsdp"]
    good = {"cells": [{"code": f"{call}dp=4)", "above": "下图画了 4 个 rank。",
                       "imgs": [{"w": 1400, "h": 500, "shown": True}]}]}
    assert diagram_problems(good, "zh", call) == [] and diagram_problems(good, "en", call)
    assert diagram_problems({"cells": []}, "zh", call)
    assert diagram_problems({"cells": [{**good["cells"][0], "imgs": [{"w": 0, "h": 0, "shown": False}]}]}, "zh", call)
    (tmp_path / "a.html").write_text('<a href="b.html#x">b</a><img src="_images/none.png"><a href="#top">t</a>'
                                     '<a href="https://example.org/">web</a>', encoding="utf-8")
    (tmp_path / "b.html").write_text('<p id="y">b</p>', encoding="utf-8")
    problems = link_problems(tmp_path)
    assert len(problems) == 3 and "no #x" in problems[0] and "none.png" in " ".join(problems)


# The theme's furniture a reader of the other language may use on purpose: the language toggle names its target
# language in that language ("English" on the Chinese site), and a few names that are the same in both languages.
FURNITURE_OK = {"en": {"中文", "本页的中文版"}, "zh": {"English", "This page in English", "Binder", "Ctrl"}}
_CODE = re.compile(r"^\.?[\w]+(?:[./][\w]+)+$|^\.\w+$")  # torch.distributed.pipelining, .ipynb


def furniture_problems(page_html: str, lang: str) -> list[str]:
    """The page furniture outside the article (menus, buttons, tooltips, search field, footer) that a reader of
    ``lang`` alone cannot read (:func:`authoring.lang_audit.readable`), apart from :data:`FURNITURE_OK` and code
    names."""
    b, e = page_html.find("<article"), page_html.find("</article>")
    chrome = page_html[:b] + page_html[e:] if 0 <= b < e else page_html
    chrome = re.sub(r"<(script|style)\b.*?</\1>", "", chrome, flags=re.S)
    shown = re.findall(r'\s(?:title|placeholder|data-bs-title)="([^"]*)"', chrome)
    shown += [t.strip() for t in re.findall(r">([^<>]+)<", chrome)]
    texts = {unescape(t) for t in shown if t.strip()}
    return sorted(t for t in texts if t not in FURNITURE_OK[lang] and not _CODE.match(t) and not A.readable(t, lang))


def test_furniture_check_catches_the_other_language():
    page = ('<nav><button title="{}">x</button><input placeholder="{}"></nav><article>{}</article>'
            '<footer>{}</footer>')
    assert furniture_problems(page.format("显示侧栏", "搜索……", "Any text in the article", "© 版权所有"), "zh") == []
    assert furniture_problems(page.format("Toggle primary sidebar", "搜索……", "", "© 版权所有"), "zh") == [
        "Toggle primary sidebar"]
    assert furniture_problems(page.format("Toggle", "Search...", "", "© 版权所有 distlearn"), "en") == [
        "© 版权所有 distlearn"]


# ---------------------------------------------------------------- the real site in a real browser
@pytest.fixture(scope="module")
def built():
    bh.require(importlib.util.find_spec("sphinx") is not None and importlib.util.find_spec("myst_nb") is not None,
             HOW_TO_GET_SPHINX)
    res = website.build(OUT, chapters=CHAPTERS, jobs=1, log=lambda *a: None, explorers=False)  # live: test_web_explorers
    print(f"site build ({len(res.pages)} pages x {len(res.languages)} languages): {res.seconds:.1f} s")
    return res


@pytest.fixture(scope="module")
def server(built):
    with website.serve(built.out) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = bh.find_chromium()
    bh.require(chromium is not None, bh.HOW_TO_GET_CHROMIUM)
    from playwright.sync_api import sync_playwright

    env = dict(os.environ)
    spec = importlib.util.find_spec("mplfonts")  # Noto Sans CJK for the screenshots, as in browser_harness
    if spec is not None:
        conf = tmp_path_factory.mktemp("fonts") / "fonts.conf"
        font_dir = Path(list(spec.submodule_search_locations)[0]) / "fonts"
        conf.write_text('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
                        '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
                        f'  <dir>{font_dir}</dir>\n  <cachedir>{conf.parent / "cache"}</cachedir>\n</fontconfig>\n',
                        encoding="utf-8")
        env["FONTCONFIG_FILE"] = str(conf)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, env=env,
                               args=[a for a in bh.CHROMIUM_FLAGS + bh.RENDER_FLAGS if a != "--headless"])
        yield b
        b.close()


class Reader:
    """One browser page that records console errors, failed requests and HTTP errors."""

    def __init__(self, browser, base: str):
        self.base, self.errors = base, []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        # A request cut short by the next navigation (ERR_ABORTED) is no fault; a missing file is an HTTP 404.
        self.page.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "") and
                     self.errors.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.errors.append(f"HTTP {r.status}: {r.url}"))

    def open(self, path: str) -> dict:
        self.page.goto(f"{self.base}/{path}", wait_until="load")
        return self.facts()

    def facts(self) -> dict:
        self.page.wait_for_load_state("load")
        if self.page.evaluate("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"):
            self.page.evaluate("() => MathJax.startup.promise")
        return self.page.evaluate(PAGE_FACTS)


@pytest.fixture(scope="module")
def reader(browser, server):
    r = Reader(browser, server)
    yield r
    r.page.close()


@pytest.mark.extended
@pytest.mark.slow
def test_site_builds_without_warnings_and_links_resolve(built):
    assert not any(built.warnings.values()), built.warnings
    for lang in ("en", "zh"):
        for p in built.pages:
            assert (built.out / lang / f"{p.docname}.html").is_file(), (lang, p)
    assert link_problems(built.out) == []
    for lang, word, run_this in (("en", "Solutions", "Run this cell"), ("zh", "参考答案", "运行本单元格")):
        def title(docname):
            m = re.search(r"<title>(.*?)</title>", (built.out / lang / f"{docname}.html").read_text(encoding="utf-8"),
                          re.S)
            return m.group(1)
        ex, sol = title(f"exercises/{CHAPTERS[0]}"), title(f"solutions/{CHAPTERS[0]}")
        assert ex != sol and word in sol and word not in ex, (ex, sol)
        chapter = (built.out / lang / f"{PAGE}.html").read_text(encoding="utf-8")
        assert "distlearn-explorer-site-note" in chapter and run_this not in chapter


@pytest.fixture(scope="module")
def visited(built, reader):
    """Every page of the built site opened once, as a reader opens it: ``{path: (facts, errors)}`` (``facts``: what
    PAGE_FACTS reads; ``errors``: its console errors, failed requests and HTTP errors). The chapter page in each
    language is screenshotted while it is open (``build/screenshots/site-05-{en,zh}.png``)."""
    pages = sorted(str(p.relative_to(built.out)) for p in built.out.rglob("*.html") if "_static" not in p.parts)
    out = {}
    for path in pages:
        reader.errors.clear()
        facts = reader.open(path)
        out[path] = (facts, list(reader.errors))
        if path.endswith(f"/{PAGE}.html"):
            bh.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            reader.page.screenshot(path=str(bh.SCREENSHOTS / f"site-05-{path.split('/')[0]}.png"))
    return out


@pytest.mark.extended
@pytest.mark.slow
def test_every_page_loads_without_console_errors(built, visited):
    assert len(visited) >= 2 * (len(built.pages) + 3)   # + home, search and index pages in each language
    assert [f"{path}: {e}" for path, (_, errors) in visited.items() for e in errors] == []


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter_page_as_a_reader_sees_it(visited, lang):
    facts, _ = visited[f"{lang}/{PAGE}.html"]
    assert language_problems(facts, lang, source_headings(CHAPTERS[0], lang)) == []
    assert math_problems(facts) == []
    assert picture_problems(facts) == []


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_chapter_page_shows_its_core_idea_diagram(visited, lang):
    """Issue 34: each chapter's diagram, drawn in the page's language (the site shows courses/<lang>/), is seen on
    its page in that language, under prose in that language (the pages opened once by ``visited``)."""
    problems = []
    for stem in CHAPTERS:
        facts, _ = visited[f"{lang}/notebooks/{stem}.html"]
        problems += [f"{lang}/{stem}: {p}" for p in diagram_problems(facts, lang, bh.CORE_DIAGRAMS[stem])]
    assert problems == []


@pytest.mark.extended
def test_page_furniture_is_in_the_page_language(built):
    """Menus, buttons, tooltips, the search field and the footer of every page built speak the page's language:
    the Chinese site's untranslated theme strings come from website/locale/zh_CN/ and website/_templates/."""
    problems = {}
    for lang in ("en", "zh"):
        for name in ["index", "search"] + [p.docname for p in built.pages]:
            bad = furniture_problems((built.out / lang / f"{name}.html").read_text(encoding="utf-8"), lang)
            if bad:
                problems[f"{lang}/{name}"] = bad
    assert problems == {}


@pytest.mark.extended
@pytest.mark.slow
def test_outputs_are_in_the_page_language(built, visited):
    """Each site shows the outputs stored in its own language's copy: no Chinese output line on an English page, no
    English-only printed line on a Chinese page, on every chapter and solution page built (lang_audit's rule on the
    rendered output blocks)."""
    problems, seen = [], {"en": 0, "zh": 0}
    for lang in ("en", "zh"):
        for p in built.pages:
            if p.section == "exercises":
                continue  # no outputs: an exercise is stored unexecuted
            facts, _ = visited[f"{lang}/{p.docname}.html"]
            seen[lang] += sum(len(t.splitlines()) for t in facts["outputs"])
            problems += output_problems(facts, lang, p.docname)
    assert problems == [], "\n".join(problems)
    assert min(seen.values()) > 100, seen  # the check read the outputs, not an empty page


@pytest.mark.extended
@pytest.mark.slow
def test_next_link_and_language_toggle(reader):
    reader.open(f"en/{PAGE}.html")
    reader.page.locator("article p", has_text="Next:").get_by_role("link").first.click()
    facts = reader.facts()
    assert reader.page.url.endswith(f"/en/{NEXT}.html"), reader.page.url
    assert facts["h1"] == source_headings(CHAPTERS[1], "en")[0]
    reader.page.locator("a.distlearn-lang-toggle").click()
    facts = reader.facts()
    assert reader.page.url.endswith(f"/zh/{NEXT}.html"), reader.page.url
    assert facts["h1"] == source_headings(CHAPTERS[1], "zh")[0]
    reader.page.locator("a.distlearn-lang-toggle").click()
    assert reader.page.url.endswith(f"/en/{NEXT}.html"), reader.page.url


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_search_finds_a_term_in_each_language(reader, lang):
    reader.open(f"{lang}/search.html?q={SEARCH[lang]}")
    hits = reader.page.locator("#search-results ul.search li a")
    hits.first.wait_for(timeout=15000)
    hrefs = [hits.nth(i).get_attribute("href") for i in range(hits.count())]
    assert any(PAGE in (h or "") for h in hrefs), hrefs
    summary = reader.page.locator("#search-results .search-summary")
    summary.wait_for(timeout=15000)
    reader.page.wait_for_function("() => /\\d/.test(document.querySelector('#search-results .search-summary')"
                                  ".innerText)", timeout=15000)
    text = summary.inner_text()           # the summary in the page's language (Sphinx 8.2's zh_CN lacks it)
    assert ("搜索完成" in text and "Search" not in text) if lang == "zh" else "Search finished" in text, text


@pytest.mark.extended
@pytest.mark.slow
def test_site_opened_as_a_file_searches_without_errors(built, browser):
    """The README says to open build/site/index.html: from file:// a browser refuses the fetches that Sphinx's
    search makes for result snippets (CORS), so the site shows results without snippets there (no error), and
    `make site` / the README say how to serve it for the snippets."""
    r = Reader(browser, built.out.resolve().as_uri())
    try:
        for lang in ("en", "zh"):
            r.errors.clear()
            r.open(f"{lang}/search.html?q={SEARCH[lang]}")
            hits = r.page.locator("#search-results ul.search li a")
            hits.first.wait_for(timeout=15000)
            r.page.wait_for_timeout(1500)  # snippet fetches, if any, fail within this
            hrefs = [hits.nth(i).get_attribute("href") for i in range(hits.count())]
            assert any(PAGE in (h or "") for h in hrefs), hrefs
            r.open(f"{lang}/{PAGE}.html")
            assert r.errors == [], (lang, r.errors)
    finally:
        r.page.close()
    serve = "python -m http.server -d build/site"
    assert serve in (bh.ROOT / "README.md").read_text(encoding="utf-8")
    assert serve in (bh.ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert serve in (bh.ROOT / "Makefile").read_text(encoding="utf-8")


def copy_link_problems(page_html: str, lang: str, docname: str, site_lang: Path) -> list[str]:
    """Links of a built page that do not lead to the page language's copy: a Binder link not opening
    ``courses/<lang>/<docname>.ipynb`` (the launch button, an explorer's caption), a repository link to a notebook
    outside ``courses/<lang>/`` or to a file the repository lacks, or a download (``_sources/…ipynb``) whose prose is
    not in ``lang`` alone."""
    problems = []
    hrefs = [unescape(h) for h in re.findall(r'href="([^"]+)"', page_html)]
    binder = [h for h in hrefs if "mybinder.org" in h]
    if not binder:
        problems.append("no Binder link")
    problems += [f"Binder: {h}" for h in binder if not h.endswith(f"urlpath=lab/tree/courses/{lang}/{docname}.ipynb")]
    blob = f"{website.REPOSITORY}/blob/main/"
    for h in hrefs:
        if h.startswith(blob):
            path = h[len(blob):].split("#")[0].split("?")[0]
            if path.endswith(".ipynb") and not path.startswith(f"courses/{lang}/"):
                problems.append(f"repository link to another copy: {h}")
            elif not (bh.ROOT / path).exists():
                problems.append(f"repository link to a missing file: {h}")
    downloads = [h for h in hrefs if "_sources/" in h and h.endswith(".ipynb")]
    if not downloads:
        problems.append("no .ipynb download")
    for h in downloads:
        target = site_lang / posixpath.normpath(posixpath.join(posixpath.dirname(docname), h))
        if not target.is_file():
            problems.append(f"download missing: {h}")
            continue
        nb = nbformat.read(target, as_version=4)
        others = [c.source[:40] for c in nb.cells if c.cell_type == "markdown"
                  and parity.cell_language(c) not in (lang, None)]
        chinese = sum(bool(CJK.search(c.source)) for c in nb.cells if c.cell_type == "markdown")
        if others or (chinese == 0 if lang == "zh" else False):
            problems.append(f"download {h} is not the {lang} copy: {others[:2]}")
    return problems


def test_copy_link_check_catches_the_bilingual_notebook(tmp_path):
    page = ('<a href="https://mybinder.org/v2/gh/distlearn/distlearn/main?urlpath=lab/tree/notebooks/05_x.ipynb">'
            f'<a href="{website.REPOSITORY}/blob/main/notebooks/05_x.ipynb">')
    problems = copy_link_problems(page, "zh", "notebooks/05_x", tmp_path)
    assert len(problems) == 3 and problems[0].startswith("Binder") and "another copy" in problems[1], problems


@pytest.mark.extended
@pytest.mark.slow
def test_binder_repository_and_download_links_open_the_page_language_copy(built):
    """Issue 39: the Chinese site's Binder button opened the bilingual notebook. Every page built, in each language:
    the launch button and the explorers' captions open courses/<lang>/…, the repository links to a notebook go to
    that copy, the .ipynb download is that language's notebook."""
    problems = []
    for lang in ("en", "zh"):
        for p in built.pages:
            html_text = (built.out / lang / f"{p.docname}.html").read_text(encoding="utf-8")
            problems += [f"{lang}/{p.docname}: {x}" for x in copy_link_problems(html_text, lang, p.docname,
                                                                                built.out / lang)]
    assert problems == []


# What a reader sees of the language chooser and the toggle: their font, colour and size, and whether every header
# button of a chapter page lies inside the window.
_CHOOSER_LOOK = """() => { const a = document.querySelector('ul.choices a'), s = getComputedStyle(a);
  const name = getComputedStyle(a.querySelector('.language'));
  return {font: getComputedStyle(document.body).fontFamily, color: name.color, border: s.borderTopWidth,
          cards: [...document.querySelectorAll('ul.choices a')].map((e) => e.getBoundingClientRect().toJSON())}; }"""
_HEADER_LOOK = """() => { const t = document.querySelector('a.distlearn-lang-toggle'), s = getComputedStyle(t);
  const buttons = [...document.querySelectorAll('.bd-header-article .btn, .bd-header-article button')]
    .filter((b) => b.offsetParent !== null).map((b) => b.getBoundingClientRect().right);
  return {size: parseFloat(s.fontSize), border: s.borderTopWidth, icon: !!t.querySelector('.fa-language'),
          right: Math.max(...buttons), width: document.documentElement.clientWidth}; }"""


@pytest.mark.extended
@pytest.mark.slow
def test_language_chooser_and_toggle_look_like_the_site(built, browser, server):
    """Issue 39: the chooser (build/site/index.html) was an unstyled list in the browser's serif font; the toggle
    was a bare 1.3rem word. On a phone (390×844) and a desktop (1366×900): the chooser uses the theme's font stack
    and primary colour, one card per language (side by side on the desktop); the toggle is a small outlined button
    with the language icon; every header button of a chapter page lies inside the window. Screenshots:
    build/screenshots/site-{chooser,toggle}-{phone,desktop}.png."""
    bh.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, (w, h) in {"phone": (390, 844), "desktop": (1366, 900)}.items():
        page = browser.new_page(viewport={"width": w, "height": h})
        try:
            page.goto(f"{server}/index.html", wait_until="load")
            look = page.evaluate(_CHOOSER_LOOK)
            page.screenshot(path=str(bh.SCREENSHOTS / f"site-chooser-{name}.png"))
            assert "system-ui" in look["font"] and look["color"] == "rgb(10, 125, 145)", look
            assert look["border"] == "1px" and len(look["cards"]) == 2
            tops = [c["top"] for c in look["cards"]]
            assert (tops[0] == tops[1]) == (name == "desktop"), look["cards"]
            for lang in ("en", "zh"):
                page.goto(f"{server}/{lang}/{PAGE}.html", wait_until="load")
                header = page.evaluate(_HEADER_LOOK)
                assert header["size"] <= 15 and header["border"] == "1px" and header["icon"], header
                assert header["right"] <= header["width"], (name, lang, header)
            page.screenshot(path=str(bh.SCREENSHOTS / f"site-toggle-{name}.png"), clip={"x": 0, "y": 0, "width": w,
                                                                                         "height": min(h, 300)})
        finally:
            page.close()


@pytest.mark.extended
@pytest.mark.slow
def test_phone_page_does_not_pan_sideways_and_home_source_link_exists(built, browser, server):
    """Read on a phone (390×844), chapter 05 was 528 px wide: one long name in inline code (inside a closed aside)
    could not break, so the whole page panned sideways into blank space. And the home page's "view source" opened
    courses/<lang>/index.md on GitHub, a file that does not exist (the home page is generated): it opens its
    generator, authoring/website.py."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        for lang in ("en", "zh"):
            page.goto(f"{server}/{lang}/{PAGE}.html", wait_until="load")
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390, (lang, width)
    finally:
        page.close()
    for lang in ("en", "zh"):
        home = (built.out / lang / "index.html").read_text(encoding="utf-8")
        assert "index.md?plain=1" not in home and f"{website.REPOSITORY}/blob/main/authoring/website.py" in home


@pytest.mark.extended
def test_home_tab_title_says_the_site_title_once(built):
    """The home page's tab reads the site's title once (it read "distlearn … — distlearn …"); a chapter's tab keeps
    "chapter — site"."""
    def tab(path):
        return re.search(r"<title>(.*?)</title>", path.read_text(encoding="utf-8"), re.S).group(1).strip()
    for lang in ("en", "zh"):
        home = tab(built.out / lang / "index.html")
        assert "&#8212;" not in home and "—" not in home and home.startswith("distlearn"), home
        page = built.pages[0].docname
        chapter = tab(built.out / lang / f"{page}.html")
        assert chapter.endswith(home) and chapter != home, (chapter, home)
