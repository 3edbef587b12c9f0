"""`galahad solve "PROBLEM"`: answer from memory (exact hash, canonical key, similar text, transfer) or the
base model, reporting which path answered and whether the answer is `verified`, `unverified` (no check could
be made) or `wrong (computed value differs: X)` (`--json`: `verified` true, null or false). Where the computed
value refutes the model, the value is the answer (path `computed`, the model's answer beside it) unless
`--answer-policy model` (`memory/solver.by_policy`)."""

from __future__ import annotations

import argparse
import json
import sys

from galahad.flywheel.cli.argtypes import count
from galahad.flywheel.cli.flags import add_model_flag
from galahad.flywheel.cli.session import add_storage_args, engine_for, storage
from galahad.flywheel.config import ANSWER_POLICIES, DEFAULTS
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.policy import RetrievalPolicy
from galahad.flywheel.memory.solver import Solver, by_policy
from galahad.flywheel.service.client import Client


def register(sub: argparse._SubParsersAction) -> None:
    policy = DEFAULTS.retrieval
    p = sub.add_parser("solve", help="answer a problem, grafting verified solutions from the catalog")
    p.add_argument("problem", help="the problem text")
    add_model_flag(p)
    p.add_argument("--template", default=None, help="template id for the transfer path (default: inferred)")
    p.add_argument("--topic", default=None, help="topic for the transfer path (default: inferred)")
    p.add_argument("--max-solutions", type=count(), default=policy.max_solutions,
                   help=f"transfer: solutions grafted (default {policy.max_solutions})")
    p.add_argument("--json", action="store_true")
    p.add_argument("--server", default=None, help="ask a running `galahad serve` at URL (token: env GALAHAD_API_TOKEN)")
    p.add_argument("--gold", default=None, help="with --server: the gold answer (queues the problem for learning)")
    p.add_argument("--answer-policy", choices=ANSWER_POLICIES, default=None,
                   help="where the computed value refutes the model: answer the value (computed, the default) or "
                        "the model's answer labelled wrong (model); with --server default: the server's")
    add_storage_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.problem.strip():
        raise GalahadError("the problem text is empty")
    if args.server:
        return remote(args)
    paths, catalog, store = storage(args)
    with catalog:
        solver = Solver(engine_for(args.model, paths, args.kernel_mode), catalog, store)
        policy = RetrievalPolicy(max_solutions=args.max_solutions)
        ans = solver.solve(args.problem, args.template, args.topic, policy)
    ans = by_policy(ans, args.answer_policy or DEFAULTS.service.answer_policy)
    if ans.memory_note:  # memory knows it, compiled elsewhere: say so instead of answering silently from the base
        print(f"galahad: {ans.memory_note}", file=sys.stderr)
    if args.json:
        print(json.dumps(ans.to_dict(), sort_keys=True))
    else:
        print(f"{ans.answer}\n  {mark(ans.verified, ans.computed)}, path {ans.path}, {ans.decode_tokens} decode "
              f"tokens, {ans.seconds:.2f} s, {len(ans.grafted_artifacts)} artifacts / {ans.grafted_tokens} tokens "
              f"grafted" + refuted(ans.model_answer))
    return 0


def refuted(model_answer: str | None) -> str:
    """Path `computed`: the model's answer the computed value refuted, on its own line."""
    return "" if model_answer is None else f"\n  the model answered {model_answer!r}, refuted by the computed value"


def mark(verified: bool | None, computed: str | None = None) -> str:
    """How an answer is marked: verified, unverified (nothing could check it), or wrong."""
    if verified is None:
        return "unverified"
    if verified:
        return "verified"
    return f"wrong (computed value differs: {computed})" if computed is not None else "wrong"


def remote(args: argparse.Namespace) -> int:
    """The same answer from a running service (`galahad serve`): no model load in this process."""

    ans = Client(args.server).solve(args.problem, args.gold, args.answer_policy)
    if args.json:
        print(json.dumps(ans, sort_keys=True))
    else:
        print(f"{ans['answer']}\n  {mark(ans['verified'], ans.get('computed'))}, path {ans['path']}, {ans['decode_tokens']} "
              f"decode tokens, {ans['seconds']:.2f} s, {len(ans['grafted_artifacts'])} artifacts grafted"
              f"{', queued for learning' if ans['queued'] else ''}" + refuted(ans.get("model_answer")))
    return 0
