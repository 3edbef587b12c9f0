"""The store's RAM tier: blobs already read and hash-checked in this process, kept by bytes, LRU.

An entry is served only while its file keeps the same identity (device, inode, size, mtime_ns, ctime_ns:
one `lstat`); any change drops it and the blob is read and checked again. It keeps the immutable `Checked`
buffer that was hashed, so a hit reads and hashes nothing. Budget: `StoreConfig.ram_tier_bytes`. As git does
for "racy clean" files, a file modified less than `RACY_NS` before it was read is not kept (file times tick
coarsely).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import Any

Identity = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


RACY_NS = 2_000_000_000  # a file younger than this when read is not kept (its time may not tick on a rewrite)


def settled(st: os.stat_result, read_at_ns: int | None = None) -> bool:
    """Whether a file read now (or at `read_at_ns`) is old enough that any later write changes its identity."""
    return (time.time_ns() if read_at_ns is None else read_at_ns) - st.st_mtime_ns > RACY_NS


def identity(st: os.stat_result) -> Identity:
    """A file's identity: a write changes mtime and ctime; `utime` can set mtime back, never ctime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class RamTier:
    """An LRU of values by key, bounded by their bytes; an entry is served only under its identity."""

    def __init__(self, capacity: int):
        self.capacity = max(0, int(capacity))
        self._lru: OrderedDict[str, tuple[Identity, Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.stale = 0

    def get(self, key: str, ident: Identity) -> Any | None:
        with self._lock:
            entry = self._lru.get(key)
            if entry is None:
                self.misses += 1
                return None
            if entry[0] != ident:  # the file changed since it was read: never serve the old bytes
                self._drop(key)
                self.stale += 1
                self.misses += 1
                return None
            self._lru.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(self, key: str, ident: Identity, value: Any, nbytes: int) -> None:
        if nbytes > self.capacity:
            return
        with self._lock:
            self._drop(key)
            self._lru[key] = (ident, value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.capacity:
                self._drop(next(iter(self._lru)))

    def drop(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._lru.clear()
            self._bytes = 0

    def _drop(self, key: str) -> None:
        entry = self._lru.pop(key, None)
        if entry is not None:
            self._bytes -= entry[2]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._lru), "bytes": self._bytes, "capacity": self.capacity, "hits": self.hits,
                    "misses": self.misses, "stale": self.stale}
