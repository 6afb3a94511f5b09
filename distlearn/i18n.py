"""Bilingual (English / 中文) text for labels, messages and feedback.

Every user-facing string in :mod:`distlearn` is a :class:`Text` made with :func:`text`, which registers it in
:data:`REGISTRY` so a test can walk all of them and check that both languages are present.

The language shown is chosen by :func:`set_language` (``"en"``, ``"zh"`` or ``"both"``, the default) or by the
environment variable ``DISTLEARN_LANG``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

LANGUAGES = ("both", "en", "zh")
_CJK = re.compile(r"[\u4e00-\u9fff]")

_language = os.environ.get("DISTLEARN_LANG", "both").strip().lower() or "both"
if _language not in LANGUAGES:  # a bad environment value must not break import
    _language = "both"


@dataclass(frozen=True)
class Text:
    """A string in both languages. ``str(t)`` renders it in the current language."""

    key: str
    en: str
    zh: str

    def render(self, lang: str | None = None, sep: str = " / ", **fmt) -> str:
        """Render in ``lang`` (default: the current language); ``fmt`` fills ``{placeholders}`` in both."""
        lang = lang or _language
        en, zh = self.en.format(**fmt), self.zh.format(**fmt)
        if lang == "en":
            return en
        if lang == "zh":
            return zh
        return f"{en}{sep}{zh}"

    def __call__(self, **fmt) -> str:
        return self.render(**fmt)

    def __str__(self) -> str:
        return self.render()


REGISTRY: dict[str, Text] = {}


def text(key: str, en: str, zh: str) -> Text:
    """Make and register a bilingual string. ``key`` must be unique, e.g. ``"memory.params"``.

    Raises ValueError if either language is empty, ``zh`` has no Chinese characters, or the key is reused with a
    different text.
    """
    if not en.strip() or not zh.strip():
        raise ValueError(f"text {key!r}: both English and Chinese are required / 需要同时提供英文和中文")
    if not _CJK.search(zh):
        raise ValueError(f"text {key!r}: the zh text has no Chinese characters / zh 文本中没有中文字符: {zh!r}")
    t = Text(key, en, zh)
    old = REGISTRY.get(key)
    if old is not None and old != t:
        raise ValueError(f"text key {key!r} registered twice with different texts / 文本键重复")
    REGISTRY[key] = t
    return t


def set_language(lang: str) -> None:
    """Choose what widgets, plots and messages show: ``"en"``, ``"zh"`` or ``"both"``.

    Raises DistlearnValueError (a ValueError, bilingual) for any other value.
    """
    global _language
    value = str(lang).strip().lower()
    if value not in LANGUAGES:
        from .validate import DistlearnValueError

        raise DistlearnValueError("lang", f"lang must be one of {LANGUAGES}, got {lang!r}.",
                                  f"lang 必须是 {LANGUAGES} 之一，收到 {lang!r}。")
    _language = value


def get_language() -> str:
    """The current language: ``"en"``, ``"zh"`` or ``"both"``."""
    return _language


def bi(en: str, zh: str, sep: str = " / ") -> str:
    """Render an ad-hoc (unregistered) bilingual string in the current language, for dynamic content."""
    if _language == "en":
        return en
    if _language == "zh":
        return zh
    return f"{en}{sep}{zh}"


def display_width(s: str) -> int:
    """Columns ``s`` takes in a monospace font: East Asian wide and full-width characters count 2."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def columns(cells, widths, sep: str = " ") -> str:
    """One table line: each cell right-aligned to its width in display columns (a Chinese character takes two), so
    an English and a Chinese header line align with the numbers below them. A negative width left-aligns."""
    out = []
    for cell, w in zip(cells, widths):
        cell = str(cell)
        pad = " " * max(0, abs(w) - display_width(cell))
        out.append(cell + pad if w < 0 else pad + cell)
    return sep.join(out)
