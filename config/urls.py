from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts.throttling import SignInRateThrottle, rate_limited

urlpatterns = [
    # Password attempts on the admin's sign-in page are rate-limited like the UI's.
    path("admin/login/", rate_limited(SignInRateThrottle)(admin.site.login)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("planner.urls")),
    path("api/v1/", include("jobs.urls")),
    path("api/v1/", include("hwcatalog.urls")),
    path("api/v1/", include("accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view, and our template of its page: Swagger UI's init script and style are URLs, not inline
    # (the Content-Security-Policy allows neither inline).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="frontend/swagger_ui.html"), name="api-docs"),
    path("", include("frontend.urls")),
]


def api_aware_404(request, exception=None):
    """A JSON 404 under /api/ (a malformed id never reaches DRF), the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.views.defaults import page_not_found

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def api_aware_400(request, exception=None):
    """A JSON 400 under /api/ for the 400s Django raises itself (a Host not in ALLOWED_HOSTS, too many
    form fields), the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.views.defaults import bad_request

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return bad_request(request, exception)


handler400 = api_aware_400
handler404 = api_aware_404
