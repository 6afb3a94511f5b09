"""Input checks that fail with one clear error naming the parameter, the value and the allowed range.

Every public function of :mod:`distlearn` validates what a student may type with these helpers, so a bad value
never becomes a traceback from deep inside numpy or a silently wrong number. The message is written in both
languages and shown in the language the reader chose (:func:`distlearn.set_language`: English, Chinese, or both);
an error about the language setting itself is always shown in both, since then the reader's language is unknown.
"""
from __future__ import annotations

import math
import numbers
from typing import Iterable

from distlearn.core.current_language import get_language


class DistlearnValueError(ValueError):
    """A ValueError written in English (``.en``) and Chinese (``.zh``), shown in the current language (both on two
    lines under ``"both"``, or whatever the language when ``bilingual=True``). ``.param`` names the offending
    parameter."""

    def __init__(self, param: str, en: str, zh: str, *, bilingual: bool = False):
        self.param = param
        self.en = en
        self.zh = zh
        self.bilingual = bilingual
        lang = self._language()
        super().__init__(en if lang == "en" else zh if lang == "zh" else f"{en}\n{zh}")

    def _language(self) -> str:
        """The language the message is shown in now: ``"both"`` with ``bilingual=True`` (the errors about the
        language setting itself), else the reader's (:mod:`distlearn.core.current_language`)."""
        return "both" if self.bilingual else get_language()

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback through :mod:`distlearn.core.validate`: the message in the
        reader's language at display time (both under ``"both"`` or with ``bilingual=True``) and the line of the
        reader's own code that passed the value (issue 14, item 6)."""
        import linecache
        import os

        lang = self._language()  # at display time: the reader's language now
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # distlearn/
        called, where = "", ""
        tb = self.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            inside = os.path.abspath(code.co_filename).startswith(package + os.sep)
            if not inside:
                line = linecache.getline(code.co_filename, tb.tb_lineno, tb.tb_frame.f_globals).strip()
                where = line and f"{line}   " + {"en": f"(line {tb.tb_lineno})", "zh": f"（第 {tb.tb_lineno} 行）"}.get(
                    lang, f"(line {tb.tb_lineno} / 第 {tb.tb_lineno} 行)")
            elif not called:
                module = tb.tb_frame.f_globals.get("__name__", "")
                called = f"{module}.{code.co_name}" if module else code.co_name
            tb = tb.tb_next
        name = f"\x1b[0;31m{type(self).__name__}\x1b[0m: "
        messages = [self.en] if lang == "en" else [self.zh] if lang == "zh" else [self.en, self.zh]
        lines = [name + messages[0]] + [f"{' ' * len(type(self).__name__)}  {m}" for m in messages[1:]]
        if where:
            lines.append(f"  → {where}")
        if called:
            lines.append(f"    ({called})")
        return lines


