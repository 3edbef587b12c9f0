"""`galahad run`: the long-running learning job (the README's first command).

Seeds the catalog's work queue from the built-in families (or a JSONL problem file), starts generator
actors and a depositor actor on a local or existing Ray cluster, and runs the verify-then-cache loop
with a progress bar and live figures. Killed at any moment, it resumes where the catalog says it was.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from pathlib import Path

from galahad.flywheel.app import cluster
from galahad.flywheel.app.cluster import check_address
from galahad.flywheel.app.lock import RunLock, run_lock
from galahad.flywheel.app.storage import is_embedded
from galahad.flywheel.cli.argtypes import count
from galahad.flywheel.cli.flags import add_learner_flags
from galahad.flywheel.cli.session import add_storage_args, storage
from galahad.flywheel.config import DEFAULT_MODEL, DEFAULTS, LoopConfig, Paths
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import families
from galahad.flywheel.problems import records as problems
from galahad.flywheel.problems.scope_ids import SHARED
from galahad.kernels.modes import resolve
from galahad.workers.sampling import SamplingConfig


def register(sub: argparse._SubParsersAction) -> None:
    seeds, sampling = DEFAULTS.seeds, DEFAULTS.loop.sampling
    p = sub.add_parser("run", help="run the verify-then-cache learning loop")
    # The flags `serve` shares (model, budget, seed, workers, device, cluster): one declaration.
    add_learner_flags(p, seed_help="problem and sampling seed")
    p.add_argument("--limit", type=count(), default=None, help="stop after N problems")
    p.add_argument("--problems", type=Path, default=None, help="JSONL problem file instead of built-in families")
    p.add_argument("--families", default=",".join(seeds.families), help="built-in families to seed")
    p.add_argument("--per-family", type=count(), default=seeds.per_family,
                   help=f"problems seeded per family (default {seeds.per_family})")
    p.add_argument("--all-templates", action="store_true", help="seed every problem (default: the train split)")
    p.add_argument("--sampler", choices=["batched", "sequential"], default=sampling.sampler,
                   help=f"decode a round's samples as one batch or one by one (default {sampling.sampler})")
    p.add_argument("--sampler-dtype", choices=["auto", "float32", "bfloat16"], default=sampling.dtype,
                   help="what the generators compute in (auto: the kernel mode and dtype that measured fastest on this "
                        "CPU, timed once; deposits and grafts stay the exact engine's; default " + sampling.dtype + ")")
    p.add_argument("--round-size", type=count(), default=None,
                   help=f"samples per problem per round (default {DEFAULTS.loop.round_size})")
    p.add_argument("--problems-per-call", type=count(), default=None,
                   help="problems sampled together in one generator call, one batch "
                        "(default: as many as fill --batch-rows with one round each)")
    p.add_argument("--batch-rows", type=count(), default=sampling.batch_rows,
                   help=f"the batched sampler's most live rows (default {sampling.batch_rows})")
    p.add_argument("--tenant", default=None, metavar="NAME",
                   help="learn into this tenant's memory scope (`galahad tenants add`; default: shared)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_storage_args(p)
    p.set_defaults(func=run)


def load_problems(args: argparse.Namespace) -> tuple[list, list[str], str]:
    """The problems to learn, their places ("file:line") and who gives their golds; a wrong computable
    gold or two different golds for one problem refuses the whole file here, before any state is touched."""
    from galahad.flywheel.problems.check import refuse_bad_golds  # deferred: lark is heavy

    if args.problems is not None:
        numbered = problems.load_numbered(args.problems)
        items, places = [p for p, _ in numbered], [w for _, w in numbered]
        given_by = f"file:{args.problems}"
    else:
        names = [f for f in args.families.split(",") if f]
        unknown = [f for f in names if f not in families.FAMILIES]
        if unknown:
            raise GalahadError(f"unknown family {unknown[0]!r}; known: {', '.join(sorted(families.FAMILIES))}")
        pool = [p for f in names for p in families.generate(f, args.per_family, args.seed)]
        # Learn on the train split only: held-out instances and templates stay out of the catalog so that
        # `eval transfer` can measure what the memory does for problems it has never seen.
        items = list(pool) if args.all_templates else list(problems.splits(pool, args.seed).train)
        places, given_by = [f"family problem {p.id}" for p in items], "builtin"
    refuse_bad_golds(items, places)
    return items, places, given_by


def run(args: argparse.Namespace) -> int:
    if args.address:
        check_address(args.address)
    cluster.prepare(args.model, args.address)
    items = load_problems(args)  # validate input (schema, golds) before touching any state
    paths, catalog, store = storage(args, create=True)
    embedded = is_embedded(catalog.url, paths)
    with catalog, (run_lock(paths.root) if embedded else contextlib.nullcontext()) as lock:
        return _run(args, paths, catalog, store, items, lock)


def _scope(catalog, tenant: str | None) -> str:
    """The memory scope `--tenant` names: a tenant the catalog knows (revoked ones too: their memory
    stays theirs), or shared without it."""
    if tenant is None or tenant == SHARED:
        return SHARED
    if catalog.tenants.get(tenant) is None:
        raise GalahadError(f"unknown tenant {tenant[:60]!r} (add it with `galahad tenants add {tenant[:60]}`)")
    return tenant


def _run(args, paths, catalog, store, items, lock: RunLock | None) -> int:
    import ray
    from tqdm import tqdm

    from galahad.flywheel.app.intake import admit  # deferred: lark is heavy
    from galahad.flywheel.app.job import LearningJob, WorkerSpec  # deferred: torch and ray are heavy
    from galahad.flywheel.learn.loop import summary  # deferred: sqlalchemy is heavy
    from galahad.flywheel.problems.check import unchecked_golds, unchecked_line  # deferred: lark is heavy

    scope = _scope(catalog, args.tenant)
    admit(catalog, *items, scope=scope)  # conflicts with golds already in the catalog refuse the file, nothing started
    sampling = SamplingConfig(k=args.k, max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                              sampler=args.sampler, batch_rows=args.batch_rows, dtype=args.sampler_dtype)
    config = LoopConfig(limit=args.limit, sampling=sampling, round_size=args.round_size or LoopConfig.round_size,
                        problems_per_call=args.problems_per_call, store_budget=args.store_budget,
                        gold_solutions=args.gold_solutions)
    cluster.start(args.model, paths, args.address)
    try:
        workers = WorkerSpec(args.model, str(paths.models), args.generators, args.chain_max_tokens, args.device,
                             args.kernel_mode)
        job = LearningJob(catalog, store, workers, config, {"address": args.address}, lock)
        nodes = job.nodes()
        before = catalog.stats()
        pending = before["by_status"]
        total = sum(pending.get(s, 0) for s in ("pending", "claimed"))
        total = min(total, args.limit) if args.limit else total
        bar = tqdm(total=total, desc="flywheel", unit="problem", disable=args.no_progress, file=sys.stderr)

        def progress(t):
            bar.n = t.verified + t.gold_solutions + t.failed
            bar.set_postfix(t.postfix(), refresh=True)

        tally = job.drain(progress)
        progress(tally)  # the bar ends on the summary's counts
        bar.close()
        result = summary(tally, config)
        job.finish(result)
    finally:
        ray.shutdown()
    run_id = job.run_id
    result["run_id"] = run_id
    result["nodes"] = nodes
    result["catalog"] = catalog.stats()
    result["artifacts_added"] = result["catalog"]["artifacts"] - before["artifacts"]
    result.update(where(args, paths, catalog, store))
    result["kernel_mode"] = args.kernel_mode  # the concrete mode `auto` resolved to, as every engine ran it
    result["sampler"] = job.sampler  # what the generators computed in (their own choice: `--sampler-dtype`)
    result["commands"] = next_commands(args, paths, result)
    unchecked = unchecked_golds(items[0])  # golds taken on their giver's word (no computable value)
    result["golds_unchecked"], result["golds_unchecked_note"] = len(unchecked), unchecked_line(unchecked)
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
    else:
        print("\n".join(report(result)))
    return 0


def sampling_line(sampler: dict) -> str:
    """What the generators computed in, and the timings `auto` chose it by (when it measured)."""
    line = f"{sampler['kernel_mode']}/{sampler['compute_dtype']}"
    timed = sampler.get("seconds_per_step") or {}
    if timed:
        line += " (fastest here: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in sorted(timed.items())) + \
            " a batch step)"
    return line


def where(args, paths, catalog, store) -> dict:
    """Where the run's results live: the data dir, the catalog (its URL, password hidden), the store."""
    from galahad.flywheel.catalog.db import redact  # deferred: sqlalchemy is heavy

    return {"data_dir": str(paths.root), "catalog_url": redact(catalog.url), "store": str(store.root)}


