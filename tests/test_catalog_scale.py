"""A catalog of a million: classifying a new problem is one seek on the shape index (migration 0005), on
SQLite and PostgreSQL: the statements and rows a classify reads do not grow with the catalog, the plan
names the index, and rows written without a shape (an import) are shaped before they are needed."""

from __future__ import annotations

import pytest
from sqlalchemy import event, insert

from galahad.flywheel.catalog import Catalog, now, problem_hash
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems.shapes import shape, shape_hash

INDEX = "ix_problem_shapes_shape_hash"


def _gsm_like(lo: int, hi: int) -> list[dict]:
    """Problems like GSM8K's: every one its own template (its words differ, not only its numbers)."""
    return [dict(text=f"Person{chr(97 + i % 26)}{i // 26} has {i} coins and finds 3 more. How many coins now?",
                 answer=str(i + 3), source="bench", topic="word", template=f"gsm/{i}") for i in range(lo, hi)]


class _Statements:
    """Every SQL statement (with its parameters) the catalog's engine runs while listening."""

    def __init__(self, engine):
        self.engine, self.seen = engine, []

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._on)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._on)

    def _on(self, conn, cursor, statement, parameters, context, executemany):
        if statement.strip().upper() != "BEGIN":  # SQLite's explicit transaction start
            self.seen.append((statement, parameters))


def test_shape_is_the_numbers_masked():
    assert shape("What is  12 + -3.5?") == shape("what is 7 + 9?") == "what is # + #?"
    assert shape_hash("What is 1 + 2?") == shape_hash("WHAT IS 30 + 40?") != shape_hash("What is 1 - 2?")


def test_classify_finds_the_oldest_problem_of_the_shape(catalog_url):
    with Catalog(catalog_url) as cat:
        cat.problems.add("What is 1 + 2?", "3", "me", "addition", "add/t0")
        cat.problems.add("What is 5 + 6?", "11", "me", "addition", "add/t0")
        cat.problems.add("What is 4 + 4?", "8", "other", "sums", "sums/x")  # same shape, a newer group
        cat.problems.add("What is 9 - 2?", "7", "me", "subtraction", "sub/t0")
        solver = Solver(None, cat, None)
        assert solver.classify("what is 70 + 80?") == {"template": "add/t0", "topic": "addition"}
        assert solver.classify("What is 70 - 8?") == {"template": "sub/t0", "topic": "subtraction"}
        assert solver.classify("What is 70 * 8?") is None
        # re-adding an existing problem keeps its shape row (and its age)
        cat.problems.add("What is 4 + 4?", "8", "other", "sums", "sums/x")
        assert cat.problems.classify("What is 2 + 2?")["template"] == "add/t0"


def test_rows_written_without_a_shape_are_shaped_before_classify(catalog_url):
    with Catalog(catalog_url) as cat:
        t = now()
        text = "Zed has 4 hats and buys 2 more. How many hats?"
        with cat.write() as conn:  # as an import or a pre-0005 catalog leaves it: a problem row, no shape
            conn.execute(insert(TABLES["problems"]), [dict(
                id=problem_hash(text), text=text, answer="6", source="old", topic="word", template="hats",
                status="pending", claims=0, created_at=t, updated_at=t)])
        assert cat.problems.classify("Zed has 9 hats and buys 1 more. How many hats?") is None
        solver = Solver(None, cat, None)
        assert solver.classify("Zed has 9 hats and buys 1 more. How many hats?") == {"template": "hats",
                                                                                      "topic": "word"}
        assert cat.problems.ensure_shapes() == 0


def test_classify_reads_one_row_whatever_the_catalog_size(catalog_url, backend):
    with Catalog(catalog_url) as cat:
        solver = Solver(None, cat, None)
        per_size = []
        for lo, hi in ((0, 20), (20, 600)):
            cat.problems.add_many(_gsm_like(lo, hi))
            solver._keyed = False  # a new process would shape and key once, before its first classify
            solver.classify("warm up")
            asked = "Personb0 has 99 coins and finds 3 more. How many coins now?"
            with _Statements(cat.reader) as st:
                assert solver.classify(asked) == {"template": "gsm/1", "topic": "word"}
                assert solver.classify("Nobody has 1 coin. How many coins now?") is None
            per_size.append(len(st.seen))
            statement, params = st.seen[0]
        assert per_size == [2, 2]  # one statement per classify, at 20 problems and at 600
        assert "GROUP BY" not in statement.upper()
        with cat.engine.connect() as conn:
            if backend == "sqlite":
                plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params))
                assert INDEX in plan and "SCAN problem_shapes" not in plan, plan
            else:
                conn.exec_driver_sql("ANALYZE problem_shapes")
                conn.exec_driver_sql("SET enable_seqscan = off")  # small tables: ask whether the index can serve it
                plan = " ".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {statement}", params))
                assert INDEX in plan and "Seq Scan on problem_shapes" not in plan, plan


