"""distlearn: the helper package of a bilingual (English / 中文) course on scaling deep-learning training.

One folder per topic a chapter teaches, over a small shared ``core``. ``CHAPTER_FOLDERS`` and ``SHARED_FOLDERS``
below are the same map as code::

    core/               language, validation, launch, simulated cluster and collectives, cost model, hardware,
                        models and the transformer, shared plotting, the checker and explorer frameworks (ch. 00)
    memory/             01  where the memory goes           precision/   number formats, loss and FP8 scaling (01, 08)
    collectives/        02  collectives                     data_parallel/      03  data parallelism
    tensor_parallel/    04  tensor parallelism              pipeline_parallel/  05  pipeline parallelism
    zero_fsdp/          06  ZeRO and FSDP                   overlap_prefetch/   07  overlap and prefetch
    activation_memory/  08  activation memory               deepspeed_fsdp/     09  DeepSpeed next to FSDP
    context_parallel/   10  context parallelism             experts/            11  mixture of experts
    nd_parallel/        12  N-D parallelism                 fault_tolerance/    13  when GPUs fail
    planning/           14  planning a run                  post_training/      15  post-training and generation
    seeds/       the seed snippets, reproduced

Inside a topic folder, the same names mean the same job everywhere: ``explorer.py`` (the chapter's widget: a pure
``compute`` plus its view), ``plots.py`` (its figures), ``lab.py`` / ``lab_<name>.py`` (real-engine workers for
:func:`distlearn.core.launch.run`, also runnable with torchrun), ``check.py`` (the exercise checkers, ``exNN_<name>``);
the other modules are the topic's reference, simulation and formulas, named for what they model (``schedules``,
``simulation``, ``formulas``, ``traffic`` …). The authoring tools (notebook pairing and execution, exercises, parity,
monolingual copies, bilingual code comments, the language audit, mutation tests, the website, grading) are the
separate top-level package ``authoring``, which no chapter imports.
"""
from distlearn.core.guard import read_only
from distlearn.core.i18n import get_language, normalize_language, set_language
from distlearn.core.language import switch as language_switch

__version__ = "0.1.0"

#: chapter number -> the folder of ``distlearn`` that holds its code, explorer, labs and exercise checker
CHAPTER_FOLDERS = read_only({
    "00": "core", "01": "memory", "02": "collectives", "03": "data_parallel", "04": "tensor_parallel",
    "05": "pipeline_parallel", "06": "zero_fsdp", "07": "overlap_prefetch", "08": "activation_memory",
    "09": "deepspeed_fsdp", "10": "context_parallel", "11": "experts", "12": "nd_parallel", "13": "fault_tolerance",
    "14": "planning", "15": "post_training",
})

#: topic folders next to the chapter folders that more than one chapter teaches -> those chapters' numbers
SHARED_FOLDERS = read_only({"precision": ("01", "08")})

__all__ = ["set_language", "get_language", "normalize_language", "language_switch", "CHAPTER_FOLDERS",
           "SHARED_FOLDERS", "__version__"]

from distlearn.core import guard as _guard  # noqa: E402

_guard.install()  # last: a student cannot rebind the course's UPPER_CASE constants (distlearn.core.guard)
