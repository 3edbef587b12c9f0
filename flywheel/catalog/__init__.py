"""The SQL catalog: schema, connection, writes, queries, the work queue, bundles and fsck.

All SQL in Galahad lives in this package; everything else goes through `Catalog` and its parts
(`catalog.problems`, `.runs`, `.artifacts`, `.libraries`, `.queue`, `.recalls`: see `catalog.py`).
"""

from galahad.flywheel.catalog.catalog import PUT_THREADS, Catalog, new_id, now, problem_hash, store_location

__all__ = ["PUT_THREADS", "Catalog", "new_id", "now", "problem_hash", "store_location"]
