from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotencyKey(models.Model):
    """One `Idempotency-Key` a user sent to one create endpoint, and the first answer to it.

    Neither the key nor the answer is kept in the clear: `key_digest` is an HMAC of the key
    (SECRET_KEY), and `response_body` is sealed with a keystream derived from the key itself
    (idempotency.sealing), so the table alone does not give away the API token a token POST
    answered with. A row whose `status_code` is null is a request still running (or one that
    died: it is taken over after IDEMPOTENCY_LOCK_S)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=255)
    key_digest = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the request (method, path, query, body).")
    nonce = models.BinaryField(max_length=16)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=255, blank=True)
    headers = models.JSONField(default=dict, blank=True)
    response_body = models.BinaryField(default=b"")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            # What makes two concurrent first tries safe: only one of them can insert the row.
            models.UniqueConstraint(fields=["user", "path", "key_digest"], name="idempotency_key_unique_per_user_path"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.path} {self.status_code or 'running'}"
