"""OpenAI's protocol over Galahad's one answering path, without HTTP: requests in, problems out; answers in,
`chat.completion` / `text_completion` bodies, their server-sent-event chunks, the model list and OpenAI's error
body out. Plain functions over dicts: the routes (`openai_routes.py`) only call them, and tests call them alone.

A request names the served model and carries one problem: a chat's last `user` message (earlier messages and
system/developer messages are accepted and ignored for routing), a completion's `prompt` (one string).
`metadata.gold` is the caller's gold answer, learned exactly as `/v1/solve`'s `gold`. Options this service
cannot honour are refused with 400, never ignored: tools and function calls, `n` > 1, logprobs, image, audio
or file content parts, stop sequences, penalties, logit bias, non-text response formats, `echo`, `suffix`,
`best_of` > 1, and any parameter this module does not know. `temperature`, `top_p`, `seed`, `user` and
`parallel_tool_calls` are accepted and ignored: the answer is memory's (or the model's greedy) answer, the
same for every caller. `max_tokens` / `max_completion_tokens` are accepted at or above the service's decode
budget (the answer always fits) and refused below it. A parameter sent as `null` counts as not sent.

Status codes: 422 for a body that is not a request of this shape (a missing or mistyped field), 400 for a
request this service refuses, 404 for another model, 413 over the size limits, 409 for a gold that conflicts
with memory's verified answer, 429 when the replica's solve queue is full, 401 for a missing or wrong token.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.service.answering import NotFound

PREFIXES = ("/v1/chat/", "/v1/completions", "/v1/models")
IGNORED = ("temperature", "top_p", "seed", "user", "parallel_tool_calls")  # accepted, no effect (documented)
ROLES = ("system", "developer", "user", "assistant")
EXTENSION = "galahad"  # the one extension object on every answer


def is_openai_path(path: str) -> bool:
    """True for the routes that answer in OpenAI's error format."""
    return path.startswith(PREFIXES)


class Invalid(GalahadError):
    """A body that is not a request of the expected shape (HTTP 422)."""


class Unsupported(GalahadError):
    """An option this service refuses rather than ignores (HTTP 400, code `unsupported_parameter`)."""


class UnknownModel(NotFound):
    """A model this service does not serve (HTTP 404, code `model_not_found`)."""


@dataclass(frozen=True)
class Ask:
    """One problem asked over the protocol."""

    kind: str  # "chat" or "text"
    problem: str
    gold: str | None
    stream: bool
    include_usage: bool


# -- requests ------------------------------------------------------------------------------------------

def parse_chat(body: object, model_id: str, budget: int) -> Ask:
    """A `POST /v1/chat/completions` body checked field by field; `budget`: the service's decode budget."""
    body = _common(body, model_id, budget, {"messages"}, _CHAT_REFUSED)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: must be a non-empty list of messages")
    problem = None
    for i, m in enumerate(messages):
        text = _message(m, f"messages[{i}]")
        if m["role"] == "user":
            problem = text
    if problem is None:
        raise GalahadError("messages: no message with role 'user' (the last user message is the problem)")
    return _ask("chat", problem, body)


def parse_completion(body: object, model_id: str, budget: int) -> Ask:
    """A `POST /v1/completions` body: one prompt string (or a list of exactly one)."""
    body = _common(body, model_id, budget, {"prompt"}, _TEXT_REFUSED)
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) for t in prompt):
            raise Unsupported("prompt: token-id prompts are not supported; send text")
        if len(prompt) != 1:
            raise Unsupported(f"prompt: {len(prompt)} prompts in one request; send exactly one")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise Invalid("prompt: must be a string")
    return _ask("text", prompt, body)


