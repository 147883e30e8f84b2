from __future__ import annotations

import datetime as dt
import json

from django.core.management.base import BaseCommand
from django.utils import timezone

from hwcatalog.freshness import STALE_AFTER_DAYS, WARN_AFTER_DAYS
from hwcatalog.selectors import price_freshness


class Command(BaseCommand):
    help = ("The catalog's freshness: the age of every price (stale past 180 days, warned on estimates past 18 months), "
            "the sources that are not the provider's own page, and the GPUs and TPUs with no hourly price.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--today", type=dt.date.fromisoformat, default=None, help="the date to age prices from (default: today)")

    def handle(self, *args, as_json: bool, today: dt.date | None, **options):
        report = price_freshness(today=today or timezone.localdate())  # the page's today too
        summary, ages, unpriced = report.summary, [age for _, age in report.rows], report.unpriced
        if as_json:
            rows = [{**a.__dict__, "as_of": a.as_of.isoformat()} for a in ages]
            self.stdout.write(json.dumps({"summary": summary, "offerings": rows}, indent=1))
            return
        self.stdout.write(f"{'offering':52} {'provider':28} {'as of':10} {'age':>6}  flags")
        for a in ages:
            self.stdout.write(f"{a.slug:52} {a.provider[:28]:28} {a.as_of.isoformat():10} {a.age_days:>5}d  {', '.join(a.flags)}")
        self.stdout.write("")
        self.stdout.write(f"{summary['offerings']} offerings from {summary['providers']} providers on {summary['today']}: "
                          f"{summary['stale']} older than {STALE_AFTER_DAYS} days, {summary['needs_warning']} older than "
                          f"{WARN_AFTER_DAYS} days (an estimate that prices with one says so); sources: "
                          + ", ".join(f"{n} {kind}" for kind, n in sorted(summary["by_source_kind"].items())))  # fmt: skip
        self.stdout.write("GPUs and TPUs with no hourly price: " + (", ".join(unpriced) or "none"))
