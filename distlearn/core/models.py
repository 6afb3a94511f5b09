"""Model configurations, exact parameter counts, and a readable decoder-only transformer for the meta device.

``PRESETS`` holds the published shapes of GPT-2, GPT-3 and Llama 2 / 3 / 3.1 models (dense: every layer has one
MLP); ``MOE_PRESETS`` holds mixture-of-experts models (Mixtral 8×7B, DeepSeek-V3), kept apart because chapters
01–09 and the planner assume dense layers. ``ModelConfig.num_parameters`` counts every trainable parameter from the
shapes alone (closed form); :func:`build_model` builds the same architecture as a real ``nn.Module`` (on the meta
device by default, so a 671B model costs no memory) and :func:`count_parameters` counts a module's parameters,
shared (tied) ones once. Tests check that the two agree and match the published totals (e.g. Llama 3 8B =
8,030,261,248; GPT-2 small = 124,439,808; Mixtral 8×7B = 46,702,792,704).

Mixture of experts (MoE, chapter 11): a layer ``i`` is an MoE layer when ``num_experts > 0``,
``i >= first_dense_layers`` and ``i % moe_layer_freq == 0`` (DeepSeek's ``first_k_dense_replace`` and
``moe_layer_freq``). Its FFN is a router (``num_experts × hidden_size``, no bias), ``num_experts`` routed SwiGLU
experts of width ``expert_ffn_hidden_size`` and ``num_shared_experts`` shared experts of the same width, which every
token uses. A token uses ``experts_per_token`` routed experts: :meth:`ModelConfig.active_parameters`.
Multi-head latent attention (MLA, DeepSeek-V2/V3) is described by :class:`MLA`; multi-token prediction modules
(DeepSeek-V3 §2.2) by ``num_mtp_modules``.

The modules (``TransformerLM``, ``Block``, ``Attention``, ``MLA`` attention, ``MLP``, ``MoE``, ``RMSNorm`` …) are
ordinary classes of :mod:`distlearn.core.transformer`, re-exported here lazily: importing this module does not import
torch.

Sources: GPT-2 (Radford et al. 2019, HF ``gpt2`` config), GPT-3 (Brown et al. 2020, Table 2.1), Llama 2 (Touvron et
al. 2023, HF ``config.json`` of meta-llama/Llama-2-*-hf), Llama 3 / 3.1 (Meta 2024, HF ``config.json``), Mixtral
8×7B (Jiang et al. 2024; HF ``config.json`` of mistralai/Mixtral-8x7B-v0.1), DeepSeek-V3 (DeepSeek-AI 2024; HF
``config.json`` and ``inference/configs/config_671B.json`` of deepseek-ai/DeepSeek-V3, ``README_WEIGHTS.md``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_record
from distlearn.core.guard import read_only

ARCHS = ("gpt", "llama")
ROUTERS = ("softmax", "sigmoid")


@dataclass(frozen=True)
class MLA:
    """Shapes of multi-head latent attention (DeepSeek-AI 2024, "DeepSeek-V2", §2.1; used again in DeepSeek-V3).

    Queries go through a low-rank bottleneck of ``q_lora_rank`` (``None``: one plain projection, as in
    DeepSeek-V2-Lite); keys and values share a compressed latent of ``kv_lora_rank`` per token (what the KV cache
    keeps) plus one rotary key of ``qk_rope_head_dim`` shared by all heads. Per head, a query and a key have
    ``qk_nope_head_dim + qk_rope_head_dim`` dimensions and a value ``v_head_dim``. Parameter names follow the HF
    ``modeling_deepseek.py``: ``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``, ``kv_a_proj_with_mqa``,
    ``kv_a_layernorm``, ``kv_b_proj``, ``o_proj``.
    """

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self):
        if self.q_lora_rank is not None:
            check_int("q_lora_rank", self.q_lora_rank, minimum=1)
        for field in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim"):
            check_int(field, getattr(self, field), minimum=1)
        check_int("qk_rope_head_dim", self.qk_rope_head_dim, minimum=0)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def parameters(self, hidden_size: int, num_heads: int) -> int:
        """Parameters of one MLA layer (no biases; the two RMSNorms of the latents have a weight each)."""
        h, n = hidden_size, num_heads
        if self.q_lora_rank is None:
            q = h * n * self.qk_head_dim
        else:
            q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * n * self.qk_head_dim
        kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
              + self.kv_lora_rank * n * (self.qk_nope_head_dim + self.v_head_dim))
        return q + kv + n * self.v_head_dim * h


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer.

    ``arch="gpt"``: learned positions, LayerNorm with bias, biased linears, GELU MLP of ``ffn_hidden_size``.
    ``arch="llama"``: rotary positions (no parameters), RMSNorm, no biases, SwiGLU MLP (three matrices), grouped
    query attention with ``num_kv_heads``. ``tied_embeddings``: the LM head reuses the embedding matrix.

    Mixture of experts (``arch="llama"`` only; see the module doc): ``num_experts`` routed experts (0 = dense),
    ``experts_per_token`` (k), ``num_shared_experts``, ``expert_ffn_hidden_size`` (default ``ffn_hidden_size``),
    ``first_dense_layers``, ``moe_layer_freq``, ``router`` (``"softmax"``: Mixtral, softmax → top-k → renormalize;
    ``"sigmoid"``: DeepSeek-V3, sigmoid affinities, top-k, normalize). ``mla``: multi-head latent attention instead
    of (grouped-query) attention. ``num_mtp_modules``: DeepSeek-V3's multi-token prediction modules, each one
    projection ``2h → h``, two RMSNorms, one more transformer block and its own final RMSNorm, sharing the
    embedding and the LM head with the main model. ``max_nodes_per_token``: node-limited routing, each token's
    routed experts on at most this many nodes (DeepSeek-V3 §2.1.2: M = 4; its config.json ``topk_group`` 4 of
    ``n_group`` 8), ``None`` = unrestricted; ignored by a dense model (the planner's expert all-to-all,
    :func:`distlearn.core.topology.dispatch_cost`).
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
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    expert_ffn_hidden_size: int | None = None
    first_dense_layers: int = 0
    moe_layer_freq: int = 1
    router: str = "softmax"
    mla: MLA | None = None
    num_mtp_modules: int = 0
    max_nodes_per_token: int | None = None

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
        self._check_moe()
        if self.mla is not None and not isinstance(self.mla, MLA):
            raise DistlearnValueError("mla", f"mla must be an MLA(...) or None, got {type(self.mla).__name__}.",
                                      f"mla 必须是 MLA(...) 或 None，收到 {type(self.mla).__name__}。")
        if self.mla is not None and self.arch != "llama":
            raise DistlearnValueError("mla", "MLA attention needs arch='llama' (RMSNorm, no biases).",
                                      "MLA 注意力需要 arch='llama'（RMSNorm，无偏置）。")
        check_int("num_mtp_modules", self.num_mtp_modules, minimum=0)

    def _check_moe(self):
        e = check_int("num_experts", self.num_experts, minimum=0)
        check_int("num_shared_experts", self.num_shared_experts, minimum=0)
        check_int("first_dense_layers", self.first_dense_layers, minimum=0, maximum=self.num_layers)
        check_int("moe_layer_freq", self.moe_layer_freq, minimum=1)
        check_choice("router", self.router, ROUTERS)
        if self.expert_ffn_hidden_size is not None:
            check_int("expert_ffn_hidden_size", self.expert_ffn_hidden_size, minimum=1)
        if self.max_nodes_per_token is not None:  # a dense model has no routing to limit: ignored there
            check_int("max_nodes_per_token", self.max_nodes_per_token, minimum=1)
        if e == 0:
            if self.experts_per_token or self.num_shared_experts:
                raise DistlearnValueError(
                    "num_experts", "experts_per_token and num_shared_experts need num_experts > 0 (an MoE model).",
                    "experts_per_token 和 num_shared_experts 需要 num_experts > 0（混合专家 (MoE) 模型）。")
            return
        if self.arch != "llama":
            raise DistlearnValueError("arch", "mixture-of-experts layers are built with arch='llama' (SwiGLU "
                                              "experts, no biases).",
                                      "混合专家 (MoE) 层使用 arch='llama'（SwiGLU 专家，无偏置）。")
        check_int("experts_per_token", self.experts_per_token, minimum=1, maximum=e)

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def expert_ffn(self) -> int:
        """Width of one routed (or shared) expert: ``expert_ffn_hidden_size``, default ``ffn_hidden_size``."""
        return self.ffn_hidden_size if self.expert_ffn_hidden_size is None else self.expert_ffn_hidden_size

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has an MoE FFN (else a dense MLP of ``ffn_hidden_size``)."""
        layer = check_int("layer", layer, minimum=0, maximum=self.num_layers - 1 + self.num_mtp_modules)
        return self.is_moe and layer >= self.first_dense_layers and layer % self.moe_layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        """How many of the ``num_layers`` main layers are MoE layers."""
        if not self.is_moe:
            return 0
        return sum(i >= self.first_dense_layers and i % self.moe_layer_freq == 0 for i in range(self.num_layers))

    # ---- exact counts (closed form), all in number of parameters
    def attention_parameters(self) -> int:
        """Q, K, V and output projections of one layer (with biases for GPT); MLA: see :meth:`MLA.parameters`."""
        if self.mla is not None:
            return self.mla.parameters(self.hidden_size, self.num_heads)
        h, kv_dim = self.hidden_size, self.kv_heads * self.head_dim
        weights = h * h + 2 * h * kv_dim + h * h
        return weights + ((h + 2 * kv_dim + h) if self.arch == "gpt" else 0)

    def mlp_parameters(self) -> int:
        """Dense MLP of one layer: GPT ``h→f→h`` with biases; Llama SwiGLU gate, up and down without biases."""
        h, f = self.hidden_size, self.ffn_hidden_size
        return 2 * h * f + f + h if self.arch == "gpt" else 3 * h * f

    def expert_parameters(self) -> int:
        """One routed or shared expert: a SwiGLU MLP of width :attr:`expert_ffn` (3·h·f_e)."""
        return 3 * self.hidden_size * self.expert_ffn

    def router_parameters(self) -> int:
        """The router of one MoE layer: a ``num_experts × hidden_size`` matrix, no bias. (DeepSeek-V3's selection
        bias is not trained by gradients: it is a buffer here, not a parameter; see :mod:`distlearn.experts.simulation`.)"""
        return self.num_experts * self.hidden_size

    def moe_parameters(self) -> int:
        """The FFN of one MoE layer: router + routed experts + shared experts."""
        return self.router_parameters() + (self.num_experts + self.num_shared_experts) * self.expert_parameters()

    def moe_active_parameters(self) -> int:
        """The part of one MoE FFN a token uses: router + k routed experts + the shared experts."""
        return self.router_parameters() + (self.experts_per_token + self.num_shared_experts) * self.expert_parameters()

    def norm_parameters(self) -> int:
        """One normalization layer: LayerNorm has weight and bias (2h), RMSNorm weight only (h)."""
        return 2 * self.hidden_size if self.arch == "gpt" else self.hidden_size

    def layer_parameters(self, layer: int | None = None) -> int:
        """One transformer block: attention + FFN (dense MLP or MoE) + two norms.

        ``layer`` (0-based) is needed when layers differ (an MoE model with dense layers); raises
        DistlearnValueError without it then."""
        if layer is None and not self.is_moe:
            return self.attention_parameters() + self.mlp_parameters() + 2 * self.norm_parameters()
        if layer is None:
            kinds = {self.is_moe_layer(i) for i in range(self.num_layers)}
            if len(kinds) > 1:
                raise DistlearnValueError(
                    "layer", f"{self.name} has dense and MoE layers: pass layer (0 … {self.num_layers - 1}).",
                    f"{self.name} 既有稠密层也有混合专家 (MoE) 层：请传入 layer（0 … {self.num_layers - 1}）。")
            moe = kinds.pop()
        else:
            moe = self.is_moe_layer(layer)
        ffn = self.moe_parameters() if moe else self.mlp_parameters()
        return self.attention_parameters() + ffn + 2 * self.norm_parameters()

    def embedding_parameters(self) -> int:
        """Token embedding (+ learned positions for GPT); the LM head is counted separately."""
        pos = self.max_seq_len * self.hidden_size if self.arch == "gpt" else 0
        return self.vocab_size * self.hidden_size + pos

    def lm_head_parameters(self) -> int:
        """0 when tied to the embedding, else vocab_size × hidden_size (no bias)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    def mtp_module_parameters(self) -> int:
        """One multi-token prediction module's own parameters (DeepSeek-V3 §2.2, Figure 3): RMSNorms of the
        hidden state and of the embedding (``hnorm``, ``enorm``), the projection ``eh_proj`` (2h → h), one more
        transformer block (layer index ``num_layers + m``) and its final RMSNorm (``shared_head.norm``). The
        embedding and the output head are the main model's (shared). 0 when ``num_mtp_modules`` is 0."""
        if not self.num_mtp_modules:
            return 0
        h = self.hidden_size
        return 3 * self.norm_parameters() + 2 * h * h + self.layer_parameters(self.num_layers)

    def main_parameters(self) -> int:
        """Parameters of the main model: embeddings, the ``num_layers`` blocks, the final norm and the LM head."""
        moe = self.num_moe_layers
        layers = (self.num_layers * (self.attention_parameters() + 2 * self.norm_parameters())
                  + moe * self.moe_parameters() + (self.num_layers - moe) * self.mlp_parameters())
        return self.embedding_parameters() + layers + self.norm_parameters() + self.lm_head_parameters()

    def num_parameters(self) -> int:
        """Exact number of trainable parameters Ψ (tied weights counted once): the main model plus any
        multi-token prediction modules (trained with it; their embedding and head are shared)."""
        mtp = self.num_mtp_modules * self.mtp_module_parameters() if self.num_mtp_modules else 0
        return self.main_parameters() + mtp

    def active_parameters(self, include_embedding: bool = True) -> int:
        """Parameters of the main model one token's forward pass uses: everything except the routed experts it
        was not sent to (k of ``num_experts`` per MoE layer). Equals :meth:`main_parameters` for a dense model.

        ``include_embedding``: count the whole input-embedding matrix (Mistral's convention for Mixtral's
        12.9 B); ``False`` leaves it out, since a token only reads one row of it (the convention that matches
        DeepSeek-V3's 37 B). The LM head, a real matrix product, is always counted."""
        inactive = self.num_moe_layers * (self.num_experts - self.experts_per_token) * self.expert_parameters()
        embedding = 0 if include_embedding else self.embedding_parameters()
        return self.main_parameters() - inactive - embedding

    def with_(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


PRESETS: dict[str, ModelConfig] = read_only({c.name: c for c in [
    ModelConfig("gpt2-small", "gpt", 50257, 768, 12, 12, 3072, 1024, tied_embeddings=True),
    ModelConfig("gpt2-xl", "gpt", 50257, 1600, 48, 25, 6400, 1024, tied_embeddings=True),
    ModelConfig("gpt3-175b", "gpt", 50257, 12288, 96, 96, 49152, 2048, tied_embeddings=True),
    ModelConfig("llama2-7b", "llama", 32000, 4096, 32, 32, 11008, 4096),
    ModelConfig("llama2-13b", "llama", 32000, 5120, 40, 40, 13824, 4096),
    ModelConfig("llama2-70b", "llama", 32000, 8192, 80, 64, 28672, 4096, num_kv_heads=8),
    ModelConfig("llama3-8b", "llama", 128256, 4096, 32, 32, 14336, 8192, num_kv_heads=8),
    ModelConfig("llama3-70b", "llama", 128256, 8192, 80, 64, 28672, 8192, num_kv_heads=8),
    ModelConfig("llama3.1-405b", "llama", 128256, 16384, 126, 128, 53248, 131072, num_kv_heads=8),
]})

# Mixture-of-experts presets, from the HF config.json of each model:
# - mistralai/Mixtral-8x7B-v0.1: hidden 4096, 32 layers, 32 heads / 8 KV heads, intermediate 14336,
#   num_local_experts 8, num_experts_per_tok 2, vocab 32000, tie_word_embeddings false, max positions 32768.
# - deepseek-ai/DeepSeek-V3: hidden 7168, 61 layers (first_k_dense_replace 3, moe_layer_freq 1), 128 heads, MLA
#   (q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128),
#   n_routed_experts 256, n_shared_experts 1, num_experts_per_tok 8, moe_intermediate_size 2048,
#   intermediate_size 18432 (dense layers), vocab 129280, untied, scoring_func sigmoid, num_nextn_predict_layers 1,
#   max positions 163840; n_group 8, topk_group 4: node-limited routing to at most 4 of the 8 nodes (report §2.1.2).
MOE_PRESETS: dict[str, ModelConfig] = read_only({c.name: c for c in [
    ModelConfig("mixtral-8x7b", "llama", 32000, 4096, 32, 32, 14336, 32768, num_kv_heads=8,
                num_experts=8, experts_per_token=2),
    ModelConfig("deepseek-v3", "llama", 129280, 7168, 61, 128, 18432, 163840,
                num_experts=256, experts_per_token=8, num_shared_experts=1, expert_ffn_hidden_size=2048,
                first_dense_layers=3, router="sigmoid", num_mtp_modules=1, max_nodes_per_token=4,
                mla=MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                        v_head_dim=128)),
]})


