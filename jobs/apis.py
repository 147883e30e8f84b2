from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import selectors, services
from jobs.models import ValidationRun
from jobs.serializers import ValidationListFilterSerializer, ValidationRunInputSerializer, ValidationRunSerializer
from planner.models import Plan
from planner.selectors import plan_find


def _get_or_404(model, pk):
    try:
        return model.objects.get(pk=pk)
    except model.DoesNotExist:
        raise Http404(f"No such {model._meta.verbose_name}.") from None


class PlanValidationsApi(ListAPIView):
    """A plan's validation runs; POST queues a trial of one of its ranked configurations."""

    serializer_class = ValidationRunSerializer
    filter_backends: list = []

    def get_queryset(self):
        return selectors.validation_run_list(plan=_get_or_404(Plan, self.kwargs["plan_id"]))

    @extend_schema(request=ValidationRunInputSerializer, responses={201: ValidationRunSerializer, 202: ValidationRunSerializer})
    def post(self, request, plan_id):
        """201: the run is stored and its message is with the broker. 202: the run is stored but the
        broker did not take its message (down, or slower than its timeout); the recovery sweep sends
        it, so the client must not retry (a retry would make a second run)."""
        plan = _get_or_404(Plan, plan_id)
        serializer = ValidationRunInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = services.validation_run_create(plan=plan, user=request.user, **serializer.validated_data)
        accepted = getattr(run, "published", None) is False
        return Response(ValidationRunSerializer(run).data, status=status.HTTP_202_ACCEPTED if accepted else status.HTTP_201_CREATED)


class ValidationListApi(ListAPIView):
    """All validation runs, newest first; filter by status, trial or plan."""

    serializer_class = ValidationRunSerializer
    filter_backends: list = []

    @extend_schema(parameters=[ValidationListFilterSerializer])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        filters = ValidationListFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        plan = None
        if params.get("plan"):
            plan = plan_find(plan_id=params["plan"])
            if plan is None:
                return ValidationRun.objects.none()
        return selectors.validation_run_list(plan=plan, status=params.get("status"), trial=params.get("trial"))


class ValidationDetailApi(APIView):
    @extend_schema(responses={200: ValidationRunSerializer})
    def get(self, request, run_id):
        return Response(ValidationRunSerializer(_get_or_404(ValidationRun, run_id)).data)


class ValidationCancelApi(APIView):
    """Cancel a queued or running run: its creator or staff only (403 for anyone else)."""

    @extend_schema(request=None, responses={200: ValidationRunSerializer})
    def post(self, request, run_id):
        run = services.validation_run_cancel(run=_get_or_404(ValidationRun, run_id), by=request.user)
        return Response(ValidationRunSerializer(run).data)



class JobsHealthApi(APIView):
    """200 while the recovery sweep and a worker heartbeat are fresh, else 503 saying what stopped
    (a beat that died, no worker): for a load balancer's or Compose's health check."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: dict, 503: dict})
    def get(self, request):
        health = selectors.jobs_health()
        return Response(health, status=status.HTTP_200_OK if health["ok"] else status.HTTP_503_SERVICE_UNAVAILABLE)
