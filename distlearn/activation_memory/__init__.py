"""Chapter 08, activation memory: per-layer activation bytes, recomputation and offload (``formulas``), saved bytes
measured with autograd hooks (``measure``), plots, the explorer and the exercise checker.
"""
