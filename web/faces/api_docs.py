"""``/api/docs``: Swagger UI for the JSON API, served from the ``swagger-ui-py`` package.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script; the
app's Content-Security-Policy (``script-src 'self'``, no ``unsafe-inline``) blocks both, and
many deployments have no way out to a CDN anyway. Here the page is a template of ours, the
assets come from the installed package (only the two files the page needs), and Swagger UI is
started by ``/static/api-docs.js``, so the policy stays as strict as on every other page.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates

DOCS_PATH: Final = "/api/docs"
ASSETS_PATH: Final = "/api/docs-assets"
#: The package's files the page uses; nothing else of the package is served.
ASSETS: Final = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
}


@cache
def assets_dir() -> Path:
    """Swagger UI's distribution inside the installed ``swagger-ui-py`` package (Swagger UI 5,
    which reads OpenAPI 3.1, the version FastAPI writes)."""
    static = Path(str(resources.files("swagger_ui"))) / "static"
    if not (static / "swagger-ui-bundle.js").is_file():
        raise RuntimeError(f"no Swagger UI distribution in {static}")
    return static


_templates = Jinja2Templates(directory=str(Path(__file__).resolve().parents[1] / "templates"))


#: The docs page and the two files of Swagger UI it loads.
router = APIRouter(include_in_schema=False)


@router.get(DOCS_PATH)
async def api_docs(request: Request) -> HTMLResponse:
    # The app's own OpenAPI URL (``/api/openapi.json``), whatever it is configured to be.
    openapi_url = request.app.openapi_url
    return _templates.TemplateResponse(
        request, "api-docs.html", {"openapi_url": openapi_url, "assets": ASSETS_PATH}
    )


@router.get(ASSETS_PATH + "/{name}")
async def asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        return Response("not found", status_code=404, media_type="text/plain")
    # The package's files: the same for everyone, nothing of anyone's in them.
    return FileResponse(
        assets_dir() / name,
        media_type=media_type,
        headers={"cache-control": "public, max-age=86400"},
    )
