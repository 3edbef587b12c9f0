"""Memory that recalls: canonical keys, recall artifacts, the solve order, and the transfer eval on a file.

Key tests are pure. The rest runs the tiny model of the default family against a real SQLite catalog
and a real store; what the tiny (random-init) model answers is noise, so these tests check routing,
provenance and byte identity, never its accuracy (the default model's accuracy is tested in
test_flywheel.py and measured in the README).
"""

import json
import os
import subprocess
import sys

import pytest
from helpers import match_key, record_gate
from local_depositor import local_memory, verify_and_deposit

from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.evals.spec import Spec, execute
from galahad.flywheel.memory.compose import compose
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.golds import same_gold

# -- canonical keys (pure) ---------------------------------------------------------------------------

SAME = [
    ("What is 3 + 4?", ["What is 4 + 3?", "Compute 3 + 4.", "What is the sum of three and four?", "Add 4 and 3.",
                        "3 + 4 = ?", "How much is 3 plus 4?", "What do you get if you add 4 to 3?"]),
    ("What is 7 - 3?", ["Subtract 3 from 7.", "What is seven minus three?", "How much is 7 take away 3?",
                        "What is 3 subtracted from 7?", "Calculate 7-3.", "What is the difference of 7 and 3?"]),
    ("What is 3 * 4?", ["What is 4 \u00d7 3?", "What is 3 times 4?", "Multiply 3 by 4.", "Compute 4 x 3.",
                        "What is the product of four and three?", "What is 3 multiplied by 4?"]),
    ("Solve for x: x + 3 = 7.", ["If x + 3 = 7, what is x?", "Find x if 3 + x = 7.", "What number plus 3 equals 7?",
                                 "x + 3 = 7. What is x?", "Solve for x: 7 = x + 3", "If 3 + x = 7, then x = ?",
                                 "Solve x + 3 = 7 for x.", "If y + 3 = 7, what is y?", "x + 3 = 7, x = ?"]),
]


@pytest.mark.parametrize("original,paraphrases", SAME)
def test_paraphrases_share_the_canonical_key(original, paraphrases):
    key = canonical.canonical_key(original)
    assert key is not None
    for p in paraphrases:
        assert canonical.canonical_key(p) == key, p


def test_same_answer_different_mathematics_never_shares_a_key():
    assert canonical.canonical_key("What is 2 + 2?") != canonical.canonical_key("What is 3 + 1?")
    # Over a grid of problems, two keys are equal only when the problems are the same mathematics.
    problems = {}
    for a in range(10):
        for b in range(10):
            for op, text in (("+", f"What is {a} + {b}?"), ("-", f"What is {a} - {b}?"), ("*", f"What is {a} * {b}?"),
                             ("x", f"If x + {a} = {b}, what is x?")):
                # An equation's key is its linear normal form: the same solution set is the same key
                # (x + 1 = 3 and x + 2 = 4 share one), so equations are the same mathematics by solution.
                same_math = ((op, frozenset((a, b))) if op in "+*" else ("x", b - a) if op == "x"
                             else (op, a, b))
                problems.setdefault(canonical.canonical_key(text), set()).add(same_math)
    assert None not in problems
    assert all(len(v) == 1 for v in problems.values()), [v for v in problems.values() if len(v) > 1][:3]
    # Order matters where the wording says so.
    assert canonical.canonical_key("Subtract 3 from 7.") != canonical.canonical_key("Subtract 7 from 3.")
    assert canonical.canonical_key("What is 6 / 3?") != canonical.canonical_key("What is 3 / 6?")


def test_unrecognised_problems_get_no_key_and_numbers_are_a_multiset():
    for text in ("Name the capital of France.", "What is 3 + 4 in binary?", "What is 12?", "x" * 400,
                 "What is 3 + y?"):
        assert canonical.canonical_key(text) is None, text
    assert canonical.numbers("Take seven away from 3, then 7.") == "3,7,7"
    assert canonical.numbers("Calculate 7-3.") == "3,7"


