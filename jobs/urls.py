from __future__ import annotations

from django.urls import path

from jobs.apis import JobsHealthApi, PlanValidationsApi, ValidationCancelApi, ValidationDetailApi, ValidationListApi

urlpatterns = [
    path("plans/<uuid:plan_id>/validations/", PlanValidationsApi.as_view(), name="plan-validations"),
    path("validations/", ValidationListApi.as_view(), name="validation-list"),
    path("validations/<uuid:run_id>/", ValidationDetailApi.as_view(), name="validation-detail"),
    path("health/jobs/", JobsHealthApi.as_view(), name="jobs-health"),
    path("validations/<uuid:run_id>/cancel/", ValidationCancelApi.as_view(), name="validation-cancel"),
]
