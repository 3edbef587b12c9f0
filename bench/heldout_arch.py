"""Held-out model folders: does `galahad exactness` hold on configurations nobody tuned the adapters to?

Written from the families' public configuration classes (transformers 5.23) without reading the adapter code:
each folder is a random-init model of a supported family with dimensions, head counts, windows and RoPE
scalings chosen to differ from the tests' own, plus a trained BPE tokenizer (real merges, Llama-style
`<s>`/`</s>` specials), saved with `save_pretrained`. Every folder runs `galahad exactness --kernel-mode stock` and
`--kernel-mode invariant`; unsupported architectures (Mamba: no KV cache; GPT-2: a KV cache but no adapter) must be
refused in one line that names the architecture.

    python bench/heldout_arch.py [--samples 5] [--only NAME ...] [--modes stock,invariant] [--json]

Last line (with --json): {"runs", "passed", "refused_cleanly", "failures": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS = [f"Question: What is {a} + {b}?\nAnswer: {a + b}\n\n" for a in range(30) for b in range(0, 30, 7)] + [
    "Solve for x: 3x + 4 = 19. The product of 6 and 7. Compute the sum of 12 and 30, then subtract 5.",
    "If a train travels 60 miles in 1.5 hours, what is its average speed? Round to two decimal places.",
]


def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 3, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")


def cases(vocab: int) -> dict[str, tuple[str, dict]]:
    ids = dict(vocab_size=vocab, bos_token_id=1, eos_token_id=2, pad_token_id=3, max_position_embeddings=512)
    return {
        "llama-llama3-gqa3": ("LlamaConfig", dict(ids, hidden_size=96, intermediate_size=160, num_hidden_layers=3,
                              num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False,
                              rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0,
                                               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 32})),
        "llama-linear-mha-headdim24": ("LlamaConfig", dict(ids, hidden_size=64, intermediate_size=96,
                                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                       head_dim=24, rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                                                     "factor": 2.0})),
        "llama-yarn": ("LlamaConfig", dict(ids, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=1,
                       rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                        "original_max_position_embeddings": 64})),
        "qwen2-tied-kv1": ("Qwen2Config", dict(ids, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
                           num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True)),
        "qwen3-sliding8": ("Qwen3Config", dict(ids, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=8, use_sliding_window=True,
                           sliding_window=8, max_window_layers=1)),
        "qwen3-full-headdim32": ("Qwen3Config", dict(ids, hidden_size=64, intermediate_size=96,
                                 num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32)),
        "mistral-window12-mha": ("MistralConfig", dict(ids, hidden_size=64, intermediate_size=96,
                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                 sliding_window=12)),
        "mistral-nowindow": ("MistralConfig", dict(ids, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                             num_attention_heads=3, num_key_value_heads=1, head_dim=16, sliding_window=None)),
        "phi3-partial-rotary": ("Phi3Config", dict(ids, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, sliding_window=None,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "partial_rotary_factor": 0.5})),
        "gemma2-window8-softcap": ("Gemma2Config", dict(ids, hidden_size=64, intermediate_size=96,
                                   num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   query_pre_attn_scalar=16, sliding_window=8,
                                   final_logit_softcapping=20.0, attn_logit_softcapping=40.0)),
        "smollm3-nope-every3": ("SmolLM3Config", dict(ids, hidden_size=64, intermediate_size=96,
                                num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                                no_rope_layer_interval=3)),
        "gemma3-window10-2to1": ("Gemma3TextConfig", dict(ids, hidden_size=48, intermediate_size=96,
                                 num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1, head_dim=24,
                                 query_pre_attn_scalar=24, sliding_window=10,
                                 layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
    }


REFUSED = {
    "mamba": ("MambaConfig", dict(vocab_size=420, hidden_size=32, state_size=4, num_hidden_layers=2,
                                  bos_token_id=1, eos_token_id=2, pad_token_id=3)),
    "gpt2": ("GPT2Config", dict(vocab_size=420, n_embd=32, n_layer=2, n_head=2, n_positions=256, bos_token_id=1,
                                eos_token_id=2)),
}


def build(root: Path, name: str, cls: str, kwargs: dict, tok) -> Path:
    import torch
    import transformers

    config = getattr(transformers, cls)(**kwargs)
    torch.manual_seed(1234)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    folder = root / name
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def exactness(folder: Path, mode: str, samples: int, env: dict) -> dict:
    cmd = [sys.executable, "-m", "galahad.flywheel.cli", "exactness", "--model", str(folder), "--kernel-mode", mode,
           "--samples", str(samples), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    out = {"rc": proc.returncode, "stderr": proc.stderr.strip().splitlines()[-3:]}
    if proc.returncode == 0:
        rep = json.loads(proc.stdout.strip().splitlines()[-1])
        out.update({k: rep.get(k) for k in ("sha256_equal", "monolithic_sha256_equal", "token_by_token_sha256_equal",
                                             "kl_max", "argmax_agreement", "samples")})
    return out


def _exact(r: dict) -> bool:
    """Every sample's graft logits hashed equal to the fresh computation's (counts, from the JSON report)."""
    return r["rc"] == 0 and bool(r.get("samples")) and r.get("sha256_equal") == r.get("samples")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--modes", default="stock,invariant", help="kernel modes, comma-separated (default stock,invariant)")
    ap.add_argument("--keep", help="build the folders here and keep them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="heldout-arch-"))
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GALAHAD_HOME": str(root / "data")}
    tok = tokenizer()
    results, failures = {}, []
    for name, (cls, kw) in cases(len(tok)).items():
        if args.only and name not in args.only:
            continue
        folder = build(root, name, cls, kw, tok)
        for mode in [m for m in args.modes.split(",") if m]:
            r = exactness(folder, mode, args.samples, env)
            results[f"{name}/{mode}"] = r
            ok = _exact(r)
            print(f"{name:28s} {mode:9s} {'ok' if ok else 'FAIL'} graft==fresh {r.get('sha256_equal')}/"
                  f"{r.get('samples')} {'' if ok else r['stderr'][-1:]}",
                  file=sys.stderr, flush=True)
            if not ok:
                failures.append(f"{name}/{mode}: rc {r['rc']} {r['stderr'][-1:]}")
    refused = 0
    for name, (cls, kw) in REFUSED.items():
        if args.only and name not in args.only:
            continue
        folder = build(root, name, cls, kw, tok)
        r = exactness(folder, "stock", 1, env)
        clean = r["rc"] != 0 and len(r["stderr"]) == 1 and "not supported" in r["stderr"][0]
        refused += clean
        results[f"{name}/refusal"] = r
        print(f"{name:28s} refusal   {'ok' if clean else 'FAIL'} {r['stderr']}", file=sys.stderr, flush=True)
        if not clean:
            failures.append(f"{name}: not a one-line refusal: rc {r['rc']} {r['stderr']}")
    summary = {"runs": len(results), "passed": sum(1 for k, r in results.items() if not k.endswith("/refusal")
                                                   and _exact(r)),
               "refused_cleanly": refused, "failures": failures}
    if args.json:
        print(json.dumps({"results": results}))
        print(json.dumps(summary))
    else:
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
