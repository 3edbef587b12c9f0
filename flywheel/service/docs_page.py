"""`/docs` offline: the Swagger UI page with its assets served by Galahad itself, never from a CDN.

FastAPI's own `/docs` and `/redoc` load their assets from CDNs (a blank page without internet) and are
switched off in `app.py`. Here the assets come from the pinned package `swagger-ui-bundle-v2` (module
`swagger_ui_bundle`): `/docs/assets/{name}` serves exactly the files in `ASSETS`, and the page links only
those and `/openapi.json`. The routes follow the token rule like every other.
"""

from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from galahad.flywheel.service.api import NotFound

ASSETS = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8",
          "favicon-32x32.png": "image/png"}
ASSET_PREFIX = "/docs/assets/"
router = APIRouter(include_in_schema=False)  # no `from __future__ import annotations` (see app.py)


def assets_dir() -> Path:
    """The folder of the pinned Swagger UI release inside the installed package."""
    from swagger_ui_bundle import swagger_ui_path

    return Path(str(swagger_ui_path))


@router.get("/docs")
def docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="Galahad - API docs",
                               swagger_js_url=ASSET_PREFIX + "swagger-ui-bundle.js",
                               swagger_css_url=ASSET_PREFIX + "swagger-ui.css",
                               swagger_favicon_url=ASSET_PREFIX + "favicon-32x32.png")


@router.get(ASSET_PREFIX + "{name}")
def asset(name: str) -> FileResponse:
    if name not in ASSETS:  # a fixed list: no path from the request ever reaches the filesystem
        raise NotFound(f"no docs asset {name[:80]!r}")
    return FileResponse(assets_dir() / name, media_type=ASSETS[name],
                        headers={"Cache-Control": "public, max-age=86400"})
