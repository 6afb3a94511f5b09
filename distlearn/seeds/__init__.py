"""The seed snippets the course corrects, reproduced faithfully so each chapter can show the mistake and the fix side
by side. Every seed reproduction lives here, none in a topic folder (seeds import topics, never the reverse):

- ``functions``: the seed's memory and model functions (chapters 01, 06: ``seed_memory_calculator``,
  ``seed_calc_memory``, ``seed_analyze_memory`` …);
- ``models``: its ``LargeLM`` and transformer block as ``torch.nn`` modules (chapter 01);
- ``planning``: its ``memory_calculator`` table and the correction (chapter 14);
- ``parallelism``: its data-, tensor- and pipeline-parallel simulations and its FSDP and prefetch classes
  (chapters 03–07);
- ``activations``: its activation-memory arithmetic and the 8-row grid (chapter 08).
"""
