from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from planner.apis import PlanOutputSerializer
from planner.management.commands._inputs import add_workload_arguments, parse_json, raise_errors, workload_from
from planner.serializers import PlanInputSerializer
from planner.services import PlanTooLarge, plan_create


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


class Command(BaseCommand):
    help = "Search and rank configurations for a model and workload; stores a Plan (same inputs as POST /api/v1/plans/)."

    def add_arguments(self, parser):
        add_workload_arguments(parser)
        parser.add_argument("--kinds", help="comma-separated: cpu,gpu,tpu,lpu,other")
        parser.add_argument("--vendors", help="comma-separated")
        parser.add_argument("--chips", help="comma-separated chip slugs")
        parser.add_argument("--max-chips", type=int, default=64)
        parser.add_argument("--pricing-models", help="comma-separated: on_demand,reserved,spot,purchase")
        parser.add_argument("--ownership", choices=["any", "rent", "own"], default="any")
        parser.add_argument("--weight-dtypes", help="comma-separated, e.g. bf16,fp8")
        parser.add_argument("--budget", type=float, help="max $ per 1M output tokens")
        parser.add_argument("--decoding", action="append", help="JSON decoding option; repeat for several")
        parser.add_argument(
            "--serving-engine", help="a catalog serving engine by slug, name or alias; unset: every engine with a fitted profile"
        )
        parser.add_argument("--scheduler", help='JSON, what the named engine\'s command line sets, e.g. {"max_sequences":256}')
        parser.add_argument("--rank-by", choices=["expected", "pessimistic"], help="expected (default) or the high end of the 80% interval")
        parser.add_argument("--top", type=int, default=10)
        parser.add_argument("--name", help="a label for the stored plan")
        parser.add_argument("--tag", action="append", help="a tag for the stored plan; repeat for several")

    def handle(self, *args, **options):
        hardware = {"max_chips": options["max_chips"], "ownership": options["ownership"]}
        for key in ("kinds", "vendors", "chips", "pricing_models", "weight_dtypes"):
            if _csv(options.get(key)):
                hardware[key] = _csv(options[key])
        data = {"model": options["model"], "workload": workload_from(options), "hardware": hardware, "disaggregated": options["disaggregated"]}
        if options.get("decoding"):
            data["decodings"] = [parse_json(d, "decoding") for d in options["decoding"]]
        if options.get("budget") is not None:
            data["budget_usd_per_million_output_tokens"] = options["budget"]
        if options.get("efficiency"):
            data["efficiency"] = parse_json(options["efficiency"], "efficiency")
        for key in ("serving_engine", "rank_by"):
            if options.get(key) is not None:
                data[key] = options[key]
        if options.get("scheduler"):
            data["scheduler"] = parse_json(options["scheduler"], "scheduler")
        if options.get("name") is not None:
            data["name"] = options["name"]
        if options.get("tag"):
            data["tags"] = options["tag"]
        serializer = PlanInputSerializer(data=data)
        if not serializer.is_valid():
            raise_errors(serializer.errors)
        try:
            plan = plan_create(data=serializer.validated_data, raw_inputs=serializer.data, inline=True)  # the CLI is no web process
        except PlanTooLarge as exc:
            raise CommandError(str(exc)) from None
        if options["as_json"]:
            self.stdout.write(json.dumps(PlanOutputSerializer(plan).data, indent=1, default=str))
            return
        self.stdout.write(format_plan(plan, top=options["top"]))


def format_plan(plan, *, top: int) -> str:
    r = plan.results
    lines = [f"plan {plan.id}{f' ({plan.name})' if plan.name else ''}: {plan.model_slug}, {plan.candidate_count:,} configurations, {plan.feasible_count:,} feasible "
             f"({r['search_seconds'] * 1e3:.0f} ms)"]  # fmt: skip
    lines.append(
        f"{'#':>3} {'configuration':52} {'$/1M out':>9} {'TTFT ms':>8} {'TPOT ms':>8} {'tok/s/user':>10} {'tok/s total':>11} "
        f"{'bound':12} {'own?':4} {'$/chip-h':>8} {'$/month':>9} offering"
    )
    for rank, row in enumerate(r["ranked"][:top], start=1):
        config = (f"{row['chip_count']}x {row['chip_slug']} TP{row['tensor_parallel']} PP{row['pipeline_parallel']} "
                  f"{row['weight_dtype']} b{row['batch']}")  # fmt: skip
        cost = row["usd_per_million_output_tokens"]
        per_chip_hour, per_month = row.get("usd_per_chip_hour"), row.get("usd_per_month")
        lines.append(
            f"{rank:>3} {config:52} {cost if cost is not None else float('nan'):>9.3f} {row['ttft_s'] * 1e3:>8.1f} "
            f"{row['tpot_s'] * 1e3:>8.2f} {row['tokens_per_s_per_user']:>10.1f} {row['output_tokens_per_s_total']:>11.0f} "
            f"{row['decode']['bound']:12} {row.get('ownership') or '-':4} "
            f"{per_chip_hour if per_chip_hour is not None else float('nan'):>8.2f} {per_month if per_month is not None else float('nan'):>9,.0f} "
            f"{row.get('offering') or '-'}"
        )
    if r["infeasible"]:
        lines.append("infeasible:")
        for group in r["infeasible"][:8]:
            lines.append(f"  {group['count']:>7,} {group['reason']}: e.g. {group['example']}")
    return "\n".join(lines)
