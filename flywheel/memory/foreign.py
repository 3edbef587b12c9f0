"""Saying so when memory is there but was compiled elsewhere: the one line `solve`, `serve` and the evals
print when the catalog knows a problem only through another model's or runtime's artifacts ("N artifacts
were made under another runtime (fields: cpu.model, torch): run `galahad catalog recompile`"), from
`catalog.runtimes`.
"""

from __future__ import annotations

from galahad.workers.runtime import RuntimeConfig, runtime_facts, runtime_fingerprint


def foreign_message(catalog, fingerprints: tuple[str, str], artifacts: list[dict]) -> str | None:
    """`artifacts`: rows with model_fingerprint and runtime_fingerprint (`catalog.recalls.elsewhere`)."""
    if not artifacts:
        return None
    model, runtime = fingerprints
    other_model = [a for a in artifacts if a["model_fingerprint"] != model]
    other_runtime = [a for a in artifacts if a["model_fingerprint"] == model]
    parts = []
    if other_runtime:
        fields = catalog.runtimes.explain(runtime, sorted({a["runtime_fingerprint"] for a in other_runtime}))
        parts.append(f"{len(other_runtime)} artifact{'s were' if len(other_runtime) != 1 else ' was'} made under "
                     f"another runtime (fields: {', '.join(fields) or 'unknown'}): run `galahad catalog recompile`")
    if other_model:
        parts.append(f"{len(other_model)} artifact{'s were' if len(other_model) != 1 else ' was'} made by another "
                     "model (not graftable with this one)")
    return "; ".join(parts)


def record_runtime(catalog, engine) -> None:
    """Record the engine's runtime facts in the catalog (once per fingerprint), so that another machine's
    refusal can name the fields in which it differs."""
    runtime, arch = getattr(engine, "runtime", None), getattr(engine, "arch_facts", None)
    if isinstance(runtime, RuntimeConfig) and getattr(engine, "runtime_fingerprint", None) == runtime_fingerprint(
            runtime, arch):  # a real engine (not a stand-in), whose fingerprint is the hash of these facts
        catalog.runtimes.record(engine.runtime_fingerprint, runtime_facts(runtime, arch))
