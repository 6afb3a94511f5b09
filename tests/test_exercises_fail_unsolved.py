"""Every exercise, run as shipped (answers stripped), must fail its check: no check passes on an empty answer.

All exercise notebooks run in one kernel, one after the other, each after ``%reset -f`` (nothing a notebook defined
is left for the next one): a kernel that imports torch and the course costs about 1.8 s of CPU to start."""
import re

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.util import run_sync

from authoring.paths import ROOT

CHECK_CALL = re.compile(r"^\s*check\.ex\d\d_\w+\(", re.M)
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
RESET = "%reset -f"


@pytest.fixture(scope="module")
def kernel():
    km = AsyncKernelManager(kernel_name="python3")
    run_sync(km.start_kernel)(cwd=str(ROOT / "exercises"))
    yield km
    run_sync(km.shutdown_kernel)(now=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_unsolved_exercise_checks_fail(path, kernel):
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(RESET))
    NotebookClient(nb, km=kernel, timeout=300, allow_errors=True).execute()
    assert not [o for o in nb.cells[0].outputs if o.output_type == "error"], nb.cells[0].outputs
    check_cells = [c for c in nb.cells if c.cell_type == "code" and CHECK_CALL.search(c.source)]
    assert check_cells, f"{path.name} has no check cells"
    for cell in check_cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"{path.name}: this check passed on the unsolved exercise:\n{cell.source}"
        assert errors[0].ename == "CheckFailed", (
            f"{path.name}: the check should fail with CheckFailed, got {errors[0].ename}: {errors[0].evalue}")


def test_reset_leaves_nothing_for_the_next_notebook(kernel):
    """What the shared kernel relies on: a name one notebook defined is gone for the next."""
    first = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("answer = 42")])
    NotebookClient(first, km=kernel, timeout=60).execute()
    second = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RESET),
                                             nbformat.v4.new_code_cell("print('answer' in dir())")])
    NotebookClient(second, km=kernel, timeout=60).execute()
    assert second.cells[1].outputs[0].text.strip() == "False"
