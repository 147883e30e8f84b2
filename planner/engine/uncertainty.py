"""80% prediction intervals from cross-validated errors (docs/accuracy.md, "Prediction intervals").

An interval says how wrong comparable predictions were when their group was held out: the 10th
and 90th percentiles of log(measured / predicted) over held-out values of the same metric, chip
kind, serving engine and serving mode (colocated, or prefill disaggregated onto its own workers,
whose TTFT rides on a transfer and a prefill pool that colocated serving has not). A prediction made
with a serving engine's fitted profile whose group has too few values falls back to the fitted
profiles of every engine in the same mode, then to its engine over both modes, then to every
engine's fitted profile over both modes; any prediction last to the spec defaults' band of its chip
kind, in its mode, then over both. A chip the silicon file does not measure (every chip but NVIDIA's GPUs)
takes first the band of its kind among the chips measured elsewhere (benchmarks/measurements/other_chips.csv,
predicted with chip-family profiles, each compute architecture held out, widened by half: `chip_family_bands`), pooled over
every kind where its own has too few values, and served disaggregated widened to the silicon file's
disaggregated spread. A chip kind with no measurement behind it gets the envelope of every band of its metric
and mode (the chip-family bands among them), widened by half again, and says so.

Derived metrics carry the band of the one they come from: tokens/s per user is 1 / TPOT, total
tokens/s and $/1M output tokens scale with TPOT at a fixed batch, so their bands are TPOT's (the
first inverted).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

LOW_QUANTILE, HIGH_QUANTILE = 0.10, 0.90
MIN_VALUES = 30
UNKNOWN_WIDENING = 1.5
ANY = "*"
# The engine of a band pooled over every serving engine's fitted-profile predictions (engine ANY: the spec defaults').
FITTED = "+"
# The engine of a band of predictions made with chip-family profiles on chips outside the silicon file, each chip
# held out (accuracy.write_error_bands with another measurements file).
CHIP_FAMILY = "~"
# The engine key of a chip outside the silicon file that no fitted profile speaks for (no calibration, no chip-family
# profile: a vendor measured too little or not at all, catalog_specs.family_calibration): its intervals are the widest,
# every band's span widened, as for a chip kind with no band at all.
UNMEASURED = "?"
COLOCATED, DISAGGREGATED = "colocated", "disaggregated"
# A measured row's `mode` (the silicon layout's agg / disagg) as a serving mode.
SERVING_OF_MODE = {"agg": COLOCATED, "disagg": DISAGGREGATED}
# The metric whose band each reported figure borrows, and whether it runs inversely.
BAND_OF = {
    "ttft_s": ("ttft_s", False),
    "tpot_s": ("tpot_s", False),
    "tokens_per_s_per_user": ("tpot_s", True),
    "output_tokens_per_s_total": ("tpot_s", True),
    "usd_per_million_output_tokens": ("tpot_s", False),
}
# A metric of this project's measurements format as the figure it is reported as (a key of BAND_OF).
FIGURE_OF_MEASURED = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "decode_tokens_per_s_per_user": "tokens_per_s_per_user",
                      "output_tokens_per_s": "output_tokens_per_s_total"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ErrorBand:
    metric: str
    chip_kind: str  # "*": any
    engine: str  # "*": any
    low_log_ratio: float  # 10th percentile of log(measured / predicted)
    high_log_ratio: float
    values: int
    serving: str = ANY  # COLOCATED | DISAGGREGATED | ANY (bands stored before the mode was kept are ANY)
    pooled_from: str = ""  # set when the chip kind had too few values of its own and the band pools other kinds': why, in words


@dataclass(frozen=True, kw_only=True)
class Interval:
    low: float
    high: float
    basis: str  # which errors it rests on, in words


def serving_for(disaggregated: bool) -> str:
    """The serving mode of a deployment that does (or does not) disaggregate its prefill."""
    return DISAGGREGATED if disaggregated else COLOCATED


def serving_of(row: Mapping) -> str:
    """A row's serving mode: its `serving`, else read from its `mode` (agg / disagg), else ANY."""
    return row.get("serving") or SERVING_OF_MODE.get(row.get("mode") or "", ANY)


