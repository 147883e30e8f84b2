"""How old each price is and where it was read (`manage.py catalogreport`; the estimate's stale-price warning).

A price is **stale** past STALE_AFTER_DAYS (180) and **too old to use without a warning** past
WARN_AFTER_DAYS (18 months). Its source is **primary** when it is the provider's own page and was read there,
a **copy of the primary** when it names the provider's page but was read from a copy of it (a repository
that transcribed it, a catalog built from the provider's price list), and **third-party** otherwise (a blog,
a news report, an aggregator).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

STALE_AFTER_DAYS = 180
WARN_AFTER_DAYS = 548  # 18 months

# The provider's own domains (its pricing pages and docs).
PROVIDER_DOMAINS = {
    "AWS": ("aws.amazon.com",),
    "Azure": ("azure.microsoft.com", "learn.microsoft.com"),
    "Google Cloud": ("cloud.google.com",),
    "Akash Network": ("akash.network",),
    "Lambda": ("lambda.ai", "lambdalabs.com"),
    "CoreWeave": ("coreweave.com",),
    "Crusoe": ("crusoe.ai",),
    "Hugging Face Inference Endpoints": ("huggingface.co",),
    "Hyperstack": ("hyperstack.cloud",),
    "Nebius": ("nebius.com",),
    "Oracle Cloud (OCI)": ("oracle.com",),
    "RunPod": ("runpod.io",),
    "Spheron": ("spheron.network",),
    "TensorWave": ("tensorwave.com",),
    "Vultr": ("vultr.com",),
    "vendor list price (Apple)": ("apple.com",),
    "vendor list price (Intel)": ("intel.com",),
}
# Words a source uses when it was read from a copy of the provider's page rather than on it.
COPY_MARKERS = re.compile(r"\b(transcribed|via|read in|copy|derived|as retrieved|catalog)\b", re.IGNORECASE)
_DOMAIN = re.compile(r"https?://(?:www\.)?([^/\s)]+)")

PRIMARY, COPY, THIRD_PARTY = "primary", "copy of the primary", "third-party"


@dataclass(frozen=True, kw_only=True)
class PriceAge:
    slug: str
    provider: str
    as_of: dt.date
    age_days: int
    stale: bool  # past STALE_AFTER_DAYS
    needs_warning: bool  # past WARN_AFTER_DAYS
    source_kind: str  # PRIMARY, COPY or THIRD_PARTY

    @property
    def flags(self) -> list[str]:
        """What a reader should know of the price, in words: STALE, WARNED ON ESTIMATES and a source that
        is not the provider's own page."""
        flags = [flag for flag, on in (("STALE", self.stale), ("WARNED ON ESTIMATES", self.needs_warning)) if on]
        return flags + ([self.source_kind] if self.source_kind != PRIMARY else [])


def source_kind(provider: str, source: str) -> str:
    found = _DOMAIN.search(source or "")
    domain = found.group(1).lower() if found else ""
    own = any(domain == d or domain.endswith("." + d) for d in PROVIDER_DOMAINS.get(provider, ()))
    if not own:
        return THIRD_PARTY
    return COPY if COPY_MARKERS.search(source[found.end():]) else PRIMARY


def price_age(*, slug: str, provider: str, as_of: dt.date, source: str, today: dt.date) -> PriceAge:
    age = (today - as_of).days
    return PriceAge(slug=slug, provider=provider, as_of=as_of, age_days=age, stale=age > STALE_AFTER_DAYS,
                    needs_warning=age > WARN_AFTER_DAYS, source_kind=source_kind(provider, source))  # fmt: skip


def stale_price_warning(*, offering_slug: str, as_of: dt.date, today: dt.date) -> str | None:
    """The estimate's warning for a price older than WARN_AFTER_DAYS, else None."""
    age = (today - as_of).days
    if age <= WARN_AFTER_DAYS:
        return None
    return f"the price of {offering_slug} is dated {as_of.isoformat()}, {age // 30} months ago: check it before buying on it"
