"""The course as a static website in two languages (``make site``), built with Sphinx and MyST-NB.

Why Sphinx + MyST-NB + sphinx-book-theme: they install from PyPI alone (Jupyter Book 2 / mystmd needs Node and
fetches its page templates over the network at build time), read the stored notebooks without running them
(``nb_execution_mode = "off"``), and give a chapter sidebar, full-text search (Chinese words cut by ``jieba``),
Binder "launch" and "open the notebook" buttons. MathJax 3 comes from the ``sphinx-mathjax-offline`` wheel, so
formulas render with no network.

What a build does, for each language ``en`` and ``zh``:

1. write every page's notebook under ``build/site-work/<lang>/src/`` with the same layout as the repository
   (``notebooks/``, ``exercises/``, ``solutions/``), from the stored monolingual copy ``courses/<lang>/`` of that
   notebook (:func:`authoring.copies.update_copies`: that language's prose only, executed under
   ``DISTLEARN_LANG=<lang>``, so its printed lines, tables, figures and explorer pictures are in that language too);
   links to pages that are not built are rewritten (:func:`relink`), and an explorer output with no stored static
   picture gets a short note instead of the ``VBox(children=…`` text (:func:`_explorer_note`);
2. write that language's home page with the chapter, exercise and solution lists (:func:`index_page`);
3. run Sphinx with ``website/conf.py`` into ``build/site/<lang>/`` (the two languages in two processes side by side);
4. write the live explorers' data (:mod:`authoring.web_explorers`: each explorer's own Python run over the settings
   its web controls offer, cached in ``build/web-explorers-cache/``): the one step that runs code.

Then ``build/site/index.html`` lets a reader choose a language. Every page has a toggle to the same page in the other
language: both sites have the same page names (``notebooks/05_pipeline_parallel.html``), see :func:`other_language_url`.
Opened as a file, search lists its results without snippets (``website/_static/distlearn-file-search.js``: a browser
refuses the snippet fetches from ``file://``); served (``python -m http.server -d build/site``), with them.

Nothing else is executed at build time: the outputs are those stored in ``courses/<lang>/``, which ``make notebooks`` keeps
current and ``make check`` checks. A build stops, naming them, if a page's stored copy is missing or not current
(:func:`authoring.copies.copy_problems`): it would show outputs of other code, or of both languages.

Command line::

    python -m authoring.website build [--out build/site] [--chapters 05_pipeline_parallel 06_zero_fsdp]
                                      [--no-solutions] [--lang en zh] [--jobs N] [--no-explorers]
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import html
import http.server
import posixpath
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from authoring import lang_audit, copies, parity, paths, web_explorers

ROOT = paths.ROOT
CONF_DIR = ROOT / "website"
OUT = ROOT / "build" / "site"
REPOSITORY = "https://github.com/distlearn/distlearn"
# The theme's launch button (website/conf.py: binderhub_url, notebook_interface "jupyterlab") opens this, + the path.
SERVE = "python -m http.server -d"  # + the site's folder: serves it on http://localhost:8000/
BINDER = "https://mybinder.org/v2/gh/distlearn/distlearn/main?urlpath=lab/tree/"
SECTIONS = ("notebooks", "exercises", "solutions")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
_H1 = re.compile(r"^#\s+(.+?)\s*$", re.M)


@dataclass(frozen=True)
class Language:
    """One site: ``code`` is the course's (``en``/``zh``), ``sphinx`` the Sphinx ``language`` setting."""

    code: str
    sphinx: str
    label: str      # how the toggle names this language, in this language
    title: str      # the site's title
    sections: dict  # caption of each section's list on the home page and in the sidebar
    author: str     # the footer's "By ..." and "© Copyright ...", and the search field's hint, in this language
    copyright: str
    search_hint: str


LANGUAGES = {
    "en": Language("en", "en", "English", "distlearn: scaling deep-learning training, hands on",
                   {"notebooks": "Chapters", "exercises": "Exercises", "solutions": "Solutions"},
                   "distlearn authors", "distlearn authors, MIT licence", "Search..."),
    "zh": Language("zh", "zh_CN", "中文", "distlearn：动手学大模型分布式训练",
                   {"notebooks": "章节", "exercises": "练习", "solutions": "参考答案"},
                   "distlearn 项目组", "distlearn 项目组，MIT 许可证", "搜索……"),
}


