"""Server-rendered pages. Each view parses input, calls the same selectors, serializers and
services as the REST API, and hands the stored JSON to a template. No planning math here."""
from __future__ import annotations

import uuid
from collections import Counter
from urllib.parse import urlencode
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models.fields.json import KeyTransform
from django.forms.models import model_to_dict
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework.exceptions import APIException

from accounts.ownership import may_manage
from accounts.throttling import UiWriteRateThrottle, rate_limited
from frontend import charts, compare, explain, forms
from frontend import validation_cards as cards
from frontend.templatetags.hwformat import gb, num, params, si, usd
from hwcatalog import architecture
from hwcatalog import selectors as catalog
from hwcatalog import services as catalog_services
from hwcatalog.freshness import STALE_AFTER_DAYS, WARN_AFTER_DAYS
from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
from jobs import services as jobs_services
from planner import fleet_services, plan_changes
from planner import selectors as plans
from planner import services as planner_services
from planner import simulation_services
from planner.engine.units import DTYPES
from planner.engine_profiles import serving_engines as fitted_engines
from planner.filters import PlanFilter
from planner.fleet_serializers import FleetInputSerializer
from planner.models import FleetPlan, Plan, SimulationRun
from planner.result_schema import table_columns
from planner.serializers import PlanInputSerializer, PlanLabelsSerializer
from planner.simulation_serializers import SimulationInputSerializer, SimulationListFilterSerializer

PLANS_PER_PAGE = 20
FLEETS_PER_PAGE = 20
SIMULATIONS_PER_PAGE = 20
ROW_SIMULATIONS_SHOWN = 20  # on a plan's page, the newest simulations started from its rows (the list has them all)
MAX_COMPARED_CHIPS = 8  # columns that still fit 1,280 px beside the labels
# --- plan form --------------------------------------------------------------------------------
def _form_context(values: dict[str, Any], errors: dict[str, list[str]]) -> dict[str, Any]:
    models = list(catalog.model_list())
    return {
        "values": values,
        "errors": errors,
        "models": models,
        "draft_models": [m for m in models if m.generation_kind == ModelArch.GenerationKind.AUTOREGRESSIVE],
        "generation_kinds": {m.slug: m.generation_kind for m in models},
        "presets": forms.PRESETS,
        "kinds": Chip.Kind.choices,
        "vendors": sorted(set(catalog.chip_list().values_list("vendor", flat=True))),
        "pricing_models": Offering.PricingModel.choices,
        "dtypes": DTYPES,
        "serving_engines": _engine_choices(),
        "ownerships": (("any", "Any"), ("rent", "Rent (cloud)"), ("own", "Own (purchase)")),
        "decoding_methods": (("ar", "Autoregressive"), ("speculative", "Speculative (draft model)"),
                             ("diffusion", "Diffusion"), ("block_diffusion", "Block diffusion")),  # fmt: skip
        "percentile_metrics": (("ttft", "TTFT"), ("tpot", "TPOT")),
    }


# The same rule as the API's POST /api/v1/models/import/ (hwcatalog.permissions: a catalog-scoped
# token or staff), whose only credential a browser session can carry is a staff account's.
IMPORT_NEEDS_STAFF = (
    "Importing a model into the catalog needs a staff account (the API's models/import needs a catalog-scoped "
    "API token or staff, too). Pick a model from the list, or ask a staff member to import this config.json."
)


def _import_uploaded_model(request: HttpRequest, errors: dict[str, list[str]]) -> str | None:
    """Import an uploaded config.json as a catalog model; returns its slug or records errors."""
    if not request.user.is_staff:
        errors.setdefault("config_file", []).append(IMPORT_NEEDS_STAFF)
        return None
    upload = forms.read_config_upload(request.FILES["config_file"], name=request.POST.get("import_name", ""))
    if upload.error:
        errors.setdefault("config_file", []).append(upload.error)
        return None
    slug = upload.slug
    if ModelArch.objects.filter(slug=slug).exists():
        if upload.explicit_slug:
            errors.setdefault("import_name", []).append(f"A model with slug {slug!r} already exists; pick it from the list or choose another name.")
            return None
        base, n = slug, 2
        while ModelArch.objects.filter(slug=slug).exists():
            slug, n = f"{base}-{n}", n + 1
    try:
        model, _style = catalog_services.model_import_hf(config=upload.config, slug=slug, name=request.POST.get("import_name") or None)
    except ValidationError as exc:
        details = exc.message_dict if hasattr(exc, "error_dict") else {"config": exc.messages}
        for field, messages_ in details.items():
            errors.setdefault("import_name" if field == "slug" else "config_file", []).extend(f"{field}: {m}" for m in messages_)
        return None
    return model.slug


