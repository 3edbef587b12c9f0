"""Samplers: the same seed and sampler give the same text in any process; batched and sequential sampling
apply the same stop/length rules; a batch whose rows stop early still returns every attempt, counted right."""

import json
import subprocess
import sys

import pytest
import torch

from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.problems.prompts import ANSWER_STOP
from galahad.workers.engine import ends
from galahad.workers.generator import Generator
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampler import SAMPLERS, BatchedSampler, SequentialSampler, get_sampler
from galahad.workers.sampling import SamplingConfig, sample_seed

RT = DEFAULT_RUNTIME.with_(threads=1)
PROBLEM = {"id": problem_hash("What is 3 + 4?"), "text": "What is 3 + 4?"}

CHILD = """
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env
pin_process_env(DEFAULT_RUNTIME.with_(threads=1))
import json, sys
from galahad.workers.generator import Generator
from galahad.workers.sampling import SamplingConfig, sample_seed
from galahad.flywheel.problems.prompts import ANSWER_STOP
problem, cache, sampler = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
gen = Generator("tiny", cache, DEFAULT_RUNTIME.with_(threads=1))
print(json.dumps([r.output_text for r in gen.attempt(problem, SamplingConfig(k=6, max_tokens=8, seed=9, sampler=sampler))]))
"""


@pytest.fixture(scope="module")
def gen(model_cache):
    return Generator("tiny", model_cache, RT)


@pytest.fixture
def eos(gen):
    """Temporarily make some tokens end-of-sequence (the tiny model rarely draws its own EOS)."""
    config = gen.engine.model.generation_config
    saved = config.eos_token_id

    def make(tokens):
        config.eos_token_id = sorted(set(tokens))
        return gen.engine.loaded.eos_ids

    yield make
    config.eos_token_id = saved


def _prompt(gen):
    ids = gen.engine.encode("Question: What is 3 + 4?\nAnswer:")
    cache = gen.engine.new_cache()
    logits = gen.engine.prefill(cache, ids, 0, last_only=True)[-1]
    return cache, logits, len(ids)


def _obeys_rules(engine, s, max_tokens, stop, eos) -> None:
    """The rules both samplers promise: EOS is never kept, nothing continues past a stop string or the
    budget, and a sample that did not stop used the whole budget."""
    assert len(s.token_ids) <= max_tokens
    assert not set(s.token_ids) & eos
    assert not any(ends(engine.tokenizer, s.token_ids[:j], stop) for j in range(1, len(s.token_ids)))
    if not s.stopped:
        assert len(s.token_ids) == max_tokens
    assert s.text == engine.tokenizer.decode(s.token_ids, skip_special_tokens=True)


def test_samplers_are_named_and_swappable():
    assert set(SAMPLERS) == {"batched", "sequential"}
    assert isinstance(get_sampler("batched"), BatchedSampler) and get_sampler("sequential").name == "sequential"
    with pytest.raises(ValueError, match="unknown sampler"):
        get_sampler("parallel")


@pytest.mark.parametrize("sampler", ["batched", "sequential"])
def test_same_seed_same_sampler_same_text_across_processes(gen, model_cache, sampler):
    cfg = SamplingConfig(k=6, max_tokens=8, seed=9, sampler=sampler)
    here = gen.attempt(PROBLEM, cfg)
    assert [r.output_text for r in gen.attempt(PROBLEM, cfg)] == [r.output_text for r in here]
    assert all(r.sampling["sampler"] == sampler for r in here)
    assert len({r.output_text for r in here}) > 1  # distinct seeds, distinct draws
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(PROBLEM), str(model_cache), sampler],
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [r.output_text for r in here]


