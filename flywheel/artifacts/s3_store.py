"""An object-store tier: blobs in an S3 bucket (the source of truth), read through a local disk cache and
the RAM tier.

`--store s3://BUCKET/PREFIX[?cache=DIR]` opens an `S3Store`; the endpoint and credentials come from the
standard AWS variables (any S3 API: AWS, SeaweedFS, MinIO, ...). Tiers, nearest first: RAM (`ram_tier.py`),
the local cache (a `LocalStore`, default `<data>/store-cache/`, written atomically after a fetch or a put),
the bucket (objects under `PREFIX<id>`). The SHA-256 is checked on every fetch from any tier: a bad cache
file is dropped and fetched again; an object that fails twice is `CorruptBlob`, never returned (the graft
path rebuilds it and `repair`s the bucket).

Write-once: every upload is a conditional put (`If-None-Match: *`, multipart from
`transfer.multipart_threshold`, visible only once completed); a 412 means the id is already stored. The
only deletions are `delete` (gc) and `repair`. Every request is retried on a transient failure with
backoff for up to `S3Retry.deadline_s`, then `StoreUnavailable` names the store, the operation and the last
error. `evict_local` / `local_ids` are the local tiers' (`catalog evict`; the bucket keeps every object).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from galahad.flywheel.artifacts.store import (
    _ID,
    MAX_BLOB_BYTES,
    BlobMissing,
    BlobStore,
    Checked,
    CorruptBlob,
    LocalStore,
    atomic_write,
    check_id,
    sha256_hex,
)
from galahad.flywheel.config import S3Retry
from galahad.flywheel.errors import GalahadError, IntegrityError

MIN_PART_BYTES = 5 << 20  # S3's (and SeaweedFS's) smallest part but the last
# What a job hands its Ray actors (`workers/actors.py`): they open the store on whatever node they land on.
ENV_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION")


class StoreUnavailable(GalahadError):
    """The object store did not answer (or kept failing) within the retry budget."""


def parse_url(url: str) -> tuple[str, str, str | None]:
    """(bucket, prefix, cache dir or None) of `s3://BUCKET[/PREFIX][?cache=DIR]`; the prefix, when given,
    ends with `/`."""
    parts = urlsplit(url)
    bucket = parts.netloc
    if parts.scheme != "s3" or not bucket or any(c in bucket for c in "@:"):
        raise GalahadError(f"not an object store URL (s3://BUCKET/PREFIX): {url[:120]!r}")
    prefix = parts.path.strip("/")
    if ".." in prefix.split("/"):
        raise GalahadError(f"an object store prefix may not contain '..': {url[:120]!r}")
    cache = parse_qs(parts.query).get("cache", [None])[0]
    return bucket, (prefix + "/" if prefix else ""), cache


def _client(retry: S3Retry):
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1, "mode": "standard"},  # our own loop retries (bounded)
                    connect_timeout=retry.connect_timeout_s, read_timeout=retry.read_timeout_s,
                    max_pool_connections=32, s3={"addressing_style": "path"})
    return boto3.session.Session().client("s3", config=config)


def _code(exc: BaseException) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", "")) if hasattr(exc, "response") else ""


def _status(exc: BaseException) -> int:
    try:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError, ValueError):
        return 0


def _transient(exc: BaseException) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ClientError):
        return _status(exc) >= 500 or _status(exc) == 429 or _code(exc) in {"SlowDown", "RequestTimeout",
                                                                              "Throttling", "InternalError"}
    # connection refused/reset, timeouts, a response cut short
    return isinstance(exc, ConnectionError | HTTPClientError) or (
        isinstance(exc, BotoCoreError) and "timeout" in type(exc).__name__.lower())


def _one_line(exc: BaseException) -> str:
    from botocore.exceptions import NoCredentialsError

    if isinstance(exc, NoCredentialsError):
        return "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:240]


class S3Store(BlobStore):
    """Blobs in `s3://bucket/prefix`, read through `cache_dir` (a `LocalStore` with its RAM tier)."""

    def __init__(self, url: str, cache_dir: str | os.PathLike | None = None, ram_tier_bytes: int | None = None,
                 transfer=None, retry: S3Retry | None = None, client=None):
        self.bucket, self.prefix, named_cache = parse_url(url)
        self.location = f"s3://{self.bucket}/{self.prefix}"  # what catalog rows record (`store_location`)
        cache = named_cache or cache_dir
        if cache is None:
            raise GalahadError(f"the object store {self.location} needs a local cache folder (?cache=DIR)")
        self.cache = LocalStore(Path(cache).expanduser().resolve(), ram_tier_bytes)
        self.ram = self.cache.ram
        if transfer is None:
            from boto3.s3.transfer import TransferConfig

            transfer = TransferConfig()  # multipart from 8 MiB, 8 MiB parts
        self.transfer, self.retry = transfer, retry or S3Retry()
        self.client = client or _client(self.retry)
        self.endpoint = getattr(getattr(self.client, "meta", None), "endpoint_url", "?")
        self._bucket_checked = threading.Event()

    # -- naming ------------------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The spec another process reopens this very store from (`open_store`): a Ray actor is handed it."""
        return f"{self.location}?cache={quote(str(self.cache.root))}"

    def __repr__(self) -> str:
        return f"S3Store({self.location}, cache={self.cache.root})"

    def key(self, blob_id: str) -> str:
        return self.prefix + check_id(blob_id)

    # -- the retry loop ----------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        """`fn()`, retried on transient failures with backoff, within the attempt and time budget; a
        non-transient error (403, 404, 412, ...) is raised as it is for the caller to read."""
        r, start, tries = self.retry, time.monotonic(), 0
        while True:
            tries += 1
            try:
                return fn()
            except Exception as exc:
                if not _transient(exc):
                    raise
                wait = min(r.cap_s, r.base_s * 2 ** (tries - 1)) * (0.5 + random.random() / 2)
                spent = time.monotonic() - start
                if tries >= r.attempts or spent + wait > r.deadline_s:
                    raise StoreUnavailable(
                        f"object store {self.location} at {self.endpoint} failed {what} {tries} times in "
                        f"{spent:.1f}s (gave up): {_one_line(exc)}") from None
                time.sleep(wait)

    def _fail(self, what: str, exc: BaseException) -> GalahadError:
        if isinstance(exc, GalahadError):
            return exc
        code = _code(exc)
        if code in {"NoSuchBucket"}:
            return GalahadError(f"object store {self.location}: the bucket {self.bucket} does not exist at {self.endpoint}")
        if code in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"}:
            return GalahadError(f"object store {self.location} refused {what} ({code}): check AWS_ACCESS_KEY_ID / "
                                "AWS_SECRET_ACCESS_KEY")
        return GalahadError(f"object store {self.location} at {self.endpoint}: {what} failed: {_one_line(exc)}")

    # -- bucket-level operations ---------------------------------------------------------------------------

    def _head(self, blob_id: str) -> dict | None:
        """The object's HEAD (ContentLength, LastModified, ...), or None when there is none."""
        try:
            return self._call(f"HEAD {blob_id[:16]}", lambda: self.client.head_object(Bucket=self.bucket,
                                                                                      Key=self.key(blob_id)))
        except Exception as exc:
            if _status(exc) == 404 or _code(exc) in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise self._fail(f"HEAD {blob_id[:16]}", exc) from None

    def _ensure_bucket(self) -> None:
        """Create the bucket when it is missing (once per store object); an existing one is left as it is."""
        if self._bucket_checked.is_set():
            return
        try:
            self._call("HEAD bucket", lambda: self.client.head_bucket(Bucket=self.bucket))
        except Exception as exc:
            if _status(exc) != 404:
                raise self._fail("HEAD bucket", exc) from None
            try:
                self._call("CREATE bucket", lambda: self.client.create_bucket(Bucket=self.bucket))
            except Exception as exc2:
                if _code(exc2) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                    raise self._fail("CREATE bucket", exc2) from None
        self._bucket_checked.set()

    def _upload(self, blob_id: str, data: bytes) -> bool:
        """Put `data` (which hashes to `blob_id`: the caller checked) under `blob_id`, conditionally
        (If-None-Match: *); True if written, False if an object was already there (write-once: never
        overwritten). Multipart at the transfer threshold."""
        self._ensure_bucket()
        key, what = self.key(blob_id), f"PUT {blob_id[:16]}"
        checksum = base64.b64encode(bytes.fromhex(blob_id)).decode()  # the server checks the body too
        try:
            if len(data) < self.transfer.multipart_threshold:
                self._call(what, lambda: self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*", ChecksumSHA256=checksum))
            else:
                self._multipart(key, data, what)
            return True
        except Exception as exc:
            if _status(exc) == 412 or _code(exc) in {"PreconditionFailed", "412"}:
                return False
            raise self._fail(what, exc) from None

    def _multipart(self, key: str, data: bytes, what: str) -> None:
        chunk = max(MIN_PART_BYTES, int(self.transfer.multipart_chunksize))
        upload = self._call(what, lambda: self.client.create_multipart_upload(Bucket=self.bucket, Key=key))
        uid = upload["UploadId"]
        try:
            parts = []
            view = memoryview(data)
            for n, off in enumerate(range(0, len(data), chunk), start=1):
                body = bytes(view[off:off + chunk])
                out = self._call(f"{what} part {n}", lambda b=body, n=n: self.client.upload_part(
                    Bucket=self.bucket, Key=key, UploadId=uid, PartNumber=n, Body=b))
                parts.append({"ETag": out["ETag"], "PartNumber": n})
            self._call(f"{what} complete", lambda: self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": parts}, IfNoneMatch="*"))
        except BaseException:
            with contextlib.suppress(Exception):  # nothing of it becomes visible; best-effort cleanup
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=uid)
            raise

    def _download(self, blob_id: str, size: int | None) -> bytes:
        """The object's bytes (not hash-checked): BlobMissing when there is none; a size other than the
        declared one, or above MAX_BLOB_BYTES, is refused before the body is read."""
        what = f"GET {blob_id[:16]}"

        def get() -> bytes:
            resp = self.client.get_object(Bucket=self.bucket, Key=self.key(blob_id))
            body, length = resp["Body"], int(resp.get("ContentLength", -1))
            try:
                if size is not None and length != size:
                    raise IntegrityError(f"object {blob_id[:16]} in {self.location} is {length:,} bytes, its catalog "
                                         f"row declares {size:,}")
                if length > MAX_BLOB_BYTES:
                    raise GalahadError(f"object {blob_id[:16]} is {length:,} bytes, more than the {MAX_BLOB_BYTES:,} allowed")
                data = body.read()
            finally:
                body.close()
            if len(data) != length:
                from botocore.exceptions import IncompleteReadError

                raise IncompleteReadError(actual_bytes=len(data), expected_bytes=length)
            return data

        try:
            return self._call(what, get)
        except Exception as exc:
            if _code(exc) != "NoSuchBucket" and (_status(exc) == 404 or _code(exc) in {"NoSuchKey", "404"}):
                raise BlobMissing(f"blob {blob_id[:16]} is missing from the object store {self.location}") from None
            raise self._fail(what, exc) from None

    # -- the BlobStore contract ----------------------------------------------------------------------------

    def put(self, data: bytes) -> str:
        """Durable in the bucket before it returns (then cached locally); an existing object is kept."""
        blob_id = sha256_hex(data)
        if not self._upload(blob_id, data) and not self._holds(blob_id, data):
            raise IntegrityError(f"object {blob_id[:16]} in {self.location} already exists with other bytes: "
                                 "write-once, refused; `galahad catalog fsck` reports it, a graft rebuilds it")
        self._cache_write(blob_id, data)
        return blob_id

    def _holds(self, blob_id: str, data: bytes) -> bool:
        """Whether the existing object is these bytes: same size and an ETag that is their MD5 (a single
        put's), else read back and hashed. An object that vanished meanwhile (gc) is written again."""
        head = self._head(blob_id)
        if head is None:
            return self._upload(blob_id, data) or self._holds(blob_id, data)
        if int(head.get("ContentLength", -1)) != len(data):
            return False
        if str(head.get("ETag", "")).strip('"') == hashlib.md5(data, usedforsecurity=False).hexdigest():
            return True
        try:
            return sha256_hex(self._download(blob_id, len(data))) == blob_id
        except IntegrityError:
            return False

    def _cache_write(self, blob_id: str, data: bytes) -> None:
        try:
            atomic_write(self.cache.path(blob_id), data)
        except OSError:
            pass  # a cache that cannot be written only costs later fetches

    def get_unchecked(self, blob_id: str, size: int | None = None) -> bytes:
        """The bucket's bytes (fsck and gc read the source of truth, not the cache)."""
        return self._download(check_id(blob_id), size)

    def get(self, blob_id: str, size: int | None = None) -> bytes:
        return self.get_checked(blob_id, size).buffer

    def get_checked(self, blob_id: str, size: int | None = None) -> Checked:
        """RAM, then the local cache, then the bucket; hash-checked from every tier. A bucket object that
        fails its hash twice raises `CorruptBlob` (never returned); one that passes is cached."""
        check_id(blob_id)
        try:
            return self.cache.get_checked(blob_id, size)
        except BlobMissing:
            pass
        except IntegrityError:
            self.cache.delete(blob_id)  # a rotten cache copy: fetched again from the bucket
        except GalahadError:
            self.cache.delete(blob_id)  # a symlink, FIFO or unreadable file in the cache: never trusted
        for _ in (1, 2):
            data = self._download(blob_id, size)
            actual = hashlib.sha256(data).hexdigest()
            if actual == blob_id:
                self._cache_write(blob_id, data)
                return Checked(blob_id, data)
        raise CorruptBlob(f"object {blob_id[:16]} in {self.location} is corrupted: its bytes hash to {actual[:16]} "
                          "(refused, never grafted)", blob_id)

    def repair(self, blob_id: str, data: bytes) -> None:
        """Replace an object that fails its hash with `data`, which must hash to `blob_id` (a rebuild): the
        one overwrite of an existing object there is, and only of bytes that are no longer what the id says."""
        if sha256_hex(data) != blob_id:
            raise IntegrityError(f"refused: a repair of {blob_id[:16]} with bytes that hash to something else")
        try:
            current = self._download(blob_id, None)
        except BlobMissing:
            current = None
        if current is not None and sha256_hex(current) == blob_id:
            self._cache_write(blob_id, data)
            return  # already intact (another process repaired it)
        if current is not None:
            self._delete_object(blob_id)
        if not self._upload(blob_id, data) and not self._holds(blob_id, data):
            raise IntegrityError(f"object {blob_id[:16]} in {self.location} was rewritten while being repaired")
        self._cache_write(blob_id, data)

    def has(self, blob_id: str) -> bool:
        return self._head(check_id(blob_id)) is not None

    def size(self, blob_id: str) -> int:
        head = self._head(check_id(blob_id))
        if head is None:
            raise BlobMissing(f"blob {blob_id[:16]} is missing from the object store {self.location}")
        return int(head["ContentLength"])

    def age(self, blob_id: str) -> float:
        """Seconds since the object was written (gc's grace period); 0 when it is gone."""
        head = self._head(check_id(blob_id))
        if head is None or head.get("LastModified") is None:
            return 0.0
        return max(0.0, time.time() - head["LastModified"].timestamp())

    def _delete_object(self, blob_id: str) -> None:
        try:
            self._call(f"DELETE {blob_id[:16]}", lambda: self.client.delete_object(Bucket=self.bucket,
                                                                                   Key=self.key(blob_id)))
        except Exception as exc:
            raise self._fail(f"DELETE {blob_id[:16]}", exc) from None

    def delete(self, blob_id: str) -> None:
        """From the bucket and the local tiers (gc: orphans and superseded originals)."""
        self._delete_object(check_id(blob_id))
        self.cache.delete(blob_id)

    def ids(self) -> Iterator[str]:
        """Every id in the bucket under the prefix (the source of truth), sorted."""
        found: list[str] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix}
            if token:
                kw["ContinuationToken"] = token
            try:
                page = self._call("LIST", lambda kw=kw: self.client.list_objects_v2(**kw))
            except Exception as exc:
                if _code(exc) == "NoSuchBucket":
                    return iter(())
                raise self._fail("LIST", exc) from None
            for o in page.get("Contents", []):
                name = o["Key"][len(self.prefix):]
                if _ID.match(name):
                    found.append(name)
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        return iter(sorted(found))

    # -- the local tiers -------------------------------------------------------------------------------------

    def local_ids(self) -> Iterator[str]:
        return self.cache.ids()

    def local_size(self, blob_id: str) -> int:
        return self.cache.size(blob_id)

    def evict_local(self, blob_id: str) -> None:
        """Drop the RAM and disk copies; the bucket's object stays (`catalog evict`)."""
        self.cache.delete(blob_id)

    def temp_files(self) -> Iterator[Path]:
        """The local cache's leftovers of killed writers (an unfinished multipart upload is never visible;
        a bucket lifecycle rule `AbortIncompleteMultipartUpload` collects its parts)."""
        return self.cache.temp_files()
