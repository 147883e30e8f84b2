"""POST/GET /api/v1/fleets/, GET/DELETE /api/v1/fleets/{id}/, GET .../export.csv (docs/api.md#fleets): thin
views over planner.fleet_services."""
from __future__ import annotations

from django.http import Http404, HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from planner import fleet_services
from planner.fleet_serializers import FleetInputSerializer
from planner.models import FleetPlan


class FleetUrlMixin(serializers.Serializer):
    url = serializers.SerializerMethodField(help_text="The fleet plan's address: GET it until status is done or failed.")

    def get_url(self, fleet: FleetPlan) -> str:
        path = reverse("fleet-detail", kwargs={"fleet_id": fleet.id})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class FleetOutputSerializer(FleetUrlMixin, serializers.ModelSerializer):
    results = serializers.JSONField(read_only=True, help_text="Allocation per class and configuration, cost per month and per 1M tokens, "
                                                              "the pessimistic cost, limit use and slack, the best single-chip fleet (docs/fleet.md).")  # fmt: skip
    inputs = serializers.JSONField(read_only=True)

    class Meta:
        model = FleetPlan
        fields = ["id", "url", "name", "model_slug", "status", "progress", "error", "candidate_count", "usd_per_month", "created_at",
                  "finished_at", "inputs", "results"]  # fmt: skip


class FleetSummarySerializer(FleetUrlMixin, serializers.ModelSerializer):
    class Meta:
        model = FleetPlan
        fields = ["id", "url", "name", "model_slug", "status", "progress", "candidate_count", "usd_per_month", "created_at"]


class FleetListCreateApi(ListAPIView):
    """List stored fleet plans (newest first), or plan a fleet: the cheapest mix of configurations for a
    traffic mix under power, rack and supply limits, over a horizon. A small one (at most
    FLEET_INLINE_MAX_CANDIDATES configurations) answers 201 with its results; a bigger one 202 with the
    address to poll. Limits no fleet meets: 400 naming the binding one."""

    serializer_class = FleetSummarySerializer
    filter_backends: list = []
    queryset = FleetPlan.objects.all()

    @extend_schema(
        request=FleetInputSerializer,
        responses={
            201: OpenApiResponse(FleetOutputSerializer, description="A small fleet, planned inside the request: the stored fleet plan."),
            202: OpenApiResponse(FleetSummarySerializer, description="A bigger one, queued for a worker: poll `url` (the `Location` header)."),
        },
    )
    def post(self, request):
        serializer = FleetInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            fleet = fleet_services.fleet_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
        except fleet_services.FleetRefused as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        if fleet.pending:
            queued = FleetSummarySerializer(fleet, context={"request": request}).data
            return Response(queued, status=status.HTTP_202_ACCEPTED, headers={"Location": queued["url"]})
        return Response(FleetOutputSerializer(fleet, context={"request": request}).data, status=status.HTTP_201_CREATED)


def _fleet_or_404(fleet_id) -> FleetPlan:
    try:
        return FleetPlan.objects.get(pk=fleet_id)
    except FleetPlan.DoesNotExist:
        raise Http404("No such fleet plan.") from None


class FleetDetailApi(APIView):
    """A stored fleet plan. DELETE: its creator or staff only (403 for anyone else); nothing else changes once stored."""

    @extend_schema(responses={200: FleetOutputSerializer})
    def get(self, request, fleet_id):
        return Response(FleetOutputSerializer(_fleet_or_404(fleet_id), context={"request": request}).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, fleet_id):
        fleet_services.fleet_delete(fleet=_fleet_or_404(fleet_id), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class FleetExportCsvApi(APIView):
    """The allocation as CSV: one row per class, configuration and month."""

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request, fleet_id):
        fleet = _fleet_or_404(fleet_id)
        response = HttpResponse(fleet_services.fleet_csv(fleet), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="fleet-{fleet.id}.csv"'
        return response
