"""OpenAI's protocol as clients use it, against a real `galahad serve` (tiny model, loopback, a free port), with
the official `openai` SDK and LangChain's `ChatOpenAI` (langchain-openai, pinned in the test extra):
`max_tokens` as a cap, usage as the tokens read and decoded (`cached_tokens`: grafted from memory), logprobs
in OpenAI's shapes and, served from a graft, byte-identical to a fresh prefill of the same context in this
process, `n` seeded samples, `stop`, and memory's verdict in the body and the `X-Galahad-Verified` header.
Slow tier: a server start takes tens of seconds on a loaded machine."""

import openai
import pytest
from serve_harness import seed_solution, serve_env, serving

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.service import openai_protocol as protocol

pytestmark = pytest.mark.slow

TOKEN = "test-token-openai-clients-0123"
SEEDED = ("What is 2 + 3?", "5")
ODD = ("Tell me 5 and 6 combined, please.", "11")  # no canonical key: a near paraphrase grafts it as an example
SIMILAR = "Tell me 5 and 6 combined."  # -> path `similar`: its answer decoded after a graft


@pytest.fixture(scope="module")
def served(tmp_path_factory, model_cache):
    data = tmp_path_factory.mktemp("clients") / "data"
    seed_solution(data, "tiny", model_cache, *SEEDED)
    seed_solution(data, "tiny", model_cache, *ODD, template="odd", topic="odd")
    with serving(data, ["--model", "tiny", "--no-learn"], serve_env(model_cache), TOKEN) as server:
        fingerprint = server.json("GET", "/readyz")[1]["model_fingerprint"]
        with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:  # `similar` answers only where an eval
            cat.gates.record([{"model_fingerprint": fingerprint, "library": "template:odd", "route": "similar",
                               "open": True, "manifest_id": "test", "condition": "system", "route_correct": 1,
                               "route_n": 1, "base_correct": 0, "base_n": 1}])  # opened its gate (here: by hand)
        yield server


@pytest.fixture(scope="module")
def client(served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=TOKEN, max_retries=0, timeout=300)


def ext(obj) -> dict:
    return obj.to_dict()["galahad"]


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_max_tokens_is_a_cap_and_usage_counts_the_tokens_decoded(client):
    model = {"answer_policy": "model"}  # the model's own cut (the default answers the computed value instead)
    whole = client.chat.completions.create(model="tiny", messages=ask(SEEDED[0]), metadata=model)
    assert ext(whole)["path"] == "base" and ext(whole)["decode_tokens"] > 1  # the tiny model: noise, uncut
    for kwargs in ({"max_tokens": 1}, {"max_completion_tokens": 1}, {"max_tokens": 8, "max_completion_tokens": 1}):
        r = client.chat.completions.create(model="tiny", messages=ask(SEEDED[0]), metadata=model, **kwargs)
        g = ext(r)
        assert r.choices[0].finish_reason == "length" and g["decode_tokens"] == r.usage.completion_tokens == 1
        assert g["verified"] is not True and whole.choices[0].message.content.startswith(r.choices[0].message.content)
        assert r.usage.prompt_tokens == whole.usage.prompt_tokens  # the same context read
        assert r.usage.prompt_tokens_details.cached_tokens == g["grafted_tokens"] == 0  # the base path
    c = client.completions.create(model="tiny", prompt=SEEDED[0], max_tokens=4, extra_body={"metadata": model})
    assert c.usage.completion_tokens == ext(c)["decode_tokens"] <= 4 and c.choices[0].finish_reason == "length"
    big = client.chat.completions.create(model="tiny", messages=ask(SEEDED[0]), max_tokens=4096,
                                      metadata=model)  # above the budget
    assert big.choices[0].message.content == whole.choices[0].message.content
    assert big.usage.completion_tokens == whole.usage.completion_tokens


def test_a_grafts_logprobs_are_byte_identical_to_a_fresh_prefill(served, client, model_cache):
    import torch

    from galahad.flywheel.app.storage import engine_for
    from galahad.flywheel.artifacts.chain import chain_headers
    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.config import Paths
    from galahad.flywheel.problems import prompts

    r = client.chat.completions.create(model="tiny", messages=ask(SIMILAR), logprobs=True, top_logprobs=3)
    g = ext(r)
    assert g["path"] == "similar" and len(g["grafted_artifacts"]) == 1 and g["grafted_tokens"] > 0
    assert r.usage.prompt_tokens_details.cached_tokens == g["grafted_tokens"]
    served_lp = r.choices[0].logprobs.content
    assert len(served_lp) == g["decode_tokens"] == r.usage.completion_tokens
    # In this process: the memory's tokens prefilled afresh (no graft), the question after them, then the
    # served tokens fed back one by one; each step's log_softmax must be the served value, bit for bit.
    engine = engine_for("tiny", Paths.resolve(served.data))
    store = LocalStore(served.data / "store")
    cache, pos = engine.new_cache(), 0
    for _, meta in chain_headers(store, g["grafted_artifacts"][-1]):
        engine.prefill(cache, list(meta.token_ids), pos, last_only=True)
        pos += len(meta.token_ids)
    assert pos == g["grafted_tokens"]
    ids = engine.encode(prompts.query(SIMILAR), bos=False)
    assert r.usage.prompt_tokens == pos + len(ids)
    logits = engine.prefill(cache, ids, pos, last_only=True)[-1]
    pos += len(ids)
    for step, served_tok in enumerate(served_lp):
        logp = torch.log_softmax(logits, dim=-1)
        tok = int(torch.argmax(logits))  # greedy: the token the service decoded
        assert engine.tokenizer.decode([tok]) == served_tok.token
        fresh = float(logp[tok])
        assert fresh.hex() == served_tok.logprob.hex(), (step, fresh, served_tok.logprob)  # exact bits
        top = torch.topk(logp, 3)
        assert [(engine.tokenizer.decode([int(i)]), float(v).hex()) for v, i in zip(top.values, top.indices, strict=True)] == \
            [(t.token, t.logprob.hex()) for t in served_tok.top_logprobs]
        assert served_tok.bytes == list(served_tok.token.encode())
        logits = engine.forward(cache, [tok], pos, last_only=True)[-1]
        pos += 1
    c = client.completions.create(model="tiny", prompt=SIMILAR, logprobs=2)  # the completions shape
    assert c.choices[0].logprobs.token_logprobs == [t.logprob for t in served_lp]
    assert c.choices[0].logprobs.tokens == [t.token for t in served_lp]
    assert c.choices[0].logprobs.top_logprobs == \
        [{t.token: t.logprob for t in s.top_logprobs[:2]} for s in served_lp]  # (one key per token text)


