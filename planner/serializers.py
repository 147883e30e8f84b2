"""Input validation for estimates and plans. Every bad value is a 400 naming its field."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hwcatalog.architecture import FORMAT_DTYPE
from hwcatalog.cache import catalog_snapshot
from hwcatalog.models import Chip, ModelArch, Offering
from hwcatalog.validation import SLUG_PATTERN
from inputs.serializers import StrictSerializer
from planner import catalog_specs
from planner.engine import method_names
from planner.engine.padding import runs_any_tensor_parallel
from planner.models import PLAN_TAGS_MAX
from planner.simulation_inputs import (
    EstimateServerSettingsSerializer, PercentileSlosSerializer, PlanSimulationSerializer, ServerSettingsSerializer, plan_simulation_check, scheduler_from,
)
from planner.engine.decoding.draft_heads import HEAD_KINDS
from planner.engine.units import DTYPES

MAX_TOKENS = 10_000_000
MAX_CHIPS = 4096
DECODING_METHODS = method_names()  # the engine's registry (planner/engine/decoding/)
PRICING_MODELS = [c for c, _ in Offering.PricingModel.choices]


class SlugOf(serializers.RegexField):
    """A catalog slug that must exist; returns the row."""

    def __init__(self, model, **kwargs):
        self.model = model
        super().__init__(SLUG_PATTERN, max_length=120, **kwargs)

    def run_validation(self, data=serializers.empty):
        slug = super().run_validation(data)
        if slug is None or slug is serializers.empty:
            return slug
        row = catalog_snapshot().row(self.model, slug)
        if row is None:
            raise serializers.ValidationError(f"No {self.model._meta.verbose_name} with slug {slug!r}.")
        return row

    def to_representation(self, value):
        return getattr(value, "slug", value)


@extend_schema_field({"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string", "enum": ["auto", "max"]}]})
class IntOrAuto(serializers.Field):
    """An integer in [minimum, maximum], or the word `word` (e.g. "auto", "max")."""

    def __init__(self, *, word: str, minimum: int, maximum: int, **kwargs):
        self.word, self.minimum, self.maximum = word, minimum, maximum
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if data == self.word:
            return data
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError(f'An integer or "{self.word}".')
        try:
            number = int(data)
        except ValueError:
            raise serializers.ValidationError(f'An integer or "{self.word}".') from None
        if not self.minimum <= number <= self.maximum:
            raise serializers.ValidationError(f"Must be between {self.minimum} and {self.maximum}.")
        return number

    def to_representation(self, value):
        return value


class DecodingSerializer(StrictSerializer):
    method = serializers.ChoiceField(choices=DECODING_METHODS, default="ar")
    # speculative
    draft_model = SlugOf(ModelArch, required=False)
    draft_tokens = serializers.IntegerField(min_value=1, max_value=32, required=False)
    acceptance_rate = serializers.FloatField(min_value=0.0, max_value=0.999, required=False)
    mean_accepted_tokens = serializers.FloatField(min_value=1.0, max_value=33.0, required=False)
    draft_weight_dtype = serializers.ChoiceField(choices=DTYPES, required=False)
    # draft heads (also draft_tokens, acceptance_rate / mean_accepted_tokens)
    head_kind = serializers.ChoiceField(choices=HEAD_KINDS, required=False)
    # diffusion
    steps = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
    window_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
    adaptive_window = serializers.BooleanField(required=False, default=False)
    # block diffusion
    block_size = serializers.IntegerField(min_value=1, max_value=4096, required=False)
    steps_per_block = serializers.IntegerField(min_value=1, max_value=4096, required=False)
    tokens_per_forward = serializers.FloatField(min_value=1.0, max_value=4096.0, required=False)
    expected_answer_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
    focus_fraction = serializers.FloatField(min_value=0.01, max_value=1.0, required=False, default=1.0)

    def validate(self, attrs):
        method = attrs["method"]
        if method == "speculative":
            if "draft_model" not in attrs:
                raise serializers.ValidationError({"draft_model": "Speculative decoding needs a draft model slug."})
            if ("acceptance_rate" in attrs) == ("mean_accepted_tokens" in attrs):
                raise serializers.ValidationError({"acceptance_rate": "Give exactly one of acceptance_rate and mean_accepted_tokens."})
            attrs.setdefault("draft_tokens", 4)
            if attrs.get("mean_accepted_tokens", 1.0) > attrs["draft_tokens"] + 1:
                raise serializers.ValidationError({"mean_accepted_tokens": "Cannot exceed draft_tokens + 1."})
        if method == "draft_heads":
            if "acceptance_rate" in attrs and "mean_accepted_tokens" in attrs:
                raise serializers.ValidationError({"acceptance_rate": "Give at most one of acceptance_rate and mean_accepted_tokens."})
            attrs.setdefault("draft_tokens", 1)
            attrs.setdefault("head_kind", "mtp")
            if attrs.get("mean_accepted_tokens", 1.0) > attrs["draft_tokens"] + 1:
                raise serializers.ValidationError({"mean_accepted_tokens": "Cannot exceed draft_tokens + 1."})
        if method == "block_diffusion" and "steps_per_block" in attrs and "tokens_per_forward" in attrs:
            raise serializers.ValidationError({"steps_per_block": "Give steps_per_block or tokens_per_forward, not both."})
        if method == "block_diffusion" and attrs.get("steps_per_block") and attrs.get("block_size"):
            if attrs["steps_per_block"] > attrs["block_size"]:
                raise serializers.ValidationError({"steps_per_block": "At most block_size (one token per step at least)."})
        return attrs


class EfficiencySerializer(StrictSerializer):
    """Overrides of the efficiency factors: each factor given replaces the chip's (calibrated or spec
    default) value, the others stay as they are."""

    compute_fraction = serializers.FloatField(min_value=0.01, max_value=1.0, required=False)
    bandwidth_fraction = serializers.FloatField(min_value=0.01, max_value=1.0, required=False)
    step_overhead_s = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    link_bandwidth_fraction = serializers.FloatField(min_value=0.01, max_value=1.0, required=False)
    collective_overhead_s = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    prefill_layer_overhead_s = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    request_overhead_s = serializers.FloatField(min_value=0.0, max_value=60.0, required=False)
    expert_efficiency = serializers.FloatField(min_value=0.01, max_value=1.0, required=False)
    request_overhead_per_expert_layer_s = serializers.FloatField(min_value=0.0, max_value=1e-3, required=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give at least one efficiency factor to override.")
        return attrs


class WorkloadSerializer(StrictSerializer):
    prompt_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS)
    output_tokens = serializers.IntegerField(min_value=1, max_value=MAX_TOKENS)
    concurrency = serializers.IntegerField(
        min_value=1, max_value=10_000_000, required=False,
        help_text="Sequences in flight: a batch held steady, the slots a request rate's arrivals take (max_num_seqs over the "
                  "replicas), or with closed_loop the clients.",
    )  # fmt: skip
    request_rate_per_s = serializers.FloatField(
        min_value=1e-6, max_value=1e7, required=False,
        help_text="Poisson arrivals into each replica's slots: an arrival that finds every slot of its replica taken waits for "
                  "one (in TTFT), too few slots for the rate is infeasible, and $ and energy per token are charged to the tokens "
                  "the rate asks for (served_output_tokens_per_s), idle capacity included.",
    )  # fmt: skip
    ttft_slo_s = serializers.FloatField(min_value=1e-6, max_value=86_400, required=False)
    tpot_slo_s = serializers.FloatField(min_value=1e-6, max_value=3_600, required=False)
    closed_loop = serializers.BooleanField(
        required=False,
        help_text="true: `concurrency` clients, each sending its next request when its last answer ends (a closed-loop benchmark, "
                  "as vLLM's, SGLang's and TensorRT-LLM's serving benchmarks run): the rate follows from the clients, and clients "
                  "the KV cache (or the serving engine's batch cap) cannot hold wait for a slot, a wait the TTFT includes, rather "
                  "than the configuration being refused. Needs concurrency; takes no request_rate_per_s.",
    )  # fmt: skip

    def validate(self, attrs):
        check_closed_loop(attrs)
        return attrs


def check_closed_loop(workload: dict) -> None:
    """A closed loop is its clients: it needs their count, and its rate is theirs (no request_rate_per_s)."""
    if not workload.get("closed_loop"):
        return
    if not workload.get("concurrency"):
        raise serializers.ValidationError({"closed_loop": "A closed loop needs concurrency: the clients that send its requests."})
    if workload.get("request_rate_per_s") is not None:
        raise serializers.ValidationError(
            {"request_rate_per_s": "A closed loop's rate follows from its clients; give concurrency alone, or closed_loop false."}
        )


def check_context(model: ModelArch, workload: dict) -> None:
    # The last generated token is never fed back, so P + G - 1 tokens must fit (engine's Workload.context_tokens).
    total = workload["prompt_tokens"] + workload["output_tokens"] - 1
    if total > model.max_context_tokens:
        raise serializers.ValidationError(
            {"prompt_tokens": f"prompt + output - 1 = {total} tokens exceeds {model.slug}'s context of {model.max_context_tokens}."}
        )


def _check_decoding(model: ModelArch, decoding: dict, field: str = "decoding") -> None:
    method = decoding["method"]
    kind = model.generation_kind
    allowed = {"autoregressive": ("ar", "speculative", "draft_heads"), "diffusion": ("diffusion",), "block_diffusion": ("block_diffusion",)}[kind]
    if method not in allowed:
        article = "an" if kind[0] in "aeiou" else "a"
        raise serializers.ValidationError({field: {"method": f"{model.slug} is {article} {kind} model; use {' or '.join(allowed)}."}})
    draft = decoding.get("draft_model")
    if method == "speculative" and draft.generation_kind != "autoregressive":
        raise serializers.ValidationError({field: {"draft_model": f"{draft.slug} is not an autoregressive model."}})


SERVING_ENGINE_HELP = (
    "A serving engine of the catalog (GET /api/v1/engines/), by slug, name or alias: its scheduler defaults (memory rule, "
    "batch cap, prefill budget) apply, and on NVIDIA GPUs its fitted efficiency profile (planner/data/engine_profiles.json) "
    "replaces the chip's defaults, with its cross-validated intervals. Elsewhere the chip keeps its own efficiency "
    "(its calibration; a chip-family profile with the engine's request overhead; spec defaults with the engine's step and "
    "request overheads)."
)
# What an estimate that names no engine runs under (a plan or fleet tries the engines instead: their own help texts).
ESTIMATE_WITHOUT_ENGINE = (
    " Without it, no engine's scheduler and, on NVIDIA GPUs, spec defaults; elsewhere the chip's own efficiency, which "
    "spends no time before the prefill (no request overhead)."
)
SEARCH_WITHOUT_ENGINE = (
    "tries each chip under every engine that has a fitted profile and runs on it (a chip none of them runs on is tried "
    "without an engine)."
)


class ServingEngineName(serializers.CharField):
    """A catalog serving engine by slug, name, fitted profile or alias (case aside); returns its name."""

    def __init__(self, **kwargs):
        super().__init__(max_length=120, **kwargs)

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        engine = catalog_specs.serving_engine_named(text)
        if engine is None:
            raise serializers.ValidationError(f"No serving engine named {text!r}; the catalog's: {', '.join(catalog_specs.serving_engine_names())}.")
        return engine.name


def check_engine(attrs) -> None:
    """A 400 on serving_engine when the engine does not run on the chip or serve the weights' dtype."""
    name = attrs.get("serving_engine")
    if name:
        engine = catalog_specs.serving_engine_named(name)
        if engine is None:  # left the catalog since the field was read
            raise serializers.ValidationError({"serving_engine": f"No serving engine named {name!r}."})
        reason = catalog_specs.engine_refusal(engine, attrs["chip"], attrs.get("weight_dtype"))
        if reason:
            raise serializers.ValidationError({"serving_engine": reason})


