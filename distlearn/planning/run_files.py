"""Your own runs against the planner (issue 38: "runs kept private by the project's reviewers are met the same
way"): a JSON file in the format of :mod:`distlearn.planning.published_runs`, read by :func:`load_runs` and met by
:func:`~distlearn.planning.calibration.compare_run`, the same function and constants as every published run.
``python -m distlearn compare FILE.json [...]`` prints each run's ratio, under it one line per option of the run
that changes nothing in its prediction (:func:`~distlearn.planning.step_time.ineffective_options`: e.g.
``ddp_impl_local`` with pp > 1, where the gradient all-reduce is exposed anyway) and, for several runs, the same
summary as chapter 14's validation (share within ±10 %, median and worst |ratio − 1|, runs outside ±20 %).

A file holds one run (an object) or several (a list, or ``{"runs": [...]}``). A run's keys are those of
:func:`~distlearn.planning.calibration.check_run`, written as JSON:

- ``"name"``: a label for the printout (optional; default the file name and position);
- ``"model"``: a preset name (``"llama3-70b"``, ``"deepseek-v3"``), or ``{"preset": name, ...changes}``, or every
  field of :class:`~distlearn.core.models.ModelConfig` (``"mla"`` as an object of
  :class:`~distlearn.core.models.MLA`'s fields);
- ``"gpu"``: a preset name (``"h100-80gb"``) or ``{"preset": name, ...changes}`` (e.g. ``"network_bw": 25e9``,
  bytes/s per GPU per direction);
- ``"plan"``: the fields of :class:`~distlearn.planning.setting.Plan` (``"stage_layers"`` as a list);
- ``num_gpus``, ``global_batch``, ``seq_len``, ``precision``, ``count``, exactly one of ``published_flops``
  (FLOP/s per GPU), ``published_tokens_per_gpu`` (tokens/s per GPU) or ``published_step_seconds``, and optional
  ``options`` (e.g. ``{"tp_comm_overlap": true, "grad_sync": "per_microbatch"}``), ``source``, ``reading``.

``examples/private_run.json`` is a worked file (Megatron-LM's GPT-3 175B run, written out by hand).
Errors name the file, the run and the key, in the reader's language (DistlearnValueError).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from distlearn.core.cli import ArgumentParser, translate
from distlearn.core.hardware import GPUS
from distlearn.core.i18n import bi
from distlearn.core.models import MLA, MOE_PRESETS, PRESETS, ModelConfig
from distlearn.core.validate import DistlearnValueError, check_text, each, record
from distlearn.planning.calibration import (FIGURES, OVERLAP_OPTIONS, TOLERANCE, WIDE, check_run, compare_run,
                                          median_error)
from distlearn.planning.setting import Plan
from distlearn.planning.step_time import TIME_PARTS, IneffectiveOption, ineffective_options

DESCRIPTION_EN = "meet your own runs (a JSON file each) with the planner, as chapter 14 meets the published ones"
DESCRIPTION_ZH = "用规划器检验你自己的训练记录（JSON 文件），方法与第 14 章检验公开训练相同"
RUN_KEYS = frozenset(("name", "model", "gpu", "num_gpus", "global_batch", "seq_len", "precision", "count", "plan",
                      "options", "source", "source_zh", "reading", "reading_zh", "published_mfu",
                      "printed_step_seconds") + FIGURES)
"""The keys a run of a file may have (a misspelt one is an error, not ignored). ``published_mfu`` and
``printed_step_seconds`` are shown by the published table only; the ratio uses the one figure of ``FIGURES``."""


def _bad(where: str, key: str, en: str, zh: str) -> DistlearnValueError:
    return DistlearnValueError(key, f"{where}: {key}: {en}", f"{where}：{key}：{zh}")


def _with_changes(base, changes: dict, where: str, key: str):
    """``base.with_(**changes)`` (or dataclasses.replace), a wrong field named."""
    fields = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise _bad(where, key, f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}.",
                   f"未知字段 {'、'.join(unknown)}；可用字段：{'、'.join(sorted(fields))}。")
    return dataclasses.replace(base, **changes)


def _model(value, where: str) -> ModelConfig:
    presets = {**PRESETS, **MOE_PRESETS}
    if isinstance(value, str):
        if value not in presets:
            raise _bad(where, "model", f"unknown preset {value!r}; presets: {', '.join(presets)}.",
                       f"未知的预设 {value!r}；可用预设：{'、'.join(presets)}。")
        return presets[value]
    if not isinstance(value, dict):
        raise _bad(where, "model", "must be a preset name or an object.", "必须是预设名或一个对象。")
    if "preset" in value:
        changes = {k: v for k, v in value.items() if k != "preset"}
        return _with_changes(_model(value["preset"], where), changes, where, "model")
    fields = dict(value)
    if isinstance(fields.get("mla"), dict):
        fields["mla"] = MLA(**fields["mla"])
    try:
        return ModelConfig(**fields)
    except TypeError as exc:
        raise _bad(where, "model", f"not a ModelConfig ({exc}).", f"不是合法的 ModelConfig（{exc}）。") from None


def _gpu(value, where: str):
    if isinstance(value, str):
        if value not in GPUS:
            raise _bad(where, "gpu", f"unknown preset {value!r}; presets: {', '.join(GPUS)}.",
                       f"未知的预设 {value!r}；可用预设：{'、'.join(GPUS)}。")
        return value
    if not isinstance(value, dict) or "preset" not in value:
        raise _bad(where, "gpu", "must be a preset name or {\"preset\": name, ...changes}.",
                   "必须是预设名，或 {\"preset\": 名称, ...要改的字段}。")
    base = GPUS.get(value["preset"])
    if base is None:
        raise _bad(where, "gpu", f"unknown preset {value['preset']!r}; presets: {', '.join(GPUS)}.",
                   f"未知的预设 {value['preset']!r}；可用预设：{'、'.join(GPUS)}。")
    return _with_changes(base, {k: v for k, v in value.items() if k != "preset"}, where, "gpu")


def _plan(value, where: str) -> Plan:
    if not isinstance(value, dict):
        raise _bad(where, "plan", "must be an object of Plan's fields (dp, tp, pp, ...).",
                   "必须是由 Plan 字段（dp、tp、pp 等）组成的对象。")
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    known = {f.name for f in dataclasses.fields(Plan)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise _bad(where, "plan", f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}.",
                   f"未知字段 {'、'.join(unknown)}；可用字段：{'、'.join(sorted(known))}。")
    return Plan(**fields)


def run_from_json(obj, where: str = "run") -> dict:
    """One run of a file (a JSON object, already parsed) in the published format, checked
    (:func:`~distlearn.planning.calibration.check_run`). ``where`` names it in errors. Raises DistlearnValueError."""
    where = check_text("where", where)
    if not isinstance(obj, dict):
        raise _bad(where, "run", f"must be a JSON object; got {type(obj).__name__}.",
                   f"必须是 JSON 对象；收到 {type(obj).__name__}。")
    unknown = sorted(set(obj) - RUN_KEYS)
    if unknown:
        raise _bad(where, "run", f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(RUN_KEYS))}.",
                   f"未知的键 {'、'.join(unknown)}；可用的键：{'、'.join(sorted(RUN_KEYS))}。")
    run = {k: v for k, v in obj.items() if k != "name"}
    for key, convert in (("model", _model), ("gpu", _gpu), ("plan", _plan)):
        if key in run:
            run[key] = convert(run[key], where)
    try:
        return check_run(run)
    except DistlearnValueError as exc:
        raise DistlearnValueError(exc.param, f"{where}: {exc.en}", f"{where}：{exc.zh}") from None


def load_runs(path: str) -> dict[str, dict]:
    """``{name: run}`` of the JSON file at ``path`` (one run, a list of runs, or ``{"runs": [...]}``), each run
    checked by :func:`run_from_json`. Raises DistlearnValueError for a missing file, invalid JSON or a bad run."""
    path = check_text("path", path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise DistlearnValueError("path", f"cannot read {path}: {exc.strerror or exc}.",
                                  f"无法读取 {path}：{exc.strerror or exc}。") from None
    except json.JSONDecodeError as exc:
        raise DistlearnValueError("path", f"{path} is not valid JSON: line {exc.lineno}, column {exc.colno}: "
                                          f"{exc.msg}.",
                                  f"{path} 不是合法的 JSON：第 {exc.lineno} 行第 {exc.colno} 列（{exc.msg}）。") from None
    items = data["runs"] if isinstance(data, dict) and "runs" in data else data
    items = items if isinstance(items, list) else [items]
    base = os.path.basename(path)
    runs = {}
    for i, obj in enumerate(items):
        name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else f"{base}[{i}]"
        if name in runs:
            raise _bad(f"{base}: {name}", "name", "two runs have this name; give each run its own.",
                       "有两次运行用了这个名字；请给每次运行起不同的名字。")
        runs[name] = run_from_json(obj, f"{base}: {name}")
    return runs


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """The validation statistics of chapter 14 over a set of runs: ``count``, ``share_within`` (|ratio − 1| ≤
    :data:`~distlearn.planning.calibration.TOLERANCE`), ``median_error`` and ``worst_error`` of |ratio − 1|,
    ``outside_wide``: names beyond :data:`~distlearn.planning.calibration.WIDE`."""

    count: int
    share_within: float
    median_error: float
    worst_error: float
    outside_wide: tuple


def summarize(ratios: dict[str, float]) -> RunSummary:
    """:class:`RunSummary` of ``{name: ratio}`` (predicted / published), as
    :func:`~distlearn.planning.calibration.validation_report` computes it. Raises DistlearnValueError for an empty
    mapping or a ratio that is not a finite number > 0."""
    if not isinstance(ratios, dict):
        raise DistlearnValueError("ratios", f"ratios must be a dict {{name: ratio}}; got {type(ratios).__name__}.",
                                  f"ratios 必须是字典 {{名称：比值}}；收到 {type(ratios).__name__}。")
    median = median_error(list(ratios.values()))  # (checks the ratios)
    errors = sorted(abs(x - 1) for x in ratios.values())
    k = len(errors)
    return RunSummary(k, sum(e <= TOLERANCE for e in errors) / k, median, errors[-1],
                      tuple(n for n, x in ratios.items() if abs(x - 1) > WIDE))


def _option_name(option: str) -> str:
    """The file's name of a setting option (an :class:`~distlearn.planning.setting.Overlap` field under its
    source flag's name of :data:`~distlearn.planning.calibration.OVERLAP_OPTIONS`, ``grad_sync`` itself)."""
    return next((key for key, field in OVERLAP_OPTIONS.items() if field == option), option)


