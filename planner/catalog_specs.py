"""Catalog rows -> engine specs. The engine never sees ORM objects.

Also records the values used, so a Plan can store the catalog snapshot it was built from."""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hwcatalog import architecture
from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
from planner.engine.attention import attention_for
from planner.engine_profiles import stored_profiles, variant_slug
from planner.engine.efficiency import FACTORS, Efficiency, default_efficiency
from planner.engine.family_fit import (
    FAMILY_SOURCE,
    FamilyProfile,
    engine_family,
    family_engine,
    family_of,
    fitted_family,
    load_family_profiles,
    pooled_family,
    same_architecture,
)
from planner.engine.specs import ChipSpec, ModelSpec, OfferingSpec, Scheduler
from planner.engine.units import DTYPES
from planner.models import Calibration


def model_spec(model: ModelArch, *, num_layers: int | None = None) -> ModelSpec:
    """The engine's spec of a catalog model; `num_layers` describes a scaled copy (fewer
    layers, same layer shapes), as a trial runs when the whole model does not fit.

    Memory, bytes and FLOPs use the parameter counts derived from the shapes (Llama-3.1-70B: 70.55e9,
    141.1 GB at bf16), not the rounded published ones (70e9), which stay the catalog's labels."""
    shape = model.shape()
    if num_layers is not None and num_layers != model.num_layers:
        shape = scaled_shape(shape, num_layers)
    total, active = float(architecture.parameter_count(shape)), float(architecture.active_parameter_count(shape))
    return ModelSpec(
        slug=model.slug,
        shape=shape,
        total_params=total,
        active_params=active,
        attention=attention_for(shape),
        generation_kind=model.generation_kind,
        default_block_size=model.default_block_size,
        max_context_tokens=model.max_context_tokens,
        checkpoint_format=model.checkpoint_format,
        sixteen_bit_modules=model.sixteen_bit_modules or {},
    )


def scaled_shape(shape: architecture.ArchShape, num_layers: int) -> architecture.ArchShape:
    """The shape with `num_layers` layers of the same kinds in the same proportions: its MoE, FFN, windowed,
    linear-attention (Gated DeltaNet / Mamba-2) and attention layer counts scale with it, each kind it has
    keeping at least one layer."""
    factor = num_layers / shape.num_layers

    def scale(count: int | None) -> int | None:
        return min(max(round(count * factor), 1), num_layers) if count else count

    attention = scale(shape.attention_layers)
    linear = scale(shape.linear_attention_layers) if shape.linear_attention_kind else shape.linear_attention_layers
    if linear and shape.linear_attention_kind:
        has_attention = architecture.attention_layer_count(shape) > 0
        linear = min(linear, num_layers - (attention if attention is not None else int(has_attention)))
    ffn = scale(shape.ffn_layers)
    moe = None
    if shape.is_moe:
        moe = min(scale(shape.moe_layer_count if shape.moe_layer_count is not None else architecture.ffn_layer_count(shape)) or 0,
                  ffn if ffn is not None else num_layers)  # fmt: skip
    windowed = scale(shape.sliding_window_layers)
    # DeepSeek-V4's CSA and HCA layers: both kinds kept, within the attention layers.
    csa, hca = scale(shape.csa_layers), scale(shape.hca_layers)
    if csa and hca:
        room = attention if attention is not None else num_layers - (linear if linear and shape.linear_attention_kind else 0)
        hca = max(min(hca, room - csa), 1)
        csa = min(csa, room - hca)
    return dataclasses.replace(
        shape, num_layers=num_layers, moe_layer_count=moe, ffn_layers=ffn, attention_layers=attention,
        linear_attention_layers=linear, sliding_window_layers=windowed, csa_layers=csa, hca_layers=hca,
    )  # fmt: skip


def chip_spec(chip: Chip) -> ChipSpec:
    return ChipSpec(
        slug=chip.slug,
        kind=chip.kind,
        vendor=chip.vendor,
        memory_capacity_bytes=float(chip.memory_capacity_bytes),
        memory_bandwidth_bytes_per_s=chip.memory_bandwidth_bytes_per_s,
        peak_flops_per_s=chip.peak_flops_per_s(),
        on_chip_sram_bytes=float(chip.on_chip_sram_bytes) if chip.on_chip_sram_bytes else None,
        link_bandwidth_bytes_per_s=chip.link_bandwidth_bytes_per_s,
        link_latency_s=chip.link_latency_s,
        chips_per_node=chip.chips_per_node,
        tdp_watts=chip.tdp_watts,
        cores=chip.cores,
        peak_fp16_acc16_flops_per_s=chip.peak_fp16_acc16_flops_per_s,
    )


