"""drf-spectacular postprocessing hook: the Idempotency-Key header, and the 409 and 422 it can
bring, on every operation the middleware applies to (CREATE_VIEWS), with no view edited."""
from __future__ import annotations

import re

from django.urls import URLPattern, URLResolver, get_resolver

from idempotency.middleware import CREATE_VIEWS, HEADER, KEY_MAX_LENGTH, KEY_PATTERN
from idempotency.services import REPLAYED_HEADER

PARAMETER = {
    "in": "header",
    "name": HEADER,
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": KEY_MAX_LENGTH, "pattern": KEY_PATTERN},
    "description": (
        "Makes a retry safe: a second request with the same key (same user, same path) within 24 hours gets the first "
        "one's answer (status, body, Location, and `Idempotent-Replayed: true`) and creates nothing. 1-255 visible ASCII "
        "characters, a UUID is typical. The same key with a different body is a 422; while the first request runs, a 409. "
        "Only a success is kept: after an error the key may be sent again."
    ),
}
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorDetail"}}}
RESPONSES = {
    "409": {
        "description": "A request with this Idempotency-Key is still being processed; retry after `Retry-After` seconds.",
        "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}, "required": True}},
        "content": ERROR,
    },
    "422": {"description": "This Idempotency-Key was already used with a different request.", "content": ERROR},
}
REPLAYED = {"schema": {"type": "string", "enum": ["true"]}, "description": "Present on an answer replayed for an Idempotency-Key."}


def add_idempotency_key(result, generator, request, public):
    for path in create_paths():
        operation = result["paths"].get(path, {}).get("post")
        if operation is None:
            continue
        operation.setdefault("parameters", []).append(PARAMETER)
        for code, response in operation["responses"].items():
            if code.startswith("2"):
                response.setdefault("headers", {})[REPLAYED_HEADER] = REPLAYED
        for code, response in RESPONSES.items():
            operation["responses"].setdefault(code, response)
    return result


def create_paths() -> list[str]:
    """The OpenAPI paths of CREATE_VIEWS ("/api/v1/plans/{plan_id}/validations/")."""
    return [_openapi_path(route) for route, name in _routes(get_resolver(), "", "") if name in CREATE_VIEWS]


def _routes(resolver: URLResolver, prefix: str, namespace: str):
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry, route, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
        elif isinstance(entry, URLPattern) and entry.name:
            yield route, namespace + entry.name


def _openapi_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.lstrip("^").rstrip("$"))
