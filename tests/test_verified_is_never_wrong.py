"""`verified: true` means exactly one thing: the catalog's verified answer to this same problem.

The attacker's probes (issue "A verified answer is never wrong"): near-miss texts with different mathematics
never reach a learned problem's gold (no hash or key route; `similar` is a worked example whose answer is
never verified); golds are checked against computable values and conflicting golds are refused, by file and
by the answering layer; NUL, lone surrogates and over-budget prompts are refused before any forward.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import match_key
from local_depositor import local_memory, verify_and_deposit

from galahad.flywheel.app.intake import GoldConflict, admit
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.config import ServiceConfig
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems.records import Problem
from galahad.flywheel.service.answering import Answering, NotFound, TooLarge
from galahad.verifier.verifier import Verifier

LEARNED = {"What is 9 - 3?": "6", "What is 2 + 3?": "5", "What is 4 + 3?": "7", "What is 10 - 4?": "6",
           "What is 6 * 2?": "12", "Solve for x: x + 2 = 5": "3", "What is 3 + 4?": "7", "Multiply 3 by 4.": "12",
           "What is 8 / 2?": "4"}
# Each probe has mathematics different from every learned problem (issue 20's rows, verbatim).
PROBES = ["What is 9 mod 3?", "What is 2 xor 3?", "What is 4 + 3 squared?", "What is 4² + 3?",
          "What is minus 4 plus 3?", "What is 10 thousand - 4?", "What is 4 + 3%?", "What is 4! + 3?",
          "What is 6 to the 2?", "Solve for x: 2x = 5", "Solve for x: x + 2 > 5", "Solve for y: x + 2 = 5",
          "What is 3 + 4!", "Multiply 3 by 4!", "Solve for x: x + 2 = 5!", "What is 8 // 2?", "What is 0x10 + 2?",
          "What is twenty-ten?", "What is the difference between 2 and 3?"]


def item(pid: str, text: str, answer: str, source: str = "test") -> Problem:
    return Problem(id=pid, problem=text, answer=answer, topic="arith", template="t", source=source)


@pytest.fixture()
def memory(tmp_path, model_cache):
    with local_memory(tmp_path, model_cache) as mem:
        yield mem


def learn(dep, catalog, text, answer):
    """A verified problem deposited as the loop does it (library artifact + recall artifact)."""
    return verify_and_deposit(dep, admit(catalog, [item(text[:16], text, answer)], ["test"], "test")[0], answer)


def test_near_misses_never_reach_a_learned_gold(memory):
    dep, catalog, store, _ = memory
    for text, answer in LEARNED.items():
        learn(dep, catalog, text, answer)
    solver = Solver(dep.engine, catalog, store)
    for probe in PROBES:
        routes = list(solver.routes(probe))
        assert all(r.gold is None for r in routes), (probe, [(r.path, r.decoded) for r in routes])
        assert all(r.path not in ("hash", "key") for r in routes), probe
        for r in routes:
            if r.path == "similar":  # a worked example: the asked question is decoded, never verified
                assert r.decoded == probe and r.matched_problem is not None
    # the learned problems themselves, and true paraphrases, do reach their gold
    assert [r.path for r in solver.routes("What is 3 + 4?")][:1] == ["hash"]
    assert [(r.path, r.gold) for r in solver.routes("Add 4 and 3.")][:1] == [("key", "7")]
    ans = solver.solve("What is 9 mod 3?")  # keyed as its own mathematics (value 0), never as "9 - 3"
    assert ans.path not in ("hash", "key") and ans.matched_problem is None
    assert ans.computed == "0" and ans.verified is Verifier().check_answer("0", ans.answer).verified  # checked against 0, not 6


def test_recalls_carry_gold_provenance(memory):
    dep, catalog, store, _ = memory
    learn(dep, catalog, "What is 2 + 3?", "5")
    pid = admit(catalog, [item("w", "How many legs does a spider have?", "8", source="zoo")], ["w"], "api:x")[0]
    assert catalog.problems.get(problem_hash("What is 2 + 3?"))["gold_source"] == "computed"
    assert catalog.problems.get(pid)["gold_source"] == "api:x:zoo"
    hit = match_key(Solver(dep.engine, catalog, store), "Add 2 and 3.")
    assert hit["gold_source"] == "computed"


def test_golds_are_checked_and_conflicts_refused(tmp_path):
    catalog = Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}")
    with pytest.raises(GalahadError, match="disagrees with the problem's computed value 2"):
        admit(catalog, [item("a", "What is 1 + 1?", "3")], ["f:1"], "file:f")
    with pytest.raises(GalahadError, match="f:2: conflicting golds for the same text"):
        admit(catalog, [item("a", "Who wrote it?", "me"), item("b", "who wrote  it?", "you")], ["f:1", "f:2"], "f")
    assert catalog.stats()["problems"] == 0  # nothing half-written
    admit(catalog, [item("a", "What is 7 + 8?", "15"), item("w", "Who wrote it?", "me")], ["f:1", "f:2"], "f")
    admit(catalog, [item("a", "What is 7 + 8?", "15.0")], ["g:1"], "g")  # the same value: agrees
    with pytest.raises(GoldConflict, match="conflicts with gold 'me'"):
        admit(catalog, [item("w", "Who wrote it?", "you")], ["g:1"], "g")  # resubmitted, other gold: no first-wins
    with pytest.raises(GoldConflict, match="canonical key"):  # a wrong gold planted past the intake is caught
        catalog.problems.add_many([dict(text="Add 8 and 7.", answer="16", source="raw", topic="t")])  # planted raw
        admit(catalog, [item("b", "What is the sum of 7 and 8?", "15")], ["g:2"], "g")
    catalog.close()


def test_answering_refuses_wrong_golds_nul_surrogates_and_big_prompts(memory):
    dep, catalog, store, _ = memory
    a = Answering(dep.engine, catalog, store, ServiceConfig(max_prompt_tokens=200))
    with pytest.raises(GalahadError, match="computed value 6"):
        a.solve("What is 3 * 2?", "12")
    assert catalog.stats()["problems"] == 0
    for bad in ("What is 1 + 1?\x00", "What is 1 + 1?\ud800"):
        with pytest.raises(GalahadError, match="NUL|surrogate"):
            a.solve(bad)
    with pytest.raises(TooLarge, match="prefills at most 200"):
        a.solve("What is " + "1 + " * 300 + "1?")
    with pytest.raises(NotFound):
        a.problem(problem_hash("What is 1 + 1?") + "\n")
    out = a.solve("What is 5 + 2?", "7")
    # not memory's answer, but a computable text: the answer is checked against its value (7), never unknown
    assert out.verified is Verifier().check_answer("7", out.answer).verified and out.computed == "7"
    assert out.matches_gold in (True, False) and out.queued is True
    assert catalog.problems.get(out.problem_id)["gold_source"] == "computed"


def test_run_refuses_a_file_with_a_wrong_or_conflicting_gold(tmp_path, model_cache):
    env = {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)}
    rows = [{"id": "a", "problem": "What is 2 + 2?", "answer": "4", "topic": "t", "source": "s"},
            {"id": "b", "problem": "What is 1 + 1?", "answer": "3", "topic": "t", "source": "s"}]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "galahad.flywheel.cli", "--data", str(tmp_path / "d"), "run", "--model", "tiny",
           "--problems", str(path), "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode != 0 and f"{path}:2: gold '3' disagrees" in out.stderr and "value 2" in out.stderr
    assert "read as 1 + 1" in out.stderr  # the refusal shows what the text was read as
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "d").exists()  # nothing started
    rows[1] = {"id": "b", "problem": "Add 2 and 2.", "answer": "5", "topic": "t", "source": "s"}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    check = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "problems", "check", str(path)],
                           capture_output=True, text=True, env=env, timeout=300)
    assert check.returncode == 1
    assert f"{path}:2: gold '5' disagrees" in check.stdout and f"at {path}:1" in check.stdout
    keys = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "problems", "key", "--json"],
                          input="Add 2 and 2.\nWhat is 2 + 2?\nWhat is 2 + 2!\n", capture_output=True, text=True,
                          env=env, timeout=300)
    got = [json.loads(line) for line in keys.stdout.splitlines()]
    assert got[0]["key"] == got[1]["key"] is not None and got[2] == {"text": "What is 2 + 2!", "key": None, "value": None,
                                                                   "reading": None}
    assert got[0]["value"] == got[1]["value"] == "4"  # each key's value beside it
    assert got[0]["reading"] == got[1]["reading"] == "2 + 2"  # and what the text was read as


def test_problem_files_refuse_nul_and_lone_surrogates():
    from galahad.flywheel.problems.records import problem_from_dict

    for bad in ("What is 1 + 1?\x00", "What is 1 + 1?\ud800"):
        with pytest.raises(GalahadError, match="NUL character or a lone surrogate"):
            problem_from_dict({"id": "a", "problem": bad, "answer": "2", "topic": "t", "source": "s"}, "f:1")


def test_the_client_drops_its_token_on_a_redirect_to_another_origin():
    import http.server
    import threading

    from galahad.flywheel.service.client import Client, ServiceError

    seen: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "nothing here"}')

        def log_message(self, *args):
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirector(Elsewhere):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{other.server_port}/v1/catalog/stats")
            self.end_headers()

    home = http.server.HTTPServer(("127.0.0.1", 0), Redirector)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (home, other)]
    for t in threads:
        t.start()
    try:
        with pytest.raises(ServiceError, match="nothing here"):
            Client(f"http://127.0.0.1:{home.server_port}", token="t" * 20).stats()
        assert seen == ["Bearer " + "t" * 20, None]  # sent home, dropped for the other origin
    finally:
        for s in (home, other):
            s.shutdown()
            s.server_close()