def scheduler_spec(engine: ServingEngine) -> Scheduler:
    return Scheduler(
        engine=engine.name, kv_memory_fraction=engine.kv_memory_fraction, kv_memory_of_free=engine.kv_memory_rule == ServingEngine.MemoryRule.OF_FREE,
        max_batch_sequences=engine.max_batch_sequences, prefill_token_budget=engine.prefill_token_budget,
        prefill_runs_alone=engine.prefill_runs_alone,
        cpu_matrix_dtypes=tuple(engine.cpu_matrix_dtypes) if engine.cpu_matrix_dtypes is not None else None,
        cpu_matrix_experts=engine.cpu_matrix_experts, weight_dtypes=tuple(engine.weight_dtypes) or None,
        moe_dispatch=engine.moe_dispatch, attention_dp_dense=engine.attention_dp_dense,
        attention_dp_balance_timeout_steps=engine.attention_dp_balance_timeout_steps,
        accumulates_in_16_bits=engine.accumulates_in_16_bits,
    )  # fmt: skip


def name_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def serving_engines_by_name() -> dict[str, ServingEngine]:
    """Every catalog serving engine under each name a request may use (slug, name, fitted profile, alias), case and
    spacing aside (name_key): one query."""
    return {name_key(n): engine for engine in ServingEngine.objects.all() for n in (engine.slug, engine.name, engine.profile, *engine.aliases) if n}


def serving_engine_named(name: str) -> ServingEngine | None:
    """The catalog serving engine a request names: by slug, name, fitted profile or alias, case and spacing aside."""
    return serving_engines_by_name().get(name_key(name))


def serving_engine_names() -> list[str]:
    return list(ServingEngine.objects.order_by("name").values_list("name", flat=True))


def engine_refusal(engine: ServingEngine, chip: Chip, weight_dtype: str | None = None) -> str | None:
    """Why the engine cannot serve this chip (the chip kinds and vendors it runs on) or these weights, or None."""
    if chip.kind not in engine.chip_kinds:
        return f"{engine.name} runs on {', '.join(engine.chip_kinds)} chips; {chip.slug} is of kind {chip.kind}."
    # A vendor entry may name its kinds too ("Intel cpu"): the engine runs on that vendor's chips of that kind only.
    vendors = {name_key(v) for v in engine.chip_vendors}
    vendor = name_key(chip.vendor or "")
    if vendors and vendor not in vendors and f"{vendor} {chip.kind}" not in vendors:
        return f"{engine.name} runs on {', '.join(engine.chip_vendors)} chips only; {chip.slug} is {chip.vendor}'s."
    if weight_dtype and weight_dtype not in engine.weight_dtypes:
        return f"{engine.name} serves {', '.join(engine.weight_dtypes)} weights, not {weight_dtype}."
    return None


def engines_running_on(chips: list[Chip], names) -> dict[str, tuple[str, ...]]:
    """By chip slug, the serving engines of `names` (catalog names, slugs or fitted profiles) that run on the chip
    (engine_refusal, any weight dtype): what a plan tries each chip under."""
    by_name = serving_engines_by_name()  # one query for every name
    engines = [(name, by_name.get(name_key(name))) for name in names]
    return {chip.slug: tuple(name for name, engine in engines if engine is not None and engine_refusal(engine, chip) is None) for chip in chips}


def engine_schedulers() -> dict[str, Scheduler]:
    """Each catalog serving engine's scheduler defaults, by the name of its fitted profile (and by its own
    name, slug and aliases)."""
    out: dict[str, Scheduler] = {}
    for engine in ServingEngine.objects.all():
        spec = scheduler_spec(engine)
        for name in (engine.profile, engine.name, engine.slug, *engine.aliases):
            if name:
                out.setdefault(name, spec)
    return out


