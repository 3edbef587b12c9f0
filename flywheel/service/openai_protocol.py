"""OpenAI's protocol over Galahad's one answering path, without HTTP: requests in, problems and how to decode
them out; answers (`api.SolveResult`) in, `chat.completion` / `text_completion` bodies, their
server-sent-event chunks, the response headers, the model list and OpenAI's error body out. Plain functions:
the routes (`openai_routes.py`) only call them, and tests call them alone.

A request carries one problem: a chat's last `user` message or a completion's `prompt`. `metadata.gold`,
`metadata.answer_policy` and `metadata.model_decode` are `/v1/solve`'s fields. Every parameter of OpenAI's two
requests is honoured, accepted and ignored, or refused (400, naming it) by the tables below (`CHAT`, `TEXT`;
docs/service.md lists them); an unknown one is refused; `null` counts as not sent. Status codes: 422 for a
body not of this shape, 400 refused, 404 another model, 413 over the size limits, 409 a gold that conflicts
with memory, 429 a full solve queue, 401 a missing or wrong token."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.service.api import Decoding, NotFound, SolveResult

PREFIXES = ("/v1/chat/", "/v1/completions", "/v1/models")
ROLES = ("system", "developer", "user", "assistant")
EXTENSION = "galahad"  # the one extension object on every answer
VERIFIED_HEADER = "X-Galahad-Verified"  # true | false | unverified, on every answer
PATH_HEADER = "X-Galahad-Path"
MAX_N = 8  # choices per request (each is a decode)
MAX_STOP = 4  # stop strings per request, as OpenAI
MAX_TOP_LOGPROBS = {"chat": 20, "text": 5}  # as OpenAI


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
    """One problem asked over the protocol, and how to decode its answer."""

    kind: str  # "chat" or "text"
    problem: str
    gold: str | None
    stream: bool
    include_usage: bool
    decoding: Decoding = field(default_factory=Decoding)


# -- the parameters --------------------------------------------------------------------------------

HONOURED = "honoured"
IGNORED = "ignored"  # accepted, no effect (documented)


def _empty(v: object) -> bool:
    return v in ([], {}, "", False)


_NO_TOOLS = "this service calls no tools and answers in text (send no tools; tool_choice 'none' is accepted)"
_SHARED: dict[str, object] = {
    "model": HONOURED, "stream": HONOURED, "stream_options": HONOURED, "metadata": HONOURED, "max_tokens": HONOURED,
    "n": HONOURED, "temperature": HONOURED, "seed": HONOURED, "stop": HONOURED, "logprobs": HONOURED,
    "top_p": IGNORED, "user": IGNORED,
    "logit_bias": (_empty, "logit_bias is not supported: send {} or leave it out"),
    "presence_penalty": (lambda v: v == 0, "presence_penalty is not supported: only 0 (no penalty)"),
    "frequency_penalty": (lambda v: v == 0, "frequency_penalty is not supported: only 0 (no penalty)"),
}
# parameter -> HONOURED | IGNORED | (the values accepted, the whole sentence refusing anything else)
CHAT: dict[str, object] = {
    **_SHARED, "messages": HONOURED, "max_completion_tokens": HONOURED, "top_logprobs": HONOURED,
    "parallel_tool_calls": IGNORED, "safety_identifier": IGNORED, "prompt_cache_key": IGNORED,
    "prompt_cache_retention": IGNORED, "prompt_cache_options": IGNORED, "service_tier": IGNORED,
    "verbosity": IGNORED,
    "tools": (_empty, f"tools are not supported: {_NO_TOOLS}"),
    "functions": (_empty, f"functions are not supported: {_NO_TOOLS}"),
    "tool_choice": (lambda v: v == "none", f"tool_choice other than 'none' is not supported: {_NO_TOOLS}"),
    "function_call": (lambda v: v == "none", f"function_call other than 'none' is not supported: {_NO_TOOLS}"),
    "response_format": (lambda v: v == {"type": "text"},
                                "response_format other than {\"type\": \"text\"} is not supported: answers are text"),
    "modalities": (lambda v: v == ["text"], "modalities other than [\"text\"] are not supported"),
    "audio": (_empty, "audio output is not supported: this service answers in text"),
    "prediction": (_empty, "prediction (predicted outputs) is not supported"),
    "store": (lambda v: v is False, "store: true is not supported: this service stores no completions"),
    "reasoning_effort": (lambda v: False, "reasoning_effort is not supported: the served model has no "
                                                  "reasoning tokens"),
    "web_search_options": (lambda v: False, "web_search_options is not supported: this service does not "
                                                    "search the web"),
    "moderation": (lambda v: False, "moderation is not supported by this service"),
}
TEXT: dict[str, object] = {
    **_SHARED, "prompt": HONOURED,
    "echo": (lambda v: v is False, "echo is not supported: the prompt is never repeated in the answer"),
    "suffix": (_empty, "suffix (insertion) is not supported"),
    "best_of": (lambda v: v == 1, "best_of other than 1 is not supported (use n for several answers)"),
}


# -- requests ------------------------------------------------------------------------------------------

def parse_chat(body: object, model_id: str) -> Ask:
    """A `POST /v1/chat/completions` body checked field by field."""
    body = _common(body, model_id, {"messages"}, CHAT)
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
    logprobs = body.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise Invalid("logprobs: must be a boolean")
    top = _int(body, "top_logprobs", 0, MAX_TOP_LOGPROBS["chat"], 0)
    if "top_logprobs" in body and not logprobs:
        raise GalahadError("top_logprobs: only allowed with logprobs: true")
    cap = min(_int(body, name, 1, None, 1 << 62) for name in ("max_tokens", "max_completion_tokens"))
    return _ask("chat", problem, body, cap, top if logprobs else None)


def parse_completion(body: object, model_id: str) -> Ask:
    """A `POST /v1/completions` body: one prompt string (or a list of exactly one)."""
    body = _common(body, model_id, {"prompt"}, TEXT)
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) for t in prompt):
            raise Unsupported("prompt: token-id prompts are not supported; send text")
        if len(prompt) != 1:
            raise Unsupported(f"prompt: {len(prompt)} prompts in one request; send exactly one")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise Invalid("prompt: must be a string")
    logprobs = _int(body, "logprobs", 0, MAX_TOP_LOGPROBS["text"], None)
    return _ask("text", prompt, body, _int(body, "max_tokens", 1, None, 1 << 62), logprobs)


def _int(body: dict, name: str, lo: int, hi: int | None, default: int | None) -> Any:
    """An integer field within [lo, hi] (hi None: no upper bound), or `default` when not sent."""
    if name not in body:
        return default
    v = body[name]
    if not isinstance(v, int) or isinstance(v, bool):
        raise Invalid(f"{name}: must be an integer")
    if v < lo or (hi is not None and v > hi):
        raise Invalid(f"{name}: must be an integer from {lo}" + (f" to {hi}" if hi is not None else " up"))
    return v


def _common(body: object, model_id: str, own: set[str], table: dict[str, object]) -> dict:
    if not isinstance(body, dict):
        raise Invalid("the request body must be a JSON object")
    body = {k: v for k, v in body.items() if v is not None}  # null is "not sent"
    for name in own | {"model"}:
        if name not in body:
            raise Invalid(f"{name}: field required")
    if not isinstance(body["model"], str):
        raise Invalid("model: must be a string")
    for name, value in body.items():
        rule = table.get(name)
        if rule is None:
            raise Unsupported(f"unsupported parameter {str(name)[:80]!r} (this service refuses what it cannot "
                              f"honour; docs/service.md lists every parameter)")
        if isinstance(rule, tuple) and not rule[0](value):
            raise Unsupported(rule[1])
    if body["model"] != model_id:
        raise UnknownModel(f"the model {body['model'][:80]!r} is not served here; this service serves {model_id!r}")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: must be a boolean")
    _int(body, "n", 1, None, 1)
    if body.get("n", 1) > MAX_N:
        raise Unsupported(f"n: at most {MAX_N} choices per request (each is a decode)")
    _int(body, "seed", -(1 << 63), (1 << 63) - 1 - MAX_N, 0)
    for name, lo, hi in (("temperature", 0, 2), ("top_p", 0, 1)):
        value = body.get(name, lo)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
            raise Invalid(f"{name}: must be a number from {lo} to {hi}")
    for name in ("user", "safety_identifier", "prompt_cache_key"):
        if name in body and not isinstance(body[name], str):
            raise Invalid(f"{name}: must be a string")
    stop = body.get("stop", [])
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > MAX_STOP:
        raise Invalid(f"stop: must be a non-empty string or a list of up to {MAX_STOP} non-empty strings")
    options = body.get("stream_options")
    if options is not None:
        if not body.get("stream"):
            raise GalahadError("stream_options: only allowed with stream: true")
        if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
            raise Invalid("stream_options: must be an object like {\"include_usage\": true}")
        if set(options) - {"include_usage"}:
            raise Unsupported(f"stream_options: unsupported {sorted(set(options) - {'include_usage'})}")
    meta = body.get("metadata", {})
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise Invalid("metadata: must be an object of string keys and string values")
    return body


def _flag(meta: dict, name: str) -> bool:
    """A metadata flag (metadata values are strings): "true" or "false", absent: false."""
    value = meta.get(name, "false")
    if value not in ("true", "false"):
        raise Invalid(f"metadata.{name}: must be \"true\" or \"false\"")
    return value == "true"


def _ask(kind: str, problem: str, body: dict, cap: int, logprobs: int | None) -> Ask:
    stop = body.get("stop", ())
    decoding = Decoding(max_tokens=None if cap >= 1 << 62 else cap, n=body.get("n", 1),
                        temperature=float(body.get("temperature", 1.0)), seed=body.get("seed", 0),
                        logprobs=logprobs, stop=(stop,) if isinstance(stop, str) else tuple(stop),
                        answer_policy=body.get("metadata", {}).get("answer_policy"),
                        model_decode=_flag(body.get("metadata", {}), "model_decode"))
    return Ask(kind, problem, body.get("metadata", {}).get("gold"), bool(body.get("stream")),
               bool((body.get("stream_options") or {}).get("include_usage")), decoding)


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
            raise Unsupported(f"{where}: unsupported field {str(key)[:80]!r}")
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
            what = {"image_url": "image", "input_audio": "audio", "file": "file"}.get(kind, repr(kind)[:40])
            raise Unsupported(f"{where}.content[{j}]: {what} content parts are not supported; send text")
        if not isinstance(part.get("text"), str) or set(part) - {"type", "text"}:
            raise Invalid(f"{where}.content[{j}]: a text part is {{\"type\": \"text\", \"text\": \"...\"}}")
        texts.append(part["text"])
    return "\n".join(texts)


# -- answers -------------------------------------------------------------------------------------------

def new_id(kind: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + secrets.token_hex(12)


def extension(out: SolveResult) -> dict:
    """The `galahad` object: how the answer was reached, what `/v1/solve` says beside the answer (with
    several choices, each one's verdict too)."""
    ext = out.model_dump(exclude={"answer"})
    if len(out.choices) > 1:
        ext["choices"] = [{"index": i, "verified": c.verified, "matches_gold": c.matches_gold,
                           "decode_tokens": c.decode_tokens} for i, c in enumerate(out.choices)]
    return ext


def verified_word(verified: bool | None) -> str:
    return "true" if verified is True else "false" if verified is False else "unverified"


def headers(out: SolveResult) -> dict[str, str]:
    """The headers on every answer: memory's verdict and the path, where clients that read only headers see them
    (LangChain's `include_response_headers`)."""
    return {VERIFIED_HEADER: verified_word(out.verified), PATH_HEADER: out.path}


def usage(out: SolveResult) -> dict:
    """Tokens as the model read and wrote them for this request: the whole context (memory grafted + the
    prompt prefilled), of which `cached_tokens` came from memory (grafted; all of it when the answer was read
    back, `answer_from` memo or stored: nothing was prefilled), and the tokens decoded (0 when read back)."""
    p, c = out.prompt_tokens, out.decode_tokens
    cached = p if out.answer_from != "decode" else out.grafted_tokens
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _token(text: str, logprob: float) -> dict:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def chat_logprobs(scores: list[dict] | None) -> dict | None:
    """OpenAI's chat `logprobs`: `{"content": [{token, logprob, bytes, top_logprobs}], "refusal": None}`."""
    if scores is None:
        return None
    return {"content": [{**_token(s["token"], s["logprob"]),
                         "top_logprobs": [_token(t["token"], t["logprob"]) for t in s["top"]]} for s in scores],
            "refusal": None}


def text_logprobs(scores: list[dict] | None) -> dict | None:
    """OpenAI's completions `logprobs`: tokens, token_logprobs, top_logprobs (one dict a token), text_offset."""
    if scores is None:
        return None
    offsets, at = [], 0
    for s in scores:
        offsets.append(at)
        at += len(s["token"])
    return {"tokens": [s["token"] for s in scores], "token_logprobs": [s["logprob"] for s in scores],
            "top_logprobs": [{t["token"]: t["logprob"] for t in s["top"]} for s in scores], "text_offset": offsets}


def completion_body(ask: Ask, out: SolveResult, model_id: str, created: int, rid: str) -> dict:
    """The whole `chat.completion` (or `text_completion`) for one answer (and its choices)."""
    choices = []
    for i, c in enumerate(out.choices):
        if ask.kind == "chat":
            choices.append({"index": i, "message": {"role": "assistant", "content": c.answer, "refusal": None},
                            "logprobs": chat_logprobs(c.logprobs), "finish_reason": c.finish_reason})
        else:
            choices.append({"index": i, "text": c.answer, "logprobs": text_logprobs(c.logprobs),
                            "finish_reason": c.finish_reason})
    return {"id": rid, "object": "chat.completion" if ask.kind == "chat" else "text_completion",
            "created": created, "model": model_id, "system_fingerprint": fingerprint(out),
            "choices": choices, "usage": usage(out), EXTENSION: extension(out)}


def fingerprint(out: SolveResult) -> str:
    return "fp_" + out.runtime_fingerprint[:12]


def pieces(text: str) -> list[str]:
    """The answer cut at word starts; the pieces join to the text exactly."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p] or [""]


def stream_events(ask: Ask, out: SolveResult, model_id: str, created: int, rid: str) -> list[bytes]:
    """Server-sent events in OpenAI's chunk format for an answer already computed, ending `data: [DONE]`:
    per choice the role, the content in pieces (the first carrying the choice's logprobs, if asked), the
    finish with the `galahad` object; then usage if asked for."""
    chat = ask.kind == "chat"
    head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
            "model": model_id, "system_fingerprint": fingerprint(out)}
    if ask.include_usage:
        head["usage"] = None

    def chunk(i: int, delta: dict | str, finish: str | None = None, logprobs: dict | None = None,
              **extra: Any) -> dict:
        choice = {"index": i, "delta": delta} if chat else {"index": i, "text": delta}
        return {**head, "choices": [{**choice, "logprobs": logprobs, "finish_reason": finish}], **extra}

    chunks = []
    for i, c in enumerate(out.choices):
        logprobs = (chat_logprobs if chat else text_logprobs)(c.logprobs)
        chunks += [chunk(i, {"role": "assistant", "content": ""})] if chat else []
        for j, p in enumerate(pieces(c.answer)):
            chunks.append(chunk(i, {"content": p} if chat else p, logprobs=logprobs if j == 0 else None))
        chunks.append(chunk(i, {} if chat else "", c.finish_reason, **{EXTENSION: extension(out)}))
    if ask.include_usage:
        chunks.append({**head, "choices": [], "usage": usage(out)})
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
