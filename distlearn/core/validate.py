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


# ------------------------------------------------------------------ arguments checked at a function's entry
class _Spec:
    """What one parameter must be; :func:`checks` calls ``check(name, value, dims)`` (``dims``: the named sizes of
    the arrays checked so far in this call, so that two arrays' shared dimensions must agree)."""

    record_type: type | None = None  # a record spec's exact class: the wrapper's fast path (``type(v) is cls``)

    def check(self, name: str, value, dims: dict) -> None:  # pragma: no cover — every spec overrides it
        raise NotImplementedError


class record(_Spec):
    """The parameter is a course record of class ``cls`` (or one of a tuple of classes): a ModelConfig, a GPU, a
    Setting, a Plan …; ``example`` is a call that makes one, shown in the error (:func:`check_record`)."""

    def __init__(self, cls: type | tuple[type, ...], example: str):
        self.cls, self.example = cls, example
        self.record_type = cls if isinstance(cls, type) else None

    def check(self, name, value, dims):
        check_record(name, value, self.cls, self.example)


class function(_Spec):
    """The parameter is a function (:func:`check_callable`)."""

    def check(self, name, value, dims):
        check_callable(name, value)


def _array_shape(name: str, value, finite: bool, cap: int) -> tuple:
    """The shape of ``value`` if it is a numpy array, a torch tensor or a (nested) list of real numbers, holding at
    most ``cap`` elements, all finite when ``finite``; else DistlearnValueError. The value itself is not copied or
    converted (a torch tensor is checked with torch)."""
    import numpy as np

    def refuse(en_why: str, zh_why: str):
        raise DistlearnValueError(name, f"{name} must be an array (numpy or torch) of {'finite ' if finite else ''}"
                                        f"numbers: {en_why}.",
                                  f"{name} 必须是{'有限' if finite else ''}数值数组（numpy 或 torch）：{zh_why}。")

    kind = type(value)
    if kind.__module__ == "torch" and hasattr(value, "dtype") and hasattr(value, "shape"):  # a torch tensor
        if value.dtype.is_complex or str(value.dtype) == "torch.bool":
            refuse(f"got elements of type {value.dtype}", f"收到元素类型 {value.dtype}")
        check_elements(name, value.numel(), cap)
        if finite and value.dtype.is_floating_point and value.numel() and not bool(
                __import__("torch").isfinite(value).all()):
            refuse("got NaN or infinity", "收到 NaN 或无穷大")
        return tuple(value.shape)
    if value is None or isinstance(value, (str, bytes, dict, set, bool, numbers.Number)) or not (
            isinstance(value, (np.ndarray, list, tuple, range))):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        refuse(f"got {shown} ({kind.__name__})", f"收到 {shown}（{kind.__name__}）")
    if not isinstance(value, np.ndarray):
        if len(value) > cap:
            check_elements(name, len(value), cap)
        try:
            value = np.asarray(value)
        except (TypeError, ValueError):
            refuse("could not read it as an array (rows of different lengths?)", "无法读取为数组（各行长度不同？）")
    check_elements(name, value.size, cap)
    if value.dtype.kind not in "iuf":
        refuse(f"got elements of type {value.dtype}", f"收到元素类型 {value.dtype}")
    if finite and value.dtype.kind == "f" and value.size and not np.isfinite(value).all():
        refuse("got NaN or infinity", "收到 NaN 或无穷大")
    return value.shape