@require_http_methods(["GET", "POST"])
@rate_limited(UiWriteRateThrottle)
def home(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        values = forms.initial_values(model_slug=request.GET.get("model"))
        return render(request, "frontend/home.html", _form_context(values, {}))

    if not request.user.is_authenticated:
        # Running a plan stores it (and may import a model): writes need an account, as in the
        # API. Nothing of the request is read beyond the form's values, which are shown again.
        context = {**_form_context(forms.submitted_values(request.POST), {}), "sign_in_required": True}
        return render(request, "frontend/home.html", context, status=403)

    errors: dict[str, list[str]] = {}
    plan = None
    # One transaction: an uploaded model that is followed by an invalid plan is not kept.
    with transaction.atomic():
        model_slug = _import_uploaded_model(request, errors) if request.FILES.get("config_file") else None
        if not errors:
            serializer = PlanInputSerializer(data=forms.plan_payload(request.POST, model_slug=model_slug))
            if serializer.is_valid():
                try:
                    plan = planner_services.plan_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
                except planner_services.PlanTooLarge as exc:
                    errors[exc.field] = [str(exc)]
            else:
                errors = forms.form_errors(serializer.errors)
        if errors:
            transaction.set_rollback(True)
    if plan is not None:
        return redirect("frontend:plan-detail", plan_id=plan.id)
    values = forms.submitted_values(request.POST)
    if model_slug and not errors:
        values["model"] = model_slug
    return render(request, "frontend/home.html", _form_context(values, errors))


# --- plans --------------------------------------------------------------------------------------
def _plan_or_404(plan_id) -> Plan:
    try:
        return plans.plan_get(plan_id=plan_id)
    except (Plan.DoesNotExist, ValidationError, ValueError):
        raise Http404("No plan with that id.") from None


def _selected_rank(request: HttpRequest, count: int) -> int:
    try:
        rank = int(request.GET.get("rank", 1))
    except ValueError:
        return 1
    return rank if 1 <= rank <= count else 1


def _group_by_chip(table: list[dict[str, Any]], *, hide_others: bool, selected_rank: int) -> int:
    """Mark each ranked row `best` (the cheapest of its chip: the ranking is cheapest first) with how many
    `more` rows its chip has, and, when the ranking shows the best per chip, `hidden` for the others (not
    the selected one). Near-duplicates (one chip under three engines, at a few batches) then take one line
    each chip. Returns how many chips the ranking holds."""
    counts = Counter(t["row"].get("chip_slug") for t in table)
    seen: set[str] = set()
    for t in table:
        chip = t["row"].get("chip_slug")
        t["best"] = chip not in seen
        seen.add(chip)
        t["more"] = counts[chip] - 1 if t["best"] else 0
        t["hidden"] = hide_others and not t["best"] and t["rank"] != selected_rank
    return len(counts)


RANKING_PER_PAGE = 25  # rows in "all"; chips (each with its hidden rows) in "best"


def _ranking_page(request: HttpRequest, table: list[dict[str, Any]], *, view: str, selected_rank: int):
    """One page of the ranking: RANKING_PER_PAGE chips (their other rows with them, hidden until expanded) when
    it shows the best per chip, RANKING_PER_PAGE rows when it shows all. Without `?page=` it is the page that
    holds the selected row. Returns (the page's rows in rank order, the page)."""
    if view == "best":
        groups: dict[str, list[dict[str, Any]]] = {}
        for t in table:
            groups.setdefault(t["row"].get("chip_slug"), []).append(t)
        units = list(groups.values())
    else:
        units = [[t] for t in table]
    paginator = Paginator(units, RANKING_PER_PAGE)
    number = request.GET.get("page")
    if number is None:
        number = next((i // RANKING_PER_PAGE + 1 for i, unit in enumerate(units) if any(t["rank"] == selected_rank for t in unit)), 1)
    page = paginator.get_page(number)
    return sorted((t for unit in page.object_list for t in unit), key=lambda t: t["rank"]), page


@require_GET
def plan_detail(request: HttpRequest, plan_id) -> HttpResponse:
    plan = _plan_or_404(plan_id)
    if plan.status != Plan.Status.DONE:  # a worker is searching (the page polls), or the search failed
        return render(request, "frontend/plan_running.html", {"plan": plan})
    results = plan.results or {}
    ranked = results.get("ranked") or []
    table = [
        {"rank": rank, "row": row, "label": charts.configuration_label(row), "memory": charts.memory_breakdown(row.get("memory") or {}),
         "simulation_refusal": forms.simulation_refusal(row), "stage": explain.simulation_cell(row) if row.get("ranking_stage") else None}
        for rank, row in enumerate(ranked, start=1)
    ]
    selected_rank = _selected_rank(request, len(ranked))
    view = "all" if request.GET.get("view") == "all" else "best"
    chip_count = _group_by_chip(table, hide_others=view == "best", selected_rank=selected_rank)
    page_rows, ranking_page = _ranking_page(request, table, view=view, selected_rank=selected_rank)
    runs = cards.validation_contexts(cards.validation_runs(plan))
    selected_row = ranked[selected_rank - 1] if ranked else {}
    row_simulations = _summarised(plan.row_simulations.all())
    return render(request, "frontend/plan_detail.html", {
        "validate_form": cards.validate_form_context(plan, selected_row) if ranked else None,
        "plan": plan,
        "results": results,
        "workload": (plan.inputs or {}).get("workload", {}),
        "hardware": (plan.inputs or {}).get("hardware", {}),
        "budget": (plan.inputs or {}).get("budget_usd_per_million_output_tokens"),
        "table": table,
        "page_rows": page_rows,
        "ranking_page": ranking_page,
        "metric_columns": table_columns(),
        "selected_rank": selected_rank,
        "view": view,
        "chip_count": chip_count,
        "chart_data": charts.plan_chart_data(results, plan.catalog_snapshot or {}),
        "explanation": explain.winner_explanation(results),
        "stage": explain.stage_summary(results), "stage_cdf": charts.stage_cdf_chart(results),
        "percentile_slos": explain.percentile_slos_text((plan.inputs or {}).get("slo_percentiles")),
        "infeasible_examples": explain.infeasible_examples(results),
        "validations": runs,
        "row_simulations": _simulation_rows(row_simulations[:ROW_SIMULATIONS_SHOWN]),
        "row_simulation_count": row_simulations.count(),
        "tags": list(plan.tags.values_list("name", flat=True)),
        "may_label": may_manage(user=request.user, owner_id=plan.created_by_id),
    })  # fmt: skip


def _plan_write(request: HttpRequest, plan_id, *, sign_in_to: str) -> tuple[Plan, str, HttpResponse | None]:
    """A write from a plan's page: the plan, its page's address, and the sign-in redirect when no one is
    signed in (back to the plan after signing in: the write's own URL answers POST only)."""
    plan = _plan_or_404(plan_id)
    detail = reverse("frontend:plan-detail", kwargs={"plan_id": plan.id})
    if request.user.is_authenticated:
        return plan, detail, None
    messages.info(request, f"Sign in to {sign_in_to}.")
    return plan, detail, redirect_to_login(detail)


@require_POST
@rate_limited(UiWriteRateThrottle)
def plan_labels(request: HttpRequest, plan_id) -> HttpResponse:
    """Rename or re-tag a plan from its page: its creator or staff (planner/plan_changes.py)."""
    plan, detail, sign_in = _plan_write(request, plan_id, sign_in_to="rename or tag a plan")
    if sign_in:
        return sign_in
    labels = PlanLabelsSerializer(data=forms.labels_payload(request.POST))
    if not labels.is_valid():
        text = "; ".join(f"{field}: {' '.join(errs)}" for field, errs in forms.form_errors(labels.errors).items())
        messages.error(request, f"Name and tags not saved: {text}")
        return redirect(detail)
    try:
        plan_changes.plan_labels_set(plan=plan, name=labels.validated_data.get("name"), tags=labels.validated_data.get("tags"), by=request.user)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return redirect(detail)
    messages.success(request, "Name and tags saved.")
    return redirect(detail)


@require_POST
@rate_limited(UiWriteRateThrottle)
def validation_start(request: HttpRequest, plan_id) -> HttpResponse:
    # A trial takes a worker's CPU or GPU: it needs an account.
    plan, detail, sign_in = _plan_write(request, plan_id, sign_in_to="validate a configuration on a worker")
    if sign_in:
        return sign_in
    try:
        rank = int(request.POST.get("rank", ""))
    except ValueError:
        messages.error(request, "Choose a configuration to validate (rank missing).")
        return redirect(detail)
    payload, errors = forms.validation_payload(request.POST)
    if errors:
        messages.error(request, f"Could not start a validation of configuration #{rank}: {' '.join(errors.values())}")
        return redirect(f"{detail}?rank={rank}#validate")
    try:
        run = jobs_services.validation_run_create(plan=plan, rank=rank, user=request.user, **payload)
    except ValidationError as exc:
        details = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
        text = "; ".join(f"{field}: {' '.join(msgs)}" if field else " ".join(msgs) for field, msgs in details.items())
        messages.error(request, f"Could not start a validation of configuration #{rank}: {text}")
        return redirect(f"{detail}?rank={rank}#validate")
    stand_in = " as a stand-in for the planned chip" if run.stand_in else ""
    messages.success(request, f"Validation of configuration #{rank} queued on the {run.queue} workers{stand_in}.")
    return redirect(f"{detail}?rank={rank}#validation-{run.id}")


@require_GET
def validation_fragment(request: HttpRequest, plan_id, run_id) -> HttpResponse:
    plan = _plan_or_404(plan_id)
    run = next((r for r in cards.validation_runs(plan) if r.id == run_id), None)
    if run is None:
        raise Http404("No validation run with that id for this plan.")
    return render(request, "frontend/_validation.html", {"v": cards.validation_context(run), "plan": plan})


@require_GET
def plan_list(request: HttpRequest) -> HttpResponse:
    """The stored plans, newest first, filtered as GET /api/v1/plans/ filters them (planner/filters.py)."""
    query = request.GET.copy()
    query.pop("page", None)
    for name in [k for k, v in query.items() if v == ""]:  # the form's empty fields: no filter
        query.pop(name)
    listed = PlanFilter(query, queryset=plans.plan_list(), request=request)
    errors: dict[str, list[str]] = {}
    found, status = Plan.objects.none(), 200
    if listed.is_valid():
        try:
            found = listed.qs
        except APIException as exc:  # mine without an account (401), owner without staff (403)
            errors, status = {"filters": [str(exc.detail)]}, exc.status_code
    else:
        errors, status = {field: list(messages_) for field, messages_ in listed.errors.items()}, 400
    page = Paginator(found, PLANS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page, "filters": query.dict(), "filter_errors": errors, "filtered": bool(query),
        "query": query.urlencode(), "model_choices": Plan.objects.order_by("model_slug").values_list("model_slug", flat=True).distinct(),
    }  # fmt: skip
    return render(request, "frontend/plan_list.html", context, status=status)


@require_GET
def plan_compare(request: HttpRequest) -> HttpResponse:
    ids = {key: request.GET.get(key, "").strip() for key in ("a", "b")}
    problems, found = [], {}
    for key, value in ids.items():
        if not value:
            problems.append(f"Plan {key.upper()} is missing: choose two plans on the plans page.")
            continue
        try:
            found[key] = plans.plan_get(plan_id=uuid.UUID(value))
        except (ValueError, Plan.DoesNotExist):
            problems.append(f"No plan with id {value!r} (plan {key.upper()}).")
    if problems:
        return render(request, "frontend/plan_compare.html", {"problems": problems}, status=404 if any(ids.values()) else 400)
    a, b = found["a"], found["b"]
    inputs = compare.input_rows(a.inputs or {}, b.inputs or {})

    def top(plan: Plan) -> list[dict[str, Any]]:
        return [{"rank": i, "row": row, "label": charts.configuration_label(row)} for i, row in enumerate((plan.results or {}).get("ranked", [])[:3], 1)]

    points = {"a": compare.chart_points(a.results), "b": compare.chart_points(b.results)}
    return render(request, "frontend/plan_compare.html", {"a": a, "b": b, "inputs": inputs, "top_a": top(a), "top_b": top(b), "points": points})


# --- fleets -------------------------------------------------------------------------------------
OWNERSHIPS = (("any", "Any"), ("rent", "Rent (cloud)"), ("own", "Own (purchase)"))
APPLY_TO_CHOICES = (("owned", "Owned offerings only (your datacentre)"), ("all", "Every offering, rented ones too"))


def _fleet_form_context(values: dict[str, Any], errors: dict[str, list[str]]) -> dict[str, Any]:
    # Fleets plan autoregressive decoding only (FleetInputSerializer), so the list offers only those models.
    models = [m for m in catalog.model_list() if m.generation_kind == ModelArch.GenerationKind.AUTOREGRESSIVE]
    chips = catalog.chip_list()
    return {
        "values": values,
        "errors": errors,
        "models": models,
        "class_rows": forms.fleet_class_rows(values, errors),
        "kinds": Chip.Kind.choices,
        "vendors": sorted(set(chips.values_list("vendor", flat=True))),
        "chips": chips.order_by("vendor", "slug"),
        "ownerships": OWNERSHIPS,
        "apply_to_choices": APPLY_TO_CHOICES,
    }


def _fleet_page(request: HttpRequest, values: dict[str, Any], errors: dict[str, list[str]], **extra: Any) -> HttpResponse:
    # The list does not need the (large) results and snapshots: only the summary columns.
    fleets = FleetPlan.objects.defer("results", "catalog_snapshot", "inputs")
    page = Paginator(fleets, FLEETS_PER_PAGE).get_page(request.GET.get("page"))
    status = extra.pop("status", 200)
    return render(request, "frontend/fleet_list.html", {"page": page, **_fleet_form_context(values, errors), **extra}, status=status)


@require_http_methods(["GET", "POST"])
@rate_limited(UiWriteRateThrottle)
def fleet_list(request: HttpRequest) -> HttpResponse:
    """The stored fleet plans and the form that plans a new one (the same serializer and service as
    POST /api/v1/fleets/)."""
    if request.method == "GET":
        return _fleet_page(request, forms.fleet_initial_values(model_slug=request.GET.get("model")), {})
    values = forms.fleet_submitted_values(request.POST)
    if not request.user.is_authenticated:
        # A fleet plan is stored: writes need an account, as for plans.
        return _fleet_page(request, values, {}, sign_in_required=True, status=403)
    payload, rows = forms.fleet_payload(request.POST)
    serializer = FleetInputSerializer(data=payload)
    if not serializer.is_valid():
        return _fleet_page(request, values, forms.fleet_form_errors(serializer.errors, rows))
    try:
        fleet = fleet_services.fleet_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
    except fleet_services.FleetRefused as exc:  # too large, or limits no fleet meets: nothing stored
        return _fleet_page(request, values, {forms.fleet_refused_field(exc.field): [str(exc)]})
    return redirect("frontend:fleet-detail", fleet_id=fleet.id)


def _fleet_or_404(fleet_id) -> FleetPlan:
    try:
        return FleetPlan.objects.get(pk=fleet_id)
    except (FleetPlan.DoesNotExist, ValidationError, ValueError):
        raise Http404("No fleet plan with that id.") from None


@require_GET
def fleet_detail(request: HttpRequest, fleet_id) -> HttpResponse:
    fleet = _fleet_or_404(fleet_id)
    results = fleet.results or {}
    error = fleet.error if fleet.status == FleetPlan.Status.FAILED else results.get("error")
    if fleet.status != FleetPlan.Status.DONE or error:  # a worker is planning it (the page polls), or it failed
        failed = bool(error) or fleet.status == FleetPlan.Status.FAILED
        return render(request, "frontend/fleet_running.html", {"fleet": fleet, "error": error, "failed": failed})
    inputs = fleet.inputs or {}
    return render(request, "frontend/fleet_detail.html", {
        "fleet": fleet, "results": results, "inputs": inputs, "hardware": inputs.get("hardware") or {},
        "input_limits": inputs.get("limits") or {}, "view": charts.fleet_view(results),
    })  # fmt: skip


# --- serving simulations ------------------------------------------------------------------------
def _results_key(*path: str) -> KeyTransform:
    """A value inside SimulationRun.results, read by the database (the list does not load the series and CDFs)."""
    expression: Any = "results"
    for key in path:
        expression = KeyTransform(key, expression)
    return expression


# What the list shows of each run's results.
SIMULATION_SUMMARY = {
    "p95_ttft_s": ("ttft_s", "p95"), "p95_tpot_s": ("tpot_s", "p95"), "goodput_requests_per_s": ("goodput_requests_per_s",),
    "usd_per_million_output_tokens": ("usd_per_million_output_tokens",), "overloaded": ("overloaded",),
    "meets_slo_percentiles": ("meets_slo_percentiles",), "knee_rate_per_s": ("sweep", "knee_rate_per_s"),
}  # fmt: skip


def _summarised(runs):
    """Simulation runs with what a list shows of their results, read by the database (results and trace deferred)."""
    return runs.defer("results", "trace").annotate(**{name: _results_key(*path) for name, path in SIMULATION_SUMMARY.items()})


def _simulation_rows(runs) -> list[dict[str, Any]]:
    # A trace fixes the requests (its workload names none): its row count is the run's request count (the trace itself is deferred)
    return [{"run": run, "workload": charts.simulation_workload_label(
        run.inputs or {}, request_count=run.request_count,
        trace_rows=run.request_count if "requests" not in ((run.inputs or {}).get("workload") or {}) else None)} for run in runs]  # fmt: skip


@require_GET
def simulation_list(request: HttpRequest) -> HttpResponse:
    """The stored simulations, newest first (a plan's candidates are shown with their plan, as the API lists them)."""
    filters = SimulationListFilterSerializer(data=request.GET)
    if not filters.is_valid():  # a bad filter is said beside the list, which then shows every run
        runs, chosen, filter_errors = plans.simulation_list(), {}, filters.errors
    else:
        runs, chosen, filter_errors = plans.simulation_list(**filters.validated_data), filters.validated_data, {}
    page = Paginator(_summarised(runs), SIMULATIONS_PER_PAGE).get_page(request.GET.get("page"))
    source = Plan.objects.filter(pk=chosen["from_plan"]).first() if chosen.get("from_plan") else None
    query = urlencode({name: value for name, value in chosen.items() if value})
    return render(request, "frontend/simulation_list.html", {
        "page": page, "rows": _simulation_rows(page), "filters": chosen, "filter_errors": filter_errors, "source_plan": source,
        "filter_query": f"&{query}" if query else "", "status_choices": SimulationRun.Status.choices,
    })  # fmt: skip


def _simulation_or_404(run_id) -> SimulationRun:
    try:
        return SimulationRun.objects.get(pk=run_id)
    except (SimulationRun.DoesNotExist, ValidationError, ValueError):
        raise Http404("No simulation with that id.") from None


@require_GET
def simulation_detail(request: HttpRequest, run_id) -> HttpResponse:
    run = _simulation_or_404(run_id)
    results = run.results or {}
    inputs = run.inputs or {}
    workload = charts.simulation_workload_label(inputs, request_count=run.request_count, trace_rows=len((run.trace or {}).get("arrival_s") or []))
    if run.status != SimulationRun.Status.DONE:  # a worker is simulating (the page polls), or it failed
        return render(request, "frontend/simulation_running.html", {
            "run": run, "workload": workload, "error": run.error or results.get("error"), "failed": run.status == SimulationRun.Status.FAILED,
        })  # fmt: skip
    return render(request, "frontend/simulation_detail.html", {
        "run": run, "results": results, "inputs": inputs, "workload": workload,
        "latency_rows": charts.latency_rows(results), "latency_stats": charts.LATENCY_STATS, "slo_rows": charts.slo_rows(results),
        "cdf": charts.cdf_chart(results), "series": charts.series_chart(results), "sweep": charts.sweep_chart(results),
        "sweep_rows": charts.sweep_rows(results), "sweep_lines": charts.sweep_lines(results),
        "goodput_bounds": charts.goodput_bounds_label(results),
    })  # fmt: skip


def _engine_choices() -> list[tuple[str, str]]:
    """The catalog's serving engines as (value, label): where each runs, and which carry a fitted profile."""
    fitted = set(fitted_engines())
    return [(e.name, f"{e.name} ({'fitted profile on NVIDIA GPUs; ' if e.name in fitted else ''}{', '.join(e.chip_kinds)} chips"
                     f"{' of ' + ', '.join(e.chip_vendors) if e.chip_vendors else ''})")
            for e in ServingEngine.objects.order_by("name")]  # fmt: skip


def _simulation_form_context(values: dict[str, Any], errors: dict[str, list[str]], **extra: Any) -> dict[str, Any]:
    # Autoregressive models (the form's own decoding), and the model of a plan row it was prefilled from (whose decoding it carries).
    models = [m for m in catalog.model_list() if m.generation_kind == ModelArch.GenerationKind.AUTOREGRESSIVE or m.slug == values.get("model")]
    return {
        "values": values, "errors": errors, "models": models, "chips": catalog.chip_list().order_by("vendor", "slug"),
        "offerings": catalog.offering_list().order_by("chip__slug", "slug"), "dtypes": DTYPES,
        "serving_engines": _engine_choices(), "arrival_choices": forms.ARRIVAL_CHOICES, "length_choices": forms.LENGTH_CHOICES,
        "prefill_mode_choices": forms.PREFILL_MODE_CHOICES,
        "inline_max_requests": settings.SIMULATION_INLINE_MAX_REQUESTS, "max_trace_requests": settings.SIMULATION_MAX_REQUESTS,
        "max_trace_bytes": settings.SIMULATION_MAX_TRACE_BYTES, **extra,
    }  # fmt: skip


def _plan_row_values(request: HttpRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """?plan=<id>&rank=<n>: the form prefilled with that ranked row and the plan's workload, and what the page
    says about it (the plan, the row, why the simulator cannot run it)."""
    plan = _plan_or_404(request.GET["plan"])
    ranked = (plan.results or {}).get("ranked") or []
    try:
        rank = int(request.GET.get("rank", "1"))
    except ValueError:
        rank = 0
    if not 1 <= rank <= len(ranked):
        raise Http404(f"Plan {plan.id} has no ranked configuration #{request.GET.get('rank')}.")
    row = ranked[rank - 1]
    values = forms.simulation_values_from_plan(plan.inputs or {}, row, plan_id=plan.id, rank=rank,
                                               decoding=simulation_services.plan_row_decoding(plan, row))  # fmt: skip
    inputs = plan.inputs or {}
    steady = forms.plan_holds_a_steady_batch(inputs) and values["concurrency"] == inputs["workload"]["concurrency"]
    source = {"plan": plan, "rank": rank, "label": charts.configuration_label(row), "refusal": forms.simulation_refusal(row),
              "needs_rate": values["arrivals"] in ("poisson", "gamma") and values["rate_per_s"] in ("", None),
              "steady_batch": steady and values["arrivals"] == "closed_loop", "concurrency": values["concurrency"],
              "stage_left_out": forms.stage_left_out(inputs.get("simulation") or {})}  # fmt: skip
    return values, source


@require_http_methods(["GET", "POST"])
@rate_limited(UiWriteRateThrottle)
def simulation_new(request: HttpRequest) -> HttpResponse:
    """The form that simulates one configuration under one workload (the same serializer and service as
    POST /api/v1/simulations/); ?plan=<id>&rank=<n> prefills it from a plan's ranked row."""
    if request.method == "GET":
        if request.GET.get("plan"):
            values, source = _plan_row_values(request)
        else:
            values, source = forms.simulation_initial_values(), None
        return render(request, "frontend/simulation_form.html", _simulation_form_context(values, {}, source=source))
    values = forms.simulation_submitted_values(request.POST)
    if not request.user.is_authenticated:
        # A simulation is stored (and may take a worker): writes need an account, as for plans and fleets.
        return render(request, "frontend/simulation_form.html", _simulation_form_context(values, {}, sign_in_required=True), status=403)
    trace_errors = forms.simulation_trace_errors(request.POST, request.FILES)
    if trace_errors:
        return render(request, "frontend/simulation_form.html", _simulation_form_context(values, trace_errors))
    payload = forms.simulation_payload(request.POST, request.FILES)
    unlinked = _row_link_refusal(payload)
    traced = request.POST.get("arrivals") == "trace"
    serializer = SimulationInputSerializer(data=payload)
    if not serializer.is_valid():
        errors = forms.simulation_form_errors(serializer.errors, traced=traced)
        return render(request, "frontend/simulation_form.html", _simulation_form_context(values, errors))
    try:
        run = simulation_services.simulation_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
    except simulation_services.SimulationRefused as exc:  # a chip kind or a request the simulator cannot run: nothing stored
        errors = {forms.simulation_field_for(tuple(exc.field.split(".")), traced=traced): [str(exc)]}
        return render(request, "frontend/simulation_form.html", _simulation_form_context(values, errors))
    if unlinked:
        messages.info(request, f"Not listed with configuration #{request.POST.get('rank')} of the plan: {unlinked}")
    return redirect("frontend:simulation-detail", run_id=run.id)


def _row_link_refusal(payload: dict[str, Any]) -> str | None:
    """The form links its run to the plan row it was prefilled from; where the API would refuse that link (the plan
    deleted or still running, or the configuration changed since), the run is simulated unlinked: the link is dropped
    from `payload` and the reason returned."""
    link = payload.get("from_plan")
    if not link:
        return None
    try:
        plan_id, rank = uuid.UUID(link["plan"]), int(link["rank"])
    except ValueError:
        refusal: tuple[str, str] | None = ("plan", "The plan row is not one (a plan id and a rank).")
    else:  # a number the form's fields do not give (an "auto" tensor parallelism) is not compared
        numbers = {name: int(payload[name]) if payload.get(name, "").isdigit() else None for name in ("chip_count", "tensor_parallel")}
        refusal = simulation_services.plan_row_link_refusal(plan_id, rank, model=payload.get("model"), chip=payload.get("chip"),
                                                            weight_dtype=payload.get("weight_dtype"), **numbers)  # fmt: skip
    if refusal is None:
        return None
    payload.pop("from_plan")
    return refusal[1]


# --- catalog --------------------------------------------------------------------------------------
@require_GET
def catalog_index(request: HttpRequest) -> HttpResponse:
    chips = catalog.with_prices(catalog.chip_list())
    models = catalog.model_list()
    return render(request, "frontend/catalog.html", {"chips": chips, "models": models})


@require_GET
def price_freshness(request: HttpRequest) -> HttpResponse:
    """Every price's age and source kind, the oldest first (what `manage.py catalogreport` prints)."""
    report = catalog.price_freshness(today=timezone.localdate())
    return render(request, "frontend/price_freshness.html", {
        "report": report, "summary": report.summary, "stale_after_days": STALE_AFTER_DAYS, "warn_after_days": WARN_AFTER_DAYS,
    })  # fmt: skip


def _chip_specs(chip: Chip) -> list[tuple[str, str]]:
    peaks = [(f"Peak {dtype.upper()}", si(value, "FLOP/s")) for dtype, value in chip.peak_flops_per_s().items()]
    ridge = chip.ridge_point_flops_per_byte("bf16")
    return [
        ("Vendor", chip.vendor), ("Kind", chip.get_kind_display()), ("Architecture", chip.architecture or "–"), ("Memory", f"{gb(chip.memory_capacity_bytes)} {chip.memory_type}".strip()),
        ("Memory bandwidth", si(chip.memory_bandwidth_bytes_per_s, "B/s")), *peaks,
        ("Ridge point (BF16)", f"{num(ridge)} FLOP/byte" if ridge else "–"),
        ("On-chip SRAM", gb(chip.on_chip_sram_bytes)), ("Link bandwidth (per chip, one way)", si(chip.link_bandwidth_bytes_per_s, "B/s")),
        ("Chips per node", num(chip.chips_per_node)), ("Cores", num(chip.cores)), ("TDP", f"{num(chip.tdp_watts)} W" if chip.tdp_watts else "–"),
        ("Values as of", str(chip.as_of)),
    ]  # fmt: skip


CHEAPEST_RENTAL = "Cheapest rental, per chip-hour"
# The compared rows where more is better; the cheapest rental is the one where less is.
LOWER_IS_BETTER = frozenset({CHEAPEST_RENTAL})


def _chip_measures(chip: Chip) -> dict[str, float | None]:
    """The numbers behind _chip_specs' rows that have a better end, under the same labels."""
    return {
        "Memory": chip.memory_capacity_bytes, "Memory bandwidth": chip.memory_bandwidth_bytes_per_s,
        **{f"Peak {dtype.upper()}": value for dtype, value in chip.peak_flops_per_s().items()},
        "On-chip SRAM": chip.on_chip_sram_bytes, "Link bandwidth (per chip, one way)": chip.link_bandwidth_bytes_per_s,
    }  # fmt: skip


def _best_columns(label: str, measures: list[dict[str, float | None]]) -> list[int]:
    """The columns holding a row's best value (ties all marked), where at least two chips have one and
    they differ; none otherwise."""
    values = [m.get(label) for m in measures]
    known = [v for v in values if v]
    if len(known) < 2 or len(set(known)) == 1:
        return []
    best = min(known) if label in LOWER_IS_BETTER else max(known)
    return [i for i, v in enumerate(values) if v == best]


def _chip_roofs_all_dtypes(chip: Chip) -> list[dict[str, Any]]:
    values = model_to_dict(chip)
    return [roof for roof in (charts.chip_roof(values, dtype) for dtype in chip.peak_flops_per_s()) if roof]


@require_GET
def chip_detail(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        chip = catalog.chip_get(slug=slug)
    except Chip.DoesNotExist:
        raise Http404(f"No chip with slug {slug!r}.") from None
    return render(request, "frontend/chip_detail.html", {
        "chip": chip, "specs": _chip_specs(chip), "offerings": catalog.offerings_for_chips(chip_slugs=[chip.slug]),
        "roofs": _chip_roofs_all_dtypes(chip),
    })  # fmt: skip


@require_GET
def model_detail(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        model = catalog.model_get(slug=slug)
    except ModelArch.DoesNotExist:
        raise Http404(f"No model with slug {slug!r}.") from None
    fields = [
        ("Family", model.family), ("Generation", model.get_generation_kind_display()), ("Total parameters", params(model.total_params)),
        ("Active parameters", params(model.active_params or model.total_params)), ("Layers", num(model.num_layers)),
        ("Hidden size", num(model.hidden_size)), ("Attention", f"{model.get_attention_kind_display()} ({model.num_attention_heads} heads, {model.num_kv_heads} KV heads, head dim {model.head_dim})"),
        ("FFN", f"{model.get_ffn_kind_display()}, intermediate {num(model.intermediate_size)}"), ("Vocabulary", num(model.vocab_size)),
        ("Max context", f"{num(model.max_context_tokens)} tokens"),
        ("KV cache per token (BF16)", f"{num(model.kv_cache_bytes_per_token('bf16'))} bytes"),
        ("Weights at BF16", gb(model.weight_bytes("bf16"))),
        ("Values as of", str(model.as_of)),
    ]  # fmt: skip
    if model.is_moe:
        fields.insert(5, ("Experts", f"{model.num_experts} ({model.experts_per_token} per token, {model.num_shared_experts or 0} shared)"))
    checkpoint = model.checkpoint_format
    if checkpoint and architecture.WEIGHT_FORMAT_BITS[checkpoint] < 16:
        kept = (model.sixteen_bit_modules or {}).get(checkpoint, [])
        dtype = architecture.FORMAT_DTYPE[checkpoint]
        label = f"Weights at {model.get_checkpoint_format_display()} (the checkpoint: {architecture.WEIGHT_FORMAT_BITS[checkpoint]:g} bits a weight"
        label += f"; {', '.join(m.replace('_', ' ') for m in kept)} in 16 bits)" if kept else ")"
        at = next(i for i, (name, _) in enumerate(fields) if name == "Weights at BF16") + 1
        fields.insert(at, (label, gb(model.weight_bytes(dtype))))
    if model.default_block_size:
        fields.append(("Default block size", num(model.default_block_size)))
    return render(request, "frontend/model_detail.html", {"model": model, "fields": fields})


@require_GET
def chip_compare(request: HttpRequest) -> HttpResponse:
    # ?chips=a,b,c (shareable) or ?chip=a&chip=b (the picker form without JavaScript).
    given = request.GET.get("chips", "").split(",") + request.GET.getlist("chip")
    slugs = list(dict.fromkeys(s.strip() for s in given if s.strip()))
    context: dict[str, Any] = {"all_chips": catalog.chip_list(), "requested": slugs, "problems": [], "max_chips": MAX_COMPARED_CHIPS}
    if not slugs:
        return render(request, "frontend/chip_compare.html", context)
    status = 200
    if len(slugs) > MAX_COMPARED_CHIPS:
        context["problems"].append(f"Compare at most {MAX_COMPARED_CHIPS} chips at a time (got {len(slugs)}).")
        status = 400
    found = {c.slug: c for c in catalog.with_prices(catalog.chip_list().filter(slug__in=slugs))}
    unknown = [s for s in slugs if s not in found]
    if unknown:
        context["problems"].append("Unknown chip slug" + ("s" if len(unknown) > 1 else "") + ": " + ", ".join(unknown) + ". Pick chips from the list below.")
        status = 404
    if len(slugs) < 2 and status == 200:
        context["problems"].append("Pick at least two chips to compare.")
    if status != 200 or len(slugs) < 2:
        return render(request, "frontend/chip_compare.html", context, status=status)
    chips = [found[s] for s in slugs]
    chip_offerings = [{"chip": c, "offerings": list(catalog.offerings_for_chips(chip_slugs=[c.slug]))} for c in chips]
    specs = [_chip_specs(c) + [(CHEAPEST_RENTAL, usd(c.cheapest_rental))] for c in chips]
    measures = [_chip_measures(c) | {CHEAPEST_RENTAL: c.cheapest_rental} for c in chips]
    labels = list(dict.fromkeys(label for spec in specs for label, _ in spec))
    rows = [{"label": label, "values": [dict(spec).get(label, "–") for spec in specs], "best": _best_columns(label, measures)}
            for label in labels]  # fmt: skip
    context.update(chips=chips, rows=rows, chip_offerings=chip_offerings, roofs=charts.chips_roofs([model_to_dict(c) for c in chips], "bf16"))
    return render(request, "frontend/chip_compare.html", context)
