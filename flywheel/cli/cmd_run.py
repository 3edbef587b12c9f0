"""`galahad run`: the long-running learning job (the README's first command).

Seeds the catalog's work queue from the built-in families (or a JSONL problem file), starts generator
actors and a depositor actor on a local or existing Ray cluster, and runs the verify-then-cache loop
with a progress bar and live figures. Killed at any moment, it resumes where the catalog says it was.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import stat
import sys
from pathlib import Path

from galahad.flywheel.cli.argtypes import SEED, count, finite
from galahad.flywheel.cli.session import add_storage_args, storage
from galahad.flywheel.config import DEFAULT_MODEL, SeedConfig, WorkerConfig
from galahad.flywheel.errors import GalahadError
from galahad.workers.sampling import SamplingConfig


def register(sub: argparse._SubParsersAction) -> None:
    seeds, workers, sampling = SeedConfig(), WorkerConfig(), SamplingConfig()
    p = sub.add_parser("run", help="run the verify-then-cache learning loop")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--limit", type=count(), default=None, help="stop after N problems")
    p.add_argument("--problems", type=Path, default=None, help="JSONL problem file instead of built-in families")
    p.add_argument("--families", default=",".join(seeds.families), help="built-in families to seed")
    p.add_argument("--per-family", type=count(), default=seeds.per_family,
                   help=f"problems seeded per family (default {seeds.per_family})")
    p.add_argument("--seed", type=SEED, default=seeds.seed, help="problem and sampling seed")
    p.add_argument("--all-templates", action="store_true", help="seed every problem (default: the train split)")
    p.add_argument("--k", type=count(), default=sampling.k, help="samples per problem (budget)")
    p.add_argument("--max-tokens", type=count(), default=sampling.max_tokens, help="tokens per sample (budget)")
    p.add_argument("--temperature", type=finite(), default=sampling.temperature)
    p.add_argument("--sampler", choices=["batched", "sequential"], default=sampling.sampler,
                   help=f"decode a round's samples as one batch or one by one (default {sampling.sampler})")
    p.add_argument("--round-size", type=count(), default=None,
                   help="samples per problem per round (default: LoopConfig.round_size)")
    p.add_argument("--problems-per-call", type=count(), default=None,
                   help="problems sampled together in one generator call, one batch "
                        "(default: as many as fill --batch-rows with one round each)")
    p.add_argument("--batch-rows", type=count(), default=sampling.batch_rows,
                   help=f"the batched sampler's most live rows (default {sampling.batch_rows})")
    p.add_argument("--generators", type=count(), default=workers.generators, help="generator actors")
    p.add_argument("--chain-max-tokens", type=count(), default=workers.chain_max_tokens,
                   help="start a new chain past this length")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cuda when the Ray cluster has GPUs (artifacts graft only under the same device)")
    p.add_argument("--address", default=None, help="join an existing Ray cluster (host:port)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_storage_args(p)
    p.set_defaults(func=run)


def load_problems(args: argparse.Namespace) -> list[dict]:
    from galahad.flywheel.problems import families
    from galahad.flywheel.problems import records as problems

    if args.problems is not None:
        items = problems.load_jsonl(args.problems)
    else:
        names = [f for f in args.families.split(",") if f]
        unknown = [f for f in names if f not in families.FAMILIES]
        if unknown:
            raise GalahadError(f"unknown family {unknown[0]!r}; known: {', '.join(sorted(families.FAMILIES))}")
        pool = [p for f in names for p in families.generate(f, args.per_family, args.seed)]
        # Learn on the train split only: held-out instances and templates stay out of the catalog so that
        # `eval transfer` can measure what the memory does for problems it has never seen.
        items = list(pool) if args.all_templates else list(problems.splits(pool, args.seed).train)
    return [dict(text=p.problem, answer=p.answer, source=p.source, topic=p.topic, template=p.template,
                 external_id=p.id) for p in items]


def sqlite_file(url: str) -> Path | None:
    """The resolved database file of a SQLite URL (None for other databases or in-memory SQLite), so
    `sqlite:////D/./catalog.sqlite3` and a symlink to the data dir name the same catalog."""
    from galahad.flywheel.catalog.db import parse_url

    u = parse_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser().resolve()


def is_embedded(url: str, paths) -> bool:
    """Is this the data dir's own SQLite catalog, however the URL spells it?"""
    return sqlite_file(url) == sqlite_file(paths.catalog_url)


@contextlib.contextmanager
def run_lock(root: Path):
    """One local job per data dir. Holding it proves no other local job owns the embedded catalog's claims.
    The lock file is opened without following a symlink and without truncating anything."""
    path = root / "run.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise GalahadError(f"cannot open the run lock {path}: {exc.strerror or exc} "
                           "(it must be a regular file, not a symlink)") from None
    with os.fdopen(fd, "r+b") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise GalahadError(f"the run lock {path} is not a regular file")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GalahadError(f"another `galahad run` is using {root}") from None
        yield


