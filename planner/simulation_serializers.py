"""POST /api/v1/simulations/: one configuration, as POST /api/v1/estimates/ takes it, under one
workload (drawn, or an uploaded trace). Every bad value is a 400 naming its field; a bad trace
line is a 400 naming its line and column."""
from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

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
from planner.simulation_traces import TRACE_FORMATS, TraceError, parse_trace
from planner.engine.simulation import Trace


SIMULATED_DECODINGS = ("ar", "speculative", "draft_heads", "block_diffusion")


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

    def validate(self, attrs):
        attrs = super().validate(attrs)
        for name in ("pipeline_parallel", "attention_data_parallel"):
            if attrs.get(name, 1) != 1:
                raise serializers.ValidationError({name: "The simulator models one pipeline stage and one KV cache per replica; give 1."})
        if attrs["decoding"]["method"] not in SIMULATED_DECODINGS:
            raise serializers.ValidationError({"decoding": {"method": f"The simulator steps {', '.join(SIMULATED_DECODINGS)} decoding; "
                                                                      f"not {attrs['decoding']['method']}."}})  # fmt: skip
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
