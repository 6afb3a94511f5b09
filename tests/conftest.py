import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest


@pytest.fixture
def monkeypatch():
    """pytest's own ``monkeypatch``, with the guard on the course's constants lifted while it patches and undoes
    (:func:`distlearn.core.guard.rebinding_allowed`, for tests only): a test may patch ``check.DEFAULT_TIMEOUT``; a
    student cannot rebind it."""
    from distlearn.core.guard import rebinding_allowed

    patcher = pytest.MonkeyPatch()
    with rebinding_allowed():
        try:
            yield patcher
        finally:
            patcher.undo()


@pytest.fixture(autouse=True)
def _forget_language_listeners():
    """Every explorer a test builds registers a language listener (``distlearn.core.i18n.on_change``) that re-renders it
    on each ``set_language``. Restore the list after each test, so a later test's language switch does not redraw
    every explorer the tests before it built (in one worker that made the language tests 30 times slower)."""
    from distlearn.core import i18n

    before = list(i18n._listeners)
    yield
    i18n._listeners[:] = before


# Tests that need a tool the machine may lack skip with instructions outside CI (and fail under CI=true, see
# tests/test_browser.py and tests/test_website.py). A skip is easy to miss in a green run, so the run ends with one
# line per missing tool: never a silent pass.
_MISSING_TOOLS = (  # (a word in the skip reason, what to say)
    ("chromium", "browser tests skipped: install Chromium (apt-get install chromium), then make test again",
     "个浏览器测试被跳过：请安装 Chromium（apt-get install chromium）后重新运行 make test"),
    ("[site]", "website tests skipped: .venv/bin/pip install -e '.[site]' (make test does this)",
     "个网站测试被跳过：请运行 .venv/bin/pip install -e '.[site]'（make test 会自动安装）"),
    ("[teach]", "nbgrader tests skipped: .venv/bin/pip install -e '.[teach]' (make test does this)",
     "个 nbgrader 测试被跳过：请运行 .venv/bin/pip install -e '.[teach]'（make test 会自动安装）"),
)


def missing_tool_counts(skipped) -> list[str]:
    """The closing lines for the skipped reports ``skipped`` (pytest's TestReport objects), one per missing tool."""
    lines = []
    for word, en, zh in _MISSING_TOOLS:
        n = sum(1 for r in skipped if word in str(getattr(r, "longrepr", "")))
        if n:
            lines.append(f"{n} {en} / {n} {zh}")
    return lines


def pytest_terminal_summary(terminalreporter):
    for line in missing_tool_counts(terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_line(line, yellow=True, bold=True)
