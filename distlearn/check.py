"""Exercise checkers: run cases the student never sees and print bilingual ✓/✗ feedback.

In a notebook::

    from distlearn import check
    check.ex01_bytes_per_param(bytes_per_param)

Each chapter's checkers live in ``distlearn/checks/chNN.py`` as functions named ``exNN_<name>``; this module finds
them by name, so adding a chapter never edits this file. A checker calls :func:`verify`, which prints one line per
failing case (with a hint) and raises :class:`CheckFailed`, so an unsolved exercise can never look solved.
"""
from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .i18n import bi


class CheckFailed(AssertionError):
    """Raised by a checker when the student's answer is missing or wrong.

    In IPython it shows one line instead of a traceback: the ✓/✗ feedback printed above it is what matters, and
    a traceback through the checker's source would only reveal how the expected values are computed.
    """

    def _render_traceback_(self):  # IPython's hook for custom error display
        return [f"CheckFailed: {self}"]


@dataclass
class Case:
    """One hidden test case: call ``fn(*args, **kwargs)`` and compare with ``expected``.

    ``rtol``/``atol`` apply to numbers and arrays; ``hint_en``/``hint_zh`` are shown when this case fails.
    ``compare`` replaces the default comparison: ``compare(got, expected) -> bool``.
    """

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None
    rtol: float = 1e-9
    atol: float = 0.0
    hint_en: str = ""
    hint_zh: str = ""
    compare: Callable[[Any, Any], bool] | None = None

    def describe(self, name: str) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{name}({', '.join(parts)})"


def _close(got, expected, rtol, atol) -> bool:
    if isinstance(expected, dict):
        return (isinstance(got, dict) and got.keys() == expected.keys()
                and all(_close(got[k], expected[k], rtol, atol) for k in expected))
    if isinstance(expected, (list, tuple)) and not isinstance(got, np.ndarray):
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(_close(g, e, rtol, atol) for g, e in zip(got, expected)))
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray) or _is_tensor(got) or _is_tensor(expected):
        try:
            g, e = np.asarray(_to_numpy(got), dtype=float), np.asarray(_to_numpy(expected), dtype=float)
        except (TypeError, ValueError):
            return False
        return g.shape == e.shape and bool(np.allclose(g, e, rtol=rtol, atol=atol))
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected or got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float, np.number)):
        return math.isclose(float(got), float(expected), rel_tol=rtol, abs_tol=atol)
    return got == expected


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _to_numpy(x):
    return x.detach().cpu().numpy() if _is_tensor(x) else x


def _short(x, limit=120) -> str:
    if isinstance(x, float) and not isinstance(x, bool):
        s = f"{x:.12g}"  # 0.25, not 0.24999999999999994
    else:
        s = repr(x)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def verify(exercise: str, fn: Callable, cases: list[Case]) -> None:
    """Run ``cases`` against the student's ``fn``; print bilingual feedback; raise CheckFailed on any failure."""
    if not callable(fn):
        print(bi(f"✗ {exercise}: expected a function, got {type(fn).__name__}.",
                 f"✗ {exercise}：需要传入一个函数，收到的是 {type(fn).__name__}。", sep="\n  "))
        raise CheckFailed(exercise)
    failures = []
    for i, case in enumerate(cases, 1):
        call = case.describe(getattr(fn, "__name__", "fn"))
        try:
            got = fn(*case.args, **case.kwargs)
        except NotImplementedError:
            print(bi(f"✗ {exercise}: not solved yet — replace the `raise NotImplementedError` with your code.",
                     f"✗ {exercise}：尚未作答——请把 `raise NotImplementedError` 换成你的代码。", sep="\n  "))
            raise CheckFailed(bi(f"{exercise}: not implemented", f"{exercise}：尚未作答")) from None
        except Exception as exc:  # the student's code raised: show it as feedback, not as a crash of the checker
            failures.append((i, bi(f"{call} raised {type(exc).__name__}: {exc}",
                                   f"{call} 抛出了 {type(exc).__name__}：{exc}", sep="\n    "), case))
            continue
        ok = case.compare(got, case.expected) if case.compare else _close(got, case.expected, case.rtol, case.atol)
        if not ok:
            failures.append((i, bi(f"{call} returned {_short(got)}, expected {_short(case.expected)}",
                                   f"{call} 返回 {_short(got)}，期望 {_short(case.expected)}", sep="\n    "), case))
    if not failures:
        print(bi(f"✓ {exercise}: all {len(cases)} hidden cases pass.",
                 f"✓ {exercise}：全部 {len(cases)} 个隐藏测试用例通过。"))
        return
    print(bi(f"✗ {exercise}: {len(failures)} of {len(cases)} hidden cases fail.",
             f"✗ {exercise}：{len(cases)} 个隐藏测试用例中有 {len(failures)} 个未通过。"))
    shown = failures[:3]
    for i, msg, case in shown:
        print(f"  [{i}] {msg}")
        if case.hint_en:
            print("    " + bi(f"Hint: {case.hint_en}", f"提示：{case.hint_zh}", sep="\n    "))
    if len(failures) > len(shown):
        print("  " + bi(f"(showing the first {len(shown)} of {len(failures)} failing cases)",
                        f"（只显示 {len(failures)} 个未通过用例中的前 {len(shown)} 个）"))
    raise CheckFailed(bi(f"{exercise}: {len(failures)} case(s) fail", f"{exercise}：{len(failures)} 个用例未通过"))


_EX = re.compile(r"^ex(\d\d)_\w+$")


def __getattr__(name: str):
    m = _EX.match(name)
    if not m:
        raise AttributeError(f"module 'distlearn.check' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"distlearn.checks.ch{m.group(1)}")
    except ModuleNotFoundError as exc:
        raise AttributeError(f"no checkers for chapter {m.group(1)} / 第 {m.group(1)} 章没有检查函数") from exc
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"no checker named {name!r} / 没有名为 {name!r} 的检查函数") from None
