"""The OpenAPI schema class: documents the error responses every operation can give."""
from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, serializers
from rest_framework.permissions import SAFE_METHODS

from hwcatalog.permissions import PUBLIC_READS
from inputs.text import NO_CONTROL_CHARACTERS


class ErrorDetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


INVALID_INPUT = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="Invalid input: each offending field with a list of messages (an object for a nested input), "
    "or `detail` for a body that could not be parsed.",
)
UNAUTHENTICATED = OpenApiResponse(
    ErrorDetailSerializer,
    description="A token that is not valid (malformed, unknown, revoked or expired), or no credentials where they are needed.",
)
FORBIDDEN = OpenApiResponse(
    ErrorDetailSerializer,
    description="A write with a read-only token, a session of a user who is not staff, or a session write without its CSRF token; "
    "a catalog write without a catalog-scoped token or a staff session; a run or a plan changed by someone who neither "
    "created it nor is staff.",
)
NOT_FOUND = OpenApiResponse(ErrorDetailSerializer, description="No such object, or no such page of a list.")
THROTTLED = OpenApiResponse(
    ErrorDetailSerializer,
    description="Over a rate limit (per token, per anonymous IP address, or of plan searches); `detail` names the limit. "
    "Retry after the seconds in `Retry-After`.",
)
RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "required": True,
        "description": "Seconds to wait before the next request counts again.",
    }
}


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus what our permission and error handling really answer,
    so clients (and the schema fuzz test) can rely on the documented status codes."""

    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation and self.method == "GET":
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and not parameter.get("required"):
                    # "?kind=" is "?" : django-filter, DRF's ordering, search and page skip an empty value.
                    parameter["allowEmptyValue"] = True
        for parameter in (operation or {}).get("parameters", []):
            schema = parameter.get("schema", {})
            if parameter["in"] == "query" and schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema):
                # config.middleware refuses a control character in any query parameter (400).
                schema["pattern"] = NO_CONTROL_CHARACTERS
        return operation

    def get_auth(self):
        auths = super().get_auth()
        public_read = self.method in SAFE_METHODS and any(isinstance(p, PUBLIC_READS) for p in self.view.get_permissions())
        if public_read and {} not in auths:
            auths.append({})
        return auths

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in self._error_responses().items():
            responses.setdefault(code, self._get_response_for_code(response, code, direction=direction))
        return responses

    def _get_response_headers_for_code(self, status_code, direction="response"):
        headers = super()._get_response_headers_for_code(status_code, direction)
        return {**RETRY_AFTER, **headers} if str(status_code) == "429" else headers

    def _error_responses(self) -> dict[str, OpenApiResponse]:
        write = self.method not in SAFE_METHODS
        # A paginated list refuses a bad page_size (400) and answers 404 for a page past the end.
        list_view = self.method == "GET" and isinstance(self.view, mixins.ListModelMixin) and getattr(self.view, "action", "list") == "list"
        errors = {"401": UNAUTHENTICATED, "429": THROTTLED}  # any request: a wrong token; a rate limit
        if (write and self.method != "DELETE") or list_view:
            errors["400"] = INVALID_INPUT
        # A read that a filter can refuse by role (the plans list's `owner`, staff only) says so with `read_forbidden`.
        if write or getattr(self.view, "read_forbidden", False):
            errors["403"] = FORBIDDEN
        if "{" in self.path or list_view:
            errors["404"] = NOT_FOUND
        return errors
