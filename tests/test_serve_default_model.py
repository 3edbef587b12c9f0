"""`galahad serve` on the default model (gemma3-270m), learner on, over real HTTP: problems submitted with gold
answers over both protocols (the native `POST /v1/problems` and OpenAI's chat completions with
`metadata.gold`) are learned, then each learned problem is answered by recurrence over both: `/v1/solve` and
chat completions (plain, capped by `max_tokens`, streamed).

One server and one learning run prove both protocols (slow tier: the model's start and the learning take
minutes); the tiny-model tests in test_service.py and test_openai_api.py cover each endpoint's contract."""

import time

import openai
import pytest
from serve_harness import Served, serve_env

from galahad.flywheel.catalog import problem_hash

pytestmark = pytest.mark.slow
USED = "What is 6 + 6?"  # issue 50: learned from use, then recalled by hash as `+ 12` and labelled false


def ext(obj) -> dict:
    return obj.to_dict()["galahad"]


def test_default_model_learns_over_both_protocols_then_answers_by_recurrence_over_both(tmp_path, model_cache):
    from galahad.flywheel.problems.families import generate

    problems = generate("add1", 6, seed=0)
    native, protocol = problems[:3], problems[3:]
    server = Served(tmp_path / "data", [], serve_env(model_cache))  # the default model, learner on
    try:
        server.wait_ready(900)
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused-on-open-loopback", max_retries=0,
                               timeout=900)
        model = client.models.list().data[0].id
        assert model == "gemma3-270m"
        code, body = server.json("POST", "/v1/problems", [p.to_dict() for p in native])
        assert code == 200, body
        assert len(body["problems"]) == len(native), body
        for p in protocol:
            r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": p.problem}],
                                               metadata={"gold": p.answer})
            assert ext(r)["queued"] is True or ext(r)["verified"] is True, ext(r)
        code, used = server.json("POST", "/v1/solve", {"problem": USED})  # its computed value is its gold
        assert code == 200 and used["computed"] == "12" and used["reading"] == "6 + 6", used
        texts = [p.problem for p in problems] + [USED]
        deadline, learned, statuses = time.monotonic() + 1800, [], []
        while time.monotonic() < deadline:
            statuses = [server.json("GET", f"/v1/problems/{problem_hash(t)}")[1] for t in texts]
            learned = [s for s in statuses if s["artifact_id"] and s["recall_artifact_id"]]
            if all(s["status"] in ("verified", "failed") for s in statuses):
                break
            time.sleep(1)
        assert learned, f"the learner deposited nothing: {statuses}"
        if any(s["text"] == USED for s in learned):  # a recall the verifier accepts is never labelled false
            code, ans = server.json("POST", "/v1/solve", {"problem": USED})
            assert code == 200 and ans["path"] == "hash" and ans["verified"] is True, ans
        gold = {p.problem: p.answer for p in problems}
        for s in [s for s in learned if s["text"] != USED]:
            code, ans = server.json("POST", "/v1/solve", {"problem": s["text"]})  # the native API
            assert code == 200, ans
            assert ans["path"] == "hash" and ans["verified"] is True, ans
            assert ans["decode_tokens"] <= 8 and ans["grafted_artifacts"] == [s["recall_artifact_id"]], ans
            assert ans["queued"] is False
            r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": s["text"]}])
            g = ext(r)  # OpenAI's protocol: the same answer, path and graft
            assert g["path"] == "hash" and g["verified"] is True and g["decode_tokens"] <= 8, g
            assert g["grafted_artifacts"] == [s["recall_artifact_id"]] and g["queued"] is False, g
            assert r.choices[0].message.content == s["verified_answer"] == gold[s["text"]] == ans["answer"]
            cut = client.chat.completions.create(model=model, messages=[{"role": "user", "content": s["text"]}],
                                                 max_tokens=1, metadata={"answer_policy": "model"})
            assert cut.choices[0].finish_reason == "length" and ext(cut)["verified"] is not True, ext(cut)
            assert cut.usage.completion_tokens == 1  # the model's cut answer: never verified
            capped = client.chat.completions.create(model=model, max_tokens=1,
                                                    messages=[{"role": "user", "content": s["text"]}])
            assert capped.choices[0].message.content == gold[s["text"]] and ext(capped)["verified"] is True, \
                ext(capped)  # the default policy: the computed value the cut answer fails, verified
            chunks = list(client.chat.completions.create(model=model, stream=True,
                                                         messages=[{"role": "user", "content": s["text"]}]))
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == gold[s["text"]]
    finally:
        assert server.stop() == 0, server.tail()
