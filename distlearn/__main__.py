"""``python -m distlearn <command>``: command-line entry points of the course."""
from __future__ import annotations

import sys
import textwrap


def commands() -> dict:
    """``{name: (function, English description, Chinese description)}`` of every command."""
    from distlearn.planning import command_line, run_files  # chapter 14

    return {"plan": (command_line.cli, command_line.DESCRIPTION_EN, command_line.DESCRIPTION_ZH),
            "compare": (run_files.cli, run_files.DESCRIPTION_EN, run_files.DESCRIPTION_ZH)}


def usage() -> str:
    """The list of commands, in the reader's language (:func:`distlearn.set_language` / ``DISTLEARN_LANG``)."""
    from distlearn.core.i18n import bi, get_language

    lang = get_language()
    lines = bi("usage: python -m distlearn <command> [options]", "用法：python -m distlearn <命令> [选项]",
               sep="\n").splitlines() + ["", bi("commands:", "命令：")]
    table = commands()
    w = max(map(len, table))       # the names' column
    pad = " " * (w + 3)
    for name, (_, en, zh) in table.items():
        first = True
        if lang != "zh":
            lines += textwrap.wrap(en, 100, initial_indent=f"  {name:{w}} ", subsequent_indent=pad)
            first = False
        if lang != "en":
            lines += [f"  {name:{w}} {zh}" if first else f"{pad}{zh}"]
        lines += [pad + bi(f"options: python -m distlearn {name} --help",
                           f"选项：python -m distlearn {name} --help")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    table = commands()
    if not argv or argv[0] not in table:
        print(usage())
        if argv and argv[0] not in ("-h", "--help"):
            from distlearn.core.i18n import bi

            print("\n" + bi(f"unknown command: {argv[0]!r}", f"未知命令：{argv[0]!r}"))
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        return table[argv[0]][0](argv[1:]) or 0
    except BrokenPipeError:  # e.g. piped into head: stop quietly, as command-line tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