def other(lang: str) -> str:
    """The other language's code."""
    return "zh" if lang == "en" else "en"


@dataclass(frozen=True)
class Page:
    """One page of the site, from ``<section>/<stem>.ipynb`` in the repository."""

    section: str
    stem: str

    @property
    def docname(self) -> str:
        return f"{self.section}/{self.stem}"

    @property
    def path(self) -> str:
        return f"{self.section}/{self.stem}.ipynb"


@dataclass
class SiteBuild:
    """What :func:`build` made: the output folder, the pages of each language, seconds taken, Sphinx's warnings."""

    out: Path
    pages: list[Page]
    languages: tuple[str, ...]
    seconds: float
    warnings: dict[str, list[str]] = field(default_factory=dict)


def course_pages(root: Path = ROOT, chapters: list[str] | None = None, solutions: bool = True) -> list[Page]:
    """Every page to build: each chapter, and its exercises and solutions where they exist.

    ``chapters``: stems such as ``"05_pipeline_parallel"`` (default: every ``notebooks/*.ipynb``); ``solutions``:
    False leaves the solution pages out (a teacher who does not publish them). Raises
    :class:`~distlearn.core.validate.DistlearnValueError` (``chapters``) naming an unknown chapter and the known ones.
    """
    stems = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    if chapters:
        unknown = [c for c in chapters if c not in stems]
        if unknown:
            from distlearn.core.validate import DistlearnValueError

            raise DistlearnValueError("chapters", f"unknown chapter(s) {unknown}; chapters are {stems}.",
                                      f"未知章节 {unknown}；已有的章节：{stems}。")
        stems = [s for s in stems if s in chapters]
    pages = [Page("notebooks", s) for s in stems]
    for section in ("exercises", "solutions")[: 2 if solutions else 1]:
        pages += [Page(section, s) for s in stems if (root / section / f"{s}.ipynb").exists()]
    return pages


def relink(markdown: str, here: str, built: set[str], solutions: bool = True, lang: str | None = None) -> str:
    """Rewrite the relative links of a markdown cell of page ``here`` (e.g. ``"notebooks/05_pipeline_parallel"``).

    A link to a built page is kept (Sphinx turns it into a link to that page). A link to a solution when solutions
    are not published becomes its plain text. Any other relative link (a page not built, a file of the repository)
    goes to the file in the repository; on the ``lang`` site a notebook's link goes to that language's copy
    (:func:`course_copy`). Web links and anchors are kept.
    """
    folder = posixpath.dirname(here)

    def fix(m: re.Match) -> str:
        target = m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target, re.I):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(folder, path))
        doc = resolved[: -len(".ipynb")] if resolved.endswith(".ipynb") else None
        if doc in built:
            return m.group(0)
        if resolved.startswith("solutions/") and not solutions:
            return m.group("text")
        if lang and doc and resolved.split("/")[0] in SECTIONS:
            resolved = course_copy(lang, resolved)
        return f"[{m.group('text')}]({REPOSITORY}/blob/main/{resolved}{'#' + anchor if anchor else ''})"

    return _LINK.sub(fix, markdown)


# A sentence that points at a solution notebook ("Answers: [solutions/05_…](…).", "Solutions: …", "Answers are in …",
# "参考答案：…。", "参考答案在 …。"), and the welcome page's "(answers are in `solutions/`)": left out of a site built
# without the solutions, where they would name answers the reader cannot open.
_ANSWERS_SENTENCE = re.compile(
    r"\s*(?:(?:Answers|Solutions)(?::|\s+are\s+in)|参考答案[：:在]?)\s*"
    r"\[[^\]\n]*\]\((?P<target>[^)\s]+)\)\s*[.。]")
_ANSWERS_FOLDER = re.compile(r"\s*[(（](?:answers are in|参考答案在)\s*`solutions/`\s*中?[)）]")


def drop_answers(markdown: str, here: str) -> str:
    """``markdown`` of page ``here`` without its sentences that point at ``solutions/`` (see ``_ANSWERS_SENTENCE``),
    for a site built without the solution pages."""
    folder = posixpath.dirname(here)

    def fix(m: re.Match) -> str:
        resolved = posixpath.normpath(posixpath.join(folder, m.group("target").partition("#")[0]))
        return "" if resolved.startswith("solutions/") else m.group(0)

    return _ANSWERS_FOLDER.sub("", _ANSWERS_SENTENCE.sub(fix, markdown))


