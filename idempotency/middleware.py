"""`Idempotency-Key` on the API's create endpoints, applied once for all of them.

A client that sends `Idempotency-Key: <1-255 visible ASCII characters>` with one of the POSTs
in CREATE_VIEWS gets, on a retry with the same key, the first answer (status, body, Location)
instead of a second plan, run, token or import. Keys are per user (a token's user or a
session's) and per path, and kept IDEMPOTENCY_KEY_TTL_S. Other requests ignore the header.
"""
from __future__ import annotations

import re

from django.core.exceptions import SuspiciousOperation, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http.multipartparser import MultiPartParserError
from django.http import JsonResponse
from django.urls import Resolver404, resolve
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from config.middleware import DatabaseUnavailableMiddleware
from idempotency import services

HEADER = "Idempotency-Key"
KEY_MAX_LENGTH = 255
KEY_PATTERN = "^[!-~]{1,255}$"  # visible ASCII: no space, no control character (a UUID fits)
_KEY = re.compile(KEY_PATTERN)

# URL names (with their namespace, none for the API) of the POSTs that create: plans,
# validation runs, API tokens, model imports.
CREATE_VIEWS = frozenset({"plan-list", "plan-validations", "token-list", "model-import"})


class IdempotencyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.META.get("HTTP_IDEMPOTENCY_KEY")
        if key is None or request.method != "POST":
            return self.get_response(request)
        view_class = _create_view_class(request)
        if view_class is None:
            return self.get_response(request)
        if not _KEY.fullmatch(key):
            return JsonResponse({HEADER: [_malformed(key)]}, status=400)
        try:
            user = _authenticated_user(request, view_class)
            if user is None:
                return self.get_response(request)  # the view answers 401 or 403
            try:
                fingerprint = services.request_fingerprint(request)
            except (MultiPartParserError, TooManyFilesSent, SuspiciousOperation, OSError) as exc:
                return JsonResponse({"detail": f"The request body could not be read: {exc}"}, status=400)
            outcome = services.idempotency_key_claim(user=user, path=request.path, key=key, fingerprint=fingerprint)
        except (OperationalError, InterfaceError) as exc:
            return DatabaseUnavailableMiddleware(self.get_response).process_exception(request, exc)
        if not isinstance(outcome, services.Claimed):
            return outcome
        try:
            response = self.get_response(request)
        except BaseException:
            services.idempotency_key_release(outcome)
            raise
        services.idempotency_key_settle(outcome, response)
        return response


def _create_view_class(request):
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    if match.view_name not in CREATE_VIEWS:
        return None
    return getattr(match.func, "cls", None)


def _authenticated_user(request, view_class):
    """The user the view will see, found the way DRF finds it (the view's own authentication
    classes), without touching request.user. None for no or bad credentials."""
    drf_request = Request(request)
    for authentication in view_class.authentication_classes:
        try:
            found = authentication().authenticate(drf_request)
        except APIException:
            return None
        if found is not None:
            user = found[0]
            return user if user.is_authenticated else None
    return None


def _malformed(key: str) -> str:
    if not key:
        return "Must not be empty: send 1 to 255 visible ASCII characters (a UUID is typical), or no header."
    if len(key) > KEY_MAX_LENGTH:
        return f"Must be at most {KEY_MAX_LENGTH} characters (got {len(key)}); a UUID is typical."
    return "Must be visible ASCII characters only (no spaces or control characters); a UUID is typical."