class EstimateInputSerializer(WorkloadSerializer):
    model = SlugOf(ModelArch)
    chip = SlugOf(Chip)
    chip_count = serializers.IntegerField(min_value=1, max_value=MAX_CHIPS, default=1)
    tensor_parallel = IntOrAuto(word="auto", minimum=1, maximum=64, default="auto")
    pipeline_parallel = serializers.IntegerField(
        min_value=1, max_value=256, required=False,
        help_text="Pipeline stages per replica. Unset: 1, except that an LPU with tensor_parallel auto shards the model "
        "over its chips (TP x PP).",
    )
    attention_data_parallel = serializers.IntegerField(
        min_value=1, max_value=256, default=1,
        help_text="Attention replicas per replica, each with its own KV cache; the experts are spread over all of them.",
    )
    weight_dtype = serializers.ChoiceField(choices=DTYPES, default="bf16")
    weight_format = serializers.ChoiceField(
        choices=tuple(FORMAT_DTYPE), required=False,
        help_text="The format the weights are stored in, one of weight_dtype's (q4_k_m or q8_0 for llama.cpp's GGUF Q4_K_M or Q8_0, nvfp4 or mxfp4 "
        "for fp4). Unset: the model's checkpoint format of that dtype, else the dtype's default (fp4: nvfp4).",
    )  # fmt: skip
    kv_dtype = serializers.ChoiceField(choices=DTYPES, required=False)
    batch = IntOrAuto(word="max", minimum=1, maximum=1_000_000, required=False)
    decoding = DecodingSerializer(required=False)
    efficiency = EfficiencySerializer(required=False)
    offering = SlugOf(Offering, required=False)
    disaggregated = serializers.BooleanField(default=False)
    serving_engine = ServingEngineName(required=False, help_text=SERVING_ENGINE_HELP + ESTIMATE_WITHOUT_ENGINE)
    scheduler = EstimateServerSettingsSerializer(
        required=False,
        help_text="What the server's command line sets over its engine's defaults (vLLM's --max-num-seqs, --max-num-batched-tokens, "
                  "--gpu-memory-utilization and their equivalents): a replica (an attention-DP rank) runs at most max_sequences, "
                  "token_budget sizes the activation workspace and a closed loop's prefill chunks, memory_fraction the memory the "
                  "weights and KV cache may take; on a CPU, cpu_matrix_dtypes what the engine's build multiplies on the matrix units; "
                  "under attention data parallelism, attention_dp_balance_steps the steps a prompt may be held for the other ranks.",
    )  # fmt: skip

    def validate(self, attrs):
        attrs = super().validate(attrs)
        batch = attrs.get("batch")
        if attrs.get("closed_loop") and batch is not None:  # the clients are the batch, or more than it runs at once
            if batch == "max":
                raise serializers.ValidationError({"batch": "A closed loop runs its clients (or what memory holds); give a number of "
                                                            "at most concurrency, or leave batch out."})  # fmt: skip
            if batch > attrs["concurrency"]:
                raise serializers.ValidationError({"batch": f"A closed loop of {attrs['concurrency']} clients runs at most "
                                                            f"{attrs['concurrency']} sequences at once."})  # fmt: skip
        weight_format = attrs.get("weight_format")
        if weight_format and FORMAT_DTYPE[weight_format] != attrs["weight_dtype"]:
            raise serializers.ValidationError(
                {"weight_format": f"{weight_format} stores {FORMAT_DTYPE[weight_format]} weights; weight_dtype is {attrs['weight_dtype']}."}
            )
        check_engine(attrs)
        if refusal := scheduler_from(attrs.get("scheduler")).refusal(attrs["chip"].kind, attrs["chip"].slug):
            raise serializers.ValidationError({"scheduler": {"cpu_matrix_dtypes": refusal}})
        attrs.setdefault("decoding", DecodingSerializer().to_internal_value({"method": _default_method(attrs["model"])}))
        if "prompt_tokens" in attrs:  # a simulation (planner/simulation_serializers.py) checks its own lengths
            check_context(attrs["model"], attrs)
        _check_decoding(attrs["model"], attrs["decoding"])
        tp, count = attrs["tensor_parallel"], attrs["chip_count"]
        stages, layers = attrs.get("pipeline_parallel", 1), attrs["model"].num_layers
        if stages > layers:  # a stage holds whole layers
            raise serializers.ValidationError(
                {"pipeline_parallel": f"{stages} stages for {attrs['model'].slug}'s {layers} layers; a stage holds at least one."}
            )
        pp = stages * attrs["attention_data_parallel"]  # the other degrees of a replica
        if tp != "auto":
            if attrs["model"].num_attention_heads % tp and not _pads_heads(attrs["model"], attrs["chip"]):
                raise serializers.ValidationError(
                    {"tensor_parallel": f"{tp} does not divide {attrs['model'].slug}'s {attrs['model'].num_attention_heads} attention heads."}
                )
            if count % (tp * pp):
                raise serializers.ValidationError({"chip_count": f"{count} chips do not split into replicas of tensor_parallel x pipeline_parallel x attention_data_parallel = {tp * pp}."})
        if attrs.get("offering") and attrs["offering"].chip_id != attrs["chip"].id:
            raise serializers.ValidationError({"offering": f"{attrs['offering'].slug} prices {attrs['offering'].chip.slug}, not {attrs['chip'].slug}."})
        return attrs


