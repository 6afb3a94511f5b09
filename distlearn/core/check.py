"""Exercise checkers: run cases the student never sees and print short bilingual ✓/✗ feedback.

In a notebook::

    from distlearn.memory import check          # chapter 01's folder
    check.ex01_bytes_per_param(bytes_per_param)

This module is the framework. Each chapter's checkers live in its topic folder, ``distlearn/<folder>/check.py``
(:data:`distlearn.CHAPTER_FOLDERS`), as functions named ``exNN_<name>``; ``distlearn.core.check.exNN_<name>`` also
finds any of them by name, so adding a chapter never edits this file. A checker calls :func:`verify`, which prints, for each of
the first failing cases, the call (inputs abbreviated), the *first* thing that is wrong in the answer (a number,
an array element, an item of a returned tuple, a type), and a hint (once); then raises :class:`CheckFailed`, so an
unsolved exercise can never look solved. A case that runs longer than its time limit (an endless loop) is stopped
and reported.
"""
from __future__ import annotations

import importlib
import math
import numbers
import os
import re
import signal
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from distlearn.core import sandbox
from distlearn.core.guard import read_only
from distlearn.core.i18n import bi, get_language

DEFAULT_TIMEOUT = 20.0   # seconds one hidden case may run (its call and the comparison); the first case past it ends the check
SHOWN = 3                # failing cases printed in full


class CheckFailed(AssertionError):
    """Raised by a checker when the student's answer is missing or wrong.

    In IPython it shows one line instead of a traceback: the ✓/✗ feedback printed above it is what matters, and
    a traceback through the checker's source would only reveal how the expected values are computed.
    """

    def _render_traceback_(self):  # IPython's hook for custom error display
        return [f"CheckFailed: {self}"]


@dataclass(frozen=True)
class Why:
    """Why a case fails, in both languages. Falsy, so a ``compare`` function may return it instead of False."""
    en: str
    zh: str

    def __bool__(self) -> bool:
        return False

    def within(self, en: str, zh: str) -> "Why":
        """The same reason, located: ``within("item 2", "第 2 项")`` → "item 2: …"."""
        return Why(f"{en}: {self.en}", f"{zh}：{self.zh}")


@dataclass
class Case:
    """One hidden test case: call ``fn(*args, **kwargs)`` and compare with ``expected``.

    ``rtol``/``atol`` apply to numbers and arrays; ``hint_en``/``hint_zh`` are shown when this case fails.
    ``compare(got, expected)`` replaces the default comparison; it returns True, False, or a :class:`Why`.
    ``parts`` names the items of an expected tuple, as (English, Chinese) pairs, for the feedback.
    ``timeout``: seconds the call and the comparison may take (None: :data:`DEFAULT_TIMEOUT`); a case past it ends
    the check.
    """

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None
    rtol: float = 1e-9
    atol: float = 0.0
    hint_en: str = ""
    hint_zh: str = ""
    compare: Callable[[Any, Any], Any] | None = None
    parts: tuple = ()
    timeout: float | None = None

    def describe(self, name: str) -> str:
        parts = [_arg(a) for a in self.args] + [f"{k}={_arg(v)}" for k, v in self.kwargs.items()]
        return f"{name}({', '.join(parts)})"


# ---------------------------------------------------------------- showing values briefly
def _shape(x) -> str:
    return "×".join(str(d) for d in np.shape(x)) or "scalar"


def _arg(x, limit: int = 48) -> str:
    """A short, language-neutral picture of an input: arrays by shape, long lists by length."""
    if isinstance(x, np.ndarray) or _is_tensor(x):
        return f"{'tensor' if _is_tensor(x) else 'array'}({_shape(x)})"
    if isinstance(x, (list, tuple)) and x and all(isinstance(a, np.ndarray) or _is_tensor(a) for a in x):
        inner = ", ".join(_arg(a) for a in x[:3]) + (", …" if len(x) > 3 else "")
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    s = _short(x)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def _short(x, limit: int = 60) -> str:
    if isinstance(x, float):
        s = f"{x:.12g}"  # 0.25, not 0.24999999999999994
    elif isinstance(x, np.ndarray) or _is_tensor(x):
        s = f"array({_shape(x)})"
    else:
        s = repr(x)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _num(x) -> str:
    x = float(x)
    return f"{x:.12g}" if abs(x) < 1e15 else f"{x:.6e}"


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _to_numpy(x):
    return x.detach().cpu().numpy() if _is_tensor(x) else x


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


