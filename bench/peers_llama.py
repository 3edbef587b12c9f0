"""llama.cpp as `bench_peers.py`'s peer: the same GGUF through llama-cpp-python (the optional `peers` extra,
built from source by `bench/setup_peers.sh`), what each figure times, and nothing else of the product.

- `state_row`: a fresh prefill of the prefix, then the query (`Llama.eval`, n_batch 512), which is the recompute;
  the state after the prefix is kept three ways: `Llama.save_state()` (RAM, the wrapper), the raw bytes of
  `llama_state_get_data` (RAM, llama.cpp's own call) and `llama_state_save_file` (a file). A restore is timed
  up to the first token (restore, the query's `eval`, argmax of the last logits) and its logits compared,
  byte for byte, with the fresh run's (the same split: prefix, then query).
- `decode_one`: one stream, greedy, one `eval` per token. `decode_parallel`: `batch` sequences in one context
  (`n_seq_max`, per-sequence KV streams as llama.cpp defaults), the prompt prefilled once and copied with
  `llama_memory_seq_cp`, then one `llama_decode` per step over every sequence (low-level batch API).
- `LlamaSampler`: Galahad's batched sampler's rules (`workers/sampler.py`: the same draws from `draw_rows`,
  EOS, stop string, token budget, a row leaves when it ends) on llama.cpp's parallel sequences, so only the
  engine differs between the two samplers.
Nothing here pickles or unpickles: a state file is llama.cpp's own format, read back by llama.cpp.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np


def require() -> str:
    """llama_cpp's version, or SystemExit with the one line that says how to install it."""
    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("bench_peers: llama-cpp-python is not installed (bash bench/setup_peers.sh builds the "
                         "`peers` extra from source, about 10 minutes)") from None
    return llama_cpp.__version__


def open_llama(gguf: Path, n_ctx: int, threads: int, n_batch: int = 512):
    from llama_cpp import Llama

    return Llama(model_path=str(gguf), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                 n_batch=n_batch, logits_all=False, verbose=False)


def _logits(ctx, n_vocab: int, i: int = -1) -> np.ndarray:
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(ctx, i)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()


def state_row(llm, prefix: list[int], query: list[int], reps: int, work: Path, rounds=None) -> dict:
    """Recompute once, then `reps` restores per path (RAM wrapper, RAM raw, file), interleaved. `rounds`: a
    callable run between the first and the second half of the restores (the other engine's figures), so
    both engines see the same minutes of the machine's load."""
    import llama_cpp

    ctx, n, nv = llm._ctx.ctx, len(prefix), llm.n_vocab()
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prefix)
    t_prefix = time.perf_counter() - t0
    saved = llm.save_state()
    size = llama_cpp.llama_state_get_size(ctx)
    raw = (ctypes.c_uint8 * size)()
    got = llama_cpp.llama_state_get_data(ctx, raw, size)
    path = work / f"llama-{n}.state"
    toks = (llama_cpp.llama_token * n)(*prefix)
    if not llama_cpp.llama_state_save_file(ctx, str(path).encode(), toks, n):
        raise SystemExit(f"llama_state_save_file failed for {path}")
    t0 = time.perf_counter()
    llm.eval(query)
    fresh = _logits(ctx, nv)
    t_query = time.perf_counter() - t0
    first = int(np.argmax(fresh))

    def ram_wrapper():
        llm.load_state(saved)
        llm.eval(query)
        return _logits(ctx, nv)

    def ram_raw():
        if llama_cpp.llama_state_set_data(ctx, raw, got) != got:
            raise SystemExit("llama_state_set_data read a different size")
        llm.n_tokens = n
        llm.eval(query)
        return _logits(ctx, nv)

    def from_file():
        out_toks, count = (llama_cpp.llama_token * (n + 1))(), ctypes.c_size_t(0)
        if not llama_cpp.llama_state_load_file(ctx, str(path).encode(), out_toks, n + 1, ctypes.byref(count)):
            raise SystemExit(f"llama_state_load_file failed for {path}")
        llm.n_tokens = int(count.value)
        llm.eval(query)
        return _logits(ctx, nv)

    paths = {"ram_wrapper": ram_wrapper, "ram_raw": ram_raw, "file": from_file}
    times: dict[str, list[float]] = {k: [] for k in paths}
    exact: dict[str, bool] = dict.fromkeys(paths, True)
    first_ok = True

    def one_round():
        nonlocal first_ok
        for name, fn in paths.items():
            t0 = time.perf_counter()
            logits = fn()
            tok = int(np.argmax(logits))
            times[name].append(time.perf_counter() - t0)
            exact[name] &= logits.tobytes() == fresh.tobytes()
            first_ok &= tok == first

    for i in range(reps):
        if i == reps // 2 and rounds is not None:
            rounds()
        one_round()
    set_only = []
    for _ in range(reps):  # the restore alone (no query): where a restore's time goes
        t0 = time.perf_counter()
        llama_cpp.llama_state_set_data(ctx, raw, got)
        set_only.append(time.perf_counter() - t0)
    file_bytes = path.stat().st_size
    path.unlink()
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"tokens": n, "prefill_s": t_prefix, "query_s": t_query, "recompute_s": t_prefix + t_query,
            "restore_file_s": med["file"], "restore_ram_raw_s": med["ram_raw"],
            "restore_ram_wrapper_s": med["ram_wrapper"], "set_data_s": float(np.median(set_only)),
            "state_bytes": int(got), "state_file_bytes": file_bytes,
            "exact": exact, "first_token_equal": first_ok, "times": times}


