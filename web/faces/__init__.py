"""The faces of the app: the JSON API (``api``), the pages (``pages``, one module per page),
monitoring (``monitoring``) and the API docs (``api_docs``), with what only they use (the
API's models, the event streams, the pages' templates and forms).

A face is one module with a module-level ``router = APIRouter(...)`` whose handlers are
module-level functions. It stays thin: it parses the request, calls the engine and renders the
answer. It takes what it needs from ``web.deps`` (``engine: EngineDep``; ``principal: Caller``
or ``Admitted`` for a bearer token, ``session: SignedIn`` for a page) and raises the engine's
errors (``approvals.errors``) or ``web.errors.ApiError``, which ``web.exception_handlers``
answers. Adding one is the module and one ``app.include_router(module.router)`` line in
``web.app.create_app``. It never imports ``storage`` or ``graphs``: the import contract in
pyproject.toml names this package as a whole, so a new face is covered without being named.
"""
