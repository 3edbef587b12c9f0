"""Forward passes under the pinned runtime: chunked prefill, single forwards, greedy and sampled decode.

The chunk schedule is part of the deterministic configuration: a span is prefilled in chunks of
`runtime.prefill_chunk` tokens starting at the span's own start, so the same span after the same parent
is always computed by the same sequence of kernel calls.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from galahad.flywheel.errors import GalahadError
from galahad.kernels.modes import get_mode
from galahad.workers.model_loader import LoadedModel
from galahad.workers.runtime import COMPUTE_DTYPES, RuntimeConfig, deterministic, runtime_fingerprint


@dataclass
class Decoded:
    token_ids: list[int]
    text: str
    seconds: float
    cpu_seconds: float
    stopped: bool  # hit EOS/stop rather than the token budget


def draw(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> int:
    """One token from one row's logits: argmax at temperature 0, else a draw from the row's own generator
    (created on the logits' device): `draw_rows` on one row, the token `torch.multinomial` draws."""
    return draw_rows(logits.reshape(1, -1), temperature, [gen], 1)[0]


_NOISE_POOL: ThreadPoolExecutor | None = None


def _exponential_noise(probs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Exp(1) variates shaped like `probs`, the very values (and generator state after) of
    `torch.empty_like(probs).exponential_(1, generator=gen)`. On the CPU that kernel draws a float64
    uniform u per element and returns -log1p(-u) rounded to float32; the same three steps as tensor ops
    take 2.6 ms instead of 4.4 ms per 262,144 values on one thread (tests/test_sampler.py holds the two
    equal, values and generator state). Elsewhere (CUDA) torch's own kernel."""
    if probs.device.type != "cpu" or probs.dtype != torch.float32:
        return torch.empty_like(probs).exponential_(1, generator=gen)
    u = torch.rand(probs.shape, dtype=torch.float64, generator=gen)
    return u.neg_().log1p_().neg_().to(torch.float32)


def draw_rows(rows: torch.Tensor, temperature: float, gens: list[torch.Generator], workers: int) -> list[int]:
    """`draw` for every row of `rows` [n, vocab], row r from `gens[r]`: the very tokens `draw` gives row by
    row (tests/test_sampler.py holds it to `torch.multinomial`). A one-sample multinomial is torch's
    exponential race, argmax(p / q) with q ~ Exp(1) drawn from the generator; drawing q (one variate per
    vocabulary entry, the costly part) is serial per generator, so the rows' q are drawn on `workers`
    threads at once (torch releases the GIL), then divided and reduced as in torch."""
    if temperature <= 0:
        return [int(t) for t in torch.argmax(rows, dim=-1)]
    probs = [torch.softmax(rows[r] / temperature, dim=-1) for r in range(rows.shape[0])]
    global _NOISE_POOL
    if workers > 1 and len(probs) > 1:
        if _NOISE_POOL is None:
            _NOISE_POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="galahad-draw")
        noise = list(_NOISE_POOL.map(_exponential_noise, probs, gens))
    else:
        noise = [_exponential_noise(p, g) for p, g in zip(probs, gens, strict=True)]
    return [int(torch.argmax(p / q)) for p, q in zip(probs, noise, strict=True)]


def ends(tokenizer, kept: list[int], stop: tuple[str, ...]) -> bool:
    """Whether the kept tokens end in a stop string, matched on decoded text because tokenizers merge "\n"
    with neighbours."""
    return bool(stop) and any(s in tokenizer.decode(kept[-8:]) for s in stop)


class Engine:
    """A loaded model plus its pinned runtime. Plain class: Ray actors wrap it thinly."""

    def __init__(self, loaded: LoadedModel, runtime: RuntimeConfig):
        self.loaded = loaded
        self.runtime = runtime
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.device = torch.device(runtime.device)
        self.arch = loaded.arch  # the family's adapter (workers/arch/)
        self.arch_facts = loaded.arch.runtime_facts(loaded.model.config)
        self.runtime_fingerprint = runtime_fingerprint(runtime, self.arch_facts)
        self.kernels = get_mode(runtime.kernel_mode)
        if runtime.compute_dtype != "float32":  # a generator's (`GeneratorRuntime`): the weights cast once
            if runtime.compute_dtype not in COMPUTE_DTYPES or runtime.kernel_mode != "stock":
                raise GalahadError(f"compute dtype {runtime.compute_dtype!r} runs under the stock kernels only "
                                   f"(one of {', '.join(COMPUTE_DTYPES)}; kernel mode {runtime.kernel_mode!r})")
            self.model.to(getattr(torch, runtime.compute_dtype))

    @property
    def model_fingerprint(self) -> str:
        return self.loaded.fingerprint

    def new_cache(self) -> DynamicCache:
        """An empty cache for this model."""
        return DynamicCache(config=self.model.config)

    def encode(self, text: str, bos: bool = True) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        bos_id = self.tokenizer.bos_token_id
        return ([bos_id] if bos and bos_id is not None else []) + list(ids)

    def forward(self, cache: DynamicCache, ids: list[int], start: int, shift: int = 0,
                last_only: bool = False) -> torch.Tensor:
        """One forward call over `ids` at positions [start, start+len) (+ `shift` for RoPE only); fp32 logits
        [len, vocab], or [1, vocab] with `last_only` (the serving configuration: the LM head runs on the last
        position only; the cache it leaves is the same either way, the head comes after every layer)."""
        logits = self._forward(cache, ids, start, shift, "last" if last_only else "all")
        assert logits is not None
        return logits

    def _forward(self, cache: DynamicCache, ids: list[int], start: int, shift: int, head: str | None):
        """`forward` with the LM head on every position ("all"), the last ("last") or none (None: a prefill
        chunk whose logits nobody reads; the layers, hence the cache, run the same calls either way)."""
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        position_ids = torch.arange(start + shift, start + shift + len(ids), device=self.device)[None, :]
        if head != "all":
            return self._last_logits(cache, input_ids, position_ids, head=head == "last")
        with deterministic(self.runtime), self.kernels.active():
            out = self.model(input_ids=input_ids, position_ids=position_ids, past_key_values=cache, use_cache=True)
        return out.logits[0].to(torch.float32)

    def _last_logits(self, cache: DynamicCache, input_ids: torch.Tensor, position_ids: torch.Tensor,
                     head: bool = True, attention_mask: torch.Tensor | None = None) -> torch.Tensor | None:
        """The model's layers over [rows, len] ids, then (with `head`) the LM head on each row's last
        position: fp32 logits [rows, vocab]. What answering, decoding and batched sampling run. A 2-D
        `attention_mask` [rows, cached + len] (False on padding) only for a left-padded batch."""
        with deterministic(self.runtime), self.kernels.active():
            out = self.model.model(input_ids=input_ids, position_ids=position_ids, past_key_values=cache,
                                   attention_mask=attention_mask, use_cache=True)
            return self.head(out.last_hidden_state[:, -1]).to(torch.float32) if head else None

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head (the kernel mode's product: `KernelMode.lm_head`) and the model's final soft-capping,
        as its causal-LM forward applies them, on hidden states [rows, hidden]. Called inside `active()`."""
        lm = self.model.lm_head
        logits = self.kernels.lm_head(hidden, lm.weight, lm.bias)
        cap = self.arch.final_softcap(self.model.config)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def forward_rows(self, cache: DynamicCache, tokens: list[int], positions: list[int],
                     attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """One decode step for a batch (`workers/batch.py`): row r's next token `tokens[r]` at position
        `positions[r]`, with the batch's padding mask when it has padding; the last-position logits
        [rows, vocab]."""
        input_ids = torch.tensor(tokens, dtype=torch.long, device=self.device)[:, None]
        position_ids = torch.tensor(positions, dtype=torch.long, device=self.device)[:, None]
        logits = self._last_logits(cache, input_ids, position_ids, attention_mask=attention_mask)
        assert logits is not None
        return logits

    def prefill_rows(self, cache: DynamicCache, rows: list[list[int]], start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward for several rows' spans after a cache of `start` slots holding the same prefix in every
        row ([len(rows)] rows): each span is left-padded to the longest, row r's tokens at positions
        start .. start + len - 1. Returns each row's last-position logits [rows, vocab] and the cache's real
        slots [rows, start + longest] (False on the padding, which sits between the prefix and the span:
        callers keep a row's whole length within the sliding window, `workers/batch.py`)."""
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = [[pad] * (width - len(r)) + list(r) for r in rows]
        positions = [[start] * (width - len(r)) + list(range(start, start + len(r))) for r in rows]
        mask = torch.tensor([[True] * start + [False] * (width - len(r)) + [True] * len(r) for r in rows],
                            dtype=torch.bool, device=self.device)
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        position_ids = torch.tensor(positions, dtype=torch.long, device=self.device)
        logits = self._last_logits(cache, input_ids, position_ids, attention_mask=mask)
        assert logits is not None
        return logits, mask

    def prefill(self, cache: DynamicCache, ids: list[int], start: int, shift: int = 0,
                last_only: bool = False) -> torch.Tensor:
        """Chunked prefill with the pinned schedule; returns the last chunk's logits (its last position's
        only with `last_only`: what deposits and answering use; earlier chunks then run no LM head)."""
        if not ids:
            raise ValueError("cannot prefill an empty span")
        chunk = self.runtime.prefill_chunk
        logits = None
        for i in range(0, len(ids), chunk):
            final = i + chunk >= len(ids)
            logits = self._forward(cache, ids[i : i + chunk], start + i, shift,
                                   ("last" if final else None) if last_only else "all")
        assert logits is not None
        return logits

    def continue_decode(
        self,
        cache: DynamicCache,
        logits: torch.Tensor,
        pos: int,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        seed: int = 0,
        stop: tuple[str, ...] = (),
    ) -> Decoded:
        """Decode from the last position's logits; the cache is extended in place (by each kept token but the last)."""
        t0, c0 = time.perf_counter(), time.process_time()
        gen = torch.Generator(device=logits.device).manual_seed(seed)  # draws on the logits' own device
        out: list[int] = []
        stopped = False
        eos = self.loaded.eos_ids
        for step in range(max_new_tokens):
            tok = draw(logits, temperature, gen)
            if tok in eos:
                stopped = True
                break
            out.append(tok)
            if ends(self.tokenizer, out, stop):
                stopped = True
                break
            if step == max_new_tokens - 1:
                break  # budget spent: the last token's forward would feed nothing
            logits = self.forward(cache, [tok], pos, last_only=True)[-1]
            pos += 1
        text = self.tokenizer.decode(out, skip_special_tokens=True)
        return Decoded(out, text, time.perf_counter() - t0, time.process_time() - c0, stopped)
