"""The HTTP API: FastAPI routes (thin: parse, call `Answering`, translate errors) on a Ray Serve ingress.

Every answer is JSON; every error our app produces is `{"error": "..."}` with a 4xx/5xx status, never a
traceback. The `guard` middleware applies the token rule (`security.py`), the body-size limit and the
per-endpoint metrics. Each replica is its own process: `GalahadApi.__init__` loads the engine once and
registers the replica in `_REPLICA` (`register_replica`), which the middleware reads.

No request stops the service: solves run in the threadpool (the engine lock is taken there), which has a
thread for every request Serve may send a replica, and a replica admits at most `max_queued_solves` solves
(503 with Retry-After beyond), so reads and `/healthz` always have slots. Errors Serve's proxy answers itself
are rewritten to JSON by `proxy_errors.JsonErrors` on the local cluster. The OpenAI-compatible routes
(`openai_routes.py`) answer through the same `GalahadApi.answer`, with OpenAI's error body
(`openai_protocol.error_body`) and 429 for a full solve queue. Details: docs/service.md.
"""

import json
import time
from typing import Any

import anyio.to_thread
import ray
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from ray import serve
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from galahad.flywheel.app.intake import GoldConflict
from galahad.flywheel.app.storage import engine_for
from galahad.flywheel.artifacts.store import open_store
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.config import DEFAULTS, Paths, ServiceConfig
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.service import request as per_request
from galahad.flywheel.service import security
from galahad.flywheel.service.answering import Answering
from galahad.flywheel.service.api import (
    Decoding,
    NotFound,
    ProblemStatus,
    SolveRequest,
    SolveResult,
    SubmitResponse,
    TooLarge,
)
from galahad.flywheel.service.binding import LOOPBACK, bind_replica_grpc_to
from galahad.flywheel.service.docs_page import router as docs_router
from galahad.flywheel.service.metrics import CONTENT_TYPE, Metrics
from galahad.flywheel.service.openai_protocol import Invalid, code_of, error_body, is_openai_path
from galahad.flywheel.service.openai_routes import OpenAIRoutes, router
from galahad.flywheel.service.request import current_caller
from galahad.flywheel.service.security import ADMIN, OPEN_PATHS, Caller, caller_identity, identify
from galahad.flywheel.service.tenancy import OverQuota, RateLimiter, TenantAnswering
from galahad.flywheel.service.ui import UiRoutes, install, ui_router

API_VERSION = "1"
SHA_HEADER = "X-Content-SHA256"
THREAD_HEADROOM = 8  # threadpool threads beyond max_ongoing_requests (Starlette's own, docs)
LEARNER_STATE_TIMEOUT_S = 3.0
app = FastAPI(title="Galahad", version=API_VERSION, docs_url=None, redoc_url=None,  # /docs: docs_page.py
              description="Verified-knowledge KV-cache grafting as a service: answers from verified memory, "
                          "learns what it does not know.")
_REPLICA: "GalahadApi | None" = None  # no `from __future__ import annotations`: Serve rewrites
# the routes' signatures and would read a string `Request` annotation as a query parameter


def register_replica(replica: "GalahadApi") -> None:
    """Serve pickles the deployment class by value (its globals are a copy); this function is pickled by
    reference, so it sets the global that `guard` reads in this process's real module."""
    global _REPLICA
    _REPLICA = replica


class Busy(GalahadError):
    """The replica already holds `max_queued_solves` solves (HTTP 503, Retry-After; 429 on the OpenAI routes)."""


class AdminOnly(GalahadError):
    """A route for the admin's token only (HTTP 403), asked with a tenant's."""


def error(status: int, message: str, headers: dict | None = None, request: Request | None = None,
          code: str | None = None) -> JSONResponse:
    """`{"error": "..."}`; on the OpenAI routes (`request` given) OpenAI's `{"error": {"message", "type",
    "code"}}`, with 429 where the native API answers a full solve queue with 503."""
    if request is not None and is_openai_path(request.url.path):
        if status == 503 and code == "queue_full":
            status, code = 429, None  # OpenAI's rate-limit error: clients back off and retry
        return JSONResponse(error_body(status, message, code), status_code=status, headers=headers)
    return JSONResponse({"error": " ".join(str(message).split())[:2000]}, status_code=status, headers=headers)