# -- recall artifacts, solve order (tiny model) --------------------------------------------------------


@pytest.fixture()
def memory(tmp_path, model_cache):
    with local_memory(tmp_path, model_cache) as mem:
        yield mem


def learn(dep, catalog, text, answer, template="t", topic="arith"):
    """A verified problem deposited as the loop does it (library artifact + recall artifact)."""
    return verify_and_deposit(dep, catalog.problems.add(text, answer, "test", topic, template), answer)


def test_each_verified_solution_is_also_its_own_root_recall_artifact(memory):
    dep, catalog, store, _ = memory
    a = learn(dep, catalog, "What is 2 + 2?", "4")
    b = learn(dep, catalog, "What is 3 + 1?", "4")
    for pid, text in ((a, "What is 2 + 2?"), (b, "What is 3 + 1?")):
        rec = catalog.recalls.get(pid)
        art = catalog.artifacts.get(rec["artifact_id"])
        assert art["parent_id"] is None and art["token_start"] == 0  # alone after BOS
        assert art["token_ids"] == dep.engine.encode(f"Question: {text}\nAnswer: 4\n\n", bos=True)
        assert rec["artifact_id"] != catalog.runs.verified_solution(pid)["artifact_id"]  # the library one stays
    assert len(catalog.libraries.chain("template:t")) == 2
    # A recall row names only an accepted solution of that very problem.
    attempt = catalog.runs.add_attempt(a, None, "fp", {}, "5", 1, 0.0, 0.0)
    wrong = catalog.runs.add_verification(attempt, "test", False, "no")
    with pytest.raises(GalahadError, match="not an accepted solution"):
        dep.deposit_recall(catalog.problems.get(a), "5", wrong)


def test_solve_order_hash_key_similar_transfer_base(memory):
    dep, catalog, store, _ = memory
    two = learn(dep, catalog, "What is 2 + 2?", "4")
    three = learn(dep, catalog, "What is 3 + 4?", "7")
    odd = learn(dep, catalog, "Tell me 5 and 6 combined, please.", "11", template="odd", topic="odd")
    solver = Solver(dep.engine, catalog, store)

    def paths(text):
        return [(r.path, r.matched_problem) for r in solver.routes(text)]

    assert paths("what is  2 + 2?")[:1] == [("hash", two)]
    assert paths("What is the sum of four and three?")[0] == ("key", three)
    assert solver.overlap("What is 4 + 3?") == "key" and solver.overlap("what is 3 + 4?") == "hash"
    # Same answer, different mathematics: 3 + 1 is never answered from 2 + 2's memory.
    assert all(m != two for _, m in paths("What is 3 + 1?")) and solver.overlap("What is 3 + 1?") == "none"
    # similar and transfer answer only where an eval showed they beat the base model (no evidence: closed)
    assert paths("Tell me 5 and 6 combined.") == [("base", None)] and paths("What is 5 + 1?") == [("base", None)]
    record_gate(catalog, dep.engine.model_fingerprint, "template:odd", "similar")  # the grafted example's library
    record_gate(catalog, dep.engine.model_fingerprint, "template:t", "transfer")
    record_gate(catalog, dep.engine.model_fingerprint, "topic:arith", "transfer", route_correct=1)  # no gain: closed
    assert paths("Tell me 5 and 6 combined.")[0] == ("similar", odd)
    assert all(p != "similar" for p, _ in paths("Tell me 6 and 5 combined."))  # other order: not the same
    assert all(p != "similar" for p, _ in paths("What is 5 + 6?"))  # it parses: its key already said no
    assert [p for p, _ in paths("Name the capital of France.")] == ["base"]
    assert paths("What is 5 + 1?")[-2:] == [("transfer", None), ("base", None)]
    # solve walks exactly these routes and reports the one that answered; a recalled route is taken
    # only when its answer verifies against the matched problem's gold (the tiny model is noise).
    ans = solver.solve("What is 4 + 3?")
    assert ans.path in ("key", "transfer", "base")
    # every answer to a computable text is checked against its value: True or False, never unknown
    assert ans.computed == "7" and ans.verified is same_gold("7", ans.answer)
    assert ans.path != "key" or (ans.verified and ans.gold_source is not None)


