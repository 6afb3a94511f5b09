"""The website's search, as a reader uses it (issue 39): every glossary term finds the chapter that teaches it, in
both languages, and a result's snippet starts at the matching text.

The Chinese site's index is cut into words by jieba with the glossary's Chinese terms added to its dictionary
(:func:`authoring.website.search_dictionary`), and the search page cuts a query into the index's own words
(``website/_static/distlearn-search.js``). Before, 专家并行, 数据并行, 混合专家 and 有效训练时间占比 found 0 pages.

Which chapter teaches a term is read from the sources, the stored monolingual copies ``courses/<lang>/notebooks/``
that the site shows: the chapter whose prose (:func:`authoring.parity.prose`: no code, LaTeX or link targets) names
the term most often (ties: the earlier chapter); an English term is found as ``make parity`` finds it
(:func:`authoring.parity.glossary_terms`), a Chinese one as written, spaces ignored. The queries are the glossary's
forms (``docs/glossary.md``): each English form, and each Chinese form with a Chinese character in it.

The fast tests check that mapping and the dictionary; the extended ones (``make test-extended``; about 1 min on 2
cores) build the whole site, serve it on 127.0.0.1 and search in headless Chromium (Debian's ``chromium`` through
Playwright) with the page's own search code (``Search._parseQuery`` and ``Search._performSearch`` of Sphinx's
``searchtools.js`` with our splitter) for every term, and through the search page itself for a few, reading the
result list and its snippets.
"""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

import browser_harness as bh
from authoring import parity, paths, website

HAN = re.compile(r"[\u4e00-\u9fff]")
OUT = bh.ROOT / "build" / "site-search"
# the four queries of the issue, which found 0 pages on the Chinese site
ISSUE_QUERIES = ["专家并行", "数据并行", "混合专家", "有效训练时间占比"]


# ---------------------------------------------------------------- what the sources say
def glossary_rows(path: Path = parity.GLOSSARY) -> list[tuple[str, str]]:
    """``(English column, Chinese column)`` of each row of the glossary's term table."""
    rows, inside = [], False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("## ") and inside:
            break
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cols) < 2 or set(cols[0]) <= set("-: ") or cols[0] == "English":
            continue
        inside = True
        rows.append((cols[0], cols[1]))
    return rows


def chinese_forms(zh_col: str) -> list[str]:
    """The Chinese forms of a glossary row's 中文 column with a Chinese character in them: the text outside the
    parentheses split on "/", and what is inside each split on "、" ("ZeRO（零冗余优化器）" → "零冗余优化器";
    "低通信训练（DiLoCo、局部 SGD）" → "低通信训练", "局部 SGD"; "分块（K/V 块）" → "分块", "K/V 块")."""
    inside = [x for group in re.findall(r"[（(]([^)）]*)[)）]", zh_col) for x in group.split("、")]
    outside = re.sub(r"\s*[（(][^)）]*[)）]", "", zh_col).split("/")
    return list(dict.fromkeys(p.strip() for p in outside + inside if HAN.search(p)))


def glossary_queries(lang: str) -> list[str]:
    """Every form of every glossary term in ``lang``: the English forms ``make parity`` looks for, or the Chinese
    forms of :func:`chinese_forms` (the column's Latin forms where it has no Chinese one: "DeepSpeed", "Muon")."""
    if lang == "en":
        return list(dict.fromkeys(t.en for t in parity.glossary_terms()))
    return list(dict.fromkeys(f for _, zh in glossary_rows()
                              for f in chinese_forms(zh) or [p.strip() for p in re.split(r"[/（）()]", zh)
                                                               if p.strip()]))


