"""Explorers work for a person: every chapter notebook with an explorer runs in JupyterLab in a real headless
Chromium, each explorer shows real controls (not the ``IntSlider(value=…)`` text fallback), and moving a control by
keyboard changes its output. See ``tests/browser_harness.py``.

The harness is first tested on two small notebooks it generates under ``build/browser-selftest/``: one working
explorer (must pass) and two broken ones (must be reported), so this test can fail.

Without Chromium the test is skipped with instructions (``sudo apt-get install chromium``), except in CI
(``CI=true``) where it fails. Screenshots go to ``build/screenshots/``. To also refresh the README's screenshot:
``make screenshot`` (or ``DISTLEARN_README_SCREENSHOT=docs/img/explorer.png`` with this test).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

import browser_harness as bh
from distlearn import course

pytestmark = pytest.mark.slow
CHAPTERS = bh.chapter_notebooks()
SELFTEST = bh.ROOT / "build" / "browser-selftest"

DEMO = '''
from distlearn.widgets import base

def compute(n, kind):
    return {"n": n, "kind": kind, "square": n * n}

def render(result):
    print(f"n = {result['n']}, kind = {result['kind']}, n² = {result['square']}")

class demo:
    @staticmethod
    def explorer():
        controls = {"n": base.int_slider("n / 数", 3, 1, 10), "kind": base.dropdown("kind / 种类", ["a", "b"], "a")}
        return base.build(controls, compute, render, title="demo / 演示")
'''
BROKEN = '''
import ipywidgets as W

class no_controls:
    @staticmethod
    def explorer():
        return W.HTML("<b>nothing to move</b>")

class as_text:
    @staticmethod
    def explorer():
        return W.VBox([W.IntSlider(value=3)])
'''


def _myst_pair(en: str, zh: str) -> str:
    return f'+++ {{"tags": ["lang-en"]}}\n\n{en}\n\n+++ {{"tags": ["lang-zh"]}}\n\n{zh}\n\n'


def _myst_code(src: str, ignore: bool = False) -> str:
    tags = ":tags: [nbval-ignore-output]\n\n" if ignore else ""
    return f"```{{code-cell}} ipython3\n{tags}{src.strip()}\n```\n\n"


def _selftest_notebooks() -> tuple[Path, Path, Path]:
    SELFTEST.mkdir(parents=True, exist_ok=True)
    good = course.from_myst(_myst_pair("# Demo", "# 演示") + _myst_code(DEMO) + _myst_code("demo.explorer()", ignore=True))
    bad = course.from_myst(_myst_code(BROKEN) + _myst_code("no_controls.explorer()")
                           + _myst_code("print(repr(as_text.explorer()))"))
    solo = course.from_myst(_myst_code(DEMO.strip() + "\n\ndemo.explorer()", ignore=True))
    paths = SELFTEST / "good.ipynb", SELFTEST / "broken.ipynb", SELFTEST / "solo.ipynb"
    for nb, path in zip((good, bad, solo), paths):
        nbformat.write(nb, path)
    return paths


def require_chromium() -> str:
    """Chromium's path; without it skip with instructions, or fail in CI (CI=true)."""
    chromium = bh.find_chromium()
    if chromium is None:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(bh.HOW_TO_GET_CHROMIUM)
        pytest.skip(bh.HOW_TO_GET_CHROMIUM)
    return chromium


def test_missing_chromium_skips_with_instructions_but_fails_in_ci(monkeypatch):
    monkeypatch.setattr(bh, "find_chromium", lambda: None)
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium"):
        require_chromium()


@pytest.fixture(scope="module")
def session():
    s = bh.Session(chromium=require_chromium())
    s.__enter__()
    yield s
    s.close()


def test_explorer_cells_are_found():
    nb = course.from_myst("".join(_myst_code(src) for src in ("def explorer():\n    pass",
                                                              "from distlearn.widgets import x\nx.explorer()",
                                                              "explorer( )", "print(1)")))
    path = SELFTEST / "find.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    assert bh.explorer_cells(path) == [1, 2]


def test_harness_passes_a_working_explorer_and_catches_broken_ones(session):
    good, broken, solo = _selftest_notebooks()
    default_mode, session.run_all = session.run_all, False
    r = session.check_notebook(solo)  # a self-contained explorer cell runs alone
    assert r.ok and r.mode == "explorer cells", r.summary()
    r = session.check_notebook(good)  # this explorer needs the cell above it: falls back to Run All
    assert r.ok and r.mode == "all cells", r.summary()
    (e,) = r.explorers
    assert e.rendered and e.changed and Path(bh.ROOT / e.screenshot).stat().st_size > 1000
    session.render_timeout = 5  # the broken explorers never render: do not wait long for them
    try:
        r = session.check_notebook(broken)
    finally:
        session.render_timeout, session.run_all = 20, default_mode
    assert not r.ok
    no_controls, as_text = r.explorers
    assert not no_controls.rendered and "no slider" in no_controls.problem, r.summary()
    assert not as_text.rendered and "widget shown as text" in as_text.problem, r.summary()


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebook with an explorer cell yet / 还没有包含探索器的章节")
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_explorers_in_a_real_browser(session, path):
    r = session.check_notebook(path)
    assert r.ok, r.summary()
    readme_shot = os.environ.get("DISTLEARN_README_SCREENSHOT")
    wanted = os.environ.get("DISTLEARN_README_NOTEBOOK", CHAPTERS[0].name)
    if readme_shot and Path(wanted).name == path.name:
        target = bh.ROOT / readme_shot
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bh.ROOT / r.explorers[0].screenshot, target)


def test_no_process_left_behind(session):
    assert session.kernels() == [], "a kernel is still running after its notebook was checked"
    import psutil

    pids = [session.server.pid, session.browser_proc.pid]
    session.close()
    assert session.leftover == [], f"processes left after stopping server and browser: {session.leftover}"
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