def next_commands(args, paths, result: dict) -> dict:
    """Commands that pick up where this run left off, with the flags that reach the same data."""
    top = ["galahad"] + ([] if paths.root == Paths.resolve(None).root else ["--data", str(paths.root)])
    place = ([] if args.catalog is None else ["--catalog", result["catalog_url"]]) + \
        ([] if args.store is None else ["--store", str(args.store)])
    engine = ([] if args.model == DEFAULT_MODEL else ["--model", args.model]) + \
        ([] if args.kernel_mode == resolve(DEFAULTS.kernel_mode)[0] else ["--kernel-mode", args.kernel_mode])
    learned = result["verified_examples"]
    commands = {
        "list_artifacts": [*top, "catalog", "ls", *place],
        "list_failed": [*top, "catalog", "find", "--status", "failed", "--all", *place],
        "list_runs": [*top, "catalog", "runs", *place],
    }
    if learned:
        commands["solve"] = [*top, "solve", *engine, *place, learned[0]["text"]]
    else:  # nothing learned: more samples per problem
        commands["run_again"] = [*top, "run", *engine, *place, "--k", str(2 * args.k)]
    return {name: shlex.join(argv) for name, argv in commands.items()}


def report(r: dict, shown: int = 3) -> list[str]:
    """The run's summary for people: what was learned, where it lives, what failed, what to try next."""
    c = r["catalog"]
    lines = [
        f"run {r['run_id']}: verified {r['verified']:,} of {r['problems']:,} problems "
        f"({r['gold_solutions']:,} gold solutions, {r['failed']:,} failed) "
        f"in {r['attempted']:,} attempts, {r['tokens_spent']:,} tokens, {r['seconds']:.1f} s "
        f"({r['verified_per_hour']:.0f} verified/h)",
        f"learned: deposited {r['deposited']:,} solutions (sampled and gold)"
        + (f" ({r['reconciled']:,} of them after a restart)" if r["reconciled"] else "")
        + f"; {r['artifacts_added']:,} artifacts added (each solution: a library and a recall artifact)",
        "where it lives:",
        f"  data dir  {r['data_dir']}",
        f"  catalog   {r['catalog_url']}  ({c['problems']:,} problems, {c['verified']:,} verified, "
        f"{c['artifacts']:,} artifacts, {c['bytes'] / 1e6:.1f} MB)",
        f"  store     {r['store']}",
        f"  kernels   {r['kernel_mode']} (artifacts graft under this kernel mode)",
        f"  sampling  {sampling_line(r['sampler'])}",
    ]
    if r.get("golds_unchecked_note"):
        lines.append(r["golds_unchecked_note"])
    if r["failed"]:
        lines.append(f"failed: {r['failed']:,} problems (no verified answer in the budget), e.g.")
        lines += [f"  {e['id'][:16]}  {e['text'][:100]}" for e in r["failed_examples"][:shown]]
        lines.append(f"  every failed problem in the catalog: {r['commands']['list_failed']}")
    lines.append("next:")
    if "solve" in r["commands"]:
        lines.append(f"  {r['commands']['solve']}   (a learned problem, answered from its graft)")
    else:
        lines.append(f"  {r['commands']['run_again']}   (nothing verified: twice the samples per problem)")
    lines.append(f"  {r['commands']['list_artifacts']}   (the artifacts)")
    return lines
