"""The approvers' and operators' pages, one module per page (or per family of pages): signing
in (``sign_in``; OpenID Connect: ``oidc``), the inbox (``inbox``), the history (``history``),
one request (``request_page``) and its edit form (``edit``), the decision log (``audit``) and
one run's timeline (``run_timeline``).

Server-rendered (Jinja2, autoescaped), no inline script: every page works without JavaScript;
``/static/app.js`` only adds live updates (server-sent events) and countdowns. Identity comes
only from the server-side session that the signed cookie names (``web.security``). Every
state-changing form, the sign-in form included, carries a CSRF token and must come from the
configured public URL's origin.
"""
