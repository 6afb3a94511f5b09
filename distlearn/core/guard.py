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

Tables that must not change in place either are read-only mappings (``types.MappingProxyType``, e.g.
:data:`distlearn.memory.formulas.PRECISIONS`): item assignment raises TypeError. The exercise checkers also restore
every UPPER_CASE table after each case (:class:`distlearn.core.sandbox._Tables`).

For tests only: :func:`rebinding_allowed` lifts the guard for a block (``tests/conftest.py`` wraps pytest's
``monkeypatch`` fixture in it, so tests that patch a constant keep working and undo their patch).
"""
from __future__ import annotations

import contextlib
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
    names its code defined (kept in its ``__constants__``; a name a student adds later stays theirs)."""
    if type(module) is types.ModuleType:
        module.__constants__ = frozenset(n for n in vars(module) if _CONSTANT.match(n))
        module.__class__ = GuardedModule


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
