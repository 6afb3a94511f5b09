"""Chapter 05, pipeline parallelism: partitions and schedules with their event simulation (``schedules``), zero-bubble
schedules (``zero_bubble``), what both simulations return (``timeline``: operation kinds, events, the result of a
step), Gantt charts (``plots``), the explorer, the ``torch.distributed.pipelining`` labs and the exercise checker.
"""
