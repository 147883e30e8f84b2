from __future__ import annotations

import html
import logging
import re

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

from inputs.text import CONTROL_CHARACTER

logger = logging.getLogger(__name__)


class RequestBodyLimitMiddleware:
    """Refuse a request whose declared body is too large with 413, before anything reads it:
    any body over MAX_REQUEST_BODY_BYTES, and a body that is not multipart (JSON, a urlencoded
    form) over DATA_UPLOAD_MAX_MEMORY_SIZE, which Django would otherwise refuse only when a view
    reads it (RequestDataTooBig: an HTML 400 and a logged traceback). Multipart file parts do not
    count against DATA_UPLOAD_MAX_MEMORY_SIZE in Django, so uploads keep the larger limit. (A
    config.json over MAX_CONFIG_UPLOAD_BYTES but under these limits still reaches the serializer,
    which names the field in a 400.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Content-Length is not a number."}, status=400)
        limit = settings.MAX_REQUEST_BODY_BYTES
        if length > limit:
            return JsonResponse({"detail": f"The request body of {length} bytes exceeds the limit of {limit} bytes."}, status=413)
        data_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # None: Django's check is off
        multipart = request.META.get("CONTENT_TYPE", "").lower().startswith("multipart/")
        if data_limit is not None and not multipart and length > data_limit:
            detail = (f"The request body of {length} bytes exceeds the limit of {data_limit} bytes for a body that is not "
                      "multipart/form-data; send files as multipart/form-data uploads.")  # fmt: skip
            return JsonResponse({"detail": detail}, status=413)
        return self.get_response(request)


class ControlCharacterMiddleware:
    """A control character (U+0000-U+001F, U+007F-U+009F) in the path is a 404 and one in a query
    parameter's name or value a 400 naming the parameter, before a view passes it to a query
    (PostgreSQL refuses NUL in any string: a 500 otherwise). No slug, id or filter value holds one.
    A NUL in a web form's field is a 400 too; the API's serializers name such fields themselves."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        character = CONTROL_CHARACTER.search(request.path)
        if character:
            return _error(request, 404, {"detail": f"Not found: the path contains the control character {_code(character)}."})
        for name, values in request.GET.lists():
            character = CONTROL_CHARACTER.search(name) or next(filter(None, map(CONTROL_CHARACTER.search, values)), None)
            if character:
                return _error(request, 400, {name: [f"Contains the control character {_code(character)}; no parameter takes one."]})
        if request.method == "POST" and not _is_api(request) and _form_has_nul(request):
            return _error(request, 400, {"detail": "A form field contains a NUL character (U+0000), which cannot be stored."})
        return self.get_response(request)


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def _code(match: re.Match) -> str:
    return f"U+{ord(match.group()):04X}"


def _form_has_nul(request) -> bool:
    content_type = request.META.get("CONTENT_TYPE", "").lower()
    if not content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        return False
    return any("\x00" in name or any("\x00" in value for value in values) for name, values in request.POST.lists())


def _error(request, status: int, body: dict) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(body, status=status)
    text = " ".join(f"{key}: {value[0]}" if isinstance(value, list) else value for key, value in body.items())
    title = "Not found" if status == 404 else "Bad request"
    return HttpResponse(f"<!doctype html><title>{title}</title><h1>{status}</h1><p>{html.escape(text)}</p>", status=status)


class DatabaseUnavailableMiddleware:
    """A database connection lost mid-request (a restart, a failover, a killed backend) is a
    503 with a message and Retry-After, not a bare 500. Every write runs in a transaction, so
    nothing of the failed request is stored; Django drops the broken connection when the
    request ends (CONN_HEALTH_CHECKS), and the next request opens a fresh one."""

    RETRY_AFTER_S = 5

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        logger.error("database unavailable during %s %s: %s", request.method, request.path, exception)
        message = "The database is unavailable right now; nothing of this request was saved. Retry in a few seconds."
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": message}, status=503)
        else:
            response = HttpResponse(f"<!doctype html><title>Service unavailable</title><h1>503</h1><p>{message}</p>", status=503)
        response["Retry-After"] = str(self.RETRY_AFTER_S)
        return response
