from __future__ import annotations

from rest_framework import serializers

from jobs.models import ValidationRun


class ValidationRunInputSerializer(serializers.Serializer):
    rank = serializers.IntegerField(min_value=1, max_value=100_000, default=1)
    trial = serializers.ChoiceField(choices=ValidationRun.Trial.choices, default=ValidationRun.Trial.DECODE)
    queue = serializers.ChoiceField(choices=ValidationRun.Queue.choices, default=ValidationRun.Queue.CPU)
    params = serializers.DictField(required=False)


class ValidationRunSerializer(serializers.ModelSerializer):
    plan = serializers.UUIDField(source="plan_id", read_only=True, allow_null=True)

    class Meta:
        model = ValidationRun
        fields = [
            "id", "plan", "rank", "model_slug", "trial", "queue", "params", "status", "progress_percent", "progress_message",
            "attempts", "worker_hostname", "device_name", "matched_chip_slug", "predicted", "measured", "error_percent",
            "environment", "log_tail", "failure_reason", "configuration", "created_at", "started_at", "heartbeat_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields
