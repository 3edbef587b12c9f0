"""The OpenAI-compatible endpoints of `galahad serve`, with the real `openai` SDK as the client (tiny model,
loopback, a free port): chat completions (plain and streamed), completions, `/v1/models`, learning through
`metadata.gold`, every refusal mapped to the SDK's exception class, metrics; the protocol module alone. The default
model learning over the protocol then answering by recurrence is tests/test_serve_default_model.py."""

import json

import openai
import pytest
from serve_harness import Served, seed_solution, serve_env, serving
from starlette.requests import Request

from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.service import openai_protocol as protocol
from galahad.flywheel.service.answering import Decoding
from galahad.flywheel.service.api import Choice, SolveResult
from galahad.flywheel.service.security import caller_identity

TOKEN = "test-token-openai-0123456789"
SEEDED = ("What is 2 + 3?", "5")


@pytest.fixture(scope="module")
def env(model_cache):
    return serve_env(model_cache)


@pytest.fixture(scope="module")
def served(tmp_path_factory, env, model_cache):
    data = tmp_path_factory.mktemp("openai") / "data"
    seed_solution(data, "tiny", model_cache, *SEEDED)
    with serving(data, ["--model", "tiny", "--no-learn"], env, TOKEN) as server:
        yield server


@pytest.fixture(scope="module")
def client(served) -> openai.OpenAI:
    return sdk(served)


def sdk(served, key: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def count(model_cache):
    from transformers import AutoTokenizer

    from galahad.workers.model_loader import snapshot_dir

    tok = AutoTokenizer.from_pretrained(snapshot_dir("tiny", model_cache))
    return lambda text: len(tok(text, add_special_tokens=False).input_ids)


def ext(obj) -> dict:
    return obj.to_dict()["galahad"]


def same(a: dict, b: dict) -> bool:
    """The same `galahad` object but for `seconds` (each answer's own solve time)."""
    return {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}


# -- answering -------------------------------------------------------------------------------------

def test_chat_completion_answers_through_the_one_answering_path(served, client, count):
    code, solved = served.json("POST", "/v1/solve", {"problem": SEEDED[0]})
    assert code == 200, solved
    r = client.chat.completions.create(model="tiny", messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 9 + 9?"},
        {"role": "assistant", "content": "18"}, {"role": "user", "content": SEEDED[0]}])
    assert r.object == "chat.completion" and r.model == "tiny" and r.id.startswith("chatcmpl-") and r.created > 0
    assert len(r.choices) == 1 and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].logprobs is None
    assert r.choices[0].message.content == solved["answer"]  # the last user message, the same deterministic path
    g = ext(r)
    assert g["path"] == solved["path"] and g["verified"] == solved["verified"]
    assert g["matched_problem"] == solved["matched_problem"]
    assert g["grafted_artifacts"] == solved["grafted_artifacts"] and g["gold_source"] == solved["gold_source"]
    assert g["problem_id"] == problem_hash(SEEDED[0]) and g["queued"] is False
    # usage: the context the model read (memory grafted + the prompt) and the tokens it decoded
    assert r.usage.completion_tokens == g["decode_tokens"] == solved["decode_tokens"]
    assert r.usage.prompt_tokens_details.cached_tokens == g["grafted_tokens"] < r.usage.prompt_tokens
    assert r.usage.prompt_tokens > count(SEEDED[0])
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.system_fingerprint == "fp_" + solved["runtime_fingerprint"][:12]