_EXERCISES_WORD = {"en": re.compile(r"\b([Ee])xercises\b"), "zh": re.compile("练习")}


def solution_title(title: str, lang: str) -> str:
    """The title of a solution page from its (exercise) title: "05 · Exercises: pipeline parallelism" ->
    "05 · Solutions: pipeline parallelism", "05 · 流水线并行：练习" -> "05 · 流水线并行：参考答案"; a title without
    the word gets ": solutions" / "：参考答案" added. The exercise page keeps the title, so that search and the
    browser's tabs tell the two apart."""
    if lang == "en":
        new, n = _EXERCISES_WORD["en"].subn(lambda m: "Solutions" if m.group(1) == "E" else "solutions", title, 1)
        return new if n else f"{title}: solutions"
    new, n = _EXERCISES_WORD["zh"].subn("参考答案", title, 1)
    return new if n else f"{title}：参考答案"


def _retitle_solution(cell, lang: str) -> bool:
    """Give the first ``# heading`` of a markdown cell its solution title; True if there was one."""
    m = _H1.search(cell.source)
    if not m:
        return False
    cell.source = cell.source[: m.start(1)] + solution_title(m.group(1), lang) + cell.source[m.end(1):]
    return True


def _explorer_note(lang: str) -> str:
    en = ("Interactive explorer: this page shows no picture of it. Run the notebook (the launch button above opens it "
          "on Binder) to move its controls.")
    zh = "交互式探索器：本页没有它的静态图。运行这个笔记本（上方的启动按钮可在 Binder 上打开）即可拖动其控件。"
    return f'<div class="distlearn-explorer-static distlearn-explorer-note"><p>▶ {html.escape(en if lang == "en" else zh)}</p></div>'


