from __future__ import annotations

from django.contrib import admin

from jobs.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queue", "seen_at", "beats"]
    readonly_fields = ["hostname", "queue", "seen_at", "beats"]
