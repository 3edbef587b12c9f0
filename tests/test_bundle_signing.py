"""Bundles that carry trust (issue 43 item 5): `export --sign KEYFILE` signs a bundle's manifest (which binds
every row and every blob's SHA-256) with Ed25519; `import` takes a bundle signed by a key the data dir trusts,
and refuses an unsigned or otherwise-signed one unless `--verify` re-derives every artifact or the admin says
`--trust-unsigned`. A signature that does not verify (altered signature, or content altered after signing)
is refused in one line whatever the flags, with nothing written."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
import test_catalog_bundle as B
import test_catalog_workers as W

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
from galahad.flywheel.catalog.signing import SIGNATURE_MEMBER, load_private_key
from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str) -> bool:
    return code == 2 and err.startswith("galahad: error: ") and err.count("\n") == 1


@pytest.fixture
def src(tmp_path) -> tuple[Path, str, dict]:
    """A data dir with a populated catalog and store (no model)."""
    root = tmp_path / "src"
    url = f"sqlite:///{tmp_path / 'src.sqlite3'}"
    with Catalog(url) as cat:
        ids = W.populate(cat, LocalStore(root / "store"))
    return root, url, ids


def keygen(capsys, path: Path) -> str:
    code, out, err = run(capsys, "catalog", "keygen", str(path), "--json")
    assert code == 0, err
    return json.loads(out)["key_id"]


def export(capsys, src, bundle: Path, *extra: str) -> dict:
    root, url, _ = src
    code, out, err = run(capsys, "--data", str(root), "catalog", "--catalog", url, "export", str(bundle), *extra,
                         "--json")
    assert code == 0, err
    return json.loads(out)


def import_into(capsys, data: Path, bundle: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "--data", str(data), "catalog", "import", str(bundle), *extra, "--json")


def nothing_written(data: Path) -> bool:
    if not (data / "catalog.sqlite3").exists():
        return not (data / "store").exists()
    with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
        return cat.stats()["artifacts"] == 0 and not list(LocalStore(data / "store").ids())


def test_keygen_and_trust(tmp_path, capsys):
    key = tmp_path / "signer.key"
    kid = keygen(capsys, key)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and b"PRIVATE KEY" in key.read_bytes()
    pub = tmp_path / "signer.key.pub"
    assert b"PUBLIC KEY" in pub.read_bytes() and len(kid) == 64
    code, _, err = run(capsys, "catalog", "keygen", str(key))
    assert one_line_error(code, err) and "already exists" in err  # never overwrites a key
    data = tmp_path / "data"
    code, out, _ = run(capsys, "--data", str(data), "catalog", "trust", "--ls")
    assert code == 0 and "no trusted keys" in out and not (data / "catalog.sqlite3").exists()  # no catalog needed
    code, out, _ = run(capsys, "--data", str(data), "catalog", "trust", str(pub))
    assert code == 0 and out.startswith("trusted: key " + kid)
    assert (data / "trusted_keys" / f"{kid}.pub").is_file()
    code, out, _ = run(capsys, "--data", str(data), "catalog", "trust", str(pub))
    assert code == 0 and out.startswith("already trusted")
    code, out, _ = run(capsys, "--data", str(data), "catalog", "trust", "--ls", "--json")
    assert code == 0 and [k["key_id"] for k in json.loads(out)] == [kid]
    for bad, why in ((key, "private key"), (tmp_path / "nope.pub", "no public key")):
        code, _, err = run(capsys, "--data", str(data), "catalog", "trust", str(bad))
        assert one_line_error(code, err) and why in err, err
    code, _, err = run(capsys, "--data", str(data), "catalog", "trust")
    assert one_line_error(code, err)
    code, out, _ = run(capsys, "--data", str(data), "catalog", "trust", "--rm", kid[:12])
    assert code == 0 and kid in out and not (data / "trusted_keys" / f"{kid}.pub").exists()
    os.chmod(key, 0o644)  # a private key others can read is refused, as ssh refuses it
    with pytest.raises(GalahadError, match="readable by others"):
        load_private_key(key)


def test_signed_round_trip_with_a_trusted_key(src, tmp_path, capsys):
    key = tmp_path / "k"
    kid = keygen(capsys, key)
    out = export(capsys, src, tmp_path / "b.galahad", "--sign", str(key))
    assert out["signed_by"] == kid and out["artifacts"] == 4
    names = list(B.members(tmp_path / "b.galahad"))
    assert names[:3] == ["MANIFEST.sha256", "manifest.json", SIGNATURE_MEMBER]  # signature before the blobs
    export(capsys, src, tmp_path / "again.galahad", "--sign", str(key))  # deterministic: same key, same bytes
    assert (tmp_path / "again.galahad").read_bytes() == (tmp_path / "b.galahad").read_bytes()
    dst = tmp_path / "dst"
    assert run(capsys, "--data", str(dst), "catalog", "trust", str(key) + ".pub")[0] == 0
    code, out, err = import_into(capsys, dst, tmp_path / "b.galahad")
    got = json.loads(out)
    assert code == 0, err
    assert got["added"]["artifacts"] == 4 and got["signed_by"] == kid and got["trusted"]
    assert got["admitted_by"] == "trusted key"
    code, out, _ = run(capsys, "--data", str(dst), "catalog", "import", str(tmp_path / "b.galahad"))
    assert code == 0 and f"signed by trusted key {kid[:16]}" in out  # the table line says who signed


def test_unsigned_bundle_is_refused_unless_trust_unsigned(src, tmp_path, capsys):
    bundle = tmp_path / "u.galahad"
    assert export(capsys, src, bundle)["signed_by"] is None
    assert SIGNATURE_MEMBER not in B.members(bundle)  # an unsigned bundle is the format it always was
    dst = tmp_path / "dst"
    code, _, err = import_into(capsys, dst, bundle)
    assert one_line_error(code, err) and "unsigned" in err
    assert "--verify" in err and "--trust-unsigned" in err and "--sign" in err  # says the options
    assert nothing_written(dst)
    code, out, err = import_into(capsys, dst, bundle, "--trust-unsigned")
    got = json.loads(out)
    assert code == 0, err
    assert got["added"]["artifacts"] == 4 and got["signed_by"] is None and got["admitted_by"] == "trust-unsigned"
    with Catalog(f"sqlite:///{tmp_path / 'lib.sqlite3'}") as cat:  # the library refuses by default as well
        with pytest.raises(GalahadError, match="unsigned"):
            import_bundle(cat, LocalStore(tmp_path / "lib-store"), bundle)
        assert cat.stats()["artifacts"] == 0 and not (tmp_path / "lib-store").exists()


def test_bundle_signed_by_an_untrusted_key_is_refused(src, tmp_path, capsys):
    signer, other = tmp_path / "signer", tmp_path / "other"
    kid = keygen(capsys, signer)
    keygen(capsys, other)
    bundle = tmp_path / "b.galahad"
    export(capsys, src, bundle, "--sign", str(signer))
    dst = tmp_path / "dst"
    assert run(capsys, "--data", str(dst), "catalog", "trust", str(other) + ".pub")[0] == 0  # another key
    code, _, err = import_into(capsys, dst, bundle)
    assert one_line_error(code, err) and f"signed by key {kid[:16]}" in err and "does not trust" in err
    assert "catalog trust" in err and "--trust-unsigned" in err
    assert nothing_written(dst)
    code, out, err = import_into(capsys, dst, bundle, "--trust-unsigned")
    got = json.loads(out)
    assert code == 0, err
    assert got["signed_by"] == kid and not got["trusted"] and got["admitted_by"] == "trust-unsigned"


def _signed(capsys, src, tmp_path) -> tuple[Path, dict[str, bytes], Path]:
    """A bundle signed by a key that `dst` trusts; its members; `dst`."""
    key = tmp_path / "k"
    keygen(capsys, key)
    bundle = tmp_path / "signed.galahad"
    export(capsys, src, bundle, "--sign", str(key))
    dst = tmp_path / "dst"
    assert run(capsys, "--data", str(dst), "catalog", "trust", str(key) + ".pub")[0] == 0
    return bundle, B.members(bundle), dst


def _refused(capsys, tmp_path, dst: Path, items: dict[str, bytes], name: str, match: str) -> None:
    path = B.write_tar(tmp_path / f"{name}.tar", list(items.items()))
    for flags in ((), ("--trust-unsigned",)):  # a bad signature is refused whatever the flags
        code, out, err = import_into(capsys, dst, path, *flags)
        assert one_line_error(code, err) and match in err, (name, flags, err)
        assert nothing_written(dst), name


def test_tampered_signature_is_refused(src, tmp_path, capsys):
    bundle, items, dst = _signed(capsys, src, tmp_path)
    doc = json.loads(items[SIGNATURE_MEMBER])
    sig = bytearray(base64.b64decode(doc["signature"]))
    sig[5] ^= 0x01
    flipped = {**doc, "signature": base64.b64encode(bytes(sig)).decode()}
    _refused(capsys, tmp_path, dst, {**items, SIGNATURE_MEMBER: json.dumps(flipped).encode()}, "flipped",
             "bad bundle signature")
    _refused(capsys, tmp_path, dst, {**items, SIGNATURE_MEMBER: b"{not json"}, "garbage", "bad bundle signature")
    # A signature by a trusted key over *another* bundle (replayed onto this one) is refused.
    other_root, other_url = tmp_path / "other", f"sqlite:///{tmp_path / 'other.sqlite3'}"
    with Catalog(other_url) as cat:
        store = LocalStore(other_root / "store")
        cat.artifacts.deposit(store, store.put(W.make_artifact(seed=4242)[1]), library="x")
    export(capsys, (other_root, other_url, None), tmp_path / "other.galahad", "--sign", str(tmp_path / "k"))
    replayed = {**items, SIGNATURE_MEMBER: B.members(tmp_path / "other.galahad")[SIGNATURE_MEMBER]}
    _refused(capsys, tmp_path, dst, replayed, "replayed", "signs another manifest")


def test_tampered_content_under_a_valid_looking_signature_is_refused(src, tmp_path, capsys):
    bundle, items, dst = _signed(capsys, src, tmp_path)
    _, _, ids = src
    manifest = json.loads(items["manifest.json"])
    for p in manifest["tables"]["problems"]:
        p["answer"] = "6" if p["answer"] == "5" else p["answer"]  # a catalog row, checksum resealed
    row = B.resealed(items, manifest)
    _refused(capsys, tmp_path, dst, row, "row", "signs another manifest")
    doc = json.loads(items[SIGNATURE_MEMBER])  # the signature document updated to name the new manifest too
    doc["manifest_sha256"] = sha256_hex(row["manifest.json"])
    _refused(capsys, tmp_path, dst, {**row, SIGNATURE_MEMBER: json.dumps(doc).encode()}, "row-and-digest",
             "does not verify")
    blob = f"blobs/{ids['chain'][1]}"
    flipped = bytearray(items[blob])
    flipped[-3] ^= 0x40
    _refused(capsys, tmp_path, dst, {**items, blob: bytes(flipped)}, "blob", "does not match its hash")
    # The flipped blob under its own hash, listed in a manifest that names it: the manifest changed.
    new_id = sha256_hex(bytes(flipped))
    swapped = json.loads(items["manifest.json"])
    swapped["blobs"] = {(new_id if k == ids["chain"][1] else k): v for k, v in swapped["blobs"].items()}
    renamed = {(f"blobs/{new_id}" if k == blob else k): (bytes(flipped) if k == blob else v) for k, v in items.items()}
    _refused(capsys, tmp_path, dst, B.resealed(renamed, swapped), "renamed-blob", "signs another manifest")
    # Re-signed by the attacker's own key: a valid signature, but not by a trusted key.
    evil = tmp_path / "evil"
    keygen(capsys, evil)
    from galahad.flywheel.catalog.signing import sign_manifest

    resigned = {**row, SIGNATURE_MEMBER: sign_manifest(load_private_key(evil), row["manifest.json"])}
    path = B.write_tar(tmp_path / "resigned.tar", list(resigned.items()))
    code, _, err = import_into(capsys, dst, path)
    assert one_line_error(code, err) and "does not trust" in err and nothing_written(dst)
    # A signature member after the blobs (trust is decided before them) is refused, not taken late.
    late = {k: v for k, v in items.items() if k != SIGNATURE_MEMBER} | {SIGNATURE_MEMBER: items[SIGNATURE_MEMBER]}
    path = B.write_tar(tmp_path / "late.tar", list(late.items()))
    for flags, match in (((), "unsigned"), (("--trust-unsigned",), "MANIFEST.sig comes after the blobs")):
        code, _, err = import_into(capsys, dst, path, *flags)
        assert one_line_error(code, err) and match in err and nothing_written(dst), err
    code, out, err = import_into(capsys, dst, bundle)  # and the untouched bundle still goes in
    assert code == 0 and json.loads(out)["added"]["artifacts"] == 4, err


def test_verify_admits_an_unsigned_bundle(tmp_path, model_cache, monkeypatch, capsys):
    """`--verify` re-derives every artifact on the local engine: an unsigned bundle of genuine artifacts goes in."""
    from galahad.flywheel.learn.rebuild_check import RebuildCheck
    from galahad.workers.engine import Engine
    from galahad.workers.graft import deposit_span
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    engine = Engine(load_model("tiny", model_cache, DEFAULT_RUNTIME), DEFAULT_RUNTIME)
    store = LocalStore(tmp_path / "src-store")
    bundle = tmp_path / "genuine.galahad"
    with Catalog(f"sqlite:///{tmp_path / 'src.sqlite3'}") as cat:
        cache = engine.new_cache()
        root_ids = engine.encode("Question: What is 2 + 2?\nAnswer: 4\n", bos=True)
        rid, root = deposit_span(engine, cache, root_ids, 0, None)
        child_ids = engine.encode("Question: What is 3 + 3?\nAnswer: 6\n")
        cid, child = deposit_span(engine, cache, child_ids, len(root_ids), rid)
        for data in (root, child):
            cat.artifacts.deposit(store, store.put(data))
        export_bundle(cat, store, bundle)
    with Catalog(f"sqlite:///{tmp_path / 'dst.sqlite3'}") as dst:
        out = import_bundle(dst, LocalStore(tmp_path / "dst-store"), bundle, rederive=RebuildCheck(engine))
        assert out["added"]["artifacts"] == 2 and out["signed_by"] is None and out["admitted_by"] == "verify"
    import galahad.flywheel.cli.cmd_catalog as cmd_catalog

    loaded = []
    monkeypatch.setattr(cmd_catalog, "engine_for", lambda model, *a: loaded.append(model) or engine)  # loaded once
    code, out, err = import_into(capsys, tmp_path / "data", bundle, "--verify", "--model", "tiny")
    assert code == 0, err
    assert json.loads(out)["admitted_by"] == "verify" and json.loads(out)["added"]["artifacts"] == 2
    assert loaded == ["tiny"]  # the CLI's --verify re-derived with the engine of --model