def test_streamed_chat_reassembles_to_the_same_answer(client):
    ask = [{"role": "user", "content": [{"type": "text", "text": SEEDED[0]}]}]  # content parts, text only
    whole = client.chat.completions.create(model="tiny", messages=ask)
    chunks = list(client.chat.completions.create(model="tiny", messages=ask, stream=True,
                                                 stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == whole.choices[0].message.content
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == whole.choices[0].finish_reason
    assert ext(finish[0]).pop("seconds") > 0 and same(ext(finish[0]), ext(whole))
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == whole.usage.model_dump()
    plain = list(client.chat.completions.create(model="tiny", messages=ask, stream=True))
    assert all(c.usage is None for c in plain)
    assert "".join(c.choices[0].delta.content or "" for c in plain) == content


def test_completion_plain_and_streamed(client, served):
    solved = served.json("POST", "/v1/solve", {"problem": SEEDED[0]})[1]
    r = client.completions.create(model="tiny", prompt=SEEDED[0])
    assert r.object == "text_completion" and r.choices[0].text == solved["answer"]
    assert r.choices[0].finish_reason in ("stop", "length") and ext(r)["path"] == solved["path"]
    assert client.completions.create(model="tiny", prompt=[SEEDED[0]]).choices[0].text == solved["answer"]
    parts = list(client.completions.create(model="tiny", prompt=SEEDED[0], stream=True))
    assert "".join(c.choices[0].text for c in parts) == solved["answer"]
    assert parts[-1].choices[0].finish_reason == r.choices[0].finish_reason
    assert ext(parts[-1])["path"] == solved["path"]


def test_models_list_and_retrieve(served, client):
    ready = served.json("GET", "/readyz")[1]
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    g = ext(models.data[0])
    assert g["model_fingerprint"] == ready["model_fingerprint"] and len(g["runtime_fingerprint"]) == 64
    assert client.models.retrieve("tiny").id == "tiny"
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4o")
    assert e.value.code == "model_not_found"


def test_metadata_gold_queues_the_problem_exactly_as_solve_does(served, client):
    text = "What is 4 + 5?"
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}],
                                       metadata={"gold": "9"})
    g = ext(r)
    assert g["queued"] is True and g["problem_id"] == problem_hash(text)  # learned, yet answered right now:
    assert g["verified"] is True and g["gold_source"] == "computed" and g["matches_gold"] is True  # the default
    assert r.choices[0].message.content == "9"  # policy answers the computed value (issue 52)
    code, status = served.json("GET", f"/v1/problems/{g['problem_id']}")
    assert code == 200 and status["status"] == "pending" and status["text"] == text  # --no-learn: it waits
    with Catalog(f"sqlite:///{served.data / 'catalog.sqlite3'}") as cat:
        row = cat.problems.by_hash(g["problem_id"])
    assert row["answer"] == "9" and row["source"] == "api" and row["gold_source"] == "computed"
    words = "Sam has a dog named Rex. How many letters are in the dog's name?"  # a gold nobody can compute:
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": words}],
                                       metadata={"gold": "3"})  # recorded with who gave it
    with Catalog(f"sqlite:///{served.data / 'catalog.sqlite3'}") as cat:
        assert caller_identity(TOKEN) in cat.problems.by_hash(ext(r)["problem_id"])["gold_source"]
    with pytest.raises(openai.ConflictError) as e:  # a second, different gold for it: 409, as /v1/problems
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": words}],
                                       metadata={"gold": "4"})
    assert e.value.status_code == 409 and e.value.code == "gold_conflict"
    # the same problem again through /v1/solve: the same rules (already queued, nothing conflicting)
    code, again = served.json("POST", "/v1/solve", {"problem": text, "gold": "9"})
    assert code == 200 and again["queued"] is True
    # a completion with a gold (an extension field: extra_body) is learned the same way
    c = client.completions.create(model="tiny", prompt="What is 4 + 6?", extra_body={"metadata": {"gold": "10"}})
    assert ext(c)["queued"] is True


# -- refusals --------------------------------------------------------------------------------------

