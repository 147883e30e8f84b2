from __future__ import annotations

from django.db import transaction
from django.http import Http404, HttpResponse
from django.urls import reverse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from planner import plan_changes, selectors, services
from planner.exports import plan_csv
from planner.filters import PlanFilter
from planner.models import Plan
from planner.result_schema import estimate_response_schema, plan_results_schema
from planner.serializers import EstimateInputSerializer, PlanInputSerializer, PlanLabelsSerializer


@extend_schema_field(plan_results_schema())
class PlanResultsField(serializers.JSONField):
    """A stored plan's results: ranked rows of the declared result fields (planner/result_schema.py)."""


class EstimateApi(APIView):
    """Estimate one configuration: TTFT, TPOT, tokens/s, memory, bounds, MFU/MBU, $/1M tokens, J/token.

    Computes and stores nothing, so it is open to anonymous clients."""

    permission_classes = [AllowAny]

    @extend_schema(request=EstimateInputSerializer, responses={200: OpenApiResponse(estimate_response_schema(), description="The estimate")})
    def post(self, request):
        serializer = EstimateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(services.estimate_compute(data=serializer.validated_data))


class PlanLabelsOutput(serializers.ModelSerializer):
    """A plan's labels and standing: its name and tags, who made it (to that user and to staff), and
    whether a validation of one of its configurations succeeded."""

    tags = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name", help_text="Its tags, lower case.")
    owner = serializers.SerializerMethodField(help_text="Its creator's username, shown to the creator and to staff; null to anyone else.")
    validated = serializers.SerializerMethodField(
        help_text="A validation of one of its configurations succeeded on a worker of the planned chip's kind (a stand-in's does not count).")

    class Meta:
        model = Plan
        fields = ["name", "tags", "owner", "validated"]

    def get_owner(self, plan: Plan) -> str | None:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if plan.created_by_id is None or not getattr(user, "is_authenticated", False):
            return None
        return plan.created_by.username if user.is_staff or user.pk == plan.created_by_id else None

    def get_validated(self, plan: Plan) -> bool:
        annotated = getattr(plan, "validated", None)
        if annotated is not None:
            return bool(annotated)
        return selectors.validating(plan.validations.all()).exists()


class PlanOutputSerializer(PlanLabelsOutput):
    results = PlanResultsField(read_only=True)

    class Meta:
        model = Plan
        fields = [
            "id", "name", "tags", "owner", "validated", "model_slug", "inputs", "candidate_count", "feasible_count",
            "best_usd_per_million_output_tokens", "pinned", "created_at", "status", "progress", "error", "finished_at", "calibration_used",
            "results", "catalog_snapshot",
        ]  # fmt: skip


class PlanSummarySerializer(PlanLabelsOutput):
    class Meta:
        model = Plan
        fields = ["id", "name", "tags", "owner", "validated", "model_slug", "inputs", "candidate_count", "feasible_count",
                  "best_usd_per_million_output_tokens", "pinned", "created_at", "status", "progress"]  # fmt: skip


class PlanQueuedSerializer(serializers.ModelSerializer):
    """A search too big to run inside the request: stored queued, run by a worker. Poll `url`
    (the plan) until `status` is done (results stored) or failed (`error` says why)."""

    url = serializers.SerializerMethodField(help_text="The plan's address: GET it until status is done or failed.")

    class Meta:
        model = Plan
        fields = ["id", "url", "status", "progress", "candidate_count", "model_slug", "created_at"]

    def get_url(self, plan: Plan) -> str:
        path = reverse("plan-detail", kwargs={"plan_id": plan.id})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class PlanListCreateApi(ListAPIView):
    """List stored plans (newest first; filter by model, tag, name, creation day, validated, and whose
    they are), or search + rank + store a new one (with a name and tags if given)."""

    serializer_class = PlanSummarySerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = PlanFilter
    read_forbidden = True  # `owner` is staff's filter: 403 for anyone else (the schema documents it)

    def get_queryset(self):
        return selectors.plan_list()

    @extend_schema(
        request=PlanInputSerializer,
        responses={
            201: OpenApiResponse(PlanOutputSerializer, description="A small search, run inside the request: the stored plan."),
            202: OpenApiResponse(PlanQueuedSerializer, description="A bigger search, queued for a worker: poll `url` (the `Location` header)."),
        },
    )
    def post(self, request):
        serializer = PlanInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            plan = services.plan_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
        except services.PlanTooLarge as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        if plan.pending:
            queued = PlanQueuedSerializer(plan, context={"request": request}).data
            return Response(queued, status=status.HTTP_202_ACCEPTED, headers={"Location": queued["url"]})
        return Response(PlanOutputSerializer(plan, context={"request": request}).data, status=status.HTTP_201_CREATED)


def _plan_or_404(plan_id) -> Plan:
    try:
        return selectors.plan_get(plan_id=plan_id)
    except Plan.DoesNotExist:
        raise Http404("No such plan.") from None


class PlanChangeInputSerializer(PlanLabelsSerializer):
    """What a stored plan lets its creator (or staff) change: every field optional, an absent one unchanged."""

    pinned = serializers.BooleanField(required=False, help_text="Re-validate the plan's top configuration nightly; absent: unchanged.")


class PlanDetailApi(APIView):
    """A stored plan. PATCH pins or unpins, renames or re-tags it, and DELETE deletes it: its creator or
    staff only (403 for anyone else); nothing else of a plan changes once stored."""

    @extend_schema(responses={200: PlanOutputSerializer})
    def get(self, request, plan_id):
        return Response(PlanOutputSerializer(_plan_or_404(plan_id), context={"request": request}).data)

    @extend_schema(request=PlanChangeInputSerializer, responses={200: PlanSummarySerializer})
    def patch(self, request, plan_id):
        plan = _plan_or_404(plan_id)
        inputs = PlanChangeInputSerializer(data=request.data)
        inputs.is_valid(raise_exception=True)
        change = inputs.validated_data
        with transaction.atomic():  # every change asked for, or none
            if "pinned" in change:  # each change checks its own permission and names it in a refusal
                plan = plan_changes.plan_pin_set(plan=plan, pinned=change["pinned"], by=request.user)
            if "name" in change or "tags" in change or "pinned" not in change:  # an empty change is still checked
                plan = plan_changes.plan_labels_set(plan=plan, name=change.get("name"), tags=change.get("tags"), by=request.user)
        return Response(PlanSummarySerializer(plan, context={"request": request}).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, plan_id):
        plan_changes.plan_delete(plan=_plan_or_404(plan_id), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PlanExportCsvApi(APIView):
    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request, plan_id):
        plan = _plan_or_404(plan_id)
        response = HttpResponse(plan_csv(plan), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="plan-{plan.id}.csv"'
        return response
