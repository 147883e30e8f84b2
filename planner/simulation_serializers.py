"""POST /api/v1/simulations/: one configuration, as POST /api/v1/estimates/ takes it, under one
workload (drawn, or an uploaded trace). Every bad value is a 400 naming its field; a bad trace
line is a 400 naming its line and column."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from inputs.serializers import StrictSerializer
from planner.models import SimulationRun
from planner.serializers import EstimateInputSerializer
from planner.simulation_inputs import (
    DisaggregatedSerializer,
    PercentileSlosSerializer,
    SchedulerSerializer,
    SimulationWorkloadSerializer,
    SweepSerializer,
    SlosSerializer,
    check_lengths_fit,
    check_open_loop,
    check_sweep,
    workload_from,
)
from planner.simulation_services import plan_row_link_refusal
from planner.simulation_traces import TRACE_FORMATS, TraceError, parse_trace
from planner.engine.simulation import Trace


SIMULATED_DECODINGS = ("ar", "speculative", "draft_heads", "block_diffusion")


def link_configuration(attrs: dict[str, Any]) -> dict[str, Any]:
    """What a plan row link compares (planner.simulation_services.ROW_LINK_FIELDS) of a validated request."""
    tensor_parallel = attrs.get("tensor_parallel")
    return {"model": attrs["model"].slug, "chip": attrs["chip"].slug, "chip_count": attrs.get("chip_count", 1),
            "weight_dtype": attrs.get("weight_dtype", "bf16"), "tensor_parallel": tensor_parallel if isinstance(tensor_parallel, int) else None}


class FromPlanSerializer(StrictSerializer):
    """The plan row a simulation checks: the run links to it and the plan's page lists the run. It changes nothing
    simulated: the configuration and workload are the request's own. The link is checked against the plan and its
    row in SimulationInputSerializer.validate, once the configuration is read (plan_row_link_refusal)."""

    plan = serializers.UUIDField(help_text="A stored plan's id (done; its row runs this request's configuration).")
    rank = serializers.IntegerField(min_value=1, help_text="The row's rank in that plan's ranking, from 1.")


class SimulationInputSerializer(EstimateInputSerializer):
    """The estimate's configuration fields (model, chip, chip_count, tensor_parallel, weight_dtype,
    kv_dtype, decoding, efficiency, offering, serving_engine, ...) and a workload. The estimate's own
    workload fields are replaced by `workload`; `batch` is not simulated (the scheduler admits what fits), and
    `disaggregated` gives the prefill pool its replica count."""

    # The estimate's single-request workload and its batch: a simulation draws its own requests.
    prompt_tokens = None
    output_tokens = None
    concurrency = None
    request_rate_per_s = None
    ttft_slo_s = None
    tpot_slo_s = None
    closed_loop = None
    batch = None
    disaggregated = DisaggregatedSerializer(
        required=False, help_text="Simulate separate prefill and decode pools (open-loop arrivals or a trace only).",
    )  # fmt: skip

    workload = SimulationWorkloadSerializer(required=False, help_text="Arrivals and lengths to draw (or only the prefix and seed, with a trace).")
    trace = serializers.CharField(
        required=False, trim_whitespace=False, max_length=None,
        help_text="A trace's text, CSV with a header or JSONL, one request per line: arrival_s, prompt_tokens, output_tokens.",
    )  # fmt: skip
    trace_file = serializers.FileField(required=False, help_text="The same as `trace`, uploaded (multipart): a .csv or .jsonl file.")
    trace_format = serializers.ChoiceField(choices=TRACE_FORMATS, required=False, help_text="Absent: from the file name, or the text's first character.")
    slos = SlosSerializer(required=False, help_text="Per-request SLOs for goodput; absent: the bounds of slo_percentiles.")
    slo_percentiles = PercentileSlosSerializer(required=False)
    scheduler = SchedulerSerializer(required=False)
    sweep = SweepSerializer(required=False, help_text="Also simulate at each of these rates: percentiles and goodput against the rate, and the knee.")
    from_plan = FromPlanSerializer(required=False, help_text="The plan row this simulation checks, to link the two (nothing simulated changes).")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        for name in ("pipeline_parallel", "attention_data_parallel"):
            if attrs.get(name, 1) != 1:
                raise serializers.ValidationError({name: "The simulator models one pipeline stage and one KV cache per replica; give 1."})
        if attrs["decoding"]["method"] not in SIMULATED_DECODINGS:
            raise serializers.ValidationError({"decoding": {"method": f"The simulator steps {', '.join(SIMULATED_DECODINGS)} decoding; "
                                                                      f"not {attrs['decoding']['method']}."}})  # fmt: skip
        if attrs.get("from_plan"):
            refusal = plan_row_link_refusal(attrs["from_plan"]["plan"], attrs["from_plan"]["rank"], **link_configuration(attrs))
            if refusal:
                raise serializers.ValidationError({"from_plan": {refusal[0]: [refusal[1]]}})
        trace = self._trace(attrs)
        workload = attrs.get("workload") or {}
        if trace is None and not attrs.get("workload"):
            raise serializers.ValidationError({"workload": "Give a workload (requests, arrivals, prompt, output) or a trace."})
        model = attrs["model"]
        if attrs.get("disaggregated") and trace is None:
            check_open_loop(workload)
        check_sweep(attrs, trace=trace)
        if trace is None:
            check_lengths_fit(workload, context_tokens=model.max_context_tokens, model_slug=model.slug)
        else:
            self.check_trace_context(trace, model)
        attrs["engine_workload"] = workload_from(workload, trace=Trace(arrival_s=trace.arrival_s, prompt_tokens=trace.prompt_tokens,
                                                                        output_tokens=trace.output_tokens) if trace else None)  # fmt: skip
        attrs["parsed_trace"] = trace
        return attrs

    def _trace(self, attrs):
        text, upload = attrs.pop("trace", None), attrs.pop("trace_file", None)
        if self.context.get("stored_trace") is not None:  # a worker re-validating a stored run: its trace was read at the POST
            return self.context["stored_trace"]
        if text is not None and upload is not None:
            raise serializers.ValidationError({"trace": "Give the trace as text or as trace_file, not both."})
        if text is None and upload is None:
            return None
        field, limit = ("trace_file", settings.SIMULATION_MAX_TRACE_BYTES) if upload is not None else ("trace", settings.SIMULATION_MAX_TRACE_BYTES)
        filename = getattr(upload, "name", None)
        if upload is not None:
            if upload.size > limit:
                raise serializers.ValidationError({field: f"{upload.size:,} bytes; a trace may be at most {limit:,} bytes."})
            try:
                text = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise serializers.ValidationError({field: f"is not UTF-8 text (byte {exc.start})."}) from None
        elif len(text.encode()) > limit:
            raise serializers.ValidationError({field: f"{len(text.encode()):,} bytes; a trace may be at most {limit:,} bytes."})
        try:
            return parse_trace(text, format=attrs.pop("trace_format", None), filename=filename, max_rows=settings.SIMULATION_MAX_REQUESTS)
        except TraceError as exc:
            raise serializers.ValidationError({field: str(exc)}) from None

    @staticmethod
    def check_trace_context(trace, model) -> None:
        for line, prompt, output in zip(trace.lines, trace.prompt_tokens, trace.output_tokens):
            if prompt + output - 1 > model.max_context_tokens:
                raise serializers.ValidationError({"trace": f"line {line}, column prompt_tokens: prompt + output - 1 = {prompt + output - 1} tokens "
                                                            f"exceeds {model.slug}'s context of {model.max_context_tokens}."})  # fmt: skip


class SimulationListFilterSerializer(serializers.Serializer):
    """Query parameters of the simulation list: a misspelt status or a plan id that is not one is a 400, not a list."""

    # Blank is "any", as for the other lists' filters (?status=).
    status = serializers.ChoiceField(choices=SimulationRun.Status.choices, required=False, allow_blank=True)
    from_plan = serializers.UUIDField(required=False, help_text="A plan id: the simulations started from its rows (none for a plan with none).")

    def to_internal_value(self, data):
        # Blank is "any" for every filter (?from_plan= as ?status=), not a malformed id.
        return super().to_internal_value({name: value for name, value in data.items() if value != ""})
