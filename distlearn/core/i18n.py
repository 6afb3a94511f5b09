"""Bilingual (English / 中文) text for labels, messages and feedback, and the course's language setting.

Every user-facing string in :mod:`distlearn` is a :class:`Text` made with :func:`text`, which registers it in
:data:`REGISTRY` so a test can walk all of them and check that both languages are present; one-off strings use
:func:`bi`.

The language shown is chosen by :func:`set_language` or by the environment variable ``DISTLEARN_LANG``, read once
at import: ``"en"``, ``"zh"`` or ``"both"`` (the default), written as people write them — ``zh_CN``, ``zh-CN``,
``zh_Hans``, ``zh_CN.UTF-8``, ``en_US``, ``en-GB``, ``English``, ``中文`` … (see :func:`normalize_language`). A value
that names no language the course has is a bilingual :class:`~distlearn.core.validate.DistlearnValueError`, never a
silent fallback; an empty ``DISTLEARN_LANG`` counts as unset. In the bilingual copy ``make lab`` opens, the
reader's last choice in the language switch wins (:func:`remembered_language`). The value itself lives in
:mod:`distlearn.core.current_language`, below :mod:`distlearn.core.validate`, whose errors read it too.

The rule every printed line follows (checked by ``tests/test_language_outputs.py`` with :mod:`authoring.lang_audit`):
under ``en`` no line has a Chinese character; under ``zh`` every line that has English words also has Chinese
(identifiers, units, numbers and names kept in English excepted); under ``both`` each text shows both languages.
"""
from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

from distlearn.core import current_language
from distlearn.core.current_language import get_language
from distlearn.core.validate import DistlearnValueError

_CJK = re.compile(r"[\u4e00-\u9fff]")

# How people write each language: ISO 639-1 codes with any region, script or encoding (zh_CN, zh-Hans-CN,
# en_US.UTF-8), names in English and Chinese, and ways of saying "both".
_ALIASES = {
    "en": "en", "eng": "en", "english": "en", "英文": "en", "英语": "en",
    "zh": "zh", "zho": "zh", "chi": "zh", "cn": "zh", "chinese": "zh", "mandarin": "zh", "中文": "zh", "汉语": "zh",
    "简体中文": "zh", "中文简体": "zh", "简体": "zh",
    "both": "both", "bilingual": "both", "all": "both", "en+zh": "both", "zh+en": "both", "en/zh": "both",
    "zh/en": "both", "双语": "both", "中英": "both", "中英双语": "both", "英中": "both",
}
_LOCALE = re.compile(r"^(en|zh)(?:[-_][a-z0-9]{2,8})*(?:\.[\w-]+)?(?:@\w+)?$")  # en_US, zh-Hans-CN, zh_CN.UTF-8
ACCEPTED = "en, zh, both (also en_US, en-GB, zh_CN, zh-CN, zh_Hans, zh_CN.UTF-8, English, 中文, bilingual …)"


def normalize_language(value, param: str = "lang") -> str:
    """``"en"``, ``"zh"`` or ``"both"`` for a language as people write it (case and spacing ignored).

    >>> [normalize_language(v) for v in ("zh_CN", "zh-Hans", "en-GB", "EN_us.UTF-8", "中文", "Both")]
    ['zh', 'zh', 'en', 'en', 'zh', 'both']

    Any region or script of Chinese (``zh_TW``, ``zh-Hant``) gives ``"zh"``: the course's Chinese is Simplified.
    Raises DistlearnValueError (always in both languages, naming ``param``) for anything else, e.g. ``"fr"``,
    ``"C"`` or ``""``.
    """
    text_value = unicodedata.normalize("NFKC", str(value)).strip().lower().replace(" ", "")
    lang = _ALIASES.get(text_value)
    if lang is None:
        m = _LOCALE.match(text_value)
        lang = m.group(1) if m else None
    if lang is None or not isinstance(value, str):
        raise DistlearnValueError(
            param, f"{param} = {value!r} is not a language of this course: use {ACCEPTED}.",
            f"{param} = {value!r} 不是本课程支持的语言：请使用 en（英文）、zh（中文）或 both（中英双语），"
            f"也可以写成 en_US、en-GB、zh_CN、zh-CN、zh_Hans、zh_CN.UTF-8、English、中文 等形式。", bilingual=True)
    return lang


# The bilingual copy that ``make lab`` opens remembers the reader's last choice in the language switch
# (:func:`distlearn.core.language.remember`): JupyterLab starts with ``DISTLEARN_LAB_DIR`` = the copy's folder, and
# a kernel started there begins in the language stored in its file ``.distlearn-language``.
LAB_DIR_ENV = "DISTLEARN_LAB_DIR"
CHOICE_FILE = ".distlearn-language"


