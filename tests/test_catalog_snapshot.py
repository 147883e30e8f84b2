"""The tests' `catalog` fixture writes back what `catalog_load` writes, so tests that use it test the real catalog."""
from __future__ import annotations

from hwcatalog.cache import catalog_version_token
from hwcatalog.models import Chip
from hwcatalog.services import catalog_load
from tests.catalog_snapshot import snapshot_models


def test_a_load_over_the_restored_catalog_finds_every_row_unchanged(catalog):
    assert catalog.created and not catalog.updated  # the report of a load into an empty database
    again = catalog_load()
    assert not again.changed and len(again.unchanged) == len(catalog.created)
    for model in snapshot_models():
        assert model.objects.count() > 0, model.__name__
    assert catalog_version_token() != "initial"


def test_rows_saved_after_a_restore_get_keys_of_their_own(catalog):
    chip = Chip.objects.order_by("pk").last()
    history_before = Chip.history.count()
    copy_of_last = Chip.objects.get(pk=chip.pk)
    copy_of_last.pk, copy_of_last.slug = None, f"{chip.slug}-copy"
    copy_of_last.save()  # PostgreSQL: the key sequence must have moved past the restored keys
    assert copy_of_last.pk > chip.pk
    assert Chip.history.count() == history_before + 1
