"""A measured file's models that the catalog lacks, read from the Hugging Face configs shipped beside it.

The silicon layout names each row's checkpoint by its Hugging Face repository (`model_path`) and ships model configs
in a `configs/` folder beside the CSV, one `config.json` per repository with its `/` written `--`
(`Qwen--Qwen3-32B_config.json`) and ModelOpt's `hf_quant_config.json` beside a pre-quantised one
(`nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json`). The folder names a checkpoint's base model as AIConfigurator
does, not always as the rows do: `meta-llama--Meta-Llama-3.1-70B_config.json` serves `meta-llama/Llama-3.1-70B`, and
`meta-llama--Meta-Llama-3.1-8B_config.json` serves `nvidia/Llama-3.1-8B-Instruct-FP8`. So a repository without its own
file takes the one config whose name is its name less its variant words (`-Instruct`, `-FP8`, `-NVFP4`, ...), allowing
one leading word more (`Meta-`), and is refused, naming them, where several are.

A repository the catalog knows (by hf_id or alias) is predicted as the catalog has it; one it does not know is read
from its config with the importer `manage.py importmodel` uses, for this run only: nothing is stored. What the config
does not say, the copy does not have: the catalog's DeepSeek-V3 keeps its attention inputs in 16 bits under NVFP4 (from
NVIDIA's checkpoints' hf_quant_config.json), a bare config.json read at fp4 does not; a copy's family is the config's
model_type (`deepseek_v3`, not the catalog's `DeepSeek`).
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
CONFIG_SUFFIX = "_config.json"
QUANT_SUFFIX = "_hf_quant_config.json"
SILICON_ONLY = "--configs: only a silicon-layout file names its checkpoints by Hugging Face repository"
# A checkpoint's name words that say which variant of a base model it is, not which model.
VARIANT_WORDS = frozenset({"instruct", "chat", "it", "base", "hf", "fp8", "fp4", "nvfp4", "mxfp4", "bf16", "fp16", "int4", "int8",
                           "awq", "gptq", "w4a16", "w8a8", "w4a8", "dynamic", "static", "pertensor"})  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ConfigModels:
    """What a configs folder gave: the models read (by the repository as the file names it), the files each came from,
    why each repository whose config could not be used was left out, and the repositories it has no config for."""

    folder: Path
    models: dict[str, ModelArch]
    files: dict[str, str]
    refused: dict[str, str]
    missing: list[str]

    def reason(self, model_path: str) -> str:
        """Why a repository the catalog does not know has no model from the folder either."""
        if model_path in self.refused:
            return f"its config was refused: {self.refused[model_path]}"
        return f"no {_stem(model_path)}{CONFIG_SUFFIX} (nor one config named as its base model) in {self.folder}"

    def report(self) -> dict:
        """What a report says of the folder (JSON-ready)."""
        return {"folder": str(self.folder), "read": self.files, "refused": self.refused, "missing": self.missing}


def unknown_model_reason(model_path: str, found: ConfigModels | None) -> str:
    """A row's reason when neither the catalog nor a configs folder gives its model (both accuracy commands)."""
    reason = f"model {model_path!r} is not in the catalog (by slug, hf_id or alias)"
    return f"{reason}; {found.reason(model_path)}" if found is not None else reason


def report_lines(entry: dict | None) -> list[str]:
    """A report's lines for ConfigModels.report's dict: what was read, and why each repository was not."""
    if not entry or not (entry["read"] or entry["refused"] or entry["missing"]):
        return []
    read = ", ".join(f"{path} ({name})" for path, name in entry["read"].items()) or "none"
    lines = [f"checkpoints the catalog lacks, read from {entry['folder']} for this run (not stored): {read}"]
    lines += [f"  {path}: not read, {reason}" for path, reason in entry["refused"].items()]
    return lines + [f"  {path}: no config for it in the folder" for path in entry["missing"]]


def configs_folder(csv_path: Path, configs_dir: Path | None) -> Path | None:
    """The folder given, else the configs/ folder beside the CSV where there is one."""
    beside = csv_path.parent / CONFIGS_FOLDER
    return configs_dir if configs_dir is not None else beside if beside.is_dir() else None


def with_config_models(models: dict[str, ModelArch], model_paths: Iterable[str], configs_dir: Path | None
                       ) -> tuple[dict[str, ModelArch], ConfigModels | None]:  # fmt: skip
    """`models` (the catalog's, by every name) with a model read from `configs_dir` for each of `model_paths` it lacks,
    and what the folder gave (None without a folder or with nothing to read)."""
    unknown = {path for path in model_paths if path not in models}
    if configs_dir is None or not unknown:
        return models, None
    found = models_from_configs(unknown, configs_dir, taken_slugs={model.slug for model in models.values()})
    return {**models, **found.models}, found


