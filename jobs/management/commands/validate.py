from __future__ import annotations

import json
import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.models import ValidationRun
from jobs.services import validation_run_create
from planner.result_schema import validated_fields
from planner.selectors import plan_find


class Command(BaseCommand):
    help = "Queue a validation trial of a plan's configuration on a worker; --wait follows it to the end."

    def add_arguments(self, parser):
        parser.add_argument("--plan", required=True, help="plan id")
        parser.add_argument("--rank", type=int, default=1)
        parser.add_argument("--trial", choices=ValidationRun.Trial.values, default="decode")
        parser.add_argument(
            "--queue", choices=ValidationRun.Queue.values, default=None,
            help="the worker queue; left out, the row's chip family's queue when a worker serves it (else an error naming the stand-ins)",
        )  # fmt: skip
        parser.add_argument("--params", help='JSON, e.g. {"batch": 1, "prompt_tokens": 32, "decode_steps": 16, "max_layers": 2}')
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait with --wait")

    def handle(self, *args, plan, rank, trial, queue, params, wait, timeout, **options):
        found = plan_find(plan_id=plan)
        if found is None:
            raise CommandError(f"plan: no plan {plan!r}")
        try:
            parsed = json.loads(params) if params else None
            run = validation_run_create(plan=found, rank=rank, trial=trial, queue=queue, params=parsed)
        except json.JSONDecodeError as exc:
            raise CommandError(f"params: not JSON ({exc})") from None
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        stand_in = ", a stand-in for the row's chip" if run.stand_in else ""
        self.stdout.write(f"queued validation run {run.pk} ({trial} of rank {rank} on the {run.queue} queue{stand_in})")
        if not wait:
            return
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            run.refresh_from_db()
            line = f"{run.status} {run.progress_percent:5.1f}% {run.progress_message}"
            if line != last:
                self.stdout.write(line)
                last = line
            if run.finished:
                break
            time.sleep(1.0)
        else:
            raise CommandError(f"run {run.pk} still {run.status} after {timeout:.0f} s")
        if run.status != ValidationRun.Status.SUCCEEDED:
            raise CommandError(f"run {run.pk} {run.status}: {run.failure_reason}")
        self.stdout.write(f"on {run.device_name} (catalog chip {run.matched_chip_slug or 'none'}):")
        for metric in (f.name for f in validated_fields(run.trial)):
            predicted, measured = run.predicted.get(metric), run.measured.get(metric)
            if measured is None:
                continue
            error = run.error_percent.get(metric)
            self.stdout.write(f"  {metric:28} predicted {_fmt(predicted):>12} measured {_fmt(measured):>12}" + (f"  error {error:.1f}%" if error is not None else ""))


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"