def test_reads_autocommit_on_postgresql_writes_stay_transactions(catalog_url, backend):
    """PostgreSQL reads go through an autocommit pool (no BEGIN/ROLLBACK round trips); writes stay on the
    transactional engine, so a failed write leaves nothing behind. SQLite reads and writes share one engine."""
    with Catalog(catalog_url) as cat:
        if backend == "sqlite":
            assert cat.reader is cat.engine
        else:
            assert cat.reader is not cat.engine
            with cat.reader.connect() as conn:
                assert conn.connection.dbapi_connection.autocommit is True  # psycopg sends no BEGIN
            with cat.engine.connect() as conn:
                assert conn.connection.dbapi_connection.autocommit is False
        t = now()
        row = dict(id=problem_hash("rolled back"), text="rolled back", answer="1", source="t", topic="t",
                   template="t", status="pending", claims=0, created_at=t, updated_at=t)
        with pytest.raises(RuntimeError), cat.write() as conn:
            conn.execute(insert(TABLES["problems"]), [row])
            raise RuntimeError("the write fails after its insert")
        assert cat.problems.by_hash(row["id"]) is None  # nothing of the failed transaction is visible



def test_routing_reads_memory_in_one_statement_then_the_library(catalog_url, tmp_path, model_cache):
    """`Solver.lookup` (`Recalls.matches`) answers what the separate lookups answer, in one statement; a
    whole route walk is that statement and, past the recalls, one for the libraries' transfer gates and one
    for the chain of the library whose gate is open."""
    from helpers import record_gate
    from local_depositor import LocalDepositor, verify_and_deposit

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.problems import canonical
    from galahad.workers.runtime import DEFAULT_RUNTIME

    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, catalog_url, tmp_path / "store")
    cat = dep.catalog
    try:
        for text, answer, template in (("What is 3 + 4?", "7", "add"), ("What is four plus three?", "7", "add"),
                                       ("Tell me 5 and 6 combined, please.", "11", "odd")):
            verify_and_deposit(dep, cat.problems.add(text, answer, "test", "arith", template), answer)
        solver = Solver(dep.engine, cat, LocalStore(tmp_path / "store"))
        solver._keys()  # what a process's first lookup does once: key and shape rows written without them
        fps = solver.fingerprints
        assert [r.path for r in solver.routes("What is 9 + 1?")] == ["base"]  # no gate evidence: no transfer
        for library in ("template:add", "template:odd"):  # evidence that transfer and similar pay there
            for route in ("transfer", "similar"):
                record_gate(cat, dep.engine.model_fingerprint, library, route)
        texts = ["What is 3 + 4?", "what is  3 + 4?", "What is the sum of 4 and 3?", "Tell me 5 and 6 combined.",
                 "Tell me 6 and 5 combined.", "What is 9 + 1?", "Name the capital of France.", "What is 3 + 1?"]
        for text in texts:
            key = canonical.canonical_key(text)
            nums = canonical.numbers(text) if key is None else ""
            hit = cat.recalls.get(problem_hash(text), fps)
            want = {"hash": [hit] if hit else [],
                    "key": cat.recalls.by_key(key, fps) if key else [],
                    "numbers": cat.recalls.by_numbers(nums, fps) if nums else [],
                    "shape": cat.problems.classify(text)}
            with _Statements(cat.reader) as st:
                assert solver.lookup(text) == want, text
            assert len(st.seen) == 1, (text, st.seen)
            with _Statements(cat.reader) as st:
                walked = [r.path for r in solver.routes(text)]
            # the recalls; then the open gates of the text's libraries (and its similar example's), and for a text
            # of a known shape the chain of its library whose transfer gate is open
            assert len(st.seen) == (3 if want["shape"] else 2 if "similar" in walked else 1), (text, walked, st.seen)
        assert [r.path for r in solver.routes("What is 4 + 3?")] == ["key", "transfer", "base"]
        assert [r.path for r in solver.routes("what is  3 + 4?")] == ["hash", "transfer", "base"]  # one recall each
        assert [r.path for r in solver.routes("What is 9 + 1?")] == ["transfer", "base"]  # add's shape, new numbers
        assert [r.path for r in solver.routes("Tell me 5 and 6 combined.")][0] == "similar"
        assert len(solver.lookup("What is 4 + 3?")["key"]) == 2  # both wordings of 3 + 4, oldest first
        assert solver.lookup("What is 4 + 3?")["key"][0]["text"] == "What is 3 + 4?"
    finally:
        cat.close()
