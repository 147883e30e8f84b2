from __future__ import annotations

from rest_framework import serializers

from inputs.serializers import StrictSerializer
from jobs.models import ValidationRun


class ValidationRunInputSerializer(StrictSerializer):
    rank = serializers.IntegerField(min_value=1, max_value=100_000, default=1)
    trial = serializers.ChoiceField(choices=ValidationRun.Trial.choices, default=ValidationRun.Trial.DECODE)
    queue = serializers.ChoiceField(
        choices=ValidationRun.Queue.choices, required=False,
        help_text="The worker queue to run on. Left out: the queue of the row's chip family when a worker serves it now, "
                  "else a 400 naming the live queues. A queue of another family runs there as a stand-in (`stand_in` true).",
    )  # fmt: skip
    params = serializers.DictField(required=False)


class ValidationListFilterSerializer(serializers.Serializer):
    """Query parameters of the validation list: a misspelt status is a 400, not an empty list."""

    # Blank is "any", as for the catalog's filters (?status=).
    status = serializers.ChoiceField(choices=ValidationRun.Status.choices, required=False, allow_blank=True)
    trial = serializers.ChoiceField(choices=ValidationRun.Trial.choices, required=False, allow_blank=True)
    plan = serializers.CharField(required=False, allow_blank=True, help_text="A plan id; one that matches no plan lists nothing.")


class ValidationRunSerializer(serializers.ModelSerializer):
    plan = serializers.UUIDField(source="plan_id", read_only=True, allow_null=True)

    class Meta:
        model = ValidationRun
        fields = [
            "id", "plan", "rank", "model_slug", "trial", "queue", "stand_in", "params", "status", "progress_percent", "progress_message",
            "attempts", "worker_hostname", "device_name", "matched_chip_slug", "predicted", "measured", "error_percent",
            "environment", "log_tail", "failure_reason", "configuration", "created_at", "started_at", "heartbeat_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields
