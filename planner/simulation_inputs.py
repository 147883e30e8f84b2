"""Input serializers for serving simulations (docs/simulation.md): the workload (arrivals, length
distributions, shared prefix, seed), SLOs per request and as percentiles, and the scheduler's knobs.

Shared by POST /api/v1/simulations/ (planner/simulation_serializers.py) and a plan's simulation
stage (planner/serializers.py PlanInputSerializer). Each checks its values the way the engine's own
dataclasses do (planner/engine/simulation/workload.py), so a bad one is a 400 naming its field, and
the amount of work is bounded (SIMULATION_MAX_REQUESTS)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from inputs.serializers import StrictSerializer
from planner.engine.simulation import MAX_SWEEP_RATES, Arrivals, Lengths, SchedulerOptions, SimulationWorkload, Slos, Trace, WorkloadError
from planner.engine.simulation.workload import ARRIVAL_KINDS, LENGTH_KINDS
from planner.engine.units import DTYPES

MAX_LENGTH_TOKENS = 10_000_000
MAX_HISTOGRAM_BINS = 200
PERCENTILE_SLO_METRICS = ("ttft", "tpot", "e2e")


class LengthsSerializer(StrictSerializer):
    """fixed: `tokens`; normal and lognormal: `mean_tokens`, `std_tokens`; histogram: `bin_edges_tokens`
    (n + 1 increasing edges) and `bin_weights` (n). Every draw is rounded and clipped to [min_tokens, max_tokens]."""

    kind = serializers.ChoiceField(choices=LENGTH_KINDS, default="fixed")
    tokens = serializers.IntegerField(min_value=1, max_value=MAX_LENGTH_TOKENS, required=False)
    mean_tokens = serializers.FloatField(min_value=1.0, max_value=MAX_LENGTH_TOKENS, required=False)
    std_tokens = serializers.FloatField(min_value=0.0, max_value=MAX_LENGTH_TOKENS, required=False)
    bin_edges_tokens = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=MAX_LENGTH_TOKENS), required=False,
                                             max_length=MAX_HISTOGRAM_BINS + 1)  # fmt: skip
    bin_weights = serializers.ListField(child=serializers.FloatField(min_value=0.0, max_value=1e12), required=False, max_length=MAX_HISTOGRAM_BINS)
    min_tokens = serializers.IntegerField(min_value=1, max_value=MAX_LENGTH_TOKENS, default=1)
    max_tokens = serializers.IntegerField(min_value=1, max_value=MAX_LENGTH_TOKENS, required=False)


class ArrivalsSerializer(StrictSerializer):
    """poisson: `rate_per_s`; gamma: `rate_per_s` and `cv` (coefficient of variation of the gaps; 1 is
    Poisson, more is burstier); closed_loop: `concurrency` clients, each sending its next request
    `think_time_s` after its last one finished."""

    kind = serializers.ChoiceField(choices=ARRIVAL_KINDS, default="poisson")
    rate_per_s = serializers.FloatField(min_value=1e-6, max_value=1e6, required=False)
    cv = serializers.FloatField(min_value=1e-3, max_value=100.0, required=False)
    concurrency = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
    think_time_s = serializers.FloatField(min_value=0.0, max_value=86_400.0, required=False)


class SimulationWorkloadSerializer(StrictSerializer):
    """`requests` drawn from `arrivals`, `prompt` and `output` (or, on the simulations endpoint, an
    uploaded trace, which fixes those three); `shared_prefix_fraction` of them begin with the same
    `shared_prefix_tokens`-token system prompt (prefix-cached); `seed` makes it reproducible."""

    requests = serializers.IntegerField(min_value=1, required=False, help_text="How many requests to draw (at most SIMULATION_MAX_REQUESTS).")
    arrivals = ArrivalsSerializer(required=False)
    prompt = LengthsSerializer(required=False)
    output = LengthsSerializer(required=False)
    shared_prefix_tokens = serializers.IntegerField(min_value=0, max_value=MAX_LENGTH_TOKENS, default=0)
    shared_prefix_fraction = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.0)
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, default=0)

    def validate_requests(self, value: int) -> int:
        limit = settings.SIMULATION_MAX_REQUESTS
        if value > limit:
            raise serializers.ValidationError(f"At most {limit:,} requests per simulation.")
        return value


class SlosSerializer(StrictSerializer):
    """Per-request objectives: a request meets them if each given latency is at most its bound (goodput counts those)."""

    ttft_s = serializers.FloatField(min_value=1e-6, max_value=86_400.0, required=False)
    tpot_s = serializers.FloatField(min_value=1e-6, max_value=3_600.0, required=False)
    e2e_s = serializers.FloatField(min_value=1e-6, max_value=86_400.0, required=False)


class PercentileSloSerializer(StrictSerializer):
    p = serializers.FloatField(min_value=1.0, max_value=99.99, help_text="The percentile, e.g. 95 for p95.")
    s = serializers.FloatField(min_value=1e-6, max_value=86_400.0, help_text="Its bound in seconds.")


class PercentileSlosSerializer(StrictSerializer):
    """SLOs as percentiles: {"ttft": {"p": 95, "s": 0.5}} asks that 95% of requests see their first token within 0.5 s."""

    ttft = PercentileSloSerializer(required=False)
    tpot = PercentileSloSerializer(required=False)
    e2e = PercentileSloSerializer(required=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError(f"Give at least one of {', '.join(PERCENTILE_SLO_METRICS)}.")
        return attrs


class ServerSettingsSerializer(StrictSerializer):
    """What the serving engine's command line sets that bounds the batch a configuration may assume; each absent: the
    engine's default from the catalog (the chip kind's where no engine is named). A simulation's scheduler takes these
    and knobs of its own."""

    token_budget = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False, help_text="max_num_batched_tokens")
    max_sequences = serializers.IntegerField(min_value=1, max_value=100_000, required=False, help_text="max_num_seqs")
    memory_fraction = serializers.FloatField(
        min_value=0.01, max_value=1.0, required=False,
        help_text="The engine's memory knob under its own rule: vLLM's gpu_memory_utilization and SGLang's mem_fraction_static "
                  "(of the chip's memory), TensorRT-LLM's free_gpu_memory_fraction (of what the weights and activations leave); with no serving "
                  "engine, of the chip's memory. Absent: the engine's default.",
    )  # fmt: skip
    cpu_matrix_dtypes = serializers.ListField(
        child=serializers.ChoiceField(choices=DTYPES), allow_empty=True, max_length=len(DTYPES), required=False,
        help_text="On a CPU, the weight dtypes whose GEMMs the engine's build multiplies on the matrix units (Intel AMX); the "
                  "others run on the vector units at their type's rate, and a list without bf16 moves the 16-bit attention "
                  "there too. [] for a build without those kernels (llama.cpp before October 2024, or built without "
                  "GGML_AMX_INT8). Absent: the engine's catalog list (GET /api/v1/engines/), every dtype where no engine is "
                  "named. Only a CPU takes it: an estimate or simulation on another chip is refused, a plan applies it to "
                  "its CPUs (and is refused it where its engine or hardware filter leaves none).",
    )  # fmt: skip

    def validate_cpu_matrix_dtypes(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # each dtype once, in the order given


class EstimateServerSettingsSerializer(ServerSettingsSerializer):
    """An estimate's server settings: those of a plan, and the attention-DP balance of the layout it names (a plan
    searches no attention data parallelism and the simulator runs none, so theirs have no such field: a 400)."""

    attention_dp_balance_steps = serializers.IntegerField(
        min_value=0, max_value=100_000, required=False,
        help_text="Under attention data parallelism, the decode steps a new prompt is held, while every attention replica is "
                  "decoding, until each has one: TensorRT-LLM's attention_dp_config timeout_iters with enable_balance; 0 for "
                  "balance off. Absent: the engine's catalog value (TensorRT-LLM 60, the others 0). The estimate adds the hold to a "
                  "colocated prompt's TTFT under attention data parallelism.",
    )  # fmt: skip


class SchedulerSerializer(ServerSettingsSerializer):
    """The serving engine's knobs under vLLM's meaning; absent: the chip's serving-engine defaults from the catalog."""

    kv_block_tokens = serializers.IntegerField(min_value=1, max_value=1024, default=16, help_text="block_size")
    prefix_caching = serializers.BooleanField(default=True, help_text="enable_prefix_caching")
    prefill_alone = serializers.BooleanField(
        required=False,
        help_text="Whether a step that prefills runs without the decodes (SGLang's default; vLLM's V0 scheduler with chunked "
                  "prefill off) or prefill chunks and decodes share steps (vLLM V1, TensorRT-LLM). Absent: the engine's default.",
    )  # fmt: skip


