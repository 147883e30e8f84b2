from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.views import exception_handler


def api_exception_handler(exc, context):
    """DRF's handler, plus Django ValidationErrors (from model.clean in services) as 400s, and a
    429 that says which rate it is over (DRF sets its Retry-After header)."""
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail=detail)
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
