from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.views import exception_handler


def api_exception_handler(exc, context):
    """DRF's handler, plus Django ValidationErrors (from model.clean in services) as 400s, a
    service's PermissionDenied as a 403 that keeps its message (DRF's own drops it), and a
    429 that says which rate it is over (DRF sets its Retry-After header)."""
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail=detail)
    elif isinstance(exc, DjangoPermissionDenied) and str(exc):
        exc = exceptions.PermissionDenied(detail=str(exc))
    response = exception_handler(exc, context)
    if isinstance(exc, exceptions.Throttled) and response is not None:
        response.data = {"detail": _throttled_message(exc, context)}
    return response


def _throttled_message(exc: exceptions.Throttled, context) -> str:
    limit = getattr(context.get("request"), "throttle_limit", None)  # set by accounts.throttling
    over = f"Too many requests: the limit is {limit}." if limit else "Too many requests."
    if exc.wait is None:
        return f"{over} Try again later."
    return f"{over} Try again in {exc.wait} second{'s' if exc.wait != 1 else ''} (Retry-After)."
