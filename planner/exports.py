from __future__ import annotations

import csv
import io

from planner.models import Plan

CSV_COLUMNS = [
    ("rank", None), ("chip", "chip_slug"), ("chip_kind", "chip_kind"), ("chip_count", "chip_count"),
    ("total_chips", "total_chips"), ("tensor_parallel", "tensor_parallel"), ("pipeline_parallel", "pipeline_parallel"),
    ("replicas", "replicas"), ("weight_dtype", "weight_dtype"), ("kv_dtype", "kv_dtype"), ("batch", "batch"),
    ("decoding", "decoding"), ("usd_per_million_output_tokens", "usd_per_million_output_tokens"),
    ("usd_per_million_input_tokens", "usd_per_million_input_tokens"), ("offering", "offering"),
    ("pricing_model", "pricing_model"), ("ttft_s", "ttft_s"), ("tpot_s", "tpot_s"),
    ("tokens_per_s_per_user", "tokens_per_s_per_user"), ("output_tokens_per_s_total", "output_tokens_per_s_total"),
    ("mfu", "mfu"), ("mbu", "mbu"), ("energy_per_output_token_j", "energy_per_output_token_j"),
    ("efficiency_source", "efficiency_source"),
]  # fmt: skip


def plan_csv(plan: Plan) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([name for name, _ in CSV_COLUMNS] + ["decode_bound", "prefill_bound"])
    for rank, row in enumerate(plan.results.get("ranked", []), start=1):
        values = [rank if key is None else row.get(key) for _, key in CSV_COLUMNS]
        writer.writerow(values + [row["decode"]["bound"], row["prefill"]["bound"]])
    return out.getvalue()
