"""Helpers the tests share for the course's language (distlearn.core.i18n)."""
from __future__ import annotations

import contextlib

from distlearn.core import i18n


@contextlib.contextmanager
def language(lang):
    """Run the block with the course language ``lang`` ("en", "zh" or "both"), then put the old one back."""
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        yield
    finally:
        i18n.set_language(old)