def bands_from(rows: Iterable[Mapping], *, engines: bool = True, pooled: bool = True) -> tuple[ErrorBand, ...]:
    """Bands from held-out predictions: rows with metric, chip_kind, engine, measured, predicted (and a serving
    mode or a `mode`, where known); per serving engine and over every engine's (FITTED) where `engines`, over
    every engine ("*") where `pooled`, each for the row's serving mode and over both modes."""
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in rows:
        ratio = math.log(float(r["measured"]) / float(r["predicted"]))
        scopes = [(r["chip_kind"], r["engine"]), (r["chip_kind"], FITTED)] if engines else []
        scopes += [(r["chip_kind"], ANY)] if pooled else []
        modes = {serving_of(r), ANY}
        keys = [(r["metric"], kind, engine, mode) for kind, engine in scopes for mode in modes]
        keys += [(r["metric"], ANY, ANY, ANY)] if pooled else []
        for key in keys:
            groups.setdefault(key, []).append(ratio)
    bands = []
    for (metric, kind, engine, serving), ratios in sorted(groups.items()):
        if len(ratios) >= MIN_VALUES or (kind, engine, serving) == (ANY, ANY, ANY):
            low, high = np.quantile(ratios, [LOW_QUANTILE, HIGH_QUANTILE])
            bands.append(ErrorBand(metric=metric, chip_kind=kind, engine=engine, serving=serving, low_log_ratio=float(low),
                                   high_log_ratio=float(high), values=len(ratios)))  # fmt: skip
    return tuple(bands)