@functools.lru_cache(maxsize=2)
def chapter_texts(lang: str) -> dict[str, tuple[str, str, str]]:
    """``{"notebooks/05_pipeline_parallel": (title, headings, prose)}`` of each chapter's stored ``lang`` copy (what
    the site shows): its first ``#`` heading, all its headings, and its markdown without code, LaTeX, link targets
    or HTML tags (:func:`authoring.parity.prose`)."""
    out = {}
    for path in sorted((bh.ROOT / "courses" / lang / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=paths.NB_VERSION)
        markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        headings = re.findall(r"^#{1,6}\s+(.+)$", parity.prose(markdown), re.M)
        out[f"notebooks/{path.stem}"] = (headings[0] if headings else "", "\n".join(headings), parity.prose(markdown))
    return out


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def mentions(query: str, text: str, lang: str) -> int:
    """How often ``text`` names ``query``: as ``make parity`` finds an English term, a Chinese one spaces ignored."""
    if lang == "en":
        pattern = next((t.pattern for t in parity.glossary_terms() if t.en == query), None)
        pattern = pattern or re.compile(r"(?<![\w-])" + re.escape(query) + r"(?![\w])", re.I)
        return len(pattern.findall(text))
    return _compact(text).count(_compact(query))


def teaching_chapter(query: str, lang: str) -> str | None:
    """The chapter that teaches ``query``: the first whose title names it ("Pipeline parallelism"), else the first
    with a section heading that names it, else the first whose prose names it (the welcome page, a map of the
    course, only when no chapter does); None if no page names it."""
    texts = chapter_texts(lang)
    order = [d for d in texts if not d.endswith("00_welcome")] + [d for d in texts if d.endswith("00_welcome")]
    for part in range(3):
        for doc in order:
            if mentions(query, texts[doc][part], lang):
                return doc
    return None


def expected_hits(lang: str) -> tuple[dict[str, str], list[str]]:
    """``({query: chapter that teaches it}, [queries no chapter names])`` for every glossary form in ``lang``."""
    want, untaught = {}, []
    for q in glossary_queries(lang):
        chapter = teaching_chapter(q, lang)
        if chapter:
            want[q] = chapter
        else:
            untaught.append(q)
    return want, untaught


# ---------------------------------------------------------------- fast checks of the mapping and the dictionary
def row_forms(en_col: str, zh_col: str, lang: str, tmp: Path) -> list[str]:
    """The forms of one glossary row in ``lang``: English as :func:`authoring.parity.glossary_terms` reads the row
    (written alone to a glossary file under ``tmp``), Chinese as :func:`chinese_forms` (or the whole column split
    on "/" and the parentheses when no form has a Chinese character: "DeepSpeed", "ZeRO-1", "Muon")."""
    if lang == "zh":
        return chinese_forms(zh_col) or [p.strip() for p in re.split(r"[/（）()]", zh_col) if p.strip()]
    path = tmp / f"row-{abs(hash(en_col))}.md"
    path.write_text(f"| English | 中文 | note |\n|---|---|---|\n| {en_col} | {zh_col} | |\n", encoding="utf-8")
    return [t.en for t in parity.glossary_terms(path)]


def test_most_glossary_rows_are_named_by_a_chapter_in_each_language(tmp_path):
    """The browser test below searches for every form of every row; it can require a chapter only for a form that
    some chapter names. Here: nine rows in ten have such a form in each language (a broken mapping would find
    none). The rest are listed (glossary rows the chapters' prose does not use in that form)."""
    rows = glossary_rows()
    assert len(rows) > 100
    for lang in ("en", "zh"):
        want, _ = expected_hits(lang)
        unnamed = [row[0] if lang == "en" else row[1] for row in rows
                   if not any(f in want for f in row_forms(*row, lang, tmp_path))]
        print(f"{lang}: {len(rows) - len(unnamed)} of {len(rows)} rows named by a chapter; not: {unnamed}")
        assert len(unnamed) <= len(rows) // 10, (lang, unnamed)


def test_teaching_chapter_reads_the_sources():
    assert teaching_chapter("pipeline bubble", "en") == "notebooks/05_pipeline_parallel"
    assert teaching_chapter("流水线气泡", "zh") == "notebooks/05_pipeline_parallel"
    assert teaching_chapter("专家并行", "zh") == "notebooks/11_experts"
    assert teaching_chapter("no such term in the course", "en") is None
    assert chinese_forms("ZeRO（零冗余优化器）") == ["零冗余优化器"]
    assert chinese_forms("低通信训练（DiLoCo、局部 SGD）") == ["低通信训练", "局部 SGD"]
    assert chinese_forms("序列片段 / 分块（K/V 块）/ Transformer 层") == ["序列片段", "分块", "Transformer 层", "K/V 块"]


def test_search_words_are_the_glossary_compounds():
    words = website.search_words()
    for q in ISSUE_QUERIES + ["零冗余优化器", "流水线气泡", "完全分片数据并行", "K/V 块"]:
        assert q in words, q
    assert all(HAN.search(w) for w in words)
    assert website.index_word("K/V 块") == "k/v块"


def test_chinese_index_holds_the_compounds_whole():
    """What the Chinese index holds: jieba alone cuts 有效训练时间占比 into 有效/训练/时间/占/比 and 专家并行 into
    专家/并行, so a query for the whole term matched no word of the index; the site's search language keeps each
    glossary term whole, also inside a longer word (全局批量 in 全局批量大小), and still indexes the parts."""
    if importlib.util.find_spec("jieba") is None or importlib.util.find_spec("sphinx") is None:
        pytest.skip("jieba and Sphinx (the .[site] extra) are not installed")
    import jieba
    from sphinx.search.zh import SearchChinese

    jieba.setLogLevel(60)
    assert "专家并行" not in SearchChinese({}).split("专家并行的通信")
    lang = website.chinese_search_language()({})
    for q in ISSUE_QUERIES:
        words = lang.split(f"这一节讲{q}的代价")
        assert q in words, (q, words)
    assert "全局批量" in lang.split("全局批量大小是 1024")
    assert "k/v块" in lang.split("每个 K/V 块轮转一次")
    assert {"专家", "并行"} <= set(lang.split("专家并行"))


# ---------------------------------------------------------------- the whole site, searched in Chromium
@pytest.fixture(scope="module")
def site():
    bh.require(importlib.util.find_spec("sphinx") is not None and importlib.util.find_spec("myst_nb") is not None,
               "the website needs the .[site] extra (make site)")
    res = website.build(OUT, jobs=1, log=lambda *a: None, explorers=False)  # search needs no live explorer
    assert not any(res.warnings.values()), res.warnings
    return res


@pytest.fixture(scope="module")
def base_url(site):
    with website.serve(site.out) as base:
        yield base


@pytest.fixture(scope="module")
def page(base_url):
    chromium = bh.find_chromium()
    bh.require(chromium is not None, bh.HOW_TO_GET_CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=bh.CHROMIUM_FLAGS)
        p = browser.new_page(viewport={"width": 1280, "height": 900})
        p.distlearn_errors = []
        p.on("pageerror", lambda e: p.distlearn_errors.append(str(e)))
        p.on("console", lambda m: m.type == "error" and p.distlearn_errors.append(m.text))
        yield p
        browser.close()


# Sphinx's own search of the open search page (searchtools.js, with website/_static/distlearn-search.js's splitter):
# for each query, the pages found, as "notebooks/05_pipeline_parallel", and the words the query was cut into.
_SEARCH_ALL = """(queries) => queries.map((q) => {
  const [query, terms, excluded, highlight, objects] = Search._parseQuery(q);
  const found = Search._performSearch(query, terms, excluded, highlight, objects);
  return {q, words: [...terms], pages: [...new Set(found.map((r) => r[0]))]};
})"""


def search_all(page, base_url: str, lang: str, queries: list[str]) -> dict[str, dict]:
    """Open the ``lang`` site's search page and run each query through its search code: ``{query: {"words",
    "pages"}}``."""
    page.goto(f"{base_url}/{lang}/search.html", wait_until="load")
    page.wait_for_function("() => typeof Search !== 'undefined' && Search._index !== null", timeout=30000)
    return {r["q"]: r for r in page.evaluate(_SEARCH_ALL, queries)}


def search_problems(results: dict[str, dict], want: dict[str, str]) -> list[str]:
    """Each query whose results miss the chapter that teaches it."""
    return [f"{q!r} (cut into {results[q]['words']}) finds {len(results[q]['pages'])} pages, not {chapter}"
            for q, chapter in want.items() if chapter not in results[q]["pages"]]


def test_search_problems_reports_a_missed_chapter():
    results = {"专家并行": {"words": ["专家并行"], "pages": []}, "数据并行": {"words": ["数据并行"],
                                                                        "pages": ["notebooks/03_data_parallel"]}}
    want = {"专家并行": "notebooks/11_experts", "数据并行": "notebooks/03_data_parallel"}
    assert search_problems(results, want) == ["'专家并行' (cut into ['专家并行']) finds 0 pages, not notebooks/11_experts"]


@pytest.mark.extended
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_glossary_term_finds_the_chapter_that_teaches_it(site, base_url, page, lang):
    want, untaught = expected_hits(lang)
    results = search_all(page, base_url, lang, list(want) + untaught)
    assert search_problems(results, want) == []
    print(f"{lang}: {len(want)} glossary forms each found their chapter; {len(untaught)} named by no chapter "
          f"({untaught[:6]} …)")
    if lang == "zh":
        for q in ISSUE_QUERIES:
            assert results[q]["pages"], q
        # a query the glossary does not hold whole is cut into words of the index
        mixed = search_all(page, base_url, lang, ["流水线气泡占比", "FSDP2的分片"])
        assert mixed["流水线气泡占比"]["words"][0] == "流水线气泡" and mixed["流水线气泡占比"]["pages"], mixed
        assert mixed["FSDP2的分片"]["words"] == ["fsdp2", "分片"] and mixed["FSDP2的分片"]["pages"], mixed
    assert page.distlearn_errors == []


# The search page as a reader sees it: each result's link and its snippet (once every snippet has arrived).
_RESULTS = """() => Array.from(document.querySelectorAll('#search-results ul.search li')).map((li) => ({
  href: li.querySelector('a').getAttribute('href'),
  snippet: (li.querySelector('p.context') || {textContent: null}).textContent}))"""


def snippet_problems(results: list[dict], words: list[str]) -> list[str]:
    """Snippets that do not start at a word of the query (after a leading "… "), or that show the theme's buttons."""
    bad = []
    for r in results:
        text = (r["snippet"] or "").removeprefix("… ").lower()
        if not any(text.startswith(w.lower()) for w in words) or re.search(r"\b(Settings|Light|Dark)\b", r["snippet"]
                                                                            or ""):
            bad.append(f"{r['href']}: {r['snippet'][:80] if r['snippet'] else r['snippet']!r}")
    return bad


def test_snippet_problems_catch_a_theme_snippet():
    ok = {"href": "a.html", "snippet": "… Data parallelism copies the model"}
    theme = {"href": "b.html", "snippet": "Settings Light Dark 05 · Pipeline parallelism …"}
    late = {"href": "c.html", "snippet": "… keeps one copy per GPU. Data parallelism copies"}
    assert snippet_problems([ok], ["data"]) == []
    assert len(snippet_problems([ok, theme, late], ["data"])) == 2


@pytest.mark.extended
@pytest.mark.parametrize("lang, query", [("en", "data parallelism"), ("en", "memory"), ("zh", "专家并行"),
                                         ("zh", "有效训练时间占比")])
def test_search_page_lists_the_chapter_with_a_snippet_at_the_match(site, base_url, page, lang, query):
    page.goto(f"{base_url}/{lang}/search.html?q={query}", wait_until="load")
    page.wait_for_function("() => /\\d/.test((document.querySelector('#search-results .search-summary') || "
                           "{innerText: ''}).innerText)", timeout=30000)
    page.wait_for_function("() => Array.from(document.querySelectorAll('#search-results ul.search li'))"
                           ".every((li) => li.querySelector('p.context'))", timeout=30000)
    results = page.evaluate(_RESULTS)
    words = page.evaluate("() => [...Search._distlearnLast.words, ...Search._distlearnLast.stems]")
    want = teaching_chapter(query, lang) or teaching_chapter(query.split()[0], lang)
    assert any(r["href"].startswith(want) for r in results), (want, [r["href"] for r in results])
    assert snippet_problems(results, [query] + words) == []
    # the chapter before the exercises and solutions that repeat its words (Scorer.score): the first result is a
    # chapter, and no exercise or solution page comes before the teaching chapter
    kinds = [r["href"].split("/")[0] for r in results]
    first_want = next(i for i, r in enumerate(results) if r["href"].startswith(want))
    assert kinds[0] == "notebooks" and not {"exercises", "solutions"} & set(kinds[:first_want]), kinds
    # the language switch keeps the query
    toggle = page.evaluate("() => document.querySelector('a.distlearn-lang-toggle').href")
    assert "search.html?q=" in toggle and ("/zh/" if lang == "en" else "/en/") in toggle, toggle


def test_soft_breaks_are_joined_and_dropped_between_chinese_characters():
    """A line break of the source inside "完全分片\\n数据并行" is its own text node (MyST): the index never saw the
    whole term, and Chromium drew a space between the two characters."""
    pytest.importorskip("docutils")
    from types import SimpleNamespace

    from docutils import nodes

    def page(lang):
        para = nodes.paragraph("", "", nodes.Text("本章介绍完全分片"), nodes.Text("\n"), nodes.Text("数据并行 (FSDP)\n和"),
                               nodes.strong("", "粗体"), nodes.Text(" and\nmore"))
        code = nodes.literal_block("", "第一行\n第二行")
        doc = nodes.document(None, None)
        doc += [para, code]
        website.join_soft_breaks(SimpleNamespace(config=SimpleNamespace(language=lang)), doc)
        return para, code

    para, code = page("zh_CN")
    assert [str(t) for t in para.children if isinstance(t, nodes.Text)] == ["本章介绍完全分片数据并行 (FSDP)\n和",
                                                                            " and\nmore"]
    assert code.astext() == "第一行\n第二行"
    para, _ = page("en")
    assert str(para.children[0]) == "本章介绍完全分片\n数据并行 (FSDP)\n和"
