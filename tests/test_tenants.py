"""Many tenants, one memory (issue 43 items 1-2), at the catalog, on SQLite and PostgreSQL.

- Tenants: a token is shown once and stored only as a salted hash; rotate replaces it, revoke stops it;
  `galahad tenants` drives the same in a real process (`--json` prints {"name", "token"}).
- Scopes: tenant A's problems, recalls and artifacts are invisible to B's routing (`ScopedCatalog`) and
  B's views (`catalog.scopes`); shared is visible to both; a promoted problem moves into shared, with who
  and when recorded, and B recalls it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from galahad.flywheel.app.intake import admit
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.scopes import ScopedCatalog
from galahad.flywheel.catalog.tenants import split_token, token_digest
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import Problem, problem_hash
from galahad.flywheel.problems.scope_ids import scoped_id

FP = ("model-fp", "runtime-fp")


def test_tokens_are_salted_hashes_rotated_and_revoked(catalog_url):
    with Catalog(catalog_url) as cat:
        assert not cat.tenants.any()
        tok = cat.tenants.add("alice", rpm=5, queue=3, store_bytes=1000)
        name, secret = split_token(tok)
        row = cat.tenants.get("alice")
        assert name == "alice" and secret not in json.dumps(row, default=str)
        assert row["token_hash"] == token_digest(row["token_salt"], secret) and (row["rpm"], row["queue"]) == (5, 3)
        with pytest.raises(GalahadError, match="exists"):
            cat.tenants.add("alice")
        with pytest.raises(GalahadError, match="not a tenant name"):
            cat.tenants.add("shared")
        tok2 = cat.tenants.rotate("alice")
        assert tok2 != tok and cat.tenants.get("alice")["token_hash"] != row["token_hash"]
        cat.tenants.revoke("alice")
        assert cat.tenants.get("alice")["revoked_at"] is not None and cat.tenants.any()
        assert [t["name"] for t in cat.tenants.ls()] == ["alice"]


def _learn(cat: Catalog, scope: str, text: str, gold: str) -> str:
    """Admit and record a verified attempt + recall row the way the learner does (artifact rows by SQL)."""
    from galahad.flywheel.catalog.db import now
    from galahad.flywheel.catalog.schema import TABLES

    pid = admit(cat, [Problem(id="x", problem=text, answer=gold, topic="t", template="t", source="me")], ["g"], scope,
                scope=scope)[0]
    run = cat.runs.start({"test": True})
    att = cat.runs.add_attempt(pid, run, FP[0], {}, f"Answer: {gold}", 3, 0.1, 0.1)
    ver = cat.runs.add_verification(att, "v1", True, "ok")
    art = scoped_id(text, scope)[::-1]  # any 64-hex id
    with cat.write() as conn:
        cat.insert_ignore(conn, TABLES["artifacts"], [dict(
            id=art, parent_id=None, verification_id=ver, token_start=0, token_end=3, n_tokens=3, size=10,
            model_fingerprint=FP[0], runtime_fingerprint=FP[1], dtype="f32", layer_kinds=[], token_ids=[1, 2, 3],
            location="x", created_at=now(), scope=cat.scopes.of_deposit(conn, ver, None))])
        cat.recalls.record(conn, pid, art, ver)
    cat.queue.mark(pid, "verified")
    return pid


def test_scopes_isolate_and_promotion_shares(catalog_url):
    with Catalog(catalog_url) as cat:
        a = _learn(cat, "alice", "What is zork?", "41")
        s = _learn(cat, "shared", "What is blorp?", "7")
        art_a = cat.recalls.get(a)["artifact_id"]
        assert cat.artifacts.get(art_a)["scope"] == "alice"
        A, B = ScopedCatalog(cat, "alice"), ScopedCatalog(cat, "bob")
        hit = A.recalls.matches(problem_hash("What is zork?"), None, None, None, FP)
        assert [h["id"] for h in hit["hash"]] == [a]
        assert B.recalls.matches(problem_hash("What is zork?"), None, None, None, FP)["hash"] == []
        assert B.recalls.get(problem_hash("What is zork?"), FP) is None and B.recalls.get(a, FP) is None
        assert [h["id"] for h in B.recalls.matches(problem_hash("What is blorp?"), None, None, None, FP)["hash"]] == [s]
        assert cat.scopes.problem("bob", a) is None and cat.scopes.problem("alice", a)["id"] == a
        assert not cat.scopes.artifact_visible("bob", art_a) and cat.scopes.artifact_visible("alice", art_a)
        assert cat.scopes.find("bob", "zork", 10) == [] and len(cat.scopes.find("alice", "zork", 10)) == 1
        assert cat.scopes.stats("bob")["problems"] == 1 and cat.scopes.stats("alice")["problems"] == 2
        assert {r["scope"]: r["problems"] for r in cat.scopes.by_scope()} == {"alice": 1, "shared": 1}
        # promote: A's problem moves to shared under its text hash; B now recalls it; who and when kept
        out = cat.scopes.promote(a, by="admin:test")
        assert (out["problem_id"], out["from_scope"], out["artifacts"]) == (problem_hash("What is zork?"), "alice", 1)
        got = B.recalls.get(problem_hash("What is zork?"), FP)
        assert got is not None and got["artifact_id"] == art_a and got["answer"] == "41"
        assert cat.scopes.artifact_visible("bob", art_a) and cat.problems.by_hash(a) is None
        with pytest.raises(GalahadError, match="in shared already"):
            cat.scopes.promote(out["problem_id"], by="admin:test")


def test_library_chains_are_scoped_by_name(catalog_url):
    from galahad.flywheel.memory.library_names import library_name
    from galahad.flywheel.problems.scope_ids import library_scope

    assert library_name({"template": "t1", "scope": "alice"}) == "alice/template:t1"
    assert library_name({"template": "t1", "scope": "shared"}) == "template:t1" == library_name({"template": "t1"})
    assert library_scope("alice/template:t1") == "alice" and library_scope("template:alice/x") == "shared"


def test_tenants_cli(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    def run(*a):
        return subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "tenants", *a, "--catalog", url],
                              capture_output=True, text=True, timeout=60)
    out = run("add", "alice", "--rpm", "10", "--queue", "5", "--store-bytes", "1MB", "--json")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["name"] == "alice" and made["token"].startswith("gt-alice.")
    ls = json.loads(run("ls", "--json").stdout)
    assert ls[0]["name"] == "alice" and ls[0]["rpm"] == 10 and "token_hash" not in ls[0] and made["token"] not in json.dumps(ls)
    bad = run("add", "alice")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "exists" in bad.stderr
    assert run("revoke", "alice").returncode == 0
    assert json.loads(run("ls", "--json").stdout)[0]["revoked_at"] is not None


def test_claims_are_round_robin_across_scopes(catalog_url):
    """One tenant's 1,000 queued problems beside another's 5: the 5 are all handed out in the first rounds."""
    with Catalog(catalog_url) as cat:
        cat.tenants.add("big")
        cat.tenants.add("small")

        def batch(scope, n):
            return [dict(id=scoped_id(f"What is {scope} zork {i}?", scope), text=f"What is {scope} zork {i}?",
                         answer="1", source="me", topic="t") for i in range(n)]

        cat.golds.add_checked(batch("big", 1000), lambda *_: None, scope="big")  # queued first: older
        cat.golds.add_checked(batch("small", 5), lambda *_: None, scope="small")
        first = cat.queue.claim(10, "w1", 60)
        scopes = [r["scope"] for r in first]
        assert scopes.count("small") == 5 and scopes.count("big") == 5
        more = cat.queue.claim(10, "w2", 60)
        assert [r["scope"] for r in more] == ["big"] * 10 and not {r["id"] for r in first} & {r["id"] for r in more}
