"""Chapter 12, N-D parallelism: device meshes, groups and per-rank memory of DP × TP × PP × CP layouts
(``simulation``), plots, the explorer, the 8-process lab and the exercise checker.
"""