USER = [{"role": "user", "content": "What is 1 + 1?"}]
REFUSED = [  # (keyword arguments to chat.completions.create, SDK exception, error code)
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, openai.BadRequestError,
     "unsupported_parameter"),
    ({"n": 9}, openai.BadRequestError, "unsupported_parameter"),
    ({"top_logprobs": 2}, openai.BadRequestError, "invalid_request"),  # without logprobs: true
    ({"max_tokens": 0}, openai.UnprocessableEntityError, "invalid_value"),
    ({"stop": ["a", "b", "c", "d", "e"]}, openai.UnprocessableEntityError, "invalid_value"),
    ({"reasoning_effort": "high"}, openai.BadRequestError, "unsupported_parameter"),
    ({"response_format": {"type": "json_object"}}, openai.BadRequestError, "unsupported_parameter"),
    ({"extra_body": {"frobnicate": 1}}, openai.BadRequestError, "unsupported_parameter"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]},
     openai.BadRequestError, "unsupported_parameter"),
    ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "t"}]}, openai.BadRequestError,
     "unsupported_parameter"),
    ({"messages": [{"role": "system", "content": "only a system message"}]}, openai.BadRequestError,
     "invalid_request"),
    ({"messages": [{"role": "user", "content": ""}]}, openai.BadRequestError, "invalid_request"),
    ({"messages": [{"role": "user", "content": "What is 3 * 2?"}], "metadata": {"gold": "12"}},
     openai.BadRequestError, "invalid_request"),  # a gold the problem's text disproves, as /v1/solve
    ({"model": "gpt-4o"}, openai.NotFoundError, "model_not_found"),
    ({"messages": []}, openai.UnprocessableEntityError, "invalid_value"),
    ({"messages": [{"role": "user", "content": 5}]}, openai.UnprocessableEntityError, "invalid_value"),
    ({"messages": [{"content": "no role"}]}, openai.UnprocessableEntityError, "invalid_value"),
    ({"extra_body": {"stream": "yes"}}, openai.UnprocessableEntityError, "invalid_value"),
    ({"messages": [{"role": "user", "content": "What is " + "1 + " * 5000 + "1?"}]}, openai.APIStatusError,
     "request_too_large"),  # over 20,000 characters
]


@pytest.mark.parametrize("kwargs, exc, code", REFUSED, ids=[f"{i}-{c}" for i, (_, _, c) in enumerate(REFUSED)])
def test_refusals_map_to_the_sdk_exception_classes(served, client, kwargs, exc, code):
    before = _metric_sum(served, "galahad_answers_total")
    with pytest.raises(exc) as e:
        client.chat.completions.create(**{"model": "tiny", "messages": USER, **kwargs})
    assert type(e.value) is exc and e.value.code == code, (e.value, e.value.body)
    assert e.value.status_code == {openai.BadRequestError: 400, openai.NotFoundError: 404,
                                   openai.UnprocessableEntityError: 422, openai.APIStatusError: 413}[exc]
    assert set(e.value.body) >= {"message", "type", "code"} and e.value.body["type"] == "invalid_request_error"
    assert _metric_sum(served, "galahad_answers_total") == before  # refused before any answer


def test_completion_refusals(client):
    for kwargs, exc in (({"prompt": ["a", "b"]}, openai.BadRequestError),
                        ({"prompt": [1, 2, 3]}, openai.BadRequestError),
                        ({"prompt": "x", "echo": True}, openai.BadRequestError),
                        ({"prompt": "x", "best_of": 3}, openai.BadRequestError),
                        ({"prompt": "x", "model": "other"}, openai.NotFoundError),
                        ({"prompt": {"not": "text"}}, openai.UnprocessableEntityError)):
        with pytest.raises(exc):
            client.completions.create(**{"model": "tiny", **kwargs})


def test_auth_and_size_in_openai_error_format(served):
    for key in ("x", "wrong-token-0123456789"):  # (the SDK itself refuses an empty key)
        with pytest.raises(openai.AuthenticationError) as e:
            sdk(served, key).chat.completions.create(model="tiny", messages=USER)
        assert e.value.status_code == 401 and e.value.body["type"] == "authentication_error"
        assert e.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            sdk(served, key).models.list()
    code, body = served.json("GET", "/v1/models", token=None)  # no header at all
    assert code == 401 and set(body["error"]) == {"message", "type", "code", "param"}
    with pytest.raises(openai.APIStatusError) as e:  # a body over 1 MB, refused before it is read
        sdk(served).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x" * 1_100_000}])
    assert e.value.status_code == 413 and e.value.code == "request_too_large"
    code, _, raw = served.request("POST", "/v1/chat/completions", b"{not json",
                                  headers={"Content-Type": "application/json"})
    assert code == 400 and json.loads(raw)["error"]["code"] == "invalid_request"
    code, body = served.json("GET", "/v1/chat/completions")  # a route with another method
    assert code == 405 and body["error"]["type"] == "invalid_request_error"


