from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from planner.fleet_apis import FleetOutputSerializer
from planner.fleet_serializers import FleetInputSerializer
from planner.fleet_services import FleetRefused, fleet_create, fleet_csv
from planner.management.commands._inputs import parse_json, raise_errors


def _class(text: str) -> dict:
    """name:prompt_tokens:output_tokens:requests_per_s[:ttft_slo_s[:tpot_slo_s]]"""
    parts = text.split(":")
    if not 4 <= len(parts) <= 6:
        raise CommandError(f"--class {text!r}: name:prompt_tokens:output_tokens:requests_per_s[:ttft_slo_s[:tpot_slo_s]]")
    out = {"name": parts[0], "prompt_tokens": parts[1], "output_tokens": parts[2], "requests_per_s": parts[3]}
    for key, value in zip(("ttft_slo_s", "tpot_slo_s"), parts[4:]):
        if value:
            out[key] = value
    return out


class Command(BaseCommand):
    help = ("Plan the cheapest fleet for a traffic mix under power, rack and supply limits (same inputs as POST /api/v1/fleets/, "
            "docs/fleet.md); stores a FleetPlan and prints its allocation.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--input", help="a JSON file holding the POST /api/v1/fleets/ body (the other options then add to it)")
        parser.add_argument("--model")
        parser.add_argument("--class", dest="classes", action="append", default=[],
                            help="name:prompt_tokens:output_tokens:requests_per_s[:ttft_slo_s[:tpot_slo_s]]; repeat per class")  # fmt: skip
        parser.add_argument("--interruptible", action="append", default=[], metavar="CLASS",
                            help="a class that may run on spot capacity (batch work); repeat per class")  # fmt: skip
        parser.add_argument("--hardware", help="JSON: the hardware filter, as for plans")
        parser.add_argument("--serving-engine",
                            help="a catalog serving engine by slug, name or alias; unset: each chip under every engine that has a fitted "
                                 "profile and runs on it")  # fmt: skip
        parser.add_argument("--limits", help='JSON, e.g. {"wall_kw_max": 200, "apply_to": "all"}')
        parser.add_argument("--horizon", help='JSON, e.g. {"months": 12, "monthly_growth": 0.08}')
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the stored fleet as the API returns it")
        parser.add_argument("--csv", dest="as_csv", action="store_true", help="print the allocation as CSV")

    def handle(self, *args, **options):
        data = {}
        if options.get("input"):
            try:
                data = json.loads(Path(options["input"]).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise CommandError(f"--input: {exc}") from None
        if options.get("model"):
            data["model"] = options["model"]
        if options["classes"]:
            data["classes"] = [_class(c) for c in options["classes"]]
        for name in options["interruptible"]:
            chosen = [c for c in data.get("classes", []) if c.get("name") == name]
            if not chosen:
                raise CommandError(f"--interruptible {name}: no such class")
            chosen[0]["interruptible"] = True
        if options.get("serving_engine"):
            data["serving_engine"] = options["serving_engine"]
        for key in ("hardware", "limits", "horizon"):
            if options.get(key):
                data[key] = parse_json(options[key], key)
        serializer = FleetInputSerializer(data=data)
        if not serializer.is_valid():
            raise_errors(serializer.errors)
        try:
            fleet = fleet_create(data=serializer.validated_data, raw_inputs=serializer.data, inline=True)  # the CLI is no web process
        except FleetRefused as exc:
            raise CommandError(f"{exc.field}: {exc}") from None
        if options["as_json"]:
            self.stdout.write(json.dumps(FleetOutputSerializer(fleet).data, indent=1, default=str))
        elif options["as_csv"]:
            self.stdout.write(fleet_csv(fleet), ending="")
        else:
            self.stdout.write(format_fleet(fleet))


def _usd(value) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _per_month(values: list[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def format_fleet(fleet) -> str:
    r = fleet.results
    months = r["horizon"]["months"]
    lines = [
        f"fleet {fleet.id}: {fleet.model_slug}, {len(r['classes'])} classes, {r['candidates']['searched']:,} configurations searched, "
        f"{r['candidates']['kept']} candidates; {r['solver']['name']}: {r['status']} in {r['solver']['solve_seconds']:.2f} s",
        f"cost: {_usd(r['usd_per_month'][0])}/month" + (f" in month 1, {_usd(r['usd_total'])} over {months} months" if months > 1 else "")
        + (f", ${r['usd_per_million_output_tokens']:.3f} per 1M output tokens" if r["usd_per_million_output_tokens"] is not None else "")
        + f"; pessimistic {_usd(r['pessimistic']['usd_total'])}",
    ]  # fmt: skip
    best = r["best_single_chip"]
    if r.get("skipped_analyses"):
        lines.append("left out for lack of time: " + "; ".join(r["skipped_analyses"]))
    if best:
        lines.append(f"best single chip: {best['chip_slug']} at {_usd(best['usd_total'])}; the mix saves {_usd(best['saving_usd_total'])} "
                     f"({100 * (best['saving_share'] or 0):.1f}%)")  # fmt: skip
    lines.append("")
    money = "$/month" if months == 1 else f"$ {months} months"
    lines.append(f"{'class':<14} {'configuration':<58} {'offering':<40} {'replicas':>9} {money:>12}")
    for row in r["allocation"]:
        replicas = "/".join(str(n) for n in row["replicas"]) if months > 1 else str(row["replicas"][0])
        lines.append(f"{row['class']:<14} {row['configuration']:<58} {row['offering']:<40} {replicas:>9} {_usd(sum(row['usd_per_month'])):>12}")
    lines.append("")
    for c in r["classes"]:
        per_m = c["usd_per_million_output_tokens"]
        lines.append(f"{c['name']:<14} {c['requests_per_s']:g} req/s, {c['prompt_tokens']}+{c['output_tokens']} tokens: "
                     f"{'-' if per_m is None else f'${per_m:.3f}'} per 1M output tokens, capacity {_per_month(c['capacity_requests_per_s'])} req/s"
                     + (f" at the peak {_per_month(c['peak_requests_per_s'])}" if months > 1 else ""))  # fmt: skip
    for limit in r["limits"]:
        saving = limit["saving_usd_per_month_if_lifted"]
        lines.append(f"limit {limit['group']}: {limit['used']:.1f} of {limit['limit']:.1f} (slack {limit['slack']:.1f})"
                     + (f", binding: lifting it saves {_usd(saving)}/month" if limit["binding"] else ""))  # fmt: skip
    return "\n".join(lines) + "\n"
