"""What else uses a catalog row, so that deleting it can be refused while something does.

The catalog is the ground floor: it imports no app above it. An app that stores references to catalog
rows (the planner's plans) registers a finder here from its AppConfig.ready; a finder takes a row and
says, in words, what uses it ("3 stored plans used chip x, the newest ..."), or nothing."""
from __future__ import annotations

from collections.abc import Callable

from django.db import models

ReferenceFinder = Callable[[models.Model], list[str]]
_finders: list[ReferenceFinder] = []


def reference_finder_register(finder: ReferenceFinder) -> None:
    if finder not in _finders:
        _finders.append(finder)


def catalog_row_references(*, row: models.Model) -> list[str]:
    """Everything registered finders say uses `row`; empty when nothing does."""
    return [reference for finder in _finders for reference in finder(row)]