def test_batched_and_sequential_apply_the_same_stop_and_length_rules(gen, eos):
    engine = gen.engine
    cache, logits, pos = _prompt(gen)
    seeds = list(range(100, 108))
    free = BatchedSampler().sample(engine, cache, logits, pos, seeds, 10, 1.0, ())
    full = [i for i, s in enumerate(free) if len(s.token_ids) == 10]  # (a row may draw the real EOS)
    assert len(full) >= 2
    # One row's first token becomes EOS (it stops with nothing kept); a character another row drew third
    # becomes a stop string (rows that draw it stop right after it).
    eos_ids = eos([free[full[0]].token_ids[0]])
    stop = (engine.tokenizer.decode(free[full[1]].token_ids[2:3]),)
    assert stop[0]
    for sampler in (BatchedSampler(), SequentialSampler()):
        out = sampler.sample(engine, cache, logits, pos, seeds, 10, 1.0, stop)
        assert len(out) == len(seeds)
        for s in out:
            _obeys_rules(engine, s, 10, stop, eos_ids)
        assert out[full[0]].token_ids == [] and out[full[0]].stopped
        assert any(s.stopped and s.token_ids and ends(engine.tokenizer, s.token_ids, stop) for s in out)
    # greedy (temperature 0) follows the same rules too
    for sampler in (BatchedSampler(), SequentialSampler()):
        for s in sampler.sample(engine, cache, logits, pos, seeds[:3], 5, 0.0, stop):
            _obeys_rules(engine, s, 5, stop, eos_ids)
    # the prompt's cache was not touched by sampling
    assert cache.get_seq_length() == pos


def test_a_batch_with_rows_that_stop_early_returns_every_attempt(gen, eos):
    cache, logits, pos = gen.prompt(PROBLEM)
    seeds = [sample_seed(4, PROBLEM["id"], i) for i in range(8)]
    free = BatchedSampler().sample(gen.engine, cache, logits, pos, seeds, 9, 1.0, (ANSWER_STOP,))
    # every sample whose first token is one of these stops at once; the others go on
    eos([free[0].token_ids[0], free[1].token_ids[0]])
    for name, sampler in (("batched", BatchedSampler()), ("sequential", SequentialSampler())):
        samples = sampler.sample(gen.engine, cache, logits, pos, seeds, 9, 1.0, (ANSWER_STOP,))
        out = gen.attempt(PROBLEM, SamplingConfig(k=8, max_tokens=9, seed=4, sampler=name))
        assert [r.sample for r in out] == list(range(8)) and [r.seed for r in out] == seeds
        assert [r.tokens for r in out] == [len(s.token_ids) for s in samples]  # what each row really kept
        assert [r.output_text for r in out] == [s.text for s in samples]
        assert out[0].tokens == out[1].tokens == 0 and out[0].output_text == ""
        assert any(r.tokens == 9 for r in out)  # rows that did not stop ran their whole budget
        assert sum(r.seconds for r in out) > 0 and all(r.sampling["sampler"] == name for r in out)


def test_batched_draws_use_a_generator_on_the_logits_device(gen):
    # On CPU logits the generators are CPU generators; the sampler builds them from `logits.device`, so on
    # CUDA logits they are CUDA generators (no CPU generator is ever handed CUDA probabilities).
    engine = gen.engine
    cache, logits, pos = _prompt(gen)
    a = BatchedSampler().sample(engine, cache, logits, pos, [1, 2], 4, 1.0, ())
    g = torch.Generator(device=logits.device).manual_seed(1)
    first = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g))
    assert a[0].token_ids[0] == first


def test_draw_rows_gives_the_tokens_torch_multinomial_draws():
    # The batched sampler draws every row's exponential race noise on threads; each row's token must be the
    # one `torch.multinomial` on that row with that row's generator gives (so batching keeps every draw).
    from galahad.workers.engine import draw, draw_rows

    rows = torch.randn(6, 5000, generator=torch.Generator().manual_seed(3)) * 4
    for temperature in (1.0, 0.7):
        for trial in range(20):
            seeds = [trial * 100 + r for r in range(6)]
            want = [draw(rows[r], temperature, torch.Generator().manual_seed(s)) for r, s in enumerate(seeds)]
            for workers in (1, 2):
                got = draw_rows(rows, temperature, [torch.Generator().manual_seed(s) for s in seeds], workers)
                assert got == want
    assert draw_rows(rows, 0.0, [torch.Generator()] * 6, 2) == [int(t) for t in rows.argmax(-1)]