def _decoding_key(decoding: dict) -> tuple:
    """What tells two validated decodings apart: every field, a catalog row by its key."""
    return tuple(sorted((name, getattr(value, "pk", None) or repr(value)) for name, value in decoding.items()))


def _pads_heads(model: ModelArch, chip: Chip) -> bool:
    """The chip's SDK pads the attention heads to a multiple of its ranks (planner/engine/padding.py)."""
    return runs_any_tensor_parallel(catalog_specs.model_spec(model), catalog_specs.chip_spec(chip))


def _default_method(model: ModelArch) -> str:
    return {"autoregressive": "ar", "diffusion": "diffusion", "block_diffusion": "block_diffusion"}[model.generation_kind]


class HardwareFilterSerializer(StrictSerializer):
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=Chip.Kind.choices), required=False, max_length=5)
    vendors = serializers.ListField(child=serializers.CharField(max_length=80), required=False, max_length=50)
    chips = serializers.ListField(child=SlugOf(Chip), required=False, max_length=200)
    max_chips = serializers.IntegerField(min_value=1, max_value=1024, default=64)
    pricing_models = serializers.ListField(child=serializers.ChoiceField(choices=PRICING_MODELS), required=False, max_length=4)
    ownership = serializers.ChoiceField(choices=["any", "rent", "own"], default="any")
    weight_dtypes = serializers.ListField(child=serializers.ChoiceField(choices=DTYPES), required=False, max_length=7, min_length=1)

    def _once_each(self, value):
        """A value given twice counts once, as a chip does: a repeat would search and rank every configuration twice."""
        return list(dict.fromkeys(value))

    validate_kinds = validate_vendors = validate_pricing_models = validate_weight_dtypes = _once_each


