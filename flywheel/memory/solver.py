"""Answering with memory: exact hash -> canonical key -> similar example -> transfer -> base model.

A verified problem is answered from its recall artifact, asked again in the same words (`hash`) or with the
same mathematics (`key`: `problems/canonical.py`, the same key means the same exact value): its own question
is asked after its graft and the answer checked against its gold. `verified: true` means the answer is the
catalog's verified answer to this same problem, carrying the gold's provenance (`gold_source`).

`similar` grafts the most similar verified problem with the same numbers in the same order as a worked
example and decodes the *asked* question (`verified` unknown: similar words can be other mathematics);
`transfer` grafts a library chain prefix (`policy.py`). Both are inexact, so each answers for a (model,
library) only where its gate is open (`catalog.gates`, opened by `eval transfer`'s evidence);
`solve(gated=False)` walks every route. The base model answers what memory cannot.

Every walk ends in `check_computed`: where the text has a computable canonical value, the answer is verified
True or False against it by the verifier (`Verifier.check_answer`), a wrong one naming the value and its
`reading`. `routes` is the one order, `solve` the one walk; how each route is decoded is a strategy
(`decode`, e.g. `Decodes`), every answer going through `recall.answer_decode`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.config import ANSWER_POLICIES, BUDGETS
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.foreign import foreign_message, record_runtime
from galahad.flywheel.memory.library_names import candidate_libraries
from galahad.flywheel.memory.policy import RecallPolicy, RetrievalPolicy, first_library_chain
from galahad.flywheel.memory.rebuild import rebuilding
from galahad.flywheel.memory.recall import Recalled, answer_decode
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.golds import COMPUTED, show
from galahad.flywheel.problems.shapes import shape, shape_hash
from galahad.verifier.verifier import Verifier

__all__ = ["ANSWER_POLICIES", "PATHS", "Answer", "Decodes", "RecallPolicy", "RetrievalPolicy", "Route", "Solver",
           "by_policy", "shape"]
# Memory's routes, in the walk's order, then `computed`: the text's value answered where it refuted the route's.
PATHS = ("hash", "key", "similar", "transfer", "base", "computed")
RECALLS = PATHS[:2]  # a verified problem's own answer recalled


@dataclass
class Answer:
    answer: str
    path: str  # hash | key | similar | transfer | base
    decode_tokens: int
    seconds: float
    output_text: str
    grafted_artifacts: list[str] = field(default_factory=list)
    grafted_tokens: int = 0
    verified: bool | None = None  # True only for the catalog's verified answer to this same problem (hash, key)
    reason: str | None = None
    matched_problem: str | None = None  # the verified problem recalled (hash, key) or grafted as the example (similar)
    gold_source: str | None = None  # who vouches for the recalled gold: `computed`, or who gave it
    solution: str | None = None  # a verified recall: who wrote its solution, `sampled` (the model) or `gold`
    # Set when memory knows this problem only through artifacts of another runtime or model (`foreign.py`):
    # the one line that says so, and what to run.
    memory_note: str | None = None
    computed: str | None = None  # the text's computed value (`check_computed`), where it has one
    reading: str | None = None  # the expression the key reader read it as ("20 × 12"), with `computed`
    model_answer: str | None = None  # path `computed`: the model's answer the computed value refuted

    def to_dict(self) -> dict:
        return asdict(self)


def by_policy(ans: Answer, policy: str = ANSWER_POLICIES[0]) -> Answer:
    """The answer a caller gets under `policy` (`ANSWER_POLICIES`): under `computed`, an answer the computed
    value refuted is replaced by the value (path `computed`, the refuted one as `model_answer`); else
    `ans`."""
    if policy not in ANSWER_POLICIES:
        raise GalahadError(f"answer_policy must be one of {', '.join(ANSWER_POLICIES)}, not {str(policy)[:40]!r}")
    if policy == "model" or ans.verified is not False or ans.computed is None:
        return ans
    return replace(ans, answer=ans.computed, path="computed", verified=True, reason=None, gold_source=COMPUTED,
                   solution=None, model_answer=ans.answer)


@dataclass(frozen=True)
class Route:
    """One way to answer: which memory to graft, which question to ask after it, and its gold (if any)."""

    path: str
    tail: str | None
    decoded: str  # the question decoded after the graft: the matched problem's own, or the new one
    prompt: str  # "query" or "few-shot"
    max_tokens: int
    gold: str | None = None  # the matched problem's verified answer: a route is taken only if it verifies
    matched_problem: str | None = None
    gold_source: str | None = None
    library: str | None = None  # similar, transfer: the library whose gate lets the route answer
    solution: str | None = None  # hash, key: the recalled solution's provenance (`sampled` or `gold`)

    @property
    def shared_prefix(self) -> bool:
        """The base model's route (no memory, the few-shot prompt): answered under the two-span schedule of
        `workers/schedule.py`, the few-shot prefix prefilled once per process, as the evals' base condition is."""
        return self.tail is None and self.prompt == "few-shot"