# The note that distlearn.core.explorer.Explorer.static_html writes above its picture ("▶ Static picture of the
# explorer's first view. Run this cell (and the cells above it) …"): right in Jupyter, not on a web page.
_RUN_NOTE = re.compile(r"<p[^>]*>▶[^<]*</p>")


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` over HTTP on 127.0.0.1 (a free port, no request log) while the ``with`` block runs; yields
    the base URL, ``http://127.0.0.1:<port>``. The book's printer and the site's browser tests read pages this way."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def home_source_link(index_html: Path, lang: str) -> None:
    """The home page is generated (:func:`index_page`), so the theme's "view source" link to
    ``courses/<lang>/index.md`` would open a missing file on GitHub: point it at its generator, this module."""
    page = index_html.read_text(encoding="utf-8")
    index_md = f"{REPOSITORY}/blob/main/{course_copy(lang, 'index.md')}?plain=1"
    index_html.write_text(page.replace(index_md, f"{REPOSITORY}/blob/main/authoring/website.py"), encoding="utf-8")


def course_copy(lang: str, page_path: str) -> str:
    """Where the repository keeps the ``lang`` copy of a page's notebook, the one the ``lang`` site shows and its
    Binder and repository links open: ``course_copy("zh", "notebooks/05_pipeline_parallel.ipynb")`` is
    ``"courses/zh/notebooks/05_pipeline_parallel.ipynb"`` (:func:`authoring.copies.copy_path`)."""
    return f"courses/{lang}/{page_path}"


def site_explorer_note(lang: str, page_path: str) -> str:
    """The caption of an explorer's static picture on the ``lang`` site, for the notebook ``page_path`` (e.g.
    ``"notebooks/05_pipeline_parallel.ipynb"``): the picture is the explorer at its default settings, live when the
    notebook runs, with links to run it on Binder and to the notebook in the repository."""
    binder = html.escape(BINDER + course_copy(lang, page_path), quote=True)
    repo = html.escape(f"{REPOSITORY}/blob/main/{course_copy(lang, page_path)}", quote=True)
    if lang == "en":
        text = (f'Static picture: the explorer at its default settings. It is live (its controls move) when the '
                f'notebook runs: <a href="{binder}">run it on Binder</a>, or open '
                f'<a href="{repo}">the notebook</a> in Jupyter.')
    else:
        text = (f'静态图：探索器在默认设置下的样子。运行笔记本后，控件即可拖动：<a href="{binder}">在 Binder 上运行</a>，'
                f'或在 Jupyter 中打开<a href="{repo}">这个笔记本</a>。')
    return f'<p class="distlearn-explorer-site-note" style="color:#b35900">▶ {text}</p>'


_IMPORT = re.compile(r"^\s*from\s+(distlearn(?:\.\w+)*)\s+import\s+(\w+)(?:\s+as\s+(\w+))?", re.M)


def explorer_in_cell(source: str) -> str | None:
    """The explorer a code cell shows (``from distlearn.memory import explorer as m`` … ``m.explorer()``), by its
    :func:`distlearn.core.explorer.explorer_modules` name (``"memory"``), or None."""
    from distlearn.core.explorer import explorer_modules

    names = {module: name for name, module in explorer_modules().items()}
    for m in _IMPORT.finditer(source):
        module = f"{m.group(1)}.{m.group(2)}"
        if module in names and re.search(rf"\b{re.escape(m.group(3) or m.group(2))}\.explorer\(\)", source):
            return names[module]
    return None


def live_explorer(html_text: str, name: str, lang: str) -> str:
    """An explorer's static picture wrapped for ``website/_static/distlearn-explorer.js``, which puts the live
    explorer ``name`` (data from :mod:`authoring.web_explorers`) in its place; the picture stays without JavaScript."""
    return (f'<div class="distlearn-live-explorer" data-distlearn-explorer="{html.escape(name, quote=True)}" '
            f'data-lang="{lang}">\n{html_text}\n</div>')


def prose_in(nb, lang: str):
    """A copy of the notebook with the prose cells of ``lang`` (and untagged ones) and every code cell with its
    stored outputs (a stored copy ``courses/<lang>/`` has only ``lang``'s prose already; this keeps
    :func:`monolingual` right for any notebook)."""
    out = nbformat.from_dict(nb)
    out.cells = [c for c in out.cells if c.cell_type != "markdown" or parity.cell_language(c) in (lang, None)]
    return out


def monolingual(nb, lang: str, here: str, built: set[str], solutions: bool = True,
                live: frozenset = frozenset()):
    """The page's notebook for the ``lang`` site: :func:`prose_in`, then on every markdown cell :func:`relink` (and
    :func:`drop_answers` without solutions), a solution title on a solution page (:func:`solution_title`), the site's
    caption on an explorer's static picture (:func:`site_explorer_note`) and a note in place of an explorer output
    stored without one; consecutive stream outputs of one name joined into one (:func:`authoring.lang_audit.
    merge_streams`); the picture of an explorer named in ``live`` wrapped for the live explorer (:func:`live_explorer`)."""
    out = prose_in(nb, lang)
    retitle = here.startswith("solutions/")
    for cell in out.cells:
        if cell.cell_type == "markdown":
            if retitle and _retitle_solution(cell, lang):
                retitle = False
            if not solutions:
                cell.source = drop_answers(cell.source, here)
            cell.source = relink(cell.source, here, built, solutions, lang)
        elif cell.cell_type == "code":
            # The notebook's language switch, or the copy's cell that sets its language (its output is the hidden
            # style widget that hides the other language's prose in Jupyter): the site has its own toggle.
            if copies.SWITCH_CALL in cell.source or cell.source == copies.language_cell_source(lang):
                cell.outputs = []
            # One printed line flushed in two pieces is one line, as in Jupyter (MyST-NB's own merge would put a
            # line break between the pieces).
            cell.outputs = [nbformat.from_dict(o) for o in lang_audit.merge_streams(cell.get("outputs", []))]
            for o in cell.get("outputs", []):
                data = o.get("data", {})
                if WIDGET_VIEW in data and "text/html" not in data:
                    data["text/html"] = _explorer_note(lang)
                elif WIDGET_VIEW in data:
                    data["text/html"] = _RUN_NOTE.sub(
                        lambda _m: site_explorer_note(lang, f"{here}.ipynb"), "".join(data["text/html"]), count=1)
                    name = explorer_in_cell(cell.source)
                    if name in live:
                        data["text/html"] = live_explorer(data["text/html"], name, lang)
    return out


def title_of(nb, lang: str) -> str:
    """The first ``# heading`` of the notebook's ``lang`` prose (or of any markdown cell)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and parity.cell_language(cell) in (lang, None):
            m = _H1.search(cell.source)
            if m:
                return m.group(1)
    return ""


def index_page(lang: str, pages: list[Page], titles: dict[str, str]) -> str:
    """The home page of the ``lang`` site (MyST markdown): a short introduction and one list per section."""
    L = LANGUAGES[lang]
    if lang == "en":
        intro = ("An open, bilingual (English / 中文) course on how large models are trained on many GPUs. Every "
                 "number on these pages comes from tested code in the `distlearn` package, and every simulation is "
                 "checked against real PyTorch wherever a real engine exists. These pages show the stored results of "
                 "each notebook; to run one, use the launch button at the top of its page, or `make lab` on your own "
                 "machine.")
    else:
        intro = ("一门开放的中英双语课程，讲解大模型如何在多块 GPU 上训练。本站每个数字都来自 `distlearn` 包中经过测试"
                 "的代码；只要有真实引擎，每个模拟都与真实 PyTorch 对照。这些页面展示每个笔记本保存的运行结果；想亲手运行，"
                 "请点页面顶部的启动按钮，或在自己的电脑上运行 `make lab`。")
    parts = [f"# {L.title}", "", intro, ""]
    for section in SECTIONS:
        entries = [p for p in pages if p.section == section]
        if not entries:
            continue
        parts += ["```{toctree}", f":caption: {L.sections[section]}", ":maxdepth: 1", ""]
        for p in entries:
            label = titles[f"notebooks/{p.stem}"] if section != "notebooks" else ""
            parts.append(f"{label} <{p.docname}>" if label else p.docname)
        parts += ["```", ""]
    return "\n".join(parts)


