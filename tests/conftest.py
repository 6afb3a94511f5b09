import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest


@pytest.fixture(autouse=True)
def _forget_language_listeners():
    """Every explorer a test builds registers a language listener (``distlearn.core.i18n.on_change``) that re-renders it
    on each ``set_language``. Restore the list after each test, so a later test's language switch does not redraw
    every explorer the tests before it built (in one worker that made the language tests 30 times slower)."""
    from distlearn.core import i18n

    before = list(i18n._listeners)
    yield
    i18n._listeners[:] = before
