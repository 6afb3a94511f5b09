"""``python -m distlearn <command>``: command-line entry points of the course."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {}
    try:
        from .planner import cli as plan_cli  # chapter 14
        commands["plan"] = plan_cli
    except ImportError:
        pass
    if not argv or argv[0] not in commands:
        names = ", ".join(sorted(commands)) or "(none yet)"
        print(f"usage: python -m distlearn <command> [options]; commands: {names}\n"
              f"用法：python -m distlearn <命令> [选项]；可用命令：{names}")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return commands[argv[0]](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