def write_sources(lang: str, pages: list[Page], src: Path, root: Path = ROOT, solutions: bool = True,
                  live: frozenset = frozenset()) -> None:
    """Write the ``lang`` site's sources under ``src`` (emptied first): each page's notebook from its stored ``lang``
    copy (``courses/<lang>/``, outputs in ``lang``) through :func:`monolingual` (``live``: the explorers shown
    live), and ``index.md``."""
    if src.exists():
        shutil.rmtree(src)
    built = {p.docname for p in pages}
    titles = {}
    for p in pages:
        nb = nbformat.read(copies.copy_path(p.path, lang, root), as_version=paths.NB_VERSION)
        titles[p.docname] = title_of(nb, lang)
        target = src / p.path
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(monolingual(nb, lang, p.docname, built, solutions, live), target)
    (src / "index.md").write_text(index_page(lang, pages, titles), encoding="utf-8")


def other_language_url(pagename: str, lang: str) -> str:
    """Relative URL from page ``pagename`` of the ``lang`` site to the same page of the other site.

    >>> other_language_url("notebooks/05_pipeline_parallel", "en")
    '../../zh/notebooks/05_pipeline_parallel.html'
    """
    return "../" * (pagename.count("/") + 1) + f"{other(lang)}/{pagename}.html"


# The chooser page's look: the theme's (pydata-sphinx-theme's light and dark colours, its system font stack with the
# CJK font for Chinese), two cards side by side on a desktop, one under the other on a phone.
CHOOSER_CSS = """
:root { --fg: #222832; --muted: #48566b; --bg: #fff; --surface: #f3f4f5; --border: #d1d5da; --primary: #0a7d91; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #ced6dd; --muted: #9ca4af; --bg: #14181e; --surface: #29313d; --border: #48566b; --primary: #3fb1c5; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); line-height: 1.6;
       font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Noto Sans CJK SC",
                    "PingFang SC", "Microsoft YaHei", sans-serif; }
main { max-width: 46rem; margin: 0 auto; padding: 12vh 1.25rem 2rem; }
.brand { display: flex; align-items: center; gap: .6rem; margin: 0 0 .25rem; font-size: 2rem; font-weight: 600; }
.brand img { width: 2rem; height: 2rem; }
.lead { color: var(--muted); margin: 0 0 2rem; }
.choices { display: grid; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); gap: 1rem; padding: 0;
           margin: 0; list-style: none; }
.choices a { display: block; height: 100%; padding: 1.1rem 1.25rem; border: 1px solid var(--border);
             border-radius: .5rem; background: var(--surface); color: var(--fg); text-decoration: none;
             transition: border-color .15s, box-shadow .15s; }
.choices a:hover, .choices a:focus-visible { border-color: var(--primary); box-shadow: 0 0 0 1px var(--primary);
                                             outline: none; }
.choices .language { display: block; font-size: 1.35rem; font-weight: 600; color: var(--primary); }
.choices .title { display: block; color: var(--muted); font-size: .95rem; margin-top: .25rem; }
"""