class DisaggregatedSerializer(StrictSerializer):
    """Prefill and decode in separate pools: the configuration's replicas decode, `prefill_replicas` more
    replicas of the same shape prefill, and each request's KV moves from one to the other."""

    prefill_replicas = serializers.IntegerField(min_value=1, max_value=1024, help_text="Replicas of the prefill pool, each of the configuration's shape.")
    kv_link_bytes_per_s_per_chip = serializers.FloatField(
        min_value=1e6, max_value=1e13, required=False,
        help_text="What each chip's link moves KV at, bytes/s; absent: 50e9, one 400 Gb/s NIC per GPU.",
    )  # fmt: skip


class SweepSerializer(StrictSerializer):
    """The same configuration and workload at each of these arrival rates (the workload's Poisson or gamma
    process, its requests, lengths and seed kept): percentiles and goodput against the rate, and the knee."""

    rates_per_s = serializers.ListField(
        child=serializers.FloatField(min_value=1e-6, max_value=1e6), min_length=1, max_length=MAX_SWEEP_RATES,
        help_text=f"1 to {MAX_SWEEP_RATES} request rates, ascending.",
    )  # fmt: skip

    def validate_rates_per_s(self, value: list[float]) -> list[float]:
        if value != sorted(set(value)):
            raise serializers.ValidationError("Give distinct rates in ascending order.")
        return value