class array(_Spec):
    """The parameter is an array (numpy, torch or a nested list) of real numbers whose shape matches ``shape``: a
    string of axis names, e.g. ``"batch hidden"``; ``"..."`` first allows any number of leading axes, a digit fixes
    an axis' size, ``"_"`` allows any size; an axis name used by two parameters of one call must have one size
    (so ``x: "batch hidden"`` and ``w: "hidden ffn"`` must agree on ``hidden``). ``shape=None``: any shape.
    ``finite``: NaN and ±inf refused (default). ``min_size``: fewest elements (1: an empty array is refused)."""

    def __init__(self, shape: str | None = None, *, finite: bool = True, min_size: int = 1, cap: int = MAX_ELEMENTS,
                 torch: bool = False, number: bool = False):
        self.axes = None if shape is None else tuple(shape.split())
        self.leading = bool(self.axes) and self.axes[0] == "..."
        if self.leading:
            self.axes = self.axes[1:]
        self.finite, self.min_size, self.cap = finite, min_size, cap
        self.torch, self.number = torch, number  # torch: a torch tensor only; number: a plain number too

    def _wanted(self, dims: dict) -> str:
        sizes = [str(dims.get(a, a if a.isdigit() else "·")) for a in self.axes]
        names = ", ".join(("…",) * self.leading + self.axes)
        shown = ", ".join(("…",) * self.leading + tuple(sizes))
        return f"({names})" + (f" = ({shown})" if any(a in dims for a in self.axes) else "")

    def check(self, name, value, dims):
        if self.number and isinstance(value, numbers.Real) and not isinstance(value, bool):
            check_number(name, value) if self.finite else None
            return
        if self.torch and type(value).__module__ != "torch":
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise DistlearnValueError(name, f"{name} must be a torch tensor{' or a number' * self.number}, e.g. "
                                            f"torch.randn(4, 8); got {shown} ({type(value).__name__}).",
                                      f"{name} 必须是 torch 张量{'或数值' * self.number}，例如 torch.randn(4, 8)；"
                                      f"收到 {shown}（{type(value).__name__}）。")
        shape = _array_shape(name, value, self.finite, self.cap)
        size = math.prod(shape)
        if size < self.min_size:
            raise DistlearnValueError(name, f"{name} must hold at least {self.min_size} number(s); got shape {shape}.",
                                      f"{name} 至少要有 {self.min_size} 个数；收到形状 {shape}。")
        if self.axes is None:
            return
        ok = len(shape) == len(self.axes) or (self.leading and len(shape) >= len(self.axes))
        tail = shape[len(shape) - len(self.axes):] if ok else ()
        seen = {}
        for axis, n in zip(self.axes, tail):
            want = int(axis) if axis.isdigit() else None if axis == "_" else dims.get(axis, seen.get(axis))
            if want is not None and n != want:
                ok = False
                break
            if axis != "_" and not axis.isdigit():
                seen[axis] = n
        if not ok:
            wanted = self._wanted(dims)
            raise DistlearnValueError(name, f"{name} must be an array of shape {wanted}; got shape {shape}.",
                                      f"{name} 的形状必须是 {wanted}；收到形状 {shape}。")
        dims.update(seen)


class each(_Spec):
    """The parameter is a non-empty list or tuple (at least ``min_len`` items) whose every item is ``item`` (a
    :class:`record`, an :class:`array`, a :class:`whole` number; arrays' named axes must agree across items as
    across parameters). A 1-D numpy array counts as a list."""

    def __init__(self, item: _Spec, *, min_len: int = 1, max_len: int = MAX_WORLD_SIZE):
        self.item, self.min_len, self.max_len = item, min_len, max_len

    def check(self, name, value, dims):
        ok = isinstance(value, (list, tuple)) or (type(value).__name__ == "ndarray" and value.ndim == 1)
        if not ok or not self.min_len <= len(value) <= self.max_len:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise DistlearnValueError(
                name, f"{name} must be a list of {self.min_len} to {self.max_len:,} items; got {shown} "
                      f"({type(value).__name__}).",
                f"{name} 必须是含 {self.min_len} 到 {self.max_len:,} 项的列表；收到 {shown}（{type(value).__name__}）。")
        for i, item in enumerate(value):
            self.item.check(f"{name}[{i}]", item, dims)


