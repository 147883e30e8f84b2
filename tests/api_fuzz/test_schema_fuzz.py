"""Fuzz every operation of the API from its own OpenAPI schema (schemathesis, in-process WSGI).

Every operation runs with an API token (schemathesis' coverage phase: boundaries, missing and
wrong-typed values; then its fuzzing phase) and anonymously (fuzzing phase: an anonymous write is
refused before its body is read, so boundary cases would only repeat the 401). The checks are
schemathesis' defaults: no 5xx, status codes, content types, headers and bodies as documented,
schema-invalid input refused, schema-valid input accepted, with the exceptions in
`_checks_left_out`. Generation is seeded and derandomized, so a CI failure replays locally.
"""
from __future__ import annotations

import collections
import re

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections, transaction
from django.urls.converters import UUIDConverter
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import content_type_conformance, positive_data_acceptance

from accounts.services import api_token_create
from config.wsgi import application

SEED = 20_260_101
# Fuzzing-phase examples per operation and mode (the coverage phase adds its own fixed set). A valid
# plan request runs a search (30-300 ms), so that operation gets fewer.
MAX_EXAMPLES = 30
MAX_EXAMPLES_PLAN_CREATE = 15
MIN_REQUESTS = 2_000
PLAN_CREATE = {"method": "POST", "path": "/api/v1/plans/"}
# make test runs this module in one process of its own after the pytest-xdist run of the rest, so its last test
# counts every request the fuzz sent (split over two processes, each saw part of them and the count skipped).

GENERATION = {
    # NUL in every string: paths, queries and bodies. PostgreSQL stores none, so each must be refused
    # before a query sees it (config.middleware for paths and queries, the serializers for bodies).
    "allow-x00": True,
}
FUZZ_SETTINGS = {
    "derandomize": True,
    "database": None,  # nothing written under .hypothesis/; the seed replays a failure
    "deadline": None,
    "suppress_health_check": list(HealthCheck),
    "print_blob": False,
}


def _load(*, coverage: bool):
    config = SchemathesisConfig.from_dict(
        {"seed": SEED, "generation": GENERATION, "phases": {"coverage": {"enabled": coverage}, "stateful": {"enabled": False}}}
    )
    return schemathesis.openapi.from_wsgi("/api/schema/", application, config=config, headers={"Accept": "application/json"})


token_schema = _load(coverage=True)
anonymous_schema = _load(coverage=False)
sent: collections.Counter[str] = collections.Counter()

# Real rows to point requests at (filled by catalog_for_module): random slugs and ids never exist,
# so without them the fuzz would stop at "no such model" and never check a 200 body.
existing: dict[str, list[str]] = {}
BODY_REFERENCES = {"model": "models", "chip": "chips", "offering": "offerings"}
PATH_REFERENCES = {"plan_id": "plans", "run_id": "validations", "fleet_id": "fleets"}


def point_some_cases_at_real_rows(context, case):
    """Half of the schema-valid cases get real slugs and ids in the body and the path. Negative cases
    are left alone: a real slug could turn an invalid case into a valid one."""
    if not existing or case.meta is None or not case.meta.generation.mode.is_positive:
        return st.just(case)
    picks = {}
    if isinstance(case.body, dict):
        picks.update({("body", f): st.sampled_from(existing[kind]) for f, kind in BODY_REFERENCES.items() if f in case.body})
    for name in case.path_parameters or {}:
        kind = PATH_REFERENCES.get(name) or case.operation.path.split("/")[3]  # /api/v1/<kind>/{slug}/
        picks[("path_parameters", name)] = st.sampled_from(existing[kind])
    if not picks:
        return st.just(case)

    def pointed(values: dict) -> object:
        # Assign only the containers that change: schemathesis revalidates a reassigned one.
        for where in ("body", "path_parameters"):
            changes = {name: value for (at, name), value in values.items() if at == where}
            if changes:
                setattr(case, where, {**getattr(case, where), **changes})
        return case

    return st.one_of(st.just(case), st.fixed_dictionaries(picks).map(pointed))


for _schema in (token_schema, anonymous_schema):
    _schema.hook("flatmap_case")(point_some_cases_at_real_rows)


