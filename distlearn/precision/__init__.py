"""Number formats and low precision (chapters 01 and 08): float formats and rounding (``formats``), loss scaling and
FP8 scaling (``scaling``), FP8 training recipes (``fp8_recipes``) and their explorers.
"""
