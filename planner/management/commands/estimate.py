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
        parser.add_argument("--pipeline-parallel", type=int, default=1)
        parser.add_argument("--weight-dtype", default="bf16")
        parser.add_argument("--kv-dtype")
        parser.add_argument("--batch", help='an integer, or "max" for the max-throughput point')
        parser.add_argument("--decoding", help='JSON, e.g. {"method":"speculative","draft_model":"llama-3.2-1b","acceptance_rate":0.8}')
        parser.add_argument("--offering")

    def handle(self, *args, **options):
        data = {
            "model": options["model"], "chip": options["chip"], "chip_count": options["chip_count"],
            "tensor_parallel": options["tensor_parallel"], "pipeline_parallel": options["pipeline_parallel"],
            "weight_dtype": options["weight_dtype"], "disaggregated": options["disaggregated"], **workload_from(options),
        }  # fmt: skip
        for key in ("kv_dtype", "batch", "offering"):
            if options.get(key) is not None:
                data[key] = options[key]
        for key in ("decoding", "efficiency"):
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


def format_estimate(e: dict) -> str:
    lines = [
        f"{e['model_slug']} on {e['chip_count']} x {e['chip_slug']} (TP {e['tensor_parallel']}, PP {e['pipeline_parallel']}, "
        f"{e['replicas']} replica(s)), weights {e['weight_dtype']}, KV {e['kv_dtype']}, compute {e['compute_dtype']}, "
        f"batch {e['batch']}, {e['decoding']}",
        f"  feasible: {e['feasible']}" + (f"  ({'; '.join(e['reasons'])})" if e["reasons"] else ""),
        f"  TTFT {e['ttft_s'] * 1e3:.1f} ms   TPOT {e['tpot_s'] * 1e3:.2f} ms   {e['tokens_per_s_per_user']:.1f} tok/s per user   "
        f"{e['output_tokens_per_s_total']:.0f} tok/s total",
    ]
    for phase in ("prefill", "decode"):
        p = e[phase]
        lines.append(
            f"  {phase:8} {p['bound']}-bound: intensity {p['intensity_flop_per_byte']:.1f} FLOP/byte vs ridge {p['ridge_flop_per_byte']:.0f}; "
            f"compute {p['compute_s'] * 1e3:.2f} ms, memory {p['memory_s'] * 1e3:.2f} ms, comm {p['comm_s'] * 1e3:.2f} ms"
        )
    m = e["memory"]
    lines.append(
        f"  memory per chip: weights {m['weights_bytes_per_chip'] / 1e9:.1f} GB, KV {m['kv_bytes_per_chip'] / 1e9:.1f} GB, "
        f"activations {m['activation_bytes_per_chip'] / 1e9:.2f} GB of {m['usable_bytes_per_chip'] / 1e9:.1f} GB usable; "
        f"max concurrency {m['max_concurrency']}"
    )
    lines.append(f"  MFU {e['mfu'] * 100:.1f}%  MBU {e['mbu'] * 100:.1f}%  energy {e['energy_per_output_token_j']:.3f} J/token "
                 f"(at TDP: {e['energy_per_output_token_upper_j']:.3f})  efficiency: {e['efficiency_source']}")  # fmt: skip
    for c in e["costs"]:
        per_million = c["usd_per_million_output_tokens"]
        lines.append(f"  ${per_million:.3f} per 1M output tokens  ({c['offering_slug']}, {c['pricing_model']}, ${c['usd_per_chip_hour']:.3f}/chip-h)")
    for warning in e["warnings"]:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)
