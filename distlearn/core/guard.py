"""The course's constants cannot be rebound from outside their module (issue 33).

A student who types ``F.PRECISIONS = {...}`` or ``dp.MAX_WORLD_SIZE = 0`` at the top of a notebook would otherwise
change what every later check and explorer reads, until the kernel restarts. Every module of :mod:`distlearn` is
therefore a :class:`GuardedModule`: assigning or deleting one of its UPPER_CASE names (``PRECISIONS``,
``MAX_WORLD_SIZE``; not ``_PRIVATE`` ones) from outside raises :class:`ConstantRebindError`, a bilingual error that
names the constant and shows how to make one's own copy. The module's own code is unaffected (a ``global``
statement writes the module's dictionary directly), and so is reading.

:func:`install` (called first thing by ``distlearn/__init__.py``) puts a finder on :data:`sys.meta_path` that loads
every ``distlearn.*`` module with :class:`_GuardedLoader` (an ordinary source loader that switches the module's class
once its code has run) and switches the modules already loaded.

Tables cannot change in place either: every public UPPER_CASE dict or list of :mod:`distlearn` is made with
:func:`read_only` (``PRESETS = read_only({...})``), a :class:`ReadOnlyDict` or :class:`ReadOnlyList` (nested dicts,
lists and tuples too; a numpy array loses its ``writeable`` flag). ``PRESETS["x"] = ...``, ``PRESETS.clear()``,
``LAYERS.append(...)`` raise :class:`ConstantMutationError`, a bilingual error that names the table (the name
:func:`guard` gave it) and shows how to make one's own copy (``my = dict(models.PRESETS)``). Reading, iteration,
``in``, ``len``, ``.items()``, ``dict(...)``, ``json.dumps``, equality with a plain dict or list and pickling (labs send
tables to worker processes; the copy stays read-only) work as for a plain dict or list; ``.copy()``, ``dict(t)``,
``list(t)``, ``copy.copy(t)``, ``copy.deepcopy(t)`` (all the way down), ``t | {...}`` and ``t + [...]`` give a plain,
changeable one. ``tests/test_guard.py`` fails when a public UPPER_CASE
table is left changeable. The exercise checkers also restore every UPPER_CASE table after each case
(:class:`distlearn.core.sandbox._Tables`).

For tests only: :func:`rebinding_allowed` lifts the guard for a block (``tests/conftest.py`` wraps pytest's
``monkeypatch`` fixture in it, so tests that patch a constant keep working and undo their patch).
"""
from __future__ import annotations

import contextlib
import copy
import importlib.abc
import importlib.machinery
import re
import sys
import types

from distlearn.core.validate import DistlearnValueError

_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*\Z")  # PRECISIONS, MAX_WORLD_SIZE, T; not _ALIASES, not Plan
_unlocked = 0  # > 0 inside rebinding_allowed()


class ConstantRebindError(DistlearnValueError, AttributeError):
    """Raised on ``module.CONSTANT = value`` or ``del module.CONSTANT`` for a module of :mod:`distlearn`.
    ``.param`` is the constant's full name (``distlearn.memory.formulas.PRECISIONS``)."""


def _copy_hint(module_name: str, name: str, value) -> str:
    """How to make one's own copy of ``value``: ``my = dict(formulas.PRECISIONS)`` and the like."""
    import collections.abc

    short = f"{module_name.rsplit('.', 1)[-1]}.{name}"
    if isinstance(value, collections.abc.Mapping):
        return f"my = dict({short})"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"my = list({short})"
    if type(value).__module__ == "numpy":
        return f"my = {short}.copy()"
    return f"my = {short}"


def _refuse(module: types.ModuleType, name: str, deleting: bool):
    full = f"{module.__name__}.{name}"
    hint = _copy_hint(module.__name__, name, vars(module).get(name))
    what_en = "deleted" if deleting else "rebound"
    what_zh = "删除" if deleting else "重新赋值"
    raise ConstantRebindError(
        full,
        f"{full} is a course constant: later checks and explorers read it, so it cannot be {what_en}. "
        f"Make your own copy and change that: {hint}",
        f"{full} 是课程常量：后面的检查和探索器都会读取它，因此不能{what_zh}。"
        f"请复制一份，修改自己的副本：{hint}",
    )


class ConstantMutationError(DistlearnValueError, TypeError):
    """Raised on changing a course table in place (``PRESETS["x"] = ...``, ``PRESETS.clear()``,
    ``LAYERS.append(...)``). ``.param`` is the table's full name (``distlearn.core.models.PRESETS``)."""


_UNNAMED = "this course table"  # a table guard() has not named (its module loaded outside the guard)


def _refuse_change(table, *args, **kwargs):
    """Raise :class:`ConstantMutationError` for ``table`` (every mutating method of :class:`ReadOnlyDict` and
    :class:`ReadOnlyList`)."""
    full = table._name or _UNNAMED
    base, bracket, rest = (table._name or "table").partition("[")
    short = ".".join(base.rsplit(".", 2)[-2:]) + bracket + rest  # models.PRESETS, published.RUNS['x']
    hint = f"my = {'dict' if isinstance(table, dict) else 'list'}({short})"
    raise ConstantMutationError(
        full,
        f"{full} is a course table: later checks and explorers read it, so it cannot be changed in place. "
        f"Make your own copy and change that: {hint}",
        f"{full} 是课程的数据表：后面的检查和探索器都会读取它，因此不能原地修改。"
        f"请复制一份，修改自己的副本：{hint}",
    )


