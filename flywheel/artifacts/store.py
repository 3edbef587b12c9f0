"""Content-addressed blob store: bytes in, SHA-256 id out; every read is hash-checked.

Backends sit behind `BlobStore` so an object store can follow the local/shared-filesystem one. A blob is
durable (fsync'd file and directory) before `put` returns, so a catalog row committed after `put` never
points at missing or partial bytes. `LocalStore` keeps what it has read and hash-checked in a RAM tier
(`ram_tier.py`): a repeated `get_checked` of an unchanged file (same device, inode, size, mtime_ns, ctime_ns) reads
and hashes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from galahad.flywheel.artifacts.ram_tier import RamTier, identity, settled
from galahad.flywheel.config import DEFAULTS
from galahad.flywheel.errors import GalahadError, IntegrityError

_ID = re.compile(r"^[0-9a-f]{64}$")
# No artifact is larger (1 GiB is ~29k tokens of gemma3-270m fp32 KV in one span); a bigger "blob" (a sparse
# file, say) is refused unread. Readers that know the row's declared size pass it and read no more.
MAX_BLOB_BYTES = 1 << 30
# Parallel puts: each is fsync-bound, and concurrent fsyncs share the filesystem's journal commits (~10x the
# rate of one after another here).
PUT_THREADS = 16


class BlobMissing(GalahadError):
    """No blob (of any kind) under that id."""


class CorruptBlob(IntegrityError):
    """A stored object whose bytes do not hash to its id (`S3Store`: the bucket's copy, fetched twice):
    refused, never returned; a store with `repair` takes the rebuilt bytes (`memory/rebuild.py`)."""

    def __init__(self, message: str, blob_id: str):
        super().__init__(message)
        self.blob_id = blob_id


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def shareable(fd: int) -> None:
    """Give a file made by `mkstemp` (0600) the mode a plain `open` would (0644 under umask 022), so a
    shared store or a bundle is readable by the other users the umask allows."""
    os.fchmod(fd, 0o666 & ~_umask())


def _open_regular(path: Path, limit: int, what: str,
                  expected: int | None = None) -> tuple[int, os.stat_result]:
    """(fd, its `fstat`) of a regular file that is not a symlink, opened without blocking (a FIFO never
    hangs); a FIFO, a device, a symlink, a size other than `expected` or above `limit` is refused before
    anything is read. The caller owns the fd."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise BlobMissing(f"{what} is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GalahadError(f"{what} is a symlink: refused") from None
        raise GalahadError(f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GalahadError(f"{what} is not a regular file: refused")
        if expected is not None and st.st_size != expected:
            raise IntegrityError(f"{what} is {st.st_size:,} bytes, its catalog row declares {expected:,}")
        if st.st_size > limit:
            raise GalahadError(f"{what} is {st.st_size:,} bytes, more than the {limit:,} allowed")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: Path, limit: int, what: str, expected: int | None = None) -> bytes:
    """At most `limit` bytes of a regular file that is not a symlink (`_open_regular` says what is refused)."""
    fd, _ = _open_regular(path, limit, what, expected)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise GalahadError(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise GalahadError(f"{what} grew past {limit:,} bytes while being read")
    return data


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_id(blob_id: str) -> str:
    """Ids are exactly 64 lowercase hex chars: anything else (path traversal included) is refused."""
    if not isinstance(blob_id, str) or not _ID.match(blob_id):
        raise GalahadError(f"not a valid artifact id (64 lowercase hex chars): {str(blob_id)[:80]!r}")
    return blob_id


@dataclass(frozen=True)
class Checked:
    """A blob's bytes whose SHA-256 was computed once they were read and equals `id`: the only input the
    artifact parser builds tensors from (one buffer, never copied again: tensors are views over it)."""

    id: str
    buffer: bytes | bytearray


class BlobStore(ABC):
    """The store's contract. Implementations must make `put` atomic and durable."""

    @abstractmethod
    def put(self, data: bytes) -> str: ...

    @abstractmethod
    def get_unchecked(self, blob_id: str, size: int | None = None) -> bytes:
        """The bytes (not hash-checked). With `size` (what the catalog row declares), a blob of any
        other size is refused without reading more than `size` bytes."""

    @abstractmethod
    def has(self, blob_id: str) -> bool: ...

    @abstractmethod
    def delete(self, blob_id: str) -> None: ...

    @abstractmethod
    def ids(self) -> Iterator[str]: ...

    @abstractmethod
    def size(self, blob_id: str) -> int: ...

    def get(self, blob_id: str, size: int | None = None) -> bytes:
        data = self.get_unchecked(check_id(blob_id), size)
        actual = sha256_hex(data)
        if actual != blob_id:
            raise IntegrityError(f"blob {blob_id[:16]} is corrupted: its bytes hash to {actual[:16]}")
        return data

    def get_checked(self, blob_id: str, size: int | None = None) -> Checked:
        """The blob in one buffer, hash-checked (`get`). Backends may override to read it without a copy."""
        return Checked(blob_id, self.get(blob_id, size))

    def put_many(self, blobs: list[bytes]) -> list[str]:
        """`put` each blob, in parallel (`put` must be thread-safe); ids in order, all durable on return."""
        if not blobs:
            return []
        with ThreadPoolExecutor(max_workers=min(PUT_THREADS, len(blobs))) as pool:
            return list(pool.map(self.put, blobs))


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same folder, fsync, rename, fsync the folder: readers see all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        shareable(fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class LocalStore(BlobStore):
    """Files under `root/ab/cd/<id>`; works the same on a shared filesystem path for scale-out."""

    def __init__(self, root: str | os.PathLike, ram_tier_bytes: int | None = None):
        """`ram_tier_bytes`: the RAM tier's budget (default `StoreConfig.ram_tier_bytes`; 0: no tier)."""
        if str(root).startswith("s3:"):  # never a local folder named "s3:" by mistake
            raise GalahadError(f"{str(root)[:80]!r} is an object store URL: open it with `open_store`")
        self.root = Path(root)
        if ram_tier_bytes is None:
            ram_tier_bytes = DEFAULTS.store.ram_tier_bytes
        self.ram = RamTier(ram_tier_bytes)

    def path(self, blob_id: str) -> Path:
        check_id(blob_id)
        return self.root / blob_id[:2] / blob_id[2:4] / blob_id

    def put(self, data: bytes) -> str:
        blob_id = sha256_hex(data)
        target = self.path(blob_id)
        if self._holds(target, blob_id, len(data)):
            return blob_id  # content-addressed: these very bytes are already durable
        # Missing, or a file that does not hash to its name (rot, a torn copy): replaced atomically.
        try:
            atomic_write(target, data)
        except OSError as exc:
            raise GalahadError(f"cannot write blob {blob_id[:16]} under {self.root}: {exc.strerror or exc}") from exc
        return blob_id

    @staticmethod
    def _holds(target: Path, blob_id: str, size: int) -> bool:
        """Whether `target` already holds exactly the bytes of `blob_id`: a same-size regular file is
        reused only after its hash is checked, never on its size alone (a symlink or FIFO never is)."""
        try:
            st = os.lstat(target)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return False
            return sha256_hex(read_regular(target, size, f"blob {blob_id[:16]}", size)) == blob_id
        except (OSError, GalahadError):
            return False

    def get_unchecked(self, blob_id: str, size: int | None = None) -> bytes:
        limit = MAX_BLOB_BYTES if size is None else min(int(size), MAX_BLOB_BYTES)
        try:
            data = read_regular(self.path(blob_id), limit, f"blob {blob_id[:16]} in the store {self.root}", size)
        except BlobMissing:
            raise BlobMissing(f"blob {blob_id[:16]} is missing from the store {self.root}") from None
        if size is not None and len(data) != size:
            raise IntegrityError(f"blob {blob_id[:16]} is {len(data):,} bytes, its row declares {size:,}")
        return data

    def get_checked(self, blob_id: str, size: int | None = None) -> Checked:
        """One read of the declared size into one immutable buffer, hashed once (tensors become views over it:
        what was hashed is what they hold). Anything but a regular file, more than MAX_BLOB_BYTES or the row's
        `size`, a size change or a hash mismatch is refused, the sizes before anything is allocated. From the
        RAM tier while the file's identity (one `lstat`) is what it was when read; a changed, replaced or
        missing file is read and checked as if never seen."""
        path = self.path(blob_id)
        if self.ram.capacity:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                self.ram.drop(blob_id)  # evicted or deleted: nothing is served from memory
                raise BlobMissing(f"blob {blob_id[:16]} is missing from the store {self.root}") from None
            except OSError:
                st = None
            if st is not None and stat.S_ISREG(st.st_mode) and (size is None or st.st_size == size):
                hit = self.ram.get(blob_id, identity(st))
                if hit is not None:
                    return hit
        try:
            fd, st = _open_regular(path, MAX_BLOB_BYTES, f"blob {blob_id[:16]} in the store {self.root}", size)
        except BlobMissing:
            self.ram.drop(blob_id)
            raise BlobMissing(f"blob {blob_id[:16]} is missing from the store {self.root}") from None
        size = st.st_size
        with os.fdopen(fd, "rb", buffering=0) as f:
            data = f.read(size + 1) if size else b""
            while 0 < len(data) < size:  # a short read (a signal): rare, so the copy is too
                more = f.read(size + 1 - len(data))
                if not more:
                    break
                data += more
            if len(data) != size or (not size and f.read(1)):
                raise IntegrityError(f"blob {blob_id[:16]} changed size while it was read")
        actual = hashlib.sha256(data).hexdigest()
        if actual != blob_id:
            self.ram.drop(blob_id)
            raise IntegrityError(f"blob {blob_id[:16]} is corrupted: its bytes hash to {actual[:16]}")
        checked = Checked(blob_id, data)
        if self.ram.capacity and settled(st):  # kept under the identity of the file these bytes came from
            self.ram.put(blob_id, identity(st), checked, len(data))
        return checked

    def has(self, blob_id: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(self.path(blob_id)).st_mode)
        except FileNotFoundError:
            return False

    def delete(self, blob_id: str) -> None:
        self.ram.drop(blob_id)
        self.path(blob_id).unlink(missing_ok=True)

    def ids(self) -> Iterator[str]:
        if not self.root.is_dir():
            return
        for p in sorted(self.root.glob("??/??/*")):
            if _ID.match(p.name):
                yield p.name  # whatever its kind: a symlink or FIFO posing as a blob is fsck's to report

    def temp_files(self) -> Iterator[Path]:
        """Leftovers of writers killed mid-write: never visible as blobs, collectable by gc."""
        if self.root.is_dir():
            yield from self.root.glob("??/??/.tmp-*")

    def size(self, blob_id: str) -> int:
        return os.lstat(self.path(blob_id)).st_size


def open_store(spec: str | os.PathLike, ram_tier_bytes: int | None = None) -> BlobStore:
    """The store a spec names, by scheme: `s3://BUCKET/PREFIX?cache=DIR` an `S3Store` (what an `S3Store`'s
    `root` is, so a Ray actor handed `str(store.root)` reopens the same store), anything else a `LocalStore`
    folder."""
    if str(spec).startswith("s3://"):
        from galahad.flywheel.artifacts.s3_store import S3Store  # cycle: s3_store imports store

        return S3Store(str(spec), ram_tier_bytes=ram_tier_bytes)
    return LocalStore(spec, ram_tier_bytes)
