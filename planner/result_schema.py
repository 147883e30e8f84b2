"""What the API, the CSV export and the web UI show of a result, from the engine's one list
of result fields (planner/engine/fields.py) plus the few a ranked plan row or an estimate
answer adds here (the offering chosen, the chip's name and kind, every offering's price).

The OpenAPI schemas of `POST /api/v1/estimates/` and of a plan's ranked rows, the columns of
`.../export.csv` and the ranking table's metric columns are all built from these lists.
"""
from __future__ import annotations

from typing import Any

from planner.engine.fields import COST_FIELDS, ESTIMATE_FIELDS, MEMORY_FIELDS, PHASE_FIELDS, RESULT_FIELDS, TRIAL_FIELDS, ResultField

# Added to each ranked row by planner.services (the search's pricing of the candidate).
PLAN_ROW_FIELDS: tuple[ResultField, ...] = (
    ResultField(name="usd_per_million_output_tokens", kind="float", unit="USD", description="per 1M output tokens, cheapest offering",
                per_candidate=False, nullable=True, label="$/1M out", format="usd", csv="usd_per_million_output_tokens"),
    ResultField(name="usd_per_million_input_tokens", kind="float", unit="USD", description="per 1M input tokens, same offering",
                per_candidate=False, nullable=True, csv="usd_per_million_input_tokens"),
    ResultField(name="usd_per_chip_hour", kind="float", unit="USD/h", description="the offering's price per chip-hour, power included",
                per_candidate=False, nullable=True, csv="usd_per_chip_hour"),
    ResultField(name="offering", kind="str", unit="", description="slug of the cheapest offering", per_candidate=False, nullable=True,
                csv="offering"),
    ResultField(name="provider", kind="str", unit="", description="who rents or sells the offering", per_candidate=False, nullable=True,
                csv="provider"),
    ResultField(name="pricing_model", kind="str", unit="", description="on_demand, reserved, spot or purchase", per_candidate=False,
                nullable=True, csv="pricing_model"),
    ResultField(name="ownership", kind="str", unit="", per_candidate=False, nullable=True, csv="ownership",
                description="rent (a rental: host, network, power and building included) or own (a purchase priced as a whole system)"),
    ResultField(name="chips_per_unit", kind="int", unit="", per_candidate=False, nullable=True, csv="chips_per_unit",
                description="the fewest chips the offering rents or sells at once (an 8-GPU server, a TPU slice, an NVL72 rack)"),
    ResultField(name="billed_chips", kind="int", unit="", per_candidate=False, nullable=True, csv="billed_chips",
                description="the chips paid for: whole units covering the configuration's chips"),
    ResultField(name="usd_per_hour", kind="float", unit="USD/h", per_candidate=False, nullable=True, csv="usd_per_hour",
                description="the whole configuration per hour: billed chips x $/chip-hour", label="$/h", format="usd"),
    ResultField(name="usd_per_month", kind="float", unit="USD", per_candidate=False, nullable=True, csv="usd_per_month",
                description="the whole configuration per month (730.5 h)"),
    ResultField(name="chip_kind", kind="str", unit="", description="cpu, gpu, tpu, lpu or other", per_candidate=False, csv="chip_kind"),
    ResultField(name="serving_engine", kind="str", unit="", per_candidate=False, nullable=True, csv="serving_engine",
                description="the serving engine the row is served under: its scheduler defaults, and its fitted profile where "
                            "efficiency_source says so (null: none named)"),
    ResultField(name="weight_format", kind="str", unit="", per_candidate=False, csv="weight_format",
                description="the format the weights are stored in (nvfp4, mxfp4, fp8_block, int4, ...; docs/planner_math.md#units-and-data-types)"),
    ResultField(name="weight_bits_per_weight", kind="float", unit="bits", per_candidate=False, csv="weight_bits_per_weight",
                description="bits one weight takes in weight_format, its block scales included"),
    ResultField(name="chip_name", kind="str", unit="", description="the chip's name, and its serving engine's", per_candidate=False),
    ResultField(name="candidate_index", kind="int", unit="", description="the candidate's index in the plan's grid", per_candidate=False),
    ResultField(name="intervals", kind="object", unit="", per_candidate=False,
                description="80% prediction intervals {figure: {low, high, basis}} from held-out errors of comparable predictions"),
)  # fmt: skip

# Added to each ranked row of a plan with percentile SLOs (planner/simulation_services.py: its top rows
# simulated and re-ranked); a plan without them has none of these.
SIMULATION_ROW_FIELDS: tuple[ResultField, ...] = (
    ResultField(name="ranking_stage", kind="str", unit="", per_candidate=False, nullable=True, csv="ranking_stage",
                description="simulated (re-ranked by its simulation) or analytical (not simulated); absent without percentile SLOs"),
    ResultField(name="analytical_rank", kind="int", unit="", per_candidate=False, nullable=True, csv="analytical_rank",
                description="the row's rank before the simulation stage re-ranked the plan"),
    ResultField(name="simulated_usd_per_million_output_tokens", kind="float", unit="USD", per_candidate=False, nullable=True,
                csv="simulated_usd_per_million_output_tokens",
                description="the configuration's $/hour over the output tokens/s it served in its simulation at the plan's load"),
    ResultField(name="simulation", kind="object", unit="", per_candidate=False, nullable=True,
                description="its simulation: percentiles of TTFT, TPOT and end-to-end latency, goodput, SLO checks, and `cdf`, "
                            "each latency at every whole percent (null past top_n)"),
    ResultField(name="analytical_miss", kind="object", unit="", per_candidate=False, nullable=True,
                description="a row not simulated that misses a percentile TTFT SLO by physics, ranked with the misses: {metric, p, "
                            "s, least_s, ratio, basis} (the bound is below one prefill of the prompt on an idle configuration, at the "
                            "low end of its 80% interval); null otherwise"),
)  # fmt: skip

