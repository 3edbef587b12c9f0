"""Samplers: the same seed and sampler give the same text in any process; batched and sequential sampling
apply the same stop/length rules; a batch whose rows stop early still returns every attempt, counted right;
a left-padded batch of several prompts computes, under batch-invariant kernels, the very bits of each row
alone, so its draws are the sequential draws."""

import copy
import json
import shutil
import subprocess
import sys

import pytest
import torch

from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.problems.prompts import ANSWER_STOP
from galahad.workers.batch import DecodeBatch
from galahad.workers.engine import ends
from galahad.workers.generator import Generator
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampler import SAMPLERS, BatchedSampler, Prompt, SequentialSampler, get_sampler
from galahad.workers.sampling import SamplingConfig, sample_seed

RT = DEFAULT_RUNTIME.with_(threads=1)
PROBLEM = {"id": problem_hash("What is 3 + 4?"), "text": "What is 3 + 4?"}

OTHER_PROCESS = """
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env
pin_process_env(DEFAULT_RUNTIME.with_(threads=1))
import json, sys
from galahad.workers.generator import Generator
from galahad.workers.sampling import SamplingConfig
problem, problems, cache, wide = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
gen = Generator("tiny", cache, DEFAULT_RUNTIME.with_(threads=1))
out = {s: [r.output_text for r in gen.attempt(problem, SamplingConfig(k=6, max_tokens=8, seed=9, sampler=s))]
       for s in ("batched", "sequential")}
rounds = gen.attempt_many([(p, 1, 3) for p in problems], SamplingConfig(k=4, max_tokens=8, seed=5, batch_rows=4))
out["call"] = [[r.output_text for r in rs] for rs in rounds]
wide_gen = Generator(wide, wide, DEFAULT_RUNTIME.with_(threads=1, attn_implementation="grouped"))
rounds = wide_gen.attempt_many([(p, 0, 3) for p in problems], SamplingConfig(k=3, max_tokens=6, seed=2, batch_rows=5))
out["wide"] = [[r.output_text for r in rs] for rs in rounds]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def other_process(model_cache, wide_tiny):
    """What a fresh process draws for this module's cross-process checks: one child computes them all
    (each check's own config, as it would alone), so the module pays for one interpreter, torch import
    and model load, not four."""
    proc = subprocess.run([sys.executable, "-c", OTHER_PROCESS, json.dumps(PROBLEM), json.dumps(PROBLEMS),
                           str(model_cache), str(wide_tiny)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


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
def test_same_seed_same_sampler_same_text_across_processes(gen, other_process, sampler):
    cfg = SamplingConfig(k=6, max_tokens=8, seed=9, sampler=sampler)
    here = gen.attempt(PROBLEM, cfg)
    assert [r.output_text for r in gen.attempt(PROBLEM, cfg)] == [r.output_text for r in here]
    assert all(r.sampling["sampler"] == sampler for r in here)
    assert len({r.output_text for r in here}) > 1  # distinct seeds, distinct draws
    assert other_process[sampler] == [r.output_text for r in here]


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
            want = [int(torch.multinomial(torch.softmax(rows[r] / temperature, -1), 1,
                                          generator=torch.Generator().manual_seed(s))) for r, s in enumerate(seeds)]
            assert [draw(rows[r], temperature, torch.Generator().manual_seed(s)) for r, s in enumerate(seeds)] == want
            for workers in (1, 2):
                got = draw_rows(rows, temperature, [torch.Generator().manual_seed(s) for s in seeds], workers)
                assert got == want
    assert draw_rows(rows, 0.0, [torch.Generator()] * 6, 2) == [int(t) for t in rows.argmax(-1)]
    # successive draws from one generator (a sample's steps) stay torch.multinomial's too
    mine, theirs = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    for r in range(6):
        assert draw(rows[r], 1.0, mine) == int(torch.multinomial(torch.softmax(rows[r], -1), 1, generator=theirs))


PROBLEMS = [{"id": problem_hash(t), "text": t} for t in
            ("What is 3 + 4?", "Add 27, 45 and 8, then double the sum and subtract the first number from it.",
             "Solve 2x = 8.", "Hi")]


def _prompts(engine, samples: int, seed: int = 0) -> list[Prompt]:
    """Prompts of different lengths, one longer than the tiny model's sliding window (16)."""
    out = []
    for i, p in enumerate(PROBLEMS):
        ids = engine.encode(f"Question: {p['text']} " * (6 if i == 1 else 1) + "\nAnswer:")
        cache = engine.new_cache()
        logits = engine.prefill(cache, ids, 0, last_only=True)[-1]
        out.append(Prompt(cache, logits, len(ids), [seed + 10 * i + j for j in range(samples)]))
    return out


@pytest.fixture(scope="module")
def invariant(model_cache):
    """Batch-invariant kernels: a row's bits cannot depend on the batch's row count or padding, so a padded
    batch is held to the rows alone byte for byte."""
    return Generator("tiny", model_cache, RT.with_(kernel_mode="invariant"))


def test_a_left_padded_batch_row_computes_what_the_row_alone_computes(invariant):
    engine = invariant.engine
    prompts = _prompts(engine, 2)
    window = engine.model.config.sliding_window
    assert max(p.pos for p in prompts) - min(p.pos for p in prompts) > window  # padding beyond the window
    batch = DecodeBatch(engine)
    for p in prompts:
        batch.admit(p.cache, len(p.seeds), p.pos)
    assert batch.padded and batch.slots == max(p.pos for p in prompts)
    alone = [copy.deepcopy(p.cache) for p in prompts for _ in p.seeds]
    toks = [int(p.logits.argmax()) for p in prompts for _ in p.seeds]
    pos = [p.pos for p in prompts for _ in p.seeds]
    for step in range(6):
        got = batch.step(toks)
        want = torch.cat([engine.forward(alone[r], [toks[r]], pos[r], last_only=True) for r in range(len(toks))])
        assert torch.equal(got, want), step
        toks, pos = [int(t) for t in want.argmax(-1)], [q + 1 for q in pos]
        if step == 2:  # the long prompt's rows leave: its padding-only slots are trimmed away
            keep = [0, 5, 6]
            before = batch.slots
            batch.keep(keep)
            alone, toks, pos = [alone[r] for r in keep], [toks[r] for r in keep], [pos[r] for r in keep]
            assert batch.slots == max(pos) < before and len(batch) == 3
    assert all(p.cache.get_seq_length() == p.pos for p in prompts)  # the prompts' caches were not touched


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_many_prompts_in_one_continuous_batch_draw_what_one_at_a_time_draws(invariant, temperature):
    # At most 5 live rows for 4 prompts x 3 samples: prompts join as earlier rows leave. Under invariant
    # kernels the batched draws are the sequential (batch-1) draws, token for token.
    engine = invariant.engine
    prompts = _prompts(engine, 3, seed=7)
    batched = BatchedSampler().sample_many(engine, prompts, 9, temperature, (ANSWER_STOP,), max_rows=5)
    sequential = SequentialSampler().sample_many(engine, prompts, 9, temperature, (ANSWER_STOP,), 5)
    assert [len(s) for s in batched] == [3, 3, 3, 3]
    assert [[s.token_ids for s in r] for r in batched] == [[s.token_ids for s in r] for r in sequential]
    for samples in batched:
        for s in samples:
            _obeys_rules(engine, s, 9, (ANSWER_STOP,), engine.loaded.eos_ids)
    # whatever the row budget, the same draws
    wide = BatchedSampler().sample_many(engine, prompts, 9, temperature, (ANSWER_STOP,), max_rows=64)
    assert [[s.token_ids for s in r] for r in wide] == [[s.token_ids for s in r] for r in batched]


def test_one_call_for_several_problems_is_deterministic_across_processes(gen, other_process):
    cfg = SamplingConfig(k=4, max_tokens=8, seed=5, batch_rows=4)
    out = gen.attempt_many([(p, 1, 3) for p in PROBLEMS], cfg)
    assert [[(r.problem_id, r.sample) for r in rs] for rs in out] == [[(p["id"], i) for i in (1, 2, 3)] for p in PROBLEMS]
    assert [r.seed for r in out[2]] == [sample_seed(5, PROBLEMS[2]["id"], i) for i in (1, 2, 3)]
    groups = {(r.sampling["group"], r.sampling["group_size"]) for rs in out for r in rs}
    assert len(groups) == 1 and next(iter(groups))[1] == 4
    assert sum(r.seconds for rs in out for r in rs) > 0
    texts = [[r.output_text for r in rs] for rs in out]
    assert [[r.output_text for r in rs] for rs in gen.attempt_many([(p, 1, 3) for p in PROBLEMS], cfg)] == texts
    assert other_process["call"] == texts
    # one problem alone is the one-problem call
    one = gen.attempt_many([(PROBLEMS[0], 0, 4)], cfg)[0]
    assert [r.output_text for r in one] == [r.output_text for r in gen.attempt(PROBLEMS[0], cfg)]


def test_the_cpu_exponential_noise_is_torchs_own():
    # draw_rows' fast noise must be exponential_'s values and leave the generator where exponential_ does,
    # so every later draw of the row is the same too.
    from galahad.workers.engine import _exponential_noise

    for seed in range(40):
        mine, theirs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for n in (262144, 5000, 17, 1):
            probs = torch.empty(n)
            assert torch.equal(_exponential_noise(probs, mine), torch.empty(n).exponential_(1, generator=theirs))
        assert torch.equal(mine.get_state(), theirs.get_state())


def test_prompts_prefilled_in_one_padded_forward_decode_what_each_alone_decodes(gen):
    # Padding between the shared prefix and each question: masked, with each row's own positions. Under stock
    # kernels a 3-row GEMM cannot give a 1-row GEMM's last bits, so this checks the padding is masked
    # (a mistake moves logits by O(1)): greedy tokens equal, logits within 1e-5.
    engine = gen.engine
    prefix = engine.encode("Q:")
    tails = [engine.encode(t, bos=False) for t in ("1+2", "33*4=?", "x")]
    base = engine.new_cache()
    engine.prefill(base, prefix, 0, last_only=True)
    shared = copy.deepcopy(base)
    shared.batch_repeat_interleave(3)
    logits, mask = engine.prefill_rows(shared, tails, len(prefix))
    assert mask.tolist()[2] == [True] * len(prefix) + [False] * 5 + [True]
    batch, alone = DecodeBatch(engine), []
    for r, tail in enumerate(tails):
        row = copy.deepcopy(shared)
        row.batch_select_indices(torch.tensor([r]))
        batch.admit(row, 1, len(prefix) + len(tail), mask[r])
        cache = copy.deepcopy(base)
        alone.append((cache, engine.prefill(cache, tail, len(prefix), last_only=True)[-1]))
    want = torch.stack([lg for _, lg in alone])
    torch.testing.assert_close(logits, want, rtol=0, atol=1e-5)
    toks, pos = [int(t) for t in want.argmax(-1)], [len(prefix) + len(t) for t in tails]
    assert [int(t) for t in logits.argmax(-1)] == toks
    for _ in range(5):
        got = batch.step(toks)
        want = torch.cat([engine.forward(alone[r][0], [toks[r]], pos[r], last_only=True) for r in range(3)])
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        assert [int(t) for t in got.argmax(-1)] == [int(t) for t in want.argmax(-1)]
        toks, pos = [int(t) for t in want.argmax(-1)], [p + 1 for p in pos]


@pytest.fixture(scope="module")
def wide_tiny(model_cache, tmp_path_factory):
    """The tiny model with a sliding window wide enough for a few-shot prompt (its own is 16 tokens)."""
    from galahad.workers.model_loader import snapshot_dir

    folder = tmp_path_factory.mktemp("wide-tiny") / "model"
    shutil.copytree(snapshot_dir("tiny", model_cache), folder)
    config = json.loads((folder / "config.json").read_text())
    config["sliding_window"] = 512
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_call_prefills_its_prompts_together_when_that_is_exact(wide_tiny, model_cache, other_process):
    gen = Generator(str(wide_tiny), model_cache, RT.with_(attn_implementation="grouped"))
    together = gen.prompts_together(PROBLEMS, max_tokens=6)
    assert together is not None and len(together) == len(PROBLEMS)
    assert any(not bool(mask.all()) for *_, mask in together)  # shorter questions were padded
    for (cache, logits, pos, mask), problem in zip(together, PROBLEMS, strict=True):
        alone_cache, alone_logits, alone_pos = gen.prompt(problem)
        assert pos == alone_pos and cache.get_seq_length() == mask.numel() and int(mask.sum()) == pos
        assert int(logits.argmax()) == int(alone_logits.argmax())
    # a span that would not fit in the window, or one problem alone, is prefilled prompt by prompt
    assert gen.prompts_together(PROBLEMS, max_tokens=600) is None
    cfg = SamplingConfig(k=3, max_tokens=6, seed=2, batch_rows=5)
    out = gen.attempt_many([(p, 0, 3) for p in PROBLEMS], cfg)
    texts = [[r.output_text for r in rs] for rs in out]
    assert [[r.output_text for r in rs] for rs in gen.attempt_many([(p, 0, 3) for p in PROBLEMS], cfg)] == texts
    assert other_process["wide"] == texts
    # every sample's prefill share is positive, and the call's samples obey the rules
    assert all(r.seconds > 0 for rs in out for r in rs)
    # the batch-invariant mode never batches a prefill (its attention needs contiguous keys)
    invariant = Generator(str(wide_tiny), model_cache, RT.with_(kernel_mode="invariant"))
    assert invariant.prompts_together(PROBLEMS, max_tokens=6) is None
