"""Bundles that carry trust: Ed25519 signatures over a bundle's manifest, and the data dir's trusted keys.

The manifest binds every catalog row and every blob's SHA-256 and size (import refuses any blob that does
not match it), so a signature over the manifest's SHA-256 vouches for the whole bundle. It travels as
`MANIFEST.sig` (JSON: public key, key id, signature) before the blobs; Ed25519 is deterministic, so the
same content and key make the same bundle bytes. Private keys are PKCS#8 PEM (mode 0600), public keys
SubjectPublicKeyInfo PEM; a key's id is the SHA-256 of its 32 raw public bytes. Trusted keys are
`<data>/trusted_keys/<key id>.pub`, trusted by their contents, never their names.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.flywheel.safe_json import loads as safe_loads

SIGNATURE_MEMBER = "MANIFEST.sig"
SIGNATURE_FORMAT = "galahad-bundle-signature/1"
DOMAIN = b"galahad-bundle-signature/1\x00"  # what is signed: DOMAIN + SHA-256(manifest.json), raw
MAX_SIGNATURE = 4096
MAX_KEY_FILE = 16 << 10


def _crypto():
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    return InvalidSignature, serialization, Ed25519PrivateKey, Ed25519PublicKey


def _raw(public_key) -> bytes:
    _, ser, _, _ = _crypto()
    return public_key.public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)


def key_id(public_key) -> str:
    """SHA-256 (hex) of the 32 raw public bytes: the name a key is trusted and reported by."""
    return hashlib.sha256(_raw(public_key)).hexdigest()


def public_pem(public_key) -> bytes:
    _, ser, _, _ = _crypto()
    return public_key.public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)


def _read_small(path: Path, what: str) -> bytes:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise GalahadError(f"{what} {path} is not a regular file")
        if st.st_size > MAX_KEY_FILE:
            raise GalahadError(f"{what} {path} is {st.st_size:,} bytes: not a key file")
        return path.read_bytes()
    except FileNotFoundError:
        raise GalahadError(f"no {what} at {path}") from None
    except OSError as exc:
        raise GalahadError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def load_private_key(path: str | os.PathLike):
    """An Ed25519 private key from a PEM file that only its owner can read (refused otherwise, as ssh does)."""
    _, ser, Ed25519PrivateKey, _ = _crypto()
    path = Path(path)
    data = _read_small(path, "private key")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if os.name == "posix" and mode & 0o077:
        raise GalahadError(f"private key {path} is readable by others (mode {mode:04o}): `chmod 600 {path}`")
    try:
        key = ser.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise GalahadError(f"{path} is not an unencrypted PEM private key ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise GalahadError(f"{path} is not an Ed25519 key (bundles are signed with Ed25519)")
    return key


def load_public_key(data: bytes, where: str):
    _, ser, Ed25519PrivateKey, Ed25519PublicKey = _crypto()
    if b"PRIVATE KEY" in data:
        raise GalahadError(f"{where} is a private key: give its public key (the .pub file keygen wrote)")
    try:
        key = ser.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise GalahadError(f"{where} is not a PEM public key ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise GalahadError(f"{where} is not an Ed25519 public key")
    return key


def keygen(path: str | os.PathLike) -> dict[str, Any]:
    """Write a new private key to PATH (mode 0600) and its public key to PATH.pub; refuses to overwrite."""
    _, ser, Ed25519PrivateKey, _ = _crypto()
    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    for p in (path, pub):
        if os.path.lexists(p):
            raise GalahadError(f"{p} already exists (refusing to overwrite a key)")
    if not path.parent.is_dir():
        raise GalahadError(f"folder {path.parent} does not exist")
    key = Ed25519PrivateKey.generate()
    secret = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, secret)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        _write_atomic(pub, public_pem(key.public_key()), exclusive=True)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return {"private_key": str(path), "public_key": str(pub), "key_id": key_id(key.public_key())}


def _write_atomic(path: Path, data: bytes, exclusive: bool = False) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-key-", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)  # fails if PATH appeared meanwhile
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except FileExistsError:
        Path(tmp).unlink(missing_ok=True)
        raise GalahadError(f"{path} already exists (refusing to overwrite a key)") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sign_manifest(private_key, mbytes: bytes) -> bytes:
    """The `MANIFEST.sig` member for this manifest: canonical JSON, the same bytes for the same key and content."""
    digest = hashlib.sha256(mbytes).digest()
    pub = private_key.public_key()
    doc = {"format": SIGNATURE_FORMAT, "algorithm": "ed25519", "key_id": key_id(pub),
           "public_key": base64.b64encode(_raw(pub)).decode(), "manifest_sha256": digest.hex(),
           "signature": base64.b64encode(private_key.sign(DOMAIN + digest)).decode()}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def check_signature(sig: bytes, mbytes: bytes) -> str:
    """The signer's key id if `sig` is a valid signature over this manifest; a one-line IntegrityError
    otherwise (an altered signature, or content altered after signing)."""
    InvalidSignature, _, _, Ed25519PublicKey = _crypto()

    def bad(why: str) -> IntegrityError:
        return IntegrityError(f"bad bundle signature: {why}; refusing the bundle (altered after signing?)")

    try:
        doc = safe_loads(sig)
        ok = (isinstance(doc, dict) and doc.get("format") == SIGNATURE_FORMAT and doc.get("algorithm") == "ed25519"
              and all(isinstance(doc.get(k), str) for k in ("key_id", "public_key", "manifest_sha256", "signature")))
    except (ValueError, GalahadError):
        ok = False
    if not ok:
        raise bad(f"{SIGNATURE_MEMBER} is not a {SIGNATURE_FORMAT} document")
    try:
        raw = base64.b64decode(doc["public_key"], validate=True)
        signature = base64.b64decode(doc["signature"], validate=True)
        public = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise bad("malformed public key or signature") from None
    kid = hashlib.sha256(raw).hexdigest()
    if doc["key_id"] != kid:
        raise bad("the key id is not the hash of the key it names")
    digest = hashlib.sha256(mbytes).digest()
    if doc["manifest_sha256"] != digest.hex():
        raise bad("it signs another manifest than this bundle's")
    try:
        public.verify(signature, DOMAIN + digest)
    except InvalidSignature:
        raise bad(f"the signature by key {kid[:16]} does not verify") from None
    return kid


@dataclass(frozen=True)
class TrustedKeys:
    """The public keys a data dir trusts to sign bundles: one PEM file per key, `<key id>.pub`."""

    root: Path

    def _files(self) -> list[Path]:
        try:
            return sorted(p for p in self.root.iterdir() if p.suffix == ".pub" and not p.name.startswith("."))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise GalahadError(f"cannot read trusted keys in {self.root}: {exc.strerror or exc}") from None

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for p in self._files():
            key = load_public_key(_read_small(p, "trusted key"), f"trusted key file {p}")
            added = datetime.fromtimestamp(p.stat().st_mtime, tz=UTC).replace(microsecond=0)
            out.append({"key_id": key_id(key), "file": str(p), "added_at": added})
        return out

    def ids(self) -> set[str]:
        return {k["key_id"] for k in self.listing()}

    def add(self, pubkey_file: str | os.PathLike) -> dict[str, Any]:
        src = Path(pubkey_file)
        key = load_public_key(_read_small(src, "public key"), str(src))
        kid = key_id(key)
        if kid in self.ids():
            return {"key_id": kid, "file": str(self.root / f"{kid}.pub"), "added": False}
        self.root.mkdir(parents=True, exist_ok=True)
        dst = self.root / f"{kid}.pub"
        _write_atomic(dst, public_pem(key))
        return {"key_id": kid, "file": str(dst), "added": True}

    def remove(self, prefix: str) -> dict[str, Any]:
        """Stop trusting the one key whose id starts with PREFIX (8 hex digits at least)."""
        prefix = prefix.lower()
        if len(prefix) < 8:
            raise GalahadError(f"key id {prefix[:64]!r} is too short: give at least 8 hex digits")
        hits = [k for k in self.listing() if k["key_id"].startswith(prefix)]
        if len(hits) != 1:
            raise GalahadError(f"no trusted key {prefix[:64]!r}" if not hits else
                               f"key id {prefix[:64]!r} names {len(hits)} trusted keys: give more digits")
        Path(hits[0]["file"]).unlink()
        return {"key_id": hits[0]["key_id"], "removed": True}
