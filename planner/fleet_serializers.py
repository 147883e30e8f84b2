"""Input validation for fleet plans (POST /api/v1/fleets/, manage.py fleet). Every bad value is a 400 naming its field."""
from __future__ import annotations

import re

from rest_framework import serializers

from hwcatalog.models import Chip, ModelArch
from hwcatalog.validation import SLUG_PATTERN
from inputs.serializers import StrictSerializer
from planner.engine.fleet.candidates import DEFAULT_TARGET_UTILISATION
from planner.engine.fleet.specs import APPLY_TO
from planner.engine_profiles import serving_engines
from planner.serializers import MAX_TOKENS, SERVING_ENGINE_HELP, HardwareFilterSerializer, SlugOf, check_context

MAX_CLASSES = 20
MAX_MONTHS = 36
MAX_SHAPE_HOURS = 24
MAX_CHIPS_LIMITED = 100


class RequestClassSerializer(StrictSerializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,59}$", help_text="Unique in the fleet: letters, digits, space, _ . -")
    prompt_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS)
    output_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS)
    requests_per_s = serializers.FloatField(min_value=0.0, max_value=1e6, help_text="At a load-shape value of 1.0 and month 1.")
    ttft_slo_s = serializers.FloatField(min_value=1e-6, max_value=86_400, required=False)
    tpot_slo_s = serializers.FloatField(min_value=1e-6, max_value=3_600, required=False)
    interruptible = serializers.BooleanField(default=False, help_text="May run on spot capacity (batch work that tolerates preemption).")


class ChipLimitSerializer(StrictSerializer):
    max = serializers.IntegerField(min_value=0, max_value=10_000_000, required=False, help_text="Supply: at most this many chips.")
    min = serializers.IntegerField(min_value=0, max_value=10_000_000, required=False, help_text="At least this many (already bought or contracted).")
    ownership = serializers.ChoiceField(choices=["any", "rent", "own"], default="any", help_text="Rent this chip, own it, or either.")

    def validate(self, attrs):
        if "max" in attrs and "min" in attrs and attrs["min"] > attrs["max"]:
            raise serializers.ValidationError({"min": f"{attrs['min']} is above max ({attrs['max']})."})
        return attrs


class LimitsSerializer(StrictSerializer):
    wall_kw_max = serializers.FloatField(min_value=0.0, max_value=1e7, required=False, help_text="Total power at the wall (PUE included), kW.")
    racks_max = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    rack_kw_max = serializers.FloatField(min_value=0.1, max_value=1_000.0, required=False, help_text="kW at the wall one rack feeds and cools.")
    systems_per_rack = serializers.IntegerField(min_value=1, max_value=64, required=False, help_text="Servers one rack holds; a rack-scale system fills one.")
    chips = serializers.DictField(child=ChipLimitSerializer(), required=False, help_text="Per chip slug: {max, min, ownership}.")
    apply_to = serializers.ChoiceField(choices=APPLY_TO, default="owned",
                                       help_text="Which offerings the power and rack limits count: owned (your datacentre) or all.")  # fmt: skip

    def validate_chips(self, value):
        if len(value) > MAX_CHIPS_LIMITED:
            raise serializers.ValidationError(f"At most {MAX_CHIPS_LIMITED} chips.")
        malformed = sorted(slug for slug in value if not re.fullmatch(SLUG_PATTERN, slug))
        if malformed:
            raise serializers.ValidationError(f"Not a chip slug: {', '.join(map(repr, malformed))}.")
        known = set(Chip.objects.filter(slug__in=list(value), measured=False).values_list("slug", flat=True))
        unknown = [slug for slug in value if slug not in known]
        if unknown:
            raise serializers.ValidationError(f"No chip with slug {', '.join(map(repr, sorted(unknown)))}.")
        return value

    def validate(self, attrs):
        if attrs.get("racks_max") is not None and attrs.get("rack_kw_max") is None and attrs.get("systems_per_rack") is None:
            raise serializers.ValidationError({"racks_max": "Give rack_kw_max or systems_per_rack too: what one rack holds."})
        return attrs


class HorizonSerializer(StrictSerializer):
    months = serializers.IntegerField(min_value=1, max_value=MAX_MONTHS, required=False, help_text="Default 1.")
    monthly_growth = serializers.FloatField(min_value=-0.5, max_value=10.0, required=False,
                                            help_text="Compound growth of every rate per month (0.05: 5%); default 0.")  # fmt: skip
    growth = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=1e4), required=False, min_length=1, max_length=MAX_MONTHS,
                                   help_text="Instead of months and monthly_growth: each month's rate multiplier.")  # fmt: skip
    hourly_shape = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=100.0), required=False, min_length=1,
                                         max_length=MAX_SHAPE_HOURS,
                                         help_text="A day's load in equal slots (24: hourly), each a multiplier of the rates.")  # fmt: skip

    def validate(self, attrs):
        if "growth" in attrs and ("months" in attrs or "monthly_growth" in attrs):
            raise serializers.ValidationError({"growth": "Give growth, or months and monthly_growth, not both."})
        if "growth" not in attrs:
            attrs.setdefault("months", 1)
            attrs.setdefault("monthly_growth", 0.0)
        if "hourly_shape" in attrs and max(attrs["hourly_shape"]) <= 0:
            raise serializers.ValidationError({"hourly_shape": "At least one slot must carry load."})
        return attrs


class FleetInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=120, required=False, allow_blank=True, default="", help_text="What the fleet is for, in words.")
    model = SlugOf(ModelArch)
    classes = RequestClassSerializer(many=True, min_length=1, max_length=MAX_CLASSES)
    hardware = HardwareFilterSerializer(required=False)
    limits = LimitsSerializer(required=False)
    horizon = HorizonSerializer(required=False)
    target_utilisation = serializers.FloatField(min_value=0.05, max_value=1.0, default=DEFAULT_TARGET_UTILISATION,
                                                help_text="Share of a replica's capacity the fleet loads it to.")  # fmt: skip
    serving_engine = serializers.ChoiceField(choices=serving_engines(), required=False,
                                             help_text=SERVING_ENGINE_HELP + " A fleet naming one uses NVIDIA GPUs only.")  # fmt: skip

    def validate(self, attrs):
        if attrs["model"].generation_kind != "autoregressive":
            raise serializers.ValidationError({"model": f"{attrs['model'].slug} is a {attrs['model'].generation_kind} model: fleets plan autoregressive decoding."})
        names = [c["name"] for c in attrs["classes"]]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise serializers.ValidationError({"classes": f"Class names must be unique: {', '.join(duplicates)}."})
        if not any(c["requests_per_s"] > 0 for c in attrs["classes"]):
            raise serializers.ValidationError({"classes": "At least one class needs requests_per_s above 0."})
        for i, c in enumerate(attrs["classes"]):
            try:
                check_context(attrs["model"], c)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"classes": {i: exc.detail}}) from None
        attrs["hardware"] = attrs.get("hardware") or HardwareFilterSerializer().to_internal_value({})
        attrs["limits"] = attrs.get("limits") or LimitsSerializer().to_internal_value({})
        attrs["horizon"] = attrs.get("horizon") or HorizonSerializer().to_internal_value({})
        return attrs