# ---------------------------------------------------------------- the first difference
def difference(got, expected, rtol: float = 1e-9, atol: float = 0.0, parts: tuple = ()) -> Why | None:
    """The first thing that differs between ``got`` and ``expected``, briefly and in both languages, or None when
    they agree (numbers and arrays within ``rtol``/``atol``; an enum member matches its name)."""
    if got is None and expected is not None:
        return Why("returned None: is a `return` missing?", "返回了 None：是不是少了 `return`？")
    if isinstance(expected, dict):
        return _dict_difference(got, expected, rtol, atol)
    if isinstance(expected, (list, tuple)) and not isinstance(got, np.ndarray) and not _is_tensor(got):
        return _sequence_difference(got, expected, rtol, atol, parts)
    if isinstance(expected, np.ndarray) or _is_tensor(expected) or isinstance(got, np.ndarray) or _is_tensor(got):
        return _array_difference(got, expected, rtol, atol)
    if isinstance(expected, bool):
        if got is expected or (isinstance(got, (bool, np.bool_)) and bool(got) == expected):
            return None
        return Why(f"returned {_short(got)}, expected {expected}", f"返回 {_short(got)}，应为 {expected}")
    if _is_number(expected):
        return _number_difference(got, expected, rtol, atol)
    if isinstance(expected, str) and getattr(got, "name", None) == expected:  # an enum member, e.g. ShardingStrategy
        return None
    if got == expected:
        return None
    if isinstance(expected, str) and not isinstance(got, str):
        return Why(f"returned {_short(got)} ({type(got).__name__}), expected the name {expected!r}",
                   f"返回 {_short(got)}（{type(got).__name__}），应为名称 {expected!r}")
    return Why(f"returned {_short(got)}, expected {_short(expected)}", f"返回 {_short(got)}，应为 {_short(expected)}")


def _number_difference(got, expected, rtol, atol) -> Why | None:
    if isinstance(got, str):
        try:
            as_number = _num(float(got))
        except ValueError:
            as_number = _num(expected)
        return Why(f"returned the text {got!r}, not a number: return the number ({as_number}, not {got!r})",
                   f"返回的是字符串 {got!r}，不是数值：请返回数值本身（{as_number}，而不是 {got!r}）")
    if isinstance(got, (np.ndarray, list, tuple)) or _is_tensor(got):
        if np.size(_to_numpy(got)) == 1:
            got = np.asarray(_to_numpy(got)).reshape(()).item()
        else:
            return Why(f"returned a {type(got).__name__} of shape {_shape(_to_numpy(got))}, expected one number",
                       f"返回了形状为 {_shape(_to_numpy(got))} 的 {type(got).__name__}，应为一个数")
    if not _is_number(got):
        return Why(f"returned a {type(got).__name__} ({_short(got)}), expected a number",
                   f"返回了 {type(got).__name__}（{_short(got)}），应为一个数")
    g, e = float(got), float(expected)
    if math.isclose(g, e, rel_tol=rtol, abs_tol=atol):
        return None
    if math.isnan(g):
        return Why(f"returned nan, expected {_num(e)}", f"返回 nan，应为 {_num(e)}")
    why_en, why_zh = f"returned {_num(g)}, expected {_num(e)}", f"返回 {_num(g)}，应为 {_num(e)}"
    if e and g and math.isfinite(g):
        ratio = g / e
        for k in (2, 3, 4, 8, 16, 1024, 1e3, 1e6, 1e9, 2 ** 30 / 1e9, 1e9 / 2 ** 30):
            for r, word in ((k, f"{k:g} ×"), (1 / k, f"1/{k:g} of")):
                if math.isclose(ratio, r, rel_tol=1e-6):
                    return Why(f"{why_en} — {word} the expected value", f"{why_zh}——是正确值的 "
                               + (f"{k:g} 倍" if r == k else f"1/{k:g}"))
    return Why(why_en, why_zh)


