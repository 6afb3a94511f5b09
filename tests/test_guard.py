"""A student cannot rebind the course's constants (issue 33, distlearn.core.guard): ``F.PRECISIONS = {...}`` or
``dp.MAX_WORLD_SIZE = 0`` at the top of a notebook is refused with a bilingual error that names the constant and shows
how to make one's own copy, so every later check and explorer still reads the course's values.

These tests do not use pytest's ``monkeypatch``: tests/conftest.py lifts the guard while it is in use."""
import importlib
import pkgutil
import types

import pytest

import distlearn
from distlearn.core import guard, validate
from distlearn.core.guard import ConstantRebindError
from distlearn.core.validate import DistlearnValueError
from distlearn.data_parallel import simulation as dp
from distlearn.memory import check as ch01
from distlearn.memory import explorer as memory_explorer
from distlearn.memory import formulas as F
from distlearn.memory.formulas import bytes_per_param
from tests.i18n_helpers import language


def right(precision, optimizer):
    return bytes_per_param(precision, optimizer)["total"]


def test_rebinding_a_table_is_refused_in_both_languages_and_later_checks_and_explorers_still_work(capsys):
    before = dict(F.PRECISIONS)
    with language("en"), pytest.raises(ConstantRebindError) as en:
        F.PRECISIONS = {p: (0, 0, 0) for p in before}
    assert str(en.value) == ("distlearn.memory.formulas.PRECISIONS is a course constant: later checks and explorers "
                             "read it, so it cannot be rebound. Make your own copy and change that: "
                             "my = dict(formulas.PRECISIONS)")
    with language("zh"), pytest.raises(ConstantRebindError) as zh:
        F.PRECISIONS = {p: (0, 0, 0) for p in before}
    assert str(zh.value) == ("distlearn.memory.formulas.PRECISIONS 是课程常量：后面的检查和探索器都会读取它，"
                             "因此不能重新赋值。请复制一份，修改自己的副本：my = dict(formulas.PRECISIONS)")
    assert isinstance(zh.value, DistlearnValueError) and zh.value.param == "distlearn.memory.formulas.PRECISIONS"
    assert dict(F.PRECISIONS) == before

    with language("en"):
        ch01.ex01_bytes_per_param(right)     # a later check still passes the right answer …
        assert "✓ ex01_bytes_per_param: all 7 hidden cases pass" in capsys.readouterr().out
        result = memory_explorer.compute(model="custom", custom_billions=1, precision="mixed", dp=1)
    assert result["total"] == 16e9          # … and an explorer still counts 16 bytes per parameter (mixed + Adam)


def test_a_limit_cannot_be_rebound_or_deleted():
    with pytest.raises(ConstantRebindError, match="MAX_WORLD_SIZE"):
        validate.MAX_WORLD_SIZE = 0
    with pytest.raises(ConstantRebindError, match="cannot be deleted"):
        del validate.MAX_ELEMENTS
    with pytest.raises(ConstantRebindError):
        setattr(dp, sorted(dp.__constants__)[0], None)
    assert validate.MAX_WORLD_SIZE == 2 ** 20 and validate.MAX_ELEMENTS == 2 ** 26
    with pytest.raises(DistlearnValueError):   # the limit still holds
        validate.check_int("world_size", 2 ** 21, maximum=validate.MAX_WORLD_SIZE)


def test_read_only_tables_refuse_item_assignment():
    for table in (F.PRECISIONS, F.OPTIMIZERS, memory_explorer.PRECISIONS):
        key = next(iter(table))
        with pytest.raises(TypeError):
            table[key] = 0
        with pytest.raises(TypeError):
            del table[key]
        assert not hasattr(table, "clear") and not hasattr(table, "update")


def test_every_distlearn_module_is_guarded_and_its_own_names_still_work():
    """Every module (the package, the ones loaded before the guard, the ones loaded after) refuses; lower-case
    names and new names stay free, and reading is unchanged."""
    for info in pkgutil.walk_packages(distlearn.__path__, "distlearn."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        assert isinstance(module, guard.GuardedModule), info.name
    assert isinstance(distlearn, guard.GuardedModule) and isinstance(validate, guard.GuardedModule)
    with pytest.raises(ConstantRebindError):
        distlearn.CHAPTER_FOLDERS = {}
    F.my_note = 1                            # not a constant
    F.MY_OWN = 2                             # a new name: nothing reads it
    del F.my_note, F.MY_OWN
    assert type(F).__mro__[1] is types.ModuleType


def test_the_tests_escape_hatch_lifts_the_guard_only_inside_its_block():
    old = validate.MAX_STEPS
    with guard.rebinding_allowed():
        validate.MAX_STEPS = 7
        assert validate.MAX_STEPS == 7
        validate.MAX_STEPS = old
    with pytest.raises(ConstantRebindError):
        validate.MAX_STEPS = 7
    assert validate.MAX_STEPS == old