def test_keys_of_older_problems_are_filled_in(memory):
    dep, catalog, store, _ = memory
    pid = learn(dep, catalog, "What is 3 + 4?", "7")
    with catalog.write() as conn:
        from sqlalchemy import delete

        from galahad.flywheel.catalog.schema import TABLES
        conn.execute(delete(TABLES["problem_keys"]))
    assert catalog.problems.key(pid) is None
    assert match_key(Solver(dep.engine, catalog, store), "What is 4 + 3?")["id"] == pid
    assert catalog.problems.key(pid)["canonical_key"] == canonical.canonical_key("What is 3 + 4?")


def test_reconcile_finishes_a_missing_recall_artifact(memory):
    dep, catalog, store, _ = memory
    pid = catalog.problems.add("What is 3 + 4?", "7", "test", "arith", "t")
    attempt = catalog.runs.add_attempt(pid, None, "fp", {}, "7", 1, 0.0, 0.0)
    vid = catalog.runs.add_verification(attempt, "test", True, "ok")
    # The kill fell between the library deposit and the recall deposit.
    span = dep.prefill("Question: What is 3 + 4?\nAnswer: 7\n\n", None, {"problem_id": pid})
    catalog.artifacts.deposit(store, span.artifact_id, verification_id=vid, library="template:t")
    assert [p["id"] for p in catalog.recalls.missing()] == [pid] and not catalog.queue.unfinished_deposits()
    from galahad.flywheel.learn.loop import Flywheel, Tally

    wheel = Flywheel.__new__(Flywheel)  # the loop's own reconcile, with a local depositor instead of actors
    wheel.catalog, wheel.deposits, wheel.tally = catalog, dep, Tally()
    assert wheel.reconcile() == 1
    assert not catalog.recalls.missing() and catalog.recalls.get(pid)["verification_id"] == vid


# -- text == nearest, transfer --problems end to end ---------------------------------------------------


def test_text_condition_is_byte_identical_to_the_grafted_chain(memory):
    dep, catalog, store, _ = memory
    sols = [("What is 1 + 2?", "3"), ("What is 2 * 3?", "6"), ("If x + 1 = 5, what is x?", "4")]
    tail = compose(dep.engine, catalog, store, sols)
    assert compose(dep.engine, catalog, store, sols) == tail  # content-addressed: the same chain again
    for problem in ("What is 2 + 5?", "Compute 3 * 3.", "Name a colour."):
        graft = execute(dep.engine, store, Spec("p", "nearest", problem, "0", "query", tail, max_tokens=8))
        text = execute(dep.engine, store, Spec("p", "text", problem, "0", "query", tail, max_tokens=8,
                                               recompute=True))
        assert graft["decode_tokens"] > 0
        assert text["output_token_ids"] == graft["output_token_ids"]
        assert text["output_sha256"] == graft["output_sha256"] and text["input_sha256"] == graft["input_sha256"]


