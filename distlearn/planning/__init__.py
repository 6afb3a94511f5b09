"""Plan a training run (chapter 14): search DP × TP × CP × PP × ZeRO × recomputation × micro-batching (and evaluate
EP and FP8 plans) for plans that fit, and rank them.

The package is split by job; everything public is re-exported here, so ``from distlearn import planner`` then
``planner.search(...)``, ``planner.evaluate(...)``, ``planner.Plan(...)`` work as before:

- :mod:`~distlearn.planning.flops` — FLOPs of a forward pass and a step, the model's counts per layer
  (:class:`ModelCounts`), the peak a recipe's matrix multiplies run at.
- :mod:`~distlearn.planning.setting` — :class:`Plan`, :class:`Setting` (what does not depend on the plan, and the
  memo tables many plans share), the stated constants, :func:`make_setting`.
- :mod:`~distlearn.planning.memory` — bytes per GPU of a plan's worst stage (:func:`plan_memory`), the ZeRO paper's
  largest model (:func:`zero_max_params`).
- :mod:`~distlearn.planning.step_time` — seconds per step (:func:`plan_time`): compute, communication, pipeline
  bubble and schedule costs, and the run options that change nothing for a plan (:func:`ineffective_options`).
  Collective times come from :mod:`distlearn.core.cost`.
- :mod:`~distlearn.planning.kernels` — the time of one layer kernel by kernel (GEMM rooflines, attention,
  memory-bound work).
- :mod:`~distlearn.planning.evaluation` — :func:`evaluate`, the public entry point that validates one plan once,
  and its :class:`Estimate`.
- :mod:`~distlearn.planning.plan_search` — enumerate the valid plans, keep those that fit, rank them;
  :func:`search`, and :func:`suggest_fix` when none fits.
- :mod:`~distlearn.planning.published_runs` — the published runs, each read as its source writes it (Megatron-LM,
  BLOOM, Llama 3, DeepSeek-V3, MegaScale, Megatron-Core, Nemotron-4, torchtitan), with sources and readings.
- :mod:`~distlearn.planning.calibration` — the runs that fix END_TO_END (:func:`calibrate`), every other run out of
  sample (:func:`validation_report`), :func:`compare_run` for any run in that format, :func:`deepseek_steps`.
- :mod:`~distlearn.planning.published` — :func:`compare_published`, :func:`published_table`, the Llama 3 memory
  readings.
- :mod:`~distlearn.planning.rooflines` — when each kind of parallelism hides its communication.
- :mod:`~distlearn.planning.command_line` — the table (:func:`format_table`) and ``python -m distlearn plan``
  (:func:`cli`).
"""
from distlearn.planning.command_line import (HEADER, HEADER_ZH, RECOMPUTE_ZH, WIDTHS, cli, display_width, format_table, parser, positive_int, table_legend)
from distlearn.planning.evaluation import Estimate, evaluate, validate_plan
from distlearn.planning.flops import (PLANNER_PRECISIONS, ModelCounts, compute_peak, forward_flops, matmul_params_per_layer, measured_flops, megatron_flops, step_flops)
from distlearn.planning.memory import plan_memory, stage_peak_layers, zero_max_params
from distlearn.planning.setting import ALPHA, COMPUTE_EFFICIENCY, FRAGMENTATION, RESERVE_BYTES, Plan, Setting, make_setting
from distlearn.planning.step_time import bubble_fraction, bubble_ratio, ineffective_options, kernel_stage_parts, plan_time
from distlearn.planning import kernels
from distlearn.planning.kernels import END_TO_END, FLASH_SHARE, GEMM_CEILING
from distlearn.planning.plan_search import (MAX_CHUNKS, MAX_CP, MAX_MICRO_BATCH, MIN_CP_TOKENS, Group, SearchResult, any_plan_fits, balanced_stages, candidate_groups, candidate_plans, no_layout_message, search, suggest_fix)
from distlearn.planning.calibration import (CALIBRATION_RUNS, ValidationReport, calibrate, check_run, compare_run, deepseek_steps, validation_report, with_end_to_end)
from distlearn.planning.published import (BLOOM_176B, GPT3_175B_MEGATRON, GPT_1T_MEGATRON, KNOWN_MISSES, LLAMA3_405B_STAGES, PUBLISHED_RUNS, TOLERANCE, compare_published, published_table, LLAMA3_RUNS, memory_readings, run_reading, run_source)

__all__ = [
    "ALPHA", "COMPUTE_EFFICIENCY", "PLANNER_PRECISIONS", "FRAGMENTATION", "RESERVE_BYTES", "MAX_CHUNKS", "MAX_MICRO_BATCH", "MAX_CP",
    "MIN_CP_TOKENS", "balanced_stages",
    "Plan", "Estimate", "Setting", "ModelCounts", "SearchResult", "Group",
    "bubble_fraction", "bubble_ratio", "compute_peak", "forward_flops", "step_flops", "measured_flops",
    "megatron_flops", "matmul_params_per_layer", "zero_max_params", "make_setting", "plan_memory", "plan_time", "stage_peak_layers",
    "ineffective_options",
    "evaluate", "validate_plan", "kernel_stage_parts", "kernels", "END_TO_END", "GEMM_CEILING", "FLASH_SHARE",
    "candidate_groups", "candidate_plans", "search", "any_plan_fits", "suggest_fix", "no_layout_message",
    "GPT3_175B_MEGATRON", "GPT_1T_MEGATRON", "BLOOM_176B", "PUBLISHED_RUNS", "KNOWN_MISSES", "TOLERANCE",
    "LLAMA3_405B_STAGES", "compare_published", "published_table", "LLAMA3_RUNS", "memory_readings",
    "run_source", "run_reading", "CALIBRATION_RUNS", "ValidationReport", "calibrate", "check_run", "compare_run",
    "deepseek_steps", "validation_report", "with_end_to_end",
    "HEADER", "HEADER_ZH", "RECOMPUTE_ZH", "WIDTHS", "display_width", "format_table", "table_legend", "parser", "positive_int",
    "cli",
]
