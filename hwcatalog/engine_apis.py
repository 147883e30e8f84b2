"""GET /api/v1/engines/: the serving engines of the catalog, read-only (the data files and the admin
change them), with the scheduler defaults a plan assumes on each."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from hwcatalog.models import ServingEngine


class ServingEngineSerializer(serializers.ModelSerializer):
    class Meta:
        model = ServingEngine
        exclude = ["id"]


class ServingEngineViewSet(viewsets.ReadOnlyModelViewSet):
    """Serving engines (TensorRT-LLM, vLLM, SGLang): the chips and dtypes each serves, its scheduler
    defaults (memory rule and fraction, batch cap, prefill token budget) with their sources, and the name
    of its fitted efficiency profile (planner/data/engine_profiles.json)."""

    serializer_class = ServingEngineSerializer
    queryset = ServingEngine.objects.all()
    lookup_field = "slug"
    pagination_class = None
