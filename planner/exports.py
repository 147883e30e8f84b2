"""A plan's ranked rows as CSV: the columns are the declared result fields with a CSV name
(planner/result_schema.py), plus the rank and the two phases' bounds."""
from __future__ import annotations

import csv
import io

from planner.models import Plan
from planner.result_schema import csv_columns


def plan_csv(plan: Plan) -> str:
    columns = csv_columns()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["rank", *(f.csv for f in columns), "decode_bound", "prefill_bound"])
    for rank, row in enumerate(plan.results.get("ranked", []), start=1):
        writer.writerow([rank, *(row.get(f.name) for f in columns), row["decode"]["bound"], row["prefill"]["bound"]])
    return out.getvalue()