def check_sweep(attrs: dict[str, Any], *, trace) -> None:
    """A sweep changes the rate of an open-loop workload. Its work is bounded by construction: at most
    1 + MAX_SWEEP_RATES simulations of at most SIMULATION_MAX_REQUESTS requests each."""
    sweep = attrs.get("sweep")
    if not sweep:
        return
    kind = ((attrs.get("workload") or {}).get("arrivals") or {}).get("kind", "poisson")
    if trace is not None or kind == "closed_loop":
        raise serializers.ValidationError({"sweep": ["A sweep changes the arrival rate: give workload.arrivals as poisson or gamma, not a trace or a closed loop."]})


def check_open_loop(workload: dict[str, Any], *, field: str = "disaggregated", arrivals: str = "workload.arrivals") -> None:
    """Disaggregated pools are simulated under an arrival rate or a trace (engine/simulation/disaggregated.py)."""
    if (workload.get("arrivals") or {}).get("kind") == "closed_loop":
        raise serializers.ValidationError({field: [f"A closed loop couples the prefill and decode pools through every client's next request; "
                                                   f"give {arrivals} as poisson or gamma{', or a trace' if field == 'disaggregated' else ''}."]})  # fmt: skip


class PlanSimulationSerializer(SimulationWorkloadSerializer):
    """A plan's simulation stage: after the analytical search, its `top_n` candidates are simulated
    under this workload and re-ranked by simulated cost per token at the percentile SLOs."""

    top_n = serializers.IntegerField(min_value=1, max_value=50, default=20, help_text="How many of the analytical ranking to simulate.")
    scheduler = SchedulerSerializer(required=False)
    sweep = SweepSerializer(required=False, help_text="Rank by the cost at each candidate's knee over these rates (the highest meeting "
                                                      "every percentile SLO) instead of the cost at the plan's load.")  # fmt: skip


# --- validated data -> the engine's dataclasses --------------------------------------------------


def nested_error(field: str, message: str, *, under: str | None = None) -> dict[str, Any]:
    """"prompt.std_tokens" -> {"prompt": {"std_tokens": [message]}} (trace rows are reported by line elsewhere)."""
    parts = [p for p in ([under] if under else []) + field.split(".") if p]
    error: Any = [message]
    for part in reversed(parts):
        error = {part: error}
    return error


def workload_from(data: dict[str, Any], *, trace: Trace | None = None, under: str = "workload") -> SimulationWorkload:
    """The engine's workload for validated workload data (and a parsed trace); a ValidationError
    naming the field the engine's own checks refuse."""
    lengths = {name: Lengths(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data[name].items()}) for name in ("prompt", "output")
               if name in data}  # fmt: skip
    arrivals = Arrivals(**data["arrivals"]) if "arrivals" in data else None
    if trace is None and "requests" not in data:
        raise serializers.ValidationError(nested_error("requests", "Give how many requests to draw (or upload a trace).", under=under))
    if trace is not None and "requests" in data:
        raise serializers.ValidationError(nested_error("requests", "A trace fixes the requests; leave this out.", under=under))
    workload = SimulationWorkload(
        requests=data.get("requests", 0), arrivals=arrivals, prompt=lengths.get("prompt"), output=lengths.get("output"), trace=trace,
        shared_prefix_tokens=data.get("shared_prefix_tokens", 0), shared_prefix_fraction=data.get("shared_prefix_fraction", 0.0),
        seed=data.get("seed", 0),
    )  # fmt: skip
    try:
        requests = workload.sample()  # microseconds for 20,000 requests: the exact work, before any is simulated
    except WorkloadError as exc:
        field = exc.field if exc.field != "trace" or trace is None else "arrivals"
        raise serializers.ValidationError(nested_error(field, str(exc).split(": ", 1)[-1], under=under)) from None
    tokens, limit = workload_tokens(workload, requests), settings.SIMULATION_MAX_TOKENS
    if tokens > limit:
        raise serializers.ValidationError(nested_error(
            "prompt" if trace is None else "requests", f"{tokens:,} prompt + output tokens in all; a simulation may carry at most {limit:,}", under=under,
        ))  # fmt: skip
    return workload


