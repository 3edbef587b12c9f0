"""The verify-then-cache loop: problems -> generate -> verify -> deposit -> catalog.

The catalog is the durable work queue, so the loop holds no state worth losing: a killed job resumes by
claiming pending (and lease-expired) problems, and `reconcile` deposits any verified solution whose deposit
the kill interrupted. Deposits run in the background (`learn/background.py`). A problem stops at its first
verified attempt, so the budget (k samples x T tokens) is an upper bound, not a fixed cost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import ray

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.config import LoopConfig  # defined with every other default
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.background import BackgroundDeposits
from galahad.flywheel.learn.deposit import LibraryDeposits
from galahad.flywheel.learn.failures import WrongAnswers
from galahad.flywheel.learn.gold_solutions import trusted_gold
from galahad.flywheel.problems.prompts import answer_from_output
from galahad.verifier.verifier import Verifier
from galahad.workers.sampling import AttemptResult


def problems_per_call(config: LoopConfig) -> int:
    """The loop's group size: `problems_per_call`, or by default as many problems as fill the batch."""
    if config.problems_per_call is not None:
        return config.problems_per_call
    return max(1, config.sampling.batch_rows // config.round_size)


EXAMPLES = 5  # problems a tally names per outcome (the summary's examples); the counts cover all of them


def example(problem: dict) -> dict:
    """A problem as a tally names it: its id and its text, one line, cut at 200 characters."""
    return {"id": problem["id"], "text": " ".join(str(problem.get("text", "")).split())[:200]}


@dataclass
class Tally:
    """Live figures for the progress bar and the run summary (the same counters, by the same names)."""

    problems: int = 0
    attempted: int = 0
    verified: int = 0  # a sample verified
    gold_solutions: int = 0  # no sample verified; the trusted gold was deposited as the solution
    failed: int = 0
    deposited: int = 0
    tokens_spent: int = 0
    tokens_to_solve: int = 0  # tokens spent on problems that ended verified: what a recurrence saves
    seconds: float = 0.0
    sampling_seconds: float = 0.0  # the generators' own time on the attempts (prompt prefill + decode)
    reconciled: int = 0
    verified_examples: list[dict] = field(default_factory=list)  # the first EXAMPLES verified, id and text
    failed_examples: list[dict] = field(default_factory=list)  # the first EXAMPLES failed, id and text

    def postfix(self) -> dict:
        """The progress bar's counters: the summary's, by its (`--json`) names. `deposited` counts verified
        solutions whose deposit is recorded (each is a library and a recall artifact); it trails `verified`
        while deposits run in the background and catches up by the end of the run."""
        return {"verified": self.verified, "gold_solutions": self.gold_solutions, "failed": self.failed,
                "attempted": self.attempted,
                "deposited": self.deposited, "tokens_spent": self.tokens_spent}


class Flywheel:
    """Drives generator actors and one depositor actor against the catalog's work queue."""

    def __init__(self, catalog: Catalog, store: BlobStore, generators: list, depositor, model_fingerprint: str,
                 config: LoopConfig, verifier: Verifier | None = None):
        self.catalog = catalog
        self.generators = generators
        self.depositor = depositor
        # Only chains made under the depositor's (model, runtime) are extended; no depositor: set `deposits`.
        fingerprints = tuple(ray.get(depositor.fingerprint_pair.remote())) if depositor is not None else None
        self.deposits = LibraryDeposits(catalog, store, remote_prefill(depositor), fingerprints=fingerprints)
        # Deposits while sampling goes on: the depositor's refs share the loop's `ray.wait` set.
        self.background = BackgroundDeposits(self.deposits, lambda seg, tail, extra, recall_of=None:
                                             depositor.deposit.remote(seg, tail, extra, recall_of), fetch_span)
        self.model_fingerprint = model_fingerprint
        self.config = config
        self.verifier = verifier or Verifier()
        self.worker_id = f"flywheel-{uuid.uuid4().hex[:12]}"
        self.tally = Tally()
        self.wrong = WrongAnswers()  # each claimed problem's answers: why it failed, if it does

    def reconcile(self) -> int:
        for problem in self.catalog.queue.unfinished_deposits():
            sol = self.catalog.runs.verified_solution(problem["id"])
            self._deposit(problem, answer_from_output(sol["output_text"]), sol["verification_id"])
            self.tally.reconciled += 1
            self.tally.deposited += 1
        for problem in self.catalog.recalls.missing():  # the kill fell between library and recall deposit
            sol = self.catalog.runs.verified_solution(problem["id"])
            self._deposit(problem, answer_from_output(sol["output_text"]), sol["verification_id"], recall_only=True)
            self.tally.reconciled += 1
        return self.tally.reconciled

    def _deposit(self, problem: dict, answer: str, verification_id: str, recall_only: bool = False):
        """A failed deposit (full disk, store gone) stops the job with a one-line reason; the verdict is
        already committed, so the next run's `reconcile` deposits it."""
        try:
            if recall_only:
                return self.deposits.deposit_recall(problem, answer, verification_id)
            return self.deposits.deposit(problem, answer, verification_id)
        except GalahadError as exc:
            raise GalahadError(f"deposit of problem {problem['id'][:16]} failed: {str(exc)[:300]}") from None

    def run(self, run_id: str, on_progress: Callable[[Tally], None] | None = None) -> Tally:
        cfg, t0 = self.config, time.perf_counter()
        self.reconcile()
        in_flight: dict = {}
        held: dict[str, dict] = {}
        spent: dict[str, int] = {}
        turn = 0
        capacity = cfg.in_flight_per_generator * len(self.generators)
        group_size = problems_per_call(cfg)
        last_renew = time.monotonic()

        def submit(group: list[tuple[dict, int]]) -> None:
            """One generator call for a group of problems, each at its next round. A group is claimed
            together and its unfinished problems go on together, so which problems share a batch (and so
            every sample's draws) depends only on the queue's order, not on timing or generator count."""
            nonlocal turn
            gen = self.generators[turn % len(self.generators)]
            turn += 1
            requests = [(problem, first, min(cfg.round_size, self.budget(problem) - first)) for problem, first in group]
            in_flight[gen.attempt_many.remote(requests, cfg.sampling)] = requests

        while True:
            room = capacity - len(in_flight)  # generator calls
            while room > 0:
                want = group_size if cfg.limit is None else min(group_size, cfg.limit - self.tally.problems)
                claimed = self.catalog.queue.claim(want, self.worker_id, cfg.lease_seconds) if want > 0 else []
                if not claimed:
                    break
                for problem in claimed:
                    held[problem["id"]] = problem
                    self.tally.problems += 1
                submit([(problem, 0) for problem in claimed])
                room -= 1
            if not in_flight and not self.background.refs():
                break
            ready, _ = ray.wait([*in_flight, *self.background.refs()], num_returns=1,
                                timeout=cfg.lease_seconds / 4)
            if time.monotonic() - last_renew > cfg.lease_seconds / 4:
                self.catalog.queue.extend_lease(list(held), self.worker_id, cfg.lease_seconds)
                last_renew = time.monotonic()
            for ref in ready:
                if ref in self.background:
                    if self.background.done(ref) is not None:
                        self.tally.deposited += 1
                    continue
                requests = in_flight.pop(ref)
                again = []
                for (problem, first, count), results in zip(requests, ray.get(ref), strict=True):
                    if self._record(run_id, problem, results, spent):
                        held.pop(problem["id"])
                    elif first + count < self.budget(problem):
                        again.append((problem, first + count))
                    elif self._gold_solution(run_id, problem):
                        held.pop(problem["id"])
                    else:
                        self.catalog.queue.mark(problem["id"], "failed", self._failure(problem))
                        held.pop(problem["id"])
                        self.tally.failed += 1
                        if len(self.tally.failed_examples) < EXAMPLES:
                            self.tally.failed_examples.append(example(problem))
                if again:
                    submit(again)
            # After every wake-up, deposits included: the last deposits land after the last sampling round,
            # and a bar updated only on rounds would end short of the summary's count.
            self.tally.seconds = time.perf_counter() - t0
            if on_progress and ready:
                on_progress(self.tally)
        self.tally.seconds = time.perf_counter() - t0
        if on_progress:
            on_progress(self.tally)
        return self.tally

    def _record(self, run_id: str, problem: dict, results: list[AttemptResult], spent: dict[str, int]) -> bool:
        """Record every attempt and its verdict (all cost tokens); deposit the first accepted one."""
        accepted = None
        for r in results:
            attempt_id = self.catalog.runs.add_attempt(
                problem["id"], run_id, self.model_fingerprint, r.sampling, r.output_text, r.tokens,
                r.seconds, r.cpu_seconds, r.energy_joules)
            self.tally.attempted += 1
            self.tally.tokens_spent += r.tokens
            self.tally.sampling_seconds += r.seconds
            spent[problem["id"]] = spent.get(problem["id"], 0) + r.tokens
            verdict = self.verifier.check_answer(problem["answer"], r.answer)
            self.wrong.add(problem["id"], r.answer)
            verification_id = self.catalog.runs.add_verification(attempt_id, verdict.version, verdict.verified,
                                                            verdict.reason)
            if verdict.verified and accepted is None:
                accepted = (r, verification_id)
        if accepted is None:
            return False
        self.wrong.drop(problem["id"])
        r, verification_id = accepted
        self.background.add(problem, r.answer, verification_id)  # the verdict is committed: a kill loses nothing
        self.tally.verified += 1
        if len(self.tally.verified_examples) < EXAMPLES:
            self.tally.verified_examples.append(example(problem))
        self.tally.tokens_to_solve += spent.pop(problem["id"])
        return True

    def budget(self, problem: dict) -> int:
        """Samples this claim may spend: k on the first try, doubled per try again (a failed problem asked
        again, `catalog.queue.retry`), at most `retry_max_k` (never below k)."""
        k, tries = self.config.sampling.k, max(1, int(problem.get("claims") or 1))
        return max(k, min(k << min(tries - 1, 16), self.config.retry_max_k))

    def _failure(self, problem: dict) -> dict:
        """This try's failure record (`learn/failures.py`) with its try number and budget, after the earlier
        tries' (`tries`: one line each, the last ten)."""
        reason = self.wrong.reason(problem["id"], problem["answer"])
        earlier = list((problem.get("failure") or {}).get("tries") or [])
        this = {"try": max(1, int(problem.get("claims") or 1)), "k": self.budget(problem),
                "attempts": reason["attempts"], "most_common": reason["most_common"]}
        return {**reason, "tries": [*earlier, this][-10:]}

    def _gold_solution(self, run_id: str, problem: dict) -> bool:
        """No sample verified: deposit the trusted gold as the solution (`learn/gold_solutions.py`), its
        attempt recorded with provenance `gold` and the verifier's verdict; False when the gold is not
        trusted, the switch is off, or the verifier does not accept it (then the problem fails)."""
        gold = trusted_gold(problem) if self.config.gold_solutions else None
        if gold is None:
            return False
        verdict = self.verifier.check_answer(problem["answer"], gold)
        if not verdict.verified:
            return False
        attempt_id = self.catalog.runs.add_attempt(problem["id"], run_id, self.model_fingerprint,
                                                   {"provenance": "gold"}, gold, 0, 0.0, 0.0, provenance="gold")
        verification_id = self.catalog.runs.add_verification(attempt_id, verdict.version, True, verdict.reason)
        self.wrong.drop(problem["id"])
        self.background.add(problem, gold, verification_id)  # prefilled by the same exact engine
        self.tally.gold_solutions += 1
        return True


def fetch_span(ref):
    """A depositor call's result; a worker's failure becomes its one-line reason."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        msg = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
        raise GalahadError(msg) from None


def remote_prefill(actor):
    """The depositor actor's `deposit` as a plain (waiting) call: what `reconcile` uses at start-up."""

    def call(segment: str, tail: dict | None, extra: dict, recall_of: str | None = None):
        return fetch_span(actor.deposit.remote(segment, tail, extra, recall_of))

    return call


def summary(tally: Tally, config: LoopConfig) -> dict:
    out = asdict(tally)
    hours = tally.seconds / 3600 if tally.seconds else 0
    out["verified_per_hour"] = tally.verified / hours if hours else 0.0
    out["config"] = {**asdict(config), "problems_per_call": problems_per_call(config)}
    return out
