"""The language switch works for a person, in a real headless Chromium (``tests/browser_harness.py``):

- in JupyterLab 4, on a real chapter: run its first code cell (``distlearn.language_switch()``), click 中文 — no
  English prose cell is visible and every Chinese one is; click English — the reverse; click English + 中文 — all
  are; then ``distlearn.set_language("zh_CN")`` typed in a cell hides English again and moves the switch;
- in Notebook 7, on a small generated notebook: the same switch hides the other language's cells.

Each cell's tags become CSS classes through the ``jupyterlab-celltagsclasses`` extension (a dependency), so the test
also checks that every ``lang-en`` / ``lang-zh`` cell of the notebook has its class: a missing extension fails it.
Screenshots: ``build/screenshots/language-{zh,en,both}.png`` and ``language-notebook7-zh.png``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

import browser_harness as bh
from distlearn import course

pytestmark = pytest.mark.slow
SHOTS = bh.ROOT / "build" / "screenshots"
CHAPTER = Path(os.environ.get("DISTLEARN_LANGUAGE_CHAPTER", bh.ROOT / "notebooks" / "02_collectives.ipynb"))
SELFTEST = bh.ROOT / "build" / "browser-selftest" / "language.ipynb"
BUTTON = {"en": "English", "zh": "中文", "both": "English + 中文"}

# Per prose language: how many cells of the notebook have it, how many carry the class, how many are visible.
_JS_PROSE = """() => { const out = {};
  for (const lang of ['en', 'zh']) {
    const cells = Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell.cell-tag-lang-' + lang));
    out[lang] = {tagged: cells.length,
                 visible: cells.filter(c => c.offsetParent !== null && c.getBoundingClientRect().height > 0).length};
  }
  return out; }"""
_JS_RUN_CELL = """async (i) => { const app = window.jupyterapp; const panel = app.shell.currentWidget;
  await panel.context.ready; await panel.sessionContext.ready;
  panel.content.activeCellIndex = i; await app.commands.execute('notebook:run-cell'); return true; }"""
_JS_INSERT_AND_RUN = """async ([i, src]) => { const app = window.jupyterapp; const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = i; await app.commands.execute('notebook:insert-cell-below');
  panel.content.activeCell.model.sharedModel.setSource(src); await app.commands.execute('notebook:run-cell');
  return true; }"""


def _prose_counts(nb) -> dict:
    return {lang: sum(course._lang(c) == lang for c in nb.cells) for lang in ("en", "zh")}


def _switch_cell(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "language_switch()" in c.source)


@pytest.fixture(scope="module")
def session():
    from test_browser import require_chromium

    s = bh.Session(chromium=require_chromium())
    s.__enter__()
    yield s
    s.close()


def _open_lab(session, path: Path):
    rel = path.resolve().relative_to(session.root).as_posix()
    page = session._context.new_page()
    page.goto(f"{session.base_url}/lab/tree/{rel}?token={session.token}&reset", wait_until="domcontentloaded")
    bh.wait_for_app(page)
    page.wait_for_function(bh._JS_READY, arg=rel, timeout=60_000)
    return page


def _wait_for(page, lang: str, counts: dict, timeout_ms: int = 20_000) -> dict:
    """Wait until exactly ``lang``'s prose cells are visible (``both``: all); return the last counts seen."""
    want = {"en": counts["en"] if lang in ("en", "both") else 0, "zh": counts["zh"] if lang in ("zh", "both") else 0}
    page.wait_for_function(f"""() => {{ const s = ({_JS_PROSE})(); return s.en.visible === {want['en']} &&
                           s.zh.visible === {want['zh']}; }}""", timeout=timeout_ms)
    return page.evaluate(_JS_PROSE)


def _click(page, lang: str) -> None:
    page.locator(".distlearn-language-switch").first.get_by_role("button", name=BUTTON[lang], exact=True).click()


def _end_kernels(session) -> None:
    import urllib.request

    for s in json.loads(urllib.request.urlopen(f"{session.base_url}/api/sessions?token={session.token}").read()):
        req = urllib.request.Request(f"{session.base_url}/api/sessions/{s['id']}?token={session.token}",
                                     method="DELETE")
        urllib.request.urlopen(req).close()


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name))


