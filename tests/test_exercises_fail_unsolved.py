"""Every exercise, run as shipped (answers stripped), must fail its check: no check passes on an empty answer."""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from distlearn.course import ROOT

CHECK_CALL = re.compile(r"^\s*check\.ex\d\d_\w+\(", re.M)
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_unsolved_exercise_checks_fail(path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    check_cells = [c for c in nb.cells if c.cell_type == "code" and CHECK_CALL.search(c.source)]
    assert check_cells, f"{path.name} has no check cells"
    for cell in check_cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"{path.name}: this check passed on the unsolved exercise:\n{cell.source}"
        assert errors[0].ename == "CheckFailed", (
            f"{path.name}: the check should fail with CheckFailed, got {errors[0].ename}: {errors[0].evalue}")
