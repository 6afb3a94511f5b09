"""Chapter 11, mixture of experts: routing, capacity and expert-parallel all-to-all (``simulation``), plots, the
explorer, the real all-to-all lab and the exercise checker. The MoE layer itself is :mod:`distlearn.core.moe`, part
of the shared transformer.
"""
