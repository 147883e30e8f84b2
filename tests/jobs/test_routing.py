"""A validation goes to a worker of the row's own kind of device, or to a stand-in the user names (issue 14, item 1)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from config.celery import app
from hwcatalog.models import Chip
from jobs import routing
from jobs.models import ValidationRun, WorkerQueues
from jobs.services import validation_run_create, worker_queues_forget, worker_queues_record
from jobs.worker_steps import QueueHeartbeat, consumed_queues, servable

pytestmark = pytest.mark.django_db


def _worker(hostname: str, queues: str, *, age_s: float = 0.0) -> None:
    seen = timezone.now() - timedelta(seconds=age_s)
    WorkerQueues.objects.create(hostname=hostname, queues=queues, seen_at=seen)


def _plan_row_on(plan, chip_slug: str) -> None:
    """Point the plan's first row at another chip (the routing reads only the row's chip)."""
    chip = Chip.objects.get(slug=chip_slug)
    plan.results["ranked"][0] = {**plan.results["ranked"][0], "chip_slug": chip.slug, "chip_name": chip.name}
    type(plan).objects.filter(pk=plan.pk).update(results=plan.results)  # a stored plan is immutable to save()


@pytest.mark.parametrize(("chip", "queue"), [
    ("nvidia-h100-sxm", "gpu"), ("amd-mi300x", "rocm"), ("amd-epyc-9654", "cpu"), ("intel-xeon-8480", "cpu"),
    ("google-tpu-v5e", None), ("groq-lpu", None), ("intel-gaudi3", None),
])  # fmt: skip
def test_each_chip_family_has_its_queue_or_none_where_pytorch_has_no_backend_here(catalog, chip, queue):
    found = Chip.objects.filter(slug__startswith=chip).first()
    assert found is not None, chip
    assert routing.queue_for_chip(found) == queue


def test_only_workers_whose_queue_record_is_fresh_count_as_live(catalog):
    _worker("cpu@a", "cpu")
    _worker("gpu@b", "gpu", age_s=routing.QUEUES_STALE_AFTER_S + 5)
    _worker("both@c", "cpu,rocm", age_s=5)
    assert routing.live_queues() == {"cpu", "rocm"}


def test_a_row_goes_to_its_own_kind_of_worker_when_one_is_up(small_plan):
    _plan_row_on(small_plan, "nvidia-h100-sxm")
    _worker("gpu@host", "gpu")
    run = validation_run_create(plan=small_plan, rank=1, trial="decode")
    assert run.queue == "gpu" and not run.stand_in and run.params["dtype"] == "bf16"  # the gpu queue's defaults


def test_with_no_worker_for_the_chip_the_request_is_refused_naming_the_live_stand_ins(small_plan):
    _plan_row_on(small_plan, "nvidia-h100-sxm")
    _worker("cpu@host", "cpu")
    with pytest.raises(Exception) as refused:
        validation_run_create(plan=small_plan, rank=1, trial="decode")
    message = refused.value.message_dict["queue"][0]
    assert "No worker serves NVIDIA H100" in message and "Choose a stand-in queue: cpu" in message
    assert not ValidationRun.objects.exists()


def test_a_chip_no_worker_can_run_says_so(small_plan):
    _plan_row_on(small_plan, "google-tpu-v5e")
    _worker("cpu@host", "cpu")
    with pytest.raises(Exception) as refused:
        validation_run_create(plan=small_plan, rank=1, trial="decode")
    assert "PyTorch has no trial backend for it here" in refused.value.message_dict["queue"][0]


def test_a_named_queue_of_another_family_runs_as_a_stand_in_and_its_own_family_does_not(small_plan):
    _plan_row_on(small_plan, "nvidia-h100-sxm")
    stand_in = validation_run_create(plan=small_plan, rank=1, trial="decode", queue="cpu")
    assert stand_in.queue == "cpu" and stand_in.stand_in
    native = validation_run_create(plan=small_plan, rank=1, trial="decode", queue="gpu")  # waits for its worker
    assert native.queue == "gpu" and not native.stand_in


def test_the_api_routes_and_reports_the_stand_in(small_plan, token_client):
    _plan_row_on(small_plan, "amd-mi300x")
    _worker("rocm@host", "rocm")
    routed = token_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {"rank": 1}, format="json")
    assert routed.status_code == 201 and routed.json()["queue"] == "rocm" and routed.json()["stand_in"] is False
    chosen = token_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {"rank": 1, "queue": "cpu"}, format="json")
    assert chosen.status_code == 201 and chosen.json()["stand_in"] is True


def test_the_form_offers_the_chips_own_queue_first_and_chooses_no_stand_in_for_the_user(catalog):
    _worker("cpu@host", "cpu")
    choices, routed = routing.queue_choices(chip_slug="nvidia-h100-sxm")
    assert [c.queue for c in choices] == ["gpu", "cpu", "rocm"]
    assert choices[0] == routing.QueueChoice(queue="gpu", device=routing.QUEUE_DEVICES["gpu"], live=False, native=True)
    assert choices[1].live and not choices[1].native
    assert routed.queue is None and "Choose a stand-in queue: cpu" in routed.reason
    _worker("gpu@host", "gpu")
    assert routing.queue_choices(chip_slug="nvidia-h100-sxm")[1].queue == "gpu"


def test_a_worker_records_the_queues_it_consumes_and_forgets_them_when_it_stops(db):
    worker_queues_record(hostname="gpu@host", queues=["cpu", "gpu"])
    worker_queues_record(hostname="gpu@host", queues=["gpu"])
    record = WorkerQueues.objects.get(hostname="gpu@host")
    assert record.queues == "gpu" and record.seen_at is not None
    assert routing.live_queues() == {"gpu"}
    worker_queues_forget(hostname="gpu@host")
    assert routing.live_queues() == set()


@pytest.mark.parametrize(("device", "served"), [
    ({"cuda": True, "hip": None}, ["cpu", "gpu"]),  # CUDA torch on an NVIDIA GPU
    ({"cuda": True, "hip": "6.2"}, ["cpu", "rocm"]),  # a ROCm build on an AMD GPU
    ({"cuda": False, "hip": None}, ["cpu"]),  # the CPU build, or no GPU: consumed, never routed to
    (None, ["cpu"]),  # torch could not be asked
])  # fmt: skip
def test_a_worker_advertises_a_gpu_queue_only_where_its_torch_drives_that_gpu(device, served):
    assert servable(["cpu", "gpu", "rocm"], torch_device=device) == served


def test_the_worker_step_reads_the_queues_named_on_the_command_line():
    queues = app.amqp.queues
    before = queues._consume_from
    try:
        queues.select(["gpu"])  # what `celery worker --queues gpu` does
        assert consumed_queues(app) == ["gpu"]
    finally:
        queues._consume_from = before
    assert QueueHeartbeat in app.steps["worker"]


class _Timer:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def call_repeatedly(self, seconds, fn, args, priority=0):
        self.calls.append((seconds, fn, args))
        return self

    def cancel(self) -> None:
        self.calls.clear()


def test_the_worker_step_writes_on_start_on_each_tick_and_survives_a_database_error(db, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr("jobs.worker_steps._torch_device", lambda: {"cuda": False, "hip": None})
    monkeypatch.setattr("django.db.close_old_connections", lambda: None)  # the test's own connection stays open
    queues = app.amqp.queues
    before = queues._consume_from
    queues.select(["cpu", "gpu"])
    worker = SimpleNamespace(app=app, hostname="w@host", timer=_Timer())
    try:
        step = QueueHeartbeat.__new__(QueueHeartbeat)  # as Celery's blueprint makes it, without a whole worker
        step.entry, step.queues = None, []
        step.start(worker)
    finally:
        queues._consume_from = before
    assert WorkerQueues.objects.get(hostname="w@host").queues == "cpu"  # gpu consumed, but torch has no GPU here
    seconds, tick, args = worker.timer.calls[0]
    assert seconds == routing.QUEUES_EVERY_S
    monkeypatch.setattr("jobs.services.worker_queues_record", lambda **kw: (_ for _ in ()).throw(RuntimeError("database down")))
    tick(*args)  # logged, not raised: the worker keeps running
    step.stop(worker)
    assert not WorkerQueues.objects.exists() and not worker.timer.calls
