from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from planner.management.commands._inputs import add_workload_arguments, parse_json, raise_errors, workload_from
from planner.serializers import EstimateInputSerializer
from planner.services import estimate_compute


class Command(BaseCommand):
    help = "Estimate one configuration (the same inputs as POST /api/v1/estimates/)."

    def add_arguments(self, parser):
        add_workload_arguments(parser)
        parser.add_argument("--chip", required=True)
        parser.add_argument("--chip-count", type=int, default=1)
        parser.add_argument("--tensor-parallel", default="auto")
        parser.add_argument(
            "--pipeline-parallel", type=int, help="default 1; an LPU with --tensor-parallel auto shards the model over its chips (TP x PP)"
        )
        parser.add_argument("--weight-dtype", default="bf16")
        parser.add_argument("--kv-dtype")
        parser.add_argument("--batch", help='an integer, or "max" for the max-throughput point')
        parser.add_argument("--decoding", help='JSON, e.g. {"method":"speculative","draft_model":"llama-3.2-1b","acceptance_rate":0.8}')
        parser.add_argument("--offering")
        parser.add_argument("--serving-engine", help="a catalog serving engine by slug, name or alias (GET /api/v1/engines/)")
        parser.add_argument("--scheduler", help='JSON, what the server\'s command line sets, e.g. {"max_sequences":256,"memory_fraction":0.9}')

    def handle(self, *args, **options):
        data = {
            "model": options["model"], "chip": options["chip"], "chip_count": options["chip_count"],
            "tensor_parallel": options["tensor_parallel"],
            "weight_dtype": options["weight_dtype"], "disaggregated": options["disaggregated"], **workload_from(options),
        }  # fmt: skip
        for key in ("pipeline_parallel", "kv_dtype", "batch", "offering", "serving_engine"):
            if options.get(key) is not None:
                data[key] = options[key]
        for key in ("decoding", "efficiency", "scheduler"):
            value = parse_json(options.get(key), key)
            if value is not None:
                data[key] = value
        serializer = EstimateInputSerializer(data=data)
        if not serializer.is_valid():
            raise_errors(serializer.errors)
        result = estimate_compute(data=serializer.validated_data)
        if options["as_json"]:
            self.stdout.write(json.dumps(result, indent=1))
            return
        self.stdout.write(format_estimate(result))


def _n(value, spec: str, scale: float = 1.0) -> str:
    """A number as `spec` says, or "n/a" where the estimate has none (an infeasible one often has no times)."""
    return "n/a" if value is None else format(value * scale, spec)


def format_estimate(e: dict) -> str:
    """Every estimate, feasible or not, in words (missing figures as n/a)."""
    lines = [
        f"{e['model_slug']} on {e['chip_count']} x {e['chip_slug']} (TP {e['tensor_parallel']}, PP {e['pipeline_parallel']}, "
        f"{e['replicas']} replica(s)), weights {e['weight_dtype']}, KV {e['kv_dtype']}, compute {e['compute_dtype']}, "
        f"batch {e['batch']}, {e['decoding']}",
        f"  feasible: {e['feasible']}" + (f"  ({'; '.join(e['reasons'])})" if e["reasons"] else ""),
        f"  TTFT {_n(e['ttft_s'], '.1f', 1e3)} ms   TPOT {_n(e['tpot_s'], '.2f', 1e3)} ms   "
        f"{_n(e['tokens_per_s_per_user'], '.1f')} tok/s per user   {_n(e['output_tokens_per_s_total'], '.0f')} tok/s total"
        + (f" ({_n(e['served_output_tokens_per_s'], '.0f')} asked by the request rate: the costs are charged to them)"
           if (e.get("served_output_tokens_per_s") or 0) < (e.get("output_tokens_per_s_total") or 0) else ""),
    ]
    for phase in ("prefill", "decode"):
        p = e[phase]
        lines.append(
            f"  {phase:8} {p['bound']}-bound: intensity {_n(p['intensity_flop_per_byte'], '.1f')} FLOP/byte vs ridge "
            f"{_n(p['ridge_flop_per_byte'], '.0f')}; compute {_n(p['compute_s'], '.2f', 1e3)} ms, memory {_n(p['memory_s'], '.2f', 1e3)} ms, "
            f"comm {_n(p['comm_s'], '.2f', 1e3)} ms"
        )
    m = e["memory"]
    lines.append(
        f"  memory per chip: weights {_n(m['weights_bytes_per_chip'], '.1f', 1e-9)} GB, KV {_n(m['kv_bytes_per_chip'], '.1f', 1e-9)} GB, "
        f"activations {_n(m['activation_bytes_per_chip'], '.2f', 1e-9)} GB of {_n(m['usable_bytes_per_chip'], '.1f', 1e-9)} GB usable; "
        f"max concurrency {m['max_concurrency']}"
    )
    lines.append(
        f"  MFU {_n(e['mfu'], '.1f', 100)}%  MBU {_n(e['mbu'], '.1f', 100)}%  energy {_n(e['energy_per_output_token_j'], '.3f')} J/token "
        f"(at TDP: {_n(e['energy_per_output_token_upper_j'], '.3f')})  efficiency: {e['efficiency_source']}"
    )
    for c in e["costs"]:
        lines.append(
            f"  ${_n(c['usd_per_million_output_tokens'], '.3f')} per 1M output tokens  ({c['offering_slug']}, {c['ownership']}, "
            f"{c['pricing_model']}, ${c['usd_per_chip_hour']:.3f}/chip-h; {c['billed_chips']} chips paid for: "
            f"${c['usd_per_hour']:,.2f}/h, ${c['usd_per_month']:,.0f}/month)"
        )
        if c["ownership"] == "own":
            split = ", ".join(f"{name} ${value:.3f}" for name, value in sorted(c["cost_split"].items(), key=lambda kv: -kv[1]))
            lines.append(f"      per chip-hour: {split}")
    for warning in e["warnings"]:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)