def chooser_page(languages: tuple[str, ...]) -> str:
    """``build/site/index.html``: a card for each language's home page (its name in that language and the site's
    title), in the theme's fonts and colours (:data:`CHOOSER_CSS`)."""
    links = "\n".join(f'<li><a href="{c}/index.html" hreflang="{c}" lang="{LANGUAGES[c].sphinx.replace("_", "-")}">'
                      f'<span class="language">{html.escape(LANGUAGES[c].label)}</span>'
                      f'<span class="title">{html.escape(LANGUAGES[c].title)}</span></a></li>' for c in languages)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>distlearn</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="color-scheme" content="light dark">\n'
            f'<link rel="icon" href="{languages[0]}/_static/favicon.svg" type="image/svg+xml">\n'
            f"<style>{CHOOSER_CSS}</style></head>\n<body><main>\n"
            f'<h1 class="brand"><img src="{languages[0]}/_static/favicon.svg" alt="">distlearn</h1>\n'
            '<p class="lead">Choose a language / 选择语言</p>\n'
            f'<ul class="choices">\n{links}\n</ul>\n</main></body></html>\n')


_HAN = re.compile(r"[\u4e00-\u9fff]")


def search_words() -> list[str]:
    """The glossary's Chinese forms (``docs/glossary.md`` as :func:`authoring.parity.glossary_terms` reads it:
    "专家并行", "有效训练时间占比", "零冗余优化器", "K/V 块"), each with a Chinese character: the words the Chinese
    site's search index holds whole (:func:`chinese_search_language`)."""
    return sorted({form for term in parity.glossary_terms() for form in term.zh if _HAN.search(form)})


def index_word(form: str) -> str:
    """How the Chinese index holds a glossary form: spaces removed, lower case ("K/V 块" → "k/v块"); the search
    page looks a whole query up in this form first (``website/_static/distlearn-search.js``)."""
    return re.sub(r"\s+", "", form).lower()


def chinese_search_language():
    """Sphinx's Chinese search language (``sphinx/search/zh.py``) with the glossary's terms as whole words.

    Sphinx cuts the Chinese site's text into words with jieba's ``cut_for_search``, whose dictionary lacks most of
    the course's compound terms: "有效训练时间占比" became 有效, 训练, 时间, 占, 比 and "专家并行" 专家, 并行, so a query
    for the whole term found no page. This language adds each space-free form of :func:`search_words` to jieba's
    dictionary (a text cut around it keeps it whole) and indexes every form that a text contains as one more word
    (:func:`index_word`): "全局批量" is found inside "全局批量大小", "K/V 块" (whose parts are one letter or one
    character, words the index drops) as itself. The search page cuts a query into the index's own words
    (``website/_static/distlearn-search.js``). Registered by :func:`setup`; needs the ``.[site]`` extra.
    """
    from sphinx.search.zh import SearchChinese

    forms = search_words()
    whole = sorted({index_word(f) for f in forms})

    class GlossaryChinese(SearchChinese):
        def init(self, options: dict) -> None:
            super().init(options)
            try:
                import jieba
            except ImportError:  # Sphinx then indexes no Chinese word at all; the glossary's forms still are
                return
            for form in forms:
                if not re.search(r"\s", form):
                    jieba.add_word(form)

        def split(self, input: str) -> list[str]:
            flat = index_word(input)
            return super().split(input) + [w for w in whole if w in flat]

    return GlossaryChinese


def sphinx_command(lang: str, work: Path, jobs: int = 1) -> list[str]:
    """The ``sphinx-build`` command line of one language: sources in ``work/src``, pages to ``work/html``, and
    everything else Sphinx and MyST-NB write (doctrees, ``jupyter_execute/``, warnings) also under ``work``, so that
    two languages can build at once."""
    L = LANGUAGES[lang]
    return [sys.executable, "-m", "sphinx", "build", "-b", "html", "-E", "-q", "-j", str(jobs),
            "-c", str(CONF_DIR), "-d", str(work / "doctrees"), "-w", str(work / "warnings.txt"),
            "-D", f"language={L.sphinx}", "-D", f"html_title={L.title}", "-D", f"author={L.author}",
            "-D", f"copyright={L.copyright}", "-D", f"html_theme_options.search_bar_text={L.search_hint}",
            # the launch (Binder) and repository buttons open this language's copy, courses/<lang>/notebooks/…
            "-D", f"html_theme_options.path_to_docs={course_copy(lang, '').rstrip('/')}",
            "-A", f"distlearn_lang={lang}",
            str(work / "src"), str(work / "html")]