def provenance(hit: dict) -> str | None:
    """Who vouches for a recalled problem's gold: its `gold_source`, or (rows older than gold checks)
    `unchecked:<source>`."""
    return hit.get("gold_source") or (f"unchecked:{hit['source']}" if hit.get("source") else None)


@dataclass
class Step:
    """One route a walk decoded: as decoded (capped), its decode, its seconds, and where a kept decode came
    from (`memo`, `stored`: `service/recall_memo.py`; None: decoded now)."""

    route: Route
    decoded: Recalled
    seconds: float
    kept: str | None = None


class Decodes:
    """A walk's decode strategy (`Solver.solve(decode=Decodes(...))`): each route decoded at most `cap`
    tokens, read from `memo` where it holds it (the service's recall memo), and recorded in `steps`."""

    def __init__(self, solver: Solver, cap: int | None = None, memo=None):
        self.solver, self.cap, self.memo = solver, cap, memo
        self.steps: list[Step] = []

    def __call__(self, route: Route) -> Recalled:
        route = replace(route, max_tokens=min(route.max_tokens, self.cap or route.max_tokens))
        t0 = time.perf_counter()
        kept = self.memo.get(route) if self.memo is not None else None
        r = kept[0] if kept else self.solver.decode(route)
        if kept is None and self.memo is not None:
            self.memo.put(route, r)
        self.steps.append(Step(route, r, time.perf_counter() - t0, kept[1] if kept else None))
        return r


