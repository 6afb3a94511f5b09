"""Chapter 15, after pre-training: generation's own arithmetic (``generation``: the KV cache, prefill and decode on
the roofline, tensor / pipeline / expert parallelism for a generator), a real KV cache (``kv_cache``), one model in
two layouts (``resharding``: FSDP shards to tensor-parallel shards, closed forms; ``lab_reshard``: the same on real
gloo processes with DTensor), the RL step's timeline in two placements (``rl_timeline``), a real RL loop with a
trainer and a generator process (``lab_rl``), their figures (``plots``, ``plots_rl``), the explorer and the exercise
checkers (``check``).
"""