def offering_spec(offering: Offering) -> OfferingSpec:
    return OfferingSpec(
        slug=offering.slug,
        pricing_model=offering.pricing_model,
        usd_per_chip_hour=offering.usd_per_chip_hour,
        purchase_usd_per_chip=offering.purchase_usd_per_chip,
        amortisation_years=offering.amortisation_years,
        power_usd_per_kwh=offering.power_usd_per_kwh,
        pue=offering.pue,
        chips_per_unit=offering.chips_per_unit,
        system_parts_usd=tuple((part["kind"], float(part["usd"])) for part in offering.system_parts),
        host_watts_per_unit=offering.host_watts_per_unit,
        datacentre_usd_per_kw_month=offering.datacentre_usd_per_kw_month,
        utilisation=offering.utilisation,
    )


FAMILY_PROFILES = Path(__file__).resolve().parent / "data" / "chip_family_profiles.json"


@functools.lru_cache(maxsize=1)
def stored_family_profiles() -> dict[str, FamilyProfile]:
    """The chip-family profiles fitted to published measurements (`manage.py accuracy
    benchmarks/measurements/other_chips.csv --profiles-out planner/data/chip_family_profiles.json`)."""
    return load_family_profiles(FAMILY_PROFILES)[0]


def family_calibration(chips: Iterable[Chip], profiles: dict[str, FamilyProfile], *, measured_vendors_only: bool = True) -> dict[tuple[str, str], Efficiency]:
    """Each chip a fitted family profile speaks for (the chips it was fitted on; the family's other chips where
    it transfers; a chip of the same compute architecture as one it was fitted on) at that profile, per weight dtype: the fitted bf16 fractions with
    the dtype's scale on top (efficiency.default_efficiency), the fitted step overhead, the rest the chip's
    spec defaults. A chip outside the silicon file that no profile of its family speaks for takes its kind's pooled
    profile where that speaks for it (family_fit.pooled_family: fitted on it; or transferring, for a chip of a stated
    architecture of a vendor it measured, or of any vendor without `measured_vendors_only`, as its transfer test asks of
    it). A profile of the family's
    chips under one serving engine (family_fit.engine_family: NVIDIA GPUs under
    llama.cpp) is keyed by the chip's variant slug under that engine, as a calibration measured under it is
    (engine_profiles.variant_slug): it speaks for the chip when a request or row names the engine, and only then."""
    out: dict[tuple[str, str], Efficiency] = {}
    architectures: dict[str, str] | None = None  # of the chips the profiles were fitted on, read when a chip needs them
    profiled_engines = stored_profiles()

    def peers_of(chip: Chip, profile: FamilyProfile) -> tuple[str, ...]:
        nonlocal architectures
        if chip.slug in profile.chips or profile.transfers or not chip.architecture:
            return ()
        if architectures is None:
            fitted_on = {slug for p in profiles.values() for slug in p.chips}
            architectures = dict(Chip.objects.filter(slug__in=fitted_on).values_list("slug", "architecture"))
        return same_architecture(profile, chip.architecture, architectures)

    def write(chip: Chip, family: str, profile: FamilyProfile, label: str) -> None:
        engine = family_engine(family)
        slug = variant_slug(chip.slug, engine) if engine else chip.slug
        spec = chip_spec(chip)
        bf16 = default_efficiency(spec, "bf16")
        for dtype in DTYPES:
            base = default_efficiency(spec, dtype)
            out[(slug, dtype)] = dataclasses.replace(
                base, compute_fraction=min(profile.compute_fraction * base.compute_fraction / bf16.compute_fraction, 1.0),
                bandwidth_fraction=min(profile.bandwidth_fraction * base.bandwidth_fraction / bf16.bandwidth_fraction, 1.0),
                step_overhead_s=profile.step_overhead_s, source=f"{FAMILY_SOURCE} ({family}: {label})",
            )  # fmt: skip

    # A chip's family is found by its vendor's name as the pools' vendors are (name_key: case and spacing aside), so a
    # vendor spelled another way takes its family's profile, not the pool's.
    by_key = {name_key(f): f for f in profiles}
    for chip in chips:
        spelled = family_of(chip.vendor, chip.kind)
        plain = by_key.get(name_key(spelled), spelled)
        # An engine family stands for an engine with no serving-engine profile; once the engine has one, that speaks.
        under = [(f, p) for f, p in profiles.items()
                 if (engine := family_engine(f)) and name_key(f) == name_key(engine_family(chip.vendor, chip.kind, engine))
                 and engine not in profiled_engines]
        candidates = ([(plain, profiles.get(plain))] if fitted_family(chip.vendor, chip.kind) else []) + under
        spoke = False
        for family, profile in candidates:
            if profile is None:
                continue
            peers = peers_of(chip, profile)
            if not profile.speaks_for(chip.slug, architecture_peers=peers):
                continue
            write(chip, family, profile, f"{profile.label}; the same {chip.architecture} architecture as {', '.join(peers)}" if peers else profile.label)
            spoke = spoke or family == plain
        pool = profiles.get(pooled_family(chip.kind)) if fitted_family(chip.vendor, chip.kind) and not spoke else None
        # It speaks beyond its chips only for a new architecture (a chip whose architecture the catalog states, not a device a
        # worker probed) of a vendor it measured (family_fit.FamilyProfile.vendors): a chip's efficiency is its vendor's
        # software stack's, which nothing measured on other vendors' chips shows.
        measured_vendor = name_key(chip.vendor or "") in {name_key(v) for v in pool.vendors} if pool is not None else False
        if pool is not None and (chip.slug in pool.chips or (pool.transfers and chip.architecture and (measured_vendor or not measured_vendors_only))):
            where = "" if chip.slug in pool.chips else f"; nothing measured on {chip.vendor}'s {chip.architecture or chip.slug}"
            write(chip, pooled_family(chip.kind), pool, f"{pool.label}{where}")
    return out


