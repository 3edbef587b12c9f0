"""Many tenants, one memory, over real HTTP (issue 43): one `galahad serve` (tiny model, no learner, loopback)
per database, SQLite and PostgreSQL, for the whole module.

Tenant alice's memory is seeded as the learner leaves it (verified, deposited: a recall artifact and a
library chain, in alice's scope), then every blob is evicted: a graft of one of alice's artifacts rebuilds
it (the catalog clears its eviction), so "still evicted" means nobody's routing grafted it. Tenant bob asks
alice's texts, paraphrases (the same canonical key), problem ids and artifact ids on every endpoint (solve,
chat and completions, problems, find, artifacts and blobs, stats, metrics): no answer comes from alice's
memory, no response carries anything of hers, her ids are 404 exactly as ids that do not exist. Alice's own
solve grafts her memory (the control: the probe would have seen it). After the admin promotes a problem,
bob's solve grafts it and bob reads it. Quotas (requests per minute, queued problems, store bytes) give 429
with Retry-After, in OpenAI's error shape on the OpenAI routes.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from urllib.parse import quote

import pytest
from conftest import served_catalog
from local_depositor import LocalDepositor, verify_and_deposit
from serve_harness import GALAHAD, serve_env, serving

from galahad.flywheel.app.intake import admit
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.records import Problem, problem_hash
from galahad.flywheel.problems.scope_ids import scoped_id
from galahad.flywheel.service import request
from galahad.workers.runtime import DEFAULT_RUNTIME

pytestmark = pytest.mark.slow

ADMIN = "admin-token-0123456789abcdef"
SECRET = "quux-secret-7731"  # alice's gold for a text with no computable value: nobody else may ever see it
LEARNED = {  # alice's text: (gold, paraphrases)
    "What is 17 + 25?": ("42", ["Compute 25 + 17.", "what is 25 + 17?"]),
    "What is the zork of glim 41?": (SECRET, ["Tell me the zork of glim 41."]),
    "What is 9 * 6?": ("54", ["What is 6 * 9?"]),  # promoted to shared at the end
}
PROMOTED = "What is 9 * 6?"
SHARED_SEED = ("What is 2 + 3?", "5")
RANDOM_ID = "0123456789abcdef" * 4


def _learn(dep: LocalDepositor, scope: str, text: str, gold: str) -> str:
    pid = admit(dep.catalog, [Problem(id=f"x{abs(hash(text))}", problem=text, answer=gold, topic="t", template="t",
                                      source="seed")], ["seed"], "test", scope=scope)[0]
    verify_and_deposit(dep, pid, f" {gold}")
    dep.catalog.queue.mark(pid, "verified")
    return pid


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request, tmp_path_factory, model_cache):
    from sqlalchemy import select

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.catalog.evictions import evict
    from galahad.flywheel.catalog.schema import TABLES
    from galahad.flywheel.memory.foreign import record_runtime

    ART = TABLES["artifacts"]

    root = tmp_path_factory.mktemp(f"tenants-{request.param}")
    data, store_path = root / "data", root / "data" / "store"
    data.mkdir(parents=True)
    with served_catalog(request.param, data) as (url, extra):
        w = type("World", (), {})()
        w.url, w.store = url, LocalStore(store_path)
        dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, url, store_path)
        try:
            cat = dep.catalog
            w.tokens = {name: cat.tenants.add(name, **quota) for name, quota in (
                ("alice", {}), ("bob", {}), ("carol", {"queue": 2}), ("dave", {"store_bytes": 0}), ("erin", {"rpm": 3}),
                ("zed", {}))}
            cat.tenants.revoke("zed")
            w.ids = {text: _learn(dep, "alice", text, gold) for text, (gold, _) in LEARNED.items()}
            w.shared_id = _learn(dep, "shared", *SHARED_SEED)
            record_runtime(cat, dep.engine)
            with cat.engine.connect() as conn:
                w.arts = set(conn.execute(select(ART.c.id).where(ART.c.scope == "alice")).scalars())
            w.recall = {text: cat.recalls.get(pid)["artifact_id"] for text, pid in w.ids.items()}
            assert set(w.recall.values()) <= w.arts and len(w.arts) >= 2 * len(LEARNED), w.arts
            assert all(canonical.canonical_key(p) == canonical.canonical_key(t) for t in ("What is 17 + 25?", PROMOTED)
                       for p in LEARNED[t][1])  # the paraphrases are the same mathematics
            out = evict(cat, w.store, 0, spare_current=False)  # every blob: a graft must rebuild what it touches
            assert w.arts <= set(out["evicted"]), out
        finally:
            dep.catalog.close()
        with serving(data, ["--model", "tiny", "--no-learn", *extra], serve_env(model_cache), ADMIN) as server:
            w.server = server
            yield w


def _stages(headers: dict) -> dict[str, float]:
    """A response's Server-Timing stages."""
    return request.parse_server_timing({k.lower(): v for k, v in headers.items()}.get("server-timing"))


