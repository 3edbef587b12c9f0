"""The service's page: `/` (a redirect to `/ui`), `/ui` (HTML, `ui_page.py`), `/ui/data` (the same figures as
JSON, `dashboard.collect`), and how a browser signs in to them.

The token rule is every endpoint's (`security.py`); with a token set the page needs the admin's (a tenant's
gets 403). A browser's 401 or 403 on `/` or `/ui` is a form that POSTs the token to `/ui/login`, which keeps
it in a cookie (`galahad_token`: HttpOnly, SameSite=Strict, Secure over https); `/ui/logout` clears it. The
cookie counts only on GET and HEAD of `/`, `/ui` and `/ui/data` (`sign_in`), so it reads the page and nothing
more; login and logout grant nothing and refuse a cross-site POST. `UiRoutes` is mixed into `app.GalahadApi`;
it needs `metrics`, `answering`, `learner_state()`, `tenants_exist`, `model_id` and `config`."""

import re
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from galahad.flywheel.service.dashboard import collect
from galahad.flywheel.service.proxy_errors import PAGE_HEADER
from galahad.flywheel.service.request import current_caller
from galahad.flywheel.service.ui_page import HEADERS, page, sign_in_page

ui_router = APIRouter(tags=["page"])  # no `from __future__ import annotations` (see app.py)
COOKIE = "galahad_token"
PAGES = frozenset({"/", "/ui", "/ui/data"})  # where the cookie counts (read-only GETs)
SIGN_IN, SIGN_OUT = "/ui/login", "/ui/logout"
TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{1,512}")  # what a token may be (admin tokens, `gt-<name>.<secret>`)
FORM_LIMIT = 4096


class UiRoutes:
    @ui_router.get("/", include_in_schema=False)
    def root(self) -> RedirectResponse:
        return RedirectResponse("/ui", status_code=307)

    @ui_router.get("/ui", include_in_schema=False)
    def ui(self, request: Request) -> HTMLResponse:
        return HTMLResponse(page(self.ui_figures(), COOKIE in request.cookies), headers=HEADERS)

    @ui_router.get("/ui/data")
    def ui_data(self) -> dict:
        """The page's figures: those `/metrics` also shows (`figures`, `recall`, `store`: this replica's,
        at this moment), verified problems over time, attempts per second, the learner, the latest
        verifications and, with tenants, each tenant's usage."""
        return self.ui_figures()

    def ui_figures(self) -> dict:
        if not current_caller().admin:
            raise StarletteHTTPException(403, "the page shows the whole service: only the admin's token "
                                              "(GALAHAD_API_TOKEN) opens it")
        return collect(self.metrics.registry, self.answering.catalog, self.learner_state(), self.tenants_exist,
                       self.model_id, self.config)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _same_site(request: Request) -> bool:
    """A POST from this server's own page: no Origin, or one naming this host; Sec-Fetch-Site, if sent, agrees."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


def _https(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


async def _sign_in(request: Request) -> Response:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            return _error(413, f"a sign-in form over {FORM_LIMIT} bytes")
    token = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
    if not TOKEN.fullmatch(token):
        return HTMLResponse(sign_in_page("That is not a token."), status_code=400, headers={**HEADERS, PAGE_HEADER: "sign-in"})
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=_https(request), path="/")
    return response


def _sign_out(request: Request) -> Response:
    response = RedirectResponse("/ui", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=_https(request))
    return response


async def sign_in(request: Request, call_next):
    """The page's middleware (outside `app.guard`): answers `/ui/login` and `/ui/logout`; on the page's GETs
    turns the cookie into the Authorization header the guard checks, and a browser's 401 or 403 into the
    sign-in form."""
    path, method = request.url.path, request.method
    if path in (SIGN_IN, SIGN_OUT):
        if method != "POST":
            return _error(405, f"{path} takes a POST (the sign-in form)")
        if not _same_site(request):
            return _error(403, "a cross-site sign-in or sign-out is refused")
        return await _sign_in(request) if path == SIGN_IN else _sign_out(request)
    if path not in PAGES or method not in ("GET", "HEAD"):
        return await call_next(request)
    cookie = request.cookies.get(COOKIE)
    if cookie and TOKEN.fullmatch(cookie) and "authorization" not in request.headers:
        request.scope["headers"] = [*request.scope["headers"], (b"authorization", f"Bearer {cookie}".encode())]
    response = await call_next(request)
    if response.status_code in (401, 403) and path != "/ui/data" and "text/html" in request.headers.get("accept", ""):
        message = ("This page needs the admin's token; a tenant's token does not open it." if response.status_code == 403
                   else "That token was not accepted." if cookie else "This server needs a token.")
        return HTMLResponse(sign_in_page(message), status_code=response.status_code,
                            headers={**HEADERS, PAGE_HEADER: "sign-in"})  # kept HTML by Serve's proxy
    return response


def install(app: FastAPI) -> None:
    """Register `sign_in` on `app`, after `app.guard` so that it runs first (Starlette: last added, outermost)."""
    app.middleware("http")(sign_in)