def chip_family_bands(rows: Iterable[Mapping]) -> tuple[ErrorBand, ...]:
    """Bands of colocated predictions made with chip-family profiles, each architecture held out: rows with metric (a key
    of FIGURE_OF_MEASURED: tokens/s borrow TPOT's band inverted), chip_kind, measured and predicted. A chip kind with
    fewer than MIN_VALUES values of a metric takes the band of the values of every kind that has too few of its own,
    or of every kind's where those are too few together, and says so (pooled_from): a kind measured enough has its
    own band and does not set the others' (74 of the 130 TTFTs of other_chips.csv are one TPU's).
    Each band is widened by half (UNKNOWN_WIDENING) about its centre: a chip's misses are its own (every value of
    one chip off the same way), so the quantiles of the other chips' errors are too narrow for it. Rebuilt
    without each chip of benchmarks/measurements/other_chips.csv in turn, the bare quantiles covered about 63% of
    the held-out chip's values, the widened ones 80% (accuracy FILE --cv prints it)."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["metric"] not in FIGURE_OF_MEASURED:
            continue
        metric, inverse = BAND_OF[FIGURE_OF_MEASURED[r["metric"]]]
        ratio = math.log(float(r["measured"]) / float(r["predicted"]))
        for kind in (r["chip_kind"], ANY):
            ratios.setdefault((metric, kind), []).append(-ratio if inverse else ratio)
    kinds = sorted({kind for _metric, kind in ratios if kind != ANY})
    bands = []
    for metric in sorted({metric for metric, _kind in ratios}):
        short = [kind for kind in kinds if len(ratios.get((metric, kind), [])) < MIN_VALUES]
        spare = [v for kind in short for v in ratios.get((metric, kind), [])]
        pooled, over = (spare, f"{POOLED_OVER}{_listed(short)} chips, each too few on its own") if len(spare) >= MIN_VALUES else (
            ratios[(metric, ANY)], "")  # fmt: skip
        for kind in kinds:
            own = ratios.get((metric, kind), [])
            values, note = (own, "") if len(own) >= MIN_VALUES else (pooled, f"too few on {kind} chips: {len(own)}{over}")
            low, high = np.quantile(values, [LOW_QUANTILE, HIGH_QUANTILE])
            centre, half = (low + high) / 2, UNKNOWN_WIDENING * (high - low) / 2
            bands.append(ErrorBand(metric=metric, chip_kind=kind, engine=CHIP_FAMILY, serving=COLOCATED, low_log_ratio=float(centre - half),
                                   high_log_ratio=float(centre + half), values=len(values), pooled_from=note))  # fmt: skip
    return tuple(bands)


# How chip_family_bands says a band pools the kinds that each have too few values (not every kind's).
POOLED_OVER = "; pooled over the "


def _listed(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _lookup(bands: Iterable[ErrorBand], metric: str, chip_kind: str, engine: str, serving: str,
            outside_silicon: bool) -> tuple[ErrorBand | None, bool]:  # fmt: skip
    by_key = {(b.metric, b.chip_kind, b.engine, b.serving): b for b in bands}
    # A fitted profile's prediction keeps to fitted profiles' errors, the serving mode before the engine: a
    # disaggregated deployment's errors are more like another engine's disaggregated ones than like its own
    # engine's colocated ones. The spec defaults' bands (engine ANY) come last.
    fitted = [(engine, serving), (FITTED, serving), (engine, ANY), (FITTED, ANY)] if engine not in (ANY, FITTED) else []
    # Chips outside the silicon file (every chip but NVIDIA's GPUs): their kind's chip-family errors first, stored
    # colocated (a disaggregated deployment of such a chip has no measurement of its own mode and takes them as
    # they are); the silicon file's bands of the kind only where none exist.
    outside = [(CHIP_FAMILY, COLOCATED)]
    silicon = [*fitted, (ANY, serving), (ANY, ANY)]
    for scope in (*outside, *silicon) if outside_silicon else (*silicon, *outside):
        if (metric, chip_kind, *scope) in by_key:
            return by_key[(metric, chip_kind, *scope)], True
    return by_key.get((metric, ANY, ANY, ANY)), False


def interval(predicted: float | None, figure: str, *, chip_kind: str, engine: str, bands: Iterable[ErrorBand],
             serving: str = ANY, outside_silicon: bool = False) -> Interval | None:  # fmt: skip
    """The 80% interval around `predicted` for a reported figure (a key of BAND_OF), served colocated or
    disaggregated (`serving`; ANY: either), on a chip the silicon file measures (NVIDIA's GPUs) or not
    (`outside_silicon`: its chip-family errors come first)."""
    if predicted is None or not math.isfinite(predicted) or figure not in BAND_OF:
        return None
    metric, inverse = BAND_OF[figure]
    bands = tuple(bands)
    if engine == UNMEASURED:  # no fitted profile speaks for the chip: the widest band, below
        band, comparable = None, False
        if not any(b.metric == metric for b in bands):
            return None
    else:
        band, comparable = _lookup(bands, metric, chip_kind, engine, serving, outside_silicon)
        if band is None:
            return None
    if comparable and band is not None:
        low, high = band.low_log_ratio, band.high_log_ratio
        basis = f"{band.values} held-out {metric} errors on {_scope(band)}"
        if band.pooled_from:
            basis += f" ({band.pooled_from})"
        if band.engine == CHIP_FAMILY:
            basis += ", widened by half"
            # Measured colocated only: a disaggregated deployment also spans the transfer's and the prefill pool's
            # spread, as the silicon file's disaggregated predictions show it.
            spread = [b for b in bands if b.metric == metric and b.serving == DISAGGREGATED and b.engine == ANY]
            if serving == DISAGGREGATED and spread:
                low, high = min(low, *(b.low_log_ratio for b in spread)), max(high, *(b.high_log_ratio for b in spread))
                basis += ", then to the silicon file's disaggregated spread (none of these chips measured disaggregated)"
        if serving != ANY and band.serving == ANY:
            basis += f" (too few {serving} ones: both serving modes)"
    else:
        # Every band of predictions served the same way (a disaggregated band's spread is the transfer's and the
        # prefill pool's, not the unmeasured chip's), else of either way: the envelope of them all, so that an
        # unmeasured chip is never less uncertain than a measured one.
        of_metric = [b for b in bands if b.metric == metric]
        # The chip-family bands (stored colocated) speak for a disaggregated deployment too (widened, above).
        alike = ([b for b in of_metric if b.serving == serving or b.engine == CHIP_FAMILY] or [b for b in of_metric if b.serving == ANY]
                 or of_metric)  # fmt: skip
        lowest, highest = min(b.low_log_ratio for b in alike), max(b.high_log_ratio for b in alike)
        centre, half = (lowest + highest) / 2, (highest - lowest) / 2
        low, high = centre - UNKNOWN_WIDENING * half, centre + UNKNOWN_WIDENING * half
        served = "" if alike[0].serving == ANY else f" of {alike[0].serving} predictions"
        basis = (f"no measurement of a {chip_kind} chip on {engine}" if engine != UNMEASURED else
                 f"no measurement of a {chip_kind} chip of this vendor (spec defaults)")  # fmt: skip
        basis += f": every {metric} band{served}, their span widened by half"
    if inverse:
        low, high = -high, -low
    if comparable and (low > 0 or high < 0):  # the spec defaults' TTFT on NVIDIA GPUs, say: nine in ten such predictions ran low
        basis += (f"; the range lies {'above' if low > 0 else 'below'} the prediction: at least nine in ten comparable predictions "
                  f"ran {'under' if low > 0 else 'over'} the measured value")
    return Interval(low=predicted * math.exp(low), high=predicted * math.exp(high), basis=basis)


def served_share(served, total) -> np.ndarray:
    """The share of its capacity (output tokens/s, `total`) a request rate asks of a configuration (`served`): 1 without
    a rate, or where either is unknown (NaN or None)."""
    served, total = np.asarray(served, dtype=float), np.asarray(total, dtype=float)
    known = np.isfinite(served) & np.isfinite(total) & (total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(known, np.minimum(served / np.where(known, total, 1.0), 1.0), 1.0)


def served_cost_ratio(ratio, share) -> np.ndarray:
    """A cost's multiple at a capacity `ratio` times slower than predicted (an end of TPOT's band), where a request rate
    asks `share` of the capacity: charged to the rate's tokens, the cost moves only where the capacity falls short of
    them, max(1, share x ratio); without a rate (share 1), the ratio itself."""
    ratio, share = np.asarray(ratio, dtype=float), np.asarray(share, dtype=float)
    return np.where(share < 1.0, np.maximum(1.0, share * ratio), ratio)


def _scope(band: ErrorBand) -> str:
    kind = "any chip" if band.chip_kind == ANY else f"{band.chip_kind} chips"
    if band.engine == CHIP_FAMILY:
        if band.pooled_from:
            kind = "chips of several kinds" if POOLED_OVER in band.pooled_from else "chips of every kind"
        return f"{kind} measured outside the silicon file (chip-family profiles, each architecture held out)"
    scope = kind if band.engine == ANY else f"{kind} with {'every serving engine' if band.engine == FITTED else band.engine}"
    return scope if band.serving == ANY else f"{scope}, {band.serving}"


def coverage(rows: Iterable[Mapping]) -> float:
    """Share of rows whose measured value lies inside their interval."""
    inside = [r["interval"][0] <= r["measured"] <= r["interval"][1] for r in rows if r.get("interval")]
    return float(np.mean(inside)) if inside else float("nan")


def save_bands(bands: Iterable[ErrorBand], path: Path, *, source: str) -> None:
    path.write_text(json.dumps({"source": source, "bands": [asdict(b) for b in bands]}, indent=1) + "\n")


def load_bands(path: Path) -> tuple[ErrorBand, ...]:
    if not path.is_file():
        return ()
    return tuple(ErrorBand(**b) for b in json.loads(path.read_text())["bands"])