_JSON_TYPES = {"float": "number", "int": "integer", "str": "string", "bool": "boolean"}


def _property(f: ResultField) -> dict[str, Any]:
    description = f"{f.description} ({f.unit})" if f.unit else f.description
    if f.kind == "list":
        schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    elif f.kind == "object":
        schema = {"type": "object", "additionalProperties": True}
    else:
        schema = {"type": _JSON_TYPES[f.kind]}
    # NaN and infinities become null in JSON, so every float may be null.
    if f.nullable or f.kind == "float":
        schema["nullable"] = True
    return {**schema, "description": description}


def _object(fields: tuple[ResultField, ...], description: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        # Nothing is marked required: plans are stored for good, and one stored before a field
        # was declared keeps its rows as they were.
        "properties": {**{f.name: _property(f) for f in fields}, **extra},
    }


def _cost_object(description: str, **extra) -> dict[str, Any]:
    return {**_object(COST_FIELDS, description, **extra), "nullable": True}


def estimate_schema(*, extra: tuple[ResultField, ...] = ()) -> dict[str, Any]:
    """An Estimate as JSON, with its phases, memory and cost."""
    phase = _object(PHASE_FIELDS, "one forward of the phase, per chip")
    return _object(
        ESTIMATE_FIELDS + extra, "one evaluated configuration (planner/engine/fields.py)",
        prefill=phase, decode=phase, memory=_object(MEMORY_FIELDS, "memory per chip"),
        cost=_cost_object("the cheapest offering's price for it (null: none priced)"),
    )  # fmt: skip


def estimate_response_schema() -> dict[str, Any]:
    """What POST /api/v1/estimates/ answers: the estimate and every offering's price."""
    priced = {
        "provider": {"type": "string"}, "pricing_model": {"type": "string"}, "as_of": {"type": "string", "format": "date"},
        "source": {"type": "string"},
    }  # fmt: skip
    schema = estimate_schema()
    schema["properties"].update(
        tensor_parallel_chosen={"type": "string", "enum": ["auto", "given"], "description": "whether TP was searched or given"},
        chip_kind={"type": "string", "description": "cpu, gpu, tpu, lpu or other"},
        serving_engine={"type": "string", "nullable": True, "description": "the serving engine it is served under: its scheduler defaults, "
                        "and its fitted profile where efficiency_source says so (null: none named)"},
        weight_format={"type": "string", "description": "the format the weights are stored in: nvfp4, mxfp4, fp8_block, q4_k_m, ... "
                       "(block scales counted, docs/planner_math.md#units-and-data-types)"},
        weight_bits_per_weight={"type": "number", "description": "bits one weight takes in weight_format, its scales included"},
        costs={"type": "array", "items": _cost_object("one offering's price", **priced), "description": "every offering, cheapest first"},
        cost=_cost_object("the cheapest of costs (null: the chip has no offering)", **priced),
        intervals={"type": "object", "additionalProperties": True,
                   "description": "80% prediction intervals {figure: {low, high, basis}} from held-out errors of comparable predictions"},
    )
    return schema


def plan_row_schema() -> dict[str, Any]:
    return estimate_schema(extra=PLAN_ROW_FIELDS + SIMULATION_ROW_FIELDS)


def plan_results_schema() -> dict[str, Any]:
    row = plan_row_schema()
    return {
        "type": "object",
        "properties": {
            "ranked": {"type": "array", "items": row, "description": "feasible configurations, cheapest first"},
            "pareto_cost_tpot": {"type": "array", "items": row},
            "pareto_cost_ttft": {"type": "array", "items": row},
            "infeasible": {"type": "array", "items": {"type": "object", "properties": {
                "reason": {"type": "string"}, "count": {"type": "integer"}, "example": {"type": "string"},
                "example_configuration": row}}},
            "over_budget_count": {"type": "integer"},
            "search_seconds": {"type": "number", "nullable": True},
            "candidates_per_s": {"type": "number", "nullable": True},
            "efficiency_sources": {"type": "array", "items": {"type": "string"}},
            "simulation": {"type": "object", "additionalProperties": True, "nullable": True,
                           "description": "the simulation stage, with percentile SLOs: mode, counts, basis, timings (docs/api.md#simulations)"},
        },
    }  # fmt: skip


def csv_columns() -> list[ResultField]:
    """Columns of a plan's CSV export, in declaration order."""
    return [f for f in RESULT_FIELDS + PLAN_ROW_FIELDS + SIMULATION_ROW_FIELDS if f.csv]


def table_columns() -> list[ResultField]:
    """The ranking table's metric columns: every declared field with a label."""
    return [f for f in PLAN_ROW_FIELDS + RESULT_FIELDS if f.label]


def validated_fields(trial: str = "decode") -> list[ResultField]:
    """What a validation trial measures: its predicted-vs-measured rows (a decode trial: the estimate's own fields;
    a speculative or block-diffusion trial: its TRIAL_FIELDS)."""
    if trial in TRIAL_FIELDS:
        return list(TRIAL_FIELDS[trial])
    return [f for f in RESULT_FIELDS if f.validated]
