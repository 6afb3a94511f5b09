"""One explorer per chapter. Each module ``distlearn.widgets.<name>`` exposes:

- ``compute(**values) -> dict``: pure, fast, tested; never raises for values the controls can reach (an invalid
  combination returns ``{"error": <bilingual message>}``);
- ``controls() -> dict[str, ipywidgets.Widget]``: the controls, keyed by ``compute``'s parameter names;
- ``render(result) -> None``: prints and plots a result (called inside the explorer's output area);
- ``explorer() -> ipywidgets.Widget``: ``base.build(...)`` over the three.

A cell that reads a ``compute`` result wraps it in :func:`checked` (``r = checked(memory.compute(...))``): an
invalid setting then raises its bilingual message instead of a bare ``KeyError`` on the next line.
"""
from .base import SettingsError, checked  # noqa: F401
