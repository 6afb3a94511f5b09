"""Chinese messages use the full-width colon "：" after Chinese text, never ASCII ": " (issue 33: the zh command line
printed "python -m distlearn plan: 错误: model 必须是…" next to argparse's "plan：错误：参数 --gpus：…").

Every Chinese template in distlearn/ is scanned: the Chinese argument of each ``DistlearnValueError(...)`` (and of
its subclasses), of ``bi(en, zh)`` and ``text(key, en, zh)``, and the Chinese values of argparse's messages
(:data:`distlearn.core.cli.MESSAGES`); then the command line's errors are run under ``DISTLEARN_LANG=zh``."""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

from distlearn.core import cli
from tests.i18n_helpers import language

ROOT = pathlib.Path(__file__).resolve().parent.parent / "distlearn"
# a Chinese character or closing full-width bracket / quote, then an ASCII colon and a space (or the text's end)
ASCII_COLON_AFTER_CJK = re.compile(r"[\u4e00-\u9fff）」》】”]\s?:(?: |$)")
ERRORS = ("DistlearnValueError", "ConstantRebindError", "CheckError")


def _flat(node: ast.AST) -> str | None:
    """The text of a string literal or f-string (each ``{…}`` as ``{}``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "…" + "…"
        left, right = _flat(node.left), _flat(node.right)
        return None if left is None or right is None else left + right
    return None


def zh_templates() -> list[tuple[str, int, str]]:
    """``(file, line, template)`` for every Chinese message template in distlearn/."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            position = {"bi": 1, "text": 2, **{e: 2 for e in ERRORS}}.get(name)
            if position is None:
                continue
            args = list(node.args)
            zh = next((k.value for k in node.keywords if k.arg == "zh"), args[position] if len(args) > position
                      else None)
            text = _flat(zh) if zh is not None else None
            if text is not None:
                out.append((str(path.relative_to(ROOT.parent)), node.lineno, text))
    out += [("distlearn/core/cli.py", 0, zh) for zh in cli.MESSAGES.values()]
    return out


def test_the_scan_sees_the_templates():
    templates = zh_templates()
    assert len(templates) > 500, len(templates)   # 591 on 2026-12-04: the scan must not go blind
    assert any("必须是整数" in t for _, _, t in templates)


def test_no_chinese_template_has_an_ascii_colon_after_chinese_text():
    bad = [f"{f}:{line}: {t!r}" for f, line, t in zh_templates() if ASCII_COLON_AFTER_CJK.search(t)]
    assert not bad, "\n".join(bad)


def test_the_pattern_finds_what_it_should():
    assert ASCII_COLON_AFTER_CJK.search("plan: 错误: model")
    assert ASCII_COLON_AFTER_CJK.search("（第 3 行）: x") and ASCII_COLON_AFTER_CJK.search("选项:")
    assert not ASCII_COLON_AFTER_CJK.search("错误：model") and not ASCII_COLON_AFTER_CJK.search("http://x")


@pytest.mark.parametrize("args", [["plan", "--model", "nope"], ["plan", "--precision", "q"], ["plan", "--gpus", "0"],
                                  ["plan", "--gpu", "nope"], ["plan", "--seq-len", "x"], ["nope"],
                                  ["plan", "--global-batch", "0"]])
def test_the_chinese_command_line_uses_full_width_colons(args, capsys):
    from distlearn.__main__ import main

    with language("zh"):
        code = main(args)
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 2 and re.search(r"[\u4e00-\u9fff]", text), text
    assert not ASCII_COLON_AFTER_CJK.search(text), text
    if args[0] == "plan":
        assert "python -m distlearn plan：错误：" in out.err, out.err
