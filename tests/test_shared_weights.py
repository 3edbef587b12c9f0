"""One copy of the weights per machine (workers/shared_weights.py): every process that loads a snapshot maps
its file's pages shared and read-only, tied weights stay one tensor, a write to a weight kills the process
instead of forking a private page, the logits and the fingerprint are those of transformers' own loading,
and a snapshot that is not fp32 safetensors keeps the old path."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from galahad.workers.model_loader import TINY, load_model, snapshot_dir
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.shared_weights import NotShared, map_safetensors

# A second process: loads `tiny` from the cache in argv[1], then prints, for the snapshot's mapping, what
# /proc/self/smaps says of it and whether every parameter lies inside it; with argv[2] == "write" it writes
# to a weight first.
CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME
    loaded = load_model("tiny", Path(sys.argv[1]), DEFAULT_RUNTIME)
    if sys.argv[2] == "write":
        loaded.model.model.layers[0].mlp.up_proj.weight.data.add_(1.0)
        print("WROTE", flush=True)
        sys.exit(0)
    sys.path.insert(0, sys.argv[3])
    from test_shared_weights import snapshot_maps
    print(json.dumps(snapshot_maps(loaded.model, Path(sys.argv[1]) / "tiny" / "model.safetensors")))
""")


def snapshot_maps(model, path: Path) -> dict:
    """This process's mappings of `path` (perms, inode, Rss, Shared_Clean, Private_* in kB) and the parameters
    whose data does not lie inside one of them."""
    inode = path.stat().st_ino
    maps, current = [], None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        cols = line.split()
        if "-" in cols[0] and len(cols) >= 5 and ":" in cols[3]:  # a mapping's header line
            start, end = (int(x, 16) for x in cols[0].split("-"))
            current = {"start": start, "end": end, "perms": cols[1], "inode": int(cols[4])} \
                if int(cols[4]) == inode else None
            if current is not None:
                maps.append(current)
        elif current is not None and cols[0] in ("Rss:", "Shared_Clean:", "Private_Clean:", "Private_Dirty:"):
            current[cols[0][:-1]] = int(cols[1])
    outside = [n for n, p in model.named_parameters(remove_duplicate=False)
               if not any(m["start"] <= p.data_ptr() < m["end"] for m in maps)]
    return {"maps": [{k: v for k, v in m.items() if k not in ("start", "end")} for m in maps], "outside": outside}


def test_two_processes_share_the_snapshot_pages_read_only(model_cache):
    loaded = load_model(TINY, model_cache, DEFAULT_RUNTIME)  # this process holds its mapping meanwhile
    path = model_cache / TINY / "model.safetensors"
    assert loaded.weights["shared"] is True and loaded.weights["bytes"] > 0, loaded.weights
    mine = snapshot_maps(loaded.model, path)
    # read-only and shared; this process may hold other loads' mappings too (a pytest-xdist worker runs other
    # tests' loads first): one mapping per load is checked in the fresh child below
    assert mine["outside"] == [] and mine["maps"] and {m["perms"] for m in mine["maps"]} == {"r--s"}, mine
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_cache), "read", str(Path(__file__).parent)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    assert theirs["outside"] == [], theirs
    (m,) = theirs["maps"]
    # one read-only shared mapping; every resident page of it is also mapped by this process, none private
    assert m["perms"] == "r--s" and m["Rss"] > 0 and m["Shared_Clean"] == m["Rss"], m
    assert m["Private_Clean"] == 0 and m["Private_Dirty"] == 0, m


def test_tied_weights_stay_one_tensor_and_logits_equal_transformers(model_cache):
    from transformers import AutoModelForCausalLM

    loaded = load_model(TINY, model_cache, DEFAULT_RUNTIME)
    model = loaded.model
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not hasattr(loaded.tokenizer, "_vocab") and not hasattr(loaded.tokenizer, "_merges")
    assert loaded.tokenizer.decode(loaded.tokenizer("What is 3 + 4?").input_ids, skip_special_tokens=True) == \
        "What is 3 + 4?"
    plain = AutoModelForCausalLM.from_pretrained(model_cache / TINY, dtype=torch.float32,
                                                 attn_implementation=DEFAULT_RUNTIME.attn_implementation).eval()
    ids = torch.tensor([[2, 40, 41, 42, 43, 44, 45]])
    with torch.no_grad():
        a, b = model(ids).logits, plain(ids).logits
    assert hashlib.sha256(a.numpy().tobytes()).hexdigest() == hashlib.sha256(b.numpy().tobytes()).hexdigest()
    # the fingerprint hashes the same bytes as the tobytes() copy it used to make
    h = hashlib.sha256()
    for name, t in sorted(plain.state_dict().items()):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode() + t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    from galahad.workers.model_loader import model_fingerprint

    assert model_fingerprint(plain, loaded.tokenizer) == loaded.fingerprint


def test_a_write_to_a_weight_kills_the_process_and_leaves_the_file(model_cache):
    path = snapshot_dir(TINY, model_cache) / "model.safetensors"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_cache), "write"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == -signal.SIGSEGV and "WROTE" not in out.stdout, (out.returncode, out.stderr[-1500:])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_snapshot_that_is_not_fp32_keeps_the_old_path(model_cache, tmp_path):
    from safetensors.torch import load_file, save_file

    src = snapshot_dir(TINY, model_cache)
    folder = tmp_path / "half"
    folder.mkdir()
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    save_file({k: v.to(torch.float16) for k, v in load_file(src / "model.safetensors").items()},
              folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(NotShared, match="not fp32"):
        map_safetensors(folder)
    loaded = load_model(str(folder), tmp_path / "cache", DEFAULT_RUNTIME)
    assert loaded.weights["shared"] is False and "not fp32" in loaded.weights["reason"]
    with torch.no_grad():
        assert torch.isfinite(loaded.model(torch.tensor([[2, 40, 41]])).logits).all()


def test_a_header_whose_offsets_leave_the_file_is_refused(model_cache, tmp_path):
    raw = (snapshot_dir(TINY, model_cache) / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 1 << 30
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    (tmp_path / "model.safetensors").write_bytes(len(body).to_bytes(8, "little") + body + raw[8 + n:])
    with pytest.raises(NotShared, match="do not fit"):
        map_safetensors(tmp_path)
