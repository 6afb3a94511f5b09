"""Chapter 05, pipeline parallelism: partitions and schedules with their event simulation (``schedules``), zero-bubble
schedules (``zero_bubble``), Gantt charts (``plots``), the explorer, the ``torch.distributed.pipelining`` labs and
the exercise checker.
"""