def evicted(w, ids) -> set[str]:
    """Those of `ids` still evicted (a graft rebuilds an evicted artifact and clears its eviction)."""
    with Catalog(w.url) as cat:
        return set(ids) & set(cat.evictions.evicted_ids())


def call(w, tenant: str | None, method: str, path: str, obj=None) -> tuple[int, dict, bytes]:
    token = ADMIN if tenant is None else w.tokens[tenant]
    body = None if obj is None else json.dumps(obj).encode()
    headers = {"Content-Type": "application/json"} if body is not None else {}
    return w.server.request(method, path, body, token=token, headers=headers)


def no_trace_of_alice(w, raw: bytes, asked: str = "") -> None:
    text = raw.decode("utf-8", "replace").replace(asked, "")  # a 404 names the id it was asked
    for secret in [*w.ids.values(), *w.arts, SECRET, "alice", w.tokens["alice"]]:
        assert secret not in text, (secret, text[:500])


# -- tokens --------------------------------------------------------------------------------------------

def test_every_endpoint_but_healthz_needs_a_valid_token_once_tenants_exist(world):
    w = world
    assert w.server.json("GET", "/healthz", token=None) == (200, {"ok": True})
    name, secret = w.tokens["bob"][3:].split(".", 1)
    for method, path in [("GET", "/v1/catalog/stats"), ("GET", "/readyz"), ("GET", "/metrics"),
                         ("GET", f"/v1/problems/{w.shared_id}"), ("POST", "/v1/chat/completions")]:
        for token in (None, "", f"gt-{name}.{secret[:-1]}x", "gt-nobody.abc", w.tokens["zed"], ADMIN[:-1]):
            code, body = w.server.json(method, path, {} if method == "POST" else None, token=token)
            assert code == 401, (path, token, body)
            assert "bearer token" in json.dumps(body), body
    assert w.server.json("GET", "/v1/catalog/stats", token=w.tokens["bob"])[0] == 200
    assert w.server.json("GET", "/v1/catalog/stats", token=ADMIN)[0] == 200


# -- isolation -------------------------------------------------------------------------------------------

