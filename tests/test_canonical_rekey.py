"""Re-keying on a new KEY_VERSION (issue 49 item 7): a stored problem whose key changes or disappears is
re-keyed by catalog.ensure_keys; it keeps its row (hash recall, gold, status) and every other table
(artifacts, attempts, shapes) is untouched. Real SQLite, no mocks."""

from __future__ import annotations

from sqlalchemy import select, update

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.problems import canonical

CHANGED = "What is a score times a dozen?"  # k6 read it as 20 + 12
GONE = "What is 1/0?"  # k6 keyed it (with no value); undefined now: no key
SAME = "What is 7 + 5?"


def _snapshot(cat: Catalog) -> dict:
    with cat.engine.connect() as conn:
        return {name: sorted(map(tuple, conn.execute(select(t)).all()), key=repr)
                for name, t in TABLES.items() if name != "problem_keys"}


def test_a_changed_or_vanished_key_is_recomputed_and_the_problem_kept(tmp_path):
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        ids = {t: cat.problems.add(t, a, "me", "t") for t, a in ((CHANGED, "240"), (GONE, "none"), (SAME, "12"))}
        keys = TABLES["problem_keys"]
        old = {CHANGED: "e:+(*(1,12),*(1,20))", GONE: "e:*(1,/(0))", SAME: canonical.canonical_key(SAME)}
        with cat.write() as conn:  # what k6 stored
            for text, pid in ids.items():
                conn.execute(update(keys).where(keys.c.problem_id == pid)
                             .values(key_version="k6", canonical_key=old[text]))
        before = _snapshot(cat)
        assert cat.problems.ensure_keys() == 3
        assert cat.problems.ensure_keys() == 0  # current now
        assert _snapshot(cat) == before  # problems, artifacts, attempts, shapes: untouched
        rows = {t: cat.problems.key(pid) for t, pid in ids.items()}
        assert {r["key_version"] for r in rows.values()} == {canonical.KEY_VERSION}
        assert rows[CHANGED]["canonical_key"] == canonical.canonical_key(CHANGED) == "e:*(12,20)"
        assert rows[GONE]["canonical_key"] is None
        assert rows[SAME]["canonical_key"] == old[SAME]  # a text read the same way keeps its key
        for text, pid in ids.items():  # hash recall: the same text still finds its problem and gold
            assert cat.problems.by_hash(pid)["text"] == text
        assert cat.problems.by_keys([old[CHANGED], old[GONE]]) == []  # no stale key joins anything
        assert [r["id"] for r in cat.problems.by_keys(["e:*(12,20)"])] == [ids[CHANGED]]


def test_a_k7_key_of_a_grouping_writers_disagree_on_is_dropped(tmp_path):
    """k8 refuses groupings writers read two ways; a problem stored with k7's key for one loses it."""
    text = "Find the value of eight multiplied by three squared."  # k7: 8 x 3^2 = 72 (or 24^2 = 576)
    assert canonical.canonical_key(text) is None
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        pid = cat.problems.add(text, "72", "me", "t")
        keys = TABLES["problem_keys"]
        with cat.write() as conn:
            conn.execute(update(keys).where(keys.c.problem_id == pid)
                         .values(key_version="k7", canonical_key="e:*(8,^(3,2))"))
        assert cat.problems.ensure_keys() == 1
        assert cat.problems.key(pid)["canonical_key"] is None
        assert cat.problems.by_keys(["e:*(8,^(3,2))"]) == []
        assert cat.problems.by_hash(pid)["text"] == text


def test_k8_keys_are_recomputed_under_k9(tmp_path):
    """k9 reads more money phrasings and drops k8's key of coins with no unit asked for: a stored problem gains
    its new key, or loses the old one, when catalog.ensure_keys runs (the problem itself is kept)."""
    gained, lost = "tip 15% on $42", "3 dimes + 2 dimes"  # k8: no key / e:+(2,3) (5 dimes or 50 cents?)
    assert canonical.canonical_key(lost) is None
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        ids = {t: cat.problems.add(t, a, "me", "t") for t, a in ((gained, "6.3"), (lost, "0.5"))}
        keys = TABLES["problem_keys"]
        with cat.write() as conn:
            for text, old in ((gained, None), (lost, "e:+(2,3)")):
                conn.execute(update(keys).where(keys.c.problem_id == ids[text])
                             .values(key_version="k8", canonical_key=old))
        assert cat.problems.ensure_keys() == 2
        assert cat.problems.key(ids[gained])["canonical_key"] == canonical.canonical_key(gained) is not None
        assert canonical.value(canonical.canonical_key(gained)) == canonical.value("15% of 42")
        assert cat.problems.key(ids[lost])["canonical_key"] is None
        assert cat.problems.by_keys(["e:+(2,3)"]) == []
        assert cat.problems.by_hash(ids[lost])["text"] == lost


def test_k9_keys_are_recomputed_under_k10(tmp_path):
    """k10 ends a clause at a command in mid-text ("3x+5=20 find x": k9 read 20x, x = 5/17) and reads "the
    difference between" as |a - b|: re-keying replaces the wrong key and adds the new one; hash recall is kept."""
    wrong, gained = "3x+5=20 find x", "what's the difference between 15 and 42"
    assert canonical.value(canonical.canonical_key(wrong)) == 5
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        ids = {t: cat.problems.add(t, a, "me", "t") for t, a in ((wrong, "5"), (gained, "27"))}
        keys = TABLES["problem_keys"]
        with cat.write() as conn:
            for text, old in ((wrong, "q:17x-5"), (gained, None)):
                conn.execute(update(keys).where(keys.c.problem_id == ids[text])
                             .values(key_version="k9", canonical_key=old))
        assert cat.problems.ensure_keys() == 2
        assert cat.problems.key(ids[wrong])["canonical_key"] == canonical.canonical_key("solve 3x + 5 = 20")
        assert cat.problems.by_keys(["q:17x-5"]) == []
        assert canonical.value(cat.problems.key(ids[gained])["canonical_key"]) == 27
        assert cat.problems.by_hash(ids[wrong])["text"] == wrong

