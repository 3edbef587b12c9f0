"""Galahad's one configuration: every flywheel-side default, composed into one frozen `GalahadConfig`.

The only home of the product's defaults (model and data dir, env names, budgets and limits, seeds, workers,
the loop, retrieval and recall, the service, `catalog gc`, the evals): `DEFAULTS = GalahadConfig()` is what
the CLI's flags, the service and the evals read. A leaf, pure data importing nothing of Galahad's, so any
layer may read it. Two configs stay with their own layer: the pinned runtime's (`workers/runtime.py`) and
the verifier's (`verifier/verifier.py`, `verifier/guard.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# -- names: model, data dir, env -----------------------------------------------------------------------

DEFAULT_MODEL = "gemma3-270m"
MODEL_HELP = f"tiny | {DEFAULT_MODEL} | a local model folder (default {DEFAULT_MODEL})"
# Kernel modes a job can run (`kernels/modes.py` SERVING, its registry's serving modes, is this tuple;
# tests/test_kernel_mode_flag.py holds them equal), and the default that picks one (`kernels.modes.resolve`).
# Artifacts graft only under the mode that made them (the mode is in the runtime fingerprint).
KERNEL_MODES = ("stock", "codes")
KERNEL_AUTO = "auto"
DEFAULT_DATA = "~/.galahad"
DATA_ENV = "GALAHAD_HOME"
# The converted model snapshot is ~1 GB and data-independent: one cache shared by every data dir.
MODEL_CACHE_ENV = "GALAHAD_MODEL_CACHE"
CATALOG_ENV = "GALAHAD_CATALOG"
TOKEN_ENV = "GALAHAD_API_TOKEN"  # the service's bearer token (`service/security.py`)

# What `galahad run` seeds and `galahad eval transfer` evaluates by default: the one list.
DEFAULT_FAMILIES: tuple[str, ...] = ("add1", "sub1", "mul1", "add2x1", "lin1")


def model_cache() -> Path:
    """`$GALAHAD_MODEL_CACHE`, else `$XDG_CACHE_HOME/galahad`, else `~/.cache/galahad` (never a data dir)."""
    shared = os.environ.get(MODEL_CACHE_ENV)
    if shared:
        return Path(shared).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return (base / "galahad").resolve()


@dataclass(frozen=True)
class Paths:
    """Where everything lives under one data dir (catalog, artifact store, reports), and the model cache."""

    root: Path

    @classmethod
    def resolve(cls, data: str | os.PathLike | None = None) -> Paths:
        raw = data or os.environ.get(DATA_ENV) or DEFAULT_DATA
        return cls(Path(raw).expanduser().resolve())

    @property
    def catalog_url(self) -> str:
        return f"sqlite:///{self.root / 'catalog.sqlite3'}"

    def resolve_catalog(self, url: str | None) -> str:
        """`--catalog URL`, else env GALAHAD_CATALOG, else the embedded SQLite file in the data dir."""
        return url or os.environ.get(CATALOG_ENV) or self.catalog_url

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def models(self) -> Path:
        """The shared model cache (`model_cache()`): not inside the data dir."""
        return model_cache()

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def trusted_keys(self) -> Path:
        """Public keys whose signed bundles `catalog import` takes (`catalog trust`)."""
        return self.root / "trusted_keys"

    def ensure(self) -> Paths:
        for p in (self.root, self.store, self.reports):
            p.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class SamplingConfig:
    """How the engine samples a learning attempt (`workers/sampling.py`, `workers/sampler.py`)."""

    k: int = 8
    max_tokens: int = 12
    temperature: float = 1.0
    seed: int = 0
    sampler: str = "batched"  # workers/sampler.py: "batched" (one forward per step for all rows) or "sequential"
    batch_rows: int = 32  # the batched sampler's most live rows (a generator call's samples share them)
    # what the generators compute in (`workers.runtime.GeneratorRuntime`): "auto" (the kernel mode and dtype that
    # measured fastest on this CPU: `workers.sampler_choice`), "float32" or "bfloat16"; deposits and grafts are
    # always the exact engine's
    dtype: str = "auto"


# -- budgets and limits shared by several configs --------------------------------------------------------

@dataclass(frozen=True)
class Budgets:
    """Token budgets and input-size limits that more than one config (or module) uses."""

    answer_tokens: int = 8  # a greedy answer decoded after a graft (solve's memory paths, the evals' grafts)
    # The base model's answer gets what one learning attempt gets: the engine's sampling budget.
    base_tokens: int = SamplingConfig.max_tokens
    max_text_chars: int = 20_000  # one problem-file field, one problem text posted to the service


BUDGETS = Budgets()


# -- the learning job --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SeedConfig:
    """What `galahad run` puts in the work queue when no problem file is given."""

    families: tuple[str, ...] = DEFAULT_FAMILIES
    per_family: int = 24
    seed: int = 0


@dataclass(frozen=True)
class WorkerConfig:
    """How many generator actors, and how long a library chain may grow before a new one starts."""

    generators: int = 1
    chain_max_tokens: int = 4096


@dataclass(frozen=True)
class LoopConfig:
    """The verify-then-cache loop (`learn/loop.py`): rounds, batching, leases, and the engine's sampling."""

    round_size: int = 4
    # Problems claimed together and sampled in one generator call (one batch). None: as many as fill the
    # batched sampler's rows with one round each (batch_rows // round_size: 32 // 4 = 8).
    problems_per_call: int | None = None
    in_flight_per_generator: int = 2
    lease_seconds: float = 900.0
    limit: int | None = None
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    # Bytes the store's artifacts may take (`--store-budget`): after each drain the least recently grafted
    # blobs are evicted to fit (`catalog/evictions.py`; rebuilt exactly on their next graft). None: no budget.
    store_budget: int | None = None
    # When no sample verifies and the gold is trusted (`gold_source` computed, re-checked), deposit the gold
    # as the solution, provenance `gold` (`learn/gold_solutions.py`). False: the problem is marked failed.
    gold_solutions: bool = True
    # A failed problem asked again is tried again (`catalog.queue.retry`): at most `retry_tries` tries in all,
    # try n not before `retry_delay_seconds` x 2^(n-2) after the last failure, with k doubled per try
    # (sampling.k x 2^(n-1)) up to `retry_max_k` samples.
    retry_tries: int = 4
    retry_delay_seconds: float = 30.0
    retry_max_k: int = 64


