"""Chapter 03, data parallelism: sharding, weighted reduction, sampler padding, sync BatchNorm and bucketing
(``simulation``), the explorer, the real DDP lab and the exercise checker.
"""
