"""Per-token log-probabilities of an answer already decoded: the route's context built again under the very
schedule its decode ran (`workers/schedule.context`, as `recall.answer_decode` builds it), then the decoded
tokens fed back one at a time, as `Engine.continue_decode` feeds them. Each step's logits are therefore the
bits the decode drew from (at temperature 0 the argmax of every row is the token decoded: checked, and a
mismatch is a fault, never a wrong logprob served).

Log-probabilities are the model's own distribution (`log_softmax` of the fp32 logits, before any sampling
temperature), as fp32 values; OpenAI's `bytes` are each token's UTF-8 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from galahad.flywheel.memory.solver import Route
from galahad.workers import schedule


@dataclass(frozen=True)
class TokenScore:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]  # the `top` most likely tokens at this step, most likely first


def context_logits(engine, store, route: Route, token_ids: list[int]) -> list:
    """The fp32 logits row before each of `token_ids` (decoded after `route`'s context)."""
    ctx = schedule.context(engine, store, route.tail, route.decoded, route.prompt, len(token_ids))
    cache, pos, rows = ctx.cache, ctx.pos, [ctx.logits]
    for tok in token_ids[:-1]:
        rows.append(engine.forward(cache, [tok], pos, last_only=True)[-1])
        pos += 1
    return rows


def score(engine, store, route: Route, token_ids: list[int], top: int, greedy: bool) -> list[TokenScore]:
    """Each decoded token's log-probability and the `top` most likely alternatives at its step. `greedy`:
    the tokens were decoded at temperature 0, so each must be its row's argmax (else RuntimeError: a fault, answered 500)."""
    import torch

    if not token_ids:
        return []
    out = []
    for tok, row in zip(token_ids, context_logits(engine, store, route, token_ids), strict=True):
        logp = torch.log_softmax(row, dim=-1)
        if greedy and int(torch.argmax(row)) != tok:
            raise RuntimeError("logprobs: the replayed context does not reproduce the decode (a fault)")
        best = torch.topk(logp, top) if top else None
        tops = [] if best is None else [(int(i), float(v)) for v, i in zip(best.values, best.indices, strict=True)]
        out.append(TokenScore(tok, float(logp[tok]), tops))
    return out