def _common(body: object, model_id: str, budget: int, own: set[str], refused: dict) -> dict:
    if not isinstance(body, dict):
        raise Invalid("the request body must be a JSON object")
    body = {k: v for k, v in body.items() if v is not None}  # null is "not sent"
    for name in own | {"model"}:
        if name not in body:
            raise Invalid(f"{name}: field required")
    if not isinstance(body["model"], str):
        raise Invalid("model: must be a string")
    known = own | {"model", "stream", "stream_options", "metadata", "max_tokens", "max_completion_tokens", "n",
                   *IGNORED, *refused}
    for name, value in body.items():
        if name not in known:
            raise Unsupported(f"unsupported parameter {name!r} (this service refuses what it cannot honour)")
        if name in refused and not refused[name](value):
            raise Unsupported(f"{name}: {value!r:.60} is not supported by this service")
    if body["model"] != model_id:
        raise UnknownModel(f"the model {body['model'][:80]!r} is not served here; this service serves {model_id!r}")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: must be a boolean")
    for name in ("max_tokens", "max_completion_tokens", "n", "seed"):
        if name in body and (not isinstance(body[name], int) or isinstance(body[name], bool)):
            raise Invalid(f"{name}: must be an integer")
    for name in ("max_tokens", "max_completion_tokens"):
        if name in body and body[name] < budget:
            raise Unsupported(f"{name}: {body[name]} is below this service's decode budget of {budget} tokens "
                              f"(answers are decoded within it; send at least {budget} or leave it out)")
    if body.get("n", 1) != 1:
        raise Unsupported(f"n: {body['n']} choices requested; this service returns exactly one (n=1)")
    for name, lo, hi in (("temperature", 0, 2), ("top_p", 0, 1)):
        value = body.get(name, lo)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
            raise Invalid(f"{name}: must be a number from {lo} to {hi}")
    if "user" in body and not isinstance(body["user"], str):
        raise Invalid("user: must be a string")
    options = body.get("stream_options")
    if options is not None:
        if not body.get("stream"):
            raise GalahadError("stream_options: only allowed with stream=true")
        if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
            raise Invalid("stream_options: must be an object like {\"include_usage\": true}")
        if set(options) - {"include_usage"}:
            raise Unsupported(f"stream_options: unsupported {sorted(set(options) - {'include_usage'})}")
    meta = body.get("metadata", {})
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise Invalid("metadata: must be an object of string keys and string values")
    return body


def _ask(kind: str, problem: str, body: dict) -> Ask:
    return Ask(kind, problem, body.get("metadata", {}).get("gold"), bool(body.get("stream")),
               bool((body.get("stream_options") or {}).get("include_usage")))


