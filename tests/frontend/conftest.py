from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from planner import services
from planner.serializers import PlanInputSerializer

CHAT = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 64, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
}
CHAT_FORM = {
    "model": "llama-3.1-70b", "prompt_tokens": "1000", "output_tokens": "300", "load_kind": "concurrency", "concurrency": "64",
    "ttft_slo_s": "0.5", "tpot_slo_s": "0.05", "max_chips": "64", "ownership": "any", "decoding_method": "ar",
}  # fmt: skip


DANA_PASSWORD = "dana-password-1234"


def make_plan(data: dict):
    serializer = PlanInputSerializer(data=data)
    serializer.is_valid(raise_exception=True)
    return services.plan_create(data=serializer.validated_data, raw_inputs=serializer.data)


@pytest.fixture
def chat_plan(catalog):
    """Alice's chat plan for Llama 3.1 70B: many feasible configurations."""
    return make_plan(CHAT)


@pytest.fixture
def impossible_plan(catalog):
    """A plan nothing can meet: a 1 ms first token for a 70B model on CPUs only."""
    return make_plan({**CHAT, "workload": {**CHAT["workload"], "ttft_slo_s": 0.001}, "hardware": {"kinds": ["cpu"]}})


# The web UI's people. Django's test Client, not DRF's APIClient: the forms post urlencoded/multipart.
@pytest.fixture
def dana(db):
    """Dana has a web UI login (any active account): she plans and validates. She is not staff."""
    return get_user_model().objects.create_user("dana", password=DANA_PASSWORD)


@pytest.fixture
def ui_client(dana) -> Client:
    """Dana, signed in to the web UI."""
    client = Client()
    client.force_login(dana)
    return client


@pytest.fixture
def staff_ui_client(db) -> Client:
    """Stella is staff, signed in to the web UI: she can also import a model into the catalog."""
    stella = get_user_model().objects.create_user("stella", password="stella-password-1234", is_staff=True)
    client = Client()
    client.force_login(stella)
    return client


@pytest.fixture
def anonymous_ui_client() -> Client:
    """A visitor who is not signed in: browses everything, writes nothing."""
    return Client()
