"""The faces of the app: each module here that has a module-level ``router`` is one face (the
JSON API, the pages, monitoring, the API docs), included by ``web.app.create_app`` with one line.

A face stays thin: it parses the request, calls the engine (``web.engine``, reached through
the dependencies of ``web.deps``) and renders the answer. It never imports ``storage`` or
``graphs``: the import contract in pyproject.toml names this package as a whole.
"""
