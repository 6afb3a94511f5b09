"""A student cannot rebind the course's constants (issue 33, distlearn.core.guard): ``F.PRECISIONS = {...}`` or
``dp.MAX_WORLD_SIZE = 0`` at the top of a notebook is refused with a bilingual error that names the constant and shows
how to make one's own copy, so every later check and explorer still reads the course's values.

These tests do not use pytest's ``monkeypatch``: tests/conftest.py lifts the guard while it is in use."""
import copy
import importlib
import pkgutil
import types

import pytest

import distlearn
from distlearn.core import guard, validate
from distlearn.core.guard import ConstantMutationError, ConstantRebindError
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


# ====================================================================== tables cannot change in place either
# What must stay an ordinary, changeable table, and why (every other public UPPER_CASE table is read-only).
MUTABLE_ON_PURPOSE = {
    # filled by i18n.text() as each module loads (and by the tests' own texts): a registry, not a course table
    "distlearn.core.i18n.REGISTRY",
}

_FOUND = []  # every module's own public tables: (full name, table), filled by _course_modules()


def _course_modules():
    """Every module of distlearn, the package itself included (``__main__`` left out: importing it runs the CLI)."""
    modules = [distlearn]
    for info in pkgutil.walk_packages(distlearn.__path__, "distlearn."):
        if not info.name.endswith("__main__"):
            modules.append(importlib.import_module(info.name))
    return modules


