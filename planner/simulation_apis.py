"""POST /api/v1/simulations/ and GET /api/v1/simulations/{id}/ (docs/api.md#simulations): thin views
over planner.simulation_services."""
from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import parsers, serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from inputs.parsers import LimitedJSONParser
from planner import selectors, simulation_services
from planner.simulation_inputs import nested_error
from planner.models import SimulationRun
from planner.simulation_serializers import SimulationInputSerializer, SimulationListFilterSerializer

TRACE_SUMMARY_SCHEMA = {
    "type": "object", "nullable": True,
    "properties": {"rows": {"type": "integer"}, "format": {"type": "string"}, "ignored_columns": {"type": "array", "items": {"type": "string"}}},
}  # fmt: skip
FROM_PLAN_SCHEMA = {
    "type": "object", "nullable": True, "description": "The plan row this simulation was started from; null for any other.",
    "properties": {"plan": {"type": "string", "format": "uuid", "nullable": True}, "rank": {"type": "integer"}},
}  # fmt: skip


class SimulationUrlMixin(serializers.Serializer):
    url = serializers.SerializerMethodField(help_text="The simulation's address: GET it until status is done or failed.")
    from_plan = serializers.SerializerMethodField()

    @extend_schema_field(FROM_PLAN_SCHEMA)
    def get_from_plan(self, run: SimulationRun):
        # A deleted plan leaves its rank: the run says which row it checked, and that the plan is gone (plan null).
        return None if run.from_rank is None else {"plan": run.from_plan_id, "rank": run.from_rank}

    def get_url(self, run: SimulationRun) -> str:
        path = reverse("simulation-detail", kwargs={"run_id": run.id})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class SimulationOutputSerializer(SimulationUrlMixin, serializers.ModelSerializer):
    trace = serializers.SerializerMethodField(help_text="An uploaded trace: its rows, format and the columns not used (the rows are not returned).")
    results = serializers.JSONField(read_only=True, help_text="Percentiles of TTFT, TPOT and end-to-end latency, throughput, goodput, "
                                                              "SLO checks, KV use and queue over time, Little's law, cost per token (docs/simulation.md).")  # fmt: skip

    class Meta:
        model = SimulationRun
        fields = ["id", "url", "model_slug", "chip_slug", "request_count", "inputs", "trace", "status", "progress", "error", "created_at",
                  "finished_at", "plan", "candidate_rank", "from_plan", "results"]  # fmt: skip

    @extend_schema_field(TRACE_SUMMARY_SCHEMA)
    def get_trace(self, run: SimulationRun):
        if not run.trace:
            return None
        return {"rows": len(run.trace.get("arrival_s", [])), "format": run.trace.get("format"), "ignored_columns": run.trace.get("ignored_columns", [])}


class SimulationSummarySerializer(SimulationUrlMixin, serializers.ModelSerializer):
    class Meta:
        model = SimulationRun
        fields = ["id", "url", "model_slug", "chip_slug", "request_count", "status", "progress", "created_at", "from_plan"]



class SimulationListCreateApi(ListAPIView):
    """List stored simulations (newest first; a plan's candidates are listed with their plan), or
    simulate one configuration under one workload. A small one (at most SIMULATION_INLINE_MAX_REQUESTS
    requests) answers 201 with its results; a bigger one 202 with the address to poll."""

    serializer_class = SimulationSummarySerializer
    filter_backends: list = []
    parser_classes = [LimitedJSONParser, parsers.MultiPartParser, parsers.FormParser]

    @extend_schema(parameters=[SimulationListFilterSerializer])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        filters = SimulationListFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.simulation_list(**filters.validated_data)

    @extend_schema(
        request={"application/json": SimulationInputSerializer, "multipart/form-data": SimulationInputSerializer},
        responses={
            201: OpenApiResponse(SimulationOutputSerializer, description="A small simulation, run inside the request: the stored run with its results."),
            202: OpenApiResponse(SimulationSummarySerializer, description="A bigger one, queued for a worker: poll `url` (the `Location` header)."),
        },
    )
    def post(self, request):
        serializer = SimulationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            run = simulation_services.simulation_create(data=serializer.validated_data, raw_inputs=serializer.data, user=request.user)
        except simulation_services.SimulationRefused as exc:  # a dotted field ("scheduler.memory_fraction") nests as the serializer's errors do
            return Response(nested_error(exc.field, str(exc)), status=status.HTTP_400_BAD_REQUEST)
        if run.pending:
            queued = SimulationSummarySerializer(run, context={"request": request}).data
            return Response(queued, status=status.HTTP_202_ACCEPTED, headers={"Location": queued["url"]})
        return Response(SimulationOutputSerializer(run, context={"request": request}).data, status=status.HTTP_201_CREATED)


def _run_or_404(run_id) -> SimulationRun:
    try:
        return SimulationRun.objects.get(pk=run_id)
    except SimulationRun.DoesNotExist:
        raise Http404("No such simulation.") from None


class SimulationDetailApi(APIView):
    """A stored simulation. DELETE: its creator or staff only (403 for anyone else)."""

    @extend_schema(responses={200: SimulationOutputSerializer})
    def get(self, request, run_id):
        return Response(SimulationOutputSerializer(_run_or_404(run_id), context={"request": request}).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, run_id):
        simulation_services.simulation_delete(run=_run_or_404(run_id), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