def _sequence_difference(got, expected, rtol, atol, parts) -> Why | None:
    kind = "tuple" if isinstance(expected, tuple) else "list"
    kind_zh = "元组" if kind == "tuple" else "列表"
    if isinstance(got, np.ndarray) or not isinstance(got, (list, tuple)):
        return Why(f"returned a {type(got).__name__}, expected a {kind} of {len(expected)} items",
                   f"返回了 {type(got).__name__}，应为包含 {len(expected)} 项的{kind_zh}")
    if len(got) != len(expected):
        return Why(f"returned {len(got)} items, expected {len(expected)}", f"返回了 {len(got)} 项，应为 {len(expected)} 项")
    for i, (g, e) in enumerate(zip(got, expected)):
        why = difference(g, e, rtol, atol)
        if why is not None:
            if i < len(parts):
                en, zh = parts[i]
                return why.within(f"{en} (item {i + 1} of the returned {kind})", f"{zh}（返回{kind_zh}的第 {i + 1} 项）")
            return why.within(f"item {i + 1}", f"第 {i + 1} 项")  # counted from 1, as a reader counts
    return None


def _dict_difference(got, expected, rtol, atol) -> Why | None:
    if not isinstance(got, dict):
        return Why(f"returned a {type(got).__name__}, expected a dict", f"返回了 {type(got).__name__}，应为字典")
    missing, extra = [k for k in expected if k not in got], [k for k in got if k not in expected]
    if missing:
        return Why(f"key {missing[0]!r} is missing", f"缺少键 {missing[0]!r}")
    if extra:
        return Why(f"unexpected key {extra[0]!r}", f"多了键 {extra[0]!r}")
    for k in expected:
        why = difference(got[k], expected[k], rtol, atol)
        if why is not None:
            return why.within(f"[{k!r}]", f"[{k!r}]")
    return None


def _array_difference(got, expected, rtol, atol) -> Why | None:
    try:
        g = np.asarray(_to_numpy(got), dtype=float)
        e = np.asarray(_to_numpy(expected), dtype=float)
    except (TypeError, ValueError):
        return Why(f"returned {_short(got)}, which is not an array of numbers",
                   f"返回了 {_short(got)}，不是数值数组")
    if g.shape != e.shape:
        why = Why(f"shape {g.shape} instead of {e.shape}", f"形状为 {g.shape}，应为 {e.shape}")
        if g.ndim == 2 and g.shape == e.shape[::-1] and np.allclose(g.T, e, rtol=rtol, atol=atol):
            return Why(why.en + " (it is the transpose of the answer)", why.zh + "（是正确结果的转置）")
        return why
    bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=False)
    if not bad.any():
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    where = "[" + ", ".join(map(str, first)) + "]"
    return Why(f"element {where} is {_num(g[first])} instead of {_num(e[first])} ({int(bad.sum())} of {bad.size} "
               "elements differ)",
               f"第 {where} 个元素为 {_num(g[first])}，应为 {_num(e[first])}（{bad.size} 个元素中有 {int(bad.sum())} 个不同）")


def _close(got, expected, rtol, atol) -> bool:
    """Whether ``got`` agrees with ``expected`` (see :func:`difference`)."""
    return difference(got, expected, rtol, atol) is None


# ---------------------------------------------------------------- running one case
_NOT_SOLVED = "distlearn.check: not implemented"   # what a case returns when the answer raised NotImplementedError


