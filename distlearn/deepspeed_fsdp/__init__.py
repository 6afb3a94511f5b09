"""Chapter 09, DeepSpeed next to FSDP: the sourced comparison, ZeRO config generation and DeepSpeed's own estimators
(``deepspeed``), the estimator explorer, the real ZeRO 1/2/3 lab (``lab``, with ``lab_preload`` for the forkserver)
and the exercise checker.
"""
