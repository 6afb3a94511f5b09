"""Helpers the tests share for the course's language (distlearn.core.i18n)."""
from __future__ import annotations

import contextlib

from distlearn.core import i18n


@contextlib.contextmanager
def language(lang):
    """Run the block with the course language ``lang`` ("en", "zh" or "both"), then put the old one back."""
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        yield
    finally:
        i18n.set_language(old)


def boxes_overlap(a, b, tol: float = 0.5) -> bool:
    """Whether two display-space boxes (matplotlib ``Bbox``, in pixels) share more than ``tol`` pixels each way
    (``tol=0``: any area at all; boxes that only touch do not overlap)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def overlapping_labels(texts, tol: float = 0.5) -> list[tuple[str, str]]:
    """The pairs of labels (matplotlib ``Text`` objects of one figure, already drawn) whose boxes overlap, by their
    text: [] when every label has room in the reader's language."""
    if not texts:
        return []
    renderer = texts[0].figure.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
            if boxes_overlap(box_a, box_b, tol)]
