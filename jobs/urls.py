from __future__ import annotations

from django.urls import path

from jobs.apis import PlanValidationsApi, ValidationCancelApi, ValidationDetailApi, ValidationListApi

urlpatterns = [
    path("plans/<uuid:plan_id>/validations/", PlanValidationsApi.as_view(), name="plan-validations"),
    path("validations/", ValidationListApi.as_view(), name="validation-list"),
    path("validations/<uuid:run_id>/", ValidationDetailApi.as_view(), name="validation-detail"),
    path("validations/<uuid:run_id>/cancel/", ValidationCancelApi.as_view(), name="validation-cancel"),
]