def test_bob_finds_nothing_of_alices_memory_on_any_endpoint(world):
    w = world
    before = evicted(w, w.arts)
    assert before == w.arts
    for text, (_, paraphrases) in LEARNED.items():
        for asked in [text, *paraphrases]:
            code, headers, raw = call(w, "bob", "POST", "/v1/solve", {"problem": asked})
            assert code == 200, raw
            ans = json.loads(raw)
            assert ans["path"] not in ("hash", "key") and ans["matched_problem"] not in w.ids.values(), ans
            assert not set(ans["grafted_artifacts"]) & w.arts, ans
            # no timing oracle: alice's memory answers bob at base speed, a forward pass and a decode, never a
            # read-back (issue 51: a hit only reads the asker's scope and shared)
            stages = _stages(headers)
            assert ans["answer_from"] == "decode" and ans["decode_tokens"] > 0, ans
            assert {"forward", "decode"} <= set(stages) and not {"stored", "memo"} & set(stages), stages
            no_trace_of_alice(w, raw)
            code, _, raw = call(w, "bob", "POST", "/v1/chat/completions",
                                {"model": "tiny", "messages": [{"role": "user", "content": asked}]})
            assert code == 200, raw
            g = json.loads(raw)["galahad"]
            assert g["path"] not in ("hash", "key") and not set(g["grafted_artifacts"]) & w.arts, g
            no_trace_of_alice(w, raw)
            code, _, raw = call(w, "bob", "POST", "/v1/completions", {"model": "tiny", "prompt": asked})
            assert code == 200, raw
            no_trace_of_alice(w, raw)
            code, _, raw = call(w, "bob", "GET", "/v1/catalog/find?text=" + quote(asked, safe=""))
            assert code == 200 and not {p["id"] for p in json.loads(raw)["problems"]} & set(w.ids.values()), raw
            no_trace_of_alice(w, raw)
    # ids: alice's problem ids (and the texts' shared-style hashes), her artifacts and blobs: 404, the same
    # answer (up to the id asked) as an id that does not exist
    def not_found(path: str, asked: str) -> None:
        code, _, raw = call(w, "bob", "GET", path.format(asked))
        code0, _, raw0 = call(w, "bob", "GET", path.format(RANDOM_ID))
        assert (code, code0) == (404, 404), (raw, raw0)
        assert raw.replace(asked.encode(), b"ID") == raw0.replace(RANDOM_ID.encode(), b"ID"), (raw, raw0)
        no_trace_of_alice(w, raw, asked)

    for pid in [*w.ids.values(), *(problem_hash(t) for t in LEARNED)]:
        not_found("/v1/problems/{}", pid)
    for art in w.arts:
        not_found("/v1/artifacts/{}", art)
        not_found("/v1/artifacts/{}/blob", art)
    code, _, raw = call(w, "bob", "GET", "/v1/catalog/stats")
    assert code == 200, raw
    no_trace_of_alice(w, raw)
    with Catalog(w.url) as cat:
        own = {r["scope"]: r for r in cat.scopes.by_scope()}
    stats = json.loads(raw)
    assert stats["problems"] == own["shared"]["problems"] + own.get("bob", {}).get("problems", 0), (stats, own)
    assert stats["artifacts"] == own["shared"]["artifacts"] and stats["bytes"] == own["shared"]["bytes"], (stats, own)
    code, _, raw = call(w, "bob", "GET", "/metrics")
    assert code == 200 and b'tenant="bob"' in raw, raw
    no_trace_of_alice(w, raw)
    assert b"galahad_requests_total" not in raw  # the service-wide figures are the admin's
    # nothing bob did grafted alice's memory: every one of her artifacts is still evicted
    assert evicted(w, w.arts) == w.arts


def test_alice_grafts_her_own_memory_and_reads_her_ids(world):
    """The control: the same probe sees a graft when it happens."""
    w = world
    text = "What is 17 + 25?"
    code, headers, raw = call(w, "alice", "POST", "/v1/solve", {"problem": text})
    assert code == 200 and "stored" in _stages(headers), raw  # her hit: the decode stored at deposit, read back
    assert w.recall[text] in evicted(w, w.arts)  # read back: nothing grafted
    for asked in [text, LEARNED[text][1][0]]:  # the model's own decode, asked: grafted now
        code, headers, raw = call(w, "alice", "POST", "/v1/solve", {"problem": asked, "model_decode": True})
        assert code == 200 and json.loads(raw)["answer_from"] == "decode", raw
        assert "graft" in _stages(headers)
    assert w.recall[text] not in evicted(w, w.arts)  # her hash route grafted (and so rebuilt) it
    code, body = w.server.json("GET", f"/v1/problems/{w.ids[text]}", token=w.tokens["alice"])
    assert code == 200 and body["text"] == text and body["recall_artifact_id"] == w.recall[text], body
    solution = body["artifact_id"]  # its library artifact: lineage down to the problem
    code, body = w.server.json("GET", f"/v1/artifacts/{solution}", token=w.tokens["alice"])
    assert code == 200 and body["problem"]["id"] == w.ids[text] and body["run"] is None, body
    assert [lib["library"] for lib in body["libraries"]] == ["alice/template:t"], body
    code, body = w.server.json("GET", "/v1/catalog/find?text=zork", token=w.tokens["alice"])
    assert code == 200 and [p["id"] for p in body["problems"]] == [w.ids["What is the zork of glim 41?"]], body


