from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts.throttling import SignInRateThrottle, rate_limited
from frontend import views

app_name = "frontend"
sign_in = rate_limited(SignInRateThrottle)(
    auth_views.LoginView.as_view(template_name="frontend/login.html", redirect_authenticated_user=True)
)
urlpatterns = [
    path("", views.home, name="home"),
    path("plans/", views.plan_list, name="plan-list"),
    path("plans/compare/", views.plan_compare, name="plan-compare"),
    path("plans/<uuid:plan_id>/", views.plan_detail, name="plan-detail"),
    path("plans/<uuid:plan_id>/labels/", views.plan_labels, name="plan-labels"),
    path("plans/<uuid:plan_id>/validate/", views.validation_start, name="validation-start"),
    path("plans/<uuid:plan_id>/validations/<uuid:run_id>/", views.validation_fragment, name="validation-fragment"),
    path("fleets/", views.fleet_list, name="fleet-list"),
    path("fleets/<uuid:fleet_id>/", views.fleet_detail, name="fleet-detail"),
    path("simulations/", views.simulation_list, name="simulation-list"),
    path("simulations/new/", views.simulation_new, name="simulation-new"),
    path("simulations/<uuid:run_id>/", views.simulation_detail, name="simulation-detail"),
    path("catalog/", views.catalog_index, name="catalog"),
    path("catalog/compare/", views.chip_compare, name="chip-compare"),
    path("catalog/prices/", views.price_freshness, name="price-freshness"),
    path("catalog/chips/<str:slug>/", views.chip_detail, name="chip-detail"),
    path("catalog/models/<str:slug>/", views.model_detail, name="model-detail"),
    # Web UI sign-in (writes need an account); settings.LOGIN_URL names this.
    path("accounts/login/", sign_in, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
