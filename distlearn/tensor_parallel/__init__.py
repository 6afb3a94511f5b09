"""Chapter 04, tensor parallelism: column/row-parallel layers, the Megatron MLP and attention split, sequence
parallelism (``simulation``), the explorer, the DTensor lab and the checker.
"""
