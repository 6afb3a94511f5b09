"""Chapter 10, context parallelism: ring and all-to-all (Ulysses) attention with load balancing (``simulation``),
packed sequences with document masks (``packed``), plots, the explorer, the hand-written ring-attention lab, the GPU
check of PyTorch's own ``context_parallel`` and the exercise checker.
"""