class ReadOnlyDict(dict):
    """A dict that refuses every change in place with :class:`ConstantMutationError` (see the module's docstring).
    ``ReadOnlyDict(mapping, name)``; ``name`` (``distlearn.core.models.PRESETS``) is what the error names.
    A ``dict`` subclass, so ``isinstance(t, dict)``, ``json.dumps`` and printing (``{...}``) work as before."""

    __slots__ = ("_name",)

    def __init__(self, mapping=(), name: str | None = None):
        super().__init__(mapping)
        self._name = name

    def __reduce__(self):  # pickle: rebuilt in one call, never item by item
        return (type(self), (dict(self), self._name))

    def __copy__(self) -> dict:  # copy.copy gives one's own, changeable copy
        return dict(self)

    def __deepcopy__(self, memo) -> dict:  # copy.deepcopy too, all the way down
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse_change


class ReadOnlyList(list):
    """A list that refuses every change in place with :class:`ConstantMutationError` (see the module's docstring).
    ``ReadOnlyList(items, name)``. A ``list`` subclass, so ``isinstance(t, list)``, ``json.dumps`` and printing
    (``[...]``) work as before."""

    __slots__ = ("_name",)

    def __init__(self, items=(), name: str | None = None):
        super().__init__(items)
        self._name = name

    def __reduce__(self):  # pickle: rebuilt in one call, never item by item
        return (type(self), (list(self), self._name))

    def __copy__(self) -> list:  # copy.copy gives one's own, changeable copy
        return list(self)

    def __deepcopy__(self, memo) -> list:  # copy.deepcopy too, all the way down
        return [copy.deepcopy(v, memo) for v in self]

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse_change
    __iadd__ = __imul__ = _refuse_change


def read_only(value):
    """``value`` with every dict and list in it (through dicts, lists and plain tuples) made a :class:`ReadOnlyDict`
    or :class:`ReadOnlyList`, and every numpy array made unwriteable; other values as they are. For a module's public
    UPPER_CASE tables: ``PRESETS = read_only({...})``."""
    if isinstance(value, (ReadOnlyDict, ReadOnlyList)):
        return value
    if isinstance(value, dict):
        return ReadOnlyDict({k: read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return ReadOnlyList(read_only(v) for v in value)
    if type(value) is tuple:
        return tuple(read_only(v) for v in value)
    if type(value).__module__ == "numpy" and hasattr(value, "flags"):
        value.flags.writeable = False
    return value


def _name_tables(value, name: str) -> None:
    """Give the read-only tables in ``value`` that have no name yet their name: ``name`` itself, ``name['key']``
    or ``name[0]`` for those nested in it."""
    if isinstance(value, (ReadOnlyDict, ReadOnlyList)):
        if value._name is not None:
            return
        value._name = name
    if isinstance(value, dict):
        for k, v in value.items():
            _name_tables(v, f"{name}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _name_tables(v, f"{name}[{i}]")


class GuardedModule(types.ModuleType):
    """A module whose UPPER_CASE names (those in its ``__constants__``) cannot be rebound or deleted from
    outside (see the module's docstring)."""

    __slots__ = ()

    def __setattr__(self, name: str, value) -> None:
        if not _unlocked and name in vars(self).get("__constants__", ()):
            _refuse(self, name, deleting=False)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if not _unlocked and name in vars(self).get("__constants__", ()):
            _refuse(self, name, deleting=True)
        super().__delattr__(name)


@contextlib.contextmanager
def rebinding_allowed():
    """For tests only: lift the guard inside the ``with`` block (pytest's ``monkeypatch`` in ``tests/conftest.py``).
    Never used by the course itself."""
    global _unlocked
    _unlocked += 1
    try:
        yield
    finally:
        _unlocked -= 1


def guard(module: types.ModuleType) -> None:
    """Make ``module`` (a plain module of :mod:`distlearn`) a :class:`GuardedModule` that guards the UPPER_CASE
    names its code defined (kept in its ``__constants__``; a name a student adds later stays theirs), and name its
read-only tables for their error message (the module that defines a table is guarded before any other imports it)."""
    if type(module) is types.ModuleType:
        module.__constants__ = frozenset(n for n in vars(module) if _CONSTANT.match(n))
        module.__class__ = GuardedModule
        for n in sorted(module.__constants__):
            _name_tables(vars(module)[n], f"{module.__name__}.{n}")


class _GuardedLoader(importlib.machinery.SourceFileLoader):
    """A source loader that guards the module once its code has run."""

    def exec_module(self, module: types.ModuleType) -> None:
        super().exec_module(module)
        guard(module)


class _GuardingFinder(importlib.abc.MetaPathFinder):
    """Finds ``distlearn.*`` modules as the path finder does and loads them with :class:`_GuardedLoader`."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("distlearn."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _GuardedLoader(spec.loader.name, spec.loader.path)
        return spec


def install() -> None:
    """Guard every ``distlearn`` module: those already loaded now, the others as they load. Idempotent."""
    if not any(isinstance(f, _GuardingFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardingFinder())
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "distlearn" or name.startswith("distlearn.")):
            guard(module)