# A plan's tag: a short label, stored lower case so a filter finds it however it was typed.
TAG_PATTERN = r"^[a-z0-9][a-z0-9._:/+ -]{0,39}$"


class TagField(serializers.RegexField):
    def __init__(self, **kwargs):
        super().__init__(TAG_PATTERN, max_length=40, error_messages={
            "invalid": "A tag is 1-40 letters, digits or . _ : / + - and spaces, starting with a letter or digit.",
        }, **kwargs)  # fmt: skip

    def to_internal_value(self, data):
        return super().to_internal_value(data.strip().lower() if isinstance(data, str) else data)


class PlanLabelsSerializer(StrictSerializer):
    """What a plan is called and tagged with: its creator's labels, beside its immutable record."""

    name = serializers.CharField(max_length=120, required=False, allow_blank=True, trim_whitespace=True,
                                 help_text="A label for the plan (at most 120 characters); empty: none.")  # fmt: skip
    tags = serializers.ListField(child=TagField(), required=False, max_length=PLAN_TAGS_MAX,
                                 help_text=f"Up to {PLAN_TAGS_MAX} tags, e.g. [\"q3-procurement\", \"chat\"], stored lower case; repeats count once.")  # fmt: skip

    def validate_tags(self, tags: list[str]) -> list[str]:
        return list(dict.fromkeys(tags))


class PlanInputSerializer(PlanLabelsSerializer):
    model = SlugOf(ModelArch)
    workload = WorkloadSerializer()
    hardware = HardwareFilterSerializer(required=False)
    decodings = DecodingSerializer(many=True, required=False, max_length=8)
    budget_usd_per_million_output_tokens = serializers.FloatField(min_value=0.0, max_value=1e9, required=False)
    efficiency = EfficiencySerializer(required=False)
    disaggregated = serializers.BooleanField(default=False)
    serving_engine = ServingEngineName(
        required=False, help_text=SERVING_ENGINE_HELP + " A plan naming one searches the chips it runs on, at the weight dtypes it serves; "
        "a plan naming none " + SEARCH_WITHOUT_ENGINE
    )  # fmt: skip
    scheduler = ServerSettingsSerializer(
        required=False,
        help_text="What the named serving_engine's command line sets over its defaults, as an estimate's scheduler takes it: every "
                  "candidate runs under it (cpu_matrix_dtypes, a CPU build's, the CPU candidates only). Needs serving_engine (each "
                  "engine reads its memory fraction by its own rule).",
    )  # fmt: skip
    pinned = serializers.BooleanField(default=False)
    rank_by = serializers.ChoiceField(
        choices=["expected", "pessimistic"], default="expected",
        help_text="expected: by predicted $/1M output tokens; pessimistic: by the high end of its 80% interval.",
    )
    # Issue 15: the top candidates simulated and re-ranked at percentile SLOs (planner/simulation_services.py).
    slo_percentiles = PercentileSlosSerializer(
        required=False, help_text="SLOs as percentiles, e.g. {\"ttft\": {\"p\": 95, \"s\": 0.5}}: the top candidates are simulated and re-ranked.",
    )
    simulation = PlanSimulationSerializer(
        required=False, help_text="The workload the top candidates are simulated under; absent: the plan's own workload at its rate or concurrency.",
    )

    def validate(self, attrs):
        model = attrs["model"]
        plan_simulation_check(attrs)
        check_context(model, attrs["workload"])
        if not attrs.get("decodings"):
            attrs["decodings"] = [DecodingSerializer().to_internal_value({"method": _default_method(model)})]
        # A decoding given twice counts once: a repeat would evaluate and rank every configuration twice.
        unique: dict[tuple, dict] = {}
        for decoding in attrs["decodings"]:
            unique.setdefault(_decoding_key(decoding), decoding)
        attrs["decodings"] = list(unique.values())
        for decoding in attrs["decodings"]:
            _check_decoding(model, decoding, field="decodings")
        if attrs.get("slo_percentiles") and all(d["method"] == "diffusion" for d in attrs["decodings"]):
            raise serializers.ValidationError({"slo_percentiles": [
                "Percentile SLOs are checked by simulating the top candidates, and the serving simulator does not run masked "
                "diffusion, which releases each answer after its denoising steps: give workload.ttft_slo_s and tpot_slo_s "
                "(means) instead."]})  # fmt: skip
        attrs["hardware"] = attrs.get("hardware") or HardwareFilterSerializer().to_internal_value({})
        if attrs.get("scheduler") and not attrs.get("serving_engine"):
            raise serializers.ValidationError({"scheduler": "Name the serving_engine these settings are the command line of."})
        _check_cpu_build(attrs)
        return attrs


