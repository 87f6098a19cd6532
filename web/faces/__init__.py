"""The faces of the app: the JSON API (``api``), the pages (``pages``, one module per page),
monitoring (``monitoring``) and the API docs (``api_docs``), with what only they use (the
API's models, the event streams, the pages' templates and forms).

A face is one module with a module-level ``router = APIRouter(...)`` whose handlers are
module-level functions. It stays thin: it parses the request, calls the engine and renders the
answer. It takes what it needs from ``web.deps`` (``engine: EngineDep``; ``principal: Caller``
or ``Admitted`` for a bearer token, ``session: SignedIn`` for a page) and raises the engine's
errors (``approvals.errors``) or ``web.errors.ApiError``, which ``web.exception_handlers``
answers. Adding one is the module and its line in :data:`FACES`. It never imports ``storage``
or ``graphs``: the import contract in pyproject.toml names this package as a whole, so a new
face is covered without being named.
"""

from __future__ import annotations

#: The faces ``web.app.create_app`` serves, by module, in the order their routes are matched:
#: where two faces' paths could both match a request, the one named first answers it. Each
#: module's ``router`` is included as it is (a test checks that every face with a router is
#: named here once).
FACES = (
    "web.faces.api",
    "web.faces.langgraph_api",
    "web.faces.pages.sign_in",
    "web.faces.pages.inbox",
    "web.faces.pages.request_page",
    "web.faces.pages.edit",
    "web.faces.pages.history",
    "web.faces.monitoring",
    "web.faces.pages.audit",
    "web.faces.pages.run_timeline",
    "web.faces.email_links",
    "web.faces.slack",
    "web.faces.api_docs",
)
