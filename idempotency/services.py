"""Claim an Idempotency-Key before a create runs, and keep its answer after.

The row is inserted (committed) before the view runs, under a unique constraint: of two
concurrent first tries only one inserts, the other finds the row "running" and gets a 409. A
retry of a finished request finds the stored answer. Only a success (2xx) is kept: after an
error nothing was created, so the key is released and may be sent again, with a corrected body.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from idempotency.models import IdempotencyKey
from idempotency.sealing import key_digest, seal

REPLAYED_HEADER = "Idempotent-Replayed"
KEPT_HEADERS = ("Location",)


@dataclass(frozen=True)
class Claimed:
    row: IdempotencyKey
    key: str


def request_fingerprint(request: HttpRequest) -> str:
    """What "the same request" means: method, path, query and body. A multipart body counts by
    its fields and files, not its bytes: a client's retry picks a new boundary."""
    digest = hashlib.sha256()
    for part in (request.method, request.path, request.META.get("QUERY_STRING", ""), request.content_type):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    if request.content_type == "multipart/form-data":
        for name, values in sorted(request.POST.lists()):
            digest.update(repr((name, values)).encode() + b"\0")
        for name, files in sorted(request.FILES.lists()):
            for upload in files:
                digest.update(repr((name, upload.name)).encode() + b"\0")
                for chunk in upload.chunks():
                    digest.update(chunk)
                upload.seek(0)  # the view reads it next
    else:
        digest.update(request.body)
    return digest.hexdigest()


def idempotency_key_claim(*, user, path: str, key: str, fingerprint: str) -> Claimed | HttpResponse:
    """The claim to run this request, or the answer to give instead: the first one's (a retry),
    409 (the first is still running) or 422 (the key was used with another request)."""
    digest = key_digest(key)
    for _ in range(3):
        now = timezone.now()
        try:
            with transaction.atomic():
                row = IdempotencyKey.objects.select_for_update().filter(user=user, path=path, key_digest=digest).first()
                if row is None:
                    # This user's expired keys go as a new one comes: the table holds a day's keys per user.
                    IdempotencyKey.objects.filter(user=user, expires_at__lte=now).delete()
                    row = IdempotencyKey(user=user, path=path, key_digest=digest)
                    _restart(row, fingerprint, now)
                    row.save(force_insert=True)
                    return Claimed(row, key)
                abandoned = row.status_code is None and row.created_at <= now - timedelta(seconds=settings.IDEMPOTENCY_LOCK_S)
                if row.expires_at <= now or abandoned:
                    _restart(row, fingerprint, now)
                    row.save()
                    return Claimed(row, key)
                return _answer(row, key, fingerprint)
        except IntegrityError:
            continue  # a concurrent first try inserted the row between our read and our insert: read it
    return _in_progress()


def idempotency_key_settle(claim: Claimed, response: HttpResponse) -> None:
    """Keep a success for the retries; release the key after anything else."""
    if not 200 <= response.status_code < 300 or response.streaming:
        IdempotencyKey.objects.filter(pk=claim.row.pk).delete()
        return
    row = claim.row
    row.status_code = response.status_code
    row.content_type = response.get("Content-Type", "")
    row.headers = {name: response[name] for name in KEPT_HEADERS if name in response}
    row.response_body = seal(response.content, key=claim.key, nonce=bytes(row.nonce))
    row.save(update_fields=["status_code", "content_type", "headers", "response_body"])


def idempotency_key_release(claim: Claimed) -> None:
    IdempotencyKey.objects.filter(pk=claim.row.pk).delete()


def _restart(row: IdempotencyKey, fingerprint: str, now) -> None:
    row.fingerprint = fingerprint
    row.nonce = os.urandom(16)
    row.status_code = None
    row.content_type = ""
    row.headers = {}
    row.response_body = b""
    row.created_at = now
    row.expires_at = now + timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_S)


def _answer(row: IdempotencyKey, key: str, fingerprint: str) -> HttpResponse:
    if row.fingerprint != fingerprint:
        return JsonResponse(
            {
                "detail": f"This Idempotency-Key was first used on {row.created_at:%Y-%m-%d %H:%M:%S} UTC with a different "
                "request (method, path, query or body); a key stands for one request. Send the same request to get its "
                "answer, or use a new key for a new request."
            },
            status=422,
        )
    if row.status_code is None:
        return _in_progress()
    response = HttpResponse(seal(bytes(row.response_body), key=key, nonce=bytes(row.nonce)), status=row.status_code, content_type=row.content_type)
    for name, value in row.headers.items():
        response[name] = value
    response[REPLAYED_HEADER] = "true"
    return response


def _in_progress() -> HttpResponse:
    response = JsonResponse(
        {"detail": "A request with this Idempotency-Key is still being processed; retry in a moment to get its answer."},
        status=409,
    )
    response["Retry-After"] = "1"
    return response