def status_of(exc: GalahadError) -> int:
    statuses = ((GoldConflict, 409), (Busy, 503), (OverQuota, 429), (AdminOnly, 403), (Invalid, 422), (NotFound, 404),
                (TooLarge, 413))
    return next((status for kind, status in statuses if isinstance(exc, kind)), 400)


@app.exception_handler(GalahadError)
async def galahad_error(request: Request, exc: GalahadError) -> JSONResponse:
    if isinstance(exc, OverQuota):  # a tenant's quota: 429 with Retry-After on every route
        return error(429, str(exc), {"Retry-After": str(exc.retry_after)}, request, "rate_limit_exceeded")
    return error(status_of(exc), str(exc), {"Retry-After": "1"} if isinstance(exc, Busy) else None, request,
                 "queue_full" if isinstance(exc, Busy) else code_of(exc))


@app.exception_handler(Exception)
async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """Whatever escapes the middleware too (Starlette's outermost handler): a JSON 500, never plain text."""
    return error(500, f"internal error: {type(exc).__name__}", request=request)


@app.exception_handler(RequestValidationError)
async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return error(422, f"{where}: {first.get('msg', 'invalid request')}", request=request)


@app.exception_handler(StarletteHTTPException)
async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    return error(exc.status_code, exc.detail if isinstance(exc.detail, str) else "request refused", request=request)


@app.middleware("http")
async def guard(request: Request, call_next):
    """Each request, in order: its context (`request.py`), enough threads, its caller, the refusals (401,
    429, 413), the route, then its metrics and `Server-Timing`."""
    t0, replica, ctx = time.perf_counter(), _REPLICA, per_request.begin()
    if replica is None:
        return error(503, "the replica is starting", request=request)
    _enough_threads(replica.config.max_ongoing_requests + THREAD_HEADROOM)
    ctx.caller = await replica.identify(request)
    per_request.add_stage("identify", time.perf_counter() - t0)
    response = _refusal(replica, request, ctx.caller)
    if response is None:
        try:
            response = await call_next(request)
        except Exception as exc:  # never a traceback over HTTP
            response = error(500, f"internal error: {type(exc).__name__}", request=request)
    ctx.route = getattr(request.scope.get("route"), "path", ctx.route)
    tenant = None if ctx.caller is None or ctx.caller.admin else ctx.caller.tenant
    replica.metrics.request(ctx.route, response.status_code, time.perf_counter() - t0, tenant, ctx.path)
    ctx.stages["replica"] = time.perf_counter() - t0
    response.headers["Server-Timing"] = per_request.server_timing(ctx.stages)
    return response


def _enough_threads(n: int) -> None:
    """A threadpool thread for every request Serve may send (this event loop's limiter; default 40)."""
    threads = anyio.to_thread.current_default_thread_limiter()
    threads.total_tokens = max(threads.total_tokens, n)


def _refusal(replica: "GalahadApi", request: Request, caller: Caller | None) -> JSONResponse | None:
    """401 without a valid token, 429 past a tenant's requests per minute, 413 over the body limit; else None."""
    if caller is None:
        whose = "<a tenant's token or GALAHAD_API_TOKEN>" if getattr(replica, "tenants_exist", False) else \
            "<GALAHAD_API_TOKEN>"
        return error(401, f"missing or wrong bearer token (Authorization: Bearer {whose})", request=request)
    if not caller.admin:
        try:
            replica.limiter.admit(caller.tenant, caller.quotas.get("rpm"))
        except OverQuota as exc:
            return error(429, str(exc), {"Retry-After": str(exc.retry_after)}, request, "rate_limit_exceeded")
    if int(request.headers.get("content-length") or 0) > replica.config.max_body_bytes:
        return error(413, f"request body over {replica.config.max_body_bytes} bytes", request=request)
    return None