def test_switch_in_jupyterlab_on_a_real_chapter(session):
    nb = nbformat.read(CHAPTER, as_version=4)
    counts, cell = _prose_counts(nb), _switch_cell(nb)
    assert counts["en"] > 2 and counts["zh"] == counts["en"]
    page = _open_lab(session, CHAPTER)
    try:
        try:  # before any cell runs: both languages, every cell has its class
            page.wait_for_function(f"() => ({_JS_PROSE})().en.tagged === {counts['en']}", timeout=30_000)
        except Exception:
            pass
        seen = page.evaluate(_JS_PROSE)
        assert seen == {"en": {"tagged": counts["en"], "visible": counts["en"]},
                        "zh": {"tagged": counts["zh"], "visible": counts["zh"]}}, (
            f"cell tags are not CSS classes (is jupyterlab-celltagsclasses installed?): {seen} vs {counts}")
        page.evaluate(_JS_RUN_CELL, cell)
        page.locator(".distlearn-language-switch button").first.wait_for(state="visible", timeout=90_000)
        for lang in ("zh", "en", "both"):
            _click(page, lang)
            seen = _wait_for(page, lang, counts)
            assert seen["en"]["tagged"] == counts["en"] and seen["zh"]["tagged"] == counts["zh"]
            page.locator(".distlearn-language-switch").first.scroll_into_view_if_needed()
            _shot(page, f"language-{lang}.png")
        # set_language in a cell (as people write it) hides English again and moves the switch to 中文.
        page.evaluate(_JS_INSERT_AND_RUN, [cell, 'import distlearn\ndistlearn.set_language("zh_CN")'])
        _wait_for(page, "zh", counts)
        pressed = page.locator(".distlearn-language-switch button.mod-active").first.inner_text()
        assert pressed.strip() == BUTTON["zh"], pressed
    finally:
        try:
            page.evaluate(bh._JS_SHUTDOWN)
        except Exception:
            pass
        page.close()


def _selftest_notebook() -> Path:
    pair = '+++ {{"tags": ["lang-en"]}}\n\n{en}\n\n+++ {{"tags": ["lang-zh"]}}\n\n{zh}\n\n'
    text = (pair.format(en="# Language test", zh="# 语言测试")
            + "```{code-cell} ipython3\nimport distlearn\ndistlearn.language_switch()\n```\n\n"
            + pair.format(en="Data parallelism copies the model.", zh="数据并行复制模型。")
            + pair.format(en="## Summary", zh="## 小结"))
    SELFTEST.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(course.from_myst(text), SELFTEST)
    return SELFTEST


def test_switch_in_notebook_7(session):
    path = _selftest_notebook()
    counts = _prose_counts(nbformat.read(path, as_version=4))
    rel = path.relative_to(session.root).as_posix()
    page = session._context.new_page()
    try:
        page.goto(f"{session.base_url}/notebooks/{rel}?token={session.token}", wait_until="domcontentloaded")
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(state="visible", timeout=60_000)
        page.wait_for_function(f"() => ({_JS_PROSE})().en.tagged === {counts['en']}", timeout=30_000)
        page.wait_for_function("() => !!document.querySelector('#jp-top-panel, #top-panel-wrapper') &&"
                               " !!document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-KernelStatus, "
                               ".jp-Toolbar-kernelStatus')", timeout=60_000)
        for attempt in range(3):  # a key press while the kernel still starts can be lost under load: press again
            page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.click()
            page.keyboard.press("Shift+Enter")
            try:
                page.locator(".distlearn-language-switch button").first.wait_for(state="visible", timeout=30_000)
                break
            except Exception:
                if attempt == 2:
                    raise
        _click(page, "zh")
        _wait_for(page, "zh", counts)
        _shot(page, "language-notebook7-zh.png")
        _click(page, "en")
        _wait_for(page, "en", counts)
        _click(page, "both")
        _wait_for(page, "both", counts)
    finally:
        page.close()
        _end_kernels(session)