def get_preset(name: str) -> ModelConfig:
    """The dense preset called ``name``. Raises DistlearnValueError listing the known names."""
    return PRESETS[check_choice("model", name, tuple(PRESETS))]


def get_moe_preset(name: str) -> ModelConfig:
    """The mixture-of-experts preset called ``name`` (``MOE_PRESETS``). Raises DistlearnValueError otherwise."""
    return MOE_PRESETS[check_choice("model", name, tuple(MOE_PRESETS))]


# ---------------------------------------------------------------- real modules
def count_parameters(module) -> int:
    """Number of parameters of an ``nn.Module`` (any device, meta included); tied parameters counted once. Raises
    DistlearnValueError for anything that is not an ``nn.Module``."""
    import torch

    check_record("module", module, torch.nn.Module, "torch.nn.Linear(4, 4)")
    seen, total = set(), 0
    for p in module.parameters():  # nn.Module.parameters() already skips duplicates; ids keep us honest
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def build_model(config: ModelConfig, device: str = "meta"):
    """Build ``config`` as a :class:`~distlearn.core.transformer.TransformerLM` on ``device`` ("meta" allocates no
    memory)."""
    import torch

    from distlearn.core.transformer import TransformerLM

    try:
        torch.device(device)
        if torch.device(device).type not in ("meta", "cpu") and not torch.accelerator.is_available():
            raise RuntimeError("no accelerator")
    except (RuntimeError, TypeError) as e:
        raise DistlearnValueError("device", f"device must be 'meta', 'cpu' or an available accelerator, got {device!r} "
                                            f"({e}).",
                                  f"device 必须是 'meta'、'cpu' 或可用的加速器，收到 {device!r}（{e}）。") from None
    with torch.device(device):
        return TransformerLM(config)


# The torch modules live in distlearn.core.transformer (which imports torch) and are re-exported here lazily, so that
# ``from distlearn.core.models import TransformerLM`` works while ``import distlearn.core.models`` stays torch-free.
TORCH_MODULES = ("RMSNorm", "Attention", "MLAttention", "MLP", "GroupedExperts", "MoE", "MTPModule", "Block",
                 "TransformerLM")
__all__ = ["ARCHS", "ROUTERS", "MLA", "ModelConfig", "PRESETS", "MOE_PRESETS", "get_preset", "get_moe_preset",
           "count_parameters", "build_model", *TORCH_MODULES]


def __getattr__(name):
    if name in TORCH_MODULES:
        from distlearn.core import transformer

        return getattr(transformer, name)
    raise AttributeError(f"module 'distlearn.core.models' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(TORCH_MODULES))
