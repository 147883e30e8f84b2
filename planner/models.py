from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Plan(models.Model):
    """A stored search: its inputs, the catalog values it used and its ranked results.

    Immutable once stored: a changed catalog makes new plans, it never rewrites old ones
    (the catalog snapshot is what lets a plan be reproduced after prices change). A search too
    big to run inline is stored queued and run by a worker (planner/tasks.py): until it is done
    or failed, the worker fills in its run fields (RUN_FIELDS), and only then."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=120, blank=True, default="", help_text="The creator's label for the plan; empty: none.")
    model_slug = models.CharField(max_length=80)
    inputs = models.JSONField(help_text="The request as validated: model, workload, filters, decoding options.")
    catalog_snapshot = models.JSONField(help_text="Chip, model and offering values the search used.")
    calibration_used = models.JSONField(default=dict, help_text="Efficiency sources per chip.")
    results = models.JSONField(help_text="Ranked feasible configurations, Pareto front, infeasible with reasons.")
    candidate_count = models.PositiveIntegerField()
    feasible_count = models.PositiveIntegerField()
    best_usd_per_million_output_tokens = models.FloatField(null=True, blank=True)
    pinned = models.BooleanField(default=False, help_text="Re-validated by the nightly schedule.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DONE,
                              help_text="queued and running: a worker is searching; done: results stored; failed: see error.")
    progress = models.FloatField(default=1.0, help_text="Share of the candidates evaluated, 0 to 1.")
    error = models.TextField(blank=True, default="", help_text="Why the search failed, in words.")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Workers that took the search (a lost worker's is taken again).")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress written by the worker.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"plan {self.id} for {self.model_slug}"

    # Only these may change once a plan is stored; everything else is its record. Its tags (PlanTag) are
    # labels beside the record too, changed by its creator or staff (planner/plan_changes.py).
    MUTABLE_FIELDS = frozenset({"pinned", "name"})
    # ...and these too while the plan is queued or running: the worker writes its result.
    RUN_FIELDS = frozenset({
        "status", "progress", "error", "attempts", "started_at", "heartbeat_at", "finished_at", "results", "catalog_snapshot",
        "calibration_used", "candidate_count", "feasible_count", "best_usd_per_million_output_tokens",
    })  # fmt: skip
    PENDING = (Status.QUEUED, Status.RUNNING)

    @property
    def pending(self) -> bool:
        return self.status in self.PENDING

    def save(self, *args, **kwargs):
        check_immutable_save(self, kwargs.get("update_fields"))
        super().save(*args, **kwargs)


class PlanImmutable(Exception):
    pass


class PlanTag(models.Model):
    """One label on a plan ("q3-procurement", "chat"): lower case, so a filter finds it however it was typed
    (planner/serializers.py TAG_PATTERN). A plan has at most PLAN_TAGS_MAX of them."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=40, db_index=True)

    class Meta:
        ordering = ["plan", "id"]
        constraints = [models.UniqueConstraint(fields=["plan", "name"], name="plan_tag_unique_per_plan")]

    def __str__(self) -> str:
        return self.name


PLAN_TAGS_MAX = 10


def check_immutable_save(row: models.Model, update_fields) -> None:
    """A stored plan or fleet changes only in its MUTABLE_FIELDS, and in its RUN_FIELDS while it is queued
    or running (the worker writing its result): PlanImmutable otherwise."""
    if row._state.adding:
        return
    what = f"{row._meta.verbose_name} {row.pk}"
    if update_fields is None:
        raise PlanImmutable(f"{what} is immutable once stored; save with update_fields")
    fields = set(update_fields)
    if not fields <= row.MUTABLE_FIELDS:
        stored = type(row).objects.filter(pk=row.pk).values_list("status", flat=True).first()
        if stored not in row.PENDING or not fields <= row.MUTABLE_FIELDS | row.RUN_FIELDS:
            raise PlanImmutable(f"{what} is immutable once stored; only {sorted(row.MUTABLE_FIELDS)} may change "
                                f"(and its run fields while it is queued or running)")  # fmt: skip


class FleetPlan(models.Model):
    """A stored fleet plan (planner/engine/fleet/): a traffic mix, the hardware allowed, the limits and the
    horizon as validated, and the cheapest mix of configurations with its cost, limit use and the best
    single-chip fleet beside it. Immutable once stored. A small one is planned inside the request; a bigger
    one is stored queued and planned by a worker (planner/tasks.py run_fleet), which fills in the run fields."""

    Status = Plan.Status

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=120, blank=True, default="")
    model_slug = models.CharField(max_length=80)
    inputs = models.JSONField(help_text="The request as validated: model, classes, hardware, limits, horizon.")
    catalog_snapshot = models.JSONField(default=dict, help_text="Chip, model and offering values the fleet used.")
    results = models.JSONField(default=dict, blank=True, help_text="The allocation, costs, limit use, single-chip comparison (docs/fleet.md).")
    candidate_count = models.PositiveIntegerField(default=0, help_text="Configurations searched over all classes.")
    usd_per_month = models.FloatField(null=True, blank=True, help_text="The fleet's cost in its first month.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=8, choices=Plan.Status.choices, default=Plan.Status.DONE,
                              help_text="queued and running: a worker is planning; done: results stored; failed: see error.")  # fmt: skip
    progress = models.FloatField(default=1.0, help_text="Share of the classes searched, 0 to 1.")
    error = models.TextField(blank=True, default="", help_text="Why the fleet plan failed, in words.")
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "fleet plan"

    def __str__(self) -> str:
        return f"fleet {self.id} for {self.model_slug}"

    MUTABLE_FIELDS: frozenset[str] = frozenset()
    RUN_FIELDS = frozenset({
        "status", "progress", "error", "attempts", "started_at", "heartbeat_at", "finished_at", "results", "catalog_snapshot",
        "candidate_count", "usd_per_month",
    })  # fmt: skip
    PENDING = Plan.PENDING

    @property
    def pending(self) -> bool:
        return self.status in self.PENDING

    def save(self, *args, **kwargs):
        check_immutable_save(self, kwargs.get("update_fields"))
        super().save(*args, **kwargs)


