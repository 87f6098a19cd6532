"""The faces plug in: every module of web.faces with a router is named once in FACES, and the app
matches their routes in FACES's order (the order decides which of two matching paths answers)."""

from __future__ import annotations

import pkgutil
from importlib import import_module
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute

import web.faces
from web.app import create_app
from web.faces import FACES
from web.settings import Settings


def _modules_with_a_router() -> set[str]:
    found = set()
    for module in pkgutil.walk_packages(web.faces.__path__, prefix="web.faces."):
        if isinstance(getattr(import_module(module.name), "router", None), APIRouter):
            found.add(module.name)
    return found


def _served(routes: list[Any]) -> list[tuple[str, frozenset[str], str]]:
    """The app's API routes, flattened, in the order they are matched."""
    flat: list[tuple[str, frozenset[str], str]] = []
    for route in routes:
        original = getattr(route, "original_router", None)
        if original is not None:  # an included router (FastAPI keeps it whole)
            prefix = route.include_context.prefix
            flat += [(prefix + p, m, n) for p, m, n in _served(original.routes)]
        elif isinstance(route, APIRoute):
            flat.append((route.path, frozenset(route.methods or ()), route.endpoint.__module__))
    return flat


def test_every_face_with_a_router_is_named_once() -> None:
    assert len(set(FACES)) == len(FACES)
    assert set(FACES) == _modules_with_a_router()


def test_the_app_matches_the_faces_routes_in_the_order_faces_names_them() -> None:
    expected = [
        (route.path, frozenset(route.methods or ()), route.endpoint.__module__)
        for face in FACES
        for route in import_module(face).router.routes
        if isinstance(route, APIRoute)
    ]
    assert _served(create_app(Settings()).routes) == expected


def test_the_event_stream_is_matched_before_the_request_it_could_be_taken_for() -> None:
    paths = [path for path, _, _ in _served(create_app(Settings()).routes)]
    assert paths.index("/api/v1/pending/events") < paths.index("/api/v1/pending/{request_id}")
