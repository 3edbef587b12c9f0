"""What an answering replica does, without HTTP: solve, queue problems for the learner, read the catalog and
the store. Plain class; the FastAPI routes (`app.py`) only translate.

`solve` reads top to bottom: validate (text sizes and characters: 400; a gold against the computed value; a
prompt over `max_prompt_tokens` or the context window: 413, before any forward), walk (`Solver.solve` under
the engine lock, a recall already decoded read back: `recall_memo.py`), choices, verdict, learn, render (one
`api.SolveResult`), each step adding its stage to `Server-Timing` (`request.py`). `verified` is memory's word
or the verifier's check against the computed value; a caller's gold only sets `matches_gold`; `by_policy`
applies the answer policy. Problems reach the learner only through `app.intake.admit`; a computable text
memory did not verify is learned from use (`gold_source: computed`); a failed one asked again is retried.

`Decoding` is how a caller asks the answer decoded (the OpenAI routes; `/v1/solve` asks the defaults): a cap,
`n` sampled answers (seed + i), log-probabilities (`scoring.py`), stop strings. An answer that ran out of
tokens, or that a stop string cut, is never `verified: true`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from galahad.flywheel.app.intake import GoldConflict, admit
from galahad.flywheel.artifacts.store import BlobStore, sha256_hex
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.config import DEFAULTS, ServiceConfig
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.recall import Recalled, answer_decode, render
from galahad.flywheel.memory.solver import RECALLS, Answer, Decodes, Route, Solver, Step, by_policy
from galahad.flywheel.problems.golds import COMPUTED, check_gold
from galahad.flywheel.problems.prompts import ANSWER_STOP, answer_from_output
from galahad.flywheel.problems.records import Problem, problem_from_dict
from galahad.flywheel.service.api import (
    Choice,
    Decoding,
    NotFound,
    SolveResult,
    TooLarge,
    checked_id,
    checked_text,
    clean_strings,
)
from galahad.flywheel.service.recall_memo import RecallMemo
from galahad.flywheel.service.request import add_stage
from galahad.flywheel.service.scoring import score
from galahad.verifier.verifier import Verifier

API_SOURCE = "api"  # problems queued by /v1/solve carry this source
QUEUED = ("pending", "claimed")
log = logging.getLogger("galahad.service")


def _all(values: list) -> bool | None:
    """One verdict for several choices: True when every one is True, False when any is False, else None."""
    return True if all(v is True for v in values) else False if any(v is False for v in values) else None


class Answering:
    def __init__(self, engine, catalog: Catalog, store: BlobStore, config: ServiceConfig | None = None,
                 solver: Solver | None = None, caller: str = "api:anonymous"):
        self.engine, self.catalog, self.store = engine, catalog, store
        self.caller = caller  # who gives the golds this replica admits (`api:token-<hash>` when a token is set)
        self.config = config or ServiceConfig()
        self.solver = solver or Solver(engine, catalog, store)
        self.verifier: Verifier = self.solver.verifier
        self.lock = threading.Lock()
        self.loop = DEFAULTS.loop  # a failed problem asked again: its retry's tries and backoff (`queue.retry`)
        # recall decodes already computed, here or stored in the catalog (`recall_memo.py`)
        self.memo = RecallMemo(self.config.recall_memo, catalog, self.solver.fingerprints)

    @property
    def context_window(self) -> int:
        return int(self.engine.loaded.context_window)

    def solve(self, problem: object, gold: object = None, decoding: Decoding | None = None) -> SolveResult:
        t0 = time.perf_counter()
        how = decoding or Decoding()
        problem, gold = self.validate(problem, gold, how.max_tokens)
        t1 = time.perf_counter()
        add_stage("check", t1 - t0)
        with self.lock:
            add_stage("wait", time.perf_counter() - t1)
            ans, step = self.walk(problem, how)
            t2 = time.perf_counter()
            choices = self.by_policy(self.choices(step, ans, how, gold), ans, how, gold)
        t3 = time.perf_counter()
        add_stage("choices", t3 - t2)
        queued = self.learn(problem, gold, ans, self.verdict(problem, gold, ans))
        add_stage("queue", time.perf_counter() - t3)
        add_stage("solve", time.perf_counter() - t0)
        return self.render(problem, ans, step, choices, queued, time.perf_counter() - t0)

    def validate(self, problem: object, gold: object, cap: int | None) -> tuple[str, str | None]:
        """The texts (`_text`), a gold against the problem's computed value (refused naming the value and
        its reading: `golds.check_gold`), and the longest prompt the solver may build (the base model's
        few-shot prompt) with its decode budget (at most `cap`) against the context window."""
        problem = checked_text(problem, "problem", self.config.max_problem_chars)
        if gold is not None:
            gold = checked_text(gold, "gold", self.config.max_problem_chars)
            checked = check_gold(problem, gold)
            if checked.error:  # a gold that disagrees with the problem's computed value: refused, not learned
                raise GalahadError(checked.error)
        n = len(self.engine.encode(render(problem, "few-shot"), bos=True))
        budget = min(max(self.solver.base_max_tokens, self.solver.max_tokens), cap or 1 << 30)
        if n > self.config.max_prompt_tokens:
            raise TooLarge(f"the prompt is {n} tokens; this service prefills at most "
                           f"{self.config.max_prompt_tokens} per request")
        if n + budget > self.context_window:
            raise TooLarge(f"the prompt is {n} tokens (+{budget} to decode); the model's context window is "
                           f"{self.context_window}")
        return problem, gold

    def walk(self, problem: str, how: Decoding) -> tuple[Answer, Step]:
        """Memory's walk (`Solver.solve`), each route decoded at most the caller's cap and a recall read
        back where it was decoded before (`Decodes`; not when the caller asks for the model's own decode);
        the accepted answer and the step that answered."""
        t0 = time.perf_counter()
        decodes = Decodes(self.solver, how.max_tokens, None if how.model_decode else self.memo)
        ans = self.solver.solve(problem, decode=decodes)
        for s in decodes.steps:
            if s.kept:
                add_stage(s.kept, s.seconds)  # memo | stored: read back, no forward pass
            else:
                r = s.decoded
                add_stage("graft", r.graft_seconds)
                add_stage("forward", r.prefill_seconds - r.graft_seconds)
                add_stage("decode", r.seconds - r.prefill_seconds)
        add_stage("walk", time.perf_counter() - t0 - sum(s.seconds for s in decodes.steps))
        return ans, decodes.steps[-1]

    def verdict(self, problem: str, gold: str | None, ans: Answer) -> bool:
        """Whether the answer is memory's verified answer to this problem; a caller's gold that the verifier
        finds unequal to it is refused (409). A foreign memory's note goes to the replica's log."""
        known = bool(ans.verified) and ans.path in RECALLS
        if ans.memory_note:
            log.warning("problem %s: %s", problem_hash(problem)[:16], ans.memory_note)
        if gold is not None and known and not self._matches(gold, ans.answer):
            raise GoldConflict(f"gold {gold[:60]!r} conflicts with the verified answer {ans.answer[:60]!r} "
                               f"memory holds for this problem")
        return known

    def learn(self, problem: str, gold: str | None, ans: Answer, known: bool) -> bool:
        """Queue what memory did not verify: with the caller's gold, or (learned from use) its computed value."""
        if known or (gold is None and ans.computed is None):
            return False
        if gold is not None:
            return self.queue(problem, gold)
        try:
            return self.queue(problem, ans.computed)
        except GoldConflict as exc:  # the catalog holds another gold for it: answered, not queued
            log.warning("problem %s not queued: %s", problem_hash(problem)[:16], exc)
            return False

    def by_policy(self, choices: list[Choice], ans: Answer, how: Decoding, gold: str | None) -> list[Choice]:
        """What the caller gets (`solver.by_policy`): under `computed` (the server's default unless it or the
        request says `model`), each choice the computed value refutes answers the value, verified, with the
        model's answer beside it (`model_answer`); under `model` the choices as the model gave them."""
        policy = how.answer_policy or self.config.answer_policy
        out = []
        for c in choices:
            got = by_policy(Answer(c.answer, ans.path, c.decode_tokens, 0.0, c.answer, verified=c.verified,
                                   computed=ans.computed), policy)
            out.append(c if got.model_answer is None else c.model_copy(update={
                "answer": got.answer, "verified": True, "model_answer": got.model_answer, "finish_reason": "stop",
                "matches_gold": None if gold is None else self._matches(gold, got.answer)}))
        return out

    def render(self, problem: str, ans: Answer, step: Step, choices: list[Choice], queued: bool,
               seconds: float) -> SolveResult:
        walked, first = step.decoded, choices[0]
        verified = _all([c.verified for c in choices])
        reason = (Solver.wrong(ans) if ans.computed else ans.reason) if verified is False else None
        path = "computed" if first.model_answer is not None else ans.path  # the value answered: the model's refuted
        gold_source = COMPUTED if path == "computed" else ans.gold_source
        return SolveResult(
            answer=first.answer, path=path, verified=verified, reason=reason, computed=ans.computed,
            reading=ans.reading, matches_gold=_all([c.matches_gold for c in choices]), model_answer=first.model_answer,
            solution=ans.solution if verified and path in RECALLS else None,
            gold_source=gold_source if verified else None, matched_problem=ans.matched_problem,
            decode_tokens=sum(c.decode_tokens for c in choices), answer_from=step.kept or "decode",
            grafted_artifacts=list(ans.grafted_artifacts),
            grafted_tokens=walked.start, prompt_tokens=walked.start + len(walked.prompt_token_ids),
            model_fingerprint=self.engine.model_fingerprint, runtime_fingerprint=self.engine.runtime_fingerprint,
            seconds=seconds, problem_id=problem_hash(problem), queued=queued, memory_note=ans.memory_note,
            finish_reason=first.finish_reason, choices=choices)

    def _matches(self, gold: str, answer: str) -> bool:
        return bool(self.verifier.check_answer(gold, answer).verified)

    def choices(self, step: Step, ans: Answer, how: Decoding, gold: str | None) -> list[Choice]:
        """The answers returned: the walk's own (n = 1), or n sampled from its route's context; each with
        its finish, memory's verdict (True only whole and uncut; the computed value's, by the verifier),
        the gold check and, if asked, logprobs."""
        route, kept = step.route, step.kept is not None  # a kept decode: its tokens were not decoded now
        if how.sampled:
            kept = False
            drawn = []
            for i in range(how.n):
                r = answer_decode(self.engine, self.solver.store, route.tail, route.decoded, route.prompt,
                                  route.max_tokens, temperature=how.temperature, seed=how.seed + i)
                drawn.append((r, self.solver.answer_route(route, r)))
        else:
            drawn = [(step.decoded, ans)]
        out = []
        for r, a in drawn:
            ran_out = len(r.output_token_ids) >= route.max_tokens and ANSWER_STOP not in r.output_text
            text, finish = a.answer, "length" if ran_out else "stop"
            for s in how.stop:  # the caller's stop strings: the answer before the first
                if s in text:
                    text, finish = text[:text.index(s)], "stop"
            verdict = None  # not a recall of this same problem: memory has no word on it
            if route.gold is not None and route.path in RECALLS:  # memory's answer, if whole; a recall
                verdict = (True if text == a.answer and not ran_out else None) if a.verified else False  # not it
            if ans.computed is not None:  # the text's value is computable: the answer returned is checked
                verdict = False if verdict is False else self._matches(ans.computed, text)
            if verdict and (ran_out or text != a.answer):  # cut short (out of tokens, or by a stop): never true
                verdict = None
            out.append(Choice(answer=text, finish_reason=finish, verified=verdict,
                              matches_gold=None if gold is None else self._matches(gold, text),
                              decode_tokens=0 if kept else len(r.output_token_ids),
                              logprobs=None if how.logprobs is None else self._logprobs(route, r, how)))
        return out

    def _logprobs(self, route: Route, r: Recalled, how: Decoding) -> list[dict]:
        greedy = not how.sampled or how.temperature <= 0
        text = self.engine.tokenizer.decode
        return [{"token": text([s.token_id]), "logprob": s.logprob,
                 "top": [{"token": text([t]), "logprob": lp} for t, lp in s.top]}
                for s in score(self.engine, self.solver.store, route, r.output_token_ids, how.logprobs or 0, greedy)]

    scope = "shared"  # the memory scope golds go into (`problems.scope_ids.SHARED`; a tenant's: `tenancy.py`)

    def queue(self, problem: str, gold: str) -> bool:
        """Hand a problem with its gold answer to the learner; True when it is (now) waiting in the queue."""
        match = self.solver.classify(problem) or {}
        topic = match.get("topic") or API_SOURCE
        p = Problem(id=problem_hash(problem)[:16], problem=problem, answer=gold, topic=topic,
                    template=match.get("template") or topic, source=API_SOURCE)
        pid = admit(self.catalog, [p], ["gold"], self.caller, scope=self.scope)[0]
        row = self.catalog.problems.by_hash(pid)
        if row is not None and row["status"] == "failed":  # asked again: tried again, with backoff (`queue.retry`)
            if self.catalog.queue.retry(pid, self.loop.retry_tries, self.loop.retry_delay_seconds):
                row = self.catalog.problems.by_hash(pid)
        return row is not None and row["status"] in QUEUED

    def submit(self, items: object) -> list[dict[str, Any]]:
        """Problems in the problem-file schema, all or nothing (one bad item refuses the whole list)."""
        if not isinstance(items, list) or not items:
            raise GalahadError("expected a non-empty JSON list of problems (the problem-file schema)")
        if len(items) > self.config.max_problems:
            raise TooLarge(f"{len(items)} problems in one request; the limit is {self.config.max_problems}")
        problems, seen = [], {}
        for i, obj in enumerate(items):
            clean_strings(obj, f"problems[{i}]")
            p = problem_from_dict(obj, f"problems[{i}]")
            if p.id in seen:
                raise GalahadError(f"problems[{i}]: duplicate id {p.id!r} (first at problems[{seen[p.id]}])")
            seen[p.id] = i
            problems.append(p)
        ids = admit(self.catalog, problems, [f"problems[{i}]" for i in range(len(problems))], self.caller,
                    scope=self.scope)
        out = []
        for p, pid in zip(problems, ids, strict=True):
            row = self.catalog.problems.by_hash(pid)
            out.append({"id": pid, "external_id": p.id, "status": row["status"] if row else "unknown"})
        return out

    def problem(self, problem_id: str) -> dict[str, Any]:
        row = self.catalog.problems.by_hash(checked_id(problem_id, "problem"))
        if row is None:
            raise NotFound(f"unknown problem {problem_id}")
        sol = self.catalog.runs.verified_solution(problem_id)
        recall = self.catalog.recalls.get(problem_id)
        return {"id": row["id"], "text": row["text"], "status": row["status"],
                "attempts": len(self.catalog.runs.attempts(problem_id)),
                "verified_answer": answer_from_output(sol["output_text"]) if sol else None,
                "solution": sol.get("provenance") if sol else None,  # sampled, or gold (a gold solution)
                "artifact_id": sol.get("artifact_id") if sol else None,
                "recall_artifact_id": recall["artifact_id"] if recall else None,
                "failure": row.get("failure") if row["status"] == "failed" else None}  # why (learn/failures.py)

    def stats(self) -> dict[str, Any]:
        """The catalog's, with per-scope figures once tenants exist (the admin's view)."""
        out = self.catalog.stats()
        if self.catalog.tenants.any():
            out["scopes"] = self.catalog.scopes.by_scope()
        return out

    def find(self, text: object) -> list[dict[str, Any]]:
        text = checked_text(text, "text", self.config.max_problem_chars)
        rows = self.catalog.problems.find(text=text, limit=self.config.max_find)
        keep = ("id", "text", "status", "topic", "template", "source", "external_id")
        return [{k: r.get(k) for k in keep} for r in rows]

    def _artifact_id(self, artifact_id: str) -> str:
        if not self.catalog.artifacts.has(checked_id(artifact_id, "artifact")):
            raise NotFound(f"unknown artifact {artifact_id}")
        return artifact_id

    def artifact(self, artifact_id: str) -> dict[str, Any]:
        return self.catalog.artifacts.lineage(self._artifact_id(artifact_id))

    def blob(self, artifact_id: str) -> tuple[bytes, str]:
        """The artifact's bytes (hash-checked by the store) and their SHA-256."""
        data = self.store.get(self._artifact_id(artifact_id))
        return data, sha256_hex(data)

    def ready(self) -> dict[str, Any]:
        """Model loaded and catalog migrated (a query over every table answers)."""
        stats = self.catalog.stats()
        return {"model_fingerprint": self.engine.model_fingerprint, "problems": stats["problems"],
                "context_window": self.context_window}
