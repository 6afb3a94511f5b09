"""Model configurations, exact parameter counts, and a readable decoder-only transformer for the meta device.

``PRESETS`` holds the published shapes of GPT-2, GPT-3 and Llama 2 / 3 / 3.1 models. ``ModelConfig.num_parameters``
counts every trainable parameter from the shapes alone (closed form); :func:`build_model` builds the same
architecture as a real ``nn.Module`` (on the meta device by default, so a 405B model costs no memory) and
:func:`count_parameters` counts a module's parameters, shared (tied) ones once. Tests check that the two agree
and match the published totals (e.g. Llama 3 8B = 8,030,261,248; GPT-2 small = 124,439,808).

The modules (``TransformerLM``, ``Block``, ``Attention``, ``MLP``, ``RMSNorm``) are ordinary classes of
:mod:`distlearn.transformer`, re-exported here lazily: importing this module does not import torch.

Sources: GPT-2 (Radford et al. 2019, HF ``gpt2`` config), GPT-3 (Brown et al. 2020, Table 2.1), Llama 2 (Touvron et
al. 2023, HF ``config.json`` of meta-llama/Llama-2-*-hf), Llama 3 / 3.1 (Meta 2024, HF ``config.json``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .validate import DistlearnValueError, check_choice, check_int

ARCHS = ("gpt", "llama")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer.

    ``arch="gpt"``: learned positions, LayerNorm with bias, biased linears, GELU MLP of ``ffn_hidden_size``.
    ``arch="llama"``: rotary positions (no parameters), RMSNorm, no biases, SwiGLU MLP (three matrices), grouped
    query attention with ``num_kv_heads``. ``tied_embeddings``: the LM head reuses the embedding matrix.
    """

    name: str
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    ffn_hidden_size: int
    max_seq_len: int
    num_kv_heads: int | None = None
    tied_embeddings: bool = False

    def __post_init__(self):
        check_choice("arch", self.arch, ARCHS)
        for field in ("vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_hidden_size", "max_seq_len"):
            check_int(field, getattr(self, field), minimum=1)
        kv = self.kv_heads
        check_int("num_kv_heads", kv, minimum=1, maximum=self.num_heads)
        if self.hidden_size % self.num_heads:
            raise DistlearnValueError(
                "num_heads", f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}.",
                f"hidden_size {self.hidden_size} 必须能被 num_heads {self.num_heads} 整除。")
        if self.num_heads % kv:
            raise DistlearnValueError(
                "num_kv_heads", f"num_heads {self.num_heads} must be divisible by num_kv_heads {kv}.",
                f"num_heads {self.num_heads} 必须能被 num_kv_heads {kv} 整除。")

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    # ---- exact counts (closed form), all in number of parameters
    def attention_parameters(self) -> int:
        """Q, K, V and output projections of one layer (with biases for GPT)."""
        h, kv_dim = self.hidden_size, self.kv_heads * self.head_dim
        weights = h * h + 2 * h * kv_dim + h * h
        return weights + ((h + 2 * kv_dim + h) if self.arch == "gpt" else 0)

    def mlp_parameters(self) -> int:
        """MLP of one layer: GPT ``h→f→h`` with biases; Llama SwiGLU gate, up and down without biases."""
        h, f = self.hidden_size, self.ffn_hidden_size
        return 2 * h * f + f + h if self.arch == "gpt" else 3 * h * f

    def norm_parameters(self) -> int:
        """One normalization layer: LayerNorm has weight and bias (2h), RMSNorm weight only (h)."""
        return 2 * self.hidden_size if self.arch == "gpt" else self.hidden_size

    def layer_parameters(self) -> int:
        """One transformer block: attention + MLP + two norms."""
        return self.attention_parameters() + self.mlp_parameters() + 2 * self.norm_parameters()

    def embedding_parameters(self) -> int:
        """Token embedding (+ learned positions for GPT); the LM head is counted separately."""
        pos = self.max_seq_len * self.hidden_size if self.arch == "gpt" else 0
        return self.vocab_size * self.hidden_size + pos

    def lm_head_parameters(self) -> int:
        """0 when tied to the embedding, else vocab_size × hidden_size (no bias)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    def num_parameters(self) -> int:
        """Exact number of trainable parameters Ψ (tied weights counted once)."""
        return (self.embedding_parameters() + self.num_layers * self.layer_parameters()
                + self.norm_parameters() + self.lm_head_parameters())

    def with_(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


PRESETS: dict[str, ModelConfig] = {c.name: c for c in [
    ModelConfig("gpt2-small", "gpt", 50257, 768, 12, 12, 3072, 1024, tied_embeddings=True),
    ModelConfig("gpt2-xl", "gpt", 50257, 1600, 48, 25, 6400, 1024, tied_embeddings=True),
    ModelConfig("gpt3-175b", "gpt", 50257, 12288, 96, 96, 49152, 2048, tied_embeddings=True),
    ModelConfig("llama2-7b", "llama", 32000, 4096, 32, 32, 11008, 4096),
    ModelConfig("llama2-13b", "llama", 32000, 5120, 40, 40, 13824, 4096),
    ModelConfig("llama2-70b", "llama", 32000, 8192, 80, 64, 28672, 4096, num_kv_heads=8),
    ModelConfig("llama3-8b", "llama", 128256, 4096, 32, 32, 14336, 8192, num_kv_heads=8),
    ModelConfig("llama3-70b", "llama", 128256, 8192, 80, 64, 28672, 8192, num_kv_heads=8),
    ModelConfig("llama3.1-405b", "llama", 128256, 16384, 126, 128, 53248, 131072, num_kv_heads=8),
]}


def get_preset(name: str) -> ModelConfig:
    """The preset called ``name``. Raises DistlearnValueError listing the known names."""
    return PRESETS[check_choice("model", name, tuple(PRESETS))]


# ---------------------------------------------------------------- real modules
def count_parameters(module) -> int:
    """Number of parameters of an ``nn.Module`` (any device, meta included); tied parameters counted once."""
    seen, total = set(), 0
    for p in module.parameters():  # nn.Module.parameters() already skips duplicates; ids keep us honest
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def build_model(config: ModelConfig, device: str = "meta"):
    """Build ``config`` as a :class:`~distlearn.transformer.TransformerLM` on ``device`` ("meta" allocates no
    memory)."""
    import torch

    from .transformer import TransformerLM

    with torch.device(device):
        return TransformerLM(config)


# The torch modules live in distlearn.transformer (which imports torch) and are re-exported here lazily, so that
# ``from distlearn.models import TransformerLM`` works while ``import distlearn.models`` stays torch-free.
TORCH_MODULES = ("RMSNorm", "Attention", "MLP", "Block", "TransformerLM")
__all__ = ["ARCHS", "ModelConfig", "PRESETS", "get_preset", "count_parameters", "build_model", *TORCH_MODULES]


def __getattr__(name):
    if name in TORCH_MODULES:
        from . import transformer

        return getattr(transformer, name)
    raise AttributeError(f"module 'distlearn.models' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(TORCH_MODULES))
