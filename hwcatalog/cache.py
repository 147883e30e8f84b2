"""A per-process cache of the catalog API's JSON answers (GET list and detail of chips, models and
offerings), keyed by the catalog's version token, the path with its query and the renderer.

A catalog read renders hundreds of field values per page from rows that change rarely; serving
the same bytes again took a read from 4.9 to 2.0 ms of CPU in the load test (docs/benchmarks.md). Every
write to a catalog row changes CatalogVersion's token in its own transaction (the signals below),
and each request reads the token first (one indexed query), so a process never answers from an
older catalog than the one it would read. Authentication, permissions and throttles still run:
only the handler's work is skipped."""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

from django.db.models.signals import post_delete, post_save

from hwcatalog.models import CatalogVersion, Chip, ModelArch, Offering

MAX_ENTRIES = 512  # clients choose the query strings: bounded, least recently used out
MAX_BODY_BYTES = 2_000_000

_entries: OrderedDict[tuple[str, str, str], tuple[bytes, str]] = OrderedDict()
_lock = threading.Lock()


def catalog_version_token() -> str:
    return CatalogVersion.objects.filter(pk=1).values_list("token", flat=True).first() or "initial"


def catalog_version_bump(**_signal_kwargs) -> None:
    CatalogVersion.objects.update_or_create(pk=1, defaults={"token": uuid.uuid4().hex})


def cached_body(key: tuple[str, str, str]) -> tuple[bytes, str] | None:
    with _lock:
        hit = _entries.get(key)
        if hit is not None:
            _entries.move_to_end(key)
        return hit


def cache_body(key: tuple[str, str, str], body: bytes, content_type: str) -> None:
    if len(body) > MAX_BODY_BYTES:
        return
    with _lock:
        _entries[key] = (body, content_type)
        _entries.move_to_end(key)
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)


def cache_clear() -> None:
    global _snapshot
    with _lock:
        _entries.clear()
        _snapshot = None


def connect_signals() -> None:
    for model in (Chip, ModelArch, Offering):
        post_save.connect(catalog_version_bump, sender=model, dispatch_uid=f"catalog-version-save-{model.__name__}")
        post_delete.connect(catalog_version_bump, sender=model, dispatch_uid=f"catalog-version-delete-{model.__name__}")


class CatalogSnapshot:
    """Every chip, model and offering as of one catalog version: a few dozen rows, read in three
    queries when the version changes, then shared by the requests of this process. Rows are
    read-only here; a service that writes reads its own rows from the database."""

    def __init__(self, token: str):
        self.token = token
        self.chips = {chip.slug: chip for chip in Chip.objects.all()}
        self.models = {model.slug: model for model in ModelArch.objects.all()}
        self.offerings_by_chip: dict[str, list[Offering]] = {}
        for offering in Offering.objects.select_related("chip"):  # the model's ordering: chip, pricing model, slug
            self.offerings_by_chip.setdefault(offering.chip.slug, []).append(offering)

    def row(self, model_class, slug: str):
        table = {Chip: self.chips, ModelArch: self.models}.get(model_class)
        return table.get(slug) if table is not None else model_class.objects.filter(slug=slug).first()


_snapshot: CatalogSnapshot | None = None


def catalog_snapshot() -> CatalogSnapshot:
    """The catalog as of its current version (one query to check it)."""
    global _snapshot
    token = catalog_version_token()
    snapshot = _snapshot
    if snapshot is None or snapshot.token != token:
        snapshot = CatalogSnapshot(token)
        with _lock:
            _snapshot = snapshot
    return snapshot
