from __future__ import annotations

import datetime as dt
import json
from collections import Counter

from django.core.management.base import BaseCommand

from hwcatalog.freshness import PRIMARY, STALE_AFTER_DAYS, WARN_AFTER_DAYS, price_age
from hwcatalog.models import Chip, Offering


class Command(BaseCommand):
    help = ("The catalog's freshness: the age of every price (stale past 180 days, warned on estimates past 18 months), "
            "the sources that are not the provider's own page, and the GPUs and TPUs with no hourly price.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--today", type=dt.date.fromisoformat, default=None, help="the date to age prices from (default: today)")

    def handle(self, *args, as_json: bool, today: dt.date | None, **options):
        today = today or dt.date.today()
        ages = sorted(
            (price_age(slug=o.slug, provider=o.provider, as_of=o.as_of, source=o.source, today=today) for o in Offering.objects.all()),
            key=lambda a: -a.age_days,
        )  # fmt: skip
        unpriced = sorted(c.slug for c in Chip.objects.filter(kind__in=("gpu", "tpu")) if not c.offerings.exclude(pricing_model="purchase").exists())
        summary = {
            "offerings": len(ages), "providers": len({a.provider for a in ages}), "stale": sum(a.stale for a in ages),
            "needs_warning": sum(a.needs_warning for a in ages), "by_source_kind": dict(Counter(a.source_kind for a in ages)),
            "gpus_and_tpus_without_an_hourly_price": unpriced, "today": today.isoformat(),
        }  # fmt: skip
        if as_json:
            rows = [{**a.__dict__, "as_of": a.as_of.isoformat()} for a in ages]
            self.stdout.write(json.dumps({"summary": summary, "offerings": rows}, indent=1))
            return
        self.stdout.write(f"{'offering':52} {'provider':28} {'as of':10} {'age':>6}  flags")
        for a in ages:
            flags = [f for f, on in (("STALE", a.stale), ("WARNED ON ESTIMATES", a.needs_warning)) if on]
            if a.source_kind != PRIMARY:
                flags.append(a.source_kind)
            self.stdout.write(f"{a.slug:52} {a.provider[:28]:28} {a.as_of.isoformat():10} {a.age_days:>5}d  {', '.join(flags)}")
        self.stdout.write("")
        self.stdout.write(f"{summary['offerings']} offerings from {summary['providers']} providers on {summary['today']}: "
                          f"{summary['stale']} older than {STALE_AFTER_DAYS} days, {summary['needs_warning']} older than "
                          f"{WARN_AFTER_DAYS} days (an estimate that prices with one says so); sources: "
                          + ", ".join(f"{n} {kind}" for kind, n in sorted(summary["by_source_kind"].items())))  # fmt: skip
        self.stdout.write("GPUs and TPUs with no hourly price: " + (", ".join(unpriced) or "none"))