def workload_tokens(workload: SimulationWorkload, requests=None) -> int:
    """Prompt + output tokens over the workload's requests: what bounds a simulation's steps."""
    requests = requests if requests is not None else workload.sample()
    return int(requests.prompt_tokens.sum() + requests.output_tokens.sum())


def slos_from(slos: dict[str, Any] | None, percentiles: dict[str, Any] | None) -> Slos:
    """Per-request SLOs for goodput: those given, else the bounds of the percentile SLOs."""
    if slos:
        return Slos(**slos)
    percentiles = percentiles or {}
    return Slos(**{f"{metric}_s": spec["s"] for metric, spec in percentiles.items()})


def scheduler_from(data: dict[str, Any] | None) -> SchedulerOptions:
    return SchedulerOptions(**(data or {}))


def check_lengths_fit(data: dict[str, Any], *, context_tokens: int, model_slug: str, under: str = "workload") -> None:
    """A fixed prompt + output (or the largest a distribution may draw, where bounded) must fit the model's context."""

    def largest(name: str) -> float | None:
        spec = data.get(name)
        if not spec:
            return None
        if spec.get("kind", "fixed") == "fixed":
            return spec.get("tokens")
        if spec.get("kind") == "histogram" and spec.get("bin_edges_tokens"):
            return min(spec["bin_edges_tokens"][-1], spec.get("max_tokens") or float("inf"))
        return spec.get("max_tokens")

    prompt, output = largest("prompt"), largest("output")
    if prompt is not None and output is not None and prompt + output - 1 > context_tokens:
        raise serializers.ValidationError(nested_error(
            "prompt", f"prompt + output - 1 = {prompt + output - 1:.0f} tokens can exceed {model_slug}'s context of {context_tokens}; "
                      f"bound them with max_tokens", under=under,
        ))  # fmt: skip


DEFAULT_PLAN_SIMULATION_REQUESTS = 2000


def plan_simulation_check(attrs: dict[str, Any]) -> None:
    """A plan's simulation stage, validated in place: with slo_percentiles and no `simulation`, the plan's
    own workload (its prompt and output tokens, Poisson at its request rate or a closed loop of its
    concurrency, 2,000 requests); the work bounded (top_n x requests <= SIMULATION_MAX_PLAN_REQUESTS)."""
    if not attrs.get("slo_percentiles") and not attrs.get("simulation"):
        return
    workload = attrs["workload"]
    simulation = dict(attrs.get("simulation") or PlanSimulationSerializer().to_internal_value({}))
    if "arrivals" not in simulation:
        if workload.get("request_rate_per_s"):
            simulation["arrivals"] = {"kind": "poisson", "rate_per_s": workload["request_rate_per_s"]}
        elif workload.get("concurrency"):
            simulation["arrivals"] = {"kind": "closed_loop", "concurrency": workload["concurrency"]}
        else:
            raise serializers.ValidationError({"simulation": {"arrivals": [
                "Give simulation.arrivals, or workload.request_rate_per_s or workload.concurrency to simulate the plan's load."]}})  # fmt: skip
    simulation.setdefault("prompt", {"kind": "fixed", "tokens": workload["prompt_tokens"]})
    simulation.setdefault("output", {"kind": "fixed", "tokens": workload["output_tokens"]})
    simulation.setdefault("requests", DEFAULT_PLAN_SIMULATION_REQUESTS)
    workload_from(simulation, under="simulation")
    if attrs.get("disaggregated"):
        check_open_loop(simulation, field="simulation", arrivals="simulation.arrivals (or workload.request_rate_per_s)")
    if simulation.get("sweep") and (simulation.get("arrivals") or {}).get("kind") == "closed_loop":
        raise serializers.ValidationError({"simulation": {"sweep": [
            "A sweep changes the arrival rate: give simulation.arrivals (or workload.request_rate_per_s) as poisson or gamma."]}})  # fmt: skip
    model = attrs["model"]
    check_lengths_fit(simulation, context_tokens=model.max_context_tokens, model_slug=model.slug, under="simulation")
    passes = 1 + len((simulation.get("sweep") or {}).get("rates_per_s", ()))
    total, limit = simulation["top_n"] * simulation["requests"] * passes, settings.SIMULATION_MAX_PLAN_REQUESTS
    if total > limit:
        raise serializers.ValidationError({"simulation": {"requests": [
            f"top_n x requests{' x (1 + rates)' if passes > 1 else ''} = {total:,} simulated requests; a plan may simulate at most "
            f"{limit:,}: lower requests or top_n{' or give fewer rates' if passes > 1 else ''}."]}})  # fmt: skip
    attrs["simulation"] = simulation
