"""The OpenAI-compatible routes (`/v1/chat/completions`, `/v1/completions`, `/v1/models`), thin: read the body,
let `openai_protocol` parse it, answer through `GalahadApi.answer` (the same path as `/v1/solve`), let
`openai_protocol` shape the reply. `OpenAIRoutes` is mixed into `app.GalahadApi` and needs `model_id`,
`answering`, `metrics`, `read_json(request)` and `answer(problem, gold, endpoint)` from it.

A streamed answer is computed before the first byte is sent, so every refusal is a real HTTP status, and
every answer carries memory's verdict in its headers (`X-Galahad-Verified`, `X-Galahad-Path`) too.
"""

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from galahad.flywheel.service import openai_protocol as protocol

router = APIRouter(tags=["OpenAI-compatible"])  # no `from __future__ import annotations` (see app.py)


class OpenAIRoutes:
    @router.post("/v1/chat/completions")
    async def chat_completions(self, request: Request):
        return await self._answer_openai(request, protocol.parse_chat, "/v1/chat/completions")

    @router.post("/v1/completions")
    async def completions(self, request: Request):
        return await self._answer_openai(request, protocol.parse_completion, "/v1/completions")

    @router.get("/v1/models")
    def models(self) -> dict:
        engine = self.answering.engine
        return protocol.models_body(self.model_id, engine.model_fingerprint, engine.runtime_fingerprint,
                                    self.started)

    @router.get("/v1/models/{model_id:path}")
    def model(self, model_id: str) -> dict:
        if model_id != self.model_id:
            raise protocol.UnknownModel(f"the model {model_id[:80]!r} is not served here; this service serves "
                                        f"{self.model_id!r}")
        engine = self.answering.engine
        return protocol.model_entry(self.model_id, engine.model_fingerprint, engine.runtime_fingerprint,
                                    self.started)

    async def _answer_openai(self, request: Request, parse, endpoint: str):
        t0 = time.perf_counter()
        body = await self.read_json(request)
        ask = parse(body, self.model_id)
        out = await self.answer(ask.problem, ask.gold, endpoint, ask.decoding)
        rid, created = protocol.new_id(ask.kind), int(time.time())
        headers = protocol.headers(out)
        if ask.stream:
            events = protocol.stream_events(ask, out, self.model_id, created, rid)
            first = 1 if ask.kind == "chat" else 0  # chat's first chunk is the role, then the first token
            events = self.metrics.timed_stream(events, first, t0, endpoint, out.path)  # its TTFT
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", **headers})
        return JSONResponse(protocol.completion_body(ask, out, self.model_id, created, rid), headers=headers)