def test_after_promotion_bob_recalls_it(world):
    w = world
    pid = w.ids[PROMOTED]
    code, body = w.server.json("POST", "/v1/memory/promote", {"problem_id": pid, "to": "shared"},
                               token=w.tokens["bob"])
    assert code == 403 and set(body) == {"error"}, body
    code, body = w.server.json("POST", "/v1/memory/promote", {"problem_id": RANDOM_ID}, token=ADMIN)
    assert code == 404, body
    assert w.recall[PROMOTED] in evicted(w, w.arts)
    code, body = w.server.json("POST", "/v1/memory/promote", {"problem_id": pid, "to": "shared"}, token=ADMIN)
    assert code == 200 and body["problem_id"] == problem_hash(PROMOTED) and body["from_scope"] == "alice", body
    assert body["promoted_by"].startswith("api:token-") and ADMIN not in json.dumps(body), body
    code, body = w.server.json("GET", f"/v1/problems/{problem_hash(PROMOTED)}", token=w.tokens["bob"])
    assert code == 200 and body["status"] == "verified" and body["recall_artifact_id"] == w.recall[PROMOTED], body
    code, headers, raw = call(w, "bob", "POST", "/v1/solve", {"problem": LEARNED[PROMOTED][1][0]})
    assert code == 200 and "stored" in _stages(headers), raw  # bob's key route read the promoted recall's decode
    code, body = w.server.json("POST", "/v1/solve", {"problem": LEARNED[PROMOTED][1][0], "model_decode": True},
                               token=w.tokens["bob"])
    assert code == 200, body
    assert w.recall[PROMOTED] not in evicted(w, w.arts)  # bob's key route grafted the promoted recall
    code, body = w.server.json("GET", f"/v1/artifacts/{w.recall[PROMOTED]}", token=w.tokens["bob"])
    assert code == 200 and body["artifact"]["id"] == w.recall[PROMOTED], body
    code, body = w.server.json("GET", f"/v1/problems/{problem_hash(PROMOTED)}", token=w.tokens["bob"])
    solution = body["artifact_id"]  # moved to shared with it; its lineage is cut at bob's view
    code, body = w.server.json("GET", f"/v1/artifacts/{solution}", token=w.tokens["bob"])
    assert code == 200 and body["problem"]["id"] == problem_hash(PROMOTED), body
    assert body["libraries"] == [] and body["artifact"]["parent_id"] is None, body  # alice's chain stays hers
    raw = json.dumps(body).encode()
    for other in set(w.ids.values()) - {pid}:
        assert other.encode() not in raw
    assert b"alice" not in raw


# -- quotas ----------------------------------------------------------------------------------------------

def _retry_after(headers: dict) -> int:
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    assert value is not None and int(value) >= 1, headers
    return int(value)