def _judge(fn: Callable, case: Case):
    """Call ``fn`` on ``case`` and compare its answer: None (right), a :class:`Why`, or :data:`_NOT_SOLVED`. Runs
    in the worker of :func:`distlearn.core.sandbox.run`, so the comparison sees what the call changed (a
    VirtualCluster's byte counts) and an answer's odd ``__eq__`` cannot hang the kernel."""
    try:
        got = fn(*case.args, **case.kwargs)
    except sandbox.Stopped:
        raise
    except NotImplementedError:
        return _NOT_SOLVED
    except BaseException as exc:  # noqa: BLE001 — the student's code raised, exited or was interrupted: feedback
        return _raised(exc)
    try:
        return _compare(got, case)
    except sandbox.Stopped:
        raise
    except BaseException as exc:  # noqa: BLE001 — an answer whose __eq__ or __float__ raises
        return Why(f"your answer could not be compared: {sandbox.describe(exc)}",
                   f"无法比较你的答案：{sandbox.describe(exc)}")


EXCEPTION_ZH = read_only({
    "ZeroDivisionError": "除数为零", "TypeError": "类型不对", "ValueError": "取值不对", "NameError": "名字未定义",
    "IndexError": "下标越界", "KeyError": "字典里没有这个键", "AttributeError": "对象没有这个属性",
    "RecursionError": "递归太深", "MemoryError": "内存不够", "OverflowError": "数值溢出",
    "AssertionError": "断言不成立", "NotImplementedError": "还没有实现", "RuntimeError": "运行时错误",
    "UnboundLocalError": "局部变量在赋值前被使用", "ImportError": "导入失败", "ModuleNotFoundError": "找不到模块",
    "KeyboardInterrupt": "被中断", "StopIteration": "迭代器已耗尽", "FloatingPointError": "浮点运算错误"})
"""A Chinese gloss of Python's common exception types: a student's exception quoted under zh names the type, says
what it means in Chinese, and marks the message as Python's own English text (Python does not translate it)."""


def _raised(exc: BaseException) -> Why:
    """What the student's code raised (SystemExit: what it exited with), and where in their code."""
    if isinstance(exc, SystemExit):
        code = "" if exc.code is None else _short(exc.code)
        return Why(f"called sys.exit({code}) (SystemExit): a check needs your function to return its answer, "
                   "not to end the program",
                   f"调用了 sys.exit({code})（SystemExit）：检查需要函数返回答案，而不是结束程序")
    text = sandbox.describe(exc)
    en = f"raised {text}"
    name, _, message = text.partition(": ")
    gloss = EXCEPTION_ZH.get(type(exc).__name__)
    inside = "；".join(x for x in (gloss, f"Python 原文：{message}" if message else "") if x)
    zh = f"抛出 {name}（{inside}）" if inside else f"抛出 {name}"
    where = _where_in_student_code(exc)
    if where:
        line, source = where
        en += f" (line {line} of your code: {source})" if source else f" (line {line} of your code)"
        zh += f"（你的代码第 {line} 行：{source}）" if source else f"（你的代码第 {line} 行）"
    return Why(en, zh)


def _compare(got, case: Case) -> Why | None:
    if case.compare is not None:
        ok = case.compare(got, case.expected)
        if isinstance(ok, Why):
            return ok
        if ok:
            return None
        why = difference(got, case.expected, case.rtol, case.atol, case.parts)   # a Why is falsy: no `or` here
        return why if why is not None else Why("the answer does not pass this case", "答案未通过这个用例")
    return difference(got, case.expected, case.rtol, case.atol, case.parts)


def _where_in_student_code(exc: BaseException) -> tuple[int, str] | None:
    """(line number, source line) of the deepest frame outside the distlearn package (the student's code)."""
    import linecache

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # distlearn/
    where, tb = None, exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(package + os.sep):
            where = tb.tb_lineno, linecache.getline(code.co_filename, tb.tb_lineno, tb.tb_frame.f_globals).strip()
        tb = tb.tb_next
    return where


def _limit(case: Case) -> float:
    return case.timeout or DEFAULT_TIMEOUT