def calibrations_for(chip_slugs: Iterable[str]) -> dict[tuple[str, str], Efficiency]:
    """The newest active calibration per (chip, weight dtype), every factor applied, keyed by the chip's slug
    (the planner's own trials) or, for runs measured under a serving engine, by the chip's variant slug
    under that engine ("nvidia-h100-sxm@vLLM", planner/engine_profiles.variant_slug). A factor a row lacks
    (fitted before it was stored) is the chip's spec default for that dtype."""
    slugs = list(chip_slugs)
    newest: dict[tuple[str, str], Efficiency] = {}
    rows = Calibration.objects.filter(chip_slug__in=slugs, active=True).order_by("chip_slug", "serving_engine", "weight_dtype", "-version")
    chips: dict[str, Chip] | None = None
    engines: dict[str, ServingEngine] | None = None  # read when a row names one
    for row in rows:
        if not row.serving_engine:
            engine = ""
        else:  # the row's engine as requests name it (the catalog's name), whatever it was stored as
            engines = serving_engines_by_name() if engines is None else engines
            found = engines.get(name_key(row.serving_engine))
            engine = found.name if found else row.serving_engine
        key = (variant_slug(row.chip_slug, engine) if engine else row.chip_slug, row.weight_dtype)
        if key in newest:
            continue
        factors = {name: getattr(row, name) for name in FACTORS}
        if any(value is None for value in factors.values()):
            chips = chips if chips is not None else {c.slug: c for c in Chip.objects.filter(slug__in=slugs)}
            chip = chips.get(row.chip_slug)
            dtype = row.weight_dtype if row.weight_dtype != "*" else "bf16"
            default = default_efficiency(chip_spec(chip), dtype) if chip else Efficiency(**{k: v for k, v in factors.items() if v is not None})
            factors = {name: getattr(default, name) if value is None else value for name, value in factors.items()}
        newest[key] = Efficiency(**factors, source=row.label)
    # A chip of a family fitted to published measurements, with no calibration of its own, takes the family's profile.
    # A chip (or a chip under an engine) with a calibration of its own, in any dtype, keeps it: runs measured on it beat
    # a profile fitted on its family's.
    profiles = stored_family_profiles()
    if profiles:
        measured = {slug for slug, _ in newest}  # chips calibrated, and chips' variants measured under an engine
        for key, efficiency in family_calibration(Chip.objects.filter(slug__in=slugs), profiles).items():
            if key[0] not in measured:
                newest[key] = efficiency
    return newest


_SNAPSHOT_EXCLUDE = {"id", "created_at", "updated_at"}


def snapshot(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """JSON-safe copy of catalog rows as used (for Plan.catalog_snapshot)."""
    out = []
    for row in rows:
        values = {}
        for field in row._meta.concrete_fields:
            if field.name in _SNAPSHOT_EXCLUDE:
                continue
            value = getattr(row, field.attname)
            values[field.name] = value.isoformat() if hasattr(value, "isoformat") else value
        if isinstance(row, Offering):
            values["chip"] = row.chip.slug
        out.append(values)
    return out
