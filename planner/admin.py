from __future__ import annotations

from django.contrib import admin

from planner.calibrations import calibration_rollback
from planner.models import Calibration, FleetPlan, Plan, PlanTag, SimulationRun


class PlanTagInline(admin.TabularInline):
    model = PlanTag
    extra = 0


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "model_slug", "candidate_count", "feasible_count", "best_usd_per_million_output_tokens", "pinned", "created_at"]
    list_filter = ["model_slug", "pinned"]
    search_fields = ["id", "name", "model_slug", "tags__name"]
    inlines = [PlanTagInline]
    # Plans are immutable once stored; only the pinned flag, the name and the tags may change.
    readonly_fields = [f.name for f in Plan._meta.fields if f.name not in Plan.MUTABLE_FIELDS]

    def has_add_permission(self, request) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        obj.save(update_fields=sorted(Plan.MUTABLE_FIELDS))


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ["chip_slug", "serving_engine", "weight_dtype", "version", "compute_fraction", "bandwidth_fraction", "step_overhead_s", "run_count", "active", "created_at"]
    list_filter = ["chip_slug", "serving_engine", "weight_dtype", "active"]
    search_fields = ["chip_slug"]
    readonly_fields = [f.name for f in Calibration._meta.fields]
    actions = ["roll_back_to_this_version"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Roll back to the selected version (newer versions are deactivated)")
    def roll_back_to_this_version(self, request, queryset) -> None:
        for row in queryset:
            calibration_rollback(chip_slug=row.chip_slug, weight_dtype=row.weight_dtype, to_version=row.version, serving_engine=row.serving_engine)
            self.message_user(request, f"{row} is now the one in use.")


class _ReadOnlyRunAdmin(admin.ModelAdmin):
    """Stored runs are immutable: the admin shows them and may delete them, nothing else."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(FleetPlan)
class FleetPlanAdmin(_ReadOnlyRunAdmin):
    list_display = ["id", "name", "model_slug", "status", "candidate_count", "usd_per_month", "created_by", "created_at"]
    list_filter = ["status", "model_slug"]
    search_fields = ["id", "name", "model_slug"]


@admin.register(SimulationRun)
class SimulationRunAdmin(_ReadOnlyRunAdmin):
    list_display = ["id", "model_slug", "chip_slug", "request_count", "status", "plan", "candidate_rank", "created_at"]
    list_filter = ["status", "model_slug", "chip_slug"]
    search_fields = ["id", "model_slug", "chip_slug"]