@pytest.fixture(scope="module")
def wsgi_keeps_the_test_connection():
    """Django's test client does this too: the WSGI handler closes the DB connection when a request
    ends, which would drop the test's transaction; schemathesis calls the handler directly."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (signals.request_started, signals.request_finished):
        signal.connect(close_old_connections)


@pytest.fixture(scope="module")
def catalog_for_module(wsgi_keeps_the_test_connection, django_db_setup, django_db_blocker):
    """The catalog, a plan and a queued validation run, made once for the module (a catalog load is
    0.4 s; there are 58 tests) inside an outer transaction that is rolled back at the end. Each
    test's `db` transaction nests in it as a savepoint, so one operation's writes are gone before
    the next operation runs."""
    from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
    from hwcatalog.services import catalog_load
    from jobs.services import validation_run_create
    from planner.fleet_serializers import FleetInputSerializer
    from planner.fleet_services import fleet_create
    from planner.serializers import PlanInputSerializer
    from planner.services import plan_create

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            catalog_load()
            inputs = PlanInputSerializer(data={
                "model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
                "hardware": {"kinds": ["gpu"], "max_chips": 8},
            })  # fmt: skip
            inputs.is_valid(raise_exception=True)
            plan = plan_create(data=inputs.validated_data, raw_inputs=inputs.data)
            run = validation_run_create(plan=plan, rank=1, trial="decode", queue="cpu")  # sent on commit, so never
            fleet_inputs = FleetInputSerializer(data={
                "model": "llama-3.2-1b", "classes": [{"name": "chat", "prompt_tokens": 200, "output_tokens": 100, "requests_per_s": 2}],
                "hardware": {"chips": ["nvidia-l4"], "max_chips": 2},
            })  # fmt: skip
            fleet_inputs.is_valid(raise_exception=True)
            fleet = fleet_create(data=fleet_inputs.validated_data, raw_inputs=fleet_inputs.data)
            existing.update(
                chips=list(Chip.objects.values_list("slug", flat=True)),
                models=list(ModelArch.objects.values_list("slug", flat=True)),
                offerings=list(Offering.objects.values_list("slug", flat=True)),
                engines=list(ServingEngine.objects.values_list("slug", flat=True)),
                plans=[str(plan.id)],
                validations=[str(run.id)],
                fleets=[str(fleet.id)],
                tokens=["0" * 12],  # no such token; token_header points it at one of alice's
            )
            yield
        finally:
            existing.clear()
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture
def token_header(catalog_for_module, alice) -> dict[str, str]:
    """Alice's catalog token (it may write the catalog as well as store plans, so catalog writes are fuzzed
    past the permission check); the token endpoints' real row is a second token of hers, so that revoking it
    leaves the fuzz's own token working."""
    existing["tokens"] = [api_token_create(alice, "fuzz target", "read")[0].prefix]
    return {"Authorization": f"Token {api_token_create(alice, 'fuzz', 'catalog')[1]}"}


@pytest.fixture(autouse=True)
def rate_limits_out_of_reach(settings):
    """~10,000 requests in minutes: the fuzz checks the API, not its rate limits (tests/accounts does).
    A per-second window keeps each client's request history short."""
    rates = {scope: "1000000/s" for scope in settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
def beat_and_worker_seen_just_now(catalog_for_module, db):
    """GET /api/v1/health/jobs/ answers 200 while a beat and a worker were seen lately. Its 503 (a stopped
    beat, no worker) is a health check's answer, not a server error: tests/jobs/test_recovery_timing.py
    holds it. The module runs for many minutes, so each test marks them seen as it starts (inside its own
    savepoint, rolled back after it)."""
    from jobs.models import ScheduledTaskRun, WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(hostname="cpu@fuzz", defaults={"seen_at": timezone.now()})
    ScheduledTaskRun.objects.update_or_create(name=ScheduledTaskRun.RECOVERY_SWEEP, defaults={"last_run_at": timezone.now()})


# Django's <uuid:...> converter: a path with any other id never reaches DRF.
UUID_PATH_PARAMETERS = {"plan_id", "run_id", "fleet_id"}


def _checks_left_out(case) -> list:
    """Default checks that do not apply to this request, each with its reason."""
    left_out = []
    if case.method != "GET":
        # A write's validity depends on the catalog and on rules across fields (the slug exists, KV heads
        # divide the attention heads, prompt + output fit the context) that JSON Schema cannot state, so a
        # schema-valid write is often, rightly, a 400. Reads keep the check.
        left_out.append(positive_data_acceptance)
    if any(name in UUID_PATH_PARAMETERS and not re.fullmatch(UUIDConverter.regex, str(value)) for name, value in case.path_parameters.items()):
        # Django's URL resolver answers a non-UUID id with its HTML 404 page before DRF sees the request
        # (config/urls.py has no JSON handler404); the 404 itself is still checked.
        left_out.append(content_type_conformance)
    return left_out


def _call(case, mode: str, headers: dict[str, str] | None = None) -> None:
    sent[mode] += 1
    case.call_and_validate(headers=headers, excluded_checks=_checks_left_out(case))


@token_schema.exclude(**PLAN_CREATE).parametrize()
@settings(max_examples=MAX_EXAMPLES, **FUZZ_SETTINGS)
def test_every_operation_with_a_token(case, token_header, beat_and_worker_seen_just_now):
    _call(case, "token", token_header)


@anonymous_schema.exclude(**PLAN_CREATE).parametrize()
@settings(max_examples=MAX_EXAMPLES, **FUZZ_SETTINGS)
def test_every_operation_anonymously(case, beat_and_worker_seen_just_now):
    _call(case, "anonymous")


@token_schema.include(**PLAN_CREATE).parametrize()
@settings(max_examples=MAX_EXAMPLES_PLAN_CREATE, **FUZZ_SETTINGS)
def test_plan_create_with_a_token(case, token_header, beat_and_worker_seen_just_now):
    _call(case, "plan-token", token_header)


@anonymous_schema.include(**PLAN_CREATE).parametrize()
@settings(max_examples=MAX_EXAMPLES_PLAN_CREATE, **FUZZ_SETTINGS)
def test_plan_create_anonymously(case, beat_and_worker_seen_just_now):
    _call(case, "plan-anonymous")


def test_the_fuzz_sent_enough_requests(record_property):
    if len(sent) < 4:
        pytest.skip("only part of the fuzz ran")
    total = sum(sent.values())
    record_property("schema_fuzz_requests", total)
    print(f"\nschema fuzz: {total} requests {dict(sent)}")
    assert total >= MIN_REQUESTS
