from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, parsers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from hwcatalog import cache, selectors, services
from hwcatalog.filters import ChipFilter, ModelArchFilter, OfferingFilter
from hwcatalog.models import Chip
from hwcatalog.permissions import ReadPublicCatalogTokenOrStaff
from hwcatalog.schema import ErrorDetailSerializer
from hwcatalog.serializers import (
    ChipSerializer,
    HfConfigImportSerializer,
    ImportResultSerializer,
    ModelArchSerializer,
    OfferingSerializer,
)
from inputs.parsers import LimitedJSONParser


class HistoryEntrySerializer(serializers.Serializer):
    history_id = serializers.IntegerField()
    changed_at = serializers.DateTimeField()
    change = serializers.ChoiceField(choices=["created", "changed", "deleted"])
    reason = serializers.CharField(allow_null=True)
    changes = serializers.DictField(help_text="field -> {old, new}")


class HistoryEntryWithEditorSerializer(HistoryEntrySerializer):
    """What staff see: usernames are not public, so everyone else gets the entry without `changed_by`."""

    changed_by = serializers.CharField(
        allow_null=True, required=False, help_text="The editor's username (null: loadcatalog). Staff only: absent for anyone else."
    )


class CatalogHistoryMixin:
    """GET .../{slug}/history/: when the row changed, its old and new values, and (for staff) who changed it."""

    @extend_schema(responses={200: HistoryEntryWithEditorSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def history(self, request, slug=None):
        row = self.get_object()
        staff = bool(request.user.is_staff)
        serializer = HistoryEntryWithEditorSerializer if staff else HistoryEntrySerializer
        return Response(serializer(selectors.catalog_history(row=row, with_editors=staff), many=True).data)


class InUse(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The row is in use."
    default_code = "in_use"


IN_USE = OpenApiResponse(ErrorDetailSerializer, description="A stored plan used the row (for a chip: it or one of its offerings).")


class CatalogWritesMixin:
    """Writes need a catalog-scoped token or a staff session; a delete is refused (409) while a
    stored plan used the row, since a chip's delete would take its offerings with it."""

    permission_classes = [ReadPublicCatalogTokenOrStaff]

    @extend_schema(responses={204: None, 409: IN_USE})
    def destroy(self, request, *args, **kwargs):
        return super().destroy(request, *args, **kwargs)

    def perform_destroy(self, instance) -> None:
        try:
            services.catalog_row_delete(row=instance)
        except services.CatalogRowInUse as exc:
            raise InUse(str(exc)) from None


class CachedCatalogReadsMixin:
    """GET list and detail answered from hwcatalog/cache.py when the catalog has not changed since
    the same path (with its query) was last rendered as JSON in this process."""

    _catalog_cache_key = None

    def list(self, request, *args, **kwargs):
        return self._from_cache(request, super().list, *args, **kwargs)

    def retrieve(self, request, *args, **kwargs):
        return self._from_cache(request, super().retrieve, *args, **kwargs)

    def _from_cache(self, request, handler, *args, **kwargs):
        if request.accepted_renderer.format == "json":
            key = (cache.catalog_version_token(), request.get_full_path(), request.accepted_media_type)
            hit = cache.cached_body(key)
            if hit is not None:
                return HttpResponse(hit[0], content_type=hit[1])
            self._catalog_cache_key = key
        return handler(request, *args, **kwargs)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if self._catalog_cache_key is not None and isinstance(response, Response) and response.status_code == 200:
            response.render()
            cache.cache_body(self._catalog_cache_key, response.content, response["Content-Type"])
        return response


class ChipViewSet(CachedCatalogReadsMixin, CatalogHistoryMixin, CatalogWritesMixin, viewsets.ModelViewSet):
    """Chips: CPUs, GPUs, TPUs, LPUs and other accelerators, with sourced peaks."""

    serializer_class = ChipSerializer
    lookup_field = "slug"
    lookup_value_regex = "[^/]+"  # slugs carry dots: llama-3.1-8b
    filterset_class = ChipFilter
    search_fields = ["slug", "name", "vendor"]
    ordering_fields = ["slug", "vendor", "memory_capacity_bytes", "memory_bandwidth_bytes_per_s", "peak_bf16_flops_per_s", "tdp_watts"]

    def get_queryset(self):
        # The list is the public catalog; ?measured=true lists the validation workers' measured devices
        # instead. A measured device is still read, by slug, from the runs that name it.
        if self.action != "list":
            return Chip.objects.all()
        if self.request.query_params.get("measured") == "true":
            return selectors.measured_device_list()
        return selectors.chip_list()


class ModelArchViewSet(CachedCatalogReadsMixin, CatalogHistoryMixin, CatalogWritesMixin, viewsets.ModelViewSet):
    """Model architectures: dense, GQA/MQA, MLA, MoE, diffusion and block diffusion."""

    serializer_class = ModelArchSerializer
    lookup_field = "slug"
    lookup_value_regex = "[^/]+"  # slugs carry dots: llama-3.1-8b
    filterset_class = ModelArchFilter
    search_fields = ["slug", "name", "family"]
    ordering_fields = ["slug", "family", "total_params", "active_params", "max_context_tokens"]

    def get_queryset(self):
        return selectors.model_list()


class OfferingViewSet(CachedCatalogReadsMixin, CatalogHistoryMixin, CatalogWritesMixin, viewsets.ModelViewSet):
    """Prices: rented (per chip-hour) or purchased (amortised + power)."""

    serializer_class = OfferingSerializer
    lookup_field = "slug"
    lookup_value_regex = "[^/]+"  # slugs carry dots: llama-3.1-8b
    filterset_class = OfferingFilter
    search_fields = ["slug", "provider", "region", "instance_name"]
    ordering_fields = ["slug", "usd_per_chip_hour", "as_of", "provider"]

    def get_queryset(self):
        return selectors.offering_list()


class ModelImportApi(APIView):
    """Create a model from a Hugging Face config.json (upload `config_file`, or JSON `config`).
    A catalog write: a catalog-scoped token or a staff session."""

    parser_classes = [LimitedJSONParser, parsers.MultiPartParser, parsers.FormParser]
    permission_classes = [ReadPublicCatalogTokenOrStaff]

    @extend_schema(request=HfConfigImportSerializer, responses={201: ImportResultSerializer})
    def post(self, request):
        serializer = HfConfigImportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        model, style = services.model_import_hf(
            config=data["config"], slug=data["slug"], name=data.get("name"), family=data.get("family"), source=data.get("source"),
            hf_id=data.get("hf_id", ""), quant_config=data.get("quant_config"),
        )  # fmt: skip
        return Response(ImportResultSerializer({"model": model, "detected_style": style}).data, status=status.HTTP_201_CREATED)