def decode_one(llm, prompt: list[int], steps: int) -> float:
    """Greedy decode of one stream after `prompt`: tokens/s over `steps` forwards."""
    ctx, nv = llm._ctx.ctx, llm.n_vocab()
    llm.reset()
    llm.eval(prompt)
    tok = int(np.argmax(_logits(ctx, nv)))
    t0 = time.perf_counter()
    for _ in range(steps):
        llm.eval([tok])
        tok = int(np.argmax(_logits(ctx, nv)))
    return steps / (time.perf_counter() - t0)


class Parallel:
    """A low-level context of `seqs` sequences (one KV stream each) over an open `Llama`'s model."""

    def __init__(self, llm, seqs: int, n_ctx_per_seq: int, threads: int):
        import llama_cpp

        p = llama_cpp.llama_context_default_params()
        p.n_seq_max, p.n_threads, p.n_threads_batch = seqs, threads, threads
        p.n_ctx = seqs * (-(-n_ctx_per_seq // 256) * 256)
        p.n_batch = p.n_ubatch = 512
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, p)
        if self.ctx is None:
            raise SystemExit("llama_init_from_model failed for the parallel context")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(512, 0, seqs)
        self.nv, self.seqs, self.lib = llm.n_vocab(), seqs, llama_cpp
        self.kv_unified = bool(p.kv_unified)

    def decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode over (token, position, sequence, wants logits) items (at most 512)."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, out) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, int(out)
            b.seq_id[i][0] = seq
        rc = self.lib.llama_decode(self.ctx, b)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")

    def rows(self, count: int) -> np.ndarray:
        """The logits of the last decode's `count` outputs, [count, vocab]."""
        ptr = self.lib.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(count, self.nv)).copy()

    def prefill(self, ids: list[int], start: int, seq: int) -> None:
        for i in range(0, len(ids), 512):
            chunk = ids[i : i + 512]
            self.decode([(t, start + i + j, seq, i + j == len(ids) - 1) for j, t in enumerate(chunk)])

    def copy(self, src: int, dst: int) -> None:
        self.lib.llama_memory_seq_cp(self.mem, src, dst, -1, -1)

    def drop(self, seq: int) -> None:
        self.lib.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)


def decode_parallel(par: Parallel, prompt: list[int], steps: int) -> float:
    """`par.seqs` greedy streams after one prompt, one decode per step: tokens/s over all streams."""
    for s in range(par.seqs):
        par.drop(s)
    par.prefill(prompt, 0, 0)
    first = int(np.argmax(par.rows(1)[0]))
    for s in range(1, par.seqs):
        par.copy(0, s)
    toks, pos = [first] * par.seqs, len(prompt)
    t0 = time.perf_counter()
    for _ in range(steps):
        par.decode([(t, pos, s, True) for s, t in enumerate(toks)])
        toks = [int(x) for x in par.rows(par.seqs).argmax(axis=1)]
        pos += 1
    return par.seqs * steps / (time.perf_counter() - t0)


class LlamaSampler:
    """Galahad's batched sampler's rules on llama.cpp's sequences: `Parallel` with rows + 1 sequences, the
    last holding the few-shot examples (prefilled once, as `Generator` caches them), copied under each
    problem's question; the questions prefilled in one decode; each problem's sequence copied to its k
    rows; then one decode per step over the live rows, drawn by Galahad's own `draw_rows`."""

    def __init__(self, par: Parallel, shots: list[int], eos: set[int], tokenizer, threads: int):
        self.par, self.shots, self.eos, self.tokenizer, self.threads = par, shots, eos, tokenizer, threads
        self.home = par.seqs - 1
        par.prefill(shots, 0, self.home)

    def call(self, prompts: list[list[int]], seeds: list[list[int]], max_tokens: int, temperature: float,
             stop: tuple[str, ...]) -> list[list[list[int]]]:
        import torch

        from galahad.workers.engine import draw_rows, ends

        par, done = self.par, len(self.shots)
        bases, items, at = [], [], 0
        for ids, ks in zip(prompts, seeds, strict=True):
            if ids[:done] != self.shots or len(ids) <= done:
                raise ValueError("a prompt that does not start with the few-shot examples")
            par.copy(self.home, at)
            tail = ids[done:]
            items += [(t, done + i, at, i == len(tail) - 1) for i, t in enumerate(tail)]
            bases.append(at)
            at += len(ks)
        if at > self.home:
            raise ValueError(f"{at} rows do not fit in {self.home} sequences")
        par.decode(items)
        first = par.rows(len(prompts))
        live, logits = [], []
        for j, (ids, ks) in enumerate(zip(prompts, seeds, strict=True)):
            for r, seed in enumerate(ks):
                if r:
                    par.copy(bases[j], bases[j] + r)
                live.append({"p": j, "r": r, "seq": bases[j] + r, "pos": len(ids), "kept": [],
                             "gen": torch.Generator().manual_seed(seed)})
                logits.append(first[j])
        out: list[list[list[int]]] = [[[] for _ in ks] for ks in seeds]
        rows = np.stack(logits)
        while live:
            drawn = draw_rows(torch.from_numpy(rows), temperature, [x["gen"] for x in live], self.threads)
            still = []
            for row, tok in zip(live, drawn, strict=True):
                if tok in self.eos:
                    out[row["p"]][row["r"]] = row["kept"]
                    continue
                row["kept"].append(tok)
                if ends(self.tokenizer, row["kept"], stop) or len(row["kept"]) == max_tokens:
                    out[row["p"]][row["r"]] = row["kept"]
                else:
                    still.append((row, tok))
            live = [row for row, _ in still]
            if live:
                par.decode([(tok, row["pos"], row["seq"], True) for row, tok in still])
                for row in live:
                    row["pos"] += 1
                rows = par.rows(len(live))
        for s in range(at):
            par.drop(s)
        return out