@contextlib.contextmanager
def stderr_to(path: Path):
    """Point file descriptor 2 (C/C++ code included) at a log file for the duration of a block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


CONNECT_TIMEOUT_S = 3.0


def check_address(address: str) -> None:
    """Refuse a Ray address that is malformed or where nothing listens, in seconds: Ray itself retries
    for most of a minute before it gives up on an address nobody answers."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GalahadError(f"--address must be host:port (or ray://host:port), got {address[:200]!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise GalahadError(f"cannot reach the Ray cluster at {address[:200]}: {reason}") from None


def start_ray(address: str | None, log: Path) -> None:
    import ray

    from galahad.workers.ray_env import RAY_CONNECT_ENV

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        # Ray's C++ core logs connection retries straight to fd 2; users get our one line instead, and
        # the raw lines stay in the data dir's log.
        with stderr_to(log):
            if address:
                for key, value in RAY_CONNECT_ENV.items():
                    os.environ.setdefault(key, value)
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            else:
                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR")
    except Exception as exc:  # ray raises ConnectionError, RuntimeError or its own types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise GalahadError(f"cannot reach the Ray cluster at {address or 'local'}: {first[:200]}") from exc


def run(args: argparse.Namespace) -> int:
    from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

    for name in ("limit", "k", "max_tokens", "generators", "per_family", "round_size", "problems_per_call",
                 "batch_rows"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise GalahadError(f"--{name.replace('_', '-')} must be at least 1")
    if args.address:
        check_address(args.address)
    pin_process_env(DEFAULT_RUNTIME)
    if not args.address:
        # A local cluster stays on loopback: by default Ray advertises the machine's interface address.
        # This setting keeps a single-node cluster on 127.0.0.1; Ray reads it when it is imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from galahad.workers.model_loader import check_spec

    check_spec(args.model)
    items = load_problems(args)  # validate input before touching any state
    paths, catalog, store = storage(args, create=True)
    embedded = is_embedded(catalog.url, paths)
    with catalog, (run_lock(paths.root) if embedded else contextlib.nullcontext()):
        return _run(args, paths, catalog, store, items, embedded)


def _run(args, paths, catalog, store, items, embedded) -> int:
    import ray
    from tqdm import tqdm

    from galahad.flywheel.learn.loop import Flywheel, LoopConfig, summary
    from galahad.workers.actors import start_workers
    from galahad.workers.runtime import DEFAULT_RUNTIME

    catalog.add_problems(items)
    if embedded:
        catalog.release_claims()  # claims left by a killed local job: we hold the lock, so they are stale
    sampling = SamplingConfig(k=args.k, max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                              sampler=args.sampler, batch_rows=args.batch_rows)
    config = LoopConfig(limit=args.limit, sampling=sampling, round_size=args.round_size or LoopConfig.round_size,
                        problems_per_call=args.problems_per_call)
    # Build the model snapshot once, here, before any actor starts: actors that each built it at once
    # read each other's half-written files on a fresh machine (the build is also locked across processes).
    from galahad.workers.model_loader import ensure_snapshot

    ensure_snapshot(args.model, paths.models)
    start_ray(args.address, paths.root / "logs" / "ray-driver.log")
    try:
        generators, depositor, fingerprint = start_workers(
            args.model, str(paths.models), DEFAULT_RUNTIME, args.device, args.generators, str(store.root),
            args.chain_max_tokens)
        # The address each actor's node registered with (what the cluster's traffic uses).
        addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        nodes = [addresses.get(i, "?") for i in ray.get([a.node_id.remote() for a in [*generators, depositor]])]
        run_id = catalog.start_run({"model": args.model, "model_fingerprint": fingerprint, "generators": args.generators,
                                    "address": args.address, **summary_config(config)})
        wheel = Flywheel(catalog, store, generators, depositor, fingerprint, config)
        pending = catalog.stats()["by_status"]
        total = sum(pending.get(s, 0) for s in ("pending", "claimed"))
        total = min(total, args.limit) if args.limit else total
        bar = tqdm(total=total, desc="flywheel", unit="problem", disable=args.no_progress, file=sys.stderr)

        def progress(t):
            bar.n = t.verified + t.failed
            bar.set_postfix(t.postfix(), refresh=True)

        tally = wheel.run(run_id, progress)
        bar.close()
        result = summary(tally, config)
        catalog.finish_run(run_id, result)
    finally:
        ray.shutdown()
    result["run_id"] = run_id
    result["nodes"] = {"generators": nodes[:-1], "depositor": nodes[-1]}
    result["catalog"] = catalog.stats()
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
    else:
        c = result["catalog"]
        print(f"run {run_id}: {tally.problems} problems, {tally.attempted} attempts, {tally.verified} verified, "
              f"{tally.failed} failed, {tally.deposited} deposited ({tally.reconciled} after a restart), "
              f"{tally.tokens_spent} tokens spent, {result['verified_per_hour']:.0f} verified/h")
        print(f"catalog: {c['problems']} problems, {c['verified']} verified, {c['artifacts']} artifacts, "
              f"{c['stored_tokens']} stored tokens, {c['bytes'] / 1e6:.1f} MB")
    return 0


def summary_config(config) -> dict:
    from dataclasses import asdict

    return {"loop": asdict(config)}
