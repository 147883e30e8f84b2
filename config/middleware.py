from __future__ import annotations

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

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
