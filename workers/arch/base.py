"""The architecture adapter's base: what one family's KV cache holds per layer and how positions enter it.

An adapter states, from a model's config alone, each decoder layer's KV kind (`full`, or `sliding:W`: the
last W - 1 positions kept) and RoPE table (`rope`, None for a NoPE layer; partial rotary is read from the
table's length), plus the model-wide facts the engine needs: KV heads, head size, final soft-capping, the
context window, the MLP activation. Everything that touches KV layout reads these, never
`config.sliding_window` or a family's class names; `check_model` holds the statement to the cache
transformers builds, so an adapter that disagrees with its model is refused at load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from galahad.flywheel.errors import GalahadError

# RoPE variants whose frequencies are static buffers (scaling folded into inv_freq at init).
STATIC_ROPE = ("default", "linear", "llama3", "yarn")
# Variants that recompute frequencies from the current sequence length: exact only while every position
# stays below the original training length, so the context window is capped there.
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")


@dataclass(frozen=True)
class LayerSpec:
    kind: str  # "full" or "sliding:W"
    rope: str | None  # RoPE table name, None: no positional rotation

    @property
    def window(self) -> int | None:
        return int(self.kind.split(":", 1)[1]) if self.kind.startswith("sliding:") else None


class Architecture:
    """Base adapter. Subclasses set `name`, `model_types` and override `layers` (and what else differs)."""

    name = "base"
    model_types: tuple[str, ...] = ()
    version = 1
    # The runtime fingerprint's extra facts: empty only for the reference family (Gemma 3), whose
    # fingerprints predate this layer and must not change.
    fingerprinted = True

    # --- per-layer statement ---------------------------------------------------------------------------
    def layers(self, config: Any) -> tuple[LayerSpec, ...]:
        """Default: every layer full, one RoPE table."""
        return tuple(LayerSpec("full", "default") for _ in range(config.num_hidden_layers))

    @staticmethod
    def _typed_layers(config: Any, rope_for: dict[str, str | None] | None = None) -> tuple[LayerSpec, ...]:
        """From `config.layer_types` (sliding_attention / full_attention) and `config.sliding_window`."""
        out = []
        for t in config.layer_types:
            if t == "sliding_attention":
                kind = f"sliding:{int(config.sliding_window)}"
            elif t == "full_attention":
                kind = "full"
            else:
                raise GalahadError(f"layer type {t!r} is not supported (only full and sliding attention)")
            out.append(LayerSpec(kind, (rope_for or {}).get(t, "default")))
        return tuple(out)

    # --- positions ---------------------------------------------------------------------------------------
    def rope_parameters(self, config: Any, table: str) -> dict:
        """The RoPE parameters of one table: per layer type (Gemma 3) or the model's one set."""
        params = getattr(config, "rope_parameters", None) or {}
        inner = params.get(table)
        return dict(inner if isinstance(inner, dict) else params)

    def inv_freq(self, model: Any, table: str):
        """The inverse frequencies a layer of this table was rotated with (the module's live buffer)."""
        return model.model.rotary_emb.inv_freq

    # --- model-wide facts --------------------------------------------------------------------------------
    def kv_heads(self, config: Any) -> int:
        return int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)

    def head_dim(self, config: Any) -> int:
        return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)

    def final_softcap(self, config: Any) -> float | None:
        return None

    def activation(self, config: Any) -> str:
        return str(getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", ""))

    def context_window(self, config: Any) -> int:
        window = int(getattr(config, "max_position_embeddings", 0))
        for table in {s.rope for s in self.layers(config) if s.rope is not None}:
            params = self.rope_parameters(config, table)
            if params.get("rope_type", "default") in LENGTH_DEPENDENT_ROPE:
                original = params.get("original_max_position_embeddings") or getattr(
                    config, "original_max_position_embeddings", None) or window
                window = min(window, int(original))
        return window

    def runtime_facts(self, config: Any) -> dict:
        """What this adapter makes bit-relevant beyond the model config (which the model fingerprint
        hashes): which adapter, at which version, laid the KV out and read its positions."""
        if not self.fingerprinted:
            return {}
        return {"arch": self.name, "arch_version": self.version}

    def describe(self, config: Any) -> dict:
        specs = self.layers(config)
        return {
            "architecture": self.name,
            "layers": [s.kind for s in specs],
            "rope": [s.rope for s in specs],
            "kv_heads": self.kv_heads(config),
            "heads": int(config.num_attention_heads),
            "head_dim": self.head_dim(config),
            "final_softcap": self.final_softcap(config),
            "context_window": self.context_window(config),
        }

    # --- load-time checks --------------------------------------------------------------------------------
    def check_config(self, config: Any) -> None:
        """Refuse a config whose positions this adapter cannot state exactly."""
        for table in {s.rope for s in self.layers(config) if s.rope is not None}:
            rope_type = self.rope_parameters(config, table).get("rope_type", "default")
            if rope_type not in STATIC_ROPE + LENGTH_DEPENDENT_ROPE:
                raise GalahadError(f"{self.name}: RoPE type {rope_type!r} is not supported; supported: "
                                   f"{', '.join(STATIC_ROPE + LENGTH_DEPENDENT_ROPE)}")

    def check_model(self, model: Any) -> None:
        """The statement must match the cache transformers builds for this config and the model's RoPE
        tables: a disagreement is refused here, at load."""
        from transformers import DynamicCache

        config = model.config
        specs = self.layers(config)
        cache = DynamicCache(config=config)
        if len(cache.layers) != len(specs) or len(specs) != config.num_hidden_layers:
            raise GalahadError(f"{self.name}: the adapter states {len(specs)} layers, transformers' cache has "
                               f"{len(cache.layers)}")
        for i, (spec, layer) in enumerate(zip(specs, cache.layers, strict=True)):
            held = getattr(layer, "sliding_window", None)
            if held != spec.window:
                raise GalahadError(f"{self.name}: layer {i} is {spec.kind} in the adapter, but transformers' "
                                   f"cache keeps {'all positions' if held is None else f'a window of {held}'}")
            if spec.rope is not None:
                inv = self.inv_freq(model, spec.rope)
                if 2 * inv.shape[-1] > self.head_dim(config):
                    raise GalahadError(f"{self.name}: layer {i}'s RoPE table rotates more dims than a head has")