def _stem(model_path: str) -> str:
    return model_path.strip().replace("/", "--")


def _words(name: str) -> list[str]:
    """The name's words, lower case, the variant words at its end dropped ("Llama-3.1-8B-Instruct-FP8": llama 3 1 8b)."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    while words and words[-1] in VARIANT_WORDS:
        words.pop()
    return words


def _base_config(configs_dir: Path, model_path: str) -> list[Path]:
    """The folder's configs named as the repository's base model: the name's words less its variant words, with at
    most one more word before them."""
    want = _words(model_path.strip().rsplit("/", 1)[-1])
    if not want:
        return []
    found = []
    for path in sorted(configs_dir.glob(f"*{CONFIG_SUFFIX}")):
        if path.name.endswith(QUANT_SUFFIX):
            continue
        have = _words(path.name[: -len(CONFIG_SUFFIX)].split("--")[-1])
        if have[-len(want):] == want and len(have) - len(want) <= 1:
            found.append(path)
    return found


def _slug(model_path: str, taken: set[str]) -> str:
    """A slug for the run's own copy: the repository, lower case, every other character a hyphen, within the slug
    field's length, numbered where it would repeat a slug in `taken` (the engine keys its specs by slug)."""
    limit = ModelArch._meta.get_field("slug").max_length
    stem = re.sub(r"[^a-z0-9]+", "-", model_path.lower()).strip("-")[: limit - 5].strip("-") or "model"
    slug, n = stem, 1
    while slug in taken:
        n += 1
        slug = f"{stem}-{n}"
    return slug


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return read_config_file(File(handle))
    except ConfigFileError as exc:
        raise ConfigFileError(f"{path.name}: {exc}") from None
    except OSError as exc:
        raise ConfigFileError(f"{path.name}: cannot be read ({exc.strerror or exc})") from None


def _files(configs_dir: Path, model_path: str) -> tuple[Path | None, Path | None, str]:
    """The repository's config.json and hf_quant_config.json (None where absent) and how they were found."""
    stem = _stem(model_path)
    config, quant = configs_dir / f"{stem}{CONFIG_SUFFIX}", configs_dir / f"{stem}{QUANT_SUFFIX}"
    if config.exists():
        return config, quant if quant.exists() else None, ""
    named = _base_config(configs_dir, model_path)
    if len(named) > 1:
        raise ConfigFileError(f"several configs are named as its base model: {', '.join(p.name for p in named)}")
    if not named:
        return None, None, ""
    base_quant = configs_dir / (named[0].name[: -len(CONFIG_SUFFIX)] + QUANT_SUFFIX)
    return named[0], quant if quant.exists() else base_quant if base_quant.exists() else None, " (its base model's, by name)"


def models_from_configs(model_paths: Iterable[str], configs_dir: Path, *, taken_slugs: Iterable[str] = ()) -> ConfigModels:
    """Each repository in `model_paths` that the folder has a config for, read into an unsaved ModelArch (family: the
    config's model_type; a slug none of `taken_slugs` has; keyed by the path as given, the files and hf_id by it without
    surrounding spaces). One whose config cannot be read, or that the importer refuses, is in `refused` with the reason
    (naming the file); one the folder has nothing for is in `missing`."""
    taken = set(taken_slugs)
    models: dict[str, ModelArch] = {}
    files: dict[str, str] = {}
    refused: dict[str, str] = {}
    missing: list[str] = []
    for model_path in sorted(set(model_paths)):
        try:
            config_path, quant_path, how = _files(configs_dir, model_path) if model_path.strip() else (None, None, "")
            if config_path is None:
                missing.append(model_path)
                continue
            for path in (config_path, quant_path):
                if path is not None and not path.is_file():
                    raise ConfigFileError(f"{path.name}: not a file")
            config, quant = _read(config_path), _read(quant_path) if quant_path is not None else None
            model, _style = model_from_hf_config(
                config=config, slug=_slug(model_path, taken), name=model_path.strip(), hf_id=model_path.strip(), quant_config=quant,
                source=f"{config_path.name} beside the measured file (not stored in the catalog)",
            )  # fmt: skip
        except ConfigFileError as exc:
            refused[model_path] = str(exc)
            continue
        except OSError as exc:  # a name the file system refuses (too long)
            refused[model_path] = f"its config's file name cannot be looked up ({exc.strerror or exc})"
            continue
        except ValidationError as exc:
            named = exc.message_dict if hasattr(exc, "error_dict") else {"config": exc.messages}
            words = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in named.items())
            refused[model_path] = f"{config_path.name}: {words}"
            continue
        models[model_path] = model
        taken.add(model.slug)
        files[model_path] = config_path.name + (f" + {quant_path.name}" if quant is not None else "") + how
    return ConfigModels(folder=configs_dir, models=models, files=files, refused=refused, missing=missing)
