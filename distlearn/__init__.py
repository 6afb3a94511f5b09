"""distlearn: the helper package of a bilingual (English / 中文) course on scaling deep-learning training.

Modules, one per concept: ``models`` (configs, exact parameter counts), ``memory`` (model-state and activation
bytes), ``comm`` (virtual cluster and collectives), ``launch`` (real torch.distributed workers), ``check``
(exercise checkers), ``course`` (notebook tooling), ``i18n`` (bilingual text). Widgets live in
``distlearn.widgets``, real-engine labs in ``distlearn.labs``.
"""
from .i18n import get_language, normalize_language, set_language
from .language import switch as language_switch

__version__ = "0.1.0"
__all__ = ["set_language", "get_language", "normalize_language", "language_switch", "__version__"]