class whole(_Spec):
    """The parameter (or, inside :class:`each`, an item) is an integer in [minimum, maximum] (:func:`check_int`)."""

    def __init__(self, minimum: int | None = 0, maximum: int | None = MAX_WORLD_SIZE):
        self.minimum, self.maximum = minimum, maximum

    def check(self, name, value, dims):
        check_int(name, value, minimum=self.minimum, maximum=self.maximum)


class flag(_Spec):
    """The parameter (or, inside :class:`each`, an item) is True or False (:func:`check_bool`)."""

    def check(self, name, value, dims):
        check_bool(name, value)


class maybe(_Spec):
    """The parameter is ``None`` or what ``spec`` says (for a parameter without a default that takes ``None``)."""

    def __init__(self, spec: _Spec):
        self.spec = spec

    def check(self, name, value, dims):
        if value is not None:
            self.spec.check(name, value, dims)


class mapping(_Spec):
    """The parameter is a dict holding at least the keys ``keys`` (``{"layers": …, "logits": …}``); with
    ``numbers=True`` every value is a finite real number (seconds, bytes or FLOPs by name)."""

    def __init__(self, keys: Iterable[str] = (), *, numbers: bool = True):
        self.keys, self.numbers = tuple(keys), numbers

    def check(self, name, value, dims):
        listed = ", ".join(self.keys)
        if not isinstance(value, dict) or any(k not in value for k in self.keys):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            need_en = f" with the keys {listed}" if self.keys else ""
            need_zh = f"（需含键 {listed}）" if self.keys else ""
            raise DistlearnValueError(name, f"{name} must be a dict{need_en}; got {shown} ({type(value).__name__}).",
                                      f"{name} 必须是字典{need_zh}；收到 {shown}（{type(value).__name__}）。")
        if self.numbers:
            for k, v in value.items():
                check_number(f"{name}[{k!r}]", v)


def checks(**specs: _Spec):
    """Decorator: check the named parameters of a function at its entry, then run it unchanged.

    ``@checks(x=array("batch hidden"), w=array("hidden ffn"), cluster=record(Cluster, "make_cluster(...)"))``:
    each spec (:class:`record`, :class:`array`, :class:`each`, :class:`function`) raises DistlearnValueError naming
    the parameter, what it must be (class, shape with its named sizes) and what it got, in both languages. A
    parameter left at its default is not checked, nor ``None`` where the default is ``None``. The function's
    signature, docstring and source (``inspect.getsource`` follows ``__wrapped__``) stay its own.

    Cost: one extra call frame and, for a record, one ``type(v) is cls`` test per checked parameter (≈ 0.2 µs),
    nothing per element beyond the NaN scan of an array. The planner's per-plan formulas, called thousands of times
    per search, do not use it: they test their Setting and Plan inline (:mod:`distlearn.planning.setting`)."""
    import functools
    import inspect

    def decorate(fn):
        params = list(inspect.signature(fn).parameters.values())
        by_name = {p.name: p for p in params}
        unknown = set(specs) - set(by_name)
        if unknown:  # a typo in the decorator: fail at import, not at a student's call
            raise TypeError(f"checks({', '.join(sorted(unknown))}): {fn.__qualname__} has no such parameter")
        plan = []
        for name, spec in specs.items():
            p = by_name[name]
            index = params.index(p) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else 1 << 30
            plan.append((name, index, p.default is None, spec.record_type, spec))
        plan = tuple(plan)

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            dims = None
            for name, index, none_ok, fast, spec in plan:
                if index < len(args):
                    value = args[index]
                elif name in kwargs:
                    value = kwargs[name]
                else:
                    continue  # left at its default
                if type(value) is fast or (value is None and none_ok):
                    continue
                if dims is None:
                    dims = {}
                spec.check(name, value, dims)
            return fn(*args, **kwargs)

        checked.unchecked = fn  # the body without the checks, for callers that checked already
        return checked
    return decorate
