"""A measured file's models that the catalog lacks, read from the Hugging Face configs shipped beside it.

The silicon layout names each row's checkpoint by its Hugging Face repository (`model_path`) and ships that
checkpoint's `config.json` (and ModelOpt's `hf_quant_config.json` for a pre-quantised one) in a `configs/` folder
beside the CSV, one file per repository with its `/` written `--` (`Qwen--Qwen3-32B_config.json`,
`nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json`; AIConfigurator's `model_configs/` names them so). A repository
the catalog knows (by hf_id or alias) is predicted as the catalog has it; one it does not know is read from its
config with the importer `manage.py importmodel` uses, for this run only: nothing is stored.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.files import File

from hwcatalog.importers.config_file import ConfigFileError, read_config_file
from hwcatalog.models import ModelArch
from hwcatalog.services import model_from_hf_config

CONFIGS_FOLDER = "configs"  # beside a silicon-layout CSV, as shared/reference/silicon/ ships it


@dataclass(frozen=True, kw_only=True)
class ConfigModels:
    """What a configs folder gave: the models read (by Hugging Face repository), the file each came from, and why
    each repository it could not give was left out."""

    models: dict[str, ModelArch]
    files: dict[str, str]
    refused: dict[str, str]


def report_entry(found: ConfigModels, configs_dir: Path) -> dict:
    """What a report says of the configs it read (JSON-ready)."""
    return {"folder": str(configs_dir), "read": found.files, "refused": found.refused}


def report_lines(entry: dict | None) -> list[str]:
    """A text report's lines for report_entry's dict: what was read, and why each refused config was not."""
    if not entry or not (entry["read"] or entry["refused"]):
        return []
    read = ", ".join(f"{path} ({name})" for path, name in entry["read"].items()) or "none"
    lines = [f"checkpoints the catalog lacks, read from {entry['folder']} for this run (not stored): {read}"]
    return lines + [f"  {path}: not read, {reason}" for path, reason in entry["refused"].items()]


def config_files(configs_dir: Path, model_path: str) -> tuple[Path, Path]:
    """The repository's config.json and hf_quant_config.json as the folder names them."""
    stem = model_path.strip().replace("/", "--")
    return configs_dir / f"{stem}_config.json", configs_dir / f"{stem}_hf_quant_config.json"


def _slug(model_path: str, taken: set[str]) -> str:
    """A slug for the run's own copy: the repository, lower case, every other character a hyphen, numbered where
    it would repeat a slug in `taken` (the engine keys its specs by slug)."""
    stem = re.sub(r"[^a-z0-9]+", "-", model_path.lower()).strip("-")[:100] or "model"
    slug, n = stem, 1
    while slug in taken:
        n += 1
        slug = f"{stem}-{n}"
    return slug


def _read(path: Path) -> dict:
    with path.open("rb") as handle:
        return read_config_file(File(handle))


def models_from_configs(model_paths: Iterable[str], configs_dir: Path, *, taken_slugs: Iterable[str] = ()) -> ConfigModels:
    """Each repository in `model_paths` whose config.json is in `configs_dir`, read into an unsaved ModelArch
    (family: the config's model_type; a slug none of `taken_slugs` has). A repository with no config there is not
    named; one whose config cannot be read, or that the importer refuses, is named in `refused` with the reason."""
    taken = set(taken_slugs)
    models: dict[str, ModelArch] = {}
    files: dict[str, str] = {}
    refused: dict[str, str] = {}
    for model_path in sorted(set(model_paths)):
        config_path, quant_path = config_files(configs_dir, model_path)
        if not model_path.strip() or not config_path.is_file():
            continue
        try:
            config = _read(config_path)
            quant = _read(quant_path) if quant_path.is_file() else None
            model, _style = model_from_hf_config(
                config=config, slug=_slug(model_path, taken), name=model_path, hf_id=model_path, quant_config=quant,
                source=f"{config_path.name} beside the measured file (not stored in the catalog)",
            )  # fmt: skip
        except ConfigFileError as exc:
            refused[model_path] = f"{config_path.name}: {exc}"
            continue
        except ValidationError as exc:
            named = exc.message_dict if hasattr(exc, "error_dict") else {"config": exc.messages}
            words = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in named.items())
            refused[model_path] = f"{config_path.name}: {words}"
            continue
        models[model_path] = model
        taken.add(model.slug)
        files[model_path] = config_path.name + (f" + {quant_path.name}" if quant is not None else "")
    return ConfigModels(models=models, files=files, refused=refused)
