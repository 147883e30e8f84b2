from __future__ import annotations

import uuid

from django.conf import settings
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


class WorkerQueues(models.Model):
    """The queues each running worker consumes, written by the worker itself every 10 s (jobs/worker_steps.py):
    validations are routed by them (jobs/routing.py). Apart from WorkerHeartbeat, which proves more (a task
    taken off the broker and run)."""

    hostname = models.CharField(max_length=255, unique=True)
    queues = models.CharField(max_length=200, blank=True, default="", help_text="Comma-separated queue names.")
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-seen_at"]
        verbose_name_plural = "worker queues"

    def __str__(self) -> str:
        return f"{self.hostname}: {self.queues} @ {self.seen_at:%Y-%m-%d %H:%M:%S}"


class ValidationRun(models.Model):
    """A real trial of one planned configuration on a worker's own hardware, with the
    prediction for that hardware beside the measurement."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Trial(models.TextChoices):
        DECODE = "decode"
        SPECULATIVE = "speculative"
        BLOCK_DIFFUSION = "block_diffusion"

    class Queue(models.TextChoices):
        CPU = "cpu", "CPU"
        GPU = "gpu", "NVIDIA GPU (CUDA)"
        ROCM = "rocm", "AMD GPU (ROCm)"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    plan = models.ForeignKey("planner.Plan", null=True, blank=True, on_delete=models.SET_NULL, related_name="validations")
    rank = models.PositiveIntegerField(null=True, blank=True, help_text="1-based rank of the configuration in the plan.")
    configuration = models.JSONField(help_text="The planned configuration (a ranked row of the plan).")
    model_slug = models.CharField(max_length=80)
    trial = models.CharField(max_length=16, choices=Trial.choices)
    params = models.JSONField(default=dict, help_text="Trial parameters: batch, prompt_tokens, decode_steps, dtype, ...")
    queue = models.CharField(max_length=8, choices=Queue.choices, default=Queue.CPU)
    stand_in = models.BooleanField(
        default=False, help_text="The queue's device is not the planned chip's kind: it stands in, chosen explicitly, and predicts for itself."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_percent = models.FloatField(default=0.0)
    progress_message = models.CharField(max_length=300, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    celery_task_id = models.CharField(max_length=64, blank=True, default="")
    sent_at = models.DateTimeField(
        null=True, blank=True, help_text="When the task message last reached the broker; empty while the broker was unreachable."
    )
    send_count = models.PositiveIntegerField(default=0, help_text="Task messages sent for this run (re-sends after a lost message count).")
    worker_hostname = models.CharField(max_length=255, blank=True, default="")
    worker_pid = models.PositiveIntegerField(
        null=True, blank=True, help_text="The worker process supervising the trial: a re-delivered message on the same host takes over once it is gone."
    )
    device_name = models.CharField(max_length=255, blank=True, default="")
    matched_chip_slug = models.CharField(max_length=80, blank=True, default="")
    predicted = models.JSONField(default=dict, blank=True)
    measured = models.JSONField(default=dict, blank=True)
    error_percent = models.JSONField(default=dict, blank=True, help_text="|predicted - measured| / measured per metric.")
    environment = models.JSONField(default=dict, blank=True)
    log_tail = models.TextField(blank=True, default="")
    failure_reason = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(progress_percent__gte=0, progress_percent__lte=100), name="run_progress_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.trial} of {self.model_slug} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED


class ScheduleClaim(models.Model):
    """One row per (scheduled job, period): the first beat to claim a period runs it, so two
    beat processes started by mistake still run a scheduled validation once per period."""

    name = models.CharField(max_length=120)
    period = models.CharField(max_length=40)
    claimed_at = models.DateTimeField(auto_now_add=True)
    claimed_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "period"], name="schedule_claim_once_per_period")]

    def __str__(self) -> str:
        return f"{self.name} @ {self.period}"


class ScheduledTaskRun(models.Model):
    """When each scheduled task last ran, written by the task itself: a beat that died (or no
    worker to run what it sends) shows as a stale row, which the health check and the UI report."""

    RECOVERY_SWEEP = "recover validation runs"

    name = models.CharField(max_length=120, unique=True)
    last_run_at = models.DateTimeField()
    runs = models.PositiveBigIntegerField(default=0)
    ran_on = models.CharField(max_length=255, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_run_at:%Y-%m-%d %H:%M:%S}"
