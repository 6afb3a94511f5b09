"""Chapter 15, after pre-training: generation's own arithmetic (``generation``: the KV cache, prefill and decode on
the roofline, tensor / pipeline / expert parallelism for a generator), a real KV cache (``kv_cache``), one model in
two layouts (``resharding``: FSDP shards to tensor-parallel shards, closed forms; ``lab_reshard``: the same on real
gloo processes with DTensor), the figures and the exercise checker. The RL parts (the step timeline, colocated or
disaggregated placement, a real RL loop) live in the ``rl_*`` modules.
"""
