"""Chapter 07, overlap and prefetch: forward/backward timelines with prefetching (``timeline``), the explorer and the
exercise checker. The real FSDP2 issue-order lab is :mod:`distlearn.zero_fsdp.lab`.
"""
