from __future__ import annotations

import pytest

from planner.serializers import PlanInputSerializer
from planner.services import plan_create


@pytest.fixture
def small_plan(catalog):
    """A stored plan for a small model (the trials scale it to 2 layers on the CPU)."""
    serializer = PlanInputSerializer(data={
        "model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
        "hardware": {"kinds": ["gpu"], "max_chips": 8},
    })  # fmt: skip
    serializer.is_valid(raise_exception=True)
    return plan_create(data=serializer.validated_data, raw_inputs=serializer.data)
