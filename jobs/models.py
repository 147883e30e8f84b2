from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """Last time each worker proved it can take a task off the broker and write to the store."""

    hostname = models.CharField(max_length=255, unique=True)
    queue = models.CharField(max_length=40, default="cpu")
    seen_at = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-seen_at"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.seen_at:%Y-%m-%d %H:%M:%S}"
