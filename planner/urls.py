from __future__ import annotations

from django.urls import path

from planner.apis import EstimateApi, PlanDetailApi, PlanExportCsvApi, PlanListCreateApi
from planner.fleet_apis import FleetDetailApi, FleetExportCsvApi, FleetListCreateApi
from planner.simulation_apis import SimulationDetailApi, SimulationListCreateApi

urlpatterns = [
    path("estimates/", EstimateApi.as_view(), name="estimate"),
    path("plans/", PlanListCreateApi.as_view(), name="plan-list"),
    path("plans/<uuid:plan_id>/", PlanDetailApi.as_view(), name="plan-detail"),
    path("plans/<uuid:plan_id>/export.csv", PlanExportCsvApi.as_view(), name="plan-export-csv"),
    path("fleets/", FleetListCreateApi.as_view(), name="fleet-list"),
    path("fleets/<uuid:fleet_id>/", FleetDetailApi.as_view(), name="fleet-detail"),
    path("fleets/<uuid:fleet_id>/export.csv", FleetExportCsvApi.as_view(), name="fleet-export-csv"),
    path("simulations/", SimulationListCreateApi.as_view(), name="simulation-list"),
    path("simulations/<uuid:run_id>/", SimulationDetailApi.as_view(), name="simulation-detail"),
]