def test_n_choices_are_seeded_samples(client):
    kwargs = {"model": "tiny", "messages": ask(SIMILAR), "n": 3, "seed": 7, "temperature": 1.0}
    a, b = (client.chat.completions.create(**kwargs) for _ in range(2))
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]  # seeded: repeatable
    assert len({c.message.content for c in a.choices}) > 1  # distinct seeds, distinct draws
    g = ext(a)
    assert g["path"] == "similar" and [c["index"] for c in g["choices"]] == [0, 1, 2]
    assert a.usage.completion_tokens == sum(c["decode_tokens"] for c in g["choices"]) == g["decode_tokens"]
    other = client.chat.completions.create(**{**kwargs, "seed": 8})
    assert [c.message.content for c in other.choices] != [c.message.content for c in a.choices]
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    for i in range(3):
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices and c.choices[0].index == i)
        assert text == a.choices[i].message.content


def test_stop_cuts_the_answer_and_unknown_fields_are_refused_whole(client):
    whole = client.chat.completions.create(model="tiny", messages=ask(SIMILAR)).choices[0].message.content
    assert len(whole) >= 2
    stop = whole[1]
    r = client.chat.completions.create(model="tiny", messages=ask(SIMILAR), stop=[stop], user="agent-7",
                                       seed=1, top_p=0.5, parallel_tool_calls=False, service_tier="auto",
                                       prompt_cache_key="k", safety_identifier="s")
    assert r.choices[0].message.content == whole[:whole.index(stop)] and r.choices[0].finish_reason == "stop"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=ask(SIMILAR), tools=[
            {"type": "function", "function": {"name": "lookup_the_weather_somewhere_far_away", "parameters": {}}}])
    assert e.value.code == "unsupported_parameter" and e.value.body["message"] == f"tools are not supported: " \
                                                                                  f"{protocol._NO_TOOLS}"


def test_verified_in_the_body_and_the_header(client):
    raw = client.chat.completions.with_raw_response.create(model="tiny", messages=ask(SIMILAR))
    r = raw.parse()
    assert raw.headers["x-galahad-verified"] == protocol.verified_word(ext(r)["verified"]) == "unverified"
    assert raw.headers["x-galahad-path"] == ext(r)["path"] == "similar"
    with client.chat.completions.with_streaming_response.create(model="tiny", messages=ask(SIMILAR),
                                                                stream=True) as s:
        assert s.headers["x-galahad-verified"] == "unverified"
    raw = client.completions.with_raw_response.create(model="tiny", prompt=SIMILAR)
    assert raw.headers["x-galahad-verified"] == "unverified" and "verified" in ext(raw.parse())


def test_langchain_chat_openai(served, client):
    from langchain_openai import ChatOpenAI

    direct = client.chat.completions.create(model="tiny", messages=ask(SIMILAR), max_tokens=3, logprobs=True)
    llm = ChatOpenAI(model="tiny", base_url=f"{served.url}/v1", api_key=TOKEN, max_retries=0, timeout=300,
                     include_response_headers=True, max_tokens=3, logprobs=True)
    msg = llm.invoke(SIMILAR)
    assert msg.content == direct.choices[0].message.content
    meta = msg.response_metadata
    assert meta["headers"]["x-galahad-verified"] == protocol.verified_word(ext(direct)["verified"])
    assert meta["headers"]["x-galahad-path"] == "similar" and meta["finish_reason"] == "length"
    assert [t["logprob"] for t in meta["logprobs"]["content"]] == [t.logprob for t in direct.choices[0].logprobs.content]
    usage = msg.usage_metadata
    assert usage["output_tokens"] == 3 and usage["input_tokens"] == direct.usage.prompt_tokens
    assert usage["input_token_details"]["cache_read"] == ext(direct)["grafted_tokens"] > 0
    streamed = list(llm.stream(SIMILAR))
    assert "".join(c.content for c in streamed) == msg.content
    plain = ChatOpenAI(model="tiny", base_url=f"{served.url}/v1", api_key=TOKEN, max_retries=0, timeout=300,
                       temperature=0.2, stop=["\n"], seed=3, n=1)  # what agents set routinely: all accepted
    assert plain.invoke([("system", "You are terse."), ("human", SIMILAR)]).content == \
        client.chat.completions.create(model="tiny", messages=ask(SIMILAR)).choices[0].message.content
