"""Read an uploaded config.json: the API's `config_file`, the plan form's upload and the admin's
import all read it here, so each refuses the same files with the same words."""
from __future__ import annotations

from typing import Any

from django.conf import settings

from inputs import json_limits


class ConfigFileError(ValueError):
    """An upload that is not a usable config.json; str() says why."""


def read_config_file(upload) -> dict[str, Any]:
    """The upload's JSON object, within MAX_CONFIG_UPLOAD_BYTES and the JSON shape limits."""
    limit = settings.MAX_CONFIG_UPLOAD_BYTES
    if upload.size > limit:
        raise ConfigFileError(f"File is {upload.size} bytes; a config.json may be at most {limit} bytes.")
    try:
        config = json_limits.loads(upload.read().decode("utf-8"))
    except json_limits.JSONLimitError as exc:
        raise ConfigFileError(f"Not a config.json: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ConfigFileError(f"Not a JSON file: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigFileError("A config.json must be a JSON object.")
    if json_limits.has_nul(config):
        raise ConfigFileError("A string in it contains a NUL character, which cannot be stored.")
    return config
