"""Shared by the management commands: argparse values -> the API's input dict for the estimate and plan commands, so the
CLI goes through the same serializers (and the same 400-style errors) as the REST API; the accuracy commands' doc blocks."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from planner import doc_blocks


def add_configs_argument(parser) -> None:
    """Both accuracy commands' --configs (planner/model_configs.py)."""
    parser.add_argument("--configs", type=Path, help="A silicon-layout file's folder of Hugging Face configs (ORG--NAME_config.json, "
                        "ORG--NAME_hf_quant_config.json): a checkpoint the catalog does not know is read from its own config or the one "
                        "named as its base model, for this run, nothing stored (default: the configs/ folder beside the CSV, if any).")


def checked_configs(configs: Path | None) -> Path | None:
    if configs is not None and not configs.is_dir():
        raise CommandError(f"--configs {configs}: no such folder")
    return configs


def add_workload_arguments(parser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt-tokens", type=int, required=True)
    parser.add_argument("--output-tokens", type=int, required=True)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--request-rate", type=float, help="requests per second")
    parser.add_argument(
        "--closed-loop", action="store_true",
        help="--concurrency clients, each sending its next request when its last answer ends; clients memory cannot hold wait for a slot",
    )  # fmt: skip
    parser.add_argument("--ttft-slo", type=float, help="seconds")
    parser.add_argument("--tpot-slo", type=float, help="seconds")
    parser.add_argument("--efficiency", help='JSON, e.g. {"compute_fraction":0.6,"bandwidth_fraction":0.8,"step_overhead_s":0.0003}')
    parser.add_argument("--disaggregated", action="store_true")
    parser.add_argument("--json", action="store_true", dest="as_json")


def workload_from(options: dict[str, Any]) -> dict[str, Any]:
    mapping = {"prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens", "concurrency": "concurrency",
               "request_rate": "request_rate_per_s", "ttft_slo": "ttft_slo_s", "tpot_slo": "tpot_slo_s"}  # fmt: skip
    workload = {target: options[source] for source, target in mapping.items() if options.get(source) is not None}
    if options.get("closed_loop"):
        workload["closed_loop"] = True
    return workload


def parse_json(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{name}: not JSON ({exc})") from None


def raise_errors(errors: dict) -> None:
    def flatten(prefix: str, value) -> list[str]:
        if isinstance(value, dict):
            return [line for k, v in value.items() for line in flatten(f"{prefix}.{k}" if prefix else str(k), v)]
        if isinstance(value, list) and value and not isinstance(value[0], str):
            return [line for i, v in enumerate(value) for line in flatten(f"{prefix}[{i}]", v)]
        return [f"{prefix}: {' '.join(map(str, value)) if isinstance(value, list) else value}"]

    raise CommandError("; ".join(flatten("", errors)))


def check_doc_block(path, *, command: str) -> None:
    """Before any work: the doc at `path` has a well-formed block for the command (planner/doc_blocks.py), else a CommandError."""
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        doc_blocks.check_doc(path, command=command)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CommandError(f"{path}: {exc}") from None


def write_doc_block(path, *, command: str, text: str) -> str:
    """Write the command's block into the doc at `path`; the line the command prints, or a CommandError."""
    try:
        doc_blocks.write_doc(path, command=command, text=text)
    except (OSError, ValueError) as exc:
        raise CommandError(f"{path}: {exc}") from None
    return f"{path}: the tables of `{command}` written"