def run_sphinx(commands: dict[str, list[str]]) -> dict[str, list[str]]:
    """Run the languages' Sphinx builds side by side (one process each); return each one's warnings.

    Raises RuntimeError with Sphinx's output if a build fails.
    """
    procs = {lang: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
             for lang, cmd in commands.items()}
    warnings = {}
    for lang, proc in procs.items():
        output, _ = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"sphinx-build for {lang!r} failed / 构建 {lang!r} 站点失败:\n{output[-4000:]}")
        wfile = Path(commands[lang][commands[lang].index("-w") + 1])
        text = wfile.read_text(encoding="utf-8") if wfile.exists() else ""
        warnings[lang] = [w for w in text.splitlines() if w.strip()]
    return warnings


def shown_explorers(work: Path, languages) -> set[str]:
    """The explorers that the written sources under ``work/<lang>/src`` wrap for the live view."""
    found = set()
    for lang in languages:
        for nb in (work / lang / "src").rglob("*.ipynb"):
            found |= set(re.findall(r'data-distlearn-explorer=\\"([\w.]+)\\"', nb.read_text(encoding="utf-8")))
    return found


def build(out: Path = OUT, chapters: list[str] | None = None, solutions: bool = True,
          languages: tuple[str, ...] = ("en", "zh"), jobs: int = 1, root: Path = ROOT, log=print,
          explorers: bool = True) -> SiteBuild:
    """Build the site of each language into ``out/<lang>/`` and the chooser page ``out/index.html``.

    ``explorers``: show the explorers live (:mod:`authoring.web_explorers`; False keeps their static pictures and
    renders nothing).

    Sources and Sphinx's own files go to ``<out>-work/<lang>/`` (e.g. ``build/site-work/en/src``).
    """
    t0 = time.perf_counter()
    out = Path(out)
    work = out.parent / (out.name + "-work")
    pages = course_pages(root, chapters, solutions)
    stale = copies.copy_problems(root, tuple(languages), [p.path for p in pages])
    if stale:
        raise RuntimeError("the stored monolingual copies of these pages are not current; run `make notebooks` "
                           "/ 这些页面保存的单语副本不是最新的；请运行 `make notebooks`:\n" + "\n".join(stale))
    for folder in (out, work):
        if folder.exists():
            shutil.rmtree(folder)
    result = SiteBuild(out, pages, tuple(languages), 0.0)
    live = frozenset(web_explorers.live_names(log=log)) if explorers else frozenset()
    for lang in languages:
        write_sources(lang, pages, work / lang / "src", root, solutions, live)
    result.warnings = run_sphinx({lang: sphinx_command(lang, work / lang, jobs) for lang in languages})
    out.mkdir(parents=True)
    for lang in languages:
        shutil.move(work / lang / "html", out / lang)
        home_source_link(out / lang / "index.html", lang)
    shown = sorted(live & shown_explorers(work, languages))
    if shown:  # the live explorers' data: each explorer's own Python over its web controls' settings
        try:
            web_explorers.write_data(out, tuple(languages), shown, jobs=max(2, jobs), log=log)
        except ValueError as err:  # a WEB_OPTIONS grid with more distinct results than MAX_RENDERS
            raise RuntimeError(f"web explorers / 网页探索器: {err}") from err
    for lang in languages:
        log(f"{lang}: {len(pages) + 1} pages, {len(result.warnings[lang])} warning(s) / "
            f"{len(pages) + 1} 个页面，{len(result.warnings[lang])} 条警告")
    (out / "index.html").write_text(chooser_page(tuple(languages)), encoding="utf-8")
    result.seconds = time.perf_counter() - t0
    return result