# -- memory: retrieval and recall ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RetrievalPolicy:
    """How the transfer path picks memory: the first `max_solutions` of the newest chain of a library."""

    max_solutions: int = 8
    scope: str = "template"  # or "topic": which libraries it reads (`library_names.candidate_libraries`)


@dataclass(frozen=True)
class RecallPolicy:
    """How a new problem finds a verified one posed in other words: by canonical key, else by text
    similarity (at least `similar_min`) among problems with the same numbers in the same order."""

    similar_min: float = 0.75


# -- the service and the catalog's gc ---------------------------------------------------------------------

# What a caller gets when the computed value refutes the model's answer (`memory/solver.by_policy`): the value
# (`computed`, path `computed`), or the model's answer labelled wrong (`model`: evaluations of the model).
ANSWER_POLICIES = ("computed", "model")


@dataclass(frozen=True)
class ServiceConfig:
    """`galahad serve`: bind address, replicas, size limits, learner polling."""

    host: str = "127.0.0.1"
    port: int = 8000
    replicas: int = 1
    max_body_bytes: int = 1_000_000  # one request body (a problem list included)
    max_problem_chars: int = BUDGETS.max_text_chars  # one problem text (the problem-file limit)
    max_problems: int = 1_000  # problems in one POST /v1/problems
    max_find: int = 100  # rows from /v1/catalog/find
    learner_poll_seconds: float = 1.0  # how often an idle learner looks for newly queued problems
    max_ongoing_requests: int = 64  # per replica; the engine itself answers one request at a time
    # Solves one replica admits at once (the one the engine runs and those waiting for it); more get 503 with
    # Retry-After, so a flood of solves leaves the other max_ongoing_requests slots to /healthz and reads.
    max_queued_solves: int = 8
    # Prompt tokens one request may make the engine prefill (413 above it, before any forward): a few-shot
    # prompt is ~100 tokens; 1,024 is a few seconds of this 2-core CPU's engine time.
    max_prompt_tokens: int = 1_024
    # Recall decodes (hash and key routes) a replica keeps, least recently used out first (`service/recall_memo.py`):
    # a repeated recall then returns the bytes its engine already computed, without the forward passes; 0: off.
    recall_memo: int = 4_096
    # The page (`/ui`, `service/ui.py`): it reloads itself this often; its attempts-per-second chart covers
    # the last window in buckets; it lists this many of the latest verifications.
    ui_refresh_seconds: int = 5
    ui_rate_window_seconds: int = 600
    ui_rate_buckets: int = 60
    ui_latest: int = 12
    answer_policy: str = ANSWER_POLICIES[0]  # `serve --answer-policy`; a request may ask either


