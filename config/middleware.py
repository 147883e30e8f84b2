from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse


class RequestBodyLimitMiddleware:
    """Refuse a request whose declared body exceeds MAX_REQUEST_BODY_BYTES with 413, before
    anything reads it. (A config.json over MAX_CONFIG_UPLOAD_BYTES but under this limit
    still reaches the serializer, which names the field in a 400.)"""

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
        return self.get_response(request)
