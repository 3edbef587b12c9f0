"""One adapter per supported family: Gemma 3 (the reference), Gemma 2, Llama, Mistral, Qwen2, Qwen3, Phi-3,
SmolLM3. Each states only what differs from the base (workers/arch/base.py); the per-family notes say
what the family's KV holds and how positions enter it, as transformers 5.23 implements it.
"""

from __future__ import annotations

from typing import Any

from galahad.flywheel.errors import GalahadError
from galahad.workers.arch.base import Architecture, LayerSpec


class Gemma3(Architecture):
    """Gemma 3 text: `layer_types` alternate sliding (window `sliding_window`) and full layers; two RoPE
    tables (`sliding_attention_inv_freq`, `full_attention_inv_freq`, one theta each); grouped KV heads,
    q/k norms, optional attention/final soft-capping. The reference layout: its fingerprints predate the
    adapter layer, so it adds no runtime facts."""

    name = "gemma3"
    model_types = ("gemma3_text",)
    fingerprinted = False

    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        return self._typed_layers(config, {"sliding_attention": "sliding_attention",
                                           "full_attention": "full_attention"})

    def inv_freq(self, model: Any, table: str):
        return getattr(model.model.rotary_emb, f"{table}_inv_freq")

    def final_softcap(self, config: Any) -> float | None:
        return getattr(config, "final_logit_softcapping", None)


class Gemma2(Architecture):
    """Gemma 2: alternating sliding / full `layer_types`, one RoPE table, attention-logit soft-capping
    (inside attention) and final-logit soft-capping (after the LM head), grouped KV heads."""

    name = "gemma2"
    model_types = ("gemma2",)

    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        return self._typed_layers(config)

    def final_softcap(self, config: Any) -> float | None:
        return getattr(config, "final_logit_softcapping", None)


class Llama(Architecture):
    """Llama (2/3/3.x): every layer full; one RoPE table with its scaling folded into `inv_freq`
    (`default`, `linear`, `llama3`, `yarn`; `dynamic` capped at the original length); grouped KV heads,
    optional attention bias."""

    name = "llama"
    model_types = ("llama",)


class _WindowedEverywhere(Architecture):
    """Families whose mask and cache are sliding on every layer when `sliding_window` is set, full when
    it is None (transformers infers the cache's layer types from it)."""

    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        window = getattr(config, "sliding_window", None)
        if getattr(config, "layer_types", None) is not None:
            raise GalahadError(f"{self.name}: a config with layer_types is not this family's layout")
        kind = "full" if window is None else f"sliding:{int(window)}"
        return tuple(LayerSpec(kind, "default") for _ in range(config.num_hidden_layers))


class Mistral(_WindowedEverywhere):
    """Mistral: one sliding window on every layer (or none), one RoPE table, grouped KV heads."""

    name = "mistral"
    model_types = ("mistral",)


class Phi3(_WindowedEverywhere):
    """Phi-3 / Phi-3.5 / Phi-4-mini: fused qkv and gate-up projections, an optional sliding window on every
    layer, partial rotary (`partial_rotary_factor`: the RoPE table covers the first dims of a head),
    `longrope` capped at the original length."""

    name = "phi3"
    model_types = ("phi3",)


class _Typed(Architecture):
    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        if any(t == "sliding_attention" for t in config.layer_types) and getattr(config, "sliding_window", None) is None:
            raise GalahadError(f"{self.name}: layer_types name sliding layers but sliding_window is unset")
        return self._typed_layers(config)


class Qwen2(_Typed):
    """Qwen2 / Qwen2.5 (-Math): bias on q/k/v projections, `layer_types` (sliding from `max_window_layers`
    when `use_sliding_window`), one RoPE table, grouped KV heads."""

    name = "qwen2"
    model_types = ("qwen2",)


class Qwen3(_Typed):
    """Qwen3: per-head RMSNorm on queries and keys before RoPE, `layer_types` as Qwen2, one RoPE table."""

    name = "qwen3"
    model_types = ("qwen3",)


class SmolLM3(_Typed):
    """SmolLM3: `no_rope_layers[i] == 0` marks a layer whose keys carry no rotation (NoPE); sliding only
    on NoPE layers with `use_sliding_window`; one RoPE table for the rest."""

    name = "smollm3"
    model_types = ("smollm3",)

    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        specs = super().layers(config)
        return tuple(LayerSpec(s.kind, "default" if int(use) else None)
                     for s, use in zip(specs, config.no_rope_layers, strict=True))


FAMILIES: tuple[Architecture, ...] = (Gemma3(), Gemma2(), Llama(), Mistral(), Qwen2(), Qwen3(), Phi3(), SmolLM3())
