"""``python -m distlearn <command>``: command-line entry points of the course."""
from __future__ import annotations

import sys
import textwrap


def commands() -> dict:
    """``{name: (function, English description, Chinese description)}`` of every command."""
    from .planner import command_line  # chapter 14

    return {"plan": (command_line.cli, command_line.DESCRIPTION_EN, command_line.DESCRIPTION_ZH)}


def usage() -> str:
    lines = ["usage: python -m distlearn <command> [options]", "用法：python -m distlearn <命令> [选项]", "",
             "commands / 命令:"]
    for name, (_, en, zh) in commands().items():
        lines += textwrap.wrap(en, 100, initial_indent=f"  {name:6} ", subsequent_indent=" " * 9)
        lines += [f"{'':9}{zh}", f"{'':9}options / 选项: python -m distlearn {name} --help"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    table = commands()
    if not argv or argv[0] not in table:
        print(usage())
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nunknown command / 未知命令: {argv[0]!r}")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return table[argv[0]][0](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