def _check_cpu_build(attrs) -> None:
    """A plan's CPU build setting (scheduler.cpu_matrix_dtypes) must reach a CPU: its engine runs on CPUs and its hardware
    filter keeps some; it is the plan's, not its simulation stage's alone, so both stages run one build."""
    if ((attrs.get("simulation") or {}).get("scheduler") or {}).get("cpu_matrix_dtypes") is not None:
        raise serializers.ValidationError({"simulation": {"scheduler": {"cpu_matrix_dtypes": [
            "A CPU build's setting is the plan's: give it as scheduler.cpu_matrix_dtypes, so the ranking and the simulation run "
            "one build."]}}})  # fmt: skip
    if (attrs.get("scheduler") or {}).get("cpu_matrix_dtypes") is None:
        return
    engine = catalog_specs.serving_engine_named(attrs["serving_engine"])
    hardware = attrs["hardware"]
    kinds, chips = hardware.get("kinds"), hardware.get("chips")
    if engine is not None and "cpu" not in engine.chip_kinds:
        reason = f"{engine.name} runs on no CPU ({', '.join(engine.chip_kinds)})"
    elif kinds and "cpu" not in kinds:
        reason = "hardware.kinds names no cpu"
    elif chips and not any(chip.kind == "cpu" for chip in chips):
        reason = "hardware.chips names no CPU"
    else:
        return
    raise serializers.ValidationError({"scheduler": {"cpu_matrix_dtypes": [f"A CPU build's setting, and {reason}."]}})
