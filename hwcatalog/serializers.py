from __future__ import annotations

from rest_framework import serializers

from hwcatalog.importers.config_file import ConfigFileError, read_config_file
from hwcatalog.models import Chip, ModelArch, Offering, chip_name_clashes
from hwcatalog.validation import HF_ID, SLUG_PATTERN, validate_arch, validate_chip, validate_offering, validate_sources
from inputs.serializers import LimitedJSONField, StrictModelSerializer, StrictSerializer


class _RuleValidated(StrictModelSerializer):
    """Runs the shared catalog rules (hwcatalog.validation) on the merged instance + input,
    so partial updates are checked against the row they will produce."""

    rules = staticmethod(lambda data: {})

    def validate(self, attrs):
        merged = {}
        if self.instance is not None:
            for field in self.Meta.model._meta.concrete_fields:
                merged[field.name] = getattr(self.instance, field.attname)
        merged.update(attrs)
        errors = self.rules(merged)
        if "sources" in merged:
            message = validate_sources(merged["sources"])
            if message:
                errors["sources"] = message
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ChipSerializer(_RuleValidated):
    rules = staticmethod(validate_chip)
    ridge_point_bf16_flops_per_byte = serializers.SerializerMethodField()

    class Meta:
        model = Chip
        exclude = ["id"]
        read_only_fields = ["created_at", "updated_at"]

    def get_ridge_point_bf16_flops_per_byte(self, chip: Chip) -> float | None:
        return chip.ridge_point_flops_per_byte("bf16")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        stored = (self.instance.slug, self.instance.aliases) if self.instance is not None else None
        errors = chip_name_clashes(slug=attrs.get("slug"), aliases=attrs.get("aliases"), pk=getattr(self.instance, "pk", None), kept=stored)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class OfferingSerializer(_RuleValidated):
    rules = staticmethod(validate_offering)
    chip = serializers.SlugRelatedField(slug_field="slug", queryset=Chip.objects.all())

    class Meta:
        model = Offering
        exclude = ["id"]
        read_only_fields = ["created_at", "updated_at"]


class ModelArchSerializer(_RuleValidated):
    rules = staticmethod(validate_arch)
    derived_parameter_count = serializers.SerializerMethodField()
    derived_active_parameter_count = serializers.SerializerMethodField()
    kv_cache_bytes_per_token_bf16 = serializers.SerializerMethodField()

    class Meta:
        model = ModelArch
        exclude = ["id"]
        read_only_fields = ["created_at", "updated_at"]

    def get_derived_parameter_count(self, model: ModelArch) -> int:
        return model.parameter_count()

    def get_derived_active_parameter_count(self, model: ModelArch) -> int:
        return model.active_parameter_count()

    def get_kv_cache_bytes_per_token_bf16(self, model: ModelArch) -> float:
        return model.kv_cache_bytes_per_token("bf16")


class HfConfigImportSerializer(StrictSerializer):
    """Either a multipart upload `config_file`, or a JSON object `config`."""

    slug = serializers.RegexField(SLUG_PATTERN, max_length=80)
    name = serializers.CharField(max_length=200, required=False)
    family = serializers.CharField(max_length=80, required=False)
    source = serializers.CharField(max_length=1000, required=False)
    hf_id = serializers.RegexField(HF_ID.pattern, max_length=200, required=False)
    config = LimitedJSONField(required=False)
    config_file = serializers.FileField(required=False)
    quant_config = LimitedJSONField(required=False, help_text="The checkpoint's hf_quant_config.json (NVIDIA ModelOpt), if it has one.")

    def validate_hf_id(self, hf_id: str) -> str:
        if ModelArch.objects.filter(hf_id=hf_id).exists():
            raise serializers.ValidationError(f"A model with hf_id {hf_id!r} already exists.")
        return hf_id

    def validate_quant_config(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("An hf_quant_config.json must be a JSON object.")
        return value

    def validate_slug(self, slug: str) -> str:
        if ModelArch.objects.filter(slug=slug).exists():
            raise serializers.ValidationError(f"A model with slug {slug!r} already exists.")
        return slug

    def validate_config_file(self, upload):
        try:
            return read_config_file(upload)
        except ConfigFileError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        if "config_file" in attrs and "config" in attrs:
            raise serializers.ValidationError({"config": "Send a config.json once: as `config_file` (upload) or as `config`, not both."})
        config = attrs.get("config_file", attrs.get("config"))
        if config is None:
            raise serializers.ValidationError({"config": "Send a config.json as `config_file` (upload) or `config` (JSON object)."})
        if not isinstance(config, dict):
            raise serializers.ValidationError({"config": "A config.json must be a JSON object."})
        attrs["config"] = config
        return attrs


class ImportResultSerializer(serializers.Serializer):
    model = ModelArchSerializer()
    detected_style = serializers.CharField()
