"""Chapter 13, when GPUs fail: MTBF, the Young/Daly interval and goodput (``goodput``), exact resumption (``resume``),
the explorer, the distributed-checkpoint lab and the exercise checker.
"""
