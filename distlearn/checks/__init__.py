"""Per-chapter exercise checkers (``chNN.py``), found by :mod:`distlearn.check`."""
