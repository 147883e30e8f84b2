"""The README's and docs/api.md's examples, computed by the live code against the loaded catalog.

Each documented example sits between `<!-- example:NAME -->` and `<!-- /example -->` in a doc; this
command runs every one (the same serializers and services as the API) and, with --write, rewrites
those blocks; without it, it fails when a doc differs from what the code answers now (the test
tests/test_doc_examples.py runs it so against the test catalog). Excerpts hold no ids, dates or
timings, so the output depends on the catalog and the code only. The examples are computed at spec
defaults: any stored calibration is set aside in a transaction that is rolled back, and nothing is stored."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from planner.fleet_serializers import FleetInputSerializer
from planner.fleet_services import fleet_compute, fleet_prepare
from planner.management.commands.fleet import format_fleet
from planner.management.commands.plan import format_plan
from planner.models import Calibration
from planner.serializers import EstimateInputSerializer, PlanInputSerializer
from planner.services import estimate_compute, plan_search_prepare, plan_search_run

DOCS = ("README.md", "docs/api.md", "docs/fleet.md")
MARKER = re.compile(r"(<!-- example:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
REGENERATE = ".venv/bin/python manage.py docexamples --write"
API = "http://127.0.0.1:8000/api/v1"


def significant(value: Any, digits: int = 4) -> Any:
    """Floats to `digits` significant figures, recursively (an excerpt, not the full precision)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: significant(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [significant(v, digits) for v in value]
    return value


def pick(source: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The keys of `source` that it has, in this order (a field the answer lacks is left out)."""
    return {k: source[k] for k in keys if k in source}


def json_excerpt(value: dict[str, Any], *, width: int = 128) -> str:
    """A dict as compact JSON: top-level items packed into lines of at most `width`, a nested dict on its
    own line(s), its items packed the same way and aligned under its brace."""

    def items(d: dict[str, Any], indent: int) -> str:
        lines, line = [], ""
        for k, v in d.items():
            if isinstance(v, dict):
                key = f"{json.dumps(k)}: "
                item = key + "{" + items(v, indent + len(key) + 1) + "}"
            else:
                item = f"{json.dumps(k)}: {json.dumps(v)}"
            multiline = "\n" in item
            if line and (multiline or len(line) + len(item) + 2 > width - indent):
                lines.append(line + ",")
                line = ""
            line = f"{line}, {item}" if line else item
            if multiline:
                lines.append(line + ",")
                line = ""
        if line:
            lines.append(line)
        else:
            lines[-1] = lines[-1].rstrip(",")
        return ("\n" + " " * indent).join(lines)

    return "{" + items(value, 1) + "}"


def curl(path: str, body: dict[str, Any], *, token: bool = False) -> str:
    auth = ' -H "Authorization: Token $TOKEN"' if token else ""
    lines = [f"curl -s -X POST {API}/{path}{auth} -H 'Content-Type: application/json' -d '{{"]
    fields = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in body.items()]
    line = " "
    for i, field in enumerate(fields):
        item = field + ("," if i < len(fields) - 1 else "}'")
        if len(line) + len(item) > 120 and line.strip():
            lines.append(line.rstrip())
            line = " "
        line += " " + item
    lines.append(line.rstrip())
    return "\n".join(lines)


def fenced(kind: str, text: str) -> str:
    return f"```{kind}\n{text}\n```\n"


def run_estimate(body: dict[str, Any]) -> dict[str, Any]:
    serializer = EstimateInputSerializer(data=body)
    if not serializer.is_valid():
        raise CommandError(f"the documented estimate {body} is no longer valid: {serializer.errors}")
    return estimate_compute(data=serializer.validated_data)


def estimate_errors(body: dict[str, Any]) -> dict[str, Any]:
    serializer = EstimateInputSerializer(data=body)
    if serializer.is_valid():
        raise CommandError(f"the documented bad estimate {body} is now accepted")
    return json.loads(json.dumps(serializer.errors))


_plans: dict[str, SimpleNamespace] = {}  # one search per documented plan per run (rendered_docs clears it)


def run_plan(body: dict[str, Any]) -> SimpleNamespace:
    """The plan POST /api/v1/plans/ would store, searched here and not stored."""
    key = json.dumps(body, sort_keys=True)
    if key not in _plans:
        _plans[key] = _search(body)
    return _plans[key]


def _search(body: dict[str, Any]) -> SimpleNamespace:
    serializer = PlanInputSerializer(data=body)
    if not serializer.is_valid():
        raise CommandError(f"the documented plan {body} is no longer valid: {serializer.errors}")
    data = serializer.validated_data
    outcome = plan_search_run(plan_search_prepare(data=data), data=data)
    return SimpleNamespace(id="<id>", name=data.get("name", ""), model_slug=data["model"].slug, **outcome)  # as a stored plan reads


ESTIMATE_KEYS = (
    "chip_slug", "chip_count", "tensor_parallel", "pipeline_parallel", "replicas", "weight_dtype", "kv_dtype", "compute_dtype",
    "batch", "feasible", "ttft_s", "tpot_s", "tokens_per_s_per_user", "output_tokens_per_s_total", "mfu", "mbu",
    "energy_per_output_token_j", "efficiency_source",
)  # fmt: skip
COST_KEYS = (
    "offering_slug", "ownership", "pricing_model", "usd_per_chip_hour", "billed_chips", "usd_per_hour", "usd_per_month",
    "usd_per_million_output_tokens", "usd_per_million_input_tokens",
)  # fmt: skip
ROW_KEYS = (
    "chip_slug", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "batch", "serving_engine", "ttft_s", "tpot_s",
    "output_tokens_per_s_total", "usd_per_million_output_tokens", "offering", "provider", "ownership", "pricing_model",
    "usd_per_chip_hour", "billed_chips", "usd_per_hour", "usd_per_month", "efficiency_source",
)  # fmt: skip


def estimate_excerpt(e: dict[str, Any], *, keys: tuple[str, ...] = ESTIMATE_KEYS) -> dict[str, Any]:
    out = pick(e, keys)
    if not e["feasible"]:
        out["reasons"] = e["reasons"]
    out["decode"] = pick(e["decode"], ("bound", "intensity_flop_per_byte", "ridge_flop_per_byte", "time_s"))
    out["memory"] = pick(e["memory"], ("weights_bytes_per_chip", "kv_bytes_per_chip", "max_concurrency"))
    if e.get("cost"):
        out["cost"] = pick(e["cost"], COST_KEYS)
    return significant(out)


# -- the examples ---------------------------------------------------------------------------------------

README_ESTIMATE = {
    "model": "llama-3.1-70b", "chip": "nvidia-h200-sxm", "chip_count": 8, "weight_dtype": "fp8",
    "prompt_tokens": 1000, "output_tokens": 300, "batch": "max", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05,
}  # fmt: skip
README_PLAN = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 200, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
    "hardware": {"ownership": "rent"},
}
LPU_ESTIMATE = {"model": "llama-3.1-70b", "chip": "groq-lpu", "chip_count": 576, "prompt_tokens": 1000, "output_tokens": 300}
BAD_ESTIMATE = {"model": "llama-3.1-70b", "chip": "nvidia-h100-sxm", "chip_count": 8, "tensor_parallel": 3, "prompt_tokens": 1000,
                "output_tokens": 300}  # fmt: skip


def readme_estimate() -> str:
    e = run_estimate(README_ESTIMATE)
    return (
        fenced("sh", curl("estimates/", README_ESTIMATE))
        + "An excerpt of the answer (the full one also has the prefill phase, every offering's price in `costs`,\n"
        "`intervals`, warnings and reasons; `cost` is the cheapest offering):\n"
        + fenced("json", json_excerpt(estimate_excerpt(e)))
    )


def readme_plan() -> str:
    plan = run_plan(README_PLAN)
    lines = format_plan(plan, top=3).splitlines()[1:]  # the first line has the plan's id and the search's time
    if "infeasible:" in lines:  # the three biggest groups of infeasible candidates, their examples cut short
        cut = lines.index("infeasible:")
        lines = lines[:cut] + [line if len(line) <= 130 else line[:126] + " ..." for line in lines[cut : cut + 4]]
    groups = plan.results["infeasible"]
    return (
        "```sh\nTOKEN=$(.venv/bin/python manage.py createtoken alice)\n" + curl("plans/", README_PLAN, token=True) + "\n```\n"
        + f"The stored plan has `candidate_count` {plan.candidate_count:,} and `feasible_count` {plan.feasible_count:,}"
        + (f" ({len(groups)} groups of infeasible ones)" if groups else "")
        + ";\n`results.ranked` starts (as `manage.py plan` prints it):\n"
        + fenced("", "\n".join(lines))
    )


def api_lpu_estimate() -> str:
    e = run_estimate(LPU_ESTIMATE)
    keys = ("chip_slug", "chip_count", "tensor_parallel", "pipeline_parallel", "replicas", "weight_dtype", "batch", "feasible", "fits")
    return fenced("sh", curl("estimates/", LPU_ESTIMATE)) + "answers (an excerpt):\n" + fenced("json", json_excerpt(significant(
        {**pick(e, keys), "reasons": e["reasons"], "memory": pick(e["memory"], ("weights_bytes_per_chip", "usable_bytes_per_chip"))}
    )))  # fmt: skip


LOOP_ESTIMATE = {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "serving_engine": "vLLM", "prompt_tokens": 8000, "output_tokens": 1000,
                 "concurrency": 256, "closed_loop": True}  # fmt: skip
RATE_ESTIMATE = {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "serving_engine": "vLLM", "prompt_tokens": 1000, "output_tokens": 300,
                 "batch": 8, "request_rate_per_s": 0.5}  # fmt: skip


def api_loop_estimate() -> str:
    e = run_estimate(LOOP_ESTIMATE)
    keys = ("batch", "feasible", "ttft_s", "queue_wait_s", "tpot_s", "output_tokens_per_s_total")
    said = [w for w in e["warnings"] if "clients' requests at once" in w]
    return fenced("sh", curl("estimates/", LOOP_ESTIMATE)) + "answers (an excerpt):\n" + fenced("json", json_excerpt(significant(
        {**pick(e, keys), "memory": pick(e["memory"], ("max_concurrency",)), "warnings": said}
    )))  # fmt: skip


def api_rate_estimate() -> str:
    e = run_estimate(RATE_ESTIMATE)
    keys = ("batch", "ttft_s", "tpot_s", "output_tokens_per_s_total", "served_output_tokens_per_s", "energy_per_output_token_j")
    excerpt = {**pick(e, keys), "cost": pick(e["cost"] or {}, ("offering_slug", "usd_per_hour", "usd_per_million_output_tokens"))}
    return fenced("sh", curl("estimates/", RATE_ESTIMATE)) + "answers (an excerpt):\n" + fenced("json", json_excerpt(significant(excerpt)))


def api_bad_estimate() -> str:
    errors = json.dumps(estimate_errors(BAD_ESTIMATE))
    return fenced("sh", curl("estimates/", BAD_ESTIMATE)) + "is a 400 naming the field:\n" + fenced("json", errors)


def api_plan_row() -> str:
    plan = run_plan(README_PLAN)
    row = plan.results["ranked"][0]
    excerpt = {**pick(row, ROW_KEYS), "decode": pick(row.get("decode", {}), ("bound", "time_s"))}
    return (
        f"The first row of `results.ranked` for the README's plan (`{README_PLAN['model']}`, concurrency "
        f"{README_PLAN['workload']['concurrency']}, rented hardware), an excerpt:\n" + fenced("json", json_excerpt(significant(excerpt)))
    )


FLEET_CHAT = {"name": "chat", "prompt_tokens": 1000, "output_tokens": 250, "requests_per_s": 20, "ttft_slo_s": 1.0, "tpot_slo_s": 0.05}
FLEET_RAG = {"name": "rag", "prompt_tokens": 8000, "output_tokens": 400, "requests_per_s": 5, "ttft_slo_s": 3.0, "tpot_slo_s": 0.08}
FLEET_BATCH = {"name": "batch", "prompt_tokens": 2000, "output_tokens": 800, "requests_per_s": 2, "interruptible": True}
# One serving engine: with every engine's profile competing, a class's replicas can tie on cost across engines
# (the same offering, the same price), and the solver may return either.
FLEET_MIX = {"model": "llama-3.1-70b", "classes": [FLEET_CHAT, FLEET_RAG, FLEET_BATCH], "limits": {"wall_kw_max": 60, "apply_to": "all"},
             "serving_engine": "vLLM"}  # fmt: skip
FLEET_GROWTH = {
    "model": "llama-3.1-70b", "classes": [FLEET_CHAT, FLEET_RAG], "hardware": {"kinds": ["gpu"], "max_chips": 16}, "serving_engine": "vLLM",
    "horizon": {"months": 6, "monthly_growth": 0.25, "hourly_shape": [0.3, 0.3, 0.6, 1.0, 1.0, 0.6]},
}  # fmt: skip


def _fleet_command(body: dict[str, Any]) -> str:
    args = [f"--model {body['model']}"]
    for c in body["classes"]:
        slos = [str(c[k]) for k in ("ttft_slo_s", "tpot_slo_s") if k in c]
        args.append(f"--class {':'.join([c['name'], str(c['prompt_tokens']), str(c['output_tokens']), str(c['requests_per_s']), *slos])}")
    args += [f"--interruptible {c['name']}" for c in body["classes"] if c.get("interruptible")]
    if body.get("serving_engine"):
        args.append(f"--serving-engine {body['serving_engine']}")
    for key in ("hardware", "limits", "horizon"):
        if key in body:
            args.append(f"--{key} '{json.dumps(body[key])}'")
    return ".venv/bin/python manage.py fleet " + " \\\n    ".join(args)


def run_fleet(body: dict[str, Any]) -> SimpleNamespace:
    """The fleet POST /api/v1/fleets/ would store, planned here and not stored."""
    serializer = FleetInputSerializer(data=body)
    if not serializer.is_valid():
        raise CommandError(f"the documented fleet {body} is no longer valid: {serializer.errors}")
    outcome = fleet_compute(fleet_prepare(data=serializer.validated_data))
    return SimpleNamespace(id="<id>", model_slug=serializer.validated_data["model"].slug, **outcome)


def _fleet_example(body: dict[str, Any], note: str) -> str:
    fleet = run_fleet(body)
    lines = format_fleet(fleet).splitlines()
    lines[0] = lines[0].split(";")[0]  # the solver's time varies by machine
    return fenced("sh", _fleet_command(body)) + note + ":\n" + fenced("", "\n".join(lines))


def fleet_mix() -> str:
    return _fleet_example(FLEET_MIX, "prints")


def fleet_growth() -> str:
    return _fleet_example(FLEET_GROWTH, "prints (replicas per month, at the day's peak)")


@dataclass(frozen=True)
class Example:
    name: str
    doc: str
    render: Callable[[], str]


EXAMPLES = (
    Example("estimate", "README.md", readme_estimate),
    Example("plan", "README.md", readme_plan),
    Example("estimate-lpu", "docs/api.md", api_lpu_estimate),
    Example("estimate-closed-loop", "docs/api.md", api_loop_estimate),
    Example("estimate-rate", "docs/api.md", api_rate_estimate),
    Example("estimate-error", "docs/api.md", api_bad_estimate),
    Example("plan-row", "docs/api.md", api_plan_row),
    Example("fleet", "docs/fleet.md", fleet_mix),
    Example("fleet-growth", "docs/fleet.md", fleet_growth),
)


@contextmanager
def spec_defaults():
    """Every stored calibration set aside, in a transaction rolled back at the end: the examples are the
    same on any database with the same catalog, and nothing is stored."""
    with transaction.atomic():
        Calibration.objects.filter(active=True).update(active=False)
        try:
            yield
        finally:
            transaction.set_rollback(True)


def rendered_docs(root: Path) -> dict[str, tuple[str, str]]:
    """{doc: (text now, text with every example block as the code answers it now)}."""
    _plans.clear()
    with spec_defaults():
        blocks = {ex.name: ex.render() for ex in EXAMPLES}
    out = {}
    for doc in DOCS:
        text = (root / doc).read_text()
        names = {m.group("name") for m in MARKER.finditer(text)}
        expected = {ex.name for ex in EXAMPLES if ex.doc == doc}
        if names != expected:
            raise CommandError(f"{doc}: example markers {sorted(names)}, expected {sorted(expected)} (docexamples.EXAMPLES)")
        new = MARKER.sub(lambda m: m.group(1) + blocks[m.group("name")] + m.group(4), text)
        out[doc] = (text, new)
    return out


class Command(BaseCommand):
    help = "Run the examples of README.md, docs/api.md and docs/fleet.md against the loaded catalog; --write rewrites them, else fail if they differ."

    def add_arguments(self, parser):
        parser.add_argument("--write", action="store_true", help=f"rewrite the example blocks in {', '.join(DOCS)}")

    def handle(self, *args, **options):
        root = Path(settings.BASE_DIR)
        stale = []
        for doc, (text, new) in rendered_docs(root).items():
            if text == new:
                continue
            if options["write"]:
                (root / doc).write_text(new)
                self.stdout.write(f"{doc}: examples rewritten")
            else:
                stale.append(doc)
                diff = difflib.unified_diff(text.splitlines(True), new.splitlines(True), f"{doc} (now)", f"{doc} (the code's)")
                self.stdout.write("".join(diff))
        if stale:
            raise CommandError(f"{', '.join(stale)}: the examples differ from what the code answers; regenerate them with `{REGENERATE}`")
        if not options["write"]:
            self.stdout.write(f"the examples in {', '.join(DOCS)} match the code")