def test_conflicting_concurrent_submits_one_200_one_409_every_time(world):
    """20 pairs over HTTP, each pair's two submits sent at the same moment with different golds for one text
    (no computable value: only the two callers vouch for it): the check is atomic with the insert, so exactly
    one is taken (200) and the other refused (409), every time, on both databases."""
    import threading

    w = world
    tag = uuid.uuid4().hex[:8]
    outcomes = []
    for i in range(20):
        text = f"What is the blorp {tag} of wug {i}?"
        results: list[int] = []
        start = threading.Barrier(2)

        def submit(gold: str, text=text, results=results, start=start):
            body = [{"id": f"r{gold}", "problem": text, "answer": gold, "topic": "t", "source": "race"}]
            start.wait()
            results.append(call(w, "bob", "POST", "/v1/problems", body)[0])

        threads = [threading.Thread(target=submit, args=(g,)) for g in ("1", "2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        outcomes.append(sorted(results))
    assert outcomes == [[200, 409]] * 20, outcomes


def test_quotas_are_429_with_retry_after(world):
    w = world
    probs = [{"id": f"c{i}", "problem": f"What is {30 + i} + 4?", "answer": str(34 + i), "topic": "t",
              "source": "t"} for i in range(3)]
    code, _, raw = call(w, "carol", "POST", "/v1/problems", probs[:2])
    assert code == 200, raw
    code, headers, raw = call(w, "carol", "POST", "/v1/problems", probs[2:])
    assert code == 429 and set(json.loads(raw)) == {"error"} and "quota" in json.loads(raw)["error"], raw
    _retry_after(headers)
    code, headers, raw = call(w, "carol", "POST", "/v1/solve", {"problem": "What is 50 + 4?", "gold": "54"})
    assert code == 429 and set(json.loads(raw)) == {"error"}, raw
    _retry_after(headers)
    code, headers, raw = call(w, "carol", "POST", "/v1/chat/completions",
                              {"model": "tiny", "messages": [{"role": "user", "content": "What is 51 + 4?"}],
                               "metadata": {"gold": "55"}})
    err = json.loads(raw)["error"]
    assert code == 429 and err["type"] == "rate_limit_error" and err["code"] and err["message"], raw
    _retry_after(headers)
    code, _, raw = call(w, "carol", "POST", "/v1/solve", {"problem": "What is 52 + 4?"})  # no gold: answered
    assert code == 200 and json.loads(raw)["queued"] is False, raw  # learning from use stops at the quota
    code, headers, raw = call(w, "dave", "POST", "/v1/problems", probs[:1])
    assert code == 429 and "bytes" in json.loads(raw)["error"], raw
    _retry_after(headers)
    # erin: 3 requests a minute; the next is refused (and not counted), natively and in OpenAI's shape
    codes = [call(w, "erin", "GET", "/v1/catalog/stats")[0] for _ in range(3)]
    assert codes == [200, 200, 200], codes
    code, headers, raw = call(w, "erin", "GET", "/v1/catalog/stats")
    assert code == 429 and set(json.loads(raw)) == {"error"}, raw
    assert 1 <= _retry_after(headers) <= 60
    code, headers, raw = call(w, "erin", "POST", "/v1/chat/completions",
                              {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})
    assert code == 429 and json.loads(raw)["error"]["type"] == "rate_limit_error", raw
    _retry_after(headers)
    assert call(w, "bob", "GET", "/v1/catalog/stats")[0] == 200  # another tenant is not slowed


# -- per tenant figures ----------------------------------------------------------------------------------

def test_metrics_and_stats_per_tenant(world, model_cache):
    w = world
    assert call(w, "bob", "POST", "/v1/solve", {"problem": "What is 1 + 1?"})[0] == 200
    code, _, raw = call(w, None, "GET", "/metrics")
    assert code == 200, raw
    text = raw.decode()
    assert 'galahad_tenant_requests_total{endpoint="/v1/solve",status="200",tenant="bob"}' in text, text[-3000:]
    assert 'tenant="erin"' in text and 'status="429"' in text
    code, body = w.server.json("GET", "/v1/catalog/stats", token=ADMIN)
    assert code == 200 and {"alice", "bob", "carol", "shared"} <= {s["scope"] for s in body["scopes"]}, body
    env = serve_env(model_cache)
    out = subprocess.run([*GALAHAD, "--data", str(w.server.data), "catalog", "--catalog", w.url, "stats", "--tenant",
                          "alice", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    mine = json.loads(out.stdout)
    with Catalog(w.url) as cat:
        assert mine == {k: v for k, v in cat.scopes.stats("alice").items() if k != "scope"}


# -- galahad run --tenant ----------------------------------------------------------------------------------

def test_run_learns_into_the_tenants_scope(tmp_path, model_cache):
    env, data = serve_env(model_cache), tmp_path / "data"
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"id": "r0", "problem": "What is 60 + 1?", "answer": "61", "topic": "t", "source": "t"})
                        + "\n" + json.dumps({"problem": "What is 61 + 1?", "answer": "62"}) + "\n")  # a short line

    def galahad(*args):
        return subprocess.run([*GALAHAD, "--data", str(data), *args], env=env, capture_output=True, text=True,
                              timeout=900)

    assert galahad("tenants", "add", "alice", "--json").returncode == 0
    bad = galahad("run", "--tenant", "nobody", "--problems", str(problems), "--model", "tiny", "--no-progress")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown tenant 'nobody'" in bad.stderr, bad.stderr
    out = galahad("run", "--tenant", "alice", "--problems", str(problems), "--model", "tiny", "--k", "1",
                  "--max-tokens", "2", "--no-progress", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
        mine = cat.scopes.ls("alice")
        assert sorted(r["text"] for r in mine) == ["What is 60 + 1?", "What is 61 + 1?"], mine
        assert cat.scopes.ls("shared") == [] and {r["scope"] for r in cat.scopes.by_scope()} == {"alice"}
        short = cat.problems.get(scoped_id("What is 61 + 1?", "alice"))  # its defaults: docs/problems.md
        assert (short["source"], short["external_id"], short["topic"]) == ("p.jsonl", problem_hash("What is 61 + 1?"),
                                                                           "p.jsonl"), short
