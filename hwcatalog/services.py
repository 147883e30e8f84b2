from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import models, transaction

from hwcatalog.importers.huggingface import ConfigError, fields_from_hf_config
from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
from hwcatalog.references import catalog_row_references

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass
class LoadReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated)

    def summary(self) -> str:
        if not self.changed:
            return f"Catalog already up to date: {len(self.unchanged)} rows unchanged."
        return f"Catalog loaded: {len(self.created)} created, {len(self.updated)} updated, {len(self.unchanged)} unchanged."


# libyaml's loader where PyYAML was built with it (about 10x faster than the pure-Python one; the same safe
# subset of YAML), else the pure-Python one.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PARSED: dict[tuple[str, int, int], Any] = {}  # (path, mtime_ns, size) -> the file's parsed rows


def _parsed(path: Path) -> Any:
    """A data file's rows, parsed once per process while the file is unchanged (each test loads the
    catalog again; the files do not change under it). Callers get their own copy."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        _PARSED[key] = yaml.load(path.read_text(), Loader=_SAFE_LOADER) or []
    return copy.deepcopy(_PARSED[key])


def _read_rows(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    rows = []
    for path in sorted(folder.glob("*.yaml")):
        data = _parsed(path)
        if not isinstance(data, list):
            raise ValidationError(f"{path.name}: expected a list of rows")
        rows.extend((path, row) for row in data)
    return rows


def _values_equal(current: Any, new: Any) -> bool:
    if isinstance(current, float) or isinstance(new, float):
        return current is not None and new is not None and abs(float(current) - float(new)) <= 1e-12 * max(abs(float(new)), 1.0)
    return current == new


def _upsert(model: type[models.Model], slug: str, values: dict[str, Any], report: LoadReport, label: str) -> None:
    instance = model.objects.filter(slug=slug).first()
    if instance is None:
        instance = model(slug=slug, **values)
        instance.full_clean()
        instance._change_reason = "loadcatalog"
        instance.save()
        report.created.append(label)
        return
    changed = [k for k, v in values.items() if not _values_equal(getattr(instance, k), v)]
    if not changed:
        report.unchanged.append(label)
        return
    for key in changed:
        setattr(instance, key, values[key])
    instance.full_clean()
    instance._change_reason = "loadcatalog"
    instance.save()
    report.updated.append(label)


def _normalise(row: dict[str, Any], path: Path) -> dict[str, Any]:
    values = {k: v for k, v in row.items() if k != "slug"}
    if isinstance(values.get("as_of"), str):
        values["as_of"] = dt.date.fromisoformat(values["as_of"])
    for key in ("notes", "memory_type", "instance_name", "region"):
        if key in values and values[key] is None:
            values[key] = ""
    for key, value in values.items():
        if isinstance(value, str) and key.endswith(("_bytes", "_per_s", "_params", "_watts")):
            raise ValidationError(f"{path.name}: {row.get('slug')}.{key} is the string {value!r}, not a number")
    return values


@transaction.atomic
def catalog_load(*, data_dir: Path = DATA_DIR) -> LoadReport:
    """Upsert every chip, model, serving engine and offering of the data files by slug. All or nothing."""
    report = LoadReport()
    for path, row in _read_rows(data_dir / "chips"):
        _upsert(Chip, row["slug"], _normalise(row, path), report, f"chip {row['slug']}")
    for path, row in _read_rows(data_dir / "models"):
        _upsert(ModelArch, row["slug"], _normalise(row, path), report, f"model {row['slug']}")
    for path, row in _read_rows(data_dir / "engines"):
        _upsert(ServingEngine, row["slug"], _normalise(row, path), report, f"serving engine {row['slug']}")
    chips = {c.slug: c for c in Chip.objects.all()}
    for path, row in _read_rows(data_dir / "offerings"):
        values = _normalise(row, path)
        chip_slug = values.pop("chip")
        if chip_slug not in chips:
            raise ValidationError(f"{path.name}: offering {row['slug']} names unknown chip {chip_slug!r}")
        values["chip"] = chips[chip_slug]
        _upsert(Offering, row["slug"], values, report, f"offering {row['slug']}")
    return report


@transaction.atomic
def model_import_hf(
    *, config: dict[str, Any], slug: str, name: str | None = None, family: str | None = None, source: str | None = None,
    hf_id: str = "", quant_config: dict[str, Any] | None = None,
) -> tuple[ModelArch, str]:
    """Create a ModelArch from a Hugging Face config.json (and the checkpoint's hf_quant_config.json,
    if any), recording its Hugging Face id. Raises ValidationError naming the offending field;
    stores nothing on error."""
    if hf_id and ModelArch.objects.filter(hf_id=hf_id).exists():
        raise ValidationError({"hf_id": f"A model with hf_id {hf_id!r} already exists."})
    model, style = model_from_hf_config(config=config, slug=slug, name=name, family=family, source=source, hf_id=hf_id,
                                        quant_config=quant_config)  # fmt: skip
    model.validate_unique()  # the fields were cleaned by model_from_hf_config
    model.save()
    return model, style


def model_from_hf_config(
    *, config: dict[str, Any], slug: str, name: str | None = None, family: str | None = None, source: str | None = None,
    hf_id: str = "", quant_config: dict[str, Any] | None = None,
) -> tuple[ModelArch, str]:
    """An unsaved ModelArch read from a Hugging Face config.json (and hf_quant_config.json), validated field by
    field but not against the stored rows (its slug and hf_id may repeat a catalog model's): model_import_hf
    stores one, `manage.py accuracy` predicts a measured file's model the catalog lacks with one it never stores.
    Raises ValidationError naming the offending field."""
    try:
        imported = fields_from_hf_config(config, quant_config)
    except ConfigError as exc:
        raise ValidationError(exc.errors) from None
    model = ModelArch(
        slug=slug,
        name=name or slug,
        family=family or str(config.get("model_type") or imported.style),
        sources=[source or (f"https://huggingface.co/{hf_id}/blob/main/config.json" if hf_id else "uploaded Hugging Face config.json")],
        hf_id=hf_id,
        as_of=dt.date.today(),
        notes=f"Imported from a {imported.style}-style config.json; parameter counts derived from the shapes.",
        **imported.fields,
    )
    model.full_clean(validate_unique=False)
    return model, imported.style


@transaction.atomic
def chip_create_measured(*, values: dict[str, Any]) -> Chip:
    """A measured device for hardware the catalog lacks (a worker's own CPU), from a probe: its runs and
    their predictions use it, the public chip list and plans never do. Its sources say the values were
    measured, and when."""
    values = {k: v for k, v in values.items() if k in {f.name for f in Chip._meta.concrete_fields}}
    values["vendor"] = values.get("vendor") or "unknown"
    values["memory_type"] = values.get("memory_type") or ""
    if isinstance(values.get("as_of"), str):
        values["as_of"] = dt.date.fromisoformat(values["as_of"][:10])
    values.setdefault("as_of", dt.date.today())
    values["measured"] = True  # a measured device: kept with its runs, out of the public catalog and plans
    chip = Chip(**values)
    chip.full_clean()
    chip.save()
    return chip


# A measured device's figures a probe can raise: each is "achieved, best of a short run", so a probe taken while
# the machine was busy reads low, and the least disturbed one seen is the device's.
PROBED_PEAKS = ("memory_bandwidth_bytes_per_s", "peak_fp32_flops_per_s", "peak_bf16_flops_per_s")


@transaction.atomic
def measured_device_record(*, values: dict[str, Any]) -> Chip:
    """The measured device for a probe (chip_create_measured the first time); an existing one keeps, for each probed
    figure, the higher of what it had and this probe's (a worker probes at every CPU trial: one taken under load
    no longer fixes the device's peaks for good), and its sources say when it was last raised."""
    chip = Chip.objects.select_for_update().filter(slug=values["slug"]).first()
    if chip is None:
        return chip_create_measured(values=values)
    if not chip.measured:  # a catalog row of that name: its sourced figures are never overwritten by a probe
        return chip
    raised = [name for name in PROBED_PEAKS if values.get(name) and values[name] > (getattr(chip, name) or 0.0)]
    if not raised:
        return chip
    for name in raised:
        setattr(chip, name, values[name])
    first = (chip.sources or [""])[0]
    chip.sources = [first, f"raised on {dt.date.today().isoformat()} to a later probe's best ({', '.join(raised)}): {values['sources'][0]}"]
    chip.save(update_fields=[*raised, "sources"])
    return chip


class CatalogRowInUse(Exception):
    """A delete refused because something stored uses the row; the message says what, and what to do."""


@transaction.atomic
def catalog_row_delete(*, row: Chip | ModelArch | Offering) -> None:
    """Delete a chip (with its offerings: the foreign key cascades), a model or an offering, unless
    something stored used it: then CatalogRowInUse, and nothing is deleted."""
    uses = catalog_row_references(row=row)
    if uses:
        cascade = " and its offerings" if isinstance(row, Chip) else ""
        raise CatalogRowInUse(
            f"{row._meta.verbose_name.capitalize()} {row.slug} cannot be deleted: {'; '.join(uses)}. Deleting it{cascade} "
            "would leave those without the rows they were computed from. Correct it with PUT or PATCH instead, "
            "or delete those plans first (DELETE /api/v1/plans/{id}/, by their creator or staff)."
        )
    row.delete()