def _changeable(value, where: str, depth: int = 0):
    """The places in ``value`` (through dicts, lists and tuples) that can be changed in place: a plain dict, list,
    set, bytearray or ``MappingProxyType`` (its TypeError is in English only) or a writeable numpy array."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return [where] if value.flags.writeable else []
    if isinstance(value, (set, bytearray, types.MappingProxyType)) or type(value) in (dict, list):
        return [where]
    found = []
    if isinstance(value, (dict, list, tuple)) and depth < 8:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            found += _changeable(v, f"{where}[{k!r}]", depth + 1)
    return found


def changeable_tables(modules) -> list[str]:
    """Every public UPPER_CASE constant of ``modules`` (own or imported) that holds a table that can be changed in
    place, by its full name, less :data:`MUTABLE_ON_PURPOSE`."""
    found = []
    for module in modules:
        for name, value in vars(module).items():
            full = f"{module.__name__}.{name}"
            if guard._CONSTANT.match(name) and not isinstance(value, type) and full not in MUTABLE_ON_PURPOSE:
                found += _changeable(value, full)
    return found


def course_tables():
    """(full name, table) for every read-only table a module of distlearn defines itself (named after it)."""
    if not _FOUND:
        for module in _course_modules():
            for name, value in vars(module).items():
                full = f"{module.__name__}.{name}"
                if isinstance(value, (guard.ReadOnlyDict, guard.ReadOnlyList)) and value._name == full:
                    _FOUND.append((full, value))
    return _FOUND


def test_no_public_table_of_distlearn_can_be_changed_in_place():
    """A new ``TABLE = {...}`` without read_only(...) fails here (the allow-list above is the only way out)."""
    assert changeable_tables(_course_modules()) == []
    assert len(course_tables()) > 110   # 121 when written: the scan does reach the course's tables


def test_the_scan_finds_a_changeable_table():
    """The scan above can fail: a module with a plain dict, a list inside a tuple, a set, a MappingProxyType or a
    writeable array is reported, a read-only one is not."""
    import numpy as np

    fake = types.ModuleType("distlearn.fake")
    fake.PLAIN, fake.NESTED, fake.SET = {"a": 1}, (1, [2]), {3}
    fake.PROXY, fake.ARRAY = types.MappingProxyType({}), np.zeros(2)
    fake.FROZEN, fake.private = guard.read_only({"a": [1], "b": (2, {"c": 3})}), {}
    fake.FROZEN_ARRAY = guard.read_only(np.zeros(2))
    assert changeable_tables([fake]) == ["distlearn.fake.PLAIN", "distlearn.fake.NESTED[1]", "distlearn.fake.SET",
                                         "distlearn.fake.PROXY", "distlearn.fake.ARRAY"]


def _changes(table):
    """Every way to change ``table`` in place, as (what, function)."""
    first = next(iter(table)) if len(table) else 0
    if isinstance(table, dict):
        return [("t[k] = v", lambda: table.__setitem__(first, 0)), ("del t[k]", lambda: table.__delitem__(first)),
                ("clear", table.clear), ("pop", lambda: table.pop(first)), ("popitem", table.popitem),
                ("setdefault", lambda: table.setdefault("new", 0)), ("update", lambda: table.update(new=0)),
                ("|=", lambda: table.__ior__({"new": 0}))]
    return [("t[0] = v", lambda: table.__setitem__(0, None)), ("del t[0]", lambda: table.__delitem__(0)),
            ("append", lambda: table.append(0)), ("extend", lambda: table.extend([0])),
            ("insert", lambda: table.insert(0, 0)), ("pop", table.pop), ("remove", lambda: table.remove(first)),
            ("clear", table.clear), ("sort", table.sort), ("reverse", table.reverse),
            ("+=", lambda: table.__iadd__([0])), ("*=", lambda: table.__imul__(2))]


def test_every_course_table_refuses_every_change_in_place_and_stays_as_it_was():
    for full, table in course_tables():
        before = copy.deepcopy(table)
        for what, change in _changes(table):
            with language("en"), pytest.raises(ConstantMutationError) as error:
                change()
            assert error.value.param == full and str(error.value).startswith(f"{full} is a course table"), what
        assert table == before and type(table) in (guard.ReadOnlyDict, guard.ReadOnlyList), full


def test_changing_a_table_is_refused_in_both_languages_with_how_to_copy_it():
    from distlearn.core import hardware, models

    h100, fp32 = hardware.GPUS["h100-80gb"], F.PRECISIONS["fp32"]
    with language("en"), pytest.raises(ConstantMutationError) as en:
        hardware.GPUS["h100-80gb"] = hardware.GPUS["a100-80gb"]
    assert str(en.value) == ("distlearn.core.hardware.GPUS is a course table: later checks and explorers read it, so "
                             "it cannot be changed in place. Make your own copy and change that: "
                             "my = dict(hardware.GPUS)")
    with language("zh"), pytest.raises(ConstantMutationError) as zh:
        models.PRESETS.clear()
    assert str(zh.value) == ("distlearn.core.models.PRESETS 是课程的数据表：后面的检查和探索器都会读取它，因此不能原地"
                             "修改。请复制一份，修改自己的副本：my = dict(models.PRESETS)")
    with language("both"), pytest.raises(ConstantMutationError) as both:
        F.PRECISIONS["fp32"] = (0, 0, 0)   # once a MappingProxyType, whose TypeError was English only
    assert str(both.value).splitlines()[1].startswith("distlearn.memory.formulas.PRECISIONS 是课程的数据表")
    assert isinstance(both.value, TypeError) and isinstance(both.value, DistlearnValueError)
    assert hardware.get_gpu("h100-80gb") == h100 and len(models.PRESETS) == 9 and F.PRECISIONS["fp32"] == fp32

    from distlearn.planning import PUBLISHED_RUNS
    from distlearn.data_parallel import plots
    with language("en"), pytest.raises(ConstantMutationError) as nested:   # a table inside a table
        next(iter(PUBLISHED_RUNS.values()))["gpus"] = 1
    assert f"my = dict(published_runs.PUBLISHED_RUNS[{next(iter(PUBLISHED_RUNS))!r}])" in str(nested.value)
    with language("en"), pytest.raises(ConstantMutationError, match=r"my = list\(plots.LAYERS\)"):
        plots.LAYERS.append("extra")
    from distlearn.data_parallel import explorer
    with pytest.raises(ValueError, match="read-only"):   # numpy's own refusal for an array
        explorer.DATA[0, 0] = 1.0


def test_reading_copying_and_pickling_a_table_work_as_for_a_plain_one():
    import json
    import pickle

    from distlearn.core import models

    presets = models.PRESETS
    plain = {name: config for name, config in presets.items()}
    assert len(presets) == 9 and "llama3-8b" in presets and list(presets) == list(plain)
    assert presets == plain and dict(presets) == plain and {**presets} == plain and presets["llama3-8b"].name
    assert isinstance(presets, dict) and repr(presets) == repr(plain)
    assert json.loads(json.dumps(F.PRECISIONS)) == {k: list(v) for k, v in F.PRECISIONS.items()}
    for table in (presets, F.PRECISIONS, distlearn.CHAPTER_FOLDERS):
        back = pickle.loads(pickle.dumps(table))   # what a lab sends to a worker process stays read-only
        assert back == table and type(back) is type(table) and back._name == table._name
        with pytest.raises(ConstantMutationError):
            back.clear()
    mine = [dict(presets), presets.copy(), copy.copy(presets), copy.deepcopy(presets), presets | {}]
    for own in mine:                               # one's own copy is a plain, changeable dict
        assert type(own) is dict and own == plain
        own["mine"] = None
    from distlearn.data_parallel import plots
    layers = plots.LAYERS
    assert type(layers + ["x"]) is list and type(layers[:2]) is list and type(list(layers)) is list
    deep = copy.deepcopy(next(iter(__import__("distlearn.planning", fromlist=["x"]).PUBLISHED_RUNS.values())))
    assert type(deep) is dict and all(type(v) not in (guard.ReadOnlyDict, guard.ReadOnlyList) for v in deep.values())
    assert "h100-80gb" not in mine[0] or presets == plain   # the course's table is untouched


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


def test_an_answer_that_changes_a_table_fails_every_time_and_later_checks_still_pass(capsys):
    """In a checker: the change is refused inside the student's code (a ✗ case naming the table), the same answer
    fails again on a second run, and the right answer passes afterwards."""
    from distlearn.core.check import CheckFailed

    def clears(precision, optimizer):
        F.OPTIMIZERS.clear()
        return 0

    before = dict(F.OPTIMIZERS)
    for _ in range(2):
        with language("en"), pytest.raises(CheckFailed):
            ch01.ex01_bytes_per_param(clears)
        out = capsys.readouterr().out
        assert "raised ConstantMutationError: distlearn.memory.formulas.OPTIMIZERS is a course table" in out
    assert F.OPTIMIZERS == before
    with language("en"):
        ch01.ex01_bytes_per_param(right)
    assert "✓ ex01_bytes_per_param: all 7 hidden cases pass" in capsys.readouterr().out