def _report(name: str, r: dict, ineffective: list[IneffectiveOption] = ()) -> str:
    """Two lines on one run, each language on its own (the step's terms by :data:`TIME_PARTS`' names), and one line
    per option of the run that changes nothing in its prediction (issue 38 audit:
    :func:`~distlearn.planning.step_time.ineffective_options`), named as the file writes it."""
    est = r["estimate"]
    shown = [t for t in TIME_PARTS if est.time.get(t)]
    terms_en = " · ".join(f"{TIME_PARTS[t][0]} {est.time[t]:.3g}" for t in shown)
    terms_zh = " · ".join(f"{TIME_PARTS[t][1]} {est.time[t]:.3g}" for t in shown)
    pred, pub, ratio, total = r["predicted_flops"] / 1e12, r["published_flops"] / 1e12, r["ratio"], est.time["total"]
    verdict_en, verdict_zh = ("within ±10 %", "在 ±10 % 内") if r["within"] else ("outside ±10 %", "超出 ±10 %")
    fits_en, fits_zh = ("", "") if r["fits"] else (" · does not fit in memory", " · 显存放不下")
    notes = [(f"{_option_name(x.option)} = {json.dumps(x.value).strip(chr(34))}", x) for x in ineffective]
    return bi(f"{name}: predicted {pred:.1f} TFLOP/s per GPU, published {pub:.1f}; ratio {ratio:.3f} "
              f"({verdict_en}){fits_en}\n  step {total:.3g} s: {terms_en}"
              + "".join(f"\n  {label} changes nothing here: {x.why_en}" for label, x in notes),
              f"{name}：预测每块 GPU {pred:.1f} TFLOP/s，公布值 {pub:.1f}；比值 {ratio:.3f}（{verdict_zh}）{fits_zh}\n"
              f"  每步 {total:.3g} 秒：{terms_zh}"
              + "".join(f"\n  {label} 在这里不影响预测：{x.why_zh}" for label, x in notes), sep="\n")