@dataclass(frozen=True)
class StoreConfig:
    """The artifact store's RAM tier (`artifacts/ram_tier.py`): checked artifacts stay in memory, LRU, up to
    `ram_tier_bytes` per store (0: none), so a repeated graft reads and hashes nothing. 2 GiB suits a 24 GB
    machine running a few engine processes: ~50 artifacts of 4,096 gemma3-270m tokens."""

    ram_tier_bytes: int = 2 << 30


@dataclass(frozen=True)
class S3Retry:
    """The object store's retries (`artifacts/s3_store.py`): a transient failure is retried after `base_s *
    2**n` (jittered, at most `cap_s`), at most `attempts` tries and never past `deadline_s` after the first (a
    store that restarts within it loses nothing); each try's connect and read are bounded by
    `connect_timeout_s` and `read_timeout_s`."""

    attempts: int = 40
    base_s: float = 0.25
    cap_s: float = 4.0
    deadline_s: float = 30.0
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 60.0


@dataclass(frozen=True)
class GcConfig:
    """`catalog gc`: how old an orphan must be, and the most of the store one gc may delete unforced."""

    grace_seconds: float = 3600.0
    max_fraction: float = 0.5  # deleting more than this fraction of the store's blobs needs --force


# -- the evals ----------------------------------------------------------------------------------------------

TRANSFER_SEED = 2000  # `eval transfer`'s own seed (built-in families and --problems FILE alike)
EVAL_PROGRESS_SECONDS = 5.0  # an eval's progress line on stderr when it is not a terminal: at most this often


@dataclass(frozen=True)
class RecurrenceConfig:
    """`eval recurrence`: the base model's budget (k samples of at most max_tokens) and the graft's."""

    k: int = 4
    max_tokens: int = BUDGETS.base_tokens
    temperature: float = 1.0
    seed: int = 1000
    graft_max_tokens: int = BUDGETS.answer_tokens
    limit: int | None = None


@dataclass(frozen=True)
class TransferConfig:
    """`eval transfer` on the built-in families' held-out problems: one library condition per max_solutions."""

    families: tuple[str, ...] = DEFAULT_FAMILIES
    per_split: int = 10
    seed: int = TRANSFER_SEED
    max_solutions: tuple[int, ...] = (1, RetrievalPolicy.max_solutions)  # one solution, and what `solve` grafts
    max_tokens: int = BUDGETS.answer_tokens


@dataclass(frozen=True)
class FileTransferConfig:
    """`eval transfer --problems FILE`: memory sizes and the conditions run (every one by default)."""

    k: int = 4  # solutions in the random and nearest memories
    seed: int = TRANSFER_SEED
    max_tokens: int = BUDGETS.answer_tokens
    # Every condition, in report order; `text` needs `nearest` (it is compared with it). `transfer` with `base`
    # records the transfer gates' evidence (`evals/gate_evidence.py`).
    conditions: tuple[str, ...] = ("base", "empty", "random", "nearest", "text", "transfer", "system")


# -- the one configuration --------------------------------------------------------------------------------

@dataclass(frozen=True)
class GalahadConfig:
    """Every flywheel-side default in one frozen value (`DEFAULTS`); each concern is one field."""

    model: str = DEFAULT_MODEL
    kernel_mode: str = KERNEL_AUTO  # auto (codes where it runs, else stock) or one of KERNEL_MODES; `--kernel-mode`
    data: str = DEFAULT_DATA  # the data dir unless --data or $GALAHAD_HOME (`Paths.resolve`)
    budgets: Budgets = field(default_factory=Budgets)
    seeds: SeedConfig = field(default_factory=SeedConfig)
    workers: WorkerConfig = field(default_factory=WorkerConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    retrieval: RetrievalPolicy = field(default_factory=RetrievalPolicy)
    recall: RecallPolicy = field(default_factory=RecallPolicy)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    gc: GcConfig = field(default_factory=GcConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    recurrence: RecurrenceConfig = field(default_factory=RecurrenceConfig)
    transfer: TransferConfig = field(default_factory=TransferConfig)
    file_transfer: FileTransferConfig = field(default_factory=FileTransferConfig)


DEFAULTS = GalahadConfig()
