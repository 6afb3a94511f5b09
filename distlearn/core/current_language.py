"""The language the course shows now, ``"en"``, ``"zh"`` or ``"both"``: one value, held below every module that
reads it.

:mod:`distlearn.core.validate` reads it to word its errors; :mod:`distlearn.core.i18n` checks a language as people
write it (:func:`~distlearn.core.i18n.normalize_language`), stores it here (:func:`~distlearn.core.i18n.set_language`,
and ``DISTLEARN_LANG`` when i18n is imported, which importing :mod:`distlearn` does first) and renders text in it.
This module imports nothing from :mod:`distlearn`, so both of them can import it and neither imports the other's
importer (the import graph stays acyclic: ``tests/test_layout.py``).
"""
from __future__ import annotations

LANGUAGES = ("both", "en", "zh")

_current = "both"  # replaced by DISTLEARN_LANG as soon as distlearn.core.i18n is imported


def get_language() -> str:
    """The current language: ``"en"``, ``"zh"`` or ``"both"``."""
    return _current


def store(lang: str) -> None:
    """Make ``lang`` the current language. ``lang`` must already be one of :data:`LANGUAGES`, as
    :func:`distlearn.core.i18n.normalize_language` returns it; anything else raises ValueError (a mistake in the
    caller, not a reader's typo: a reader's value goes through ``normalize_language``, which explains it in both
    languages)."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"store({lang!r}): normalize the language first / 请先用 normalize_language 规范化语言")
    _current = lang
