"""Chapter 02, collectives: the explorer, the real gloo lab and the exercise checker. The simulated collectives and
their α-β costs live in :mod:`distlearn.core.comm` and :mod:`distlearn.core.cost`, since every later chapter uses
them.
"""