# ---------------------------------------------------------------- Sphinx extension (listed in website/conf.py)
def add_page_context(app, pagename, templatename, context, doctree) -> None:
    """Give each page's template the toggle to the same page in the other language."""
    lang = app.config.html_context.get("distlearn_lang", "en")
    context["distlearn_other_lang"] = other(lang)
    context["distlearn_other_label"] = LANGUAGES[other(lang)].label
    context["distlearn_other_title"] = ("本页的中文版" if lang == "en" else "This page in English")
    context["distlearn_other_url"] = other_language_url(pagename, lang)


_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_CJK_BREAK = re.compile(f"(?<=[{_CJK}])[ \\t]*\\n[ \\t]*(?=[{_CJK}])")


def join_soft_breaks(app, doctree) -> None:
    """Make each run of text of a paragraph one text node, and on the Chinese site drop a source line break between
    two Chinese characters (or Chinese punctuation).

    MyST gives a line break inside a paragraph its own text node: the search index, which cuts words one node at a
    time, never saw "完全分片数据并行" written across a break as one word; and Chromium draws such a break as a space
    between two Chinese characters ("完全分片 数据并行"), which Chinese text never has. Code, literals and math
    keep their text as it is."""
    from docutils import nodes

    zh = (app.config.language or "").startswith("zh")
    for parent in list(doctree.findall(nodes.TextElement)):
        if isinstance(parent, (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.raw)):
            continue
        kids, i = parent.children, 0
        while i < len(kids):
            if not isinstance(kids[i], nodes.Text):
                i += 1
                continue
            j = i
            while j + 1 < len(kids) and isinstance(kids[j + 1], nodes.Text):
                j += 1
            text = "".join(str(k) for k in kids[i:j + 1])
            if zh:
                text = _CJK_BREAK.sub("", text)
            if j > i or text != str(kids[i]):
                parent[i:j + 1] = [nodes.Text(text)]
            i += 1


def setup(app):
    app.connect("html-page-context", add_page_context)
    app.connect("doctree-read", join_soft_breaks)
    app.add_search_language(chinese_search_language())  # the Chinese index holds the glossary's terms whole
    # The Chinese site's page furniture that Sphinx and the themes leave untranslated: website/locale/zh_CN/
    # LC_MESSAGES/ (conf.py's locale_dirs). Sphinx compiles only the "sphinx" catalog before the extensions load,
    # so the .mo files are written here, and sphinx-book-theme's "booktheme" catalog is registered before the
    # theme registers its own, so that ours is looked up first.
    from sphinx.util.i18n import CatalogRepository

    locale_dir = Path(app.confdir) / "locale"
    if app.config.language:
        for catalog in CatalogRepository(app.srcdir, [str(locale_dir)], app.config.language, "utf-8").catalogs:
            if catalog.is_outdated():
                catalog.write_mo(app.config.language)
    app.add_message_catalog("booktheme", str(locale_dir))
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m authoring.website", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the English and Chinese sites from the stored notebooks")
    b.add_argument("--out", default=str(OUT), help="output folder (default: build/site)")
    b.add_argument("--chapters", nargs="*", default=None, help="chapter stems to build (default: all)")
    b.add_argument("--no-solutions", action="store_true", help="leave the solution pages out")
    b.add_argument("--lang", nargs="*", default=["en", "zh"], choices=["en", "zh"],
                   help="languages to build (default both; with one, its toggle leads nowhere)")
    b.add_argument("--jobs", type=int, default=1, help="Sphinx worker processes per language")
    b.add_argument("--no-explorers", action="store_true",
                   help="static explorer pictures only (renders no explorer data: a quicker build)")
    args = ap.parse_args(argv)
    try:
        res = build(Path(args.out), args.chapters, not args.no_solutions, tuple(args.lang), args.jobs,
                    explorers=not args.no_explorers)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    for lang, ws in res.warnings.items():
        for w in ws:
            print(f"[{lang}] {w}")
    print(f"site: {len(res.pages) + 1} pages x {len(res.languages)} languages in {res.seconds:.1f} s -> "
          f"{res.out / 'index.html'} / 网站已生成，用时 {res.seconds:.1f} 秒")
    print(f"open it as a file, or serve it (search results with snippets): {SERVE} {res.out}, then "
          f"http://localhost:8000/ / 可直接打开该文件；要让搜索结果带摘要，请运行 {SERVE} {res.out}，再打开 "
          "http://localhost:8000/")
    return 1 if any(res.warnings.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