def parser() -> ArgumentParser:
    """The ``compare`` command's argument parser, in the reader's language."""
    ap = ArgumentParser(prog="python -m distlearn compare", description=bi(f"{DESCRIPTION_EN}.",
                                                                           f"{DESCRIPTION_ZH}。", sep="\n"))
    ap.add_argument("files", nargs="+", metavar="FILE.json",
                    help=bi("runs in the published format (see examples/private_run.json)",
                            "公开训练格式的运行记录（见 examples/private_run.json）"))
    return ap


def cli(argv: list[str]) -> int:
    """``python -m distlearn compare examples/private_run.json``: each run's ratio predicted / published, its
    step-time terms and a note on each of its options that changes nothing; for two runs or more, chapter 14's summary. Returns 0, 2 on a bad file (the message on stderr
    in the reader's language)."""
    each(record(str, "'run.json'"), min_len=0, max_len=1000).check("argv", argv, {})
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code or 0
    try:
        runs = {}
        for path in args.files:
            for name, run in load_runs(path).items():
                # the same name in two files: both kept, each named by its file
                runs[name if name not in runs else f"{os.path.basename(path)}: {name}"] = run
        results = {name: compare_run(run) for name, run in runs.items()}
        ineffective = {name: ineffective_options(results[name]["setting"], run["plan"]) for name, run in runs.items()}
    except DistlearnValueError as exc:
        print(translate("%(prog)s: error: %(message)s\n") % {"prog": "python -m distlearn compare", "message": exc},
              file=sys.stderr, end="")
        return 2
    for name, r in results.items():
        print(_report(name, r, ineffective[name]))
    if len(results) > 1:
        s = summarize({n: r["ratio"] for n, r in results.items()})
        print(bi(f"{s.count} runs: {s.share_within:.0%} within ±10 %, median |ratio − 1| {s.median_error:.1%}, worst "
                 f"{s.worst_error:.1%}; outside ±20 %: {', '.join(s.outside_wide) or 'none'}",
                 f"{s.count} 次运行：{s.share_within:.0%} 在 ±10 % 内，|比值 − 1| 中位数 {s.median_error:.1%}，最大 "
                 f"{s.worst_error:.1%}；超出 ±20 %：{'、'.join(s.outside_wide) or '无'}", sep="\n"))
    return 0