class Solver:
    def __init__(self, engine, catalog: Catalog, store: BlobStore, verifier: Verifier | None = None,
                 max_tokens: int = BUDGETS.answer_tokens, base_max_tokens: int = BUDGETS.base_tokens,
                 recall_policy: RecallPolicy | None = None):
        # Evicted artifacts are rebuilt exactly on their graft; this runtime's facts name its differences.
        self.engine, self.catalog, self.store = engine, catalog, rebuilding(store, catalog, engine)
        record_runtime(catalog, engine)
        self.verifier = verifier or Verifier()
        self.max_tokens, self.base_max_tokens = max_tokens, base_max_tokens
        self.recall_policy = recall_policy or RecallPolicy()
        self._keyed = False
        self._last_key: tuple[str | None, str | None] = (None, None)  # (text, its canonical key): read once a route

    def _canonical_key(self, text: str) -> str | None:
        """`canonical.canonical_key(text)` (~0.3 ms a text), read once for the matchers of one text."""
        last = self._last_key
        if last[0] != text:
            last = (text, canonical.canonical_key(text))
            self._last_key = last
        return last[1]

    def _keys(self) -> None:
        if not self._keyed:  # problems added before keys (or shapes) existed, or under an older key version
            self.catalog.problems.ensure_keys()
            self.catalog.problems.ensure_shapes()
            self._keyed = True

    # -- matching a verified problem (no model) ----------------------------------------------------

    def _most_similar(self, text: str, candidates: list[dict]) -> dict | None:
        """Only for a problem with no key (a parsed problem's key already said no), of the verified problems
        with its numbers (`lookup`'s `numbers`): the most similar with them in the same order, if similar
        enough (`RecallPolicy.similar_min`)."""
        seq = canonical.number_sequence(text)
        best, best_score = None, self.recall_policy.similar_min
        for cand in candidates:
            if canonical.number_sequence(cand["text"]) != seq:
                continue
            score = canonical.similarity(text, cand["text"])
            if score >= best_score:
                best, best_score = cand, score
        return best

    def lookup(self, text: str, shape: bool = True) -> dict:
        """What memory holds for `text`, in one catalog statement (`Recalls.matches`): its `hash`, `key` and
        `numbers` matches (recall rows made under this engine's fingerprints; the numbers are asked only
        for a text with no key) and, with `shape`, its template and topic (`classify`)."""
        key = self._canonical_key(text)
        self._keys()
        nums = canonical.numbers(text) if key is None else ""
        return self.catalog.recalls.matches(problem_hash(text), key, nums or None,
                                            shape_hash(text) if shape else None, self.fingerprints)

    def overlap(self, text: str) -> str:
        """How a problem overlaps the catalog's verified problems: hash, key, similar or none."""
        found = self.lookup(text, shape=False)
        if found["hash"]:
            return "hash"
        if found["key"]:
            return "key"
        return "similar" if self._most_similar(text, found["numbers"]) else "none"

    @property
    def fingerprints(self) -> tuple[str, str]:
        """Only artifacts made by this engine's model under its runtime are grafted (others are ignored)."""
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def classify(self, text: str) -> dict | None:
        """Find the template/topic of a new problem from the oldest catalog problem of the same shape (`shape`:
        numbers masked): one seek on the catalog's shape index, never a scan of its groups."""
        self._keys()
        found = self.catalog.problems.classify(text)
        return {"template": found["template"], "topic": found["topic"]} if found else None

    def transfer_chain(self, libraries: list[str], policy: RetrievalPolicy) -> tuple[str, str] | None:
        """(library, tail artifact) of the chain the transfer route grafts: the first of `libraries` with a
        chain made under this engine; None when none has (or no library is given: no statement)."""
        return first_library_chain(self.catalog, libraries, policy.max_solutions,
                                   self.fingerprints) if libraries else None

    def gates(self, libraries: list[str]) -> set[tuple[str, str]]:
        """The (library, route) pairs where similar or transfer may answer under this engine's model: only
        where `eval transfer` recorded the route beating the base model there (`catalog.gates`); no
        evidence: closed. One statement (none without libraries)."""
        return self.catalog.gates.opened(self.engine.model_fingerprint, libraries)

    # -- the one order -------------------------------------------------------------------------------

    def routes(self, text: str, template: str | None = None, topic: str | None = None,
               policy: RetrievalPolicy | None = None, gated: bool = True) -> Iterator[Route]:
        """hash -> key -> similar -> transfer -> base. What the catalog holds for the text is read in one
        statement (`lookup`); with `gated`, the open gates of the text's libraries in a second (`gates`:
        similar and transfer are taken only where theirs is open), and the chain of the first library
        whose transfer gate is open in a third, only if the walk gets that far."""
        found = self.lookup(text, shape=template is None and topic is None)
        policy = policy or RetrievalPolicy()
        seen: set[str] = set()
        for path in ("hash", "key"):
            hit = found[path][0] if found[path] else None
            if hit and hit["id"] not in seen:
                seen.add(hit["id"])
                yield Route(path, hit["artifact_id"], hit["text"], "query", self.max_tokens, hit["answer"],
                            hit["id"], provenance(hit), solution=hit.get("provenance") or "sampled")
        if template is None and topic is None and found["shape"]:
            template, topic = found["shape"]["template"], found["shape"]["topic"]
        libraries = candidate_libraries(policy, template, topic)  # the text's: its template's, then its topic's
        hit = self._most_similar(text, found["numbers"]) if not seen else None
        # a similar answer is gated (and measured) by the library of the example it grafts
        example = next(iter(candidate_libraries(policy, hit["template"], hit["topic"])), None) if hit else None
        asked = list(dict.fromkeys(libraries + ([example] if example else [])))
        opened = self.gates(asked) if gated else {(lib, r) for lib in asked for r in ("similar", "transfer")}
        if hit and (example, "similar") in opened:  # a worked example: the asked question after it, the model's
            yield Route("similar", hit["artifact_id"], text, "query", self.max_tokens, None, hit["id"], library=example)
        chain = self.transfer_chain([lib for lib in libraries if (lib, "transfer") in opened], policy)
        if chain:
            yield Route("transfer", chain[1], text, "query", self.max_tokens, library=chain[0])
        yield Route("base", None, text, "few-shot", self.base_max_tokens)

    def decode(self, route: Route) -> Recalled:
        """A route's graft -> decode (`recall.answer_decode`, as the evals' `execute`). The base model's route
        (`Route.shared_prefix`) continues from the few-shot prefix kept per process."""
        return answer_decode(self.engine, self.store, route.tail, route.decoded, route.prompt, route.max_tokens)

    def answer_route(self, route: Route, decoded: Recalled | None = None) -> Answer:
        """`route`'s answer (`decoded`: its decode, already run; else `decode`); a recall checked against its
        gold."""
        r = self.decode(route) if decoded is None else decoded
        ans = Answer(r.answer, route.path, len(r.output_token_ids), r.seconds, r.output_text, r.artifacts,
                     r.start, matched_problem=route.matched_problem)
        if route.gold is not None:  # a recall of this same problem (hash or key): checked against its gold
            verdict = self.verifier.check_answer(route.gold, ans.answer)
            ans.verified, ans.reason = verdict.verified, verdict.reason
            ans.gold_source = route.gold_source if verdict.verified else None
            ans.solution = route.solution if verdict.verified else None
        return ans

    def solve(self, text: str, template: str | None = None, topic: str | None = None,
              policy: RetrievalPolicy | None = None, decode: Callable[[Route], Recalled] | None = None,
              gated: bool = True) -> Answer:
        """The first route whose answer is accepted (a recall must verify against its gold), then
        `check_computed`. `decode` runs each route's graft -> decode (default `self.decode`; `eval transfer`'s
        `system` condition records each as a spec). `gated=False`: similar and transfer answer wherever memory
        has them."""
        t0 = time.perf_counter()
        decode = decode or self.decode
        for route in self.routes(text, template, topic, policy, gated):
            ans = self.answer_route(route, decode(route))
            if route.gold is None or ans.verified:
                break
        self.check_computed(text, ans)
        ans.seconds = time.perf_counter() - t0
        if ans.path not in RECALLS:
            ans.memory_note = self.foreign_note(text)
        return ans

    def computed_value(self, text: str) -> str | None:
        """The text's exact value (`canonical.value` of its key, shown as `golds.show`: "42", "7/3"), or None
        where it has no key or its value is not computable here."""
        key = self._canonical_key(text)
        value = canonical.value(key) if key is not None else None
        return None if value is None else show(value)

    def check_computed(self, text: str, ans: Answer) -> Answer:
        """The last step of every walk: where `text` has a computed value, `ans` is verified True or False
        against it by the verifier, never left None (see the module docstring); returns `ans`."""
        value = self.computed_value(text)
        if value is None:
            return ans
        ans.computed, ans.reading = value, canonical.reading(self._canonical_key(text))
        if not self.verifier.check_answer(value, ans.answer).verified:
            ans.verified, ans.reason, ans.gold_source, ans.solution = False, self.wrong(ans), None, None
        elif ans.verified is not True:
            ans.verified, ans.reason, ans.gold_source = True, None, COMPUTED
        return ans

    @staticmethod
    def wrong(ans: Answer) -> str:
        """Why an answer checked against the computed value is wrong."""
        return f"wrong: computed value is {ans.computed}" + (f", read as {ans.reading}" if ans.reading else "")

    def foreign_note(self, text: str) -> str | None:
        """The one line for a problem memory knows only through artifacts made elsewhere, or None."""
        found = self.catalog.recalls.elsewhere(problem_hash(text), canonical.canonical_key(text), self.fingerprints)
        return foreign_message(self.catalog, self.fingerprints, found)