async def json_body(request: Request, limit: int) -> Any:
    """The body, size-limited even without a Content-Length, as parsed JSON."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise TooLarge(f"request body over {limit} bytes")
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GalahadError(f"the request body is not valid JSON ({str(exc)[:120]})") from None
    except RecursionError:
        raise GalahadError("the request body is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal over Python's digit limit
        raise GalahadError(f"the request body has a value out of range ({str(exc)[:120]})") from None


app.include_router(router)  # the OpenAI-compatible routes, methods of `OpenAIRoutes` (openai_routes.py)
app.include_router(docs_router)  # /docs with Swagger UI's assets served here (docs_page.py): works offline
app.include_router(ui_router)  # the page: `/`, `/ui`, `/ui/data`, methods of `UiRoutes` (ui.py)
install(app)  # the page's sign-in middleware, outside `guard`


@serve.deployment
@serve.ingress(app)
class GalahadApi(OpenAIRoutes, UiRoutes):
    """One answering replica: the pinned engine (loaded once), the catalog and the store (its RAM tier holds
    `ram_tier_bytes`, `serve --ram-tier`)."""

    def __init__(self, model: str, data: str, catalog_url: str, store: str, token: str | None,
                 config: ServiceConfig, learner=None, ram_tier_bytes: int | None = None, kernel_mode: str = DEFAULTS.kernel_mode):
        # before Serve starts this replica's own gRPC server (after __init__): loopback, or this node's address
        bind_replica_grpc_to(LOOPBACK if security.is_loopback(config.host) else ray.util.get_node_ip_address())
        self.config, self.token = config, token
        self.model_id, self.started = model, int(time.time())  # the model's name as `serve --model` gave it
        self.learner = learner  # the learner's supervisor (`learner.LearnerSupervisor`), None with --no-learn
        self.solves = 0  # admitted solves; touched only on the event loop
        catalog = Catalog(catalog_url)
        self.answering = Answering(engine_for(model, Paths.resolve(data), kernel_mode), catalog, open_store(store, ram_tier_bytes), config,
                                   caller=caller_identity(token))
        self.metrics = Metrics(catalog.stats, self.learner_state, self.answering.store, catalog)
        self.tenants_exist = False  # once True, stays: tenants are revoked, never deleted (`catalog.tenants`)
        self.limiter, self.solvers = RateLimiter(), {}  # per tenant: requests per minute; scoped solvers
        register_replica(self)

    async def identify(self, request: Request) -> Caller | None:
        """The request's caller (`security.identify`), or None (401). The catalog is read in the threadpool
        (whether tenants exist, until one does; a tenant's row); `/healthz` reads nothing."""
        path, header = request.url.path, request.headers.get("authorization")
        if path in OPEN_PATHS:
            return ADMIN
        return await run_in_threadpool(self._identify, path, header)

    def _identify(self, path: str, header: str | None) -> Caller | None:
        tenants = self.answering.catalog.tenants
        if not self.tenants_exist:
            self.tenants_exist = tenants.any()
        return identify(path, header, self.token, self.tenants_exist, tenants.get)

    def view(self):
        """`Answering` as this request's caller sees it: the admin's (every scope), or a tenant's
        (`tenancy.TenantAnswering`: its scope and shared's, its quotas)."""
        caller = current_caller()
        return self.answering if caller.admin else TenantAnswering(self.answering, caller, self.solvers)

    def learner_state(self) -> dict:
        """The supervisor's state: `state` (running, starting, restarting, stopped; off without a learner;
        unreachable), `up`, `restarts`, `last_error` (one line), `last_error_at`, `pid`. Blocks at most a few
        seconds: call it from the threadpool."""
        if self.learner is None:
            return {"state": "off", "up": False}
        try:
            return ray.get(self.learner.state.remote(), timeout=LEARNER_STATE_TIMEOUT_S)
        except Exception as exc:
            return {"state": "unreachable", "up": False,
                    "last_error": f"the learner's supervisor did not answer: {type(exc).__name__}"}

    @app.post("/v1/solve", response_model=SolveResult)
    async def solve(self, request: Request) -> SolveResult:
        body = await self.read_json(request)
        try:
            req = SolveRequest.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise GalahadError(f"{'.'.join(str(p) for p in first['loc']) or 'body'}: {first['msg']}") from None
        return await self.answer(req.problem, req.gold, "/v1/solve", Decoding(answer_policy=req.answer_policy,
                                                                               model_decode=req.model_decode))

    async def read_json(self, request: Request) -> Any:
        return await json_body(request, self.config.max_body_bytes)

    async def answer(self, problem: object, gold: object, endpoint: str,
                     decoding: Decoding | None = None) -> SolveResult:
        """The one answering path of every route (`/v1/solve`, the OpenAI routes): admission (Busy past
        `max_queued_solves`), `Answering.solve` in the threadpool (`decoding`: the OpenAI routes' cap,
        choices, logprobs and stop), the answer metrics by endpoint and path."""
        if self.solves >= self.config.max_queued_solves:
            raise Busy(f"this replica is already answering {self.solves} solves; retry later")
        self.solves += 1
        self.metrics.solving.inc()
        try:
            out = await run_in_threadpool(self.view().solve, problem, gold, decoding)
        finally:
            self.solves -= 1
            self.metrics.solving.dec()
        self.metrics.answer(out.path, out.seconds)
        return out

    @app.post("/v1/problems", response_model=SubmitResponse)
    async def submit(self, request: Request) -> dict:
        body = await json_body(request, self.config.max_body_bytes)
        return {"problems": await run_in_threadpool(self.view().submit, body)}

    @app.get("/v1/problems/{problem_id}", response_model=ProblemStatus)
    def problem(self, problem_id: str) -> dict:
        return self.view().problem(problem_id)

    @app.get("/v1/catalog/stats")
    def stats(self) -> dict:
        return self.view().stats()

    @app.get("/v1/catalog/find")
    def find(self, text: str) -> dict:
        return {"problems": self.view().find(text)}

    @app.get("/v1/artifacts/{artifact_id}")
    def artifact(self, artifact_id: str) -> dict:
        return self.view().artifact(artifact_id)

    @app.get("/v1/artifacts/{artifact_id}/blob")
    def blob(self, artifact_id: str) -> Response:
        data, sha = self.view().blob(artifact_id)
        return Response(data, media_type="application/octet-stream", headers={SHA_HEADER: sha})

    @app.get("/healthz")
    async def healthz(self) -> dict:  # on the event loop: no thread, no lock, no catalog
        return {"ok": True}

    @app.get("/readyz")
    def readyz(self) -> JSONResponse:
        """Ready to answer (model loaded, catalog migrated); `learner` says how the learner is doing, and a
        learner restarting does not make the replica unready (answering does not need it)."""
        try:
            ready = self.answering.ready()
        except Exception as exc:
            return error(503, f"not ready: {str(exc)[:300]}")
        return JSONResponse({"ok": True, **ready, "learner": self.learner_state()})

    @app.get("/metrics")
    def metrics_text(self) -> Response:
        """The replica's metrics; a tenant's: its own request counts and its scope's catalog figures."""
        caller = current_caller()
        if caller.admin:
            return Response(self.metrics.render(), media_type=CONTENT_TYPE)
        return Response(self.metrics.render_tenant(caller.tenant, self.answering.catalog.scopes.stats(caller.tenant)),
                        media_type=CONTENT_TYPE)

    @app.post("/v1/memory/promote")
    async def promote(self, request: Request) -> dict:
        """The admin's: move a tenant's verified problem (and its artifacts) into shared, where every tenant
        recalls it; `{"problem_id", "to": "shared"}`. Who and when are recorded (`catalog.scopes.promote`)."""
        if not current_caller().admin:
            raise AdminOnly("only the admin's token (GALAHAD_API_TOKEN) promotes memory")
        body = await self.read_json(request)
        if not isinstance(body, dict) or set(body) - {"problem_id", "to"} or not isinstance(body.get("problem_id"), str):
            raise GalahadError('expected {"problem_id": "<64 hex>", "to": "shared"}')
        if body.get("to", "shared") != "shared":
            raise GalahadError('"to" must be "shared" (the only scope memory is promoted into)')
        pid = body["problem_id"]
        if self.answering.catalog.problems.by_hash(pid) is None:
            raise NotFound(f"unknown problem {pid[:80]}")
        out = await run_in_threadpool(self.answering.catalog.scopes.promote, pid, caller_identity(self.token))
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in out.items()}