def test_the_native_api_is_unchanged(served):
    code, body = served.json("POST", "/v1/solve", {"problem": ""})
    assert code == 400 and isinstance(body["error"], str)  # the native API keeps `{"error": "..."}`
    code, body = served.json("GET", "/v1/catalog/stats", token="wrong-token-0123456789")
    assert code == 401 and isinstance(body["error"], str)
    code, spec = served.json("GET", "/openapi.json")
    assert {"/v1/solve", "/v1/chat/completions", "/v1/completions", "/v1/models"} <= set(spec["paths"])


def test_a_full_queue_is_429_on_the_openai_routes_and_503_on_solve():
    """The mapping alone, through the app's own exception handler (over HTTP: the `--max-queued-solves 0`
    test below): the same `Busy` is OpenAI's 429 rate-limit error on the OpenAI routes and the native 503."""
    import asyncio

    from galahad.flywheel.service import app as service_app

    def handled(path: str):
        scope = {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b""}
        return asyncio.run(service_app.galahad_error(Request(scope), service_app.Busy("queue full; retry later")))

    chat = handled("/v1/chat/completions")
    assert chat.status_code == 429 and chat.headers["retry-after"] == "1"
    assert json.loads(chat.body) == {"error": {"message": "queue full; retry later", "type": "rate_limit_error",
                                               "code": "rate_limit_exceeded", "param": None}}
    solve = handled("/v1/solve")
    assert solve.status_code == 503 and json.loads(solve.body) == {"error": "queue full; retry later"}


# -- metrics ---------------------------------------------------------------------------------------

def _metrics(served) -> str:
    return served.request("GET", "/metrics")[2].decode()


def _metric_sum(served, name: str) -> float:
    return sum(value for sample, value in served.metrics().items() if sample.startswith(name))


def test_metrics_per_route_and_answer_path(served, client):
    r = client.chat.completions.create(model="tiny", messages=USER)
    client.completions.create(model="tiny", prompt="What is 1 + 1?")
    client.models.list()
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages=USER, n=9)
    text = _metrics(served)
    path = ext(r)["path"]
    for endpoint in ("/v1/chat/completions", "/v1/completions"):
        assert f'galahad_requests_total{{endpoint="{endpoint}",status="200"}}' in text
        assert f'galahad_request_seconds_count{{path="{path}",route="{endpoint}"}}' in text  # answers by route and path
    assert 'galahad_requests_total{endpoint="/v1/chat/completions",status="400"}' in text
    assert 'galahad_requests_total{endpoint="/v1/models",status="200"}' in text


# -- the protocol alone ----------------------------------------------------------------------------

