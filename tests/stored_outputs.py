"""What a chapter's stored (executed) notebook printed, for tests that check a chapter's own real-engine run instead
of running the same lab a second time (docs/authoring.md: each lab and world size once).

Two checks then cover such a run: nbval re-executes the chapter and fails when a fresh run prints anything else
than what is stored, and the test reads what is stored and fails when it is wrong. So a chapter re-executed and
committed with a broken lab (its stored output then matches the fresh run) still fails ``make test``.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def stored_text(stem: str, marker: str, folder: str = "notebooks") -> str:
    """The text the stored ``<folder>/<stem>.ipynb`` shows below its one code cell whose source contains ``marker``:
    its stdout and the text/plain of its results, joined. Raises ``LookupError`` unless exactly one code cell has
    ``marker``, and when that cell shows no text (never run, or stored without outputs)."""
    nb = nbformat.read(ROOT / folder / f"{stem}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    if len(cells) != 1:
        raise LookupError(f"{folder}/{stem}.ipynb: {len(cells)} code cells contain {marker!r}, expected 1")
    parts = []
    for out in cells[0].outputs:
        if out.output_type == "stream" and out.name == "stdout":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
            parts.append(out.data["text/plain"] + "\n")
    text = "".join(parts)
    if not text.strip():
        raise LookupError(f"{folder}/{stem}.ipynb: the cell with {marker!r} shows no text")
    return text