def _is_int(value) -> bool:
    if type(value) is int:  # fast path; bool is a subclass of int, not int itself
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value, *, minimum: int | None = 1, maximum: int | None = None,
              whole_float: bool = False) -> int:
    """Return ``value`` as an int if it is an integer within [minimum, maximum] (None = unbounded).

    Floats are refused, even whole ones (a world size of 8.0 is a typo worth pointing out), unless
    ``whole_float=True``: then a whole-number float such as ``7.5e9`` parameters is accepted as an int.
    Raises DistlearnValueError.
    """
    if whole_float and isinstance(value, float) and value.is_integer():
        value = int(value)
    if _is_int(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return int(value)  # the common case, kept cheap: planners call this in tight loops
    rng_en, rng_zh = _range_text(minimum, maximum)
    if not _is_int(value):
        raise DistlearnValueError(
            name,
            f"{name} must be an integer {rng_en}, got {value!r} ({type(value).__name__}).",
            f"{name} 必须是整数（{rng_zh}），收到 {value!r}（{type(value).__name__}）。",
        )
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise DistlearnValueError(
            name,
            f"{name} must be an integer {rng_en}, got {value}.",
            f"{name} 必须是整数（{rng_zh}），收到 {value}。",
        )
    return value


def check_number(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
                 strict_min: bool = False) -> float:
    """Return ``value`` as a float if it is a finite real number in range.

    ``strict_min=True`` excludes the minimum itself (e.g. a size must be > 0). Raises DistlearnValueError.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
            minimum is None or (value > minimum if strict_min else value >= minimum)) and (
            maximum is None or value <= maximum):
        return float(value)  # the common case, kept cheap
    rng_en, rng_zh = _range_text(minimum, maximum, strict_min=strict_min)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise DistlearnValueError(
            name,
            f"{name} must be a finite number {rng_en}, got {value!r}.",
            f"{name} 必须是有限的数值（{rng_zh}），收到 {value!r}。",
        )
    value = float(value)
    too_low = minimum is not None and (value <= minimum if strict_min else value < minimum)
    too_high = maximum is not None and value > maximum
    if too_low or too_high:
        raise DistlearnValueError(
            name,
            f"{name} must be a number {rng_en}, got {value:g}.",
            f"{name} 必须是数值（{rng_zh}），收到 {value:g}。",
        )
    return value


# Upper bounds on what a student can ask a function to allocate or loop over (issue 33): generous for every
# teaching use, small enough that a typo (10**12) is refused at once instead of hanging or exhausting memory.
MAX_ELEMENTS = 2 ** 26       # elements of one generated tensor or array (256 MiB in fp32)
MAX_STEPS = 100_000          # steps, runs or iterations of a simulated loop
MAX_SEED = 2 ** 32 - 1       # numpy's and torch's seeds both accept [0, 2**32 − 1]
MAX_WORLD_SIZE = 2 ** 20     # ranks in a simulated or counted group (about a million GPUs)


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (numpy's bool too); anything else, a string such as
    ``"False"`` included, raises DistlearnValueError (a non-empty string would otherwise count as True)."""
    if value is True or value is False:
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    raise DistlearnValueError(
        name,
        f"{name} must be True or False, got {value!r} ({type(value).__name__}).",
        f"{name} 必须是 True 或 False，收到 {value!r}（{type(value).__name__}）。",
    )


def check_text(name: str, value) -> str:
    """Return ``value`` if it is a string (a label, an option's name); anything else raises DistlearnValueError."""
    if isinstance(value, str):
        return value
    raise DistlearnValueError(name, f"{name} must be a string, got {value!r}.",
                              f"{name} 必须是字符串，收到 {value!r}。")


def check_seed(name: str, value) -> int:
    """A random seed: an integer in [0, 2**32 − 1]. Raises DistlearnValueError."""
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


def check_elements(name: str, count, cap: int = MAX_ELEMENTS) -> int:
    """Raise DistlearnValueError if a tensor of ``count`` elements (sizes already checked) is larger than ``cap``."""
    if count > cap:
        raise DistlearnValueError(
            name,
            f"{name}: {count:,} elements is more than this course generates (at most {cap:,}).",
            f"{name}：{count:,} 个元素超出了本课程生成的上限（最多 {cap:,} 个）。",
        )
    return count


def check_callable(name: str, value):
    """Return ``value`` if it can be called (a model function, a loss …); anything else raises
    DistlearnValueError."""
    if callable(value):
        return value
    raise DistlearnValueError(name, f"{name} must be a function (callable), got {value!r} ({type(value).__name__}).",
                              f"{name} 必须是函数（可调用对象），收到 {value!r}（{type(value).__name__}）。")


def check_record(name: str, value, cls: type | tuple[type, ...], example: str):
    """Return ``value`` if it is an instance of ``cls`` (a course record: a ModelConfig, a Cluster, a Plan …); anything
    else (``None``, a string, another record) raises DistlearnValueError naming the parameter, the type it needs
    and ``example``, a call that makes one (``get_preset('llama3-8b')``)."""
    if isinstance(value, cls):
        return value
    kinds = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise DistlearnValueError(name, f"{name} must be a {kinds}, e.g. {example}; got {shown} ({type(value).__name__}).",
                              f"{name} 必须是 {kinds}，例如 {example}；收到 {shown}（{type(value).__name__}）。")


def check_array(name: str, value, *, ndim: int | None = None, min_size: int = 0, finite: bool = True,
                cap: int = MAX_ELEMENTS):
    """Return ``value`` as a float numpy array if it is an array (or nested list) of real numbers with ``ndim``
    dimensions (None: any), at least ``min_size`` elements, at most ``cap`` of them, all finite unless
    ``finite=False``. A string, ``None``, ragged lists or a bool array raise DistlearnValueError."""
    import numpy as np

    def refuse(en_why: str, zh_why: str):
        raise DistlearnValueError(name, f"{name} must be an array of {'finite ' if finite else ''}numbers"
                                        f"{f' with {ndim} dimension(s)' if ndim is not None else ''}: {en_why}.",
                                  f"{name} 必须是{f' {ndim} 维的' if ndim is not None else ''}"
                                  f"{'有限' if finite else ''}数值数组：{zh_why}。")

    if value is None or isinstance(value, (str, bytes, dict, set)):
        refuse(f"got {value!r} ({type(value).__name__})", f"收到 {value!r}（{type(value).__name__}）")
    if hasattr(value, "size") and not isinstance(value, np.ndarray) and isinstance(value.size, int):
        check_elements(name, value.size, cap)  # a torch tensor: its size before converting it
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        refuse(f"could not read it as an array ({e})", f"无法读取为数组（{e}）")
    check_elements(name, arr.size, cap)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        refuse(f"got elements of type {arr.dtype}", f"收到元素类型 {arr.dtype}")
    arr = arr.astype(float, copy=False)
    if ndim is not None and arr.ndim != ndim:
        refuse(f"got shape {arr.shape}", f"收到形状 {arr.shape}")
    if arr.size < min_size:
        refuse(f"got {arr.size} elements, at least {min_size} needed", f"收到 {arr.size} 个元素，至少需要 {min_size} 个")
    if finite and not np.isfinite(arr).all():
        refuse("got NaN or infinity", "收到 NaN 或无穷大")
    return arr


def check_positive(name: str, value) -> float:
    """A finite number > 0 (sizes, times, bandwidths). Raises DistlearnValueError."""
    return check_number(name, value, minimum=0, strict_min=True)


def check_choice(name: str, value, choices: Iterable):
    """Return ``value`` if it is one of ``choices`` (compared as given). Raises DistlearnValueError."""
    choices = tuple(choices)
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise DistlearnValueError(
            name,
            f"{name} must be one of {listed}; got {value!r}.",
            f"{name} 必须是以下之一：{listed}；收到 {value!r}。",
        )
    return value


def check_divisible(name: str, value: int, divisor_name: str, divisor: int) -> None:
    """Raise DistlearnValueError unless ``divisor`` divides ``value``."""
    if value % divisor:
        raise DistlearnValueError(
            name,
            f"{name} = {value} must be divisible by {divisor_name} = {divisor}.",
            f"{name} = {value} 必须能被 {divisor_name} = {divisor} 整除。",
        )


def _range_text(minimum, maximum, strict_min=False):
    lo = ">" if strict_min else "≥"
    if minimum is not None and maximum is not None:
        return (f"in [{minimum}, {maximum}]" if not strict_min else f"in ({minimum}, {maximum}]",
                f"范围 {'(' if strict_min else '['}{minimum}, {maximum}]")
    if minimum is not None:
        return f"{lo} {minimum}", f"{lo} {minimum}"
    if maximum is not None:
        return f"≤ {maximum}", f"≤ {maximum}"
    return "", "任意"