def _run_case(fn: Callable, case: Case, output_limit: int = sandbox.OUTPUT_LIMIT) -> tuple[Why | None, sandbox.Outcome]:
    """(why the case fails or None, how its run ended), showing up to ``output_limit`` characters of what the
    answer prints. Raises NotImplementedError when the answer is still the exercise's ``raise NotImplementedError``."""
    outcome = sandbox.run(lambda: _judge(fn, case), _limit(case), output_limit, notice=False)
    return _why(outcome, case), outcome


def _why(outcome: sandbox.Outcome, case: Case) -> Why | None:
    if outcome.status == "timeout":
        limit = _limit(case)
        return Why(f"did not finish within {limit:g} s: an endless loop? (a `while` whose condition never "
                   "changes, a loop over the wrong variable, or a call that waits: time.sleep, input)",
                   f"{limit:g} 秒内没有结束：是不是死循环？（`while` 的条件从不改变、循环变量用错了，"
                   "或调用了会等待的函数：time.sleep、input）")
    if outcome.status == "ended":
        code = "?" if outcome.exit_code is None else outcome.exit_code
        signal_name = _signal_name(-code) if isinstance(code, int) and code < 0 else ""
        how_en, how_zh = (f", {signal_name}", f"，{signal_name}") if signal_name else ("", "")
        return Why(f"your code ended the process (exit code {code}{how_en}): os._exit, or a crash in C code? "
                   "A check needs your function to return its answer",
                   f"你的代码结束了进程（退出码 {code}{how_zh}）：是 os._exit，还是 C 代码崩溃了？检查需要函数返回答案")
    if outcome.status == "failed":
        return Why(f"the check could not run this case: {outcome.error}",
                   f"检查无法运行这个用例：{outcome.error}")
    if isinstance(outcome.value, str) and outcome.value == _NOT_SOLVED:
        raise NotImplementedError
    return outcome.value


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# ---------------------------------------------------------------- verify
def verify(exercise: str, fn: Callable, cases: list[Case]) -> None:
    """Run ``cases`` against the student's ``fn``; print bilingual feedback; raise CheckFailed on any failure.

    Each case runs in its own worker (:func:`distlearn.core.sandbox.run`): at most ``case.timeout`` or
    :data:`DEFAULT_TIMEOUT` seconds (20 s), and the first case past its limit ends the check, so an endless loop or
    ``time.sleep(3600)`` costs one limit, not one per case; what the answer prints is shown up to
    :data:`distlearn.core.sandbox.OUTPUT_LIMIT` characters (10,000) in all the check's cases together; nothing
    the answer changes (a course table, a global) outlives its case."""
    if not callable(fn):
        print(bi(f"✗ {exercise}: expected a function, got {type(fn).__name__}.",
                 f"✗ {exercise}：需要传入一个函数，收到的是 {type(fn).__name__}。", sep="\n  "))
        raise CheckFailed(exercise)
    name = getattr(fn, "__name__", "fn")
    failures, stopped_at, output = [], None, _Output()
    for i, case in enumerate(cases, 1):
        try:
            why, outcome = _run_case(fn, case, output.left)
        except KeyboardInterrupt:  # the kernel's stop button while a case runs: a ✗ line, not a 40-line traceback
            output.close()
            print(bi(f"✗ {exercise}: stopped at hidden case {i} of {len(cases)}: you interrupted the kernel.",
                     f"✗ {exercise}：在第 {i} 个隐藏测试用例（共 {len(cases)} 个）处停止：你中断了内核。", sep="\n  "))
            raise CheckFailed(bi(f"{exercise}: interrupted", f"{exercise}：已中断")) from None
        except NotImplementedError:
            print(bi(f"✗ {exercise}: not solved yet — replace the `raise NotImplementedError` with your code.",
                     f"✗ {exercise}：尚未作答——请把 `raise NotImplementedError` 换成你的代码。", sep="\n  "))
            raise CheckFailed(bi(f"{exercise}: not implemented", f"{exercise}：尚未作答")) from None
        if why is not None:
            failures.append((i, case, why))
        output.add(outcome)
        if outcome.status == "timeout":
            stopped_at = i
            break
    output.close()
    if not failures:
        print(bi(f"✓ {exercise}: all {len(cases)} hidden cases pass.",
                 f"✓ {exercise}：全部 {len(cases)} 个隐藏测试用例通过。"))
        return
    if stopped_at is None:
        print(bi(f"✗ {exercise}: {len(failures)} of {len(cases)} hidden cases fail.",
                 f"✗ {exercise}：{len(cases)} 个隐藏测试用例中有 {len(failures)} 个未通过。"))
    else:
        print(_stopped_line(exercise, stopped_at, len(cases), _limit(cases[stopped_at - 1])))
    _print_failures(name, failures)
    raise CheckFailed(bi(f"{exercise}: {len(failures)} case(s) fail", f"{exercise}：{len(failures)} 个用例未通过"))


