"""Command lines that speak the reader's language: an :class:`ArgumentParser` whose own words (``usage:``,
``options``, ``show this help message and exit``, ``error: the following arguments are required: …``) follow
:func:`distlearn.set_language` / ``DISTLEARN_LANG`` like everything else, in help and in errors.

argparse looks its messages up through ``argparse._`` (gettext) when it formats them; while one of these parsers
formats help, usage or an error, that lookup is pointed at :data:`MESSAGES`. Write the parser's own help texts
with :func:`distlearn.core.i18n.bi`.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import sys

from distlearn.core.i18n import bi, get_language
from distlearn.core.guard import read_only

# argparse's messages (CPython 3.10–3.13) and their Chinese.
MESSAGES = read_only({
    "usage: ": "用法：",
    "positional arguments": "位置参数",
    "options": "选项",
    "optional arguments": "可选参数",
    "show this help message and exit": "显示本帮助信息并退出",
    "show program's version number and exit": "显示程序版本号并退出",
    "%(prog)s: error: %(message)s\n": "%(prog)s：错误：%(message)s\n",
    "the following arguments are required: %s": "缺少必需的参数：%s",
    "unrecognized arguments: %s": "无法识别的参数：%s",
    "invalid choice: %(value)r (choose from %(choices)s)": "无效的选择：%(value)r（可选：%(choices)s）",
    "argument %(argument_name)s: %(message)s": "参数 %(argument_name)s：%(message)s",
    "expected one argument": "需要一个值",
    "expected at most one argument": "最多需要一个值",
    "expected at least one argument": "至少需要一个值",
    "invalid %(type)s value: %(value)r": "无效的 %(type)s 值：%(value)r",
    "ambiguous option: %(option)s could match %(matches)s": "有歧义的选项：%(option)s 可能是 %(matches)s",
    "not allowed with argument %s": "不能与参数 %s 同时使用",
    "one of the arguments %s is required": "必须给出参数 %s 之一",
    "ignored explicit argument %r": "忽略了显式参数 %r",
    "unexpected option string: %s": "意外的选项：%s",
    "%r is not callable": "%r 不可调用",
    "conflicting subparser: %s": "子命令冲突：%s",
    "conflicting subparser alias: %s": "子命令别名冲突：%s",
})
# Under "both", messages that wrap another message (a type's error, already in both languages) keep one copy of it.
BOTH = read_only({"%(prog)s: error: %(message)s\n": "%(prog)s: error / 错误: %(message)s\n",
        "argument %(argument_name)s: %(message)s": "argument / 参数 %(argument_name)s: %(message)s"})
PLURALS = read_only({("expected %s argument", "expected %s arguments"): "需要 %s 个值"})


class _Pair(str):
    """One argparse message in both languages whose ``%`` fills each language's form with the same arguments and
    then joins them (``bi(en, zh) % x`` would see two positional ``%s`` and only one argument)."""

    def __new__(cls, en: str, zh: str):
        pair = super().__new__(cls, bi(en, zh))
        pair.en, pair.zh = en, zh
        return pair

    def __mod__(self, args):
        return bi(self.en % args, self.zh % args)


_POSITIONAL = re.compile(r"%[sr]")


def translate(message: str) -> str:
    """argparse's ``message`` in the current language (unknown messages unchanged)."""
    zh = MESSAGES.get(message)
    if zh is None:
        return message
    if message == "usage: ":
        return {"en": "usage: ", "zh": "用法：", "both": "usage / 用法: "}[get_language()]
    if get_language() == "both" and message in BOTH:  # the message inside may itself be bilingual: say it once
        return BOTH[message]
    if get_language() == "both" and _POSITIONAL.search(message):  # e.g. "unrecognized arguments: %s"
        return _Pair(message, zh)
    if message.endswith("\n"):
        return bi(message[:-1], zh[:-1]) + "\n"
    return bi(message, zh)


def translate_plural(singular: str, plural: str, n: int) -> str:
    zh = PLURALS.get((singular, plural))
    en = singular if n == 1 else plural
    if zh and get_language() == "both":
        return _Pair(en, zh)
    return bi(en, zh) if zh else en


@contextlib.contextmanager
def _speaking():
    saved = argparse._, argparse.ngettext
    argparse._, argparse.ngettext = translate, translate_plural
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved


class WideHelpFormatter(argparse.HelpFormatter):
    """Help with room for a sub-command and its help on one line (argparse measures sub-commands without their
    extra indentation, so a long one such as "build-exercises" would stand alone on its line)."""

    def __init__(self, prog):
        super().__init__(prog, max_help_position=34, width=110)

    def add_argument(self, action):
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action._get_subactions():
                width = len(self._format_action_invocation(sub)) + self._current_indent + 2 * self._indent_increment
                self._action_max_length = max(self._action_max_length, width)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose own messages follow the course's language; its sub-parsers too."""

    def __init__(self, *args, **kwargs):
        # Wide enough that a command and its (translated) help share a line: a bare "build-exercises" line is
        # English to a Chinese reader.
        kwargs.setdefault("formatter_class", WideHelpFormatter)
        with _speaking():
            super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        with _speaking():
            return super().add_subparsers(**kwargs)

    def add_argument(self, *args, **kwargs):
        with _speaking():
            return super().add_argument(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        with _speaking():
            return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):  # its own "unrecognized arguments: %s" too
        with _speaking():
            return super().parse_args(args, namespace)

    def format_help(self) -> str:
        with _speaking():
            return super().format_help()

    def format_usage(self) -> str:
        with _speaking():
            return super().format_usage()

    def error(self, message):
        with _speaking():
            self.print_usage(sys.stderr)
            self.exit(2, translate("%(prog)s: error: %(message)s\n") % {"prog": self.prog, "message": message})
