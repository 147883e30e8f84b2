from __future__ import annotations

from django.contrib import admin

from jobs.models import ValidationRun, WorkerHeartbeat, WorkerQueues


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queue", "seen_at", "beats"]
    readonly_fields = ["hostname", "queue", "seen_at", "beats"]


@admin.register(WorkerQueues)
class WorkerQueuesAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queues", "seen_at"]
    readonly_fields = ["hostname", "queues", "seen_at"]


@admin.register(ValidationRun)
class ValidationRunAdmin(admin.ModelAdmin):
    list_display = ["id", "model_slug", "trial", "queue", "stand_in", "status", "progress_percent", "matched_chip_slug", "created_at", "finished_at"]
    list_filter = ["status", "trial", "queue", "matched_chip_slug"]
    search_fields = ["id", "model_slug", "device_name"]
    readonly_fields = [f.name for f in ValidationRun._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
