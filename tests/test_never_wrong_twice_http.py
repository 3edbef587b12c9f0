"""Never wrong twice (issue 52), over real HTTP, on SQLite and PostgreSQL, with tenants: one `galahad serve`
per backend (tiny model, no learner, loopback) over a catalog where the learner's own code
(`Flywheel._gold_solution`, a local depositor) left gold solutions in shared and in tenant acme's scope.

- provenance: `/v1/problems/{id}` says `solution: gold`, `/ui/data`'s latest verified problems and the
  catalog stats count them; acme's gold solution stays in acme's scope (404 to bob);
- right answers: the tiny model does not know 7 * 8, so the default policy answers the computed value
  (`path: computed`, verified, `model_answer` the model's), on `/v1/solve`, the OpenAI content, its
  `galahad` object and its `X-Galahad-*` headers; `answer_policy: model` (request field, OpenAI metadata)
  gives the model's answer labelled wrong;
- a failed problem asked again, its backoff passed, is queued again.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime

import pytest
from conftest import served_catalog
from local_depositor import LocalDepositor
from serve_harness import serve_env, serving

from galahad.flywheel.app.intake import admit
from galahad.flywheel.config import LoopConfig
from galahad.flywheel.learn.background import BackgroundDeposits
from galahad.flywheel.learn.loop import Flywheel
from galahad.flywheel.memory.foreign import record_runtime
from galahad.flywheel.problems.records import problem_from_dict
from galahad.verifier.verifier import Verifier
from galahad.workers.runtime import DEFAULT_RUNTIME

pytestmark = pytest.mark.slow

ADMIN = "admin-token-52-0123456789abcdef"
GOLD_SHARED, GOLD_ACME = ("What is 12 * 12?", "144"), ("What is 13 * 3?", "39")
ASKED = "What is 7 * 8?"  # the tiny model does not know it; its computed value is 56
FAILED = ("What is 11 + 31?", "42")


def _gold_solutions(dep: LocalDepositor, items: list[tuple[str, str, str]]) -> dict[str, str]:
    """Admit each (text, gold, scope), claim it and let the learner's code deposit its gold solution (as when
    its sampling failed); {text: problem id}."""
    cat = dep.catalog
    ids = {text: admit(cat, [problem_from_dict({"problem": text, "answer": gold})], ["t"], "test", scope=scope)[0]
           for text, gold, scope in items}
    wheel = Flywheel(cat, dep.store, [], None, dep.engine.model_fingerprint, LoopConfig())
    wheel.deposits, spans, refs = dep, {}, itertools.count()

    def submit(segment, tail, extra, recall_of=None):
        ref = next(refs)
        spans[ref] = dep.prefill(segment, tail, extra, recall_of)
        return ref

    wheel.background = BackgroundDeposits(dep, submit, spans.pop)
    run_id = cat.runs.start({})
    for problem in cat.queue.claim(len(ids), "seed", 60.0):
        assert wheel._gold_solution(run_id, problem), problem["text"]
    while wheel.background.refs():
        wheel.background.done(wheel.background.refs()[0])
    return ids


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request, tmp_path_factory, model_cache):
    from sqlalchemy import update

    from galahad.flywheel.catalog.schema import TABLES

    root = tmp_path_factory.mktemp(f"nwt-{request.param}")
    data, store_path = root / "data", root / "data" / "store"
    data.mkdir(parents=True)
    with served_catalog(request.param, data) as (url, extra):
        w = type("World", (), {})()
        dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, url, store_path)
        try:
            cat = dep.catalog
            w.tokens = {name: cat.tenants.add(name) for name in ("acme", "bob")}
            w.ids = _gold_solutions(dep, [(*GOLD_SHARED, "shared"), (*GOLD_ACME, "acme")])
            (failed,) = admit(cat, [problem_from_dict({"problem": FAILED[0], "answer": FAILED[1]})], ["t"], "test")
            cat.queue.claim(1, "seed", 60.0)
            cat.queue.mark(failed, "failed", {"attempts": 8, "distinct_answers": 1, "no_answer": 0,
                                              "most_common": {"answer": "41", "count": 8}, "closest": None})
            with cat.write() as conn:  # it failed long ago: its backoff has passed (no test waits on a clock)
                conn.execute(update(TABLES["problems"]).where(TABLES["problems"].c.id == failed)
                             .values(updated_at=datetime(2000, 1, 1)))
            w.failed = failed
            record_runtime(cat, dep.engine)
        finally:
            dep.catalog.close()
        with serving(data, ["--model", "tiny", "--no-learn", *extra], serve_env(model_cache), ADMIN) as server:
            w.server = server
            yield w


def _post(w, path: str, obj: dict, token: str = ADMIN) -> tuple[int, dict, dict]:
    code, headers, raw = w.server.request("POST", path, json.dumps(obj).encode(), token=token,
                                          headers={"Content-Type": "application/json"})
    return code, {k.lower(): v for k, v in dict(headers).items()}, json.loads(raw)


def test_gold_solutions_show_their_provenance_and_stay_in_their_scope(world):
    w = world
    code, shared = w.server.json("GET", f"/v1/problems/{w.ids[GOLD_SHARED[0]]}", token=ADMIN)
    assert code == 200 and shared["status"] == "verified" and shared["solution"] == "gold", shared
    assert shared["verified_answer"] == GOLD_SHARED[1] and shared["recall_artifact_id"]
    acme_id = w.ids[GOLD_ACME[0]]
    code, own = w.server.json("GET", f"/v1/problems/{acme_id}", token=w.tokens["acme"])
    assert code == 200 and own["solution"] == "gold" and own["verified_answer"] == GOLD_ACME[1], own
    assert w.server.json("GET", f"/v1/problems/{acme_id}", token=w.tokens["bob"])[0] == 404  # acme's scope only
    code, stats = w.server.json("GET", "/v1/catalog/stats", token=ADMIN)
    assert code == 200 and stats["gold_solutions"] == 2, stats
    code, page = w.server.json("GET", "/ui/data", token=ADMIN)
    assert code == 200 and {r["provenance"] for r in page["latest"]} == {"gold"}, page["latest"]


def test_the_computed_value_answers_every_surface_unless_the_policy_is_model(world):
    w = world
    code, _, model = _post(w, "/v1/solve", {"problem": ASKED, "answer_policy": "model"})
    assert code == 200 and model["computed"] == "56" and model["model_answer"] is None, model
    if Verifier().check_answer("56", model["answer"]).verified:
        pytest.fail(f"the tiny model answered {ASKED!r} right ({model['answer']!r}): pick a question it gets wrong")
    assert model["verified"] is False and model["path"] != "computed"
    code, _, ours = _post(w, "/v1/solve", {"problem": ASKED})
    assert code == 200, ours
    assert (ours["answer"], ours["path"], ours["verified"], ours["model_answer"], ours["gold_source"]) == (
        "56", "computed", True, model["answer"], "computed"), ours
    assert ours["reason"] is None and ours["queued"] is True  # learned from use all the same
    chat = {"model": "tiny", "messages": [{"role": "user", "content": ASKED}]}
    code, h, out = _post(w, "/v1/chat/completions", chat)
    assert code == 200 and out["choices"][0]["message"]["content"] == "56", out
    ext = out["galahad"]
    assert (ext["path"], ext["verified"], ext["model_answer"]) == ("computed", True, model["answer"])
    assert (h["x-galahad-verified"], h["x-galahad-path"]) == ("true", "computed")
    code, h, raw = _post(w, "/v1/chat/completions", {**chat, "metadata": {"answer_policy": "model"}})
    assert code == 200 and raw["choices"][0]["message"]["content"] == model["answer"], raw
    assert raw["galahad"]["verified"] is False and raw["galahad"]["model_answer"] is None
    assert (h["x-galahad-verified"], h["x-galahad-path"]) == ("false", model["path"])
    code, _, bad = _post(w, "/v1/solve", {"problem": ASKED, "answer_policy": "gold"})
    assert code == 400 and "answer_policy must be one of computed, model" in json.dumps(bad), bad


def test_a_failed_problem_asked_again_is_queued_again(world):
    w = world
    code, _, out = _post(w, "/v1/solve", {"problem": FAILED[0]})
    assert code == 200 and out["queued"] is True, out
    code, status = w.server.json("GET", f"/v1/problems/{w.failed}", token=ADMIN)
    assert code == 200 and status["status"] == "pending", status