def remembered_language() -> str | None:
    """The language last chosen in the bilingual copy ``$DISTLEARN_LAB_DIR`` (``"en"``, ``"zh"``, ``"both"``), or
    None outside such a copy or before any choice. A file that names no language raises DistlearnValueError
    naming the file."""
    folder = os.environ.get(LAB_DIR_ENV, "").strip()
    path = os.path.join(folder, CHOICE_FILE) if folder else ""
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        value = f.read().strip()
    return normalize_language(value, path) if value else None


def _from_environment() -> str:
    raw = os.environ.get("DISTLEARN_LANG", "")
    lang = normalize_language(raw, "DISTLEARN_LANG") if raw.strip() else "both"
    return remembered_language() or lang


current_language.store(_from_environment())
_listeners: list[Callable[[str], None]] = []


@dataclass(frozen=True)
class Text:
    """A string in both languages. ``str(t)`` renders it in the current language."""

    key: str
    en: str
    zh: str

    def render(self, lang: str | None = None, sep: str = " / ", **fmt) -> str:
        """Render in ``lang`` (default: the current language); ``fmt`` fills ``{placeholders}`` in both."""
        lang = normalize_language(lang) if lang else get_language()
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
    """Choose what prose, widgets, plots, messages, errors and checker feedback show: ``"en"``, ``"zh"`` or
    ``"both"``, written as people write them (``"zh_CN"``, ``"en-GB"``, ``"中文"`` …: :func:`normalize_language`).

    Every listener registered with :func:`on_change` follows: in a notebook the language switch
    (:mod:`distlearn.core.language`, which registers itself when imported, as importing :mod:`distlearn` does) shows
    only that language's prose cells (``lang-en`` / ``lang-zh``) in JupyterLab and Notebook 7, and the explorers on
    screen re-render. :func:`get_language` (from :mod:`distlearn.core.current_language`, where the value lives)
    reads it back. Raises DistlearnValueError (bilingual) for a value that names no language of the course.
    """
    value = normalize_language(lang)
    current_language.store(value)
    for listener in list(_listeners):
        try:
            listener(value)
        except Exception:  # a closed widget must not break the switch
            pass


def on_change(listener: Callable[[str], None]) -> Callable[[], None]:
    """Call ``listener(lang)`` after every :func:`set_language`, in the order registered, with the new language
    (``"en"``, ``"zh"`` or ``"both"``); returns a function that unregisters it."""
    _listeners.append(listener)

    def remove() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return remove


def bi(en: str, zh: str, sep: str = " / ") -> str:
    """Render an ad-hoc (unregistered) bilingual string in the current language, for dynamic content."""
    lang = get_language()
    if lang == "en":
        return en
    if lang == "zh":
        return zh
    return f"{en}{sep}{zh}"


def yes_no(flag) -> str:
    """A truth value as a reader says it: ``"yes"`` / ``"no"`` under ``en``, ``"是"`` / ``"否"`` under ``zh``,
    ``"yes / 是"`` under ``both``; for tables and checks that would otherwise print Python's ``True`` / ``False``.
    ``flag``: a ``bool`` or a NumPy boolean scalar; anything else raises DistlearnValueError (parameter ``flag``)."""
    import numpy as np

    if isinstance(flag, np.bool_):  # e.g. a comparison of NumPy scalars / 例如 NumPy 标量比较的结果
        flag = bool(flag)
    if not isinstance(flag, bool):
        raise DistlearnValueError("flag", f"flag = {flag!r} must be True or False (a bool), not {type(flag).__name__}.",
                                  f"flag = {flag!r} 必须是 True 或 False（bool 类型），而不是 {type(flag).__name__}。")
    return bi("yes", "是") if flag else bi("no", "否")


def named(name: str, zh: str) -> str:
    """An identifier the reader types (``"mixed"``, ``"all_reduce"``) with its Chinese gloss: ``name`` under
    ``en``; ``name（zh）`` under ``zh`` and ``both`` (the Chinese form already holds the English name)."""
    return name if get_language() == "en" else f"{name}（{zh}）"


