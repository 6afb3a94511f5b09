"""Chapter 01, where the memory goes: model-state and activation bytes (``formulas``), measured on real PyTorch
(``measure``), the memory explorer, the library-recipes lab and the exercise checker.
"""
