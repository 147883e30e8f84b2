from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from hwcatalog.services import model_import_hf
from inputs import json_limits


class Command(BaseCommand):
    help = "Create a catalog model from a Hugging Face config.json."

    def add_arguments(self, parser):
        parser.add_argument("config", type=Path)
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name")
        parser.add_argument("--family")
        parser.add_argument("--source")
        parser.add_argument("--hf-id", default="", help="The Hugging Face repository, e.g. Qwen/Qwen3-32B.")
        parser.add_argument("--quant-config", type=Path, help="The checkpoint's hf_quant_config.json, if it has one.")

    def handle(self, *args, config: Path, slug: str, name, family, source, hf_id, quant_config, **options):
        data = _read_json(config)
        quant = _read_json(quant_config) if quant_config else None
        from hwcatalog.models import ModelArch

        if ModelArch.objects.filter(slug=slug).exists():
            raise CommandError(f"slug: a model {slug!r} already exists")
        try:
            model, style = model_import_hf(
                config=data, slug=slug, name=name, family=family, source=source or (None if hf_id else str(config)), hf_id=hf_id,
                quant_config=quant,
            )  # fmt: skip
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {model.slug} ({style} style): {model.total_params / 1e9:.2f}B parameters, "
                f"{model.kv_cache_bytes_per_token('bf16'):,.0f} KV bytes/token at bf16"
            )
        )


def _read_json(path: Path):
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    if path.stat().st_size > settings.MAX_CONFIG_UPLOAD_BYTES:
        raise CommandError(f"{path}: larger than {settings.MAX_CONFIG_UPLOAD_BYTES} bytes; not a config.json")
    try:
        return json_limits.loads(path.read_text())
    except json_limits.JSONLimitError as exc:
        raise CommandError(f"{path}: not a config.json ({exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path}: not JSON ({exc})") from None