class Calibration(models.Model):
    """Efficiency factors fitted from measured runs for one chip, serving engine and weight dtype.

    Versioned per (chip, engine, dtype): each fit is a new row; the planner uses the newest active one.
    An empty serving_engine is the planner's own trials (the workers' PyTorch runs): it speaks for the
    chip when no engine is named. A named engine's calibration speaks for that chip under that engine,
    over the engine's fitted profile (planner/engine_profiles.py)."""

    chip_slug = models.CharField(max_length=80)
    serving_engine = models.CharField(max_length=80, blank=True, default="",
                                      help_text="The serving engine the runs were measured under; empty: the planner's own trials.")
    weight_dtype = models.CharField(max_length=8, help_text='A dtype, or "*" for all dtypes of the chip.')
    version = models.PositiveIntegerField()
    compute_fraction = models.FloatField()
    bandwidth_fraction = models.FloatField()
    step_overhead_s = models.FloatField()
    link_bandwidth_fraction = models.FloatField()
    # Null in rows fitted before these were stored: the chip's spec default applies (catalog_specs.calibrations_for).
    collective_overhead_s = models.FloatField(null=True, blank=True)
    prefill_layer_overhead_s = models.FloatField(null=True, blank=True)
    request_overhead_s = models.FloatField(null=True, blank=True)
    expert_efficiency = models.FloatField(null=True, blank=True)
    request_overhead_per_expert_layer_s = models.FloatField(null=True, blank=True)
    run_count = models.PositiveIntegerField()
    fitted_from = models.JSONField(default=list, help_text="Ids of the runs the fit used.")
    residual_rms = models.FloatField(null=True, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["chip_slug", "serving_engine", "weight_dtype", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["chip_slug", "serving_engine", "weight_dtype", "version"], name="calibration_engine_version_unique"),
            models.CheckConstraint(
                condition=models.Q(compute_fraction__gt=0, compute_fraction__lte=1, bandwidth_fraction__gt=0, bandwidth_fraction__lte=1),
                name="calibration_fractions_in_range",
            ),
        ]

    def __str__(self) -> str:
        engine = f"@{self.serving_engine}" if self.serving_engine else ""
        return f"{self.chip_slug}{engine}/{self.weight_dtype} v{self.version}"

    @property
    def label(self) -> str:
        engine = f", {self.serving_engine}" if self.serving_engine else ""
        return f"calibration v{self.version} ({self.run_count} runs{engine})"


class SimulationRun(models.Model):
    """One serving simulation (planner/engine/simulation/): a configuration under a workload, its
    inputs and its results (latency percentiles, goodput, queue and KV over time).

    Made by POST /api/v1/simulations/, or by a plan's simulation stage, one per candidate (`plan`,
    `candidate_rank`: its place in the plan's analytical ranking). A small one runs inside the request;
    a bigger one is stored queued and run by a worker (planner/tasks.py run_simulation), which fills in
    the run fields, as for a Plan."""

    Status = Plan.Status

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    model_slug = models.CharField(max_length=80)
    chip_slug = models.CharField(max_length=80)
    inputs = models.JSONField(help_text="The request as validated: configuration, workload, SLOs, scheduler (a trace's rows are in `trace`).")
    trace = models.JSONField(default=dict, blank=True, help_text="An uploaded trace's columns (arrival_s, prompt_tokens, output_tokens, lines).")
    request_count = models.PositiveIntegerField(help_text="Requests simulated.")
    results = models.JSONField(default=dict, blank=True)
    plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.CASCADE, related_name="simulations")
    candidate_rank = models.PositiveIntegerField(null=True, blank=True, help_text="Of a plan's stage: the candidate's analytical rank, from 1.")
    # A simulation someone started from a plan's ranked row (the plan page's Simulate action, or `from_plan` in the
    # API): its own run, not one of the plan's stage, linked both ways; a deleted plan leaves the run standing.
    from_plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.SET_NULL, related_name="row_simulations",
                                  help_text="The plan whose ranked row this simulation checks (started from that row).")  # fmt: skip
    from_rank = models.PositiveIntegerField(null=True, blank=True, help_text="That row's rank in the plan, from 1.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=8, choices=Plan.Status.choices, default=Plan.Status.DONE,
                              help_text="queued and running: a worker is simulating; done: results stored; failed: see error.")  # fmt: skip
    progress = models.FloatField(default=1.0, help_text="0 until the run is done, then 1 (a simulation is one step).")
    error = models.TextField(blank=True, default="", help_text="Why the simulation failed, in words.")
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "candidate_rank"], name="simulation_run_plan_candidate_unique"),
        ]

    def __str__(self) -> str:
        return f"simulation {self.id} of {self.model_slug} on {self.chip_slug}"

    @property
    def pending(self) -> bool:
        return self.status in Plan.PENDING