class _Output:
    """What a check has shown of the answer's printed output: at most :data:`distlearn.core.sandbox.OUTPUT_LIMIT`
    characters over all its cases, then one line saying how much was cut."""

    def __init__(self):
        self.left, self.cut, self.hidden = sandbox.OUTPUT_LIMIT, False, 0

    def add(self, outcome: sandbox.Outcome) -> None:
        self.left = max(self.left - outcome.shown, 0)
        if outcome.cut:
            self.cut = True
            self.hidden = None if self.hidden is None or outcome.hidden is None else self.hidden + outcome.hidden

    def close(self) -> None:
        if self.cut:
            print(sandbox.cut_notice(self.hidden), end="")


def _stopped_line(exercise: str, i: int, n: int, limit: float) -> str:
    """The headline of a check that stopped at case ``i`` of ``n``, which ran past ``limit`` seconds."""
    rest_en = f"; the {n - i} after it were not run" if i < n else ""
    rest_zh = f"；后面 {n - i} 个用例没有运行" if i < n else ""
    return bi(f"✗ {exercise}: stopped at hidden case {i} of {n}: it ran past {limit:g} s{rest_en}.",
              f"✗ {exercise}：在第 {i} 个隐藏测试用例（共 {n} 个）处停止：它超过了 {limit:g} 秒{rest_zh}。")


def _print_failures(name: str, failures: list) -> None:
    """The first :data:`SHOWN` failing cases: the call, the first difference, the hint once."""
    hints_shown = set()
    for i, case, why in failures[:SHOWN]:
        # the call is code, shown once; a Chinese reader gets a Chinese word in front of it
        print(f"  [{i}] " + ("用例：" if get_language() == "zh" else "") + case.describe(name))
        print("      → " + bi(why.en, why.zh, sep="\n      → "))
        hint = (case.hint_en, case.hint_zh)
        if case.hint_en and hint not in hints_shown:
            hints_shown.add(hint)
            print("      " + bi(f"Hint: {case.hint_en}", f"提示：{case.hint_zh}", sep="\n      "))
    if len(failures) > SHOWN:
        print("  " + bi(f"(showing the first {SHOWN} of {len(failures)} failing cases)",
                        f"（只显示 {len(failures)} 个未通过用例中的前 {SHOWN} 个）"))


_EX = re.compile(r"^ex(\d\d)_\w+$")


def __getattr__(name: str):
    """``check.exNN_<name>``: the checker from chapter NN's folder (``distlearn.<folder>.check``), so tests and
    tools can reach any checker by name; a notebook imports its own chapter's ``check`` module directly."""
    m = _EX.match(name)
    if not m:
        raise AttributeError(f"module 'distlearn.core.check' has no attribute {name!r}")
    from distlearn import CHAPTER_FOLDERS

    folder = CHAPTER_FOLDERS.get(m.group(1))
    if folder is None or folder == "core":
        raise AttributeError(f"no checkers for chapter {m.group(1)} / 第 {m.group(1)} 章没有检查函数")
    module = importlib.import_module(f"distlearn.{folder}.check")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"no checker named {name!r} / 没有名为 {name!r} 的检查函数") from None
