"""The explorer's answers held to their models (dashboard/models.py), for the tests that serve a real explorer.

`check_answers` GETs every JSON route of the app and validates each answer against the route's response model;
the model, dumped as the API dumps it (aliases, fields left unset left out), must give back the very JSON that was
served: no field the model does not name, none it names left out, no number served as a string or the reverse.
"""

from __future__ import annotations

import json

import requests
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from dashboard.models import ErrorAnswer


def json_routes(app: FastAPI) -> list[APIRoute]:
    """The app's JSON API: every route under /api/."""
    return [r for r in app.routes if isinstance(r, APIRoute) and r.path.startswith("/api/")]


def check_answer(route: APIRoute, body: bytes) -> None:
    adapter = TypeAdapter(route.response_model)
    answer = adapter.validate_json(body)
    served = json.loads(body)
    assert adapter.dump_python(answer, mode="json", by_alias=True, exclude_unset=True) == served, route.path


def check_answers(app: FastAPI, url: str, values: dict[str, str], paths: dict[str, list[str]] | None = None,
                  absent: frozenset[str] = frozenset()) -> int:
    """Hold the answer of every JSON route to its model. A route is asked at each of its `paths` (keyed by the route's
    path), else at its path with `{names}` filled from `values`; routes in `absent` must answer an `ErrorAnswer` 404
    (nothing to show in this run). Returns how many answers were checked."""
    checked = 0
    for route in json_routes(app):
        for path in (paths or {}).get(route.path) or [route.path.format(**values)]:
            r = requests.get(url + path, timeout=30)
            if route.path in absent:
                assert r.status_code == 404, (path, r.status_code)
                ErrorAnswer.model_validate_json(r.content)
                continue
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
            check_answer(route, r.content)
            checked += 1
    return checked