@pytest.mark.slow  # `galahad eval transfer` in a fresh process: seven conditions over a problem file (~30 s+)
def test_eval_transfer_on_a_problem_file_end_to_end(memory, model_cache):
    dep, catalog, store, data = memory
    src = learn(dep, catalog, "What is 3 + 4?", "7")
    learn(dep, catalog, "Multiply 2 by 5.", "10", template="m", topic="mul")
    rows = [{"id": "a", "problem": "What is 4 + 3?", "answer": "7", "topic": "t", "template": "t",
             "source": f"paraphrase:{src}"},
            {"id": "b", "problem": "What is 3 + 4?", "answer": "7", "topic": "t", "template": "t", "source": "s"},
            {"id": "c", "problem": "What is 6 + 1?", "answer": "7", "topic": "t", "template": "t", "source": "s"}]
    path = data / "problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = data / "m.json"
    env = {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)}
    cmd = [sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(data)]
    proc = subprocess.run([*cmd, "eval", "transfer", "--model", "tiny", "--problems", str(path), "--k", "2",
                           "--json", "--out", str(manifest)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out["conditions"]) == {"base", "empty", "random", "nearest", "text", "transfer", "system"}
    # base and the ungated walk measured transfer for 6 + 1 (template t's shape): its gate's evidence, recorded
    sealed = json.loads(manifest.read_text())["manifest_sha256"]
    gates = [{k: g[k] for k in ("library", "route", "route_n", "base_n", "manifest_id", "condition")}
             for g in out["gates"]]
    assert gates == [{"library": "template:t", "route": "transfer", "route_n": 1, "base_n": 1,
                      "manifest_id": sealed, "condition": "transfer"}]
    (stored,) = catalog.gates.all()
    assert stored["open"] == (stored["route_correct"] > stored["base_correct"]) == out["gates"][0]["open"]
    libs = subprocess.run([*cmd, "catalog", "libraries"], capture_output=True, text=True, env=env, timeout=300)
    row = next(line for line in libs.stdout.splitlines() if line.startswith("template:t "))
    assert f"manifest {sealed[:8]}" in row and ("open: transfer" in row) == stored["open"]
    for c in out["conditions"].values():
        assert c["n"] == 3 and {"correct", "n", "accuracy", "ci95"} <= c.keys()
    assert {t: out["by_overlap"][t]["system"]["n"] for t in out["by_overlap"]} == {"key": 1, "hash": 1, "none": 1}
    assert out["text_identical_to_nearest"] == {"identical": 3, "n": 3}
    assert out["by_source_verified"]["True"]["system"]["n"] == 1
    assert out["comparisons"] and out["manifest"] == str(manifest)
    records = json.loads(manifest.read_text())["records"]
    nearest = {r["problem_id"]: r["output_sha256"] for r in records if r["condition"] == "nearest"}
    for r in records:
        assert {"problem_id", "problem", "condition", "overlap", "verified", "decode_tokens", "input_sha256",
                "output_sha256"} <= r.keys()
        if r["condition"] == "text":
            assert r["output_sha256"] == nearest[r["problem_id"]]
        # `problem` is always the file's text; a recall path names what it decoded after the graft.
        assert r["problem"] == {problem_hash(x["problem"]): x["problem"] for x in rows}[r["id"]] and "posed" not in r
    key_hit = next(r for r in records if r["condition"] == "system" and r["overlap"] == "key")
    assert key_hit["problem"] == "What is 4 + 3?" and key_hit["decoded"] in (None, "What is 3 + 4?")
    assert {r["overlap"] for r in records if r["problem_id"] == problem_hash("What is 4 + 3?")} == {"key"}
    for check in (["rescore", str(manifest)], ["replay", str(manifest), "--json"]):
        proc = subprocess.run([*cmd, *check], capture_output=True, text=True, env=env, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # A bad file is refused whole, in one line, before any model loads.
    path.write_text('{"id": "a"}\n')
    proc = subprocess.run([*cmd, "eval", "transfer", "--model", "tiny", "--problems", str(path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "problems.jsonl:1" in proc.stderr


def test_catalog_key_lookups_are_sql_indexed(memory):
    _, catalog, _, _ = memory
    from sqlalchemy import inspect

    insp = inspect(catalog.engine)
    assert {tuple(i["column_names"]) for i in insp.get_indexes("problem_keys")} >= {("canonical_key",), ("numbers",)}
    assert isinstance(catalog, Catalog)
