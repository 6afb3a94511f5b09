"""Bilingual code comments: in the course's notebooks a comment may carry both languages, ``# English / 中文``;
the monolingual copies keep the reader's half (:func:`code_in`), and the language audit reads each copy's comments as
its reader does (:func:`comment_lines`)."""
from __future__ import annotations

import io
import re
import tokenize

_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_HALVES = re.compile(r"\s+/\s+")


def comment_half(comment: str, lang: str) -> str:
    """One language's half of a bilingual code comment ``# English text / 中文文字``: the English half is what comes
    before the last `` / `` ahead of the first Chinese character, the Chinese half the rest. A comment in one
    language only (or with no Chinese at all) is returned unchanged.

    >>> comment_half("# bytes per GPU / 每块 GPU 的字节数", "zh")
    '# 每块 GPU 的字节数'
    """
    first = _CJK.search(comment)
    if not first:
        return comment
    cuts = [m for m in _HALVES.finditer(comment, 0, first.start())]
    if not cuts or not comment[1:cuts[-1].start()].strip():
        return comment
    cut = cuts[-1]
    return comment[:cut.start()] if lang == "en" else "# " + comment[cut.end():]


def code_in(source: str, lang: str) -> str:
    """``source`` with every bilingual comment (:func:`comment_half`) cut to ``lang``'s half; code that Python's
    tokenizer cannot read (an IPython magic, a cell mid-edit) is returned as it is."""
    if "#" not in source or not _CJK.search(source):
        return source
    try:
        comments = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.split("\n")
    for tok in reversed(comments):  # right to left: earlier positions stay valid
        row, col = tok.start
        line = lines[row - 1]
        lines[row - 1] = line[:col] + comment_half(tok.string, lang) + line[col + len(tok.string):]
    return "\n".join(lines)


def comments(source: str) -> list[str]:
    """The comments of a code cell's ``source`` (without the code); [] when Python's tokenizer cannot read it."""
    if "#" not in source:
        return []
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