def source(obj) -> str:
    """The source of a function or class (``inspect.getsource``) as the reader of the current language should see
    it: a comment written ``# English / 中文`` keeps only its English half under ``en``, only its Chinese half under
    ``zh``, and both under ``both``. For printed reference listings."""
    import inspect

    lines = inspect.getsource(obj).splitlines()
    lang = get_language()
    if lang == "both":
        return "\n".join(lines)
    lines = _without_foreign_docstring(lines, lang)
    comment_only = [ln.lstrip().startswith("#") for ln in lines]
    chinese = [bool(_CJK.search(ln.split("#", 1)[1])) if "#" in ln else False for ln in lines]
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(.*?#\s*)(.*?)\s+/\s+(.*)$", line)
        if m and _CJK.search(m.group(3)) and not _CJK.search(m.group(2)):  # "# English / 中文" on one line
            out.append((m.group(1) + (m.group(2) if lang == "en" else m.group(3))).rstrip())
            continue
        if comment_only[i]:  # a comment line in one language: an English line and its Chinese twin below it
            if chinese[i] and lang == "en":
                continue
            pair_below = i + 1 < len(lines) and comment_only[i + 1] and chinese[i + 1]
            if not chinese[i] and lang == "zh" and pair_below:
                continue
        elif chinese[i] and lang == "en":
            line = line.split("#", 1)[0].rstrip()
        out.append(line)
    return "\n".join(out)


def _without_foreign_docstring(lines: list[str], lang: str) -> list[str]:
    """``lines`` (a function's or class's source) without its docstring when that is not in the reader's language
    ``lang`` (``"en"`` or ``"zh"``): an English docstring under ``zh``, one with Chinese under ``en``. The chapter's prose says what it said."""
    import ast
    import textwrap

    try:
        body = ast.parse(textwrap.dedent("\n".join(lines))).body[0].body
    except (SyntaxError, IndexError, AttributeError):
        return lines
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        return lines
    has_chinese = bool(_CJK.search(first.value.value))
    if has_chinese == (lang == "zh"):
        return lines
    return lines[:first.lineno - 1] + lines[first.end_lineno:]


QUOTE = "│ "  # marks a tool's own words shown verbatim (see quote)


def quote(text: str, en: str, zh: str) -> str:
    """A tool's own output (DeepSpeed's estimator table, PyTorch's error message) shown as it is, each line marked
    ``│``, under a heading ``en`` / ``zh`` in the reader's language that says whose words they are. Returns the
    text to print."""
    body = "\n".join(QUOTE + line for line in str(text).rstrip("\n").splitlines())
    return bi(en, zh) + "\n" + body


def display_width(s: str) -> int:
    """Columns ``s`` takes in a monospace terminal or notebook output: East Asian wide characters count 2."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def pad(s, width: int, align: str = "<") -> str:
    """``s`` padded with spaces to ``width`` display columns (:func:`display_width`); ``align`` is ``"<"`` (left),
    ``">"`` (right) or ``"^"`` (centre). Longer strings are returned unchanged."""
    s = str(s)
    gap = max(0, width - display_width(s))
    if align == ">":
        return " " * gap + s
    if align == "^":
        return " " * (gap // 2) + s + " " * (gap - gap // 2)
    return s + " " * gap


def table(header: list, rows: list[list], align: str | None = None, gap: int = 2) -> str:
    """A plain-text table whose columns line up whatever the language: each column as wide as its widest cell
    (by display width). ``align`` gives one character per column, ``"<"`` or ``">"`` (default: the first column
    left, the others right). Cells are formatted with ``str``. A header cell may be an ``(en, zh)`` pair: it shows
    in the current language, and under ``"both"`` the header takes two lines, English above Chinese (narrow columns
    instead of ``"English / 中文"`` in every cell)."""
    pairs = [h if isinstance(h, tuple) else (str(h), str(h)) for h in header]
    lang = get_language()
    if lang == "both" and any(isinstance(h, tuple) for h in header):
        heads = [[en for en, _ in pairs], [zh for _, zh in pairs]]
    else:
        heads = [[en if lang == "en" else zh if lang == "zh" else (f"{en} / {zh}" if en != zh else en)
                  for en, zh in pairs]]
    cells = heads + [[str(c) for c in r] for r in rows]
    ncol = max(len(r) for r in cells)
    cells = [r + [""] * (ncol - len(r)) for r in cells]
    align = align or "<" + ">" * (ncol - 1)
    widths = [max(display_width(r[j]) for r in cells) for j in range(ncol)]
    return "\n".join((" " * gap).join(pad(c, w, a) for c, w, a in zip(r, widths, align)).rstrip() for r in cells)


def columns(cells, widths, sep: str = " ") -> str:
    """One table line: each cell right-aligned to its width in display columns (a Chinese character takes two), so
    an English and a Chinese header line align with the numbers below them. A negative width left-aligns."""
    out = []
    for cell, w in zip(cells, widths):
        cell = str(cell)
        pad = " " * max(0, abs(w) - display_width(cell))
        out.append(cell + pad if w < 0 else pad + cell)
    return sep.join(out)
