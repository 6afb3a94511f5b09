"""``make mutants`` (authoring/mutants.py, issue 32): the list of mutants stays runnable as the code changes, and the
runner really tells a killed mutant from a survivor."""
from __future__ import annotations

from pathlib import Path

from authoring import mutants as M


def test_the_mutant_list_is_sound():
    """Every original fragment occurs exactly once in its module, every module has a test selection of existing
    files, and the list covers the simulation and calculator modules (≥ 100 mutants in ≥ 20 modules)."""
    mutants, selections = M.load()
    assert not M.problems(mutants, selections), "\n".join(M.problems(mutants, selections))
    assert len(mutants) >= 100 and len({m.module for m in mutants}) >= 20
    assert len({(m.module, m.original) for m in mutants}) == len(mutants)   # no mutant listed twice
    assert all(m.description for m in mutants)


def test_a_fragment_that_moved_is_reported(tmp_path):
    (tmp_path / "distlearn").mkdir()
    (tmp_path / "distlearn" / "x.py").write_text("a = 1\na = 1\n")
    twice = M.Mutant("distlearn/x.py", "a = 1", "a = 2", "twice")
    gone = M.Mutant("distlearn/x.py", "b = 1", "b = 2", "gone")
    found = M.problems([twice, gone], {"distlearn/x.py": ["tests/nope.py"]}, root=tmp_path)
    assert any("2 times" in p for p in found) and any("0 times" in p for p in found)
    assert any("no test file tests/nope.py" in p for p in found)


def test_the_runner_kills_a_real_mistake_and_keeps_the_original(tmp_path):
    """One real mutant (GiB = 1e9) against its tests: killed; the same file unchanged: survives. The working tree
    is never touched (the runner edits a private copy)."""
    root = Path(M.ROOT)
    module = "distlearn/memory/formulas.py"
    before = (root / module).read_text(encoding="utf-8")
    wrong = M.Mutant(module, "GiB = 2 ** 30", "GiB = 10 ** 9", "GiB = 1e9")
    same = M.Mutant(module, "GiB = 2 ** 30", "GiB = 2 ** 30 ", "unchanged")
    selection = {module: ["tests/test_issue32_a.py::test_to_gib_divides_by_2_to_the_30"]}
    outcomes = M.run([wrong, same], selection, jobs=1, timeout=120, log=lambda *_: None)
    assert [o.how for o in outcomes] == ["failed", "survived"]
    assert (root / module).read_text(encoding="utf-8") == before
    text, rate = M.report(outcomes, 1.0)
    assert rate == 0.5 and "GiB = 1e9" not in text.split("survivors")[0] and "unchanged" in text