def test_protocol_parsing_and_bodies():
    ask = protocol.parse_chat({"model": "m", "messages": [{"role": "system", "content": "s"}, USER[0]],
                               "temperature": 0.7, "seed": 3, "user": "u", "top_p": None,
                               "metadata": {"gold": "2", "trace": "t"}}, "m")
    assert ask == protocol.Ask("chat", "What is 1 + 1?", "2", False, False, Decoding(temperature=0.7, seed=3))
    ask = protocol.parse_chat({"model": "m", "messages": USER, "max_tokens": 9, "max_completion_tokens": 1,
                               "stop": "x", "n": 2, "logprobs": True, "top_logprobs": 3}, "m")
    assert ask.decoding == Decoding(max_tokens=1, n=2, logprobs=3, stop=("x",))
    assert protocol.parse_completion({"model": "m", "prompt": "p", "logprobs": 0, "max_tokens": 4}, "m").decoding \
        == Decoding(max_tokens=4, logprobs=0)
    with pytest.raises(protocol.Invalid, match="temperature"):
        protocol.parse_chat({"model": "m", "messages": USER, "temperature": 3}, "m")
    with pytest.raises(protocol.Unsupported) as e:  # a whole sentence, never the value cut mid-word
        protocol.parse_chat({"model": "m", "messages": USER, "tools": [{"type": "function", "function": {
            "name": "a_rather_long_function_name_that_would_be_cut", "parameters": {}}}]}, "m")
    assert str(e.value) == f"tools are not supported: {protocol._NO_TOOLS}" and str(e.value).endswith(")")
    for table in (protocol.CHAT, protocol.TEXT):  # every parameter of the SDK's requests has a rule
        assert all(v in (protocol.HONOURED, protocol.IGNORED) or isinstance(v, tuple) for v in table.values())
    for text in ("", "5", " 5", "x = 5 and y = 7 ", "a\n b"):
        assert "".join(protocol.pieces(text)) == text
    choice = Choice(answer="x = 5", finish_reason="length", verified=None, matches_gold=None, decode_tokens=3,
                    logprobs=[{"token": "x", "logprob": -0.5, "top": [{"token": "x", "logprob": -0.5}]}])
    out = SolveResult(answer="x = 5", path="hash", verified=None, matches_gold=None, gold_source=None,
                      matched_problem="p", grafted_artifacts=["a"], grafted_tokens=10, prompt_tokens=14,
                      decode_tokens=3, problem_id="i", queued=False, model_fingerprint="m" * 64,
                      runtime_fingerprint="r" * 64, seconds=0.5, finish_reason="length", choices=[choice])
    events = protocol.stream_events(protocol.Ask("chat", "q", None, True, True), out, "m", 1, "id")
    assert events[-1] == b"data: [DONE]\n\n" and all(e.startswith(b"data: ") for e in events)
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "x = 5"
    assert chunks[-1]["usage"] == {"prompt_tokens": 14, "completion_tokens": 3, "total_tokens": 17,
                                   "prompt_tokens_details": {"cached_tokens": 10}}
    assert chunks[1]["choices"][0]["logprobs"]["content"][0] == {
        "token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": [{"token": "x", "logprob": -0.5, "bytes": [120]}]}
    body = protocol.completion_body(protocol.Ask("text", "q", None, False, False), out, "m", 1, "id")
    assert body["choices"][0]["logprobs"] == {"tokens": ["x"], "token_logprobs": [-0.5], "top_logprobs": [{"x": -0.5}],
                                              "text_offset": [0]}
    assert body["choices"][0]["finish_reason"] == "length"
    assert [protocol.headers(out.model_copy(update={"verified": v}))[protocol.VERIFIED_HEADER]
            for v in (True, False, None)] == ["true", "false", "unverified"]
    ext = chunks[-2][protocol.EXTENSION]  # the galahad object: what /v1/solve renders, but the answer
    assert ext == out.model_dump(exclude={"answer"}) and "reading" in ext and "answer" not in ext
    assert protocol.error_body(409, "conflict")["error"]["code"] == "gold_conflict"
    assert protocol.error_body(500, "boom")["error"]["type"] == "server_error"


# -- slow ------------------------------------------------------------------------------------------

@pytest.mark.slow  # a second server: `--max-queued-solves 0` admits no solve, so every one is refused
def test_a_full_solve_queue_is_a_rate_limit_error_over_the_sdk(tmp_path, env, model_cache):
    seed_solution(tmp_path / "data", "tiny", model_cache, *SEEDED)
    server = Served(tmp_path / "data", ["--model", "tiny", "--no-learn", "--max-queued-solves", "0"],
                    {**env, "GALAHAD_API_TOKEN": TOKEN}, token=TOKEN)
    try:
        server.wait_ready()
        with pytest.raises(openai.RateLimitError) as got:
            sdk(server).chat.completions.create(model="tiny",
                                                              messages=[{"role": "user", "content": SEEDED[0]}])
        assert got.value.status_code == 429 and got.value.code == "rate_limit_exceeded"
        assert got.value.response.headers.get("retry-after") == "1"
        with pytest.raises(openai.RateLimitError):
            sdk(server).completions.create(model="tiny", prompt=SEEDED[0])
        code, body = server.json("POST", "/v1/solve", {"problem": SEEDED[0]})
        assert code == 503 and "retry later" in body["error"]
        assert server.json("GET", "/healthz")[0] == 200  # reads are served all the same
        assert [m.id for m in sdk(server).models.list().data] == ["tiny"]
    finally:
        assert server.stop() == 0, server.tail()
