from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from hwcatalog.apis import ChipViewSet, ModelArchViewSet, ModelImportApi, OfferingViewSet
from hwcatalog.engine_apis import ServingEngineViewSet

router = DefaultRouter()
router.register("chips", ChipViewSet, basename="chip")
router.register("models", ModelArchViewSet, basename="modelarch")
router.register("offerings", OfferingViewSet, basename="offering")
router.register("engines", ServingEngineViewSet, basename="servingengine")

urlpatterns = [
    path("models/import/", ModelImportApi.as_view(), name="model-import"),
    path("", include(router.urls)),
]
