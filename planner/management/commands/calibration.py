from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from planner.calibrations import calibration_rollback
from planner.models import Calibration


class Command(BaseCommand):
    help = "List the calibration versions of a chip, serving engine and dtype, or roll back to an earlier one."

    def add_arguments(self, parser):
        parser.add_argument("--chip", required=True)
        parser.add_argument("--dtype", required=True)
        parser.add_argument("--engine", default="", help="the serving engine the runs were measured under (default: the planner's own trials)")
        parser.add_argument("--rollback", type=int, metavar="VERSION", help="make VERSION the one in use")

    def handle(self, *args, chip: str, dtype: str, engine: str, rollback: int | None, **options):
        from planner.calibrations import catalog_engine_name

        try:
            engine = catalog_engine_name(engine)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        label = f"{chip}{'@' + engine if engine else ''}/{dtype}"
        if rollback is not None:
            try:
                row = calibration_rollback(chip_slug=chip, weight_dtype=dtype, to_version=rollback, serving_engine=engine)
            except Calibration.DoesNotExist:
                raise CommandError(f"no calibration v{rollback} for {label}") from None
            self.stdout.write(self.style.SUCCESS(f"{label} now uses {row.label}"))
        rows = Calibration.objects.filter(chip_slug=chip, serving_engine=engine, weight_dtype=dtype).order_by("-version")
        if not rows:
            raise CommandError(f"no calibration for {label}: estimates use the spec defaults (or the engine's fitted profile)")
        for row in rows:
            self.stdout.write(
                f"v{row.version} {'active' if row.active else 'inactive':8} compute {row.compute_fraction:.3f} bandwidth {row.bandwidth_fraction:.3f} "
                f"overhead {row.step_overhead_s * 1e3:.3f} ms  {row.run_count} runs  {row.created_at:%Y-%m-%d %H:%M}"
            )
