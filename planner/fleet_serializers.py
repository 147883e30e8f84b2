"""Input validation for fleet plans (POST /api/v1/fleets/, manage.py fleet). Every bad value is a 400 naming its field."""
from __future__ import annotations

import re

from django.conf import settings
from rest_framework import serializers

from hwcatalog.models import Chip, ModelArch
from hwcatalog.validation import SLUG_PATTERN
from inputs.serializers import StrictSerializer
from planner.engine.fleet.candidates import DEFAULT_TARGET_UTILISATION
from planner.engine.fleet.specs import APPLY_TO
from planner.engine.simulation.workload import Lengths, WorkloadError
from planner.serializers import (
    MAX_TOKENS, SEARCH_WITHOUT_ENGINE, SERVING_ENGINE_HELP, HardwareFilterSerializer, ServingEngineName, SlugOf, check_context,
)
from planner.simulation_inputs import LengthsSerializer, check_lengths_fit, nested_error
from planner.simulation_serializers import SimulationInputSerializer
from planner.simulation_traces import TRACE_FORMATS, TraceError, parse_trace

MAX_CLASSES = 20
MAX_MONTHS = 36
MAX_SHAPE_HOURS = 24
MAX_CHIPS_LIMITED = 100


def mean_tokens(spec: dict) -> float:
    """The mean of a length distribution (planner.simulation_inputs.LengthsSerializer): a histogram's by its bins'
    midpoints, a normal's or lognormal's by its mean, a fixed one's tokens."""
    kind = spec.get("kind", "fixed")
    if kind == "fixed":
        return float(spec["tokens"])
    if kind == "histogram":
        edges, weights = spec["bin_edges_tokens"], spec["bin_weights"]
        mids = [(lo + hi) / 2 for lo, hi in zip(edges[:-1], edges[1:])]
        return sum(m * w for m, w in zip(mids, weights)) / sum(weights)
    return float(spec["mean_tokens"])


class RequestClassSerializer(StrictSerializer):
    """A class's lengths are `prompt_tokens` and `output_tokens`, or distributions `prompt` and `output` (a
    histogram, normal, lognormal or fixed, as a simulation's workload takes them): the class is planned at
    their means, and the largest they can draw must fit the model's context."""

    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9 _.\-()<=]{0,59}$", help_text="Unique in the fleet: letters, digits, space, _ . - ( ) < =")
    prompt_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
    output_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
    prompt = LengthsSerializer(required=False, help_text="Instead of prompt_tokens: the prompt lengths' distribution.")
    output = LengthsSerializer(required=False, help_text="Instead of output_tokens: the output lengths' distribution.")
    requests_per_s = serializers.FloatField(min_value=0.0, max_value=1e6, help_text="At a load-shape value of 1.0 and month 1.")
    ttft_slo_s = serializers.FloatField(min_value=1e-6, max_value=86_400, required=False)
    tpot_slo_s = serializers.FloatField(min_value=1e-6, max_value=3_600, required=False)
    interruptible = serializers.BooleanField(default=False, help_text="May run on spot capacity (batch work that tolerates preemption).")

    def validate(self, attrs):
        for tokens, spec in (("prompt_tokens", "prompt"), ("output_tokens", "output")):
            if (tokens in attrs) == (spec in attrs):
                raise serializers.ValidationError({tokens: f"Give {tokens} or {spec} (a distribution), one of them."})
            if spec in attrs:
                try:
                    Lengths(**attrs[spec]).validate(spec)
                except WorkloadError as exc:
                    raise serializers.ValidationError(nested_error(exc.field, str(exc).split(": ", 1)[-1])) from None
                attrs[tokens] = max(1, round(mean_tokens(attrs[spec])))
        return attrs


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


class TraceClassSerializer(StrictSerializer):
    ttft_slo_s = serializers.FloatField(min_value=1e-6, max_value=86_400, required=False)
    tpot_slo_s = serializers.FloatField(min_value=1e-6, max_value=3_600, required=False)
    interruptible = serializers.BooleanField(default=False)


def classes_from_trace(trace, *, count: int, slos: dict) -> list[dict]:
    """A trace's requests in `count` classes of equal size by prompt length: each at its requests' mean prompt
    and output, at its share of the trace's rate (requests over the time between the first and last arrival)."""
    duration = max(trace.arrival_s) - min(trace.arrival_s)
    if duration <= 0:
        raise serializers.ValidationError({"trace": "needs arrivals spread over time (its rate is requests over the first to last arrival)."})
    order = sorted(range(len(trace)), key=lambda i: trace.prompt_tokens[i])
    size = len(order) / min(count, len(order))
    groups = [order[round(k * size):round((k + 1) * size)] for k in range(min(count, len(order)))]
    classes = []
    for k, group in enumerate(g for g in groups if g):
        prompts = [trace.prompt_tokens[i] for i in group]
        outputs = [trace.output_tokens[i] for i in group]
        classes.append({
            "name": f"trace {k + 1} (prompt <= {max(prompts)})", "prompt_tokens": round(sum(prompts) / len(prompts)),
            "output_tokens": max(1, round(sum(outputs) / len(outputs))), "requests_per_s": len(group) / duration, **slos,
        })  # fmt: skip
    return classes


class FleetInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=120, required=False, allow_blank=True, default="", help_text="What the fleet is for, in words.")
    model = SlugOf(ModelArch)
    classes = RequestClassSerializer(many=True, required=False, max_length=MAX_CLASSES, help_text="1-20 classes (a trace adds its own).")
    trace = serializers.CharField(required=False, write_only=True, trim_whitespace=False,
                                  help_text="A trace's text (CSV with a header, or JSONL: arrival_s, prompt_tokens, output_tokens per request), "
                                            "split into trace_classes classes by prompt length; stored as the classes it gave.")  # fmt: skip
    trace_format = serializers.ChoiceField(choices=TRACE_FORMATS, required=False, write_only=True)
    trace_classes = serializers.IntegerField(min_value=1, max_value=10, default=3, write_only=True)
    trace_slos = TraceClassSerializer(required=False, write_only=True, help_text="The SLOs of the trace's classes.")
    hardware = HardwareFilterSerializer(required=False)
    limits = LimitsSerializer(required=False)
    horizon = HorizonSerializer(required=False)
    target_utilisation = serializers.FloatField(min_value=0.05, max_value=1.0, default=DEFAULT_TARGET_UTILISATION,
                                                help_text="Share of a replica's capacity the fleet loads it to.")  # fmt: skip
    simulate = serializers.BooleanField(default=False, help_text="Check each chosen configuration (at most 20) in the serving simulator: one replica "
                                                                "at its share of its class's peak rate, p95 TTFT and TPOT against the SLOs.")  # fmt: skip
    serving_engine = ServingEngineName(
        required=False, help_text=SERVING_ENGINE_HELP + " A fleet naming one uses the chips it runs on; a fleet naming none " + SEARCH_WITHOUT_ENGINE
    )  # fmt: skip

    def validate(self, attrs):
        if attrs["model"].generation_kind != "autoregressive":
            raise serializers.ValidationError({"model": f"{attrs['model'].slug} is a {attrs['model'].generation_kind} model: fleets plan autoregressive decoding."})
        attrs["classes"] = list(attrs.get("classes") or [])
        text = attrs.pop("trace", None)
        count, slos, fmt = attrs.pop("trace_classes", 3), attrs.pop("trace_slos", None) or {}, attrs.pop("trace_format", None)
        if text is not None:
            if len(text.encode()) > settings.SIMULATION_MAX_TRACE_BYTES:
                raise serializers.ValidationError({"trace": f"a trace may be at most {settings.SIMULATION_MAX_TRACE_BYTES:,} bytes."})
            try:
                trace = parse_trace(text, format=fmt, max_rows=settings.SIMULATION_MAX_REQUESTS)
            except TraceError as exc:
                raise serializers.ValidationError({"trace": str(exc)}) from None
            SimulationInputSerializer.check_trace_context(trace, attrs["model"])
            derived = [RequestClassSerializer().to_internal_value(c) for c in classes_from_trace(trace, count=count, slos=slos)]
            if len(attrs["classes"]) + len(derived) > MAX_CLASSES:
                raise serializers.ValidationError({"trace_classes": f"{len(attrs['classes'])} classes + {len(derived)} from the trace is over {MAX_CLASSES}."})
            attrs["classes"] += derived
        if not attrs["classes"]:
            raise serializers.ValidationError({"classes": "Give at least one class, or a trace."})
        names = [c["name"] for c in attrs["classes"]]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise serializers.ValidationError({"classes": f"Class names must be unique: {', '.join(duplicates)}."})
        if not any(c["requests_per_s"] > 0 for c in attrs["classes"]):
            raise serializers.ValidationError({"classes": "At least one class needs requests_per_s above 0."})
        for i, c in enumerate(attrs["classes"]):
            try:
                check_context(attrs["model"], c)
                check_lengths_fit(c, context_tokens=attrs["model"].max_context_tokens, model_slug=attrs["model"].slug, under="")
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"classes": {i: exc.detail}}) from None
        attrs["hardware"] = attrs.get("hardware") or HardwareFilterSerializer().to_internal_value({})
        attrs["limits"] = attrs.get("limits") or LimitsSerializer().to_internal_value({})
        attrs["horizon"] = attrs.get("horizon") or HorizonSerializer().to_internal_value({})
        return attrs
