"""API tokens: only a SHA-256 hash of each key is stored; the key is shown once, at creation.

Scopes, each including the one before: `read` reads; `write` also stores plans, queues validation
runs and manages its owner's tokens, runs and plans; `catalog` also writes the shared catalog
(chips, models, offerings, imports). The catalog is everyone's input, so its scope is separate."""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

KEY_PREFIX = "hwp"  # a key reads hwp_<prefix>_<secret>


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read-only"
        WRITE = "write", "read-write"
        CATALOG = "catalog", "read-write, catalog too"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for: a tool, a machine, a person.")
    scope = models.CharField(max_length=7, choices=Scope.choices)
    prefix = models.CharField(max_length=12, unique=True, help_text="The public part of the key (hwp_<prefix>_...), to find and name it.")
    key_hash = models.CharField(max_length=64, help_text="SHA-256 (hex) of the key's secret part; the key itself is never stored.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="To the minute: updated at most once a minute.")
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(scope__in=["read", "write", "catalog"]), name="accounts_apitoken_scope_valid"),
        ]

    def __str__(self) -> str:
        return f"{KEY_PREFIX}_{self.prefix} ({self.name}, {self.scope})"

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def is_active(self, now: datetime | None = None) -> bool:
        return self.revoked_at is None and not self.is_expired(now)

    @property
    def can_write(self) -> bool:
        return self.scope in (self.Scope.WRITE, self.Scope.CATALOG)

    @property
    def can_write_catalog(self) -> bool:
        return self.scope == self.Scope.CATALOG
