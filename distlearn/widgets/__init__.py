"""One explorer per chapter. Each module ``distlearn.widgets.<name>`` exposes:

- ``compute(**values) -> dict``: pure, fast, tested; never raises for values the controls can reach (an invalid
  combination returns ``{"error": <bilingual message>}``);
- ``controls() -> dict[str, ipywidgets.Widget]``: the controls, keyed by ``compute``'s parameter names;
- ``render(result) -> None``: prints and plots a result (called inside the explorer's output area);
- ``explorer() -> ipywidgets.Widget``: ``base.build(...)`` over the three.
"""
