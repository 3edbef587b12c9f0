"""The flags more than one subcommand declares, declared once: `--data`, `--model`, and the learner's.

`galahad run` and `galahad serve` share one declaration of the learning loop's flags (`add_learner_flags`):
the same names, defaults (`config.DEFAULTS`) and validators (`argtypes`). `--data` also works after any
subcommand (`add_data_flag` on every subparser).
"""

from __future__ import annotations

import argparse
import re

from galahad.flywheel.cli.argtypes import SEED, count, finite
from galahad.flywheel.config import (
    DATA_ENV,
    DEFAULT_DATA,
    DEFAULTS,
    KERNEL_MODES,
    MODEL_CACHE_ENV,
    MODEL_HELP,
)
from galahad.kernels.modes import AUTO, MODE_ENV, MODES

DEVICES = ("auto", "cpu", "cuda")
DATA_HELP = (f"data dir: catalog, artifact store and reports (env {DATA_ENV}, default {DEFAULT_DATA}); the model "
             f"cache is not in it (env {MODEL_CACHE_ENV}, else $XDG_CACHE_HOME/galahad, else ~/.cache/galahad)")


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(text: str) -> int:
    """A size in bytes: `123`, `500M`, `1.5G`, `20GB`, `64KiB` (binary units); refused in one line otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 500M, 20G, 123456): {str(text)[:40]!r}")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value > 1 << 60:
        raise argparse.ArgumentTypeError(f"size too large: {text[:40]!r}")
    return value


def add_data_flag(p: argparse.ArgumentParser, after_command: bool = False) -> None:
    """`--data DIR`. After a subcommand its default is SUPPRESS, so it overrides the global one only when given."""
    p.add_argument("--data", default=argparse.SUPPRESS if after_command else None, help=DATA_HELP)


def add_data_flag_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--data` on every subcommand (and sub-subcommand) that does not declare it itself."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                if "--data" not in sub._option_string_actions:
                    add_data_flag(sub, after_command=True)
                add_data_flag_everywhere(sub)


def add_model_flag(p: argparse.ArgumentParser, what: str = "") -> None:
    """`--model`: tiny | gemma3-270m | a local model folder; and `--kernel-mode`, the kernels it runs under."""
    p.add_argument("--model", default=DEFAULTS.model, help=f"{what}{MODEL_HELP}")
    add_kernel_mode_flag(p, KERNEL_MODES)


def add_kernel_mode_flag(p: argparse.ArgumentParser, modes: tuple[str, ...]) -> None:
    """`--kernel-mode`: the kernels the engine runs, `modes` of the one registry (kernels/modes.py `MODES`)."""
    said = "; ".join(f"{m}: {MODES[m][2]}" for m in modes)
    p.add_argument("--kernel-mode", choices=(AUTO, *modes), default=DEFAULTS.kernel_mode,
                   help=f"kernels the engine runs ({said}; {AUTO}: ${MODE_ENV} when set, else codes where it runs, "
                        "else stock); artifacts graft only under the mode that made them "
                        f"(default {DEFAULTS.kernel_mode})")


def add_prompt_budget_flag(p: argparse.ArgumentParser) -> None:
    """`--max-prompt-tokens`: the prompt tokens one request may make the engine prefill (`ServiceConfig`)."""
    budget = DEFAULTS.service.max_prompt_tokens
    p.add_argument("--max-prompt-tokens", type=count(), default=budget,
                   help=f"prompt tokens one /v1/solve may make the engine prefill; longer prompts get 413 before "
                        f"any forward (default {budget})")


def add_solve_queue_flag(p: argparse.ArgumentParser) -> None:
    """`--max-queued-solves`: solves one replica admits at once (`ServiceConfig`); 0 serves reads only."""
    limit = DEFAULTS.service.max_queued_solves
    p.add_argument("--max-queued-solves", type=count(minimum=0, maximum=DEFAULTS.service.max_ongoing_requests // 2),
                   default=limit, metavar="N",
                   help=f"solves one replica admits at once (the one running and those waiting); more get 503 "
                        f"(429 on the OpenAI routes) with Retry-After; 0: catalog reads only, every solve "
                        f"refused (default {limit})")


def add_learner_flags(p: argparse.ArgumentParser, role: str = "", seed_help: str = "sampling seed") -> None:
    """The flags `run` and `serve` share: model, sampling budget, seed, workers, device, Ray cluster.
    `role` prefixes the learner-only help texts (`learner: ` for serve, whose learner they configure)."""
    sampling, workers = DEFAULTS.loop.sampling, DEFAULTS.workers
    add_model_flag(p)
    p.add_argument("--k", type=count(), default=sampling.k,
                   help=f"{role}samples per problem (budget, default {sampling.k})")
    p.add_argument("--max-tokens", type=count(), default=sampling.max_tokens,
                   help=f"{role}tokens per sample (budget, default {sampling.max_tokens})")
    p.add_argument("--temperature", type=finite(), default=sampling.temperature,
                   help=f"{role}sampling temperature, finite and >= 0 (default {sampling.temperature:g})")
    p.add_argument("--seed", type=SEED, default=DEFAULTS.seeds.seed,
                   help=f"{role}{seed_help} (default {DEFAULTS.seeds.seed})")
    p.add_argument("--generators", type=count(), default=workers.generators,
                   help=f"{role}generator actors (default {workers.generators})")
    p.add_argument("--chain-max-tokens", type=count(), default=workers.chain_max_tokens,
                   help=f"{role}start a new chain past this length (default {workers.chain_max_tokens})")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help=f"{role}where generators run; auto: cuda when the Ray cluster has GPUs (artifacts graft "
                        "only under the same device)")
    p.add_argument("--address", default=None, help="join an existing Ray cluster (host:port)")
    p.add_argument("--no-gold-solutions", dest="gold_solutions", action="store_false",
                   help=f"{role}a problem no sample verifies is marked failed, even when its gold is trusted "
                        "(default: its computed gold is deposited as a gold solution)")
    p.add_argument("--store-budget", type=byte_size, default=DEFAULTS.loop.store_budget, metavar="SIZE",
                   help=f"{role}after each drain, evict the least recently grafted blobs until the store's "
                        "artifacts fit SIZE (e.g. 20G, 500M; rows, tokens and verdicts stay; an evicted "
                        "artifact is rebuilt exactly on its next graft); default: no budget")
    ram = DEFAULTS.store.ram_tier_bytes
    p.add_argument("--ram-tier", type=byte_size, default=ram, metavar="SIZE",
                   help="each process that grafts keeps the artifacts it read and hash-checked in memory up to "
                        f"SIZE, least recently used out first (0: none; default {ram >> 20}M)")
