from __future__ import annotations

from django.contrib import admin

from planner.models import Calibration, Plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["id", "model_slug", "candidate_count", "feasible_count", "best_usd_per_million_output_tokens", "pinned", "created_at"]
    list_filter = ["model_slug", "pinned"]
    search_fields = ["id", "model_slug"]
    # Plans are immutable once stored; only the pinned flag may change.
    readonly_fields = [f.name for f in Plan._meta.fields if f.name != "pinned"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ["chip_slug", "weight_dtype", "version", "compute_fraction", "bandwidth_fraction", "step_overhead_s", "run_count", "active", "created_at"]
    list_filter = ["chip_slug", "weight_dtype", "active"]
    search_fields = ["chip_slug"]