def _message(m: object, where: str) -> str:
    """A message's text; refuses tool/function messages and non-text content parts."""
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise Invalid(f"{where}: must be an object with a string 'role'")
    role = m["role"]
    if role in ("tool", "function"):
        raise Unsupported(f"{where}: role {role!r} is not supported (this service calls no tools)")
    if role not in ROLES:
        raise Invalid(f"{where}.role: must be one of {', '.join(ROLES)}")
    for key in m:
        if key in ("tool_calls", "function_call", "audio") and m[key]:
            raise Unsupported(f"{where}.{key}: not supported (this service calls no tools and speaks only text)")
        if key not in ("role", "content", "name", "refusal", "tool_calls", "function_call", "audio"):
            raise Unsupported(f"{where}: unsupported field {key!r}")
    content = m.get("content")
    if content is None and role == "assistant":
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Invalid(f"{where}.content: must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            what = {"image_url": "image", "input_audio": "audio", "file": "file"}.get(kind, repr(kind))
            raise Unsupported(f"{where}.content[{j}]: {what} content parts are not supported; send text")
        if not isinstance(part.get("text"), str) or set(part) - {"type", "text"}:
            raise Invalid(f"{where}.content[{j}]: a text part is {{\"type\": \"text\", \"text\": \"...\"}}")
        texts.append(part["text"])
    return "\n".join(texts)


def _empty(v: object) -> bool:
    return v in ([], {}, "", False)


_CHAT_REFUSED: dict[str, Callable[[object], bool]] = {  # parameter -> the values accepted (anything else: 400)
    "tools": _empty, "functions": _empty, "tool_choice": lambda v: v == "none", "function_call": lambda v: v == "none",
    "logprobs": lambda v: v is False, "top_logprobs": lambda v: v == 0, "stop": _empty, "logit_bias": _empty,
    "presence_penalty": lambda v: v == 0, "frequency_penalty": lambda v: v == 0,
    "response_format": lambda v: v == {"type": "text"}, "modalities": lambda v: v == ["text"], "audio": _empty,
    "prediction": _empty, "store": lambda v: v is False,
}
_TEXT_REFUSED: dict[str, Callable[[object], bool]] = {
    "logprobs": lambda v: v == 0, "echo": lambda v: v is False, "suffix": _empty, "best_of": lambda v: v == 1,
    "stop": _empty, "logit_bias": _empty, "presence_penalty": lambda v: v == 0,
    "frequency_penalty": lambda v: v == 0,
}


# -- answers -------------------------------------------------------------------------------------------

def new_id(kind: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + secrets.token_hex(12)


def extension(out: dict) -> dict:
    """The `galahad` object: how the answer was reached, from `Answering.solve`'s result."""
    keep = ("path", "verified", "matches_gold", "gold_source", "matched_problem", "grafted_artifacts",
            "decode_tokens", "problem_id", "queued", "model_fingerprint", "runtime_fingerprint", "seconds")
    return {k: out[k] for k in keep} | {k: out[k] for k in ("memory_note",) if k in out}  # where the solver says


def usage(ask: Ask, out: dict, count: Callable[[str], int]) -> dict:
    """Tokens by the model's tokenizer: the problem asked (prompt) and the answer returned (completion)."""
    p, c = count(ask.problem), count(out["answer"])
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def completion_body(ask: Ask, out: dict, model_id: str, count: Callable[[str], int], created: int,
                    rid: str) -> dict:
    """The whole `chat.completion` (or `text_completion`) for one answer."""
    if ask.kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": out["answer"], "refusal": None},
                  "logprobs": None, "finish_reason": "stop"}
    else:
        choice = {"index": 0, "text": out["answer"], "logprobs": None, "finish_reason": "stop"}
    return {"id": rid, "object": "chat.completion" if ask.kind == "chat" else "text_completion",
            "created": created, "model": model_id, "system_fingerprint": fingerprint(out),
            "choices": [choice], "usage": usage(ask, out, count), EXTENSION: extension(out)}


def fingerprint(out: dict) -> str:
    return "fp_" + out["runtime_fingerprint"][:12]


def pieces(text: str) -> list[str]:
    """The answer cut at word starts; the pieces join to the text exactly."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p] or [""]


def stream_events(ask: Ask, out: dict, model_id: str, count: Callable[[str], int], created: int,
                  rid: str) -> list[bytes]:
    """Server-sent events in OpenAI's chunk format for an answer already computed, ending `data: [DONE]`:
    the role, the content in pieces, the finish with the `galahad` object, then usage if asked for."""
    chat = ask.kind == "chat"
    head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
            "model": model_id, "system_fingerprint": fingerprint(out)}
    if ask.include_usage:
        head["usage"] = None

    def chunk(delta: dict | str, finish: str | None = None, **extra: Any) -> dict:
        choice = {"index": 0, "delta": delta} if chat else {"index": 0, "text": delta}
        return {**head, "choices": [{**choice, "logprobs": None, "finish_reason": finish}], **extra}

    chunks = [chunk({"role": "assistant", "content": ""})] if chat else []
    chunks += [chunk({"content": p} if chat else p) for p in pieces(out["answer"])]
    chunks.append(chunk({} if chat else "", "stop", **{EXTENSION: extension(out)}))
    if ask.include_usage:
        chunks.append({**head, "choices": [], "usage": usage(ask, out, count)})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def models_body(model_id: str, model_fingerprint: str, runtime_fingerprint: str, created: int) -> dict:
    return {"object": "list", "data": [model_entry(model_id, model_fingerprint, runtime_fingerprint, created)]}


def model_entry(model_id: str, model_fingerprint: str, runtime_fingerprint: str, created: int) -> dict:
    return {"id": model_id, "object": "model", "created": created, "owned_by": "galahad",
            EXTENSION: {"model_fingerprint": model_fingerprint, "runtime_fingerprint": runtime_fingerprint}}


# -- errors --------------------------------------------------------------------------------------------

_CODES = {400: "invalid_request", 401: "invalid_api_key", 404: "not_found", 409: "gold_conflict",
          413: "request_too_large", 422: "invalid_value", 429: "rate_limit_exceeded"}


def error_body(status: int, message: str, code: str | None = None) -> dict:
    """OpenAI's error body: `{"error": {"message", "type", "code", "param"}}`."""
    kind = ("authentication_error" if status == 401 else "rate_limit_error" if status == 429
            else "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": " ".join(str(message).split())[:2000], "type": kind,
                      "code": code or _CODES.get(status, "server_error" if status >= 500 else "error"),
                      "param": None}}


def code_of(exc: Exception) -> str | None:
    """The specific code of this module's refusals (None: the status's own)."""
    if isinstance(exc, UnknownModel):
        return "model_not_found"
    return "unsupported_parameter" if isinstance(exc, Unsupported) else None
